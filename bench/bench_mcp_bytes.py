"""Bytes on the wire per tool result over MCP stdio: entropic-mcp's filesystem server against the
reference MCP filesystem server (``@modelcontextprotocol/server-filesystem``), for the same content.

Run: ``python bench/bench_mcp_bytes.py`` from the development venv (needs node and npm; the
reference server is installed once with npm under ``bench/.peers/``, which ignores itself).

Both servers are driven by the same raw JSON-RPC client over their real stdio (protocol
2025-11-25, the handshake era hosts speak): every byte each server writes between a
``tools/call`` request and its response is counted — the response line with its newline, and any
notification sent meanwhile (none, in practice). No SDK model is re-serialised: what is counted
is what a host reads.

The cases (the same file, tree and edit for both servers):

- read: a 200-line source file, whole. entropic-mcp ``filesystem.read_file`` (numbered lines, as
  on main when run); reference ``read_text_file``.
- grep: a pattern over a small tree (12 files in 3 directories, 12 matching lines in 6 of them). entropic-mcp ``filesystem.grep``
  (content mode). The reference server has no content search: its figure is its own response
  carrying GNU ``grep -rn``'s output for the same matches (it reads a file holding that output),
  i.e. its envelope around the same content.
- edit: one replacement in a fresh copy of the 200-line file. entropic-mcp
  ``filesystem.edit_file``; reference ``edit_file`` (one ``oldText``/``newText`` edit).

Each row also shows entropic-mcp under ``[serve] structured_content = "json"`` (every JSON object
result sent a second time as ``structuredContent``, serve's old default) for comparison.
Target (issue 17): entropic-mcp <= 1.0x the reference for the same content.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from _common import report, source_file

HERE = Path(__file__).parent
PEERS = Path(os.environ.get("ENTROPIC_MCP_BENCH_PEERS", HERE / ".peers"))
REFERENCE_PACKAGE = "@modelcontextprotocol/server-filesystem"
#: Pinned so figures from different runs compare; override to measure another release.
REFERENCE_VERSION = os.environ.get("ENTROPIC_MCP_BENCH_REFERENCE_FS_VERSION", "2026.8.31")
PROTOCOL = "2025-11-25"
PROJECT = Path(os.environ.get("ENTROPIC_MCP_BENCH_BYTES_DIR", "/tmp/entropic-bench-mcp-bytes"))
GREP_PATTERN = r"def \w+_request"
TIMEOUT_SECONDS = 60
WORDS = ("alpha", "beta", "gamma", "delta", "value", "result", "config", "item", "index", "buffer", "token", "node")


# -- the content -------------------------------------------------------------------------------------


def make_project(root: Path) -> dict[str, str]:
    """The project both servers see; returns the edit's old and new text."""
    shutil.rmtree(root, ignore_errors=True)
    rng = random.Random(17)
    (root / "tree").mkdir(parents=True)
    body = source_file(rng, 200, WORDS)
    (root / "module.py").write_text(body, encoding="utf-8")
    (root / "ours.py").write_text(body, encoding="utf-8")
    (root / "theirs.py").write_text(body, encoding="utf-8")
    for n in range(12):
        directory = root / "tree" / ("api", "core", "util")[n % 3]
        directory.mkdir(exist_ok=True)
        text = source_file(rng, 30, WORDS)
        if n % 2 == 0:  # half the files hold two matches
            text += (
                f"def handle_request(request):\n    return request\n\n\ndef parse_{n}_request(raw):\n    return raw\n"
            )
        (directory / f"file_{n}.py").write_text(text, encoding="utf-8")
    (root / "entropic-mcp.toml").write_text(
        '[entropic_mcp]\nplugins = ["filesystem"]\n[storage]\nbackend = "none"\n[permissions]\ndefault = "allow"\n',
        encoding="utf-8",
    )
    # GNU grep's answer for the same search, for the reference server to carry.
    found = subprocess.run(
        ["grep", "-rnE", GREP_PATTERN.replace(r"\w", "[[:alnum:]_]"), "tree"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    (root / "grep-output.txt").write_text("\n".join(sorted(found.splitlines())), encoding="utf-8")
    first_def = next(line for line in body.splitlines() if line.startswith("def "))
    return {"old": first_def, "new": first_def.replace("def ", "def renamed_", 1)}


# -- a raw JSON-RPC client over stdio ---------------------------------------------------------------


class RawStdioClient:
    """Speaks JSON-RPC lines to a server process and counts every byte it writes back."""

    def __init__(self, argv: list[str], cwd: Path, env: Mapping[str, str]) -> None:
        self.process = subprocess.Popen(
            argv,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.next_id = 0

    def request(self, method: str, params: dict[str, Any]) -> tuple[dict[str, Any], int]:
        """Send one request; return its response and the bytes read until it (notifications included)."""
        self.next_id += 1
        ident = self.next_id
        self._send({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        assert self.process.stdout is not None
        read = 0
        while True:
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError(f"the server closed its output before answering {method}")
            read += len(line)
            message = json.loads(line)
            if message.get("id") == ident and ("result" in message or "error" in message):
                if "error" in message:
                    raise RuntimeError(f"{method} failed: {message['error']}")
                return message["result"], read

    def notify(self, method: str) -> None:
        self._send({"jsonrpc": "2.0", "method": method})

    def _send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def start(self) -> dict[str, Any]:
        result, _ = self.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "bench-mcp-bytes", "version": "1"},
            },
        )
        self.notify("notifications/initialized")
        return result

    def call(self, tool: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], int]:
        result, size = self.request("tools/call", {"name": tool, "arguments": arguments})
        if result.get("isError"):
            raise RuntimeError(f"{tool} answered an error: {result['content'][0].get('text', '')[:300]}")
        return result, size

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


# -- the servers ---------------------------------------------------------------------------------------


def reference_server() -> Path:
    """The reference server's entry script, installed once with npm under PEERS."""
    prefix = PEERS / f"server-filesystem-{REFERENCE_VERSION}"
    entry = prefix / "node_modules" / REFERENCE_PACKAGE / "dist" / "index.js"
    if not entry.exists():
        PEERS.mkdir(parents=True, exist_ok=True)
        (PEERS / ".gitignore").write_text("*\n", encoding="utf-8")  # installed peers are never committed
        prefix.mkdir(parents=True, exist_ok=True)
        package = f"{REFERENCE_PACKAGE}@{REFERENCE_VERSION}"
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--silent", "--prefix", str(prefix), package], check=True
        )
    return entry


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("ENTROPIC_MCP_")}


