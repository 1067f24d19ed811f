"""Entry points of one group, found the way ``importlib_metadata.entry_points(group=...)`` finds them.

Importing ``importlib_metadata`` and asking it costs a plugin-loading start-up (``entropic-mcp
tools``) about a fifth of its time: the module with the zip, email and CSV machinery behind it,
and an object per distribution and per entry point of every installed package. Here the
``sys.path`` directories are listed and each ``*.dist-info/entry_points.txt`` is read as text.

The answer is the same as ``importlib_metadata``'s: distributions in ``sys.path`` order, grouped
by normalised name within a directory, the first of a name kept (one with metadata ahead of one
without), and entry points in file order. Whatever this does not read the same way — a zip file
or an egg on the path, an ``.egg-info`` that provides the group, a finder on ``sys.meta_path``
that finds distributions of its own, a ``sys.path`` entry that is not a string — is handed to
``importlib_metadata`` whole.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any

#: ``importlib_metadata.EntryPoint.pattern``: ``module[:attr] [extras]``.
_VALUE = re.compile(r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?$")
_INFO = (".dist-info", ".egg-info")
#: Finders whose distributions are the ``sys.path`` directories' (``importlib_metadata`` adds
#: its own, which finds the same ones).
_PATH_FINDERS = frozenset({"PathFinder", "MetadataPathFinder"})


class FoundEntryPoint:
    """An entry point read from ``<folder>/entry_points.txt`` (``folder``: the ``.dist-info``)."""

    __slots__ = ("folder", "group", "name", "value")

    def __init__(self, name: str, value: str, group: str, folder: str) -> None:
        self.name = name
        self.value = value
        self.group = group
        self.folder = folder

    @property
    def module(self) -> str | None:
        match = _VALUE.match(self.value)
        return match.group("module") if match else None

    def load(self) -> Any:
        """Import the module and return the attribute named (as ``EntryPoint.load`` does)."""
        import importlib

        match = _VALUE.match(self.value)
        module = importlib.import_module(match.group("module"))  # type: ignore[union-attr]
        found: Any = module
        for attribute in filter(None, (match.group("attr") or "").split(".")):  # type: ignore[union-attr]
            found = getattr(found, attribute)
        return found

    def __repr__(self) -> str:
        return f"FoundEntryPoint(name={self.name!r}, value={self.value!r}, group={self.group!r})"


def entry_points(group: str) -> list[Any]:
    """The entry points of ``group`` of every installed distribution (see the module's docstring)."""
    found = _scan(group)
    if found is None:
        import importlib_metadata

        return list(importlib_metadata.entry_points(group=group))
    return found


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower().replace("-", "_")


def _scan(group: str) -> list[FoundEntryPoint] | None:
    """None when something on the path is not plain directories of ``.dist-info``s."""
    for finder in sys.meta_path:
        if getattr(finder, "find_distributions", None) is not None and _name(finder) not in _PATH_FINDERS:
            return None
    # Every distribution folder by normalised name, in the order importlib_metadata meets them.
    folders: dict[str, list[str]] = {}
    for entry in sys.path:
        if not isinstance(entry, str):
            return None
        root = entry or "."
        if os.path.basename(root).lower().endswith(".egg"):
            return None
        try:
            children = os.listdir(root)
        except NotADirectoryError:
            return None  # a zip file on the path
        except OSError:
            continue
        within: dict[str, list[str]] = {}
        for child in children:
            low = child.lower()
            if low.endswith(_INFO):
                name = _normalize(low.rpartition(".")[0].partition("-")[0])
                within.setdefault(name, []).append(os.path.join(entry, child) if entry else child)
        for name, paths in within.items():
            folders.setdefault(name, []).extend(paths)
    valid: list[FoundEntryPoint] = []
    invalid: list[FoundEntryPoint] = []
    for paths in folders.values():
        chosen = paths[0]
        if len(paths) > 1:  # the first with metadata wins over an earlier one without
            chosen = next((p for p in paths if _has_metadata(p)), chosen)
        points = _read(chosen, group)
        if points is None:
            return None
        if points:
            (valid if _has_metadata(chosen) else invalid).extend(points)
    return valid + invalid


def _name(finder: object) -> str:
    return getattr(finder, "__name__", None) or type(finder).__name__


def _has_metadata(folder: str) -> bool:
    return (
        os.path.exists(os.path.join(folder, "METADATA"))
        or os.path.exists(os.path.join(folder, "PKG-INFO"))
        or os.path.isfile(folder)
    )


def _read(folder: str, group: str) -> list[FoundEntryPoint] | None:
    """The group's entry points in ``folder``; None for what is left to ``importlib_metadata`` (an
    ``.egg-info`` that provides the group, a file it would refuse)."""
    try:
        with open(os.path.join(folder, "entry_points.txt"), encoding="utf-8") as fh:
            text = fh.read()
    except UnicodeDecodeError:
        return None
    except OSError:
        return []
    points: list[FoundEntryPoint] = []
    section = None
    for line in map(str.strip, text.splitlines()):
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line.strip("[]")
            continue
        if section is None:
            continue
        if "=" not in line:
            return None
        if section == group:
            name, _, value = line.partition("=")
            points.append(FoundEntryPoint(name.strip(), value.strip(), group, folder))
    if points and not folder.lower().endswith(".dist-info"):
        return None
    return points
