"""Line continuations: ``\\<newline>`` removed exactly where bash removes it, before any parsing.

bash deletes a backslash-newline pair while it reads its input, before words are split: ``r\\
m x`` runs ``rm``, ``echo "$\\
(id)"`` runs ``id``, ``> sec\\
rets/key`` writes ``secrets/key``. It keeps the pair only inside single quotes, ``$'...'``,
comments (the newline ends the comment) and the bodies of here-documents with a quoted
delimiter. Inside backticks it removes every pair (its first reading of a backquoted text knows
no quotes or comments).

``join`` returns the text bash's parser reads and where it kept pairs; the parser checks that
tree-sitter places each kept pair inside a single-quoted string, a comment or a quoted
here-document body too. Where this reader and the grammar disagree the call is not understood,
so a mistake here can only cost a question. Every ambiguity is resolved towards staying in
code: code keeps pairs only where the grammar can confirm it.
"""

from __future__ import annotations

import attrs

_PAIR = "\\\n"
#: Characters after which an unquoted ``#`` starts a comment.
_WORD_BREAK = frozenset(" \t\n;&|()<>")
#: Characters that end a here-document delimiter word.
_META = frozenset(" \t\n;&|()<>")


@attrs.frozen(kw_only=True)
class Joined:
    """The text with continuations removed, and the offsets (in it) of the pairs bash keeps."""

    text: str
    kept: tuple[int, ...]
    #: The original text had pairs removed and ends with a lone backslash: bash 5.2 keeps that
    #: backslash after one or three continuations and drops it after two, so the joined text
    #: cannot say which word bash reads.
    ambiguous_end: bool = False


@attrs.define
class _Frame:
    kind: str  # code | arith | dq | brace | brace_dq | backtick
    depth: int = 0  # open parentheses inside a code or arithmetic frame
    cases: int = 0  # open ``case`` statements (their patterns end with an unmatched ``)``)