def measure_ours(root: Path, edit: Mapping[str, str], structured_content: str) -> dict[str, tuple[dict, int]]:
    config = root / f"entropic-mcp-{structured_content}.toml"
    config.write_text(
        (root / "entropic-mcp.toml").read_text(encoding="utf-8")
        + f'[serve]\nstructured_content = "{structured_content}"\n',
        encoding="utf-8",
    )
    entropic = Path(sys.executable).with_name("entropic-mcp")
    client = RawStdioClient([str(entropic), "--config", str(config), "serve"], root, clean_env())
    try:
        client.start()
        read = client.call("filesystem.read_file", {"path": "module.py"})
        grep = client.call("filesystem.grep", {"pattern": GREP_PATTERN, "path": "tree"})
        client.call("filesystem.read_file", {"path": "ours.py"})  # edits need a read first (not counted)
        changed = client.call(
            "filesystem.edit_file", {"path": "ours.py", "old_string": edit["old"], "new_string": edit["new"]}
        )
        client.call(  # back as it was, for the next run
            "filesystem.edit_file", {"path": "ours.py", "old_string": edit["new"], "new_string": edit["old"]}
        )
    finally:
        client.close()
    return {"read": read, "grep": grep, "edit": changed}


def measure_reference(root: Path, edit: Mapping[str, str]) -> dict[str, tuple[dict, int]]:
    client = RawStdioClient(["node", str(reference_server()), str(root)], root, clean_env())
    try:
        client.start()
        read = client.call("read_text_file", {"path": str(root / "module.py")})
        grep = client.call("read_text_file", {"path": str(root / "grep-output.txt")})
        changed = client.call(
            "edit_file", {"path": str(root / "theirs.py"), "edits": [{"oldText": edit["old"], "newText": edit["new"]}]}
        )
        client.call(
            "edit_file", {"path": str(root / "theirs.py"), "edits": [{"oldText": edit["new"], "newText": edit["old"]}]}
        )
    finally:
        client.close()
    return {"read": read, "grep": grep, "edit": changed}


