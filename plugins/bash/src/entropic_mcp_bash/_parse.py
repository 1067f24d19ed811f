"""Shell text → the simple commands, redirections and assignments in it, with tree-sitter-bash.

The walk is a whitelist: every node type the analysis knows to be inert is listed; anything
else, and every construct that makes bash evaluate text as code (arithmetic, array subscripts,
``${x@P}``, ``${!x}``, backticks the parser did not see, ...), becomes a ``Flag`` — "not
understood", never allowed by a rule.

This module imports tree-sitter at import time; the rest of the plugin imports it lazily, on
the first permission check, so loading the plugin stays cheap.
"""

from __future__ import annotations

import re
import threading

import attrs
import tree_sitter
import tree_sitter_bash

from ._continuations import Joined, join

_PARSER = tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))
#: A tree-sitter parser is not safe to share between threads (hosts may check calls in several).
_PARSER_LOCK = threading.Lock()

#: Nodes whose value bash computes at run time: a word containing one is not a literal.
_DYNAMIC = frozenset(
    {
        "simple_expansion",
        "expansion",
        "command_substitution",
        "process_substitution",
        "arithmetic_expansion",
        "brace_expression",
        "ansi_c_string",
    }
)
#: Node types the walk understands; any other named node (``ERROR``, ``c_style_for_statement``,
#: types a newer grammar adds) is flagged.
_KNOWN = frozenset(
    {
        "program",
        "comment",
        "list",
        "pipeline",
        "redirected_statement",
        "subshell",
        "compound_statement",
        "if_statement",
        "elif_clause",
        "else_clause",
        "while_statement",
        "for_statement",
        "case_statement",
        "case_item",
        "do_group",
        "negated_command",
        "command",
        "command_name",
        "word",
        "string",
        "raw_string",
        "string_content",
        "simple_expansion",
        "expansion",
        "command_substitution",
        "process_substitution",
        "arithmetic_expansion",
        "concatenation",
        "variable_name",
        "special_variable_name",
        "variable_assignment",
        "variable_assignments",
        "subscript",
        "file_redirect",
        "heredoc_redirect",
        "heredoc_start",
        "heredoc_body",
        "heredoc_content",
        "heredoc_end",
        "herestring_redirect",
        "file_descriptor",
        "number",
        "test_command",
        "binary_expression",
        "unary_expression",
        "parenthesized_expression",
        "ternary_expression",
        "postfix_expression",
        "test_operator",
        "regex",
        "extglob_pattern",
        "declaration_command",
        "unset_command",
        "function_definition",
        "ansi_c_string",
        "translated_string",
        "brace_expression",
        "array",
    }
)
#: Textual nodes whose text between their children must hold no command substitution: one the
#: parser did not turn into a node (a backtick in a here-doc body) would run unseen.
_GAP_CHECKED = frozenset(
    {
        "word",
        "string",
        "string_content",
        "heredoc_body",
        "heredoc_content",
        "number",
        "regex",
        "extglob_pattern",
        "expansion",
        "subscript",
        "brace_expression",
        "translated_string",
        "concatenation",
        "command_name",
    }
)
_BACKTICK_ESCAPE = re.compile(r"\\([$`\\])")
_HIDDEN_CODE = re.compile(r"`|\$\(|\$\[")
_HIDDEN_UNQUOTED = re.compile(r"[<>]\(")
_ESCAPED = re.compile(r"\\.", re.DOTALL)
#: Unquoted characters that make bash glob or brace-expand a word.
#: Glob and brace-expansion characters; ``{}`` is inert (bash leaves an empty pair as it is:
#: ``find -exec rm {} \;``, ``xargs -I{}``).
_PATTERN_CHARS = re.compile(r"(?<!\\)(?:\\\\)*(?:[*?\[]|\{(?!\}))")
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")
_DQ_ESCAPE = re.compile(r"\\([$`\"\\\n])")
#: ``${...}``: an optional ``#`` (length), the parameter, a literal subscript, then the operator.
_EXPANSION = re.compile(
    r"\$\{(?P<length>#?)(?P<name>[A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!0-])"
    r"(?P<subscript>\[[^\]]*\])?(?P<rest>.*)\}\Z",
    re.DOTALL,
)
#: ``${!name[@]}``, ``${!prefix*}``: lists of names, not indirection.
_NAME_LISTS = re.compile(r"\$\{![A-Za-z_][A-Za-z0-9_]*(?:\[[@*]\]|[@*])\}\Z")
_WORD_OPERATORS = (":-", ":=", ":?", ":+", "-", "=", "?", "+")
_PATTERN_OPERATORS = ("##", "#", "%%", "%", "//", "/#", "/%", "/", "^^", "^", ",,", ",")
#: Transformations of ``${x@X}``; ``P`` (prompt expansion) runs code and is not among them.
_SAFE_TRANSFORMS = frozenset("QEAaKkUuL")
_OFFSET = re.compile(r":\s*-?\s*[0-9]+\s*(?::\s*-?\s*[0-9]+\s*)?\Z")
#: Integer literals of arithmetic: ``12``, ``0x1f``, ``2#1010``.
_ARITH_NUMBER = re.compile(r"\b(?:0[xX][0-9A-Fa-f]+|[0-9]+#[0-9A-Za-z@_]+|[0-9]+)\b")
_ARITH_UNSAFE = re.compile(r"[A-Za-z_$`\[\]\\'\"{}@]")
LITERAL_INDEX = re.compile(r"\[\s*(?:[0-9]+|@|\*)\s*\]\Z")
#: ``[[ a -eq b ]]`` evaluates both sides as arithmetic.
_ARITH_TESTS = frozenset({"-eq", "-ne", "-lt", "-le", "-gt", "-ge"})
_INTEGER = re.compile(r"-?[0-9]+\Z")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@attrs.frozen(kw_only=True)
class Word:
    """One shell word: its source text, and its value after quote removal (None if dynamic)."""

    text: str
    value: str | None

    @property
    def shown(self) -> str:
        return self.value if self.value is not None else self.text


