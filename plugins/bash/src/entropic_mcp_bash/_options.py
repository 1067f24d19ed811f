"""The option tables: options of common programs that write files or run programs.

A rule such as ``bash.execute:git log*``, ``sort *`` or ``make test *`` is meant to allow reading
and building, but ``git log --output=.git/config``, ``sort -o victim`` and ``make --eval=...`` write
files or run code. Each table below says, for one program (or git sub-command):

* ``writes``: options whose value is a file the program writes. The file is checked like a
  redirection (every write rule applies, the policy files and ``.git`` are protected).
* ``runs``: options that run a program (named in the value, or a pager, driver or script): the
  command is not understood (it asks; no rule allows it).
* ``valued`` / ``flags``: the options known to do neither, with and without a value.
* ``closed``: the table lists every option the analysis accepts; any other option is not
  understood. Open tables only name the dangerous ones.

Long options may be abbreviated (GNU getopt, git): a prefix of a dangerous option is that option.
A word that is not a literal (``sort $opts``) is not understood. Extending: add the option to the
right set and a case to ``tests/test_options.py`` (every entry of ``writes`` and ``runs`` is
checked there). docs/plugins/bash.md lists what is modelled.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs


def _set(*names: str) -> frozenset[str]:
    return frozenset(names)


@attrs.frozen(kw_only=True)
class OptionTable:
    """What one program's options do (see the module docstring)."""

    writes: frozenset[str] = frozenset()
    runs: frozenset[str] = frozenset()
    valued: frozenset[str] = frozenset()
    flags: frozenset[str] = frozenset()
    #: options whose value is attached only (``-M50%``, ``--color=always``), never the next word
    attached: frozenset[str] = frozenset()
    closed: bool = False
    #: ``-5`` (a count) is an option of its own
    numeric: bool = False
    #: every operand is a file it writes (``tee``)
    writes_operands: bool = False
    #: operands ``NAME=value`` run code (``make CC='rm x'`` overrides a variable a recipe runs)
    assignments_run: bool = False

    def long_names(self) -> frozenset[str]:
        return frozenset(n for n in self.writes | self.runs | self.valued | self.flags | self.attached if n[:2] == "--")


@attrs.frozen(kw_only=True)
class Effect:
    """What one option or operand does: ``write`` (``value`` is the file), ``run`` or ``unknown``."""

    kind: str
    option: str
    value: str | None = None


def effects(table: OptionTable, values: Sequence[str | None]) -> list[Effect]:
    """The writes, runs and unknown options among a command's arguments (``values``, after the name)."""
    found: list[Effect] = []
    longs = table.long_names()
    i = 0
    while i < len(values):
        value = values[i]
        i += 1
        if value is None:
            found.append(Effect(kind="unknown", option="a computed argument"))
            continue
        if value == "--":
            if table.writes_operands:
                found.extend(Effect(kind="write", option="operand", value=v) for v in values[i:])
            if any(v is None for v in values[i:]):
                found.append(Effect(kind="unknown", option="a computed argument"))
            break
        if value.startswith("--") and len(value) > 2:
            name, eq, attached = value.partition("=")
            option = _resolve(name, table, longs)
            if option is None:
                if table.closed:
                    found.append(Effect(kind="unknown", option=name))
                continue
            argument: str | None = attached if eq else None
            if not eq and option in (table.writes | table.runs | table.valued) and option not in table.attached:
                argument = values[i] if i < len(values) else None
                i += 1
            found.extend(_effect(table, option, argument))
            continue
        if value.startswith("-") and len(value) > 1:
            if table.numeric and value[1:].isdigit():
                continue
            i = _cluster(table, value, values, i, found)
            continue
        if table.writes_operands:
            found.append(Effect(kind="write", option="operand", value=value))
        elif table.assignments_run and "=" in value and not value.startswith("="):
            found.append(Effect(kind="run", option=f"{value.partition('=')[0]}= (a variable override)"))
    return found


