"""Permission rules: deny, then ask, then allow, then the default; "always" answers persist."""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import attrs

from .._config import PermissionsConfig
from .._rulematch import RuleIndex

if TYPE_CHECKING:
    from .._config import Config

Decision = Literal["allow", "ask", "deny"]


def _names(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


@attrs.frozen(kw_only=True, cache_hash=True)
class PermissionPart:
    """One thing a call does that rules are matched against.

    Args:
        names: the strings matched against rules (``"bash.execute"``, ``"bash.execute:rm x"``).
        store: the rule an "always" answer writes for this part.
        understood: False when the server could not fully analyse the part: an allow rule
            never allows it (it asks).
        neutral: True for a part that only matters when a rule names it (a bash redirection
            checked as a file write): unmatched, it neither asks nor allows.
        protected: True for a write to one of entropic-mcp's own policy files by name: denied
            unless an allow rule names it explicitly (no default, ``allow_read``, ``auto_approve``
            or approval opens it — the agent must not rewrite its own permissions).
        contained: True when the part is a program its server runs inside the OS sandbox
            whenever one is active (a bash command): while that server's sandbox is active, an
            allow rule matching the part allows it even when it is not fully understood, because
            the kernel bounds what it can do (docs/sandbox.md). Deny and ask rules still apply.
        access: ``"read"`` or ``"write"`` for a file access (``path_part``), else None.
        paths: a file access's spellings (root-relative or absolute): the rules judge them by
            identity against the files the host actually loaded and the store
            (``ProtectedPaths``), whatever their names.
    """

    names: tuple[str, ...] = attrs.field(converter=_names)
    store: str
    understood: bool = True
    neutral: bool = False
    protected: bool = False
    access: str | None = None
    paths: tuple[str, ...] = attrs.field(default=(), converter=_names)
    contained: bool = False


class PreparedParts(list[PermissionPart]):
    """A server's ``permission_parts`` answer, with what working the parts out found.

    ``permission_parts`` may return one in place of a plain list when the tool will need what
    the check computed (a canonical path, an environment): the permission stage hands
    ``prepared`` to the tool as ``ctx.prepared_for(args)``, so the tool uses what was judged
    instead of working it out a second time (and a link flipped in between changes nothing).

    Args:
        parts: the parts, as a plain ``permission_parts`` list.
        prepared: any value; the tool receives it unchanged.
    """

    def __init__(self, parts: Iterable[PermissionPart] = (), prepared: object = None) -> None:
        super().__init__(parts)
        self.prepared = prepared


@attrs.frozen(kw_only=True)
class PartVerdict:
    """How the rules answered one part: the decision and the rule that decided it (None: default)."""

    part: PermissionPart
    decision: Decision | None
    rule: str | None = None
    #: deny | ask | allow | allow_read | sandboxed | default | protected | private | not_understood
    kind: str | None = None


@attrs.frozen(kw_only=True)
class Verdict:
    """How the rules answered a whole call.

    ``asking`` holds the parts that need approval (deny: the denied parts); ``verdicts`` every
    part's own answer, so messages can name the rule that matched.
    """

    decision: Decision
    asking: tuple[PermissionPart, ...] = ()
    verdicts: tuple[PartVerdict, ...] = ()

    def rules(self) -> list[str]:
        """The rules that matched the parts in ``asking``, in order, without repeats."""
        wanted = set(self.asking)
        return list(dict.fromkeys(v.rule for v in self.verdicts if v.part in wanted and v.rule))

    @property
    def always_effective(self) -> bool:
        """Whether an "always allow" answer would take effect on the next identical call.

        It would not when an explicit ``ask`` rule matched (ask is checked before allow), when
        a part was not fully understood (allow rules never allow those, except a contained part
        while its server's sandbox is active), or for protected parts.
        """
        wanted = set(self.asking)
        return all(
            v.kind not in ("ask", "protected", "private")
            and (v.part.understood or (v.part.contained and _sandbox_active(v.part)))
            and not v.part.protected
            for v in self.verdicts
            if v.part in wanted
        )


def _key(path: str) -> str:
    # Compared case-insensitively everywhere: on a case-insensitive file system ENTROPIC-MCP.TOML
    # is the policy file; on a case-sensitive one, refusing a look-alike name costs nothing.
    return os.path.normcase(path).casefold()


def _within(key: str, directory: str) -> bool:
    return key == directory or key.startswith(directory.rstrip(os.sep) + os.sep)


class ProtectedPaths:
    """What tools may not touch, by identity rather than by name.

    ``files`` (the config files actually loaded, whatever their names, the local file, the
    ``.mcp.json``, the root's ``.entropicignore``): no tool writes them, nor moves or deletes a
    directory holding them; only an allow rule naming the file opens one. ``private`` (the
    store, the per-user data directory): no tool reads or writes anything in them, no rule opens
    them. Each spelling of a path is resolved (``..``, symbolic links) when judged, so a link
    made or flipped after the rules were read still leads to the file it names; a hard link to
    a protected file is caught by its inode.

    Args:
        root: the project root (relative spellings are relative to it).
        files: the protected files.
        private: the private directories.
    """

    def __init__(self, root: Path, files: Iterable[Path] = (), private: Iterable[Path] = ()) -> None:
        self.root = Path(os.path.realpath(root))
        self.files = tuple(dict.fromkeys(Path(os.path.realpath(p)) for p in files))
        self.private = tuple(dict.fromkeys(Path(os.path.realpath(p)) for p in private))
        self._file_keys = frozenset(_key(str(p)) for p in self.files)
        self._private_keys = tuple(_key(str(p)) for p in self.private)
        self._root_key = _key(str(self.root))

    @classmethod
    def of(cls, config: Config) -> ProtectedPaths:
        """The protected set of a loaded config (``Config.policy_files``, ``Config.private_dirs``)."""
        return cls(config.root, config.policy_files, config.private_dirs)

    def _resolve(self, spelling: str) -> str | None:
        try:
            path = spelling if os.path.isabs(spelling) else os.path.join(self.root, spelling)
            return os.path.realpath(path)
        except (ValueError, OSError):
            return None

    def judge(self, access: str, spellings: Iterable[str]) -> Literal["protected", "private"] | None:
        """``"private"`` for a path in a private directory, ``"protected"`` for a write of a
        protected file (or of a directory holding one), else None."""
        spellings = tuple(spellings)
        # The spellings of one part name one file (path_part): resolving the absolute one is enough.
        absolute = [s for s in spellings if os.path.isabs(s)]
        for spelling in absolute[:1] or spellings:
            resolved = self._resolve(spelling)
            if resolved is None:
                continue
            key = _key(resolved)
            if any(_within(key, d) for d in self._private_keys):
                return "private"
            if access != "write":
                continue
            if key in self._file_keys:
                return "protected"
            if key == self._root_key:
                continue  # the root holds .mcp.json and .entropicignore; no tool moves or deletes it
            if any(_within(f, key) for f in self._file_keys):
                return "protected"  # moving or deleting a directory that holds a policy file
            if any(_within(d, key) for d in self._private_keys):
                return "private"  # ... or the store
            if self._same_inode(resolved):
                return "protected"
        return None

    def _same_inode(self, path: str) -> bool:
        try:
            info = os.stat(path)
        except (OSError, ValueError):
            return False
        if info.st_nlink < 2:
            return False  # not a hard link: its path (checked above) is its only name
        for protected in self.files:
            try:
                other = os.stat(protected)
            except OSError:
                continue
            if (other.st_dev, other.st_ino) == (info.st_dev, info.st_ino):
                return True
        return False


#: Whether the installed OS sandbox confines a server's programs (None: none is installed). The
#: sandbox sets it on install: it consults these rules, so they learn of it from it, not by import.
_confined: Callable[[str], bool] | None = None


def confine_with(probe: Callable[[str], bool] | None) -> None:
    """Tell the rules which servers' programs run confined (the sandbox's install does; None: none)."""
    global _confined
    _confined = probe


def _sandbox_active(part: PermissionPart) -> bool:
    probe = _confined
    return probe is not None and probe(part.store.partition(".")[0])


class PermissionRules:
    """Compiled allow/ask/deny rules plus the "always" answers added at run time."""

    def __init__(
        self, config: PermissionsConfig, local_path: Path | None = None, *, protected: ProtectedPaths | None = None
    ) -> None:
        self.config = config
        self.local_path = local_path
        #: Judged by identity on every file access, before any cache (links change under it).
        self.protected = protected
        self.lists: dict[str, list[str]] = {
            "allow": list(config.allow),
            "ask": list(config.ask),
            "deny": list(config.deny),
        }
        self._lock = threading.Lock()
        self._recompile()

    version = 0

    def _recompile(self) -> None:
        self.version += 1
        # Indexed by the tool and literal prefix each rule names: a call costs the same with a
        # thousand rules for other tools, commands and directories as with ten (bench P18).
        self._index = {kind: RuleIndex(rules) for kind, rules in self.lists.items()}
        self._cache: dict[tuple[object, ...], PartVerdict] = {}
        self._judged: dict[tuple[object, ...], Verdict] = {}

    def _match(self, kind: str, names: Sequence[str]) -> str | None:
        """The first rule of ``kind`` matching any of ``names`` (None when none does)."""
        return self._index[kind].first(names)

    def verdict(self, part: PermissionPart, *, read_only: bool) -> PartVerdict:
        """One part's decision and the rule behind it (cached: rules change only by ``add``)."""
        if self.protected is not None and part.paths and part.access is not None:
            shield = self.protected.judge(part.access, part.paths)
            if shield is not None:
                return self._shielded(part, shield)
        key = (part, read_only)
        try:
            return self._cache[key]
        except KeyError:
            pass
        verdict = self._verdict(part, read_only=read_only)
        if len(self._cache) > 8192:
            self._cache.clear()
        self._cache[key] = verdict
        return verdict

    def decide_part(self, part: PermissionPart, *, read_only: bool) -> Decision | None:
        return self.verdict(part, read_only=read_only).decision

    def _shielded(self, part: PermissionPart, shield: str) -> PartVerdict:
        rule = self._match("deny", part.names)
        if rule is not None:
            return PartVerdict(part=part, decision="deny", rule=rule, kind="deny")
        if shield == "private":
            return PartVerdict(part=part, decision="deny", kind="private")
        return self._policy_file(part)

    def _policy_file(self, part: PermissionPart) -> PartVerdict:
        # Only a rule that names the policy file itself opens it: `filesystem.*` does not.
        base = part.store.rpartition("/")[2].rpartition(":")[2]
        rule = self._match("allow", part.names)
        if rule is not None and base and base in rule and part.understood:
            return PartVerdict(part=part, decision="allow", rule=rule, kind="allow")
        return PartVerdict(part=part, decision="deny", kind="protected")

    def _verdict(self, part: PermissionPart, *, read_only: bool) -> PartVerdict:
        rule = self._match("deny", part.names)
        if rule is not None:
            return PartVerdict(part=part, decision="deny", rule=rule, kind="deny")
        if part.protected:
            return self._policy_file(part)
        rule = self._match("ask", part.names)
        if rule is not None:
            return PartVerdict(part=part, decision="ask", rule=rule, kind="ask")
        rule = self._match("allow", part.names)
        if rule is not None or (read_only and self.config.allow_read):
            if part.understood:
                return PartVerdict(part=part, decision="allow", rule=rule, kind="allow" if rule else "allow_read")
            if rule is not None and part.contained and _sandbox_active(part):
                return PartVerdict(part=part, decision="allow", rule=rule, kind="sandboxed")
            return PartVerdict(part=part, decision="ask", rule=rule, kind="not_understood")
        if part.neutral:
            return PartVerdict(part=part, decision=None)
        default: Decision = self.config.default  # type: ignore[assignment]  # validated at load
        if default == "allow" and not part.understood:
            return PartVerdict(part=part, decision="ask", kind="not_understood")
        return PartVerdict(part=part, decision=default, kind="default")

    def judge(self, parts: Sequence[PermissionPart], *, read_only: bool) -> Verdict:
        """The call's verdict: deny if any part is denied, else ask if any asks, else allow."""
        if self.protected is not None and any(part.paths for part in parts):
            return self._judge(parts, read_only=read_only)  # identity is judged afresh (links change)
        key = (tuple(parts), read_only)
        judged = self._judged.get(key)
        if judged is None:
            judged = self._judge(parts, read_only=read_only)
            if len(self._judged) > 8192:
                self._judged.clear()
            self._judged[key] = judged
        return judged

    def refusal(self, parts: Sequence[PermissionPart], *, read_only: bool) -> Verdict | None:
        """The deny verdict of ``parts`` when a deny rule or a shield (protected, private) refuses
        one of them, else None; a default ``deny`` does not count.

        What holds a plugin's pattern answer (the hook) to the server's own parts: each part is
        looked at once, and the verdict is only built for a refusal, so the call is judged once,
        on the parts its answer names.
        """
        verdicts = tuple(self.verdict(part, read_only=read_only) for part in parts)
        if any(v.kind in RULE_REFUSALS for v in verdicts):
            return self._combine(verdicts)
        return None

    def _judge(self, parts: Sequence[PermissionPart], *, read_only: bool) -> Verdict:
        return self._combine(tuple(self.verdict(part, read_only=read_only) for part in parts))

    def _combine(self, verdicts: tuple[PartVerdict, ...]) -> Verdict:
        denied = tuple(v.part for v in verdicts if v.decision == "deny")
        if denied:
            return Verdict(decision="deny", asking=denied, verdicts=verdicts)
        asking = tuple(v.part for v in verdicts if v.decision == "ask")
        if asking and not self.config.auto_approve:
            return Verdict(decision="ask", asking=asking, verdicts=verdicts)
        return Verdict(decision="allow", verdicts=verdicts)

    def decide(self, parts: Sequence[PermissionPart], *, read_only: bool) -> tuple[Decision, list[PermissionPart]]:
        """The call's decision and the parts that need approval (for "always" answers)."""
        verdict = self.judge(parts, read_only=read_only)
        return verdict.decision, list(verdict.asking)

    def path_refused(self, access: str, path: str, *, also: Iterable[str] = ()) -> str | None:
        """The deny or ask rule matching one file a walking tool would open (None: not refused)."""
        part = path_part(access, path, also=also, neutral=True)  # type: ignore[arg-type]
        verdict = self.verdict(part, read_only=access == "read")
        if verdict.decision in ("deny", "ask") and verdict.kind in ("deny", "ask"):
            return verdict.rule
        if verdict.kind in REFUSALS:
            return REFUSALS[verdict.kind]
        return None

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


# -- path rules by kind of access -------------------------------------------------------------

#: Tools that read files: a read rule on a path covers every one of them.
READ_PATH_TOOLS = ("read_file", "read_files", "grep", "glob", "list_directory", "file_info")
#: Tools that change files: a write rule on a path covers every one of them (and bash redirections).
WRITE_PATH_TOOLS = ("write_file", "edit_file", "move_file", "delete_file", "create_directory")
#: entropic-mcp's own policy: an agent must not rewrite the rules it is held to.
POLICY_FILES = frozenset({"entropic-mcp.toml", "entropic-mcp.local.toml", ".entropicignore", ".mcp.json"})
#: What ``path_refused`` and ``ToolServices.write_refused`` answer for a shielded path.
REFUSALS = {
    "protected": "a protected policy file",
    "private": "entropic-mcp's store or data directory",
}
#: The kinds of part verdict that refuse a call whatever a plugin's pattern answer says.
RULE_REFUSALS = frozenset({"deny", "protected", "private"})
FILE_SERVER = "filesystem"
_GLOB_SPECIAL = re.compile(r"([*?\[])")


def escape_glob(text: str) -> str:
    """``text`` as a glob that matches only itself."""
    return _GLOB_SPECIAL.sub(r"[\1]", text)


def pattern_part(full: str, pattern: str) -> PermissionPart:
    """The part of a call a server (``permission_pattern``) or a plugin (the hook) keyed as ``pattern``.

    Rules match ``pattern`` as a name, literally; "always allow" stores it escaped
    (``escape_glob``), so the stored rule matches exactly this pattern: ``db.query:SELECT *``
    stored as it is would allow every later query, and stored by a server already escaped it
    would never match.
    """
    names = (full,) if pattern == full else (full, pattern)
    return PermissionPart(names=names, store=escape_glob(pattern))


def path_part(
    access: Literal["read", "write"],
    path: str,
    *,
    tool: str | None = None,
    also: Iterable[str] = (),
    understood: bool = True,
    neutral: bool = False,
) -> PermissionPart:
    """The permission part of one file access, matched by every rule of its kind of access.

    Args:
        access: ``"read"`` or ``"write"``.
        path: the canonical display form: root-relative POSIX (``"src/a.py"``, ``"."``), or the
            absolute path outside the root.
        tool: the filesystem tool making the access (adds the bare ``filesystem.<tool>`` name
            and is what "always allow" stores); None for another server's access (a bash
            redirection).
        also: other spellings of the same path to match (the absolute form of an inside path).
        understood: False when the path could not be established (asks; never allowed by a rule).
        neutral: True when only rules naming the path matter (unmatched: neither ask nor allow).

    Returns:
        A part named ``filesystem.<access>:<p>`` and ``filesystem.<t>:<p>`` for every tool ``t``
        of that kind and every spelling ``p``: ``deny = ["filesystem.write_file:secrets/*"]``
        stops ``edit_file``, ``move_file`` and shell redirections alike.
    """
    tools = READ_PATH_TOOLS if access == "read" else WRITE_PATH_TOOLS
    names: list[str] = [f"{FILE_SERVER}.{tool}"] if tool and not neutral else []
    for spelling in (path, *also):
        names.append(f"{FILE_SERVER}.{access}:{spelling}")
        names.extend(f"{FILE_SERVER}.{t}:{spelling}" for t in tools)
    base = path.rstrip("/").rpartition("/")[2]
    return PermissionPart(
        names=tuple(dict.fromkeys(names)),
        store=f"{FILE_SERVER}.{tool or access}:{escape_glob(path)}",
        understood=understood,
        neutral=neutral,
        protected=access == "write" and base in POLICY_FILES,
        access=access,
        paths=(path, *also),
    )


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
