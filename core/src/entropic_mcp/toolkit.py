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

import asyncio
import os
import signal
import subprocess
import threading
import time
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar, overload

import attrs

from ._errors import ConfigError, ToolError

__all__ = [
    "HeadTail",
    "ProcessResult",
    "choice",
    "flag",
    "integer",
    "number",
    "result_limit",
    "run_process",
    "run_process_sync",
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
        if required:
            raise ToolError("invalid_args", f"missing required argument '{name}' (a string)")
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
        if default is None and required:
            raise ToolError("invalid_args", f"missing required argument '{name}' (an integer)")
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
        if required:
            raise ToolError("invalid_args", f"missing required argument '{name}' (a list of strings)")
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
    (typos must not pass silently) except ``extra_keys`` (what the server base handles itself,
    e.g. ``timeout_seconds``).

    Raises:
        ConfigError: naming the file (``source``), the table and key, and what was expected.
    """
    if not attrs.has(cls):
        raise TypeError(f"settings_from_table needs an attrs class, got {cls!r}")
    where = f"{source}: " if source else ""
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where}[servers.{server}] must be a table, got {type(table).__name__}")
    fields = {field.alias or field.name: field for field in attrs.fields(cls) if field.init}
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


#: How often a run checks the synchronous cancellation flag.
_POLL = 0.05


async def run_process(
    argv: Sequence[str],
    *,
    cwd: str | Path,
    timeout: float,
    max_output_bytes: int = 64 * 1024,
    env: Mapping[str, str] | None = None,
    cancelled: threading.Event | None = None,
    grace: float = 2.0,
    merge_stderr: bool = False,
    stdin: bytes | None = None,
    stop_at_cap: bool = False,
    on_output: Callable[[bytes], None] | None = None,
) -> ProcessResult:
    """Run ``argv`` (no shell) as the leader of a new process group and wait for it.

    On ``timeout`` seconds, on ``cancelled`` being set (pass ``ctx.cancelled``) or when the
    awaiting task is cancelled, the whole group gets SIGTERM, then SIGKILL after ``grace``
    seconds; so does anything the program left running in its group when it exits. stdout
    (and stderr, or both together with ``merge_stderr``) keep their head and tail within
    ``max_output_bytes`` each.

    With ``stop_at_cap`` the program is stopped (its group, as above) once stdout passes the cap,
    and stdout keeps its head only (``stopped_at_cap`` on the result; ``ok`` stays true): for
    output whose beginning is what matters, like ``git log``. ``on_output`` is called on the
    event loop with each piece of stdout as it arrives (for progress reports).

    Raises:
        ToolError: ``not_found`` when the program does not exist or cannot be run.
    """
    started = time.monotonic()
    argv = tuple(argv)
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=str(cwd),
            env=dict(env) if env is not None else None,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
            start_new_session=True,
        )
    except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
        raise ToolError("not_found", f"cannot run {argv[0]!r}: {exc.strerror or exc}") from None
    out = HeadTail(max_output_bytes, keep_tail=not stop_at_cap)
    err = None if merge_stderr else HeadTail(max_output_bytes)
    overflow = asyncio.Event()
    readers = [asyncio.ensure_future(_pump(proc.stdout, out, on_output, overflow if stop_at_cap else None))]
    if err is not None:
        readers.append(asyncio.ensure_future(_pump(proc.stderr, err, None, None)))
    if stdin is not None:
        readers.append(asyncio.ensure_future(_feed(proc, stdin)))
    timed_out = was_cancelled = capped = False
    exited = asyncio.ensure_future(_wait_exit(proc))
    overflowed = asyncio.ensure_future(overflow.wait())
    try:
        deadline = started + timeout
        while not exited.done():
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            if cancelled is not None and cancelled.is_set():
                was_cancelled = True
                break
            if overflow.is_set():
                capped = True
                break
            await asyncio.wait(
                {exited, overflowed},
                timeout=min(left, _POLL) if cancelled is not None else left,
                return_when=asyncio.FIRST_COMPLETED,
            )
        await _stop_group(proc, grace)
        # A program that left the group (setsid) may still hold the pipes: read for a grace at most.
        await asyncio.wait(readers, timeout=grace)
    except asyncio.CancelledError:
        await _despite_cancellation(_stop_group(proc, grace))
        raise
    finally:
        exited.cancel()
        overflowed.cancel()
        for reader in readers:
            reader.cancel()
        try:
            if proc.returncode is None:
                _signal_group(proc.pid, signal.SIGKILL)
                await _despite_cancellation(_wait_exit(proc))
        finally:
            transport = getattr(proc, "_transport", None)
            if transport is not None:  # pipes a setsid'd grandchild still holds are closed on our side
                transport.close()
    return ProcessResult(
        argv=argv,
        exit_code=None if timed_out or was_cancelled else proc.returncode,
        stdout=out,
        stderr=err,
        elapsed=time.monotonic() - started,
        timed_out=timed_out,
        cancelled=was_cancelled,
        stopped_at_cap=capped,
    )


def run_process_sync(argv: Sequence[str], **options: Any) -> ProcessResult:
    """``run_process`` for a synchronous tool (which runs in a worker thread with no event loop)."""
    return asyncio.run(run_process(argv, **options))


async def _despite_cancellation(coro: Any) -> None:
    """Run ``coro`` (a bounded clean-up) to its end even if the caller is cancelled meanwhile —
    anyio repeats a cancellation at every await until the task ends, so ``asyncio.shield``
    alone would abandon it — then pass the cancellation on."""
    task = asyncio.ensure_future(coro)
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def _wait_exit(proc: asyncio.subprocess.Process) -> None:
    """Until the program has exited (``proc.wait()`` also waits for its pipes to close, which a
    child left running may hold open)."""
    loop = asyncio.get_running_loop()
    signalled: asyncio.Future[None] = loop.create_future()
    pidfd: int | None = None
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        pass
    else:
        loop.add_reader(pidfd, _settle, signalled)
    try:
        while proc.returncode is None:
            if pidfd is not None and not signalled.done():
                await asyncio.wait({signalled}, timeout=_POLL)
            else:  # exited: asyncio's child watcher sets the return code a moment later
                await asyncio.sleep(0.002 if pidfd is not None else _POLL)
    finally:
        if pidfd is not None:
            loop.remove_reader(pidfd)
            os.close(pidfd)
        if not signalled.done():
            signalled.cancel()


async def _pump(
    stream: asyncio.StreamReader | None,
    sink: HeadTail,
    on_output: Callable[[bytes], None] | None,
    overflow: asyncio.Event | None,
) -> None:
    if stream is None:
        return
    while True:
        data = await stream.read(65536)
        if not data:
            return
        sink.feed(data)
        if on_output is not None:
            on_output(data)
        if overflow is not None and sink.total > sink.limit:
            overflow.set()
            return


async def _feed(proc: asyncio.subprocess.Process, data: bytes) -> None:
    assert proc.stdin is not None
    try:
        proc.stdin.write(data)
        await proc.stdin.drain()
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        proc.stdin.close()


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


async def _stop_group(proc: asyncio.subprocess.Process, grace: float) -> None:
    """TERM the group (the leader may be gone, its children not), KILL what is left after ``grace``."""
    if proc.returncode is not None and not _group_alive(proc.pid):
        return
    _signal_group(proc.pid, signal.SIGTERM)
    end = time.monotonic() + grace
    while time.monotonic() < end:
        if proc.returncode is not None and not _group_alive(proc.pid):
            return
        await asyncio.sleep(_POLL)
    _signal_group(proc.pid, signal.SIGKILL)
    if proc.returncode is None:
        await _wait_exit(proc)


def _group_alive(pgid: int) -> bool:
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
