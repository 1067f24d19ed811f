"""A compiled index of glob rules whose per-name cost does not grow with rules that cannot match.

Every rule is a glob (``fnmatch`` syntax, case-sensitive, ``*`` crossing ``/``) over a part's
names (``bash.execute:rm -rf x``, ``filesystem.read_file:src/a.py``). A name can only match a rule
whose literal prefix (the text before its first ``*``, ``?`` or ``[``) it starts with, so the
rules hang in a trie of those prefixes: matching walks the name down the trie as far as it goes
and tries only the rules met on the way. A team's thousand rules for other tools, other commands
or other directories cost nothing per call; only rules that begin with a wildcard are tried for
every name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from fnmatch import translate

_WILD = re.compile(r"[*?\[]")


def literal_prefix(rule: str) -> str:
    """The text a name must start with to match ``rule`` (before its first wildcard)."""
    found = _WILD.search(rule)
    return rule if found is None else rule[: found.start()]


_Entry = tuple[int, str, "re.Pattern[str]"]
#: Past this many rules for one tool, a bucket is searched through a trie of literal prefixes.
_TRIE_FROM = 16


def _alternation(entries: Sequence[_Entry]) -> re.Pattern[str]:
    # one pass tells whether any rule of a group matches, before finding which one
    return re.compile("|".join(f"(?:{single.pattern})" for _, _, single in entries))


def _first_of(entries: Sequence[_Entry], name: str, best: int) -> int:
    """The index of the first entry before ``best`` matching ``name`` (``best`` if none)."""
    for index, _, single in entries:
        if index >= best:
            break
        if single.match(name):
            return index
    return best


class _Node:
    __slots__ = ("children", "combined", "entries")

    def __init__(self) -> None:
        self.children: dict[str, _Node] = {}
        self.entries: list[_Entry] = []
        self.combined: re.Pattern[str] | None = None


class _Bucket:
    """The rules of one tool (what precedes the first ``:`` of a name), in order."""

    __slots__ = ("combined", "entries", "plain", "root", "start", "trie_from")

    def __init__(self, start: int, trie_from: int) -> None:
        self.start = start  # where the text after the ``:`` begins in a name of this tool
        self.trie_from = trie_from
        self.entries: list[tuple[_Entry, str]] = []
        self.plain: list[_Entry] = []
        self.combined: re.Pattern[str] | None = None
        self.root: _Node | None = None

    def finish(self) -> None:
        if len(self.entries) < self.trie_from:
            self.plain = [entry for entry, _ in self.entries]
            self.combined = _alternation(self.plain)
            return
        self.root = _Node()
        for entry, rest in self.entries:
            node = self.root
            for char in rest:
                node = node.children.setdefault(char, _Node())
            node.entries.append(entry)
        stack = [self.root]
        while stack:
            node = stack.pop()
            if node.entries:
                node.combined = _alternation(node.entries)
            stack.extend(node.children.values())

    def first(self, name: str, best: int) -> int:
        if self.root is None:
            if self.combined is not None and self.combined.match(name):
                return _first_of(self.plain, name, best)
            return best
        node: _Node | None = self.root
        position = self.start
        while node is not None:
            if node.combined is not None and node.combined.match(name):
                best = _first_of(node.entries, name, best)
            if position >= len(name):
                break
            node = node.children.get(name[position])
            position += 1
        return best


class RuleIndex:
    """The rules of one kind (allow, ask or deny), in their order, ready to match names.

    ``first(names)`` answers what ``next(r for r in rules if any(fnmatchcase(n, r) for n in names))``
    would. Rules are grouped by the tool their literal prefix names (the text before the first
    ``:``), and a tool's many rules by a trie of the rest of that prefix; only rules that leave
    the tool itself to a wildcard (``bash.*``, ``*:secret*``) are tried against every name.
    """

    __slots__ = ("_buckets", "_loose", "_loose_combined", "_rules", "size")

    def __init__(self, rules: Iterable[str], *, trie_from: int = _TRIE_FROM) -> None:
        self._rules = list(rules)
        self.size = len(self._rules)
        self._buckets: dict[str, _Bucket] = {}
        self._loose: list[_Entry] = []
        for index, rule in enumerate(self._rules):
            entry: _Entry = (index, rule, re.compile(translate(rule)))
            prefix = literal_prefix(rule)
            tool, colon, rest = prefix.partition(":")
            if colon or prefix == rule:
                bucket = self._buckets.get(tool)
                if bucket is None:
                    bucket = self._buckets[tool] = _Bucket(len(tool) + 1, trie_from)
                bucket.entries.append((entry, rest))
            else:
                self._loose.append(entry)
        for bucket in self._buckets.values():
            bucket.finish()
        self._loose_combined = _alternation(self._loose) if self._loose else None

    def first(self, names: Sequence[str]) -> str | None:
        """The first rule, in the order given, that matches any of ``names`` (None: none does)."""
        best = self.size
        buckets = self._buckets
        loose = self._loose_combined
        for name in names:
            bucket = buckets.get(name.partition(":")[0])
            if bucket is not None:
                best = bucket.first(name, best)
            if loose is not None and loose.match(name):
                best = _first_of(self._loose, name, best)
        return None if best == self.size else self._rules[best]
