"""A small toolkit for plugin authors: argument readers, server settings, the result cap, a process runner.

Everything here is what the first-party plugins each wrote for themselves; one shared
version means one rule for every plugin:

- **Argument readers** (``text``, ``integer``, ``number``, ``flag``, ``choice``, ``strings``)
  raise ``ToolError("invalid_args", ...)`` saying what to send instead. One rule for numbers:
  ``3.0`` is the integer 3 (JSON Schema counts it as one, so the schema check lets it through),
  ``3.5`` is not an integer, and ``true``/``false`` are never numbers.
- **Settings**: ``settings_from_table(MySettings, table, server=...)`` turns a
  ``[servers.<name>]`` table into a frozen attrs record, checking each key against the field's
  type; errors are ``ConfigError`` naming the file and the key.
- **Result cap**: ``result_limit(ctx)`` is the pipeline's ``max_result_bytes`` for this call.
- **Processes**: ``run_process`` (async) and ``run_process_sync`` start a program as the leader
  of a new process group, stop the whole group on timeout or cancellation (TERM, then KILL after
  a grace), and keep the head and the tail of its output within a cap.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

import attrs

from . import _tracing
from ._errors import ConfigError, ToolError
from ._gitconfig import DYNAMIC_KEYS as GIT_DYNAMIC_KEYS
from ._gitconfig import NEUTRALISING_CONFIG as GIT_NEUTRALISING_CONFIG
from ._gitconfig import overrides_for as git_overrides_for
from ._sandbox import Sandbox

if TYPE_CHECKING:  # asyncio and subprocess are imported when a program is run: a plugin reading
    # its arguments or settings does not pay for them at start-up
    import asyncio
    import subprocess

__all__ = [
    "GIT_DYNAMIC_KEYS",
    "GIT_NEUTRALISING_CONFIG",
    "SERVER_BASE_KEYS",
    "HeadTail",
    "ProcessResult",
    "Sandbox",
    "choice",
    "flag",
    "git_overrides_for",
    "group_alive",
    "integer",
    "number",
    "result_limit",
    "run_process",
    "run_process_sync",
    "sandbox_blocked",
    "sandbox_for",
    "settings_from_table",
    "strings",
    "text",
]

_MISSING: Any = object()


# -- argument readers --------------------------------------------------------------------------


def _invalid(name: str, expected: str, value: object) -> ToolError:
    shown = repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return ToolError("invalid_args", f"'{name}' must be {expected}, got {shown}; fix the argument and call again")


def _require(name: str, expected: str, required: bool) -> None:
    """Raise when a ``required`` argument is absent (or null); return when it may be left out."""
    if required:
        raise ToolError("invalid_args", f"missing required argument '{name}' ({expected})")


@overload
def text(
    args: Mapping[str, Any],
    name: str,
    *,
    default: str,
    allow_empty: bool = ...,
    strip: bool = ...,
    max_length: int | None = ...,
) -> str: ...
@overload
def text(
    args: Mapping[str, Any],
    name: str,
    *,
    default: None = ...,
    required: Literal[True],
    allow_empty: bool = ...,
    strip: bool = ...,
    max_length: int | None = ...,
) -> str: ...
@overload
def text(
    args: Mapping[str, Any],
    name: str,
    *,
    default: None = ...,
    required: bool = ...,
    allow_empty: bool = ...,
    strip: bool = ...,
    max_length: int | None = ...,
) -> str | None: ...
def text(
    args: Mapping[str, Any],
    name: str,
    *,
    default: str | None = None,
    required: bool = False,
    allow_empty: bool = False,
    strip: bool = False,
    max_length: int | None = None,
) -> str | None:
    """A string argument: no NUL byte, valid Unicode (no lone surrogates), non-empty unless allowed.

    Args:
        args: the call's arguments.
        name: the argument's name.
        default: the value when the argument is absent or null.
        required: absent (with no default) is an error instead of None.
        allow_empty: accept ``""`` (after stripping, when ``strip``).
        strip: remove surrounding whitespace first.
        max_length: the most characters accepted.
    """
    value = args.get(name)
    if value is None:
        if default is not None:
            return default
        _require(name, "a string", required)
        return None
    if not isinstance(value, str):
        raise _invalid(name, "a string", value)
    if strip:
        value = value.strip()
    if not value and not allow_empty:
        raise ToolError("invalid_args", f"'{name}' must not be empty")
    if "\x00" in value:
        raise ToolError("invalid_args", f"'{name}' contains a NUL byte; remove it")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ToolError("invalid_args", f"'{name}' contains characters that are not valid Unicode text") from None
    if max_length is not None and len(value) > max_length:
        raise ToolError("invalid_args", f"'{name}' is {len(value)} characters; at most {max_length} are accepted")
    return value


def _as_integer(value: object) -> int | None:
    """``value`` as an int under the one rule (3 and 3.0 yes; 3.5, True, "3" no)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