def _resolve(name: str, table: OptionTable, longs: frozenset[str]) -> str | None:
    if name in longs:
        return name
    prefixed = [n for n in longs if n.startswith(name)]
    dangerous = [n for n in prefixed if n in table.runs or n in table.writes]
    if dangerous:
        return sorted(dangerous, key=lambda n: n not in table.runs)[0]
    return prefixed[0] if len(prefixed) == 1 else None


def _cluster(table: OptionTable, value: str, values: Sequence[str | None], i: int, found: list[Effect]) -> int:
    """Short options ``-abc`` / ``-oFILE`` / ``-o FILE``; returns the index after what they used."""
    for j, letter in enumerate(value[1:], start=1):
        option = "-" + letter
        rest = value[j + 1 :]
        if option in table.attached:
            found.extend(_effect(table, option, rest))
            return i
        if option in table.writes or option in table.runs or option in table.valued:
            if rest:
                argument: str | None = rest
            else:
                argument = values[i] if i < len(values) else None
                i += 1
            found.extend(_effect(table, option, argument))
            return i
        if option not in table.flags and table.closed:
            found.append(Effect(kind="unknown", option=option))
            return i
    return i


def _effect(table: OptionTable, option: str, argument: str | None) -> list[Effect]:
    if option in table.runs:
        return [Effect(kind="run", option=option, value=argument)]
    if option in table.writes:
        return [Effect(kind="write", option=option, value=argument)]
    return []


# -- the tables --------------------------------------------------------------------------------

