"""Per-conversation state of the bash server: background runs and the working directory.

The tools ``bash.output``, ``bash.kill`` and ``bash.list`` (Claude Code's BashOutput, KillShell
and /bashes) read and stop the runs ``bash.execute run_in_background=true`` starts. A run belongs
to the conversation that started it: other conversations cannot see it, and it is stopped when
its conversation ends or the server closes.

The working directory lives in the store when it keeps plugin state (``StateStore``,
namespace ``bash.cwd``, root-relative): workers sharing the store run a conversation's calls in
the same directory. Without one it lives in this process's memory. Runs are this process's
children: their ids carry a random part, so an id never names another worker's run. When the
store is one several processes share (``[storage] conversation_state``), every worker answers
for every run through it (``_shared``); with tinydb or no store runs live in this process only.
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import secrets
import socket
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from entropic_mcp import (
    AccessLevel,
    CallContext,
    ToolBase,
    ToolError,
    ToolResult,
    load_tool_definition,
    toolkit,
)
from entropic_mcp.storage import StateConflict, StateStore, StorageError, update_document
from entropic_mcp.toolkit.paths import is_within

from . import _shared
from ._render import duration, reply, wants_json

if TYPE_CHECKING:
    from ._background import BackgroundRun
    from ._server import BashServer

#: Finished runs kept per conversation for a last read; older ones are forgotten first.
KEEP_FINISHED = 16
#: Runs running at once on the whole server, whatever the number of conversations.
MAX_TOTAL_RUNNING = 64
#: The store's namespace for working directories; the key is the conversation key.
NAMESPACE = "bash.cwd"
#: Save rounds a directory change tries against other workers' saves before giving up.
MAX_SAVE_ATTEMPTS = 5
#: How a store that cannot be opened ends its refusal.
_NOTHING_RUN = "Nothing was run; fix [storage] in entropic-mcp.toml, or pass working_dir, then try again."

log = logging.getLogger("entropic_mcp_bash")


def store_of(ctx: CallContext, what: str = "the conversation's working directory") -> StateStore | None:
    """The store a conversation's directory lives in; None when it lives in memory.

    Raises:
        ToolError: a store is configured but cannot be opened.
    """
    return ctx.services.state_store(what, then=_NOTHING_RUN)


def shared_store(ctx: CallContext) -> StateStore | None:
    """The store background runs live in when workers share it; None: this process's memory."""
    return ctx.services.state_store("the conversation's background runs", shared_only=True, then=_NOTHING_RUN)


def _too_many(running: list[str], limit: int) -> ToolError:
    if limit == 0:
        return ToolError(
            "background_disabled",
            "background runs are turned off on this server ([servers.bash] max_background_runs = 0); "
            "run the command in the foreground",
        )
    return ToolError(
        "too_many_runs",
        f"this conversation already has {len(running)} background commands running ({', '.join(running)}), the "
        "most allowed; stop one with bash.kill or wait for one to finish (bash.list shows them)",
    )


def _server_full() -> ToolError:
    return ToolError(
        "too_many_runs",
        f"the server already runs {MAX_TOTAL_RUNNING} background commands for all conversations; "
        "stop one of yours with bash.kill or run this one in the foreground",
    )


