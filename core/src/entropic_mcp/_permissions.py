"""Permission rules: deny, then ask, then allow, then the default; "always" answers persist."""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable, Sequence
from fnmatch import translate
from pathlib import Path
from typing import Literal

import attrs

from ._config import PermissionsConfig

Decision = Literal["allow", "ask", "deny"]


def _names(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


@attrs.frozen(kw_only=True)
class PermissionPart:
    """One thing a call does that rules are matched against.

    Args:
        names: the strings matched against rules (``"bash.execute"``, ``"bash.execute:rm x"``).
        store: the rule an "always" answer writes for this part.
        understood: False when the server could not fully analyse the part: an allow rule
            never allows it (it asks).
        neutral: True for a part that only matters when a rule names it (a bash redirection
            checked as a file write): unmatched, it neither asks nor allows.
    """

    names: tuple[str, ...] = attrs.field(converter=_names)
    store: str
    understood: bool = True
    neutral: bool = False


def _compile(patterns: Iterable[str]) -> re.Pattern[str] | None:
    patterns = list(patterns)
    if not patterns:
        return None
    # fnmatch.translate gives an anchored, case-sensitive regex per glob; one alternation
    # matches a name against every rule of a list in a single pass.
    return re.compile("|".join(f"(?:{translate(p)})" for p in patterns))


class PermissionRules:
    """Compiled allow/ask/deny rules plus the "always" answers added at run time."""

    def __init__(self, config: PermissionsConfig, local_path: Path | None = None) -> None:
        self.config = config
        self.local_path = local_path
        self.lists: dict[str, list[str]] = {
            "allow": list(config.allow),
            "ask": list(config.ask),
            "deny": list(config.deny),
        }
        self._lock = threading.Lock()
        self._recompile()

    def _recompile(self) -> None:
        self._compiled = {kind: _compile(rules) for kind, rules in self.lists.items()}
        self._cache: dict[tuple[object, ...], Decision | None] = {}

    def _matches(self, kind: str, names: Sequence[str]) -> bool:
        regex = self._compiled[kind]
        return regex is not None and any(regex.match(name) for name in names)

    def decide_part(self, part: PermissionPart, *, read_only: bool) -> Decision | None:
        key = (part.names, part.understood, part.neutral, read_only)
        try:
            return self._cache[key]
        except KeyError:
            pass
        decision = self._decide_part(part, read_only=read_only)
        if len(self._cache) > 8192:
            self._cache.clear()
        self._cache[key] = decision
        return decision

    def _decide_part(self, part: PermissionPart, *, read_only: bool) -> Decision | None:
        if self._matches("deny", part.names):
            return "deny"
        if self._matches("ask", part.names):
            return "ask"
        if self._matches("allow", part.names) or (read_only and self.config.allow_read):
            return "allow" if part.understood else "ask"
        if part.neutral:
            return None
        default: Decision = self.config.default  # type: ignore[assignment]  # validated at load
        return "ask" if default == "allow" and not part.understood else default

    def decide(self, parts: Sequence[PermissionPart], *, read_only: bool) -> tuple[Decision, list[PermissionPart]]:
        """The call's decision and the parts that need approval (for "always" answers)."""
        if len(parts) == 1:
            decision = self.decide_part(parts[0], read_only=read_only)
            if decision == "allow" or decision is None:
                return "allow", []
            if decision == "ask" and self.config.auto_approve:
                return "allow", []
            return decision, list(parts)
        decisions = [(part, self.decide_part(part, read_only=read_only)) for part in parts]
        if any(d == "deny" for _, d in decisions):
            return "deny", [p for p, d in decisions if d == "deny"]
        asking = [p for p, d in decisions if d == "ask"]
        if asking:
            if self.config.auto_approve:
                return "allow", []
            return "ask", asking
        return "allow", []

    def add(self, kind: Literal["allow", "deny"], patterns: Iterable[str]) -> list[str]:
        """Add rules in memory and in the local file (atomically, never duplicated)."""
        with self._lock:
            added = [p for p in dict.fromkeys(patterns) if p not in self.lists[kind]]
            if not added:
                return []
            if self.local_path is not None:
                persist_rules(self.local_path, kind, added)
            self.lists[kind].extend(added)
            self._recompile()
            return added


def persist_rules(path: Path, kind: str, patterns: Iterable[str]) -> None:
    """Append rules to ``[permissions] <kind>`` of a TOML file, keeping comments and layout.

    A file lock serialises writers between processes; the new text goes to a temporary file
    in the same directory and replaces the old one, so a reader never sees half a file.
    """
    import tempfile

    import filelock
    import tomlkit

    path.parent.mkdir(parents=True, exist_ok=True)
    with filelock.FileLock(str(path) + ".lock", timeout=30):
        document = tomlkit.parse(path.read_text("utf-8")) if path.exists() else tomlkit.document()
        table = document.get("permissions")
        if table is None:
            table = tomlkit.table()
            document["permissions"] = table
        rules = table.get(kind)
        if rules is None:
            rules = tomlkit.array()
            rules.multiline(True)
            table[kind] = rules
        for pattern in patterns:
            if pattern not in rules:
                rules.append(pattern)
        fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(tomlkit.dumps(document))
                fh.flush()
                os.fsync(fh.fileno())
            if path.exists():
                os.chmod(tmp, path.stat().st_mode & 0o7777)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