# -- the report ------------------------------------------------------------------------------------------


def parts(result: Mapping[str, Any]) -> str:
    """Where a response's bytes go: text blocks, structuredContent, _meta (compact JSON)."""

    def size(value: object) -> int:
        return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())

    text = sum(len(block.get("text", "").encode()) for block in result.get("content", []))
    out = [f"text {text}"]
    if "structuredContent" in result:
        out.append(f"structured {size(result['structuredContent'])}")
    if result.get("_meta"):
        out.append(f"_meta {size(result['_meta'])}")
    return ", ".join(out)


def text_of(result: Mapping[str, Any]) -> str:
    return "".join(block.get("text", "") for block in result.get("content", []))


def check_same_content(
    root: Path, ours: Mapping[str, tuple[dict, int]], theirs: Mapping[str, tuple[dict, int]], grep_lines: list[str]
) -> None:
    """Both servers answered with the whole content (no page cut, no truncation), or the bench stops."""
    body = (root / "module.py").read_text(encoding="utf-8")
    assert text_of(theirs["read"][0]) == body, "the reference server did not return the file whole"
    our_read = text_of(ours["read"][0])
    missing = [line for line in body.splitlines() if line not in our_read]
    assert not missing, f"entropic-mcp's read_file left out {len(missing)} lines"
    our_grep = text_of(ours["grep"][0])
    for line in grep_lines:
        path, number, content = line.split(":", 2)
        assert path in our_grep and content in our_grep, f"entropic-mcp's grep left out {line!r}"
    assert text_of(theirs["grep"][0]) == "\n".join(grep_lines)


def main() -> int:
    if shutil.which("node") is None or shutil.which("npm") is None:
        print("bench_mcp_bytes: node and npm are needed for the reference server; skipped")
        return 0
    root = PROJECT.resolve()
    edit = make_project(root)
    theirs = measure_reference(root, edit)
    ours = measure_ours(root, edit, "declared")
    as_json = measure_ours(root, edit, "json")
    grep_lines = (root / "grep-output.txt").read_text(encoding="utf-8").splitlines()
    files = len({line.split(":", 1)[0] for line in grep_lines})
    cases = {
        "read": f"read_file, 200 lines ({(root / 'module.py').stat().st_size} B)",
        "grep": f"grep, {len(grep_lines)} matches in {files} of 12 files",
        "edit": "edit_file, one replacement",
    }
    check_same_content(root, ours, theirs, grep_lines)
    rows = []
    worst = 0.0
    for key, what in cases.items():
        (our_result, our_bytes), (their_result, their_bytes) = ours[key], theirs[key]
        ratio = our_bytes / their_bytes
        worst = max(worst, ratio)
        rows.append((what, f"{our_bytes} B", f"{their_bytes} B", f"{ratio:.2f}x", "<= 1.0x"))
        print(f"{what}")
        print(f"  entropic-mcp  {our_bytes:6d} B  ({parts(our_result)})")
        print(f"  reference     {their_bytes:6d} B  ({parts(their_result)})")
        print(f'  entropic-mcp with structured_content = "json": {as_json[key][1]} B')
    report("mcp_bytes", rows)
    print(
        f"bytes of JSON-RPC responses over stdio, protocol {PROTOCOL}; reference "
        f"{REFERENCE_PACKAGE}@{REFERENCE_VERSION} (its grep row: its envelope around grep -rn's output)"
    )
    return 0 if worst <= 1.0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
