"""Parsed shell → the commands that actually run: wrappers stripped, nested scripts opened.

Lazy: imported on the first permission check (it pulls in the tree-sitter parser).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

import attrs

from ._parse import Assignment, Command, Redirect, Word, parse

#: Nested scripts (eval in bash -c in eval ...) deeper than this are not analysed.
MAX_DEPTH = 8
#: Directories whose programs are the ones their base name means (``/bin/rm`` is ``rm``).
SYSTEM_DIRS = frozenset({"/bin", "/sbin", "/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin"})
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash"})
#: Environment variables that change which program runs or inject code into it.
RISKY_VARIABLES = frozenset(
    {
        "PATH",
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "LD_AUDIT",
        "BASH_ENV",
        "ENV",
        "SHELLOPTS",
        "BASHOPTS",
        "IFS",
        "PS4",
        "PROMPT_COMMAND",
        "GLOBIGNORE",
        "CDPATH",
        "PYTHONPATH",
        "PYTHONSTARTUP",
        "NODE_OPTIONS",
        "PERL5OPT",
        "RUBYOPT",
        "GIT_EXEC_PATH",
        "GIT_SSH_COMMAND",
    }
)
WRITE_OPERATORS = frozenset({">", ">>", ">|", "&>", "&>>", "<>", ">&"})
EXEMPT_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})


@attrs.frozen(kw_only=True)
class Wrapper:
    """How to find the command a wrapper runs: its options, then positional words, then it."""

    flags: frozenset[str] = frozenset()
    valued: frozenset[str] = frozenset()
    writes: frozenset[str] = frozenset()  # valued options naming a file the wrapper writes
    positional: int = 0
    assignments: bool = False
    numeric: bool = False  # nice -5
    lookups: frozenset[str] = frozenset()  # options after which nothing runs (command -v)


WRAPPERS: dict[str, Wrapper] = {
    "timeout": Wrapper(
        flags=frozenset({"--preserve-status", "--foreground", "-v", "--verbose"}),
        valued=frozenset({"-s", "--signal", "-k", "--kill-after"}),
        positional=1,
    ),
    "time": Wrapper(
        flags=frozenset({"-p", "-a", "--append", "-v", "--verbose", "-q", "--quiet", "--portability"}),
        valued=frozenset({"-f", "--format", "-o", "--output"}),
        writes=frozenset({"-o", "--output"}),
    ),
    "nice": Wrapper(valued=frozenset({"-n", "--adjustment"}), numeric=True),
    "nohup": Wrapper(),
    "stdbuf": Wrapper(valued=frozenset({"-i", "-o", "-e", "--input", "--output", "--error"})),
    "command": Wrapper(flags=frozenset({"-p"}), lookups=frozenset({"-v", "-V"})),
    "builtin": Wrapper(),
    "exec": Wrapper(flags=frozenset({"-c", "-l"}), valued=frozenset({"-a"})),
    "env": Wrapper(
        flags=frozenset({"-i", "--ignore-environment", "-0", "--null", "-", "-v", "--debug"}),
        valued=frozenset({"-u", "--unset", "-C", "--chdir"}),
        assignments=True,
    ),
    "xargs": Wrapper(),
}
#: Programs that run another command given as their trailing words, checked as a part too.
RUNNERS: dict[str, Wrapper] = {
    "sudo": Wrapper(
        flags=frozenset({"-E", "-H", "-n", "-S", "-k", "-b", "-P", "-A", "--preserve-env"}),
        valued=frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-T", "-U"}),
    ),
    "doas": Wrapper(flags=frozenset({"-n", "-s"}), valued=frozenset({"-u", "-C"})),
}
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})


@attrs.frozen(kw_only=True)
class Invocation:
    """One command as rules see it: its program and the words after it."""

    program: str  # the base name for bare names and system-directory paths, else the path
    args: tuple[Word, ...]
    understood: bool
    base: str  # the base name, always (for deny matching of other-directory paths)
    trusted: bool  # True when ``program`` means what its base name means

    @property
    def line(self) -> str:
        return " ".join([self.program, *(w.shown for w in self.args)])


@attrs.frozen(kw_only=True)
class Write:
    """A file a command writes through a redirection; ``path`` None when it is computed."""

    path: Path | None
    text: str


@attrs.frozen(kw_only=True)
class Unclear:
    """Something the analysis refuses to guess about (shown as its source text)."""

    text: str


Finding = Invocation | Write | Unclear


def analyse(text: str, cwd: Path) -> list[Finding]:
    """Everything ``text`` runs and writes, in source order."""
    return list(_Analysis(cwd).script(text, 0))


class _Analysis:
    def __init__(self, cwd: Path) -> None:
        self.cwd: Path | None = cwd

    def script(self, text: str, depth: int) -> Iterator[Finding]:
        if depth > MAX_DEPTH:
            yield Unclear(text=text)
            return
        parsed = parse(text)
        for item in parsed.items:
            if isinstance(item, Command):
                yield from self.command(item, depth)
            elif isinstance(item, Redirect):
                yield from self.redirect(item)
            elif isinstance(item, Assignment) and item.name in RISKY_VARIABLES:
                yield Unclear(text=item.text)
        if not parsed.complete:
            yield Unclear(text=text)

    def command(self, command: Command, depth: int) -> Iterator[Finding]:
        # Prefix assignments (``PATH=/tmp ls``) and declarations (``export LD_PRELOAD=...``) alike.
        risky = any(name in RISKY_VARIABLES for name in command.assignments)
        yield from self.words(command.words, depth, understood=not risky)

    def words(self, words: Sequence[Word], depth: int, *, understood: bool = True) -> Iterator[Finding]:
        while words:
            head = words[0].value
            if head is None:
                yield Invocation(
                    program=words[0].text, args=tuple(words[1:]), understood=False, base=words[0].text, trusted=False
                )
                return
            base, trusted = _program(head)
            name = base if trusted else head
            wrapper = WRAPPERS.get(name)
            if wrapper is not None:
                stripped = _strip(words, wrapper, name)
                if stripped is not None:
                    rest, ok, writes = stripped
                    for path in writes:
                        yield from self.write(path, path)
                    if not ok:  # options we do not know: where the command starts is a guess
                        yield Invocation(
                            program=name, args=tuple(words[1:]), understood=False, base=base, trusted=trusted
                        )
                        return
                    if name == "xargs" and not rest:
                        rest = [Word(text="echo", value="echo")]
                    words = rest
                    continue
            if name == "eval":
                yield from self.nested(
                    " ".join(w.value or "" for w in words[1:]),
                    all(w.value is not None for w in words[1:]),
                    words,
                    depth,
                )
                return
            if name in SHELLS:
                script = _shell_script(words)
                if script is not None:
                    yield from self.nested(script.value or "", script.value is not None, words, depth)
                    return
                if _reads_stdin(words):
                    understood = False  # its commands come from a pipe (``ls | sh``)
            invocation = Invocation(
                program=name, args=tuple(words[1:]), understood=understood, base=base, trusted=trusted
            )
            yield invocation
            self.track_cd(invocation)
            runner = RUNNERS.get(name)
            if runner is not None:
                stripped = _strip(words, runner, name)
                if stripped is not None:
                    rest, ok, _ = stripped
                    yield from self.words(rest, depth, understood=understood and ok)
            elif name == "find":
                yield from self.find_exec(words, depth)
            elif name == "trap" and len(words) >= 3 and not (words[1].value or "").startswith("-"):
                yield from self.nested(words[1].value or "", words[1].value is not None, words, depth)
            return

    def nested(self, script: str, literal: bool, words: Sequence[Word], depth: int) -> Iterator[Finding]:
        if not literal:
            yield Unclear(text=" ".join(w.text for w in words))
            return
        yield from self.script(script, depth + 1)

    def find_exec(self, words: Sequence[Word], depth: int) -> Iterator[Finding]:
        i = 1
        while i < len(words):
            if words[i].value in FIND_EXEC:
                end = i + 1
                while end < len(words) and words[end].value not in (";", "+"):
                    end += 1
                yield from self.words(words[i + 1 : end], depth)
                i = end
            i += 1

    def redirect(self, redirect: Redirect) -> Iterator[Finding]:
        if redirect.operator not in WRITE_OPERATORS or redirect.target is None:
            return
        target = redirect.target
        if redirect.operator == ">&" and target.value is not None and (target.value.isdigit() or target.value == "-"):
            return  # duplicates a descriptor; no file involved
        yield from self.write(target.value, target.text)

    def write(self, value: str | None, text: str) -> Iterator[Write]:
        if value is None:
            yield Write(path=None, text=text)
            return
        if value in EXEMPT_TARGETS or value.startswith("/dev/fd/"):
            return
        yield Write(path=self.resolve(value), text=text)

    def resolve(self, value: str) -> Path | None:
        """Where ``value`` points from the tracked directory; None when that cannot be known."""
        try:
            path = Path(os.path.expanduser(value))
            if not path.is_absolute():
                if self.cwd is None:
                    return None
                path = self.cwd / path
            return Path(os.path.realpath(path))
        except (ValueError, UnicodeError, OSError):  # NUL bytes, lone surrogates, loops
            return None

    def track_cd(self, invocation: Invocation) -> None:
        """Follow ``cd DIR`` so later relative redirections resolve where bash would."""
        if invocation.program not in ("cd", "pushd", "popd") or self.cwd is None:
            return
        args = [w for w in invocation.args if w.value not in ("-L", "-P", "-e", "-@")]
        if invocation.program == "popd" or (args and (args[0].value is None or args[0].value == "-")):
            self.cwd = None
        else:
            self.cwd = self.resolve(args[0].value or "" if args else "~")


def _program(word: str) -> tuple[str, bool]:
    """The base name of a command word, and whether it means what that base name means."""
    if "/" not in word:
        return word, True
    path = os.path.normpath(word)
    base = os.path.basename(path)
    return (base or word), os.path.dirname(path) in SYSTEM_DIRS


def _strip(words: Sequence[Word], spec: Wrapper, name: str) -> tuple[list[Word], bool, list[str]] | None:
    """The words after a wrapper's own; None when the wrapper runs nothing (``env``, ``command -v``)."""
    i, n = 1, len(words)
    writes: list[str] = []
    while i < n:
        value = words[i].value
        if value is None:
            break  # a computed word ends the options: a positional value, or the command itself
        if value == "--":
            i += 1
            break
        if not value.startswith("-") or (value == "-" and value not in spec.flags):
            break
        if name == "xargs":  # options of xargs are not guessed: the command is reported as not understood
            return list(words[i:]), False, writes
        if value in spec.lookups:
            return None
        option, eq, _ = value.partition("=")
        if value in spec.flags or (spec.numeric and value[1:].isdigit()):
            i += 1
        elif eq and option in spec.valued:
            if option in spec.writes:
                writes.append(value.partition("=")[2])
            i += 1
        elif value in spec.valued:
            if i + 1 >= n:
                return list(words[i:]), False, writes
            if value in spec.writes:
                writes.append(words[i + 1].value or "")
            i += 2
        elif value[:2] in spec.valued and not value.startswith("--"):
            i += 1  # attached value: -n5, -oL
        elif all(f"-{c}" in spec.flags for c in value[1:]):
            i += 1
        else:
            return list(words[i:]), False, writes
    if spec.assignments:
        while i < n and _is_assignment(words[i]):
            i += 1
    if i + spec.positional >= n:
        return None
    return list(words[i + spec.positional :]), True, writes


