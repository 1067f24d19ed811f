"""Parsed shell → the commands that actually run: wrappers stripped, nested scripts opened.

Anything this module cannot prove harmless becomes an ``Unclear`` finding (a part that is never
allowed by a rule): code bash would evaluate, names that change what runs, wrappers it does not
model, files run as scripts. Redirection targets are resolved the way bash will resolve them
(``~`` forms, ``cd`` earlier in the script, ``/dev/fd``) and reported as writes.

Lazy: imported on the first permission check (it pulls in the tree-sitter parser).
"""

from __future__ import annotations

import os
import re
from collections.abc import Generator, Iterator, Mapping, Sequence
from pathlib import Path

import attrs

from ._options import GIT_TABLES, TABLES, OptionTable, awk_problem, effects, git_subcommand, sed_in_place
from ._parse import LITERAL_INDEX, NAME, Assignment, Command, Flag, Function, Hidden, Redirect, Word, parse
from ._risky import (
    BUILTINS,
    EXEC_OPTIONS,
    OPAQUE_RUNNERS,
    SAFE_GIT_CONFIG,
    SAFE_SET_LETTERS,
    SAFE_SET_OPTIONS,
    SAFE_SHOPT_OPTIONS,
    risky_variable,
)

#: Nested scripts (eval in bash -c in eval ...) deeper than this are not analysed.
MAX_DEPTH = 8
#: Commands analysed per call before the rest is reported as not understood (bounds the work
#: a hostile text can cause: wrappers are searched at several positions).
MAX_COMMANDS = 2000
#: Words in one simple command beyond which it is not analysed.
MAX_WORDS = 4096
#: Levels of the best-effort search inside commands that are not understood anyway.
SEARCH_DEPTH = 3
#: Words of a command shown in a part's text (the rest is elided).
SHOWN_WORDS = 64
#: Working directories followed before a relative path is reported as not understood.
MAX_CWDS = 16
#: Directories whose programs are the ones their base name means (``/bin/rm`` is ``rm``).
SYSTEM_DIRS = frozenset({"/bin", "/sbin", "/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin"})
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "rbash", "yash", "posh", "fish", "csh", "tcsh"})
#: Shells whose scripts are bash's grammar (or a subset of it); the others' ``-c`` scripts are
#: searched for denied commands but never understood (zsh glob qualifiers run code).
BASH_LIKE = frozenset({"sh", "bash", "dash", "ash", "rbash", "posh"})
WRITE_OPERATORS = frozenset({">", ">>", ">|", "&>", "&>>", "<>", ">&", "&>|"})
#: Targets that are never a file. The standard streams are exempt only while the script leaves
#: descriptors 1 and 2 alone: ``exec 1<victim; echo x > /dev/stdout`` reopens the victim.
NULL_TARGETS = frozenset({"/dev/null"})
STD_TARGETS = frozenset({"/dev/stdout", "/dev/stderr", "/dev/fd/1", "/dev/fd/2", "/proc/self/fd/1", "/proc/self/fd/2"})
#: Paths bash or the kernel turn into something else than a file of the tree.
SPECIAL_PREFIXES = ("/dev/fd", "/dev/std", "/dev/tcp/", "/dev/udp/", "/proc/")
FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
FIND_WRITES = frozenset({"-fprint", "-fprint0", "-fprintf", "-fls"})
_ASSIGNMENT_NODE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SHELL_SYNTAX = re.compile(r"[\s;&|<>()$`\\'\"*?{}!#~=]")
_SUBSCRIPTED = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\[.*\])?\Z", re.DOTALL)


@attrs.frozen(kw_only=True)
class Wrapper:
    """How to find the command a wrapper runs: its options, then positional words, then it."""

    flags: frozenset[str] = frozenset()
    valued: frozenset[str] = frozenset()
    optional: frozenset[str] = frozenset()  # long options taking an optional ``=value``
    writes: frozenset[str] = frozenset()  # valued options naming a file the wrapper writes
    positional: int = 0
    assignments: bool = False
    numeric: bool = False  # nice -5
    lookups: frozenset[str] = frozenset()  # options after which nothing runs (command -v)
    chdir: frozenset[str] = frozenset()  # options that move the command elsewhere (env -C DIR)


def _set(*names: str) -> frozenset[str]:
    return frozenset(names)


#: The namespaces unshare and nsenter both take, short (a flag) and long (an optional ``=file``).
_NAMESPACE_FLAGS = ("-m", "-u", "-i", "-n", "-p", "-U", "-C", "-T")
_NAMESPACE_OPTIONS = ("--mount", "--uts", "--ipc", "--net", "--pid", "--user", "--cgroup", "--time")


