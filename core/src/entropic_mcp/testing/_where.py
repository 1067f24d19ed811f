"""Where a fault is: the file and line of a function, a class, or the frame an exception came from."""

from __future__ import annotations

import inspect
import sys
import traceback
from pathlib import Path
from typing import Any


def _short(path: str | None) -> str:
    """A path relative to the sys.path entry holding it (``pkg/mod.py``), or as given."""
    if not path:
        return "<unknown file>"
    resolved = Path(path)
    best: Path | None = None
    for entry in sys.path:
        if not entry:
            continue
        try:
            relative = resolved.relative_to(Path(entry).resolve())
        except (ValueError, OSError):
            continue
        if best is None or len(relative.parts) < len(best.parts):
            best = relative
    return str(best) if best is not None else str(resolved)


def of_function(function: Any) -> str:
    """``file:line`` where ``function`` (or a method, or a class) is defined."""
    target = inspect.unwrap(getattr(function, "__func__", function))
    try:
        path = inspect.getsourcefile(target)
        line = inspect.getsourcelines(target)[1]
    except (TypeError, OSError):
        return _short(getattr(inspect.getmodule(target), "__file__", None))
    return f"{_short(path)}:{line}"


def of_exception(exc: BaseException) -> str:
    """``file:line`` of the innermost frame that is not the standard library or the kit."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{_short(exc.filename)}:{exc.lineno}"
    frames = traceback.extract_tb(exc.__traceback__)
    # The standard library, the kit and the core are where an author's mistake surfaces, not where it is.
    library = (str(Path(inspect.__file__).parent), str(Path(__file__).parent.parent), "<frozen ")
    chosen = None
    for frame in frames:
        if not frame.filename.startswith(library):
            chosen = frame
    if chosen is None and frames:
        chosen = frames[-1]
    return f"{_short(chosen.filename)}:{chosen.lineno}" if chosen is not None else "<no traceback>"


def describe(exc: BaseException) -> str:
    """``TypeName: message (at file:line)``."""
    return f"{type(exc).__name__}: {exc} (at {of_exception(exc)})"


def definition_file(tool: Any, packages: tuple[str, ...] = ()) -> str | None:
    """The ``tools/<name>.json`` a tool's definition was loaded from, when one can be found."""
    import json
    from importlib import resources

    name = tool.definition.name
    candidates = [*packages, type(tool).__module__.partition(".")[0]]
    for package in dict.fromkeys(candidates):
        try:
            path = resources.files(package).joinpath("tools", f"{name}.json")
            if path.is_file() and json.loads(path.read_text("utf-8")).get("inputSchema") == dict(
                tool.definition.input_schema
            ):
                return _short(str(path))
        except Exception:
            continue
    return None
