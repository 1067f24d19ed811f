"""Shell text → the simple commands and redirections in it, with tree-sitter-bash.

This module imports tree-sitter at import time; the rest of the plugin imports it lazily, on
the first permission check, so loading the plugin stays cheap.
"""

from __future__ import annotations

import re
import threading

import attrs
import tree_sitter
import tree_sitter_bash

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
#: Unquoted characters that make bash glob or brace-expand a word.
_PATTERN_CHARS = re.compile(r"(?<!\\)(?:\\\\)*[*?\[{]")
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")
_DQ_ESCAPE = re.compile(r"\\([$`\"\\\n])")


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
    """A simple command: its words (command name first) and its leading assignments."""

    words: tuple[Word, ...]
    assignments: tuple[str, ...] = ()
    text: str = ""


@attrs.frozen(kw_only=True)
class Redirect:
    """A redirection to or from a file; ``target`` None for a process substitution."""

    operator: str
    target: Word | None
    text: str


@attrs.frozen(kw_only=True)
class Assignment:
    """A standalone ``NAME=value`` (it changes the environment of the commands after it)."""

    name: str
    text: str


Item = Command | Redirect | Assignment


@attrs.frozen(kw_only=True)
class Script:
    """What a piece of shell text does, in source order; ``complete`` False on parse errors."""

    items: tuple[Item, ...]
    complete: bool


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
            for child in node.children:
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
                name = child.child_by_field_name("name")
                assignments.append(self.text(name) if name is not None else self.text(child))
            elif kind == "command_name":
                inner = child.named_children
                words.append(self.word(inner[0]) if len(inner) == 1 else Word(text=self.text(child), value=None))
            elif kind in ("file_redirect", "heredoc_redirect", "herestring_redirect", "comment"):
                continue
            elif words:
                words.append(self.word(child))
        return Command(words=tuple(words), assignments=tuple(assignments), text=self.text(node))

    def declaration(self, node: tree_sitter.Node) -> Command:
        """``export A=1``, ``local x``, ``unset y``: a command whose assignments are kept as names."""
        keyword = self.text(node.children[0])
        words = [Word(text=keyword, value=keyword)]
        words.extend(self.word(child) for child in node.named_children)
        names = []
        for child in node.named_children:
            name = child.child_by_field_name("name") if child.type == "variable_assignment" else None
            if name is not None:
                names.append(self.text(name))
        return Command(words=tuple(words), assignments=tuple(names), text=self.text(node))

    def redirect(self, node: tree_sitter.Node) -> Redirect | None:
        operator = ""
        for child in node.children:
            if not child.is_named and not operator:
                operator = self.text(child)
            elif child.is_named and child.type != "file_descriptor" and operator:
                target = None if child.type == "process_substitution" else self.word(child)
                return Redirect(operator=operator, target=target, text=self.text(node))
        return None


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


def parse(text: str) -> Script:
    """Every simple command, file redirection and standalone assignment in ``text``.

    Never raises: text tree-sitter cannot parse gives ``complete=False`` with whatever parts
    it recovered.
    """
    source = text.encode("utf-8", errors="surrogatepass")
    with _PARSER_LOCK:
        tree = _PARSER.parse(_parser_input(text, source))
    reader = _Reader(source)
    root = tree.root_node
    items: list[Item] = []
    # An explicit stack, not recursion: deeply nested input must not hit the recursion limit.
    stack = [root]
    while stack:
        node = stack.pop()
        kind = node.type
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
        elif (
            kind == "variable_assignment"
            and node.parent is not None
            and node.parent.type not in ("command", "declaration_command")
        ):
            name = node.child_by_field_name("name")
            items.append(Assignment(name=reader.text(name) if name is not None else "", text=reader.text(node)))
        stack.extend(reversed(node.children))
    return Script(items=tuple(items), complete=not root.has_error)