WRAPPERS: dict[str, Wrapper] = {
    "timeout": Wrapper(
        flags=_set("--preserve-status", "--foreground", "-v", "--verbose", "-f"),
        valued=_set("-s", "--signal", "-k", "--kill-after"),
        positional=1,
    ),
    "time": Wrapper(
        flags=_set("-p", "-a", "--append", "-v", "--verbose", "-q", "--quiet", "--portability"),
        valued=_set("-f", "--format", "-o", "--output"),
        writes=_set("-o", "--output"),
    ),
    "nice": Wrapper(valued=_set("-n", "--adjustment"), numeric=True),
    "nohup": Wrapper(),
    "stdbuf": Wrapper(valued=_set("-i", "-o", "-e", "--input", "--output", "--error")),
    "command": Wrapper(flags=_set("-p"), lookups=_set("-v", "-V")),
    "builtin": Wrapper(),
    "exec": Wrapper(flags=_set("-c", "-l"), valued=_set("-a")),
    "env": Wrapper(
        flags=_set("-i", "--ignore-environment", "-0", "--null", "-", "-v", "--debug"),
        valued=_set("-u", "--unset", "-C", "--chdir"),
        optional=_set("--default-signal", "--ignore-signal", "--block-signal", "--list-signal-handling"),
        assignments=True,
        chdir=_set("-C", "--chdir"),
    ),
    "setsid": Wrapper(flags=_set("-c", "--ctty", "-f", "--fork", "-w", "--wait")),
    "ionice": Wrapper(
        flags=_set("-t", "--ignore"),
        valued=_set("-c", "--class", "-n", "--classdata"),
        lookups=_set("-p", "-P", "-u", "--pid", "--pgid", "--uid"),
    ),
    "chrt": Wrapper(
        flags=_set(
            "-a",
            "--all-tasks",
            "-b",
            "--batch",
            "-d",
            "--deadline",
            "-f",
            "--fifo",
            "-i",
            "--idle",
            "-o",
            "--other",
            "-r",
            "--rr",
            "-R",
            "--reset-on-fork",
            "-v",
            "--verbose",
            "-e",
            "--ext",
        ),
        valued=_set("-T", "--sched-runtime", "-P", "--sched-period", "-D", "--sched-deadline"),
        lookups=_set("-p", "--pid", "-m", "--max"),
        positional=1,
    ),
    "taskset": Wrapper(flags=_set("-a", "--all-tasks", "-c", "--cpu-list"), lookups=_set("-p", "--pid"), positional=1),
    "unshare": Wrapper(
        flags=_set(
            *_NAMESPACE_FLAGS,
            "-f",
            "--fork",
            "-r",
            "--map-root-user",
            "-c",
            "--map-current-user",
            "--keep-caps",
            "-l",
            "--map-auto",
        ),
        valued=_set(
            "-S",
            "--setuid",
            "-G",
            "--setgid",
            "-R",
            "--root",
            "-w",
            "--wd",
            "--propagation",
            "--setgroups",
            "--map-user",
            "--map-group",
            "--map-users",
            "--map-groups",
            "--monotonic",
            "--boottime",
        ),
        optional=_set(
            *_NAMESPACE_OPTIONS,
            "--mount-proc",
            "--kill-child",
        ),
        chdir=_set("-R", "--root", "-w", "--wd"),
    ),
    "nsenter": Wrapper(
        flags=_set(
            *_NAMESPACE_FLAGS,
            "-a",
            "--all",
            "-F",
            "--no-fork",
            "--preserve-credentials",
            "-Z",
            "--follow-context",
            "-r",
            "-w",
        ),
        valued=_set("-t", "--target", "-S", "--setuid", "-G", "--setgid"),
        optional=_set(*_NAMESPACE_OPTIONS, "--root", "--wd"),
        chdir=_set("-r", "-w", "--root", "--wd", "-t", "--target"),
    ),
    "xargs": Wrapper(
        flags=_set("-0", "--null", "-r", "--no-run-if-empty", "-t", "--verbose", "-x", "--exit", "-p", "--interactive"),
        valued=_set(
            "-n",
            "--max-args",
            "-P",
            "--max-procs",
            "-L",
            "--max-lines",
            "-d",
            "--delimiter",
            "-s",
            "--max-chars",
            "-E",
            "-a",
            "--arg-file",
            "-I",
        ),
        optional=_set("-i", "--replace"),
    ),
}
#: Programs that run another command given as their trailing words, checked as a part too.
RUNNERS: dict[str, Wrapper] = {
    "sudo": Wrapper(
        flags=_set(
            "-E",
            "-H",
            "-n",
            "-S",
            "-k",
            "-K",
            "-b",
            "-P",
            "-A",
            "--preserve-env",
            "-s",
            "-i",
            "--login",
            "--shell",
            "--non-interactive",
            "--background",
        ),
        valued=_set(
            "-u",
            "-g",
            "-C",
            "-D",
            "-h",
            "-p",
            "-r",
            "-t",
            "-T",
            "-U",
            "--user",
            "--group",
            "--chdir",
            "--prompt",
            "-R",
            "--chroot",
        ),
        assignments=True,
        chdir=_set("-D", "--chdir", "-R", "--chroot", "-i", "--login"),
    ),
    "doas": Wrapper(flags=_set("-n", "-s"), valued=_set("-u", "-C")),
    "runuser": Wrapper(
        flags=_set("-l", "--login", "-m", "-p", "--preserve-environment", "-P", "--pty"),
        valued=_set(
            "-u", "--user", "-g", "--group", "-G", "--supp-group", "-s", "--shell", "-w", "--whitelist-environment"
        ),
    ),
}
#: Tools that run a command given after a sub-command (an empty set: right after the tool).
TOOL_RUNNERS: dict[str, frozenset[str]] = {
    "uv": _set("run", "tool"),
    "uvx": frozenset(),
    "poetry": _set("run"),
    "pipenv": _set("run"),
    "pdm": _set("run"),
    "hatch": _set("run"),
    "rye": _set("run"),
    "conda": _set("run"),
    "mamba": _set("run"),
    "pipx": _set("run"),
    "bundle": _set("exec"),
    "npm": _set("exec", "x"),
    "npx": frozenset(),
    "pnpm": _set("exec", "dlx"),
    "pnpx": frozenset(),
    "yarn": _set("exec", "dlx"),
    "bunx": frozenset(),
    "bun": _set("x", "run"),
    "direnv": _set("exec"),
    "mise": _set("exec", "x"),
    "asdf": _set("exec"),
    "nix": _set("develop", "shell", "run"),
    "cargo": _set("run"),
    "go": _set("run"),
    "dotnet": _set("run", "exec"),
}
#: Shell options that need no value / take one; others (``-i``, ``-l``, ``--rcfile``) read
#: start-up files or stdin and make the call not understood.
SHELL_FLAGS = frozenset("euxvfnaBbhmCEHPTt")
SHELL_LONG = frozenset({"--norc", "--noprofile", "--posix", "--noediting", "--restricted", "--verbose", "--noglob"})
#: Builtins taking variable names as arguments (``read NAME``, ``printf -v NAME``): a name with a
#: computed subscript runs code.
_TEST_COMMANDS = frozenset({"test", "["})


@attrs.frozen(kw_only=True)
class Invocation:
    """One command as rules see it: its program and the words after it."""

    program: str  # the base name for bare names and system-directory paths, else the path
    args: tuple[Word, ...]
    understood: bool
    base: str  # the base name, always (for deny matching of other-directory paths)
    trusted: bool  # True when ``program`` means what its base name means
    #: A command a tool runner may run (``uv run rm x``): it matters only to rules naming it.
    neutral: bool = False

    @property
    def line(self) -> str:
        return " ".join([self.program, *(w.shown for w in self.args)])


@attrs.frozen(kw_only=True)
class Write:
    """A file a command writes through a redirection; ``path`` None when it cannot be known."""

    path: Path | None
    text: str


@attrs.frozen(kw_only=True)
class Unclear:
    """Something the analysis refuses to guess about (shown as its source text)."""

    text: str
    reason: str = ""


Finding = Invocation | Write | Unclear
#: The reason given when the command line itself (not a script inside it) does not parse.
UNPARSED = "the command line does not parse"
#: Counts the times an analysis looked outside its inputs (a path resolved on disk, a user's
#: home looked up, a function's name looked for on PATH): one that did not is a function of
#: its text, directories and environment alone, and its answer can be kept (``_patterns``).
CONSULTED = [0]


def analyse(text: str, cwd: Path, *, env: Mapping[str, str] | None = None, cwds: Sequence[Path] = ()) -> list[Finding]:
    """Everything ``text`` runs and writes, in source order.

    Args:
        text: the command line.
        cwd: where it runs.
        env: the environment bash starts with (``HOME`` for ``~``, ``CDPATH``, ``OLDPWD``).
        cwds: other directories it may run in (relative targets are checked in each).
    """
    environment = os.environ if env is None else env
    analysis = _Analysis(cwd, environment, cwds)
    findings: list[Finding] = []
    if any(not entry.startswith("/") for entry in environment.get("PATH", "/usr/bin").split(":")):
        # An empty or relative PATH entry: a bare name may run a file the project holds.
        findings.append(Unclear(text=text, reason="PATH has a relative entry"))
    for finding in analysis.script(text, 0):
        if not isinstance(finding, _StdWrite):
            findings.append(finding)
        elif analysis.fds_touched:
            # A standard stream was pointed at a file: /dev/stdout may now reopen that file.
            findings.append(Unclear(text=finding.text, reason="standard stream reopened"))
    return findings


