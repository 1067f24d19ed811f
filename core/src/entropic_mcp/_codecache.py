"""Bytecode of the methods attrs generates, kept between runs of the command line.

attrs writes each class's ``__init__``, ``__repr__``, ``__eq__`` and ``__hash__`` as Python
source and compiles it when the class is defined: a hundred classes are defined by the time the
core and the first-party plugins are imported, and compiling their methods is about a fifth of
an ``entropic-mcp`` start-up that loads the plugins (``tools`` with the listing cache off: 831 M
instructions without this cache, 667 M with it; ``serve``).
Python keeps a module's bytecode in ``__pycache__``; this keeps the generated methods' the same way:
each code object under a hash of its source and file name, in one file per interpreter bytecode
format. A run loads the file once, compiles only what it does not hold, and
writes the file back at exit when it compiled something new.

Only the command line turns it on (``install``), before the core is imported, with a file in the
per-user data directory (a private directory no tool may write: the code loaded from it runs); a process that
imports the package itself (a host, a test) compiles as attrs does. Nothing changes but where a
code object comes from: the same source gives the same code object.
"""

from __future__ import annotations

import hashlib
import marshal
import os
import sys
import types
from typing import Any

#: The file's layout: ``{key: (code object, type hash written into it or None)}``.
FORMAT = 1
#: A file holding more than this many methods starts over (classes of many versions of the code).
MAX_ENTRIES = 4096

_codes: dict[str, Any] = {}
_new = False
_path: str | None = None


def _type_hash(filename: str) -> int | None:
    """The constant attrs writes into a class's ``__hash__``: ``hash()`` of a string, which differs
    from process to process (``PYTHONHASHSEED``); None for a name that is not attrs'."""
    prefix = "<attrs generated "
    if not filename.startswith(prefix) or not filename.endswith(">"):
        return None
    _, _, qualname = filename[len(prefix) : -1].partition(" ")
    base, dash, count = qualname.rpartition("-")  # linecache's suffix for a name used twice
    if dash and count.isdigit():
        qualname = base
    return hash(f"{prefix}hash {qualname}>")


def _rehash(value: Any, old: int, new: int) -> Any:
    """``value`` (a code object or a constant of one) with the int constant ``old`` made ``new``."""
    if isinstance(value, types.CodeType):
        return value.replace(co_consts=tuple(_rehash(c, old, new) for c in value.co_consts))
    if type(value) is tuple:
        return tuple(_rehash(c, old, new) for c in value)
    if type(value) is int and value == old:
        return new
    return value


def _compile_and_eval(script: str, globs: Any, locs: Any = None, filename: str = "") -> None:
    """``attr._make._compile_and_eval``, with the compiled script taken from the cache when there.

    The key is the script with the class's type hash taken out, so that a script differs from
    the last run's only by it; the cached code object gets this process's constant back.
    """
    global _new
    type_hash = _type_hash(filename)
    literal = str(type_hash) if type_hash is not None else ""
    keyed = script.replace(literal, "<type hash>") if literal and literal in script else script
    key = hashlib.sha256(f"{filename}\0{keyed}".encode("utf-8", "surrogatepass")).hexdigest()
    entry = _codes.get(key)
    if entry is None:
        code = compile(script, filename, "exec")
        _codes[key] = (code, type_hash if keyed is not script else None)
        _new = True
    else:
        code, stored = entry
        if stored is not None and type_hash is not None and stored != type_hash:
            code = _rehash(code, stored, type_hash)
    eval(code, globs, locs)


def install(directory: str) -> bool:
    """Take attrs' generated methods from ``directory`` from now on; False where attrs differs.

    Replaces ``attr._make._compile_and_eval`` (attrs 24 to 26 compile every generated method
    through it) only when it has the signature this module replaces it with.
    """
    global _path
    if _path is not None:
        return True
    import importlib.util
    import inspect

    from attr import _make

    original = getattr(_make, "_compile_and_eval", None)
    if original is None or list(inspect.signature(original).parameters) != ["script", "globs", "locs", "filename"]:
        return False
    tag = importlib.util.MAGIC_NUMBER.hex()
    # Not named by attrs' version: ``attr.__version__`` imports importlib.metadata (and email,
    # socket), and the same source compiles to the same code whichever attrs wrote it.
    _path = os.path.join(directory, f"attrs-v{FORMAT}-{sys.implementation.cache_tag}-{tag}.marshal")
    try:
        with open(_path, "rb") as fh:
            loaded = marshal.loads(fh.read())
        if isinstance(loaded, dict):
            _codes.update(
                (key, entry)
                for key, entry in loaded.items()
                if type(entry) is tuple and len(entry) == 2 and isinstance(entry[0], types.CodeType)
            )
    except (OSError, EOFError, ValueError, TypeError):
        pass  # none yet, or unreadable: compiled as attrs does and written anew
    _make._compile_and_eval = _compile_and_eval
    import atexit

    atexit.register(_save)
    return True


def _save() -> None:
    if not _new or _path is None:
        return
    codes = _codes if len(_codes) <= MAX_ENTRIES else {}
    try:
        os.makedirs(os.path.dirname(_path), mode=0o700, exist_ok=True)
        partial = f"{_path}.{os.getpid()}.tmp"
        with open(partial, "wb") as fh:
            fh.write(marshal.dumps(codes))
        os.replace(partial, _path)
    except (OSError, ValueError):
        pass  # a cache that cannot be written only costs the next run its compiling