@overload
def integer(
    args: Mapping[str, Any], name: str, *, default: int, minimum: int | None = ..., maximum: int | None = ...
) -> int: ...
@overload
def integer(
    args: Mapping[str, Any],
    name: str,
    *,
    default: None = ...,
    required: bool = ...,
    minimum: int | None = ...,
    maximum: int | None = ...,
) -> int | None: ...
def integer(
    args: Mapping[str, Any],
    name: str,
    *,
    default: int | None = None,
    required: bool = False,
    minimum: int | None = None,
    maximum: int | None = None,
) -> int | None:
    """An integer argument within ``minimum``..``maximum`` (``3.0`` counts as 3; booleans never do)."""
    value = args.get(name)
    if value is None:
        if default is None:
            _require(name, "an integer", required)
        return default
    number_ = _as_integer(value)
    if number_ is None:
        raise _invalid(name, "an integer", value)
    _check_bounds(name, number_, minimum, maximum)
    return number_


def number(
    args: Mapping[str, Any],
    name: str,
    *,
    default: float | None = None,
    minimum: float | None = None,
    maximum: float | None = None,
) -> float | None:
    """A finite number argument (an int or a float; booleans are not numbers)."""
    value = args.get(name)
    if value is None:
        return default
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or value != value
        or value in (float("inf"), float("-inf"))
    ):
        raise _invalid(name, "a finite number", value)
    _check_bounds(name, value, minimum, maximum)
    return float(value)


def _check_bounds(name: str, value: float, minimum: float | None, maximum: float | None) -> None:
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        if minimum is not None and maximum is not None:
            bounds = f"between {minimum} and {maximum}"
        elif minimum is not None:
            bounds = f"at least {minimum}"
        else:
            bounds = f"at most {maximum}"
        raise ToolError("invalid_args", f"'{name}' must be {bounds}, got {value}")


def flag(args: Mapping[str, Any], name: str, *, default: bool = False) -> bool:
    """A boolean argument: ``true`` or ``false`` only (not 0/1, not "yes")."""
    value = args.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise _invalid(name, "true or false", value)
    return value


_C = TypeVar("_C", bound=str)


def choice(args: Mapping[str, Any], name: str, options: Sequence[_C], *, default: _C) -> _C:
    """One of ``options`` (strings), or ``default`` when absent."""
    value = args.get(name)
    if value is None:
        return default
    if not isinstance(value, str) or value not in options:
        raise _invalid(name, f"one of {', '.join(map(repr, options))}", value)
    return typing.cast(_C, value)