@attrs.frozen(kw_only=True)
class _StdWrite:
    """A write to /dev/stdout and the like, exempt unless the script repoints the streams."""

    text: str


class _Analysis:
    def __init__(self, cwd: Path, env: Mapping[str, str], cwds: Sequence[Path]) -> None:
        self.cwds: list[Path] | None = list(dict.fromkeys([cwd, *cwds]))
        self.seen: list[Path] = list(self.cwds)
        self.changed_dir = False
        home = env.get("HOME")
        self.home: Path | None = Path(home) if home and home.startswith("/") else None
        oldpwd = env.get("OLDPWD")
        self.oldpwd: Path | None = Path(oldpwd) if oldpwd and oldpwd.startswith("/") else None
        self.cdpath = bool(env.get("CDPATH"))
        self.fds_touched = False
        self.budget = MAX_COMMANDS

    # -- scripts -------------------------------------------------------------------------------

    def script(self, text: str, depth: int) -> Iterator[Finding | _StdWrite]:
        if depth > MAX_DEPTH:
            yield Unclear(text=text, reason="nested too deeply")
            return
        parsed = parse(text)
        for item in parsed.items:
            if isinstance(item, Command):
                if item.declaration:
                    yield from self.declaration(item)
                else:
                    yield from self.command(item, depth)
            elif isinstance(item, Redirect):
                yield from self.redirect(item)
            elif isinstance(item, Assignment):
                yield from self.assigns(item.name, item.text)
            elif isinstance(item, Function):
                if _shadows(item.name):
                    yield Unclear(text=item.text, reason=f"function {item.name!r} shadows a command")
            elif isinstance(item, Flag):
                yield Unclear(text=item.text, reason=item.reason)
            elif isinstance(item, Hidden):
                yield from self.script(item.script, depth + 1)
        if not parsed.complete:
            yield Unclear(text=text, reason=UNPARSED if depth == 0 else "does not parse")

    def assigns(self, name: str, text: str) -> Iterator[Unclear]:
        """A name the script sets: risky names (``PATH``, ``BASH_ENV``, ``HOME``) are not understood."""
        match = _SUBSCRIPTED.match(name)
        if match is None:
            yield Unclear(text=text, reason="assigns a computed name")
            return
        if match[2] is not None and not LITERAL_INDEX.match(match[2]):
            yield Unclear(text=text, reason="array subscript evaluated as arithmetic")
        if risky_variable(match[1]):
            if match[1] == "HOME":
                self.home = None
            if match[1] in ("PWD", "OLDPWD", "CDPATH"):
                self.cwds = None
            yield Unclear(text=text, reason=f"sets {match[1]}, which changes what runs")

    def command(self, command: Command, depth: int) -> Iterator[Finding | _StdWrite]:
        # Prefix assignments (``BASH_ENV=./s.sh bash -c ls``) taint the command *and* everything
        # nested in it: the Unclear finding stays whatever the words turn out to be.
        risky = False
        for name in command.assignments:
            for finding in self.assigns(name, command.text):
                risky = True
                yield finding
        yield from self.words(command.words, depth, understood=not risky)

    def declaration(self, command: Command) -> Iterator[Finding]:
        """``export``/``declare``/``local``/``readonly``/``typeset``/``unset``."""
        keyword = command.words[0].value or ""
        yield Invocation(program=keyword, args=command.words[1:], understood=True, base=keyword, trusted=True)
        for name in command.assignments:
            yield from self.assigns(name, command.text)
        options = True
        for word in command.words[1:]:
            value = word.value
            if value is None and _ASSIGNMENT_NODE.match(word.text):
                continue  # a NAME=value node, checked above
            if value is None:
                yield Unclear(text=command.text, reason="declares a computed name")
                continue
            if options and value == "--":
                options = False
            elif options and value[:1] in ("-", "+") and len(value) > 1:
                letters = set(value[1:])
                bad = letters - set("aAgrxlutpF" if keyword != "unset" else "fvn")
                if keyword == "export":
                    bad = letters - set("np")
                if bad:
                    yield Unclear(text=command.text, reason=f"{keyword} -{''.join(sorted(bad))}")
            else:
                yield from self.assigns(value.partition("=")[0], command.text)

    # -- commands ------------------------------------------------------------------------------

    def words(
        self, words: Sequence[Word], depth: int, *, understood: bool = True, open_tail: bool = False
    ) -> Iterator[Finding | _StdWrite]:
        """The command ``words`` runs; ``open_tail`` when more arguments may be appended (xargs)."""
        if depth > MAX_DEPTH:
            yield Unclear(text=_source(words), reason="nested too deeply")
            return
        if len(words) > MAX_WORDS:
            # Stripping wrappers copies the words each time: a very long command is not analysed.
            yield Unclear(text=_source(words), reason="too many words to analyse")
            return
        while words:
            self.budget -= 1
            if self.budget < 0:
                yield Unclear(text=_source(words), reason="too many commands to analyse")
                return
            head = words[0].value
            if head is None:
                yield Invocation(
                    program=words[0].text, args=tuple(words[1:]), understood=False, base=words[0].text, trusted=False
                )
                return
            base, trusted = _program(head)
            name = base if trusted else head
            if name in WRAPPERS:
                stripped = yield from self.strip(words, WRAPPERS[name], name)
                if stripped is None:  # nothing runs (``env``, ``command -v x``) — unless xargs appends it
                    if open_tail or name == "xargs":
                        yield Unclear(text=_source(words), reason=f"{name} runs what it is given")
                    yield self.invocation(name, words, base, trusted, understood=understood)
                    return
                rest, ok = stripped
                if not ok:  # options we do not know: where the command starts is a guess
                    yield Invocation(program=name, args=tuple(words[1:]), understood=False, base=base, trusted=trusted)
                    yield from self.search(words[1:], depth)
                    return
                if name == "xargs":
                    replace = _xargs_replace(words[1 : len(words) - len(rest)])
                    if replace and rest and replace in rest[0].text:
                        yield Unclear(text=_source(words), reason=f"xargs -I {replace} replaces into the program name")
                    if replace:  # each input item is put where the string is: those words are computed
                        rest = [Word(text=w.text, value=None) if replace in w.text else w for w in rest]
                    yield from self.words(
                        rest or [Word(text="echo", value="echo")], depth + 1, understood=understood, open_tail=True
                    )
                    return
                words = rest
                continue
            special = self.special(name, words, depth, understood=understood, open_tail=open_tail)
            if special is not None:
                yield from special
                return
            yield self.invocation(name, words, base, trusted, understood=understood)
            return

    def invocation(self, name: str, words: Sequence[Word], base: str, trusted: bool, *, understood: bool) -> Invocation:
        # A program name holding shell syntax ("ls; rm x") names no real program; some wrapper
        # may hand it to a shell: never allowed by a rule.
        understood = understood and not _SHELL_SYNTAX.search(name)
        invocation = Invocation(program=name, args=tuple(words[1:]), understood=understood, base=base, trusted=trusted)
        self.track_cd(invocation)
        return invocation

    def special(
        self, name: str, words: Sequence[Word], depth: int, *, understood: bool, open_tail: bool
    ) -> Iterator[Finding | _StdWrite] | None:
        """Findings of commands that evaluate code or run other commands; None for plain programs."""
        args = words[1:]
        text = _source(words)
        values = [w.value for w in args]
        if name == "eval":
            return self.nested(" ".join(v or "" for v in values), all(v is not None for v in values), words, depth)
        if name in SHELLS:
            return self.shell(name, words, depth, understood=understood)
        if name in ("source", ".", "alias", "fc", "bind", "compgen", "complete", "compopt", "coproc", "enable") and (
            args or name in ("source", ".", "coproc", "fc")
        ):
            return self.opaque(name, words, depth, f"{name} runs code this analysis cannot see")
        if name in OPAQUE_RUNNERS:
            return self.opaque(name, words, depth, f"{name} runs a command in a way this analysis does not model")
        if name in TOOL_RUNNERS and not open_tail:
            return self.tool_runner(name, words, depth, understood=understood)
        if name in RUNNERS and not (name == "runuser" and any(_is_command_option(w.value) for w in args)):
            return self.runner(name, words, depth, understood=understood)
        if name == "trap":
            return self.trap(words, depth, understood=understood)
        if name == "su" or (name == "runuser" and any(_is_command_option(w.value) for w in args)):
            return self.su(words, depth, understood=understood)
        if name == "script":
            return self.script_command(words, depth, understood=understood)
        if name == "flock":
            return self.flock(words, depth, understood=understood)
        if name == "watch":
            return self.watch(words, depth, understood=understood)
        if name == "find":
            return self.find(words, depth, understood=understood and not open_tail)
        problem = _builtin_problem(name, args, values)
        if problem is None and name in EXEC_OPTIONS and (open_tail or _runs_option(name, values)):
            problem = f"{name} is given an option that runs a command"
        if problem is None and name == "git":
            problem = _git_problem(values)
        if problem is None and name in ("sed", "gsed"):
            problem = _sed_problem(values)
        if problem is None and name in ("awk", "gawk", "mawk", "nawk", "busybox-awk"):
            problem = awk_problem(values)
        found: list[Finding | _StdWrite] = list(self.option_effects(name, words))
        if problem is not None:
            found.insert(0, Unclear(text=text, reason=problem))
        if found:
            found.append(self.invocation(name, words, name, True, understood=understood))
            return iter(found)
        return None

    def option_effects(self, name: str, words: Sequence[Word]) -> Iterator[Finding | _StdWrite]:
        """The files a program's options write (as writes) and the options that run a program or
        that its closed option table does not know (not understood): ``_options``."""
        args = words[1:]
        values = [w.value for w in args]
        label = name
        table: OptionTable | None = TABLES.get("sed" if name == "gsed" else name)
        if name == "git":
            index = git_subcommand(values)
            if index is not None:
                table = GIT_TABLES.get(values[index] or "")
                label = f"git {values[index]}"
                args, values = args[index + 1 :], values[index + 1 :]
        if name in ("sed", "gsed"):
            files = sed_in_place(values)
            for file in files or ():
                yield from self.write(file, _source(words))
        if table is None:
            return
        text = _source(words)
        for effect in effects(table, values):
            if effect.kind == "write":
                yield from self.write(effect.value, text)
            elif effect.kind == "run":
                yield Unclear(
                    text=text, reason=f"{label} {effect.option} runs a program or writes where rules cannot see"
                )
            else:
                yield Unclear(text=text, reason=f"{label}: {effect.option} is not in its option table")

    def tool_runner(
        self, name: str, words: Sequence[Word], depth: int, *, understood: bool
    ) -> Iterator[Finding | _StdWrite]:
        """``uv run CMD``, ``npx CMD``, ``bundle exec CMD``: the tool's own rule decides; the command
        it may run is searched so deny and ask rules on it still apply (``uv run rm x``)."""
        yield from self.option_effects(name, words)
        yield self.invocation(name, words, name, True, understood=understood)
        subcommands = TOOL_RUNNERS[name]
        values = [w.value for w in words[1:]]
        start = 1
        if subcommands:
            found = next((i for i, v in enumerate(values, start=1) if v in subcommands), None)
            if found is None:
                return
            start = found + 1
        rest = words[start:]
        # Several guesses where the command starts (options may take values) at the top level;
        # nested runners (uv run uv run ...) follow only the first, so the work stays linear.
        starts = [i for i, w in enumerate(rest) if w.value is not None and not w.value.startswith("-")]
        for n, i in enumerate(starts[: 3 if depth < SEARCH_DEPTH else 1]):
            for finding in self.words(rest[i:], depth + 1, understood=False):
                if isinstance(finding, Invocation):
                    # What it runs only matters to rules naming it (deny rm * sees uv run rm x).
                    yield attrs.evolve(finding, understood=True, neutral=True)
                elif n == 0 or not isinstance(finding, Unclear):
                    # What could not be proven harmless in the command itself (sed -e '1e ...', a
                    # risky variable) keeps the call from an allow; guesses at later starts do not.
                    yield finding

    def opaque(self, name: str, words: Sequence[Word], depth: int, reason: str) -> Iterator[Finding | _StdWrite]:
        yield Unclear(text=_source(words), reason=reason)
        yield Invocation(program=name, args=tuple(words[1:]), understood=False, base=name, trusted=True)
        yield from self.search(words[1:], depth)

    def search(self, words: Sequence[Word], depth: int) -> Iterator[Finding | _StdWrite]:
        """Best effort for deny rules: the command may start at any of the first few words.

        Searches within searches stop after ``SEARCH_DEPTH`` levels (``strace strace ... rm``
        would otherwise branch three ways per level); the caller is not understood anyway.
        """
        if depth >= SEARCH_DEPTH:
            yield Unclear(text=_source(words), reason="nested too deeply")
            return
        starts = [i for i, w in enumerate(words) if w.value is not None and not w.value.startswith("-")][:3]
        for i in starts:
            yield from self.words(words[i:], depth + 1, understood=False)

    def runner(
        self, name: str, words: Sequence[Word], depth: int, *, understood: bool
    ) -> Iterator[Finding | _StdWrite]:
        yield self.invocation(name, words, name, True, understood=understood)
        stripped = yield from self.strip(words, RUNNERS[name], name)
        if stripped is not None:
            rest, ok = stripped
            own = words[1 : len(words) - len(rest)]
            if name == "sudo" and any(_short_flag(w.value, "si") or w.value in ("--shell", "--login") for w in own):
                # sudo -s/-i CMD runs CMD through a shell: the words are a script.
                values = [w.value for w in rest]
                yield from self.nested(
                    " ".join(v or "" for v in values), all(v is not None for v in values), words, depth
                )
                return
            yield from self.words(rest, depth + 1, understood=understood and ok)
            if not ok:
                yield from self.search(words[1:], depth)

    def nested(self, script: str, literal: bool, words: Sequence[Word], depth: int) -> Iterator[Finding | _StdWrite]:
        if not literal:
            yield Unclear(text=_source(words), reason="runs a computed script")
            return
        yield from self.script(script, depth + 1)

    def shell(self, name: str, words: Sequence[Word], depth: int, *, understood: bool) -> Iterator[Finding | _StdWrite]:
        """``bash -c SCRIPT`` is analysed; a shell reading a file, stdin or start-up files is not understood."""
        text = _source(words)
        wants_script = False
        i = 1
        while i < len(words):
            value = words[i].value
            if value is None:
                break
            if value == "--" or value == "-":
                i += 1
                break
            if value.startswith("--"):
                if value not in SHELL_LONG:
                    yield Unclear(text=text, reason=f"{name} {value}")
                i += 1
                continue
            if value[:1] in ("-", "+") and len(value) > 1:
                letters = value[1:]
                for letter in letters:
                    if letter == "c":
                        wants_script = True
                    elif letter in "oO":
                        option = words[i + 1].value if i + 1 < len(words) else None
                        safe = SAFE_SET_OPTIONS if letter == "o" else SAFE_SHOPT_OPTIONS
                        if option not in safe:
                            yield Unclear(text=text, reason=f"{name} -{letter} {option}")
                        i += 1
                    elif letter not in SHELL_FLAGS:
                        yield Unclear(text=text, reason=f"{name} -{letter} (reads start-up files or stdin)")
                i += 1
                continue
            break
        if wants_script:
            if i >= len(words) or words[i].value is None:
                yield Unclear(text=text, reason="runs a computed script")
                yield self.invocation(name, words, name, True, understood=False)
                return
            if name not in BASH_LIKE:
                yield Unclear(text=text, reason=f"{name} scripts are not bash")
            yield from self.script(words[i].value or "", depth + 1)
            return
        # No -c: the script is a file (``bash s.sh``, ``bash <(...)``) or stdin (``ls | sh``).
        yield Unclear(text=text, reason=f"{name} runs a script file or reads commands from stdin")
        yield self.invocation(name, words, name, True, understood=False)

    def trap(self, words: Sequence[Word], depth: int, *, understood: bool) -> Iterator[Finding | _StdWrite]:
        yield self.invocation("trap", words, "trap", True, understood=understood)
        args = list(words[1:])
        if args and args[0].value in ("-p", "-l", "-P"):
            return
        if args and args[0].value == "--":
            args = args[1:]
        if len(args) < 2 or args[0].value == "-":
            return  # lists or resets traps
        yield from self.nested(args[0].value or "", args[0].value is not None, words, depth)

    def su(self, words: Sequence[Word], depth: int, *, understood: bool) -> Iterator[Finding | _StdWrite]:
        """``su [options] [user] -c COMMAND``: the command string is a script."""
        yield self.invocation(words[0].value or "su", words, "su", True, understood=understood)
        found = False
        for i, word in enumerate(words[1:], start=1):
            value = word.value or ""
            if value in ("-c", "--command", "--session-command") or (
                value.startswith("-")
                and not value.startswith("--")
                and value.endswith("c")
                and set(value[1:]) <= set("lmpfc")
            ):
                if i + 1 < len(words):
                    found = True
                    yield from self.nested(words[i + 1].value or "", words[i + 1].value is not None, words, depth)
            elif value.startswith(("--command=", "--session-command=")):
                found = True
                yield from self.nested(value.partition("=")[2], True, words, depth)
            elif value in ("-s", "--shell") or value.startswith("--shell="):
                yield Unclear(text=_source(words), reason="su with another shell")
        if not found and any(w.value is None for w in words[1:]):
            yield Unclear(text=_source(words), reason="su with computed arguments")

    def script_command(self, words: Sequence[Word], depth: int, *, understood: bool) -> Iterator[Finding | _StdWrite]:
        """util-linux ``script [options] [file]``: ``-c CMD`` runs CMD with $SHELL; the file is written."""
        yield self.invocation("script", words, "script", True, understood=understood)
        text = _source(words)
        i = 1
        while i < len(words):
            value = words[i].value
            if value is None:
                yield Unclear(text=text, reason="script with computed arguments")
                return
            if value.startswith("--command=") or (
                value.startswith("-") and not value.startswith("--") and value.endswith("c") and len(value) > 1
            ):
                script = (
                    value.partition("=")[2]
                    if value.startswith("--")
                    else (words[i + 1].value if i + 1 < len(words) else None)
                )
                yield from self.nested(script or "", script is not None, words, depth)
                i += 1 if value.startswith("--") else 2
                continue
            if value == "--command":
                script = words[i + 1].value if i + 1 < len(words) else None
                yield from self.nested(script or "", script is not None, words, depth)
                i += 2
                continue
            if value in (
                "-a",
                "--append",
                "-e",
                "--return",
                "-f",
                "--flush",
                "-q",
                "--quiet",
                "-m",
                "--force",
                "-E",
            ) or value.startswith("-q"):
                i += 1
                continue
            if value in (
                "-t",
                "-T",
                "-I",
                "-O",
                "-B",
                "--log-timing",
                "--log-in",
                "--log-out",
                "--log-io",
                "--timing",
            ) or value.startswith(("-t", "--timing=", "--log-")):
                yield Unclear(text=text, reason="script writes a log file")
                i += 1
                continue
            if value.startswith("-"):
                yield Unclear(text=text, reason=f"script {value}")
                i += 1
                continue
            yield from self.write(value, words[i].text)
            i += 1

    def flock(self, words: Sequence[Word], depth: int, *, understood: bool) -> Iterator[Finding | _StdWrite]:
        """``flock [options] FILE (-c CMD | CMD ARGS...)``, or ``flock [options] FD``."""
        spec = Wrapper(
            flags=_set(
                "-s",
                "--shared",
                "-x",
                "-e",
                "--exclusive",
                "-u",
                "--unlock",
                "-n",
                "--nonblock",
                "-o",
                "--close",
                "-F",
                "--no-fork",
                "--verbose",
                "--nb",
            ),
            valued=_set("-w", "--timeout", "--wait", "-E", "--conflict-exit-code"),
        )
        yield self.invocation("flock", words, "flock", True, understood=understood)
        stripped = yield from self.strip(words, spec, "flock")
        if stripped is None:
            return
        rest, ok = stripped
        if not ok:
            yield Unclear(text=_source(words), reason="flock with options it does not model")
            yield from self.search(words[1:], depth)
            return
        lock, command = rest[0], rest[1:]
        if lock.value is None or not lock.value.isdigit():
            yield from self.write(lock.value, lock.text)  # flock creates its lock file
        if command and command[0].value in ("-c", "--command"):
            script = command[1] if len(command) > 1 else None
            value = script.value if script is not None else None
            yield from self.nested(value or "", value is not None, words, depth)
        elif command:
            yield from self.words(command, depth + 1, understood=understood)

    def watch(self, words: Sequence[Word], depth: int, *, understood: bool) -> Iterator[Finding | _StdWrite]:
        """``watch [options] COMMAND...``: the words are joined and run by ``sh -c`` (``-x``: exec'd)."""
        spec = Wrapper(
            flags=_set(
                "-b",
                "--beep",
                "-c",
                "--color",
                "-C",
                "--no-color",
                "-e",
                "--errexit",
                "-g",
                "--chgexit",
                "-t",
                "--no-title",
                "-w",
                "--no-wrap",
                "-p",
                "--precise",
                "-r",
                "--no-rerun",
                "-x",
                "--exec",
                "-d",
            ),
            valued=_set("-n", "--interval", "-q", "--equexit"),
            optional=_set("--differences"),
        )
        yield self.invocation("watch", words, "watch", True, understood=understood)
        stripped = yield from self.strip(words, spec, "watch")
        if stripped is None:
            return
        rest, ok = stripped
        if not ok:
            yield Unclear(text=_source(words), reason="watch with options it does not model")
            yield from self.search(words[1:], depth)
            return
        if any(w.value in ("-x", "--exec") for w in words[1 : len(words) - len(rest)]):
            yield from self.words(rest, depth + 1, understood=understood)
            return
        yield from self.nested(
            " ".join(w.value or "" for w in rest), all(w.value is not None for w in rest), words, depth
        )

    def find(self, words: Sequence[Word], depth: int, *, understood: bool) -> Iterator[Finding | _StdWrite]:
        yield self.invocation("find", words, "find", True, understood=understood)
        i = 1
        while i < len(words):
            value = words[i].value
            if value in FIND_EXEC:
                end = i + 1
                while end < len(words) and words[end].value not in (";", "+"):
                    end += 1
                if end >= len(words):
                    yield Unclear(text=_source(words), reason="find -exec without its end")
                yield from self.words(words[i + 1 : end], depth + 1, understood=understood)
                i = end
            elif value == "-delete":
                yield Unclear(text=_source(words), reason="find -delete removes what it matches")
            elif value in FIND_WRITES and i + 1 < len(words):
                yield from self.write(words[i + 1].value, words[i + 1].text)
                i += 1
            i += 1

    def strip(
        self, words: Sequence[Word], spec: Wrapper, name: str
    ) -> Generator[Finding | _StdWrite, None, tuple[list[Word], bool] | None]:
        """Generator helper: yields the wrapper's own findings, returns ``_strip``'s answer."""
        stripped = _strip(words, spec)
        if stripped is None:
            return None
        rest, ok, writes, assigned, moved = stripped
        if moved:
            self.cwds = None  # the command runs elsewhere: relative targets are unknown from here on
        own = [w.value or "" for w in words[1 : len(words) - len(rest)]]
        if _clears_environment(name, own):
            # The run's environment carries git's config neutralisation (_gitsafe): a command
            # that drops it may run what a hostile repository's config names.
            yield Unclear(text=_source(words), reason=f"{name} clears or unsets the environment")
        for path in writes:
            yield from self.write(path, path or _source(words))
        for assignment in assigned:
            yield from self.assigns(assignment, _source(words))
        return rest, ok

    # -- redirections and where they land ------------------------------------------------------

    def redirect(self, redirect: Redirect) -> Iterator[Finding | _StdWrite]:
        operator, target, fd = redirect.operator, redirect.target, redirect.fd
        value = target.value if target is not None else None
        # A standard stream pointed at a file, or made a copy of another descriptor:
        # /dev/stdout and friends may reopen that file from now on.
        if operator in ("<", "<>") and fd in ("1", "2"):
            self.fds_touched = True
        if operator in ("<&", ">&") and fd in (None, "1", "2") and value is not None and value.isdigit():
            self.fds_touched = self.fds_touched or value not in ("1", "2")
        if operator not in WRITE_OPERATORS or target is None:
            return
        if operator == ">&" and value is not None and (value.isdigit() or value == "-"):
            return  # duplicates a descriptor; no file involved
        yield from self.write(value, target.text)

    def write(self, value: str | None, text: str) -> Iterator[Write | _StdWrite | Unclear]:
        if value is None:
            yield Write(path=None, text=text)
            return
        if value in NULL_TARGETS:
            return
        if value in STD_TARGETS:
            yield _StdWrite(text=text)
            return
        paths = self.resolve(value, text)
        if paths is None:
            yield Write(path=None, text=text)
            return
        for path in paths:
            yield Write(path=path, text=text)

    def resolve(self, value: str, text: str) -> list[Path] | None:
        """Where ``value`` may point (every candidate); None when that cannot be known."""
        CONSULTED[0] += 1
        bases: list[Path]
        rest = value
        if text.startswith("~"):  # an unquoted tilde prefix, expanded by bash
            prefix, slash, rest = value.partition("/")
            rest = slash and rest
            if prefix == "~":
                if self.home is None:
                    return None
                bases = [self.home]
            elif prefix == "~+":
                if self.cwds is None:
                    return None
                bases = list(self.cwds)
            elif prefix == "~-":
                olds = [*self.seen] if self.changed_dir else []
                if self.oldpwd is not None:
                    olds.append(self.oldpwd)
                if not olds or self.cwds is None:
                    return None
                bases = olds
            else:
                user = prefix[1:]
                if not user or not NAME.match(user.replace("-", "_").replace(".", "_")):
                    return None  # ~+2, ~-1 (the directory stack), odd names
                import pwd

                try:
                    bases = [Path(pwd.getpwnam(user).pw_dir)]
                except KeyError:
                    return None
            rest = rest or "."
        elif value.startswith("/"):
            bases = [Path("/")]
        else:
            if self.cwds is None:
                return None
            bases = list(self.cwds)
        paths = []
        for base in bases:
            try:
                raw = os.path.normpath(os.path.join(base, rest))
                if raw.startswith(SPECIAL_PREFIXES) or raw == "/dev/fd":
                    return None
                real = os.path.realpath(os.path.join(base, rest))
            except (ValueError, UnicodeError, OSError):  # NUL bytes, lone surrogates, loops
                return None
            if real.startswith(SPECIAL_PREFIXES) or real == "/dev/fd":
                return None  # /dev/fd/N, /proc/self/...: another descriptor of this very shell
            paths.append(Path(real))
        return paths

    def track_cd(self, invocation: Invocation) -> None:
        """Follow ``cd DIR``: every directory the script may be in afterwards (it may fail, run in
        a subshell or a branch, so the old ones stay candidates)."""
        if invocation.program not in ("cd", "pushd", "popd") or self.cwds is None:
            return
        if invocation.program == "popd":
            return  # back to a directory already among the candidates
        args = [w for w in invocation.args if w.value not in ("-L", "-P", "-e", "-@", "--")]
        self.changed_dir = True
        targets: list[Path] | None
        if not args:
            if invocation.program == "pushd":
                return  # swaps the two top directories: both already candidates
            targets = [self.home] if self.home is not None else None
        else:
            value = args[0].value
            relative = value is not None and not value.startswith(("/", "~"))
            if value is None:
                targets = None
            elif value == "-":
                targets = [*self.seen, *([self.oldpwd] if self.oldpwd is not None else [])]
            elif value.startswith(("+", "-")):
                targets = None  # the directory stack (pushd +2) or an option we do not know
            elif self.cdpath and relative and not value.startswith(("./", "../")) and value not in (".", ".."):
                targets = None  # CDPATH decides where a bare name goes
            else:
                resolved = self.resolve(value, args[0].text)
                logical = [Path(os.path.normpath(c / value)) for c in self.cwds] if relative else []
                targets = None if resolved is None else [*resolved, *logical]
        if targets is None:
            self.cwds = None
            return
        merged = list(dict.fromkeys([*self.cwds, *targets]))
        if len(merged) > MAX_CWDS:
            self.cwds = None
            return
        self.cwds = merged
        self.seen = list(dict.fromkeys([*self.seen, *merged]))