#: Options of git's diff machinery (diff, log -p, show, format-patch, ...) that do neither.
_DIFF_FLAGS = _set(
    *("-p", "-u", "--patch", "-s", "--no-patch", "--raw", "--patch-with-raw", "-t", "-z", "-R"),
    *("--stat", "--numstat", "--shortstat", "--compact-summary", "--summary", "--patch-with-stat"),
    *("--dirstat", "--cumulative", "--dirstat-by-file", "--name-only", "--name-status", "--check"),
    *("--full-index", "--binary", "--minimal", "--patience", "--histogram", "--no-renames"),
    *("--rename-empty", "--no-rename-empty", "--find-copies-harder", "-D", "--irreversible-delete"),
    *("--pickaxe-all", "--pickaxe-regex", "-a", "--text", "--ignore-cr-at-eol", "--ignore-space-at-eol"),
    *("-b", "--ignore-space-change", "-w", "--ignore-all-space", "--ignore-blank-lines"),
    *("--indent-heuristic", "--no-indent-heuristic", "-W", "--function-context", "--exit-code"),
    *("--quiet", "--no-ext-diff", "--no-textconv", "--no-prefix", "--default-prefix", "--no-color"),
    *("--color-moved-ws", "--no-color-moved", "--no-color-moved-ws", "--ita-invisible-in-index"),
    *("--ita-visible-in-index", "--cached", "--staged", "--merge-base", "--no-index", "--no-relative"),
    *("--follow", "--no-stat", "--combined-all-paths", "-m", "-c", "--cc", "--dd", "--remerge-diff"),
    "--no-diff-merges",
)
_DIFF_VALUED = _set(
    *("--output-indicator-new", "--output-indicator-old", "--output-indicator-context"),
    *("--diff-algorithm", "--anchored", "--diff-filter", "-S", "-G", "--find-object", "-O"),
    *("--src-prefix", "--dst-prefix", "--line-prefix", "--inter-hunk-context", "-I"),
    *("--ignore-matching-lines", "--skip-to", "--rotate-to", "--diff-merges"),
)
_DIFF_ATTACHED = _set(
    *("-U", "--unified", "--stat-width", "--stat-name-width", "--stat-graph-width", "--stat-count"),
    *("-M", "--find-renames", "-C", "--find-copies", "-B", "--break-rewrites", "-l", "--color"),
    *("--color-moved", "--word-diff", "--word-diff-regex", "--color-words", "--ws-error-highlight"),
    *("--abbrev", "--submodule", "--ignore-submodules", "--relative", "-X", "--dirstat"),
)
#: ``--output`` writes the diff to a file; ``--ext-diff`` and ``--textconv`` run the drivers a
#: repository's config and attributes name.
_DIFF_WRITES = _set("--output")
_DIFF_RUNS = _set("--ext-diff", "--textconv")
#: Options of git's revision walk (log, show, shortlog, ...).
_REV_FLAGS = _set(
    *("--all", "--branches", "--tags", "--remotes", "--reflog", "--not", "--no-walk", "--do-walk"),
    *("--merges", "--no-merges", "--first-parent", "--exclude-first-parent-only", "--boundary"),
    *("--left-right", "--left-only", "--right-only", "--cherry", "--cherry-mark", "--cherry-pick"),
    *("--topo-order", "--date-order", "--author-date-order", "--reverse", "-g", "--walk-reflogs"),
    *("--simplify-by-decoration", "--full-history", "--dense", "--sparse", "--simplify-merges"),
    *("--show-pulls", "--remove-empty", "--parents", "--children", "--graph", "--no-graph"),
    *("--all-match", "--invert-grep", "-i", "--regexp-ignore-case", "-E", "--extended-regexp"),
    *("-F", "--fixed-strings", "-P", "--perl-regexp", "--basic-regexp", "--oneline", "--source"),
    *("--use-mailmap", "--mailmap", "--no-mailmap", "--no-use-mailmap", "--log-size"),
    *("--abbrev-commit", "--no-abbrev-commit", "--no-abbrev", "--relative-date", "--no-notes"),
    *("--expand-tabs", "--no-expand-tabs", "--show-linear-break", "--no-decorate", "--clear-decorations"),
    *("--full-diff", "--no-max-parents", "--no-min-parents", "--single-worktree", "--ignore-missing"),
    *("--bisect", "--stdin", "--in-commit-order", "--count", "--timestamp", "--objects", "--no-filters"),
    "--show-notes-by-default",
)
_REV_VALUED = _set(
    *("-n", "--max-count", "--skip", "--since", "--after", "--until", "--before", "--since-as-filter"),
    *("--author", "--committer", "--grep", "--grep-reflog", "--max-parents", "--min-parents"),
    *("--glob", "--exclude", "--exclude-hidden", "--decorate-refs", "--decorate-refs-exclude"),
    *("--encoding", "-L", "--ancestry-path"),
)
_REV_ATTACHED = _set(
    *("--pretty", "--format", "--date", "--decorate", "--notes", "--show-notes", "--standard-notes"),
    *("--no-standard-notes", "--ancestry-path", "--show-linear-break"),
)
#: ``--show-signature`` runs gpg (gpg.program, which a repository may set).
_REV_RUNS = _set("--show-signature")