def strings(
    args: Mapping[str, Any],
    name: str,
    *,
    required: bool = False,
    allow_empty_list: bool = True,
    max_items: int | None = None,
) -> list[str]:
    """A list of non-empty strings (each checked as ``text`` does); ``[]`` when absent."""
    value = args.get(name)
    if value is None:
        _require(name, "a list of strings", required)
        return []
    if not isinstance(value, list):
        raise _invalid(name, "a list of strings", value)
    if not value and not allow_empty_list:
        raise ToolError("invalid_args", f"'{name}' must list at least one string")
    if max_items is not None and len(value) > max_items:
        raise ToolError("invalid_args", f"'{name}' lists {len(value)} items; at most {max_items} are accepted")
    out = []
    for index, item in enumerate(value):
        checked = text({f"{name}[{index}]": item}, f"{name}[{index}]", required=True)
        out.append(checked)
    return out


# -- settings from a [servers.<name>] table -----------------------------------------------------

_S = TypeVar("_S")


#: Keys every ``[servers.<name>]`` table may hold, handled by ``MCPServerBase.configure``.
SERVER_BASE_KEYS = frozenset({"timeout_seconds", "max_threads"})


def settings_from_table(
    cls: type[_S],
    table: Mapping[str, Any],
    *,
    server: str,
    source: str | Path | None = None,
    extra_keys: frozenset[str] = frozenset(),
) -> _S:
    """Build the attrs record ``cls`` from a ``[servers.<server>]`` table, checking every key.

    Each field's annotation decides what is accepted: ``bool``, ``int`` (booleans refused; a
    float with no fraction accepted), ``float`` (an int accepted), ``str``, ``Path``,
    ``tuple[str, ...]`` (from a TOML array), ``Literal[...]`` and ``X | None``. A field's
    ``metadata={"min": n}`` / ``{"max": n}`` bound numbers. Unknown keys are errors
    (typos must not pass silently) except ``extra_keys`` and :data:`SERVER_BASE_KEYS`, which
    ``MCPServerBase.configure`` handles itself for every server (``timeout_seconds``,
    ``max_threads``) unless ``cls`` declares a field of that name.

    Raises:
        ConfigError: naming the file (``source``), the table and key, and what was expected.
    """
    if not attrs.has(cls):
        raise TypeError(f"settings_from_table needs an attrs class, got {cls!r}")
    where = f"{source}: " if source else ""
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where}[servers.{server}] must be a table, got {type(table).__name__}")
    fields = {field.alias or field.name: field for field in attrs.fields(cls) if field.init}
    extra_keys = extra_keys | (SERVER_BASE_KEYS - set(fields))
    unknown = sorted(set(table) - set(fields) - extra_keys)
    if unknown:
        raise ConfigError(
            f"{where}[servers.{server}] unknown key(s) {', '.join(map(repr, unknown))}; "
            f"expected one of: {', '.join(sorted(set(fields) | extra_keys))}"
        )
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for key, field in fields.items():
        if key not in table:
            continue
        values[key] = _setting(table[key], hints.get(field.name, Any), field, f"{where}[servers.{server}] {key}")
    try:
        return typing.cast(_S, typing.cast(Any, cls)(**values))
    except (TypeError, ValueError) as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(f"{where}[servers.{server}]: {exc}") from None


def _setting(value: Any, hint: Any, field: Any, where: str) -> Any:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        problems = []
        for option in options:
            try:
                return _setting(value, option, field, where)
            except ConfigError as exc:
                problems.append(str(exc).rpartition(": expected ")[2])
        raise ConfigError(f"{where}: expected {' or '.join(problems)}")
    if origin is Literal:
        allowed = typing.get_args(hint)
        if value not in allowed or isinstance(value, bool) != any(isinstance(a, bool) for a in allowed if a == value):
            raise ConfigError(f"{where}: expected one of {', '.join(map(repr, allowed))}, got {value!r}")
        return value
    if origin is tuple:
        item = typing.get_args(hint)[0] if typing.get_args(hint) else Any
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected an array, got {value!r}")
        return tuple(_setting(v, item, field, f"{where}[{i}]") for i, v in enumerate(value))
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true or false, got {value!r}")
        return value
    if hint is int:
        number_ = _as_integer(value)
        if number_ is None:
            raise ConfigError(f"{where}: expected an integer, got {value!r}")
        return _bounded(number_, field, where)
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        return _bounded(float(value), field, where)
    if hint is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {value!r}")
        return value
    if hint is Path:
        if not isinstance(value, str) or not value:
            raise ConfigError(f"{where}: expected a path (a string), got {value!r}")
        return Path(value)
    return value


