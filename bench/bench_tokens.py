"""Tokens per tool result: what a model reads from entropic-mcp's results against ripgrep's output
format and the reference MCP filesystem server (``@modelcontextprotocol/server-filesystem``).

Run: ``python bench/bench_tokens.py`` from the development venv. Tokens are o200k (GPT-4o's
encoding) counted with ``bpe-openai`` (the tiktoken-compatible Rust tokenizer that ships its
vocabularies; tiktoken itself downloads the vocabulary on first use, which fails offline); without
it the bench counts UTF-8 bytes and says so. Not a timed benchmark: each figure is a count, the same
on every run for the same content (``interleaved`` rounds would add nothing).

What is counted is the text a model reads: the result's text content (entropic-mcp's envelope
text; the reference server's text block). Bytes on the wire, envelope included, are
bench_mcp_bytes.py's subject. The cases:

- read: a 2,000-line Python source file, whole. Ours: ``filesystem.read_file`` pages (the file's
  lines, unnumbered by default, at the defaults: the 64 KiB read budget), all pages summed, and
  the same with ``line_numbers: true``. Peers: the reference server's ``read_text_file`` (no line
  numbers, the whole file in one unpaged result), ``cat -n``, and for the numbered form the
  reference's text with a bare ``N<TAB>`` before each line. The paged read is held to the
  reference's tokens plus its pages' ``[lines …]`` notes (the range and the offset to continue
  from, which an unpaged answer does not carry); the row says how many tokens they are.
- grep: 20 matching lines in 8 files. Ours: ``filesystem.grep`` (content) in the text form and
  with ``format: "json"``. Peer: ripgrep's ``path:line:text`` format (``rg -n`` when installed,
  else GNU ``grep -rn``, which prints the same format). The reference server has no content
  search.
- files_with_matches: the same search, paths only. Peer: ``rg -l`` / ``grep -rl``.
- bash: a pytest run with one failing test. Ours: ``bash.execute`` in the text form and with
  ``format: "json"``. Peer: the command's own output (what a terminal shows), held to it plus the
  result's footer (``[exit 1, 812 ms]``: the exit status a terminal shows in its prompt). The
  reference servers have no shell tool.
- list_directory: a directory of 40 entries. Ours: text and JSON. Peer: the reference server's
  ``list_directory`` (``[FILE] name`` / ``[DIR] name``), and ``ls -p``.

Target (issue 24): ours <= 1.0x the peer for the same content; a row with an allowance (the page
notes, the footer) is met when ours without it is <= 1.0x, and shows the allowance's tokens.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import record, source_file

PROJECT = Path(os.environ.get("ENTROPIC_MCP_BENCH_TOKENS_DIR", "/tmp/entropic-bench-tokens"))
WORDS = ("alpha", "beta", "gamma", "delta", "value", "result", "config", "item", "index", "buffer", "token", "node")
GREP_PATTERN = r"def handle_\w+"

FAILING_TEST = """\
import pytest


def parse(text):
    return [int(part) for part in text.split(",")]


def test_parse_numbers():
    assert parse("1,2,3") == [1, 2, 3]


def test_parse_spaces():
    assert parse("1, 2, 3") == [1, 2, 4]


@pytest.mark.parametrize("text", ["4", "5,6"])
def test_parse_more(text):
    assert parse(text)