_LOG = OptionTable(
    writes=_DIFF_WRITES,
    runs=_DIFF_RUNS | _REV_RUNS,
    valued=_DIFF_VALUED | _REV_VALUED,
    flags=_DIFF_FLAGS | _REV_FLAGS,
    attached=_DIFF_ATTACHED | _REV_ATTACHED,
    closed=True,
    numeric=True,
)
_DIFF = OptionTable(
    writes=_DIFF_WRITES,
    runs=_DIFF_RUNS,
    valued=_DIFF_VALUED,
    flags=_DIFF_FLAGS,
    attached=_DIFF_ATTACHED,
    closed=True,
)
_STATUS = OptionTable(
    flags=_set(
        *("-s", "--short", "-b", "--branch", "--show-stash", "--long", "-v", "--verbose", "-z"),
        *("--no-column", "--ahead-behind", "--no-ahead-behind", "--renames", "--no-renames"),
    ),
    attached=_set(
        *("--porcelain", "-u", "--untracked-files", "--ignore-submodules", "--ignored", "--column"),
        "--find-renames",
    ),
    closed=True,
)
_GREP = OptionTable(
    #: ``-O``/``--open-files-in-pager`` runs the pager it names (or core.pager) on the files.
    runs=_set("-O", "--open-files-in-pager", "--textconv"),
    flags=_set(
        *("--cached", "--untracked", "--no-index", "--no-exclude-standard", "--exclude-standard"),
        *("-a", "--text", "--no-textconv", "-i", "--ignore-case", "-I", "-r", "--recursive"),
        *("--no-recursive", "-w", "--word-regexp", "-v", "--invert-match", "-h", "-H", "--full-name"),
        *("-E", "--extended-regexp", "-G", "--basic-regexp", "-P", "--perl-regexp", "-F"),
        *("--fixed-strings", "-n", "--line-number", "--column", "-l", "--files-with-matches"),
        *("--name-only", "-L", "--files-without-match", "-z", "--null", "-o", "--only-matching"),
        *("-c", "--count", "--no-color", "--break", "--heading", "-p", "--show-function", "-W"),
        *("--function-context", "--and", "--or", "--not", "--all-match", "-q", "--quiet"),
        "--recurse-submodules",
    ),
    valued=_set(
        *("--max-depth", "-A", "--after-context", "-B", "--before-context", "-C", "--context"),
        *("--threads", "-f", "-e", "-m", "--max-count"),
    ),
    attached=_set("--color"),
    closed=True,
    numeric=True,
)
_FORMAT_PATCH = OptionTable(
    #: ``-o DIR`` fills a directory with patches whose names come from the commits.
    runs=_DIFF_RUNS | _set("-o", "--output-directory"),
    writes=_DIFF_WRITES,
)
_BLAME = OptionTable(runs=_set("--textconv"), valued=_set("--contents", "-S", "--ignore-revs-file", "-L"))

#: git sub-commands whose options are modelled; ``whatchanged`` and ``show`` walk like log.
GIT_TABLES: dict[str, OptionTable] = {
    "log": _LOG,
    "show": _LOG,
    "whatchanged": _LOG,
    "diff": _DIFF,
    "diff-files": _DIFF,
    "diff-index": _DIFF,
    "diff-tree": _LOG,
    "format-patch": _FORMAT_PATCH,
    "status": _STATUS,
    "grep": _GREP,
    "blame": _BLAME,
    "annotate": _BLAME,
}