@attrs.frozen(kw_only=True)
class Command:
    """A simple command: its words (command name first) and the names it assigns.

    ``declaration`` marks ``export``/``declare``/``local``/``readonly``/``typeset``/``unset``,
    whose words are arguments rather than a program and whose ``assignments`` are the names
    written as ``NAME=value`` nodes.
    """

    words: tuple[Word, ...]
    assignments: tuple[str, ...] = ()
    text: str = ""
    declaration: bool = False


@attrs.frozen(kw_only=True)
class Redirect:
    """A redirection to or from a file; ``target`` None for a process substitution."""

    operator: str
    target: Word | None
    text: str
    fd: str | None = None


@attrs.frozen(kw_only=True)
class Assignment:
    """A name the script sets outside a command: ``NAME=value``, ``for NAME in``, ``${NAME:=x}``."""

    name: str
    text: str


@attrs.frozen(kw_only=True)
class Function:
    """A function definition (its body is walked like any other code)."""

    name: str
    text: str


@attrs.frozen(kw_only=True)
class Hidden:
    """A command substitution the parser did not see (a backtick in a here-doc body): its text is
    searched for denied commands; the Flag next to it keeps the call from being allowed."""

    script: str


@attrs.frozen(kw_only=True)
class Flag:
    """Something bash would evaluate that the analysis cannot prove harmless."""

    text: str
    reason: str


Item = Command | Redirect | Assignment | Function | Flag | Hidden


@attrs.frozen(kw_only=True)
class Script:
    """What a piece of shell text does, in source order; ``complete`` False on parse errors."""

    items: tuple[Item, ...]
    complete: bool


