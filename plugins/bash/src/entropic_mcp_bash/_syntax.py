"""Syntax errors: bash is the judge, the parser gives the position.

Text the analysis cannot parse is either broken shell (an unterminated quote, an ``if`` without
``fi``) or shell the parser does not know. ``bash -n`` (read, run nothing) tells the two apart:
broken text is answered as a syntax error naming the line and column, and is never run (bash
runs a ``-c`` script line by line, so the lines before the error would run otherwise); text bash
reads stays "not fully analysed" and asks.
"""

from __future__ import annotations

import os
import threading

#: Commands checked, kept (bounded): the permission check and the run ask about the same text.
_MAX_KEPT = 512


class SyntaxCheck:
    """``bash -n`` verdicts per command text, shared by the permission check and the tool."""

    def __init__(self) -> None:
        self._kept: dict[tuple[str, str], str | None] = {}
        self._lock = threading.Lock()

    def error(self, command: str, shell: str) -> str | None:
        """The model-readable syntax error of ``command``, or None when ``shell`` reads it."""
        key = (shell, command)
        with self._lock:
            if key in self._kept:
                return self._kept[key]
        message = _check(command, shell) if os.path.basename(shell) == "bash" else None
        with self._lock:
            while len(self._kept) >= _MAX_KEPT:  # the oldest go first: a verdict just given stays
                del self._kept[next(iter(self._kept))]
            self._kept[key] = message
        return message

    def known(self, command: str, shell: str) -> str | None:
        """The syntax error found for ``command`` by an earlier ``error`` (no process started)."""
        with self._lock:
            return self._kept.get((shell, command))


def _check(command: str, shell: str) -> str | None:
    import subprocess

    from ._parse import syntax_position

    try:
        # -n reads without running anything; no start-up files, an empty environment (no BASH_ENV).
        done = subprocess.run(
            [shell, "--norc", "--noprofile", "-n", "-c", command],
            env={},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=5,
            check=False,
        )
    except (OSError, ValueError, subprocess.SubprocessError):  # ValueError: a NUL byte
        return None  # no verdict: the analysis's own "not fully analysed" stands
    if done.returncode == 0:
        return None
    said = " ".join(done.stderr.decode("utf-8", "replace").split())
    said = said.replace(f"{shell}: -c: ", "").replace("bash: -c: ", "")
    where = syntax_position(command)
    at = f"at line {where[0]}, column {where[1]} (near {where[2]!r})" if where is not None else "in the command"
    return (
        f"syntax error {at}; bash says: {said[:300]}. The command was not run: close the quote, bracket "
        "or block (fi, done, esac, }) and call again."
    )