TABLES: dict[str, OptionTable] = {
    "sort": OptionTable(
        writes=_set("-o", "--output"),
        runs=_set("--compress-program"),
        valued=_set(
            *("-k", "--key", "-t", "--field-separator", "-S", "--buffer-size", "-T"),
            *("--temporary-directory", "--parallel", "--batch-size", "--files0-from", "--sort"),
            "--random-source",
        ),
        flags=_set(
            *("-b", "--ignore-leading-blanks", "-d", "--dictionary-order", "-f", "--ignore-case", "-g"),
            *("--general-numeric-sort", "-i", "--ignore-nonprinting", "-M", "--month-sort", "-h"),
            *("--human-numeric-sort", "-n", "--numeric-sort", "-R", "--random-sort", "-r", "--reverse"),
            *("-V", "--version-sort", "-c", "-C", "-m", "--merge", "-s", "--stable", "-u", "--unique"),
            *("-z", "--zero-terminated", "--debug", "--help", "--version"),
        ),
        attached=_set("--check"),
        closed=True,
    ),
    "make": OptionTable(
        #: ``--eval`` runs make code; ``-f``/``-C``/``-I`` read other makefiles (other recipes).
        runs=_set(
            *("-E", "--eval", "-f", "--file", "--makefile", "-C", "--directory", "-I", "--include-dir"),
        ),
        valued=_set(
            *("-o", "--old-file", "--assume-old", "-W", "--what-if", "--new-file", "--assume-new"),
            *("-j", "--jobs", "-l", "--load-average", "--max-load"),
        ),
        flags=_set(
            *("-B", "--always-make", "-d", "-e", "--environment-overrides", "-i", "--ignore-errors"),
            *("-k", "--keep-going", "-L", "--check-symlink-times", "-n", "--just-print", "--dry-run"),
            *("--recon", "-p", "--print-data-base", "-q", "--question", "-r", "--no-builtin-rules"),
            *("-R", "--no-builtin-variables", "-s", "--silent", "--quiet", "-S", "--no-keep-going"),
            *("--stop", "-t", "--touch", "--trace", "-v", "--version", "-w", "--print-directory"),
            *("--no-print-directory", "--warn-undefined-variables", "--no-silent", "-h", "--help"),
        ),
        attached=_set("--debug", "-O", "--output-sync", "--shuffle", "--jobserver-style"),
        closed=True,
        assignments_run=True,
    ),
    "sed": OptionTable(
        # What the script does (e, w, s///e) is checked by the analysis; the files -i rewrites
        # by ``sed_in_place``. This closed table keeps an unknown option from being a guess.
        valued=_set("-e", "--expression", "-f", "--file", "-l", "--line-length"),
        flags=_set(
            *("-n", "--quiet", "--silent", "--debug", "-E", "-r", "--regexp-extended", "-s"),
            *("--separate", "--sandbox", "-u", "--unbuffered", "-z", "--null-data", "--zero-terminated"),
            *("--posix", "--follow-symlinks", "-b", "--binary", "--help", "--version"),
        ),
        attached=_set("-i", "--in-place"),
        closed=True,
    ),
    "tee": OptionTable(
        flags=_set("-a", "--append", "-i", "--ignore-interrupts", "-p", "--help", "--version"),
        attached=_set("--output-error"),
        closed=True,
        writes_operands=True,
    ),
    "pytest": OptionTable(
        #: reports written where rules see them; ``--basetemp`` empties a directory, ``-p``,
        #: ``--pdbcls`` import code, ``-c``/``-o``/``--rootdir``/``--confcutdir`` pick other
        #: configuration (its ``addopts``), ``--debug`` writes a log next to it.
        writes=_set("--junitxml", "--junit-xml", "--report-log", "--resultlog", "--result-log"),
        runs=_set(
            *("-p", "--basetemp", "-c", "--config-file", "-o", "--override-ini", "--rootdir"),
            *("--confcutdir", "--pdbcls", "--debug", "--inifile"),
        ),
        valued=_set("-k", "-m", "--maxfail", "--tb", "-r", "--durations", "--deselect", "--ignore", "--ignore-glob"),
        attached=_set("--debug"),
    ),
    "cargo": OptionTable(
        #: ``--config`` sets any key (``target.<triple>.runner`` runs a program), ``-Z`` unstable
        #: behaviour, ``--manifest-path``/``-C`` another crate's build scripts; the directory
        #: options fill directories with build output.
        runs=_set(
            *("--config", "-Z", "--manifest-path", "-C", "--target-dir", "--artifact-dir", "--out-dir"),
        ),
        valued=_set("-p", "--package", "--features", "-F", "--target", "-j", "--jobs", "--bin", "--test"),
    ),
    "npm": OptionTable(
        #: ``--script-shell`` is the program every script runs with; the others read another
        #: configuration or package (their scripts).
        runs=_set(
            *("--script-shell", "--node-options", "--userconfig", "--globalconfig", "--prefix", "-C"),
            "--cache",
        ),
        valued=_set("-w", "--workspace"),
    ),
    "less": OptionTable(
        #: ``-o``/``-O`` copy the input to a log file; lesskey files define commands and variables.
        writes=_set("-o", "--log-file", "-O", "--LOG-FILE"),
        runs=_set("-k", "--lesskey-file", "--lesskey-src", "--lesskey-content"),
        valued=_set("-b", "-h", "-j", "-P", "-t", "-T", "-x", "-y", "-z", "-#", "--tag", "--tag-file"),
    ),
}


def git_subcommand(values: Sequence[str | None]) -> int | None:
    """The index of git's sub-command among its arguments (after global options), or None."""
    i = 0
    while i < len(values):
        value = values[i]
        if value is None:
            return None
        if value in ("-C", "-c", "--namespace", "--git-dir", "--work-tree", "--config-env", "--exec-path"):
            i += 2
            continue
        if not value.startswith("-"):
            return i
        i += 1
    return None