def _source(words: Sequence[Word]) -> str:
    """The source text of ``words``, elided after ``SHOWN_WORDS`` words (bounds the work per part)."""
    text = " ".join(w.text for w in words[:SHOWN_WORDS])
    return text if len(words) <= SHOWN_WORDS else text + " ..."


def _program(word: str) -> tuple[str, bool]:
    """The base name of a command word, and whether it means what that base name means."""
    if "/" not in word:
        return word, True
    path = os.path.normpath(word)
    base = os.path.basename(path)
    return (base or word), os.path.dirname(path) in SYSTEM_DIRS


def _xargs_replace(options: Sequence[Word]) -> str | None:
    """The string xargs replaces with each input item (``-I R``, ``-IR``, ``-i``, ``--replace[=R]``)."""
    replace = None
    for i, word in enumerate(options):
        value = word.value or ""
        if value == "-I":
            replace = options[i + 1].value if i + 1 < len(options) else None
        elif value.startswith("-I"):
            replace = value[2:]
        elif value in ("-i", "--replace"):
            replace = "{}"
        elif value.startswith(("-i", "--replace=")):
            replace = value.partition("=")[2] if value.startswith("--") else value[2:]
    return replace


def _strip(words: Sequence[Word], spec: Wrapper) -> tuple[list[Word], bool, list[str | None], list[str], bool] | None:
    """The words after a wrapper's own, whether its options were all known, the files its
    options write, the variables it sets and whether it changes directory; None when it runs
    nothing (``env``, ``command -v``)."""
    i, n = 1, len(words)
    writes: list[str | None] = []
    assigned: list[str] = []
    moved = False
    while i < n:
        value = words[i].value
        if value is None:
            break  # a computed word ends the options: a positional value, or the command itself
        if value == "--":
            i += 1
            break
        if not value.startswith("-") or (value == "-" and value not in spec.flags):
            break
        if value in spec.lookups:
            return None
        option, eq, attached = value.partition("=")
        moved = moved or option in spec.chdir or (value[:2] in spec.chdir and not value.startswith("--"))
        if value in spec.flags or (spec.numeric and value[1:].isdigit()) or option in spec.optional:
            i += 1
        elif eq and option in spec.valued and option.startswith("--"):
            if option in spec.writes:
                writes.append(attached)
            i += 1
        elif value in spec.valued:
            if i + 1 >= n:
                return list(words[i:]), False, writes, assigned, moved
            if value in spec.writes:
                writes.append(words[i + 1].value)
            i += 2
        elif value[:2] in spec.valued and not value.startswith("--"):
            if value[:2] in spec.writes:
                writes.append(value[2:])
            i += 1  # attached value: -n5, -oL
        elif len(value) > 1 and all(f"-{c}" in spec.flags for c in value[1:]):
            i += 1
        else:
            return list(words[i:]), False, writes, assigned, moved
    if spec.assignments:
        # env and sudo take every word holding "=" before the command as an assignment.
        while i < n and "=" in (words[i].value or words[i].text):
            value = words[i].value
            assigned.append(value.partition("=")[0] if value is not None else "")
            i += 1
    if i + spec.positional >= n:
        return None
    return list(words[i + spec.positional :]), True, writes, assigned, moved