class Runs:
    """Background runs and working directories, by conversation."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: dict[str, BackgroundRun] = {}
        self._cwds: dict[str, Path] = {}
        #: The spools of this worker's shared runs, by run id.
        self._spools: dict[str, _shared.Spool] = {}
        #: This worker, as shared run records name their owner.
        self.worker = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"

    # -- working directories -------------------------------------------------------------------

    def cwd(self, conversation: str, root: Path, store: StateStore | None = None) -> Path:
        """Where the conversation's next command runs: its last directory if it still exists in the root."""
        return self.lookup(conversation, root, store)[0]

    def lookup(self, conversation: str, root: Path, store: StateStore | None = None) -> tuple[Path, bool]:
        """``cwd``, and whether the directory is new to this process (another worker moved there).

        With ``store``, the directory the store holds (any worker's last); kept here too, so
        this process's permission checks resolve paths in it from now on (``all_cwds``).
        """
        new = False
        if store is not None:
            path = _load(store, conversation, root)
            with self._lock:
                if path is None:
                    self._cwds.pop(conversation, None)
                else:
                    new = path not in self._cwds.values()
                    self._cwds[conversation] = path
        else:
            with self._lock:
                path = self._cwds.get(conversation)
        if path is None or not path.is_dir() or not is_within(path, root):
            return root, False
        return path, new

    def set_cwd(self, conversation: str, path: Path, root: Path, store: StateStore | None = None) -> None:
        with self._lock:
            if path == root:
                self._cwds.pop(conversation, None)
            else:
                self._cwds[conversation] = path
        if store is not None:
            _save(store, conversation, None if path == root else {"cwd": path.relative_to(root).as_posix()})

    def all_cwds(self) -> list[Path]:
        """Every directory some conversation is in (the permission check resolves paths in each)."""
        with self._lock:
            return list(dict.fromkeys(self._cwds.values()))

    # -- runs ----------------------------------------------------------------------------------

    def start(self, conversation: str, limit: int, store: StateStore | None = None, **kwargs: Any) -> BackgroundRun:
        """Start a run; with ``store`` (a shared one) its record and output go there for every worker."""
        if store is not None:
            return self._start_shared(conversation, limit, store, **kwargs)
        with self._lock:
            running = [r for r in self._runs.values() if r.conversation == conversation and r.running]
            if len(running) >= limit:
                raise _too_many([r.run_id for r in running], limit)
            from ._background import BackgroundRun  # subprocess machinery: loaded on the first run

            if sum(r.running for r in self._runs.values()) >= MAX_TOTAL_RUNNING:
                raise _server_full()
            run = BackgroundRun(self._new_id(), conversation=conversation, **kwargs)
            self._runs[run.run_id] = run
            finished = [r for r in self._runs.values() if r.conversation == conversation and not r.running]
            for old in finished[: max(0, len(finished) - KEEP_FINISHED)]:
                del self._runs[old.run_id]
            return run

    def _new_id(self) -> str:
        # Random, not a counter: workers sharing a store each count from 1, and a model
        # holding one worker's "bg1" must never stop another's.
        run_id = f"bg{secrets.token_hex(3)}"
        while run_id in self._runs:
            run_id = f"bg{secrets.token_hex(3)}"
        return run_id

    def _start_shared(self, conversation: str, limit: int, store: StateStore, **kwargs: Any) -> BackgroundRun:
        from ._background import BackgroundRun

        with self._lock:
            for run_id in [i for i, spool in self._spools.items() if spool.done]:
                # Ended and recorded: the store answers for it from now on.
                del self._spools[run_id]
                self._runs.pop(run_id, None)
            if sum(r.running for r in self._runs.values()) >= MAX_TOTAL_RUNNING:
                raise _server_full()
        known = _shared.records(store, conversation)
        running = [r["run_id"] for r in known if _shared.status_of(r) == "running"]
        if len(running) >= limit:
            raise _too_many(running, limit)
        with self._lock:
            record, version = _shared.new_record(
                store,
                self._new_id,
                conversation=conversation,
                command=kwargs["command"],
                owner=self.worker,
                max_unread=kwargs["max_unread_bytes"],
            )
        run_id = record["run_id"]
        spool = _shared.Spool(store, record, version)
        try:
            run = BackgroundRun(run_id, conversation=conversation, sink=spool.feed, **kwargs)
        except BaseException:
            try:
                _shared.forget(store, run_id, record)
            except StorageError:
                log.warning("could not delete the record of background run %s, which did not start", run_id)
            raise
        spool.attach(run)
        with self._lock:
            self._runs[run_id] = run
            self._spools[run_id] = spool
        finished = [r["run_id"] for r in known if _shared.status_of(r) != "running"]
        stale = set(finished[: max(0, len(finished) - KEEP_FINISHED)])
        try:
            _shared.change_index(store, conversation, lambda ids: [i for i in ids if i not in stale] + [run_id])
            for old in stale:
                _shared.forget(store, old)
        except StorageError as exc:
            run.stop()
            raise _shared.unavailable(exc) from None
        return run

    def read_shared(self, store: StateStore, conversation: str, run_id: object) -> tuple[dict[str, Any], str, int]:
        """A shared run's record, its output since the last read on any worker, and the bytes dropped."""
        spool = self._spools.get(run_id) if isinstance(run_id, str) and run_id in self._runs else None
        if spool is not None and spool.run is not None and spool.run.conversation == conversation:
            spool.flush()  # this worker owns it: what it printed until now, not until the next tick
        record = _shared.load_run(store, conversation, run_id)
        return _shared.read(store, conversation, record["run_id"])

    def kill_shared(
        self, store: StateStore, conversation: str, run_id: object, wait: float
    ) -> tuple[dict[str, Any], str, int]:
        """Stop a shared run: here if this worker owns it, else by a request its owner polls for.

        Waits up to ``wait`` (plus the owner's polling) for the end to be recorded; the record
        returned still says ``running`` when the owner has not acted by then.
        """
        record = _shared.load_run(store, conversation, run_id)
        if _shared.status_of(record) == "running":
            with self._lock:
                run, spool = self._runs.get(record["run_id"]), self._spools.get(record["run_id"])
            if run is not None and spool is not None:
                run.stop()
                run.wait(wait)
                spool.flush()
            else:
                _shared.request_kill(store, record["run_id"])
                _shared.wait_ended(store, conversation, record["run_id"], wait + 2 * _shared.FLUSH_SECONDS + 1.0)
        return _shared.read(store, conversation, record["run_id"])

    def list_shared(self, store: StateStore, conversation: str) -> list[tuple[dict[str, Any], int]]:
        """The conversation's shared runs on every worker, oldest first, with their unread bytes."""
        for run_id, spool in list(self._spools.items()):
            if spool.run is not None and spool.run.conversation == conversation and run_id in self._runs:
                spool.flush()
        try:
            return [(r, _shared.unread_bytes(store, r)) for r in _shared.records(store, conversation)]
        except StorageError as exc:
            raise _shared.unavailable(exc) from None

    def get(self, conversation: str, run_id: object) -> BackgroundRun:
        with self._lock:
            run = self._runs.get(run_id) if isinstance(run_id, str) else None
        if run is None or run.conversation != conversation:
            raise ToolError(
                "unknown_run",
                f"no background command {run_id!r} in this conversation; bash.list shows the ones there are",
            )
        return run

    def of(self, conversation: str) -> list[BackgroundRun]:
        with self._lock:
            return [r for r in self._runs.values() if r.conversation == conversation]

    def end(
        self, conversation: str, store: StateStore | None = None, shared: StateStore | None = None
    ) -> list[BackgroundRun]:
        """Stop and forget the conversation's runs and directory (in ``store`` too); returns the runs being stopped.

        With ``shared`` (the store runs live in), other workers' runs of the conversation are
        asked to stop and their documents deleted by their owners, or here for runs that ended
        or whose owner is gone.
        """
        with self._lock:
            ended = [r for r in self._runs.values() if r.conversation == conversation]
            # Kept until they are done: close() waits for them to have tidied up.
            spools = [self._spools[r.run_id] for r in ended if r.run_id in self._spools]
            for run in ended:
                del self._runs[run.run_id]
            self._cwds.pop(conversation, None)
        for spool in spools:
            spool.drop()
        for run in ended:
            run.stop()
        if shared is not None:
            mine = {run.run_id for run in ended}
            try:
                for spool in spools:
                    if spool.done:  # its thread is gone: nobody else deletes its documents
                        _shared.forget(shared, spool.run_id)
                for record in _shared.records(shared, conversation):
                    if record["run_id"] in mine:
                        continue
                    if _shared.status_of(record) == "running":
                        _shared.request_kill(shared, record["run_id"], forget=True)
                    else:
                        _shared.forget(shared, record["run_id"], record)
                _shared.change_index(shared, conversation, lambda ids: [])
            except (StorageError, ToolError):
                log.warning("could not stop the background runs of conversation %r on other workers", conversation)
        if store is not None:
            _save(store, conversation, None)
        return ended

    def close(self, grace: float) -> None:
        """Stop every run and wait for each (bounded by the kill grace)."""
        with self._lock:
            runs = list(self._runs.values())
            self._runs.clear()
            self._cwds.clear()
        for run in runs:
            run.stop()
        for run in runs:
            run.wait(2 * grace + 1.0)
        with self._lock:
            spools = list(self._spools.values())
            self._spools.clear()
        for spool in spools:  # their end recorded, so other workers read "killed", not "lost"
            spool.wake()
            spool.join(2 * _shared.FLUSH_SECONDS + 1.0)


