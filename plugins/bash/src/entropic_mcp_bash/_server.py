"""BashServer: the ``bash`` server, its config, and its parsed permission parts."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import attrs
from entropic_mcp import CallContext, MCPServerBase, ToolError
from entropic_mcp.storage import StateStore
from entropic_mcp.toolkit.paths import PathPolicy, PermissionPart, PreparedParts, ResolvedPath, confine

from ._execute import ExecuteTool
from ._runs import CwdTrailer, KillTool, ListTool, OutputTool, Runs
from ._settings import KEYS, KILL_GRACE, BashSettings

TOOL = "bash.execute"
_ANYWHERE = PathPolicy(allow_outside_root=True)


@attrs.frozen
class Prepared:
    """What the permission check of one ``execute`` call worked out, handed to its run
    (``ctx.prepared_for(args)``): the run uses what was judged, and works neither out again."""

    #: ``BashSettings.environment()`` (before the git overrides, which only the run adds).
    env: Mapping[str, str]
    #: ``working_dir`` resolved (every link followed, no policy applied: the run applies it); None
    #: when the call names none or it could not be resolved (the run then refuses it itself).
    working_dir: ResolvedPath | None


class BashServer(MCPServerBase):
    """One tool, ``execute``: shell commands in the project, checked command by command."""

    name: ClassVar[str] = "bash"
    config_keys: ClassVar[frozenset[str]] = KEYS

    def __init__(self, name: str | None = None, *, root: str | Path | None = None) -> None:
        super().__init__(name, root=root)
        self.grace = KILL_GRACE
        self.settings = BashSettings()
        self._sync_pipeline_timeout()
        self._hide_secrets()
        self.runs = Runs()
        from ._gitsafe import GitOverrides

        self.git_overrides = GitOverrides()
        from ._syntax import SyntaxCheck

        self.syntax = SyntaxCheck()
        self._trailer_dir: Path | None = None
        self.register_tool(ExecuteTool(self))
        self.register_tool(OutputTool(self))
        self.register_tool(KillTool(self))
        self.register_tool(ListTool(self))

    def configure(self, config: Mapping[str, Any]) -> None:
        super().configure(config)
        self.settings = BashSettings.from_table(config)
        self._sync_pipeline_timeout()
        self._hide_secrets()

    def _hide_secrets(self) -> None:
        """Blank denied variables (the serve token first) in this process's /proc environ view."""
        pattern = self.settings.deny_pattern
        if pattern is not None:
            from ._scrub import hide_from_children

            hide_from_children(pattern)

    def skip_duplicate_check(self, tool_name: str) -> bool:
        # Polling a background run repeats the same arguments by design.
        return tool_name in ("output", "list")

    def end_conversation(self, conversation_id: str) -> None:
        """Stop the conversation's background runs and forget its working directory."""
        self.runs.end(conversation_id)

    def conversation_ended(self, ctx: CallContext) -> None:
        """``end_conversation``, and the directory deleted from the store it lives in (one already open);
        with a shared store, the conversation's runs on other workers stopped too."""
        storage = ctx.services.storage_if_open
        store = storage if isinstance(storage, StateStore) else None
        config = ctx.services.config
        shared = store if config is not None and config.storage.shares_state else None
        self.runs.end(ctx.conversation_id, store, shared)

    def close(self) -> None:
        self.runs.close(self.grace)
        if self._trailer_dir is not None:
            import shutil

            shutil.rmtree(self._trailer_dir, ignore_errors=True)
            self._trailer_dir = None
        super().close()

    def cwd_trailer(self, env: dict[str, str]) -> CwdTrailer | None:
        """Arrange for a bash run to report the directory it ends in (None for other shells)."""
        import os

        if os.path.basename(self.settings.shell) != "bash":
            return None
        if self._trailer_dir is None or not self._trailer_dir.is_dir():
            import shutil
            import tempfile
            import weakref

            self._trailer_dir = Path(tempfile.mkdtemp(prefix="entropic-bash-"))
            # Removed also when the server is never closed (a host that just exits, a test).
            weakref.finalize(self, shutil.rmtree, self._trailer_dir, True)
        return CwdTrailer(self._trailer_dir, env)

    def _sync_pipeline_timeout(self) -> None:
        # The tool enforces its own timeout and returns the partial output; the pipeline's
        # timeout is only a backstop that must never fire first.
        self.default_timeout_seconds = self.settings.max_timeout_seconds + 2 * self.grace + 5.0

    # -- permissions ---------------------------------------------------------------------------

    def permission_parts(self, tool_name: str, args: Mapping[str, Any]) -> list[PermissionPart]:
        """One part per simple command (and per file redirection) of ``args["command"]``, with the
        environment and working directory they were judged in (``Prepared``) for the run."""
        command = args.get("command") if isinstance(args, Mapping) else None
        if tool_name != "execute" or not isinstance(command, str) or not command.strip():
            full = f"{self.name}.{tool_name}"
            return [PermissionPart(names=(full,), store=full)]
        import os

        from ._patterns import permission_parts  # tree-sitter loads on the first check only

        settings = self.settings
        env = settings.environment()
        where = self._resolve_dir(args.get("working_dir"))
        parts = permission_parts(
            command,
            cwd=self.root if where is None else where.path,
            root=self.root,
            # The call's conversation is not known here: relative targets are checked in every
            # directory a conversation is in (the root included).
            cwds=self.runs.all_cwds() if args.get("working_dir") is None else (),
            env=env or os.environ,
            bash_like=os.path.basename(settings.shell) in ("bash", "sh", "dash", "ash", "rbash"),
            policy=settings.path_policy,
            syntax_error=lambda: self.syntax.error(command, settings.shell),
        )
        return PreparedParts(parts, Prepared(env, where))

    def unclear_reason(self, tool_name: str, args: Mapping[str, Any]) -> str | None:
        """What of ``args["command"]`` the analysis did not understand, and where (for the refusal).

        Asked only when a call is refused or asked about as not fully analysed: the analysis
        runs again here rather than on every call.
        """
        command = args.get("command") if isinstance(args, Mapping) else None
        if tool_name != "execute" or not isinstance(command, str):
            return None
        import os

        from ._analyse import Invocation, Unclear, analyse

        if os.path.basename(self.settings.shell) not in ("bash", "sh", "dash", "ash", "rbash"):
            return f"the configured shell {self.settings.shell!r} is not bash, so no command of it is analysed"
        cwds = self.runs.all_cwds() if args.get("working_dir") is None else ()
        env = self.settings.environment() or os.environ
        findings = analyse(command, self._cwd_for(args.get("working_dir")), env=env, cwds=cwds)
        unclear: list[tuple[str, str]] = []
        for finding in findings:
            if isinstance(finding, Unclear):
                unclear.append((finding.text, finding.reason or "not analysed"))
            elif isinstance(finding, Invocation) and not finding.understood:
                text = " ".join([finding.program, *(w.text for w in finding.args)])
                computed = any(c in finding.program for c in "$`*?[")
                reason = "a program name computed at run time" if computed else "options it does not model"
                unclear.append((text, reason))
        if not unclear:
            return None
        # Once per construct: the words inside one already named (a guess at the command a wrapper
        # with unknown options runs) are not named again.
        kept: list[tuple[str, str]] = []
        for raw, reason in unclear:
            if not any(raw.strip() in seen for seen, _ in kept):
                kept.append((raw.strip(), reason))
        unclear = kept
        described = []
        for text, reason in unclear[:3]:
            shown = text if len(text) <= 60 else text[:57] + "..."
            at = command.find(text) if text else -1
            where = ""
            if at >= 0:
                line = command.count("\n", 0, at) + 1
                column = at - (command.rfind("\n", 0, at) + 1) + 1
                where = f" at line {line}, column {column}"
            described.append(f"{reason} in `{shown}`{where}")
        more = f" (and {len(unclear) - 3} more)" if len(unclear) > 3 else ""
        return "; ".join(described) + more

    def permission_pattern(self, tool_name: str, args: Mapping[str, Any]) -> str:
        return self.permission_parts(tool_name, args)[0].store

    def _cwd_for(self, raw: object) -> Path:
        """Where a call would run, for resolving relative redirections; asks nothing, refuses nothing."""
        where = self._resolve_dir(raw)
        return self.root if where is None else where.path  # the root: resolved by the base class

    def _resolve_dir(self, raw: object) -> ResolvedPath | None:
        """``working_dir`` resolved, any policy aside (None: none given, or not a usable path).

        Whether the directory may be used is the tool's question, answered when it runs.
        """
        if raw is None:
            return None
        try:
            return confine(raw, root=self.root, policy=_ANYWHERE, tool=TOOL, access="write")
        except ToolError:
            return None