def _bounded(value: float, field: Any, where: str) -> Any:
    low = field.metadata.get("min")
    high = field.metadata.get("max")
    if (low is not None and value < low) or (high is not None and value > high):
        wanted = " and ".join(
            part
            for part in (f"at least {low}" if low is not None else "", f"at most {high}" if high is not None else "")
            if part
        )
        raise ConfigError(f"{where}: expected a number {wanted}, got {value!r}")
    return value


# -- the result cap -----------------------------------------------------------------------------


def result_limit(ctx: Any) -> int:
    """The pipeline's ``max_result_bytes`` for this call; 0 when there is none (a direct call).

    A result over the cap is cut by the pipeline, mid-JSON; a tool that knows the cap fits its
    result under it, keeping the note that says how to get the rest.
    """
    services = getattr(ctx, "services", None)
    cap = getattr(services, "result_limit", None) if services is not None else None
    if cap is None:
        config = getattr(getattr(ctx, "manager", None), "config", None)
        cap = getattr(getattr(config, "pipeline", None), "max_result_bytes", 0)
    if callable(cap):
        cap = cap()
    return cap if isinstance(cap, int) and not isinstance(cap, bool) and cap > 0 else 0


# -- running a program --------------------------------------------------------------------------


class HeadTail:
    """The first and last bytes of a stream within ``limit`` bytes; what is in between is counted.

    With ``keep_tail=False`` the whole cap goes to the head (output cut at the cap).
    """

    def __init__(self, limit: int, *, keep_tail: bool = True) -> None:
        if limit < 2:
            raise ValueError("an output cap is at least 2 bytes")
        self.limit = limit
        self.keep_tail = keep_tail
        self.head = bytearray()
        self._tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = (self.limit // 2 if self.keep_tail else self.limit) - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data and self.keep_tail:
            self._tail += data
            keep = self.limit - len(self.head)
            # Trimmed when it grows to twice its share, not on every piece: a flood of output
            # then costs one copy per share of bytes instead of one per read.
            if len(self._tail) > 2 * keep:
                del self._tail[: len(self._tail) - keep]

    @property
    def tail(self) -> bytes:
        keep = self.limit - len(self.head) if self.keep_tail else 0
        return bytes(self._tail[max(0, len(self._tail) - keep) :]) if keep else b""

    @property
    def omitted(self) -> int:
        return self.total - len(self.head) - len(self.tail)

    @property
    def truncated(self) -> bool:
        return self.omitted > 0

    def bytes(self) -> bytes:
        return bytes(self.head) + self.tail

    def text(self, marker: str = "\n[... {omitted} bytes omitted ...]\n") -> str:
        """The kept output as text (invalid UTF-8 replaced), with a marker where bytes were left out."""
        head = bytes(self.head).decode("utf-8", "replace")
        tail = self.tail.decode("utf-8", "replace")
        if not self.truncated:
            return head + tail
        return head + marker.format(omitted=self.omitted) + tail


@attrs.frozen(kw_only=True)
class ProcessResult:
    """How a program run ended. ``exit_code`` is None when it was stopped (timeout or cancel);
    a negative one is the signal that ended it."""

    argv: tuple[str, ...]
    exit_code: int | None
    stdout: HeadTail
    stderr: HeadTail | None
    elapsed: float
    timed_out: bool = False
    cancelled: bool = False
    stopped_at_cap: bool = False

    @property
    def ok(self) -> bool:
        """The program succeeded, or was stopped at the output cap it was asked to stop at."""
        return self.exit_code == 0 or self.stopped_at_cap


#: How often a run checks the synchronous cancellation flag (and a stopped group's leftovers).
_POLL = 0.05
#: Bytes read from a pipe at a time.
_CHUNK = 1 << 16


async def run_process(
    argv: Sequence[str],
    *,
    cwd: str | Path,
    timeout: float,
    max_output_bytes: int = 64 * 1024,
    stderr_bytes: int | None = None,
    env: Mapping[str, str] | None = None,
    cancelled: threading.Event | None = None,
    grace: float = 2.0,
    merge_stderr: bool = False,
    stdin: bytes | None = None,
    stop_at_cap: bool = False,
    on_output: Callable[[bytes], None] | None = None,
    sandbox: Sandbox | None = None,
) -> ProcessResult:
    """Run ``argv`` (no shell) as the leader of a new process group and wait for it.

    The program runs in the host's OS sandbox (``sandbox``, by default the one ``[sandbox]``
    configures for every plugin: see docs/sandbox.md; ``sandbox_for(server)`` gives a server's
    own): writes only under the project root and a private ``$TMPDIR``, no policy file, no path
    a deny rule hides, no network unless allowed, and nothing left running after the call.

    On ``timeout`` seconds, on ``cancelled`` being set (pass ``ctx.cancelled``) or when the
    awaiting task is cancelled, the whole group gets SIGTERM, then SIGKILL after ``grace``
    seconds; so does anything the program left running in its group when it exits. stdout
    (and stderr, or both together with ``merge_stderr``) keep their head and tail within
    ``max_output_bytes`` each (stderr: ``stderr_bytes`` when given).

    With ``stop_at_cap`` the program is stopped (its group, as above) once stdout passes the cap,
    and stdout keeps its head only (``stopped_at_cap`` on the result; ``ok`` stays true): for
    output whose beginning is what matters, like ``git log``. ``on_output`` is called on the
    event loop with each piece of stdout as it arrives (for progress reports); an exception it
    raises stops the program and is raised from here.

    The program is watched from the event loop itself (pipes and stdin with ``add_reader`` /
    ``add_writer``, its exit through a pidfd): no task, stream or child-watcher thread per run,
    so a short program costs little more than its own run time.

    Raises:
        ToolError: ``not_found`` when the program does not exist or cannot be run;
            ``sandbox_unavailable`` when ``[sandbox] mode = "required"`` and no sandbox works.
    """
    import asyncio
    import subprocess

    started = time.monotonic()
    argv = tuple(argv)
    loop = asyncio.get_running_loop()
    prepared = _sandboxed(argv, cwd=cwd, env=env, sandbox=sandbox)
    try:
        popen = prepared.popen(
            cwd=str(cwd),
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
            start_new_session=True,
        )
    except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
        prepared.close()
        raise ToolError("not_found", f"cannot run {argv[0]!r}: {exc.strerror or exc}") from None
    except BaseException:
        prepared.close()
        raise
    span = None if _tracing.tracer is None else _traced_start(argv, popen.pid, started)
    try:
        result = await _run_popen(
            loop,
            popen,
            argv,
            started=started,
            timeout=timeout,
            max_output_bytes=max_output_bytes,
            stderr_bytes=stderr_bytes,
            cancelled=cancelled,
            grace=grace,
            merge_stderr=merge_stderr,
            stdin=stdin,
            stop_at_cap=stop_at_cap,
            on_output=on_output,
        )
    except BaseException as exc:
        if span is not None:
            _traced_end(span, None, exc)
        raise
    finally:
        prepared.close()
    if span is not None:
        _traced_end(span, result, None)
    return result


def _traced_start(argv: tuple[str, ...], pid: int, started: float) -> Any:
    from ._traced import start_process

    return start_process(_tracing.tracer, argv, pid, started)


def _traced_end(span: Any, result: ProcessResult | None, exc: BaseException | None) -> None:
    from ._traced import end_process

    end_process(span, result, exc)


def sandbox_for(server: str | None = None) -> Sandbox:
    """The OS sandbox of ``server``'s programs as ``[sandbox]`` configures it (``None``: the
    default every plugin gets). Off when the host set none up (a server used bare, a test)."""
    from ._sandbox import sandbox_for as lookup

    return lookup(server)


def sandbox_blocked(output: str, sandbox: Sandbox, *, exit_code: int | None) -> str | None:
    """A note for the model when a failed run's ``output`` shows the sandbox refusing a write,
    a read or a connection: what was blocked and which setting the user can change (else None)."""
    from ._sandbox import blocked_note

    return blocked_note(output, sandbox, exit_code=exit_code)


def _sandboxed(argv: Sequence[str], *, cwd: str | Path, env: Mapping[str, str] | None, sandbox: Sandbox | None) -> Any:
    from ._sandbox import sandbox_for as lookup

    chosen = lookup(None) if sandbox is None else sandbox
    if chosen.active:
        import shutil

        # Inside the sandbox a missing program is bwrap's exit 1, not an OSError: say it as before.
        path = (env if env is not None else os.environ).get("PATH")
        if shutil.which(argv[0], path=path) is None and not (os.sep in argv[0] and os.access(argv[0], os.X_OK)):
            raise ToolError("not_found", f"cannot run {argv[0]!r}: No such file or directory")
        if not Path(cwd).is_dir():
            raise ToolError("not_found", f"cannot run {argv[0]!r}: No such file or directory: {str(cwd)!r}")
    return chosen.prepare(argv, cwd=cwd, env=env)


async def _run_popen(
    loop: asyncio.AbstractEventLoop,
    popen: subprocess.Popen[bytes],
    argv: tuple[str, ...],
    *,
    started: float,
    timeout: float,
    max_output_bytes: int,
    stderr_bytes: int | None,
    cancelled: threading.Event | None,
    grace: float,
    merge_stderr: bool,
    stdin: bytes | None,
    stop_at_cap: bool,
    on_output: Callable[[bytes], None] | None,
) -> ProcessResult:
    import asyncio

    out = HeadTail(max_output_bytes, keep_tail=not stop_at_cap)
    err = None if merge_stderr else HeadTail(max_output_bytes if stderr_bytes is None else stderr_bytes)
    run = _Run(loop, popen, out, err, stdin, on_output, stop_at_cap)
    timed_out = was_cancelled = False
    try:
        deadline = started + timeout
        while not run.exited and not run.overflow and run.failure is None:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            if cancelled is not None and cancelled.is_set():
                was_cancelled = True
                break
            await run.wait(min(left, _POLL) if cancelled is not None else left, run.running_ended)
        await run.stop_group(grace)
        # A program that left the group (setsid) may still hold the pipes: read for a grace at most.
        await run.drain(grace)
    except asyncio.CancelledError:
        await _despite_cancellation(run.stop_group(grace))
        raise
    finally:
        if run.exited:
            run.release()  # the common case: nothing to wait for, no task to start
        else:
            await _despite_cancellation(run.close())
    if run.failure is not None:
        raise run.failure
    return ProcessResult(
        argv=argv,
        exit_code=None if timed_out or was_cancelled else popen.returncode,
        stdout=out,
        stderr=err,
        elapsed=time.monotonic() - started,
        timed_out=timed_out,
        cancelled=was_cancelled,
        stopped_at_cap=run.overflow,
    )


def run_process_sync(argv: Sequence[str], **options: Any) -> ProcessResult:
    """``run_process`` for a synchronous tool (which runs in a worker thread with no event loop)."""
    import asyncio

    return asyncio.run(run_process(argv, **options))


async def _despite_cancellation(coro: Any) -> None:
    """Run ``coro`` (a bounded clean-up) to its end even if the caller is cancelled meanwhile —
    anyio repeats a cancellation at every await until the task ends, so ``asyncio.shield``
    alone would abandon it — then pass the cancellation on."""
    import asyncio

    task = asyncio.ensure_future(coro)
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError


def _never() -> bool:
    return False


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class _Run:
    """One program watched from the event loop: its pipes, its stdin and its exit.

    The callbacks only record what happened; they wake the waiting run (one future) only when
    what it waits for holds (``wait(until=...)``): running, the exit, the cap or a failing
    ``on_output``; draining, the pipes' end. Neither every piece of output nor an event the
    run does not wait for costs a task switch.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        popen: subprocess.Popen[bytes],
        out: HeadTail,
        err: HeadTail | None,
        stdin: bytes | None,
        on_output: Callable[[bytes], None] | None,
        stop_at_cap: bool,
    ) -> None:
        self.loop = loop
        self.popen = popen
        self.on_output = on_output
        self.stop_at_cap = stop_at_cap
        self.exited = False
        self.overflow = False
        self.failure: Exception | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._until: Callable[[], bool] = _never
        self._readers: dict[int, tuple[typing.IO[bytes], HeadTail, bool]] = {}
        self._input = memoryview(stdin) if stdin is not None else None
        self._pidfd: int | None = None
        self._reaper: threading.Thread | None = None
        try:
            assert popen.stdout is not None
            self._watch(popen.stdout, out, is_stdout=True)
            if err is not None:
                assert popen.stderr is not None
                self._watch(popen.stderr, err, is_stdout=False)
            if popen.stdin is not None:
                os.set_blocking(popen.stdin.fileno(), False)
                loop.add_writer(popen.stdin.fileno(), self._writable)
            try:
                # A command of a persistent sandbox is not our child: its status comes on exit_fd.
                exit_fd = getattr(popen, "exit_fd", None)
                self._pidfd = os.dup(exit_fd) if exit_fd is not None else os.pidfd_open(popen.pid)
            except (AttributeError, OSError):  # no pidfds (old kernel, not Linux): a thread waits
                self._reaper = threading.Thread(target=self._wait_in_thread, daemon=True)
                self._reaper.start()
            else:
                loop.add_reader(self._pidfd, self._pidfd_readable)
        except BaseException:
            self.release()
            _signal_group(popen.pid, signal.SIGKILL)
            popen.wait()
            raise

    # -- callbacks on the loop ------------------------------------------------------------------

    def _watch(self, file: typing.IO[bytes], sink: HeadTail, *, is_stdout: bool) -> None:
        fd = file.fileno()
        os.set_blocking(fd, False)
        self._readers[fd] = (file, sink, is_stdout)
        self.loop.add_reader(fd, self._readable, fd)

    def _readable(self, fd: int) -> None:
        _, sink, is_stdout = self._readers[fd]
        try:
            data = os.read(fd, _CHUNK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._unwatch(fd)
            self._wake()
            return
        sink.feed(data)
        if not is_stdout:
            return
        if self.on_output is not None:
            try:
                self.on_output(data)
            except Exception as exc:  # the caller's: raised from run_process once the group is stopped
                self.failure = exc
                self._unwatch(fd)
                self._wake()
                return
        if self.stop_at_cap and sink.total > sink.limit:
            self.overflow = True
            self._unwatch(fd)
            self._wake()

    def _unwatch(self, fd: int) -> None:
        found = self._readers.pop(fd, None)
        if found is not None:
            self.loop.remove_reader(fd)
            found[0].close()

    def _writable(self) -> None:
        assert self.popen.stdin is not None
        data = self._input
        try:
            if data:
                written = os.write(self.popen.stdin.fileno(), data[:_CHUNK])
                self._input = data = data[written:]
        except BlockingIOError:
            return
        except OSError:  # a broken pipe: the program does not read (all of) its input
            data = None
        if not data:
            self._close_stdin()

    def _close_stdin(self) -> None:
        stdin = self.popen.stdin
        if stdin is not None and not stdin.closed:
            self.loop.remove_writer(stdin.fileno())
            try:
                stdin.close()
            except OSError:
                pass

    def _pidfd_readable(self) -> None:
        if self.popen.poll() is None:
            return
        self._close_pidfd()
        self._set_exited()

    def _close_pidfd(self) -> None:
        if self._pidfd is not None:
            self.loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None

    def _wait_in_thread(self) -> None:
        self.popen.wait()
        try:
            self.loop.call_soon_threadsafe(self._set_exited)
        except RuntimeError:  # the loop is closed: the run ended without waiting for this
            pass

    def _set_exited(self) -> None:
        self.exited = True
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done() and self._until():
            self._waiter.set_result(None)

    # -- waiting --------------------------------------------------------------------------------

    def running_ended(self) -> bool:
        return self.exited or self.overflow or self.failure is not None

    def pipes_ended(self) -> bool:
        return not self._readers

    def has_exited(self) -> bool:
        return self.exited

    async def wait(self, timeout: float, until: Callable[[], bool]) -> None:
        """Until ``until()`` holds after an event, or ``timeout`` seconds."""
        if until():
            return
        waiter = self._waiter = self.loop.create_future()
        self._until = until
        handle = self.loop.call_later(max(timeout, 0.0), _settle, waiter)
        try:
            await waiter
        finally:
            self._waiter = None
            self._until = _never
            handle.cancel()

    async def stop_group(self, grace: float) -> None:
        """TERM the group (the leader may be gone, its children not), KILL what is left after ``grace``."""
        pgid = self.popen.pid
        if self.exited and not group_alive(pgid):
            return
        _signal_group(pgid, signal.SIGTERM)
        end = time.monotonic() + grace
        while True:
            if self.exited and not group_alive(pgid):
                return
            left = end - time.monotonic()
            if left <= 0:
                break
            # the leader's exit wakes the run; leftovers of the group are looked for now and then
            if self.exited:
                await self.wait(min(left, _POLL), _never)
            else:
                await self.wait(left, self.has_exited)
        _signal_group(pgid, signal.SIGKILL)
        limit = max(grace, 1.0)
        await self._until_exited(limit)
        # SIGKILL is delivered when each member next runs: on a busy machine a killed member can
        # still show as running for a moment after the leader is gone. The call returns once
        # none does, so "stopped" means stopped.
        end = time.monotonic() + limit
        while group_alive(pgid) and (left := end - time.monotonic()) > 0:
            await self.wait(min(left, _POLL), _never)

    async def _until_exited(self, limit: float) -> None:
        end = time.monotonic() + limit
        while not self.exited and (left := end - time.monotonic()) > 0:
            await self.wait(left, self.has_exited)

    async def drain(self, grace: float) -> None:
        """Read what is left in the pipes until they end, for ``grace`` seconds at most."""
        end = time.monotonic() + grace
        while self._readers and (left := end - time.monotonic()) > 0:
            await self.wait(left, self.pipes_ended)

    async def close(self) -> None:
        """Release the pipes; kill and reap the program if it still runs (no zombie is left)."""
        self.release()
        if not self.exited:
            _signal_group(self.popen.pid, signal.SIGKILL)
            await self._until_exited(2.0)
        if not self.exited:  # stuck in the kernel: reaped off the loop when it dies
            self._close_pidfd()
            if self._reaper is None:
                threading.Thread(target=self.popen.wait, daemon=True).start()

    def release(self) -> None:
        """Stop watching and close the pipes (what is unread stays unread)."""
        for fd in list(self._readers):
            self._unwatch(fd)
        self._close_stdin()


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def group_alive(pgid: int) -> bool:
    """Whether a running (not zombie) member of group ``pgid`` is left."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        entries = os.scandir("/proc")
    except OSError:
        return True  # no procfs: trust kill(0)
    # Killed orphans are reaped by init, which in some containers takes seconds: their zombies
    # keep the group id alive but are not running.
    with entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as fh:
                    stat = fh.read()
            except OSError:
                continue
            fields = stat[stat.rfind(b")") + 2 :].split()
            if len(fields) > 2 and fields[2] == b"%d" % pgid and fields[0] not in (b"Z", b"X"):
                return True
    return False
