"""The ``bash.execute`` tool: checks its arguments, runs the shell, shapes the result."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from entropic_mcp import AccessLevel, CallContext, ToolBase, ToolError, ToolResult, load_tool_definition, toolkit
from entropic_mcp.storage import StateStore
from entropic_mcp.toolkit.paths import ResolvedPath, confine, is_within

from ._render import as_text, wants_json
from ._runs import shared_store, store_of

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ._output import OutputBuffer
    from ._server import BashServer, Prepared

#: The smallest pipeline cap the output is fitted into; below it the pipeline's own cut applies.
MIN_CAP = 1024
#: Seconds kept back from the pipeline's own deadline so the tool's kill and reply land first.
DEADLINE_MARGIN = 0.5


class ExecuteTool(ToolBase):
    """Runs one command line in a new process group; see docs/plugins/bash.md."""

    definition = load_tool_definition(__package__, "execute")
    required_access_level = AccessLevel.WRITE
    destructive = True
    idempotent = False
    open_world = True

    def __init__(self, server: BashServer) -> None:
        super().__init__()
        self.server = server

    async def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        # Imported here: listing tools (every start-up) never pays for asyncio and subprocess.
        import asyncio

        from ._process import ShellRun

        settings = self.server.settings
        # The toolkit refuses non-strings, NUL bytes and lone surrogates; blank is refused here,
        # with an example of what to send.
        command = toolkit.text(args, "command", required=True, allow_empty=True)
        if not command.strip():
            raise ToolError("invalid_args", "'command' must be a non-empty shell command line, e.g. \"ls -la\"")
        # A line the permission check found broken (bash -n) is answered, never run: bash runs a
        # script line by line, and the lines before the error were not judged one by one.
        broken = self.server.syntax.known(command, settings.shell)
        if broken is not None:
            raise ToolError("syntax_error", broken)
        background = toolkit.flag(args, "run_in_background")
        as_json = wants_json(args)
        timeout = self._timeout(toolkit.number(args, "timeout_seconds"), ctx, background=background)
        # The conversation's directory is looked up once per call: the run's default and the
        # footer's ``cwd`` when the command does not move.
        raw_dir = toolkit.text(args, "working_dir")
        # The environment and directory the permission check judged the command in (None: called
        # without the pipeline): the run uses them, so it neither works them out again nor runs
        # somewhere a link flipped since points to.
        prepared: Prepared | None = ctx.prepared_for(args)
        base_env = settings.environment() if prepared is None else prepared.env
        store = store_of(ctx) if settings.persist_cwd else None
        current: Path | None = None
        if settings.persist_cwd:
            current, moved = self.server.runs.lookup(ctx.conversation_id, self.server.root, store)
            if moved and raw_dir is None:
                self._check_writes_in(current, command, base_env)
        cwd = self._working_dir(raw_dir, ctx, current, None if prepared is None else prepared.working_dir)
        # A hostile repository's config must not make an allowed ``git status`` run its programs.
        env = self.server.git_overrides.environment(base_env, dict.fromkeys([cwd, self.server.root]))
        if background:
            shared = shared_store(ctx)
            if shared is not None:  # a few store round trips: not on the event loop
                started = await asyncio.to_thread(
                    self._start_background, command, cwd, env, timeout, ctx, as_json=as_json, store=shared
                )
            else:
                started = self._start_background(command, cwd, env, timeout, ctx, as_json=as_json)
            if not ctx.as_task:
                return started
            # The caller holds an MCP task handle: the call follows the run to its end (_follow).
            from ._follow import follow

            return await follow(self.server, started, ctx, shared, as_json=as_json, margin=DEADLINE_MARGIN)
        # Only bash's cd, pushd and popd change its directory; a command that names none of them
        # cannot move (a computed one, ``eval "c""d" x``, is not followed), and skipping the
        # trailer saves a third of a trivial call.
        trailer = (
            self.server.cwd_trailer(env)
            if settings.persist_cwd and ("cd" in command or "pushd" in command or "popd" in command)
            else None
        )
        process = ShellRun(
            [settings.shell, "-c", command],
            cwd=cwd,
            env=env,
            timeout=timeout,
            max_output_bytes=settings.max_output_bytes,
            grace=self.server.grace,
            progress=ctx.report_progress if ctx.progress is not None else None,
            cancelled=ctx.cancelled,
        )
        try:
            done = await process.run()
        except asyncio.CancelledError:
            # Half the cap: the pipeline wraps the partial output in its own timeout message.
            ctx.partial = process.buffer.text(_result_cap(ctx) // 2 or None) or None
            raise
        finally:
            where = trailer.finish() if trailer is not None else None
        extra = self._follow_cwd(where, ctx, current, store) if current is not None else {}
        if done.timed_out:
            message = (
                f"The command did not finish within {timeout:g} s; it was stopped with all its processes. "
                "The output printed so far is included. Run it with a larger timeout_seconds "
                f"(at most {settings.max_timeout_seconds:g}), in smaller steps, or with run_in_background=true."
            )
            return self._result(
                {"error": "timeout", "message": message, "timeout_seconds": timeout, "elapsed_ms": done.elapsed_ms},
                done.output,
                ctx,
                error=True,
            )
        if done.cancelled:
            message = (
                "The command was cancelled and stopped with all its processes; the output printed so far is included."
            )
            return self._result(
                {"error": "cancelled", "message": message, "elapsed_ms": done.elapsed_ms}, done.output, ctx, error=True
            )
        return self._result(
            {"exit_code": done.exit_code, "elapsed_ms": done.elapsed_ms, **extra}, done.output, ctx, as_json=as_json
        )

    def _check_writes_in(self, cwd: Path, command: str, base_env: Mapping[str, str]) -> None:
        """Refuse a command whose file writes depend on a directory the permission check did not know.

        Another worker moved the conversation to ``cwd`` (the shared store says so); this process's
        check resolved relative redirections in the directories it knew. A command whose writes
        come out the same from the root runs; otherwise it is sent again, and checked in ``cwd``.
        """
        import os

        from ._patterns import permission_parts

        root = self.server.root
        settings = self.server.settings
        env = base_env or os.environ

        def writes(where: Path) -> set[Any]:
            return {
                part
                for part in permission_parts(command, cwd=where, root=root, env=env, policy=settings.path_policy)
                if part.access == "write"
            }

        if not writes(cwd) <= writes(root):
            where = cwd.relative_to(root).as_posix()
            raise ToolError(
                "cwd_changed",
                f"this conversation's working directory is {where!r}, set by a call another server process ran; "
                "the command writes files relative to it, which were not checked there. Nothing was run: send "
                f"the same call again (it is checked in {where!r} now), or pass working_dir.",
            )

    def _follow_cwd(
        self, where: Path | None, ctx: CallContext, current: Path, store: StateStore | None
    ) -> dict[str, Any]:
        """Keep the directory the shell ended in for the conversation's next call (inside the root only).

        ``current`` is the conversation's directory before the run, kept when the shell did not say.
        """
        root = self.server.root
        runs = self.server.runs
        extra: dict[str, Any] = {}
        if where is not None:
            if is_within(where, root) and where.is_dir():
                current = where
            else:
                current = root
                extra["note"] = (
                    f"the command ended in {where}, outside the project; the next command runs in the project root"
                )
            runs.set_cwd(ctx.conversation_id, current, root, store)
        if current != root:
            extra["cwd"] = current.relative_to(root).as_posix()
        return extra

    def _start_background(
        self,
        command: str,
        cwd: Path,
        env: dict[str, str],
        timeout: float,
        ctx: CallContext,
        *,
        as_json: bool,
        store: StateStore | None = None,
    ) -> ToolResult:
        settings = self.server.settings
        try:
            run = self.server.runs.start(
                ctx.conversation_id,
                settings.max_background_runs,
                store,
                argv=[settings.shell, "-c", command],
                command=command,
                cwd=cwd,
                env=env,
                timeout=timeout,
                max_unread_bytes=settings.max_output_bytes,
                grace=self.server.grace,
            )
        except OSError as exc:
            raise ToolError(
                "shell_unavailable",
                f"the shell {settings.shell!r} could not be started in {cwd} ({exc.strerror}); "
                "use another working_dir or ask the operator",
            ) from None
        data = {
            "run_id": run.run_id,
            "status": "running",
            "timeout_seconds": timeout,
            "message": (
                f'Started in the background. Read its new output with bash.output {{"run_id": "{run.run_id}"}}; '
                "stop it with bash.kill. It is stopped when this conversation ends."
            ),
        }
        if as_json:
            return ToolResult(text=orjson.dumps(data).decode(), structured=data)
        return ToolResult(text=f"[run {run.run_id}: running, timeout {timeout:g} s] {data['message']}", structured=data)

    def _result(
        self,
        data: dict[str, Any],
        output: OutputBuffer,
        ctx: CallContext,
        *,
        error: bool = False,
        as_json: bool = True,
    ) -> ToolResult:
        """The result with as much output as fits both ``max_output_bytes`` and the pipeline's cap.

        The pipeline cuts over-long results at the end, which would lose the tail (where errors
        usually are) and break the JSON; cutting the output here keeps head, tail and a valid object.
        Failures (timeout, cancelled) stay JSON objects, as every tool error is.
        """
        limit = self.server.settings.max_output_bytes
        if not as_json and not error:
            # plain text: the footer is the only fixed part, and nothing is escaped; no output
            # (most commands that succeed) needs no room worked out
            cap = _result_cap(ctx) if output.total else 0
            if cap:
                fixed = len(as_text({**data, "output": "x", "truncated": True}).encode()) + 64  # + the marker
                limit = max(0, min(limit, cap - fixed))
            payload = {**data, "output": output.text(limit), "truncated": output.truncated(limit)}
            return ToolResult(text=as_text(payload), structured=payload)
        cap = _result_cap(ctx)
        fixed = 0
        if cap:
            fixed = len(orjson.dumps({**data, "output": "", "truncated": True})) + 64  # + the marker
            limit = min(limit, cap - fixed)
        for _ in range(6):
            payload = {**data, "output": output.text(limit)}
            if not error:
                payload["truncated"] = output.truncated(limit)
            raw = orjson.dumps(payload)
            if not cap or len(raw) <= cap or limit <= 0:
                break
            # Escaping made the JSON longer than the output: shrink in proportion to the excess.
            limit = max(0, int(limit * (cap - fixed) / (len(raw) - fixed)) - 16)
        return ToolResult(text=raw.decode(), is_error=error, structured=None if error else payload)

    def _timeout(self, raw: float | None, ctx: CallContext, *, background: bool = False) -> float:
        settings = self.server.settings
        ceiling = settings.background_timeout_seconds if background else settings.max_timeout_seconds
        if raw is None:
            timeout = settings.background_timeout_seconds if background else settings.timeout_seconds
        elif not raw > 0:  # the toolkit's reader already refused what is not a finite number
            raise ToolError("invalid_args", f"'timeout_seconds' must be a positive number of seconds, got {raw:g}")
        elif raw > ceiling:
            raise ToolError(
                "invalid_args",
                f"'timeout_seconds' is at most {ceiling:g}; pass a smaller value or split the work into shorter "
                "commands" + ("" if background else " (or start it with run_in_background=true)"),
            )
        else:
            timeout = float(raw)
        if background:
            return timeout  # runs past this call: the call's own deadline does not apply
        remaining = ctx.remaining()
        if remaining is not None:  # a pipeline deadline (per-tool timeout in config) comes first
            timeout = max(0.1, min(timeout, remaining - self.server.grace - DEADLINE_MARGIN))
        return timeout

    def _working_dir(
        self, raw: str | None, ctx: CallContext, current: Path | None, judged: ResolvedPath | None
    ) -> Path:
        root = self.server.root
        if raw is None:
            return current if current is not None else root
        resolved = confine(
            raw,
            root=root,
            policy=self.server.settings.path_policy,
            tool="bash.execute",
            access="write",
            ctx=ctx,
            argument="working_dir",
            resolved=judged,
        )
        if not resolved.path.is_dir():
            what = "does not exist" if not resolved.path.exists() else "is not a directory"
            raise ToolError(
                "not_directory",
                f"working_dir {resolved.display!r} {what}; pass an existing directory "
                "relative to the project root, or leave it out to run in the root",
            )
        return resolved.path


def _result_cap(ctx: CallContext) -> int:
    """The pipeline's ``max_result_bytes`` for this call (0 when there is none or it is below ``MIN_CAP``)."""
    cap = toolkit.result_limit(ctx)
    return cap if cap >= MIN_CAP else 0