def _load(store: StateStore, conversation: str, root: Path) -> Path | None:
    try:
        value, _ = store.load_state(NAMESPACE, conversation)
    except StorageError as exc:
        raise ToolError(
            "storage_unavailable",
            f"the conversation's working directory could not be read from the store ({exc}); nothing was "
            "run. Try again, or pass working_dir.",
        ) from None
    relative = value.get("cwd") if isinstance(value, dict) else None
    if not isinstance(relative, str) or relative.startswith("/") or ".." in relative.split("/"):
        return None
    # Resolved: a directory replaced by a symlink since it was stored must not lead out of the root.
    return (root / relative).resolve()


def _save(store: StateStore, conversation: str, value: dict[str, str] | None) -> None:
    """Store a conversation's directory (None: the root, the document deleted); the last save wins.

    A failing store is logged, not raised: the command has run, and the next call starts in
    the directory the store still holds.
    """
    try:
        update_document(store, NAMESPACE, conversation, lambda stored: value, attempts=MAX_SAVE_ATTEMPTS)
    except StateConflict:
        log.warning("the working directory of conversation %r kept changing; not kept", conversation)
    except StorageError:
        log.warning("could not keep the working directory of conversation %r", conversation, exc_info=True)


#: The variable naming the file the EXIT trap writes; the start-up file unsets it again.
TRAILER_VARIABLE = "__ENTROPIC_BASH_CWD"
TRAILER_SCRIPT = (
    f"trap \"builtin pwd -P > '${{{TRAILER_VARIABLE}}}' 2>/dev/null\" EXIT\nunset BASH_ENV {TRAILER_VARIABLE}\n"
)