def expansion_problem(text: str) -> str | None:
    """Why ``${...}`` is not harmless (code in it runs), or None; also returns ``"assigns NAME"``."""
    if _NAME_LISTS.match(text):
        return None
    match = _EXPANSION.match(text)
    if match is None:
        return "indirect or unusual parameter expansion"
    subscript = match["subscript"]
    if subscript is not None and not LITERAL_INDEX.match(subscript):
        return "array subscript evaluated as arithmetic"
    rest = match["rest"]
    if not rest:
        return None
    if match["length"]:
        return "unusual parameter expansion"
    for operator in _WORD_OPERATORS:
        if rest.startswith(operator):
            if operator in ("=", ":="):
                return f"assigns {match['name']}"
            return None
    if rest.startswith(_PATTERN_OPERATORS):
        return None
    if rest.startswith("@"):
        return None if len(rest) == 2 and rest[1] in _SAFE_TRANSFORMS else "prompt or unknown transformation"
    if rest.startswith(":") and _OFFSET.match(rest):
        return None
    return "substring offset evaluated as arithmetic"


def hidden_scripts(text: str) -> list[str]:
    """The bodies of backtick and ``$(...)`` substitutions in ``text`` (best effort, for deny rules)."""
    scripts = [m[1].replace("\\`", "`") for m in re.finditer(r"`((?:\\.|[^`\\])*)`", text, re.DOTALL)]
    start = text.find("$(")
    while start >= 0:
        depth, i = 0, start + 1
        while i < len(text):
            if text[i] == "(":
                depth += 1
            elif text[i] == ")":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        scripts.append(text[start + 2 : i])
        start = text.find("$(", start + 2)
    return scripts


def arithmetic_safe(inner: str) -> bool:
    """True when an arithmetic expression holds only numbers and operators (no names to evaluate)."""
    return not _ARITH_UNSAFE.search(_ARITH_NUMBER.sub("0", inner))