def _clears_environment(name: str, options: Sequence[str]) -> bool:
    """``env -i``, ``env -u NAME``, ``env -``, ``exec -c``: the command loses the run's environment."""
    letters = {"env": "iu", "exec": "c"}.get(name, "")
    for option in options:
        if option.startswith("--"):
            cleared = name == "env" and option.partition("=")[0] in ("--ignore-environment", "--unset")
        else:
            cleared = (option == "-" and name == "env") or any(c in option[1:] for c in letters)
        if cleared:
            return True
    return False


def _shadows(name: str) -> bool:
    """True when a function by this name replaces a builtin, a wrapper or an installed program."""
    import shutil

    CONSULTED[0] += 1

    if name in BUILTINS or name in WRAPPERS or name in RUNNERS or name in SHELLS or name in OPAQUE_RUNNERS:
        return True
    if not NAME.match(name.replace("-", "_").replace(".", "_")):
        return True
    try:
        return shutil.which(name) is not None
    except (OSError, ValueError):
        return True


def _name_ok(value: str | None) -> bool:
    """A variable name a builtin may set safely: an identifier, a literal subscript, not risky."""
    if value is None:
        return False
    match = _SUBSCRIPTED.match(value)
    if match is None:
        return False
    if match[2] is not None and not LITERAL_INDEX.match(match[2]):
        return False
    return not risky_variable(match[1])