class CwdTrailer:
    """Where one bash run ends up: a start-up file (``BASH_ENV``) sets an EXIT trap that writes
    ``pwd -P`` to a private file, read after the run.

    The command itself runs unchanged. The start-up file (one per server) unsets ``BASH_ENV`` and
    its own variable, so nested shells do not report and the command sees neither; a command
    that replaces the EXIT trap, ``exec``s or is killed reports nothing, and the conversation
    keeps its previous directory.
    """

    _ids = itertools.count(1)

    def __init__(self, directory: Path, env: dict[str, str]) -> None:
        script = directory / "start.sh"
        if not script.is_file():
            script.write_text(TRAILER_SCRIPT)
        self.out = directory / f"cwd-{next(self._ids)}"
        env["BASH_ENV"] = str(script)
        env[TRAILER_VARIABLE] = str(self.out)

    def finish(self) -> Path | None:
        """The directory the shell ended in (None when it did not say); removes the file."""
        try:
            text = self.out.read_text("utf-8", errors="replace").strip()
        except OSError:
            return None
        self.out.unlink(missing_ok=True)
        if not text.startswith("/") or "\n" in text:
            return None
        return Path(text)


class _RunTool(ToolBase):
    def __init__(self, server: BashServer) -> None:
        super().__init__()
        self.server = server

    def _reply(self, data: dict[str, Any], args: Mapping[str, Any]) -> ToolResult:
        return reply(data, json=wants_json(args))


class LineFilter:
    """``bash.output``'s ``filter``: an RE2 search, linear in the text whatever the pattern.

    Python's ``re`` backtracks: ``(a+)+$`` on a 30-character line runs for minutes and holds the
    interpreter (every client waits). RE2 has no backreferences or lookaround, so those are
    refused with an error saying so.
    """

    def __init__(self, pattern: str) -> None:
        import re2

        options = re2.Options()
        options.log_errors = False
        options.never_nl = True  # one line at a time, like grep
        options.never_capture = True
        try:
            self._regex: Any = re2.compile(pattern, options)
        except re2.error as exc:
            raise ToolError("invalid_args", _filter_error(pattern, exc)) from None
        except (TypeError, ValueError, OverflowError) as exc:
            raise ToolError(
                "invalid_args", f"'filter' is not a valid regular expression ({exc}); fix or drop it"
            ) from None

    def search(self, line: str) -> bool:
        return self._regex.search(line) is not None