"""


def counter() -> tuple[str, Callable[[str], int]]:
    """(unit, count) — o200k tokens when a tokenizer is available, else UTF-8 bytes."""
    try:
        import bpe_openai

        encoding = bpe_openai.get_encoding("o200k_base")
        return "o200k tokens", lambda text: len(encoding.encode(text))
    except Exception:  # not installed, or no vocabulary: bytes, said in every row
        try:
            import tiktoken

            tik = tiktoken.get_encoding("o200k_base")
            return "o200k tokens", lambda text: len(tik.encode(text))
        except Exception:
            return "bytes (no o200k tokenizer installed)", lambda text: len(text.encode())


def make_project(root: Path) -> None:
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    rng = random.Random(24)
    (root / "big.py").write_text(source_file(rng, 2000, WORDS), encoding="utf-8")
    tree = root / "tree"
    matches = 0
    for n in range(8):
        sub = tree / f"pkg{n % 3}"
        sub.mkdir(parents=True, exist_ok=True)
        body = source_file(rng, 60, WORDS)
        handlers = "".join(
            f"\n\ndef handle_{WORDS[(n + k) % len(WORDS)]}_{k}(request, config=None):\n    return request\n"
            for k in range(3 if n < 4 else 2)
        )
        matches += 3 if n < 4 else 2
        (sub / f"module_{n}.py").write_text(body + handlers, encoding="utf-8")
    assert matches == 20
    (root / "test_parse.py").write_text(FAILING_TEST, encoding="utf-8")
    listing = root / "listing"
    listing.mkdir()
    for n in range(30):
        (listing / f"{WORDS[n % len(WORDS)]}_{n}.py").write_text("x = 1\n" * (n + 1), encoding="utf-8")
    for n in range(10):
        (listing / f"dir_{WORDS[n]}").mkdir()
    (root / "entropic-mcp.toml").write_text(
        '[entropic_mcp]\nplugins = ["filesystem", "bash"]\n[storage]\nbackend = "none"\n'
        '[permissions]\ndefault = "allow"\n',
        encoding="utf-8",
    )


def ours(root: Path) -> dict[str, str]:
    """Each case's text as entropic-mcp's tools answer it, through the real pipeline (defaults)."""
    from entropic_mcp import CallContext, ServerManager, load_config

    manager = ServerManager.from_config(load_config(root / "entropic-mcp.toml", cwd=root))
    out: dict[str, str] = {}

    def call(name: str, args: dict[str, object]) -> str:
        outcome = manager.call_sync(name, args, CallContext(conversation_id="bench"))
        assert not outcome.response.is_error, outcome.response.result[:300]
        return outcome.response.result

    def read_pages(extra: dict[str, object]) -> tuple[list[str], list[str]]:
        """Every page of big.py, and each page's closing [lines …] note."""
        pages, notes, offset = [], [], 1
        while offset:
            page = call("filesystem.read_file", {"path": "big.py", "offset": offset, **extra})
            pages.append(page)
            last = page.rsplit("\n", 1)[-1]
            if last.startswith(("[lines ", "[end of file")):
                notes.append(last)
            offset = int(last.rsplit("offset=", 1)[1].rstrip("]")) if "more follow" in last else 0
        return pages, notes

    try:
        for key, extra in (("read", {}), ("read numbered", {"line_numbers": True})):
            pages, notes = read_pages(extra)
            out[key] = "".join(pages)
            # The pages' lines alone: each page less its closing note (and the newline before it).
            out[f"{key} lines"] = "".join(
                page[: len(page) - len(note) - 1] for page, note in zip(pages, notes, strict=True)
            )
        out["read pages"] = str(len(pages))
        grep = {"pattern": GREP_PATTERN, "path": "tree"}
        out["grep"] = call("filesystem.grep", grep)
        out["grep json"] = call("filesystem.grep", {**grep, "format": "json"})
        names = {**grep, "output_mode": "files_with_matches"}
        out["files"] = call("filesystem.grep", names)
        out["files json"] = call("filesystem.grep", {**names, "format": "json"})
        pytest_command = f"{sys.executable} -m pytest -q -p no:cacheprovider test_parse.py"
        out["bash"] = call("bash.execute", {"command": pytest_command})
        out["bash json"] = call("bash.execute", {"command": pytest_command, "format": "json"})
        out["list"] = call("filesystem.list_directory", {"path": "listing"})
        out["list json"] = call("filesystem.list_directory", {"path": "listing", "format": "json"})
    finally:
        manager.close()
    return out


def floors(root: Path) -> dict[str, str]:
    """The same content as command-line tools print it."""
    rg = shutil.which("rg")
    out = {"grep tool": "rg -n" if rg else "GNU grep -rn (ripgrep's path:line:text format; rg not installed)"}

    def run(argv: list[str], cwd: Path = root) -> str:
        return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False).stdout

    if rg:
        out["grep"] = run([rg, "-n", "--no-heading", "--sort", "path", GREP_PATTERN, "tree"])
        out["files"] = run([rg, "-l", "--sort", "path", GREP_PATTERN, "tree"])
    else:
        out["grep"] = run(["grep", "-rnE", r"def handle_[[:alnum:]_]+", "tree"])
        out["files"] = run(["grep", "-rlE", r"def handle_[[:alnum:]_]+", "tree"])
    out["read"] = run(["cat", "-n", "big.py"])
    pytest_command = f"{sys.executable} -m pytest -q -p no:cacheprovider test_parse.py"
    out["bash"] = subprocess.run(
        ["bash", "-c", pytest_command + " 2>&1"], cwd=root, capture_output=True, text=True, check=False
    ).stdout
    out["list"] = run(["ls", "-p", "listing"])
    return out


def reference(root: Path) -> dict[str, str] | str:
    """The reference server's text for read and list_directory, or why it could not run."""
    try:
        from bench_mcp_bytes import RawStdioClient, clean_env, reference_server

        entry = reference_server()
    except Exception as exc:  # no node/npm, or the registry is unreachable
        return f"reference server not installable ({type(exc).__name__}: {exc})"
    client = RawStdioClient(["node", str(entry), str(root)], root, clean_env())
    try:
        client.start()

        def text(name: str, args: dict[str, object]) -> str:
            result, _ = client.call(name, args)
            return "".join(block.get("text", "") for block in result.get("content", []))

        return {
            "read": text("read_text_file", {"path": str(root / "big.py")}),
            "list": text("list_directory", {"path": str(root / "listing")}),
        }
    finally:
        client.close()