def _is_command_option(value: str | None) -> bool:
    """``-c``, ``--command``, ``-lc``: su and runuser take a command string."""
    if value is None:
        return False
    if value.startswith("--"):
        return value.partition("=")[0] in ("--command", "--session-command")
    return value.startswith("-") and value.endswith("c") and set(value[1:]) <= set("lmpfc")


def _short_flag(value: str | None, letters: str) -> bool:
    """``value`` is a short-option cluster (``-s``, ``-Es``) holding one of ``letters``."""
    return value is not None and value[:1] == "-" and value[1:2] != "-" and any(c in value[1:] for c in letters)


def _plain_name(value: str | None) -> bool:
    """An identifier with at most a literal subscript (``x``, ``a[1]``)."""
    match = _SUBSCRIPTED.match(value or "")
    return match is not None and (match[2] is None or LITERAL_INDEX.match(match[2]) is not None)


def _options(values: Sequence[str | None], valued: str) -> tuple[dict[str, str | None], list[str | None]]:
    """Short options (``-r``, ``-p PROMPT``, ``-pPROMPT``) and the operands after them."""
    found: dict[str, str | None] = {}
    i = 0
    while i < len(values):
        value = values[i]
        if value is None or value == "--":
            i += value == "--"
            break
        if not value.startswith("-") or len(value) < 2:
            break
        j = 1
        while j < len(value):
            letter = value[j]
            if letter in valued:
                if j + 1 < len(value):
                    found[letter] = value[j + 1 :]
                else:
                    i += 1
                    found[letter] = values[i] if i < len(values) else None
                break
            found[letter] = ""
            j += 1
        i += 1
    return found, list(values[i:])