#: GNU sed's options that take the next word (or the rest of the cluster) as their value.
_SED_VALUED = "efl"


def sed_in_place(values: Sequence[str | None]) -> list[str | None] | None:
    """The files ``sed -i`` rewrites (its file operands), or None when it writes none in place."""
    in_place = False
    script_given = False
    operands: list[str | None] = []
    i = 0
    while i < len(values):
        value = values[i]
        i += 1
        if value is None or not value.startswith("-") or value == "-":
            operands.append(value)
            continue
        if value == "--":
            operands.extend(values[i:])
            break
        if value.startswith("--"):
            name = value.partition("=")[0]
            if "--in-place".startswith(name) and len(name) > 4:
                in_place = True
            elif name in ("--expression", "--file") or (
                len(name) > 3 and any(full.startswith(name) for full in ("--expression", "--file"))
            ):
                script_given = True
                i += 0 if "=" in value else 1
            elif name == "--line-length":
                i += 0 if "=" in value else 1
            continue
        for j, letter in enumerate(value[1:], start=1):
            if letter == "i":
                in_place = True
                break  # the rest of the cluster is the backup suffix
            if letter in _SED_VALUED:
                script_given = script_given or letter in "ef"
                i += 0 if j + 1 < len(value) else 1
                break
    if not in_place:
        return None
    return operands if script_given else operands[1:]


#: awk programs with these can run commands (``system``, ``|``, ``getline``), write files
#: (``>``, ``>>``) or load code (``@load``, ``@include``); ``>`` is also a comparison, which
#: costs a question.
_AWK_DANGER = ("system", "|", ">", "getline", "@load", "@include", "close", "fflush", "ENVIRON")
#: gawk options that read program files, load extensions or write files.
_AWK_RISKY_OPTIONS: tuple[str, ...] = (
    *("-f", "--file", "-i", "--include", "-l", "--load", "-E", "--exec", "-d", "--dump-variables"),
    *("-p", "--profile", "-o", "--pretty-print", "-D", "--debug"),
)
_AWK_VALUED = ("-v", "--assign", "-F", "--field-separator", "-e", "--source")


def awk_problem(values: Sequence[str | None]) -> str | None:
    """Why an awk command may run a program or write a file, or None when its program cannot."""
    program: str | None = None
    sources: list[str] = []
    i = 0
    while i < len(values):
        value = values[i]
        i += 1
        if value is None:
            return "awk with a computed argument"
        if value in ("-S", "--sandbox") or (value.startswith("--s") and "--sandbox".startswith(value)):
            return None  # gawk refuses system(), redirections and extensions itself
        if value == "--":
            program = values[i] if i < len(values) and not sources else None
            break
        if not value.startswith("-") or value == "-":
            program = value if not sources else None
            break
        name = value.partition("=")[0]
        if any(
            name == option or (option.startswith("--") and len(name) > 3 and option.startswith(name))
            for option in _AWK_RISKY_OPTIONS
        ) or (name[:2] in _AWK_RISKY_OPTIONS and not name.startswith("--")):
            return f"awk {name} reads a program file, loads code or writes a file"
        if name in _AWK_VALUED or (name[:2] in _AWK_VALUED and not name.startswith("--") and len(name) > 2):
            attached = value.partition("=")[2] if name.startswith("--") and "=" in value else value[2:]
            argument = attached if attached else (values[i] if i < len(values) else None)
            if not attached:
                i += 1
            if name in ("-e", "--source"):
                if argument is None:
                    return "awk with a computed program"
                sources.append(argument)
    for text in [*sources, *([program] if program is not None else [])]:
        for danger in _AWK_DANGER:
            if danger in text:
                return f"awk program uses {danger!r} (runs commands or writes files)"
    if program is None and not sources:
        return "awk without a program it can read"
    return None