def main() -> None:
    unit, count = counter()
    make_project(PROJECT)
    mine = ours(PROJECT)
    floor = floors(PROJECT)
    ref = reference(PROJECT)
    assert mine["grep"].count("\n") + 1 == 20, mine["grep"]
    assert "1 failed" in mine["bash"] and "1 failed" in floor["bash"]
    rows: list[dict[str, object]] = []

    def row(
        what: str,
        peer_name: str,
        peer_text: str | None,
        our_text: str,
        notes: str = "",
        allowance: tuple[str, str] | None = None,
    ) -> None:
        """``allowance``: (what it is, our text without it): met when that text is <= the peer's."""
        ours_n = count(our_text)
        if peer_text is None:
            rows.append({"id": "—", "what": what, "peer": peer_name, "ours": f"{ours_n:,} {unit}", "notes": notes})
            return
        peer_n = count(peer_text)
        ratio = ours_n / peer_n
        target, met = "≤ 1.0×", "yes" if ratio <= 1.0 else "**no**"
        if allowance is not None:
            label, without = allowance
            bare = count(without)
            target = f"≤ 1.0× + {label}"
            met = (
                f"{'yes' if bare <= peer_n else '**no**'}: {bare:,} without the {label} "
                f"({bare / peer_n:.4f}×), which are {ours_n - bare:,} tokens"
            )
        rows.append(
            {
                "id": "—",
                "what": what,
                "peer": f"{peer_name} {peer_n:,}",
                "ours": f"{ours_n:,} {unit}",
                "ratio": f"{ratio:.2f}×",
                "target": target,
                "met": met,
                "notes": notes,
            }
        )
        print(f"{what:60} {peer_name:45} {peer_n:>7,} ours {ours_n:>7,} {ratio:5.2f}x", flush=True)

    pages = mine["read pages"]
    if isinstance(ref, dict):
        row(
            f"tokens: `read_file` of a 2,000-line source file, whole ({pages} pages at the defaults, unnumbered)",
            "reference `read_text_file` (no line numbers, one unpaged result)",
            ref["read"],
            mine["read"],
            "each page ends with [lines A-B of 2000; …offset=K]; the reference has no pages to note",
            allowance=("page notes", mine["read lines"]),
        )
    row("tokens: same", "`cat -n`", floor["read"], mine["read"])
    if isinstance(ref, dict):
        # The cheapest numbered form: a number on every line costs 1 token below 1,000 and 2 from
        # there (o200k splits digits by three), which the unnumbered reference does not pay.
        bare = "".join(f"{n}\t{line}\n" for n, line in enumerate(ref["read"].splitlines(), 1))
        row(
            "tokens: same, `line_numbers: true` (the default before this measure)",
            "the reference's text numbered `N<TAB>line`",
            bare,
            mine["read numbered"],
            "the numbers cost what the reference's text numbered costs",
            allowance=("page notes", mine["read numbered lines"]),
        )
        row("tokens: same, `line_numbers: true`", "reference `read_text_file`", ref["read"], mine["read numbered"])
    row("tokens: `grep`, 20 matching lines in 8 files, text form", floor["grep tool"], floor["grep"], mine["grep"])
    row(
        'tokens: same, `format: "json"` (the form before issue 24)',
        floor["grep tool"],
        floor["grep"],
        mine["grep json"],
    )
    files_tool = "rg -l" if shutil.which("rg") else "GNU grep -rl"
    row("tokens: `grep` `files_with_matches`, text form", files_tool, floor["files"], mine["files"])
    row('tokens: same, `format: "json"`', files_tool, floor["files"], mine["files json"])
    output, footer = mine["bash"].rsplit("\n", 1)
    assert footer.startswith("[exit "), footer
    row(
        "tokens: `bash.execute` of a failing pytest run, text form",
        "the output alone",
        floor["bash"],
        mine["bash"],
        f"the footer: `{footer}`",
        allowance=("footer", output + "\n"),
    )
    row(
        'tokens: same, `format: "json"` (the form before issue 24)',
        "the output alone",
        floor["bash"],
        mine["bash json"],
    )
    if isinstance(ref, dict):
        row(
            "tokens: `list_directory` of 40 entries, text form", "reference `list_directory`", ref["list"], mine["list"]
        )
        row(
            'tokens: same, `format: "json"` (the form before issue 24)',
            "reference `list_directory`",
            ref["list"],
            mine["list json"],
        )
    else:
        rows.append({"id": "—", "what": "reference server rows", "notes": ref})
    row(
        "tokens: `list_directory`, text form",
        "`ls -p`",
        floor["list"],
        mine["list"],
        "names only on both sides; sizes are in the JSON form",
    )
    path = record("tokens", rows, table="tokens", script="bench/bench_tokens.py")
    print(f"unit: {unit}; wrote {path}")


if __name__ == "__main__":
    main()