def _builtin_problem(name: str, args: Sequence[Word], values: Sequence[str | None]) -> str | None:
    """Why a builtin's arguments make bash evaluate code or set a risky name; None if harmless."""
    if name == "let":
        from ._parse import arithmetic_safe

        if not all(v is not None and arithmetic_safe(v) for v in values):
            return "let evaluates arithmetic on names"
    elif name == "read":
        options, names = _options(values, "adinNptu")
        if "a" in options and not _name_ok(options["a"]):
            return "read into a computed or risky name"
        if not all(_name_ok(v) for v in names):
            return "read into a computed or risky name"
    elif name in ("mapfile", "readarray"):
        options, names = _options(values, "dnOsuCc")
        if "C" in options or "c" in options:
            return f"{name} -C runs a callback"
        if not all(_name_ok(v) for v in names[:1]):
            return f"{name} into a computed or risky name"
    elif name == "printf":
        options, _ = _options(values[:2], "v")
        if "v" in options and not _name_ok(options["v"]):
            return "printf -v into a computed or risky name"
    elif name == "getopts":
        if len(values) >= 2 and not _name_ok(values[1]):
            return "getopts into a computed or risky name"
    elif name == "wait":
        options, _ = _options(values, "p")
        if "p" in options and not _name_ok(options["p"]):
            return "wait -p into a computed or risky name"
    elif name in _TEST_COMMANDS:
        for i, value in enumerate(values):
            if value in ("-v", "-R") and not _plain_name(values[i + 1] if i + 1 < len(values) else None):
                return "test -v on a computed name (its subscript is evaluated)"
    elif name == "hash":
        options, _ = _options(values, "pdt")
        if "p" in options:
            return "hash -p makes a name run another program"
    elif name == "set":
        return _set_problem(values)
    elif name == "shopt":
        options, names = _options(values, "")
        if set(options) - set("psuqo"):
            return "shopt option it does not know"
        if ("s" in options or "u" in options) and not all(
            v in (SAFE_SET_OPTIONS if "o" in options else SAFE_SHOPT_OPTIONS) for v in names
        ):
            return "shopt changes how later lines are read (expand_aliases, extdebug, ...)"
    elif name == "unalias":
        return None
    if name in ("declare", "typeset", "local", "export", "readonly", "unset"):
        # Reached for a quoted keyword ('export' X=1), which the parser sees as a plain command.
        return f"{name} given as a plain command"
    for word in args:  # {NAME}>file stores a descriptor number in NAME (a name: not {} or {a,b})
        inner = word.text[1:-1]
        if (
            word.text.startswith("{")
            and word.text.endswith("}")
            and _IDENTIFIER.fullmatch(inner)
            and risky_variable(inner)
        ):
            return f"assigns a descriptor to {word.text[1:-1]}"
    return None


