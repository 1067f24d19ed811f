"""What plugin code may raise without stopping the host, and which plugin a fault belongs to.

``SystemExit`` (argparse on a bad value, a stray ``sys.exit``), ``KeyboardInterrupt`` raised by
plugin code, and a plugin's own ``BaseException`` subclasses are the plugin's fault: they are
isolated like any exception. Only a real stop of the host passes: cancellation (the pipeline's
timeout, a client's cancel, shutdown), ``GeneratorExit``, and a ``KeyboardInterrupt`` while a
real SIGINT reached the host (``watch_interrupts`` counts them).
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import types
from collections.abc import Iterator
from typing import Any

_interrupts = 0
_modules: dict[str, str] = {}


def watch_interrupts() -> Any:
    """Count real SIGINTs from now on, wrapping whatever handler is installed (main thread only).

    Called once an event loop runs (after asyncio installed its own handler, which it does only
    over the default one). Returns the handler it replaced, or None when it installed nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        return None
    previous = signal.getsignal(signal.SIGINT)
    if not callable(previous) or getattr(previous, "_entropic_counts", False):
        return None

    def counting(signum: int, frame: types.FrameType | None) -> Any:
        global _interrupts
        _interrupts += 1
        return previous(signum, frame)

    counting._entropic_counts = True  # type: ignore[attr-defined]
    try:
        signal.signal(signal.SIGINT, counting)
    except ValueError:  # not the main interpreter
        return None
    return previous


@contextlib.contextmanager
def watching_interrupts() -> Iterator[None]:
    """``watch_interrupts`` while plugins import; the handler before it is put back after.

    Put back so that asyncio, started later, still installs its own Ctrl-C handling.
    """
    previous = watch_interrupts()
    try:
        yield
    finally:
        if previous is not None and getattr(signal.getsignal(signal.SIGINT), "_entropic_counts", False):
            signal.signal(signal.SIGINT, previous)


def stops_host(exc: BaseException) -> bool:
    """Whether ``exc``, raised while plugin code ran, must stop the host rather than be isolated."""
    if isinstance(exc, Exception):
        return False
    if isinstance(exc, BaseExceptionGroup):
        return any(stops_host(inner) for inner in exc.exceptions)
    if isinstance(exc, GeneratorExit):
        return True
    # Not imported for this: asyncio costs a listing its biggest import, and no CancelledError
    # can exist before its module is loaded.
    exceptions = sys.modules.get("asyncio.exceptions")
    cancelled = getattr(exceptions, "CancelledError", None)
    if cancelled is not None and isinstance(exc, cancelled):
        return True
    if isinstance(exc, KeyboardInterrupt):
        return _interrupts > 0
    return False


def reraise_host_stop(exc: BaseException) -> None:
    """Re-raise ``exc`` when it is a real stop of the host; return when it is the plugin's fault."""
    if stops_host(exc):
        raise exc


def describe(exc: BaseException) -> str:
    """``Type: message``, saying what a BaseException that is not an Exception tried to do."""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if isinstance(exc, SystemExit):
        return f"{text} (it tried to exit the host process; only this call failed)"
    if isinstance(exc, KeyboardInterrupt):
        return f"{text} (raised by the plugin, not a Ctrl-C of the host; only this call failed)"
    return text


# -- which plugin a module belongs to --------------------------------------------------------------


def note_plugin_module(module: str, plugin: str) -> None:
    """Remember that ``module`` (an entry point's module) is plugin ``plugin``'s code."""
    _modules[module] = plugin


def plugin_of_module(module: str | None) -> str | None:
    """The plugin whose code ``module`` is: its entry point's module, a submodule, or its package."""
    if not module:
        return None
    name = module
    while name:
        found = _modules.get(name)
        if found is not None:
            return found
        name = name.rpartition(".")[0]
    # A module of the same top-level package as exactly one plugin's entry point.
    top = module.partition(".")[0]
    owners = {plugin for mod, plugin in _modules.items() if mod.partition(".")[0] == top}
    return owners.pop() if len(owners) == 1 else None


def plugin_of_stack(frame: types.FrameType | None) -> str | None:
    """The innermost plugin whose code is on the stack from ``frame`` outwards."""
    while frame is not None:
        found = plugin_of_module(frame.f_globals.get("__name__"))
        if found is not None:
            return found
        frame = frame.f_back
    return None


def plugin_of_traceback(exc: BaseException) -> str | None:
    """The plugin whose code raised ``exc`` (the innermost plugin frame of its traceback)."""
    tb = exc.__traceback__
    found = None
    while tb is not None:
        owner = plugin_of_module(tb.tb_frame.f_globals.get("__name__"))
        if owner is not None:
            found = owner
        tb = tb.tb_next
    return found