class _Reader:
    """Reads words and commands out of a tree; every text comes from the original ``source``."""

    def __init__(self, source: bytes) -> None:
        self.source = source

    def text(self, node: tree_sitter.Node) -> str:
        return self.source[node.start_byte : node.end_byte].decode("utf-8", errors="replace")

    def word(self, node: tree_sitter.Node) -> Word:
        return Word(text=self.text(node), value=self.value(node))

    def value(self, node: tree_sitter.Node) -> str | None:
        kind = node.type
        if kind in _DYNAMIC:
            return None
        if kind in ("word", "number"):
            text = self.text(node)
            if _PATTERN_CHARS.search(text):
                return None
            return _ESCAPE.sub(r"\1", text.replace("\\\n", ""))
        if kind == "raw_string":
            return self.text(node)[1:-1]
        if kind == "variable_name":  # ``export X``, ``unset X``: a bare name
            return self.text(node)
        if kind in ("string", "translated_string"):
            parts = []
            for child in node.named_children:
                if child.type == "string":  # translated_string wraps a string
                    inner = self.value(child)
                    if inner is None:
                        return None
                    parts.append(inner)
                elif child.type == "string_content":
                    parts.append(_DQ_ESCAPE.sub(r"\1", self.text(child)).replace("\\\n", ""))
                else:
                    return None
            return "".join(parts)
        if kind == "concatenation":
            parts = []
            children = node.children
            skip = False
            for i, child in enumerate(children):
                if skip:
                    skip = False
                    continue
                # The parser splits an unquoted ``{}`` into two words; the pair is inert text.
                if (
                    child.type == "word"
                    and self.text(child) == "{"
                    and i + 1 < len(children)
                    and children[i + 1].type == "word"
                    and self.text(children[i + 1]) == "}"
                    and children[i + 1].start_byte == child.end_byte
                ):
                    parts.append("{}")
                    skip = True
                    continue
                inner = self.value(child)
                if inner is None:
                    return None
                parts.append(inner)
            return "".join(parts)
        return None

    def command(self, node: tree_sitter.Node) -> Command:
        words: list[Word] = []
        assignments: list[str] = []
        for child in node.named_children:
            kind = child.type
            if kind == "variable_assignment" and not words:
                assignments.append(self.assigned_name(child))
            elif kind == "command_name":
                inner = child.named_children
                words.append(self.word(inner[0]) if len(inner) == 1 else Word(text=self.text(child), value=None))
            elif kind in ("file_redirect", "heredoc_redirect", "herestring_redirect", "comment"):
                continue
            elif words:
                words.append(self.word(child))
        return Command(words=tuple(words), assignments=tuple(assignments), text=self.text(node))

    def assigned_name(self, node: tree_sitter.Node) -> str:
        name = node.child_by_field_name("name")
        if name is None:
            return self.text(node).partition("=")[0]
        if name.type == "subscript":  # a[1]=x assigns a
            inner = name.child_by_field_name("name")
            return self.text(inner) if inner is not None else self.text(name)
        return self.text(name)

    def declaration(self, node: tree_sitter.Node) -> Command:
        """``export A=1``, ``local x``, ``unset y``: the keyword, then every argument as a word."""
        keyword = self.text(node.children[0])
        words = [Word(text=keyword, value=keyword)]
        names = []
        for child in node.named_children:
            if child.type == "variable_assignment":
                names.append(self.assigned_name(child))
                words.append(Word(text=self.text(child), value=None))
            else:
                words.append(self.word(child))
        return Command(words=tuple(words), assignments=tuple(names), text=self.text(node), declaration=True)

    def redirect(self, node: tree_sitter.Node) -> Redirect | None:
        operator = ""
        fd = None
        for child in node.children:
            if child.type == "file_descriptor":
                fd = self.text(child)
            elif not child.is_named and not operator:
                operator = self.text(child)
            elif child.is_named and operator:
                target = None if child.type == "process_substitution" else self.word(child)
                return Redirect(operator=operator, target=target, text=self.text(node), fd=fd)
        return None

    def gaps(self, node: tree_sitter.Node) -> str:
        """The text of ``node`` outside its named children."""
        pieces = []
        at = node.start_byte
        for child in node.named_children:
            pieces.append(self.source[at : child.start_byte])
            at = child.end_byte
        pieces.append(self.source[at : node.end_byte])
        return b" ".join(pieces).decode("utf-8", errors="replace")


def _parser_input(text: str, source: bytes) -> bytes:
    """``source`` with every 4-byte UTF-8 character replaced by four dots.

    tree-sitter-bash 0.25 can crash the process (SIGSEGV) on a 4-byte UTF-8 character after a
    ``{`` (tree-sitter/tree-sitter-bash#337). Bash treats such characters as plain word
    characters, and so does the parser with dots in their place; byte offsets are unchanged, so
    every text is still read from the original source.
    """
    if text.isascii() or not _ASTRAL.search(text):
        return source
    return _ASTRAL.sub("....", text).encode("utf-8", errors="surrogatepass")