def _is_assignment(word: Word) -> bool:
    return _ASSIGNMENT.match(word.value if word.value is not None else word.text) is not None


def _reads_stdin(words: Sequence[Word]) -> bool:
    """``sh``, ``bash -x`` or ``sh -s ARGS``: the script is whatever arrives on stdin."""
    options = [w.value or "" for w in words[1:]]
    if any(o.startswith("-") and not o.startswith("--") and "s" in o for o in options):
        return True
    return all(o.startswith(("-", "+")) for o in options)


def _shell_script(words: Sequence[Word]) -> Word | None:
    """The script of ``bash -c SCRIPT`` (also ``-lc``, ``-e -c``); None without ``-c``."""
    wants_script = False
    i = 1
    while i < len(words):
        value = words[i].value
        if value is None:
            return Word(text=words[i].text, value=None) if wants_script else None
        if wants_script and not value.startswith(("-", "+")):
            return words[i]
        if value == "--":
            i += 1
            continue
        if value.startswith("--"):
            i += 2 if value in ("--rcfile", "--init-file") else 1
            continue
        if value.startswith(("-", "+")) and len(value) > 1:
            if "c" in value[1:] and value[0] == "-":
                wants_script = True
            i += 2 if value[1:] in ("o", "O") else 1
            continue
        return None  # a script file: ``bash build.sh``
    return Word(text=" ".join(w.text for w in words), value=None) if wants_script else None