def _filter_error(pattern: str, exc: Exception) -> str:
    detail = exc.args[0] if exc.args else exc
    if isinstance(detail, bytes):
        detail = detail.decode("utf-8", "replace")
    unsupported = re.search(r"\(\?[=!<]|\\[1-9]|\(\?>|\(\?P=", pattern)
    if unsupported:
        return (
            f"'filter' uses {unsupported[0]!r}, which the filter's engine (RE2, linear-time) does not support: "
            "no backreferences or lookaround; rewrite it without them or drop it"
        )
    return f"'filter' is not a valid regular expression ({detail}); fix or drop it"


def _read(run: BackgroundRun, pattern: LineFilter | None) -> dict[str, Any]:
    from ._background import describe

    output, dropped = run.read()
    return _answer(describe(run), output, dropped, pattern)


def _answer(data: dict[str, Any], output: str, dropped: int, pattern: LineFilter | None) -> dict[str, Any]:
    if pattern is not None:
        output = "".join(line for line in output.splitlines(keepends=True) if pattern.search(line))
    data["output"] = output
    if dropped:
        data["dropped_bytes"] = dropped
    return data


class OutputTool(_RunTool):
    """``bash.output``: new output of a background run since the last read."""

    definition = load_tool_definition(__package__, "output")
    required_access_level = AccessLevel.READ
    idempotent = False

    def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        run_id = toolkit.text(args, "run_id", required=True)
        raw = toolkit.text(args, "filter", allow_empty=True)
        pattern = LineFilter(raw) if raw else None
        store = shared_store(ctx)
        if store is not None:
            record, output, dropped = self.server.runs.read_shared(store, ctx.conversation_id, run_id)
            return self._reply(_answer(_shared.describe(record), output, dropped, pattern), args)
        run = self.server.runs.get(ctx.conversation_id, run_id)
        return self._reply(_read(run, pattern), args)


class KillTool(_RunTool):
    """``bash.kill``: stop a background run with its whole process group."""

    definition = load_tool_definition(__package__, "kill")
    required_access_level = AccessLevel.WRITE
    destructive = True
    idempotent = True

    def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        run_id = toolkit.text(args, "run_id", required=True)
        store = shared_store(ctx)
        if store is not None:
            wait = 2 * self.server.grace + 1.0
            record, output, dropped = self.server.runs.kill_shared(store, ctx.conversation_id, run_id, wait)
            data = _answer(_shared.describe(record), output, dropped, None)
            if data["status"] == "running":
                data["kill_requested"] = True
                data["note"] = (
                    f"kill requested; {record['run_id']} is still stopping on the worker running it (it looks for "
                    f"requests every {_shared.FLUSH_SECONDS:g} s). bash.list or bash.output shows when it has stopped."
                )
            return self._reply(data, args)
        run = self.server.runs.get(ctx.conversation_id, run_id)
        if run.running:
            run.stop()
            run.wait(2 * self.server.grace + 1.0)
        return self._reply(_read(run, None), args)


class ListTool(_RunTool):
    """``bash.list``: the conversation's background runs and working directory."""

    definition = load_tool_definition(__package__, "list")
    required_access_level = AccessLevel.READ
    idempotent = False

    def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        runs = []
        from ._background import describe

        store = shared_store(ctx)
        if store is not None:
            for record, unread in self.server.runs.list_shared(store, ctx.conversation_id):
                data = _shared.describe(record)
                data["unread_bytes"] = unread
                runs.append(data)
        for run in self.server.runs.of(ctx.conversation_id) if store is None else ():
            data = describe(run)
            data["unread_bytes"] = run.unread_bytes()
            runs.append(data)
        root = self.server.root
        cwd = self.server.runs.cwd(ctx.conversation_id, root, store_of(ctx))
        data = {"runs": runs, "cwd": "." if cwd == root else cwd.relative_to(root).as_posix()}
        if wants_json(args):
            return ToolResult(text=orjson.dumps(data).decode(), structured=data)
        lines = [f"cwd {data['cwd']}"] if runs else [f"no background runs; cwd {data['cwd']}"]
        for run_data in runs:
            elapsed = run_data["elapsed_ms"]
            assert isinstance(elapsed, int)  # describe() gives whole milliseconds
            status = run_data["status"]
            if run_data.get("exit_code") is not None:
                status = f"{status} {run_data['exit_code']}"
            lines.append(
                f"{run_data['run_id']}\t{status}\t{duration(elapsed)}\t"
                f"{run_data['unread_bytes']} unread bytes\t{run_data['command']}"
            )
        return ToolResult(text="\n".join(lines), structured=data)