def _set_problem(values: Sequence[str | None]) -> str | None:
    i = 0
    while i < len(values):
        value = values[i]
        if value is None:
            return "set with computed options"
        if value in ("--", "-"):
            return None  # the rest are positional parameters
        if value[:1] not in ("-", "+") or len(value) < 2:
            return None
        for letter in value[1:]:
            if letter == "o":
                i += 1
                option = values[i] if i < len(values) else None
                if option is not None and option not in SAFE_SET_OPTIONS:
                    return f"set -o {option}"
            elif letter not in SAFE_SET_LETTERS:
                return f"set -{letter} (changes how later commands run)"
        i += 1
    return None


def _runs_option(name: str, values: Sequence[str | None]) -> bool:
    options = EXEC_OPTIONS[name]
    for value in values:
        if value is None:
            continue
        for option in options:
            if option.endswith("="):
                if value.startswith(option) or value == option[:-1]:
                    return name != "git" or value != "--exec-path"
            elif (
                value == option
                or value.startswith(option + "=")
                or (
                    not option.startswith("--")
                    and len(option) == 2
                    and value.startswith(option)
                    and not value.startswith("--")
                )
            ):
                return True
    return False


#: sed commands that run a program (``e``) or write a file (``w``, ``W``), after an optional address.
_SED_ADDRESS = r"(?:[0-9]+|\$|/(?:\\.|[^/\n])*/[IM]*)(?:~[0-9]+)?"
_SED_COMMAND = re.compile(
    rf"(?:^|[;\n{{}}])\s*(?:{_SED_ADDRESS}(?:\s*,\s*(?:{_SED_ADDRESS}|[+~][0-9]+))?)?\s*!?\s*[ewW](?:\s|$|;)"
)
_SED_SUBSTITUTE = re.compile(r"s([^\\\n])(?:\\.|(?!\1).)*\1(?:\\.|(?!\1).)*\1([A-Za-z0-9]*)", re.DOTALL)


def _sed_problem(values: Sequence[str | None]) -> str | None:
    """GNU sed runs programs (``e``, ``s///e``) and writes files (``w``) named in its script."""
    scripts: list[str] = []
    explicit = False
    i = 0
    while i < len(values):
        value = values[i]
        if value is None:
            return "sed with a computed argument"
        if value == "--sandbox":
            return None  # e, w and r are refused by sed itself
        if value in ("-e", "--expression"):
            explicit = True
            scripts.append(values[i + 1] or "" if i + 1 < len(values) else "")
            i += 2
            continue
        if value.startswith("--expression="):
            explicit = True
            scripts.append(value.partition("=")[2])
        elif value in ("-f", "--file") or (value.startswith(("--file=", "-f")) and not value.startswith("--")):
            return "sed reads its script from a file"
        elif value.startswith("-e") and not value.startswith("--"):
            explicit = True
            scripts.append(value[2:])
        elif not value.startswith("-") and not explicit and not scripts:
            scripts.append(value)
        i += 1
    for script in scripts:
        if _SED_COMMAND.search(script):
            return "sed script runs a command or writes a file (e, w)"
        for match in _SED_SUBSTITUTE.finditer(script):
            if "e" in match[2] or "w" in match[2]:
                return "sed substitution runs a command or writes a file (e, w flags)"
    return None


def _git_problem(values: Sequence[str | None]) -> str | None:
    """``git -c KEY=VALUE``: keys that can name a program (core.fsmonitor, alias.*, ...)."""
    i = 0
    while i < len(values):
        value = values[i]
        if value is None:
            return "git with computed options"
        if value == "-c" or value.startswith("-c"):
            setting = value[2:] if len(value) > 2 else (values[i + 1] if i + 1 < len(values) else None)
            if setting is None:
                return "git -c with a computed setting"
            key = setting.partition("=")[0].lower()
            if not any(key == safe or (safe.endswith(".") and key.startswith(safe)) for safe in SAFE_GIT_CONFIG):
                return f"git -c {key} may name a program"
            i += 1 if len(value) > 2 else 2
            continue
        if value in ("-C", "--namespace"):
            i += 2
            continue
        if not value.startswith("-"):
            return None  # the sub-command
        i += 1
    return None