def _check(node: tree_sitter.Node, reader: _Reader) -> Item | None:
    """A Flag, Assignment or Hidden script for a node that evaluates text, else None."""
    kind = node.type
    if kind == "arithmetic_expansion":
        text = reader.text(node)
        inner = text[3:-2] if text.startswith("$((") else text[2:-1]
        return None if arithmetic_safe(inner) else Flag(text=text, reason="arithmetic on names")
    if kind == "command_substitution" and reader.text(node).startswith("`") and "\\" in reader.text(node):
        # Inside backticks bash removes the backslash before $, ` and \ and parses the result
        # again: `echo \`rm x\`` runs rm. The parser reads the escaped text, so the unescaped
        # body is searched as a script of its own.
        return Hidden(script=_BACKTICK_ESCAPE.sub(r"\1", reader.text(node)[1:-1]))
    if kind == "command_substitution" and reader.text(node).startswith("$(("):
        # bash reads $(( as arithmetic when it can (tree-sitter sometimes sees a subshell).
        return Flag(text=reader.text(node), reason="arithmetic or subshell substitution")
    if kind == "compound_statement" and node.child_count and node.children[0].type == "((":
        text = reader.text(node)
        return None if arithmetic_safe(text[2:-2]) else Flag(text=text, reason="arithmetic on names")
    if kind == "expansion":
        text = reader.text(node)
        problem = expansion_problem(text)
        if problem is None:
            return None
        if problem.startswith("assigns "):
            return Assignment(name=problem[8:], text=text)
        return Flag(text=text, reason=problem)
    if kind == "subscript":
        index = node.child_by_field_name("index")
        if index is None or not (index.type == "number" or reader.text(index) in ("@", "*")):
            return Flag(text=reader.text(node), reason="array subscript evaluated as arithmetic")
        return None
    if kind == "array":
        for child in node.named_children:
            text = reader.text(child)
            if text.startswith("[") and not re.match(r"\[\s*[0-9]+\s*\]\+?=", text):
                return Flag(text=text, reason="array key evaluated as arithmetic")
        return None
    if kind == "binary_expression":
        return _test_check(node, reader)
    if kind == "unary_expression":
        operator = node.child_by_field_name("operator")
        op_text = reader.text(operator) if operator is not None else reader.text(node.children[0])
        if op_text in ("-v", "-R"):
            operand = reader.text(node.named_children[-1]) if node.named_children else ""
            if not NAME.match(operand):
                return Flag(text=reader.text(node), reason="variable test on a computed name")
        return None
    if kind == "for_statement":
        variable = node.child_by_field_name("variable")
        if variable is not None:
            return Assignment(name=reader.text(variable), text=reader.text(node))
        return None
    return None


def _test_check(node: tree_sitter.Node, reader: _Reader) -> Item | None:
    test = node.parent
    while test is not None and test.type != "test_command":
        test = test.parent
    if test is None or not reader.text(test).startswith("[["):
        return None  # test / [ compare integers without evaluating them; (( )) is checked whole
    operator = node.child_by_field_name("operator")
    if operator is None or reader.text(operator) not in _ARITH_TESTS:
        return None
    left = node.child_by_field_name("left")
    right = node.child_by_field_name("right")
    for side in (left, right):
        if side is None or not _INTEGER.match(reader.text(side)):
            return Flag(text=reader.text(node), reason="[[ ]] arithmetic comparison of non-literals")
    return None


def _misplaced_continuations(joined: Joined, source: bytes, root: tree_sitter.Node) -> list[Item]:
    """A Flag for each backslash-newline kept in ``joined`` that the grammar does not place inside
    a single-quoted string, a comment or a quoted here-document body (where bash keeps it too)."""
    flags: list[Item] = []
    if joined.ambiguous_end:
        flags.append(
            Flag(
                text=joined.text[-30:],
                reason="backslash at the very end after a line continuation (bash keeps or drops it "
                "depending on the lines before it); remove the trailing backslash",
            )
        )
    ascii_only = joined.text.isascii()
    at, previous = 0, 0
    for offset in joined.kept:  # in increasing order: byte offsets are counted piece by piece
        at = offset if ascii_only else at + len(joined.text[previous:offset].encode("utf-8", "surrogatepass"))
        previous = offset
        node: tree_sitter.Node | None = root.descendant_for_byte_range(at, at + 1)
        while node is not None and node.type not in ("raw_string", "ansi_c_string", "comment", "heredoc_body"):
            node = node.parent
        if node is not None and node.type == "heredoc_body":
            start = next((c for c in node.parent.children if c.type == "heredoc_start"), None) if node.parent else None
            if start is None or not re.search(rb"['\"\\]", source[start.start_byte : start.end_byte]):
                node = None
        if node is None:
            flags.append(
                Flag(
                    text=joined.text[max(0, offset - 30) : offset + 30],
                    reason="line continuation whose quoting the analysis could not confirm",
                )
            )
    return flags