@attrs.define
class _Heredoc:
    delimiter: str
    quoted: bool
    strip_tabs: bool


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0
        self.out: list[str] = []
        self.kept: list[int] = []
        self.frames = [_Frame("code")]
        self.pending: list[_Heredoc] = []
        self.length = 0  # characters emitted so far

    # -- low level -----------------------------------------------------------------------------

    def emit(self, chars: str) -> None:
        if chars:
            self.out.append(chars)
            self.length += len(chars)

    def last(self) -> str:
        return self.out[-1][-1] if self.out else "\n"

    def skip_pairs(self) -> None:
        while self.text.startswith(_PAIR, self.i):
            self.i += 2

    def peek(self, ahead: int = 1) -> str:
        """The character ``ahead`` real characters on (continuations skipped), or ''."""
        j = self.i
        for _ in range(ahead):
            j += 1
            while self.text.startswith(_PAIR, j):
                j += 2
        return self.text[j] if j < len(self.text) else ""

    def advance(self, count: int = 1) -> str:
        """Consume ``count`` real characters (continuations between them dropped)."""
        taken = []
        for n in range(count):
            if n:
                self.skip_pairs()
            taken.append(self.text[self.i])
            self.i += 1
        return "".join(taken)

    def keep_pair(self) -> None:
        self.kept.append(self.length)
        self.emit(_PAIR)
        self.i += 2

    # -- the walk ------------------------------------------------------------------------------

    def run(self) -> Joined:
        text = self.text
        while True:
            self.skip_pairs()
            if self.i >= len(text):
                break
            frame = self.frames[-1]
            if frame.kind in ("code", "arith"):
                self.code(frame)
            elif frame.kind == "backtick":
                self.backtick()
            else:
                self.quoted(frame)
        return Joined(text="".join(self.out), kept=tuple(self.kept))

    def code(self, frame: _Frame) -> None:
        c = self.text[self.i]
        if c == "\\":
            self.emit(self.text[self.i : self.i + 2])
            self.i += 2
        elif c == "'":
            self.single_quoted(0)
        elif c == '"':
            self.emit(self.advance())
            self.frames.append(_Frame("dq"))
        elif c == "`":
            self.emit(self.advance())
            self.frames.append(_Frame("backtick"))
        elif c == "$":
            self.dollar()
        elif c == "#" and self.last() in _WORD_BREAK:
            self.comment()
        elif c == "(":
            if frame.kind == "code" and self.peek() == "(" and self.last() in _WORD_BREAK:
                self.emit(self.advance(2))
                self.frames.append(_Frame("arith"))
            else:
                self.emit(self.advance())
                frame.depth += 1
        elif c == ")":
            self.close_paren(frame)
        elif c == "<" and frame.kind == "code" and self.peek() == "<":
            if self.peek(2) == "<":
                self.emit(self.advance(3))  # a here-string
            else:
                self.heredoc_operator()
        elif c == "\n":
            self.emit(self.advance())
            if frame.kind == "code" and self.pending:
                self.heredoc_bodies()
        elif frame.kind == "code" and self.last() in _WORD_BREAK and self.word_is("case"):
            frame.cases += 1
            self.emit(self.advance(4))
        elif frame.kind == "code" and self.last() in _WORD_BREAK and self.word_is("esac"):
            frame.cases = max(0, frame.cases - 1)
            self.emit(self.advance(4))
        else:
            self.emit(self.advance())

    def word_is(self, word: str) -> bool:
        for n, letter in enumerate(word):
            if (self.text[self.i] if n == 0 else self.peek(n)) != letter:
                return False
        following = self.peek(len(word))
        return following == "" or following in _WORD_BREAK

    def close_paren(self, frame: _Frame) -> None:
        if frame.kind == "arith":
            if frame.depth == 0 and self.peek() == ")":
                self.emit(self.advance(2))
                self.frames.pop()
                return
            frame.depth = max(0, frame.depth - 1)
            self.emit(self.advance())
            return
        self.emit(self.advance())
        if frame.depth > 0:
            frame.depth -= 1
        elif frame.cases == 0 and len(self.frames) > 1:
            self.frames.pop()  # the end of a ``$(...)``
        # else: a case pattern's ``)``, or an unmatched one at the top level

    def dollar(self) -> None:
        following = self.peek()
        if following == "(":
            if self.peek(2) == "(":
                self.emit(self.advance(3))
                self.frames.append(_Frame("arith"))
            else:
                self.emit(self.advance(2))
                self.frames.append(_Frame("code"))
        elif following == "{":
            inside_dq = self.frames[-1].kind in ("dq", "brace_dq")
            self.emit(self.advance(2))
            self.frames.append(_Frame("brace_dq" if inside_dq else "brace"))
        elif following == "'" and self.frames[-1].kind in ("code", "arith", "brace"):
            self.emit(self.advance())  # the $, then $'...' reads like '...' with escapes
            self.skip_pairs()
            self.single_quoted(escapes=1)
        else:
            self.emit(self.advance())

    def single_quoted(self, escapes: int) -> None:
        """``'...'`` (or ``$'...'`` with ``escapes``): every pair inside is kept."""
        text = self.text
        self.emit(text[self.i])
        self.i += 1
        while self.i < len(text):
            c = text[self.i]
            if c == "'":
                self.emit(c)
                self.i += 1
                return
            if escapes and c == "\\" and self.i + 1 < len(text):
                if text[self.i + 1] == "\n":
                    self.keep_pair()
                else:
                    self.emit(text[self.i : self.i + 2])
                    self.i += 2
                continue
            if c == "\\" and text.startswith(_PAIR, self.i):
                self.keep_pair()
                continue
            self.emit(c)
            self.i += 1

    def comment(self) -> None:
        text = self.text
        end = text.find("\n", self.i)
        end = len(text) if end < 0 else end
        body = text[self.i : end]
        if body.endswith("\\") and end < len(text):
            self.kept.append(self.length + len(body) - 1)
        self.emit(body)
        self.i = end

    def quoted(self, frame: _Frame) -> None:
        """Inside ``"..."`` or ``${...}``: pairs are removed (already, by ``run``)."""
        c = self.text[self.i]
        if c == "\\":
            self.emit(self.text[self.i : self.i + 2])
            self.i += 2
        elif c == "$":
            self.dollar()
        elif c == "`":
            self.emit(self.advance())
            self.frames.append(_Frame("backtick"))
        elif c == '"' and frame.kind == "dq":
            self.emit(self.advance())
            self.frames.pop()
        elif c == '"':  # a string inside ${...}
            self.emit(self.advance())
            self.frames.append(_Frame("dq"))
        elif c == "'" and frame.kind == "brace":
            self.single_quoted(0)
        elif c == "}" and frame.kind in ("brace", "brace_dq"):
            self.emit(self.advance())
            self.frames.pop()
        else:
            self.emit(self.advance())

    def backtick(self) -> None:
        c = self.text[self.i]
        if c == "\\":
            self.emit(self.text[self.i : self.i + 2])
            self.i += 2
        elif c == "`":
            self.emit(self.advance())
            self.frames.pop()
        else:
            self.emit(self.advance())

    # -- here-documents ------------------------------------------------------------------------

    def heredoc_operator(self) -> None:
        self.emit(self.advance(2))
        strip_tabs = False
        self.skip_pairs()
        if self.i < len(self.text) and self.text[self.i] == "-":
            strip_tabs = True
            self.emit(self.advance())
        while True:
            self.skip_pairs()
            if self.i < len(self.text) and self.text[self.i] in " \t":
                self.emit(self.advance())
                continue
            break
        word: list[str] = []
        quote = ""
        while True:
            self.skip_pairs()
            if self.i >= len(self.text):
                break
            c = self.text[self.i]
            if not quote and c in _META:
                break
            if quote and c == quote:
                quote = ""
            elif not quote and c in "'\"":
                quote = c
            elif c == "\\" and quote != "'" and self.i + 1 < len(self.text):
                word.append(self.text[self.i : self.i + 2])
                self.emit(self.text[self.i : self.i + 2])
                self.i += 2
                continue
            word.append(c)
            self.emit(c)
            self.i += 1
        raw = "".join(word)
        quoted = any(q in raw for q in "'\"\\")
        delimiter = raw.replace("'", "").replace('"', "")
        delimiter = "".join(ch for n, ch in enumerate(delimiter) if ch != "\\" or (n and delimiter[n - 1] == "\\"))
        self.pending.append(_Heredoc(delimiter=delimiter, quoted=quoted, strip_tabs=strip_tabs))

    def heredoc_bodies(self) -> None:
        pending, self.pending = self.pending, []
        for heredoc in pending:
            self.heredoc_body(heredoc)

    def heredoc_body(self, heredoc: _Heredoc) -> None:
        """Lines up to the delimiter: joined first when the delimiter is unquoted (as bash does)."""
        text = self.text
        while self.i < len(text):
            if heredoc.quoted:
                end = text.find("\n", self.i)
                end = len(text) if end < 0 else end
                line = text[self.i : end]
                if line.endswith("\\") and end < len(text):
                    self.kept.append(self.length + len(line) - 1)
            else:
                pieces = []
                end = self.i
                while end < len(text) and text[end] != "\n":
                    if text[end] == "\\" and end + 1 < len(text):
                        if text[end + 1] != "\n":
                            pieces.append(text[end : end + 2])
                        end += 2
                        continue
                    pieces.append(text[end])
                    end += 1
                line = "".join(pieces)
            self.i = min(end + 1, len(text))
            self.emit(line + "\n" if end < len(text) else line)
            if (line.lstrip("\t") if heredoc.strip_tabs else line) == heredoc.delimiter:
                return


def join(text: str) -> Joined:
    """``text`` as bash reads it: continuation pairs removed where bash removes them."""
    if _PAIR not in text:
        return Joined(text=text, kept=())
    joined = _Reader(text).run()
    trailing = len(text) - len(text.rstrip("\\"))
    if trailing % 2 and joined.text != text:
        return attrs.evolve(joined, ambiguous_end=True)
    return joined