def parse(text: str) -> Script:
    """Every simple command, file redirection, assignment and flag in ``text``, in source order.

    Never raises: text tree-sitter cannot parse gives ``complete=False`` with whatever parts
    it recovered. Line continuations are removed first, the way bash removes them: every text
    in the result is the joined one (``r\\<newline>m x`` is the command ``rm x``).
    """
    joined = join(text)
    text = joined.text
    source = text.encode("utf-8", errors="surrogatepass")
    with _PARSER_LOCK:
        tree = _PARSER.parse(_parser_input(text, source))
    reader = _Reader(source)
    root = tree.root_node
    items: list[Item] = _misplaced_continuations(joined, source, root)
    # An explicit stack, not recursion: deeply nested input must not hit the recursion limit.
    stack = [root]
    while stack:
        node = stack.pop()
        kind = node.type
        children = node.children
        if node.is_named:
            if kind not in _KNOWN:
                items.append(Flag(text=reader.text(node), reason=f"construct not analysed ({kind})"))
            else:
                checked = _check(node, reader)
                if checked is not None:
                    items.append(checked)
            if kind in _GAP_CHECKED:
                gaps = _ESCAPED.sub("", reader.gaps(node))
                if _HIDDEN_CODE.search(gaps) or (kind == "word" and _HIDDEN_UNQUOTED.search(gaps)):
                    items.append(Flag(text=reader.text(node), reason="command substitution the parser did not see"))
                    items.extend(Hidden(script=script) for script in hidden_scripts(reader.gaps(node)))
        if kind == "command":
            command = reader.command(node)
            if command.words:
                items.append(command)
        elif kind in ("declaration_command", "unset_command"):
            items.append(reader.declaration(node))
        elif kind == "file_redirect":
            redirect = reader.redirect(node)
            if redirect is not None:
                items.append(redirect)
        elif kind == "function_definition":
            name = node.child_by_field_name("name")
            items.append(Function(name=reader.text(name) if name is not None else "", text=reader.text(node)))
        elif kind == "heredoc_redirect":
            start = next((c for c in children if c.type == "heredoc_start"), None)
            if start is None or re.search(r"['\"\\]", reader.text(start)):
                # A quoted delimiter: the body is data, never expanded.
                children = [c for c in children if c.type != "heredoc_body"]
        elif (
            kind == "variable_assignment"
            and node.parent is not None
            and node.parent.type not in ("command", "declaration_command")
        ):
            items.append(Assignment(name=reader.assigned_name(node), text=reader.text(node)))
        stack.extend(reversed(children))
    return Script(items=tuple(items), complete=not root.has_error)


def syntax_position(text: str) -> tuple[int, int, str] | None:
    """Where the parser first finds ``text`` broken: (line, column, the text there), 1-based, the
    column in characters; None when it parses. Used for the message of a syntax error, after
    bash itself (``bash -n``) confirmed one."""
    source = text.encode("utf-8", errors="surrogatepass")
    with _PARSER_LOCK:
        tree = _PARSER.parse(_parser_input(text, source))
    stack = [tree.root_node]
    broken = None
    while stack and broken is None:
        node = stack.pop()
        if node.type == "ERROR" or node.is_missing:
            broken = node
        else:
            stack.extend(reversed(node.children))
    if broken is None:
        return None
    # Inside the broken region, skip the complete commands it swallowed (``ls`` before ``for``).
    spot = next(
        (
            child
            for child in broken.children
            if child.type == "ERROR"
            or not child.is_named
            or child.has_error
            or child.type in ("word", "string", "raw_string")
        ),
        broken,
    )
    row, column = spot.start_point
    line = source.split(b"\n")[row] if row < source.count(b"\n") + 1 else b""
    shown = line[column:].decode("utf-8", errors="replace").split("\n")[0][:30]
    return row + 1, len(line[:column].decode("utf-8", errors="replace")) + 1, shown
