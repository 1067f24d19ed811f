"""Bounded memory and sizes: huge files cost a bounded amount of memory in grep, write and edit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

#: Peak RSS of a fresh process that greps and writes a huge sparse file (issue 13: < 100 MB).
PROBE = r"""
import json, resource, sys, anyio
from pathlib import Path
from entropic_mcp import CallContext
from entropic_mcp_filesystem import FilesystemServer

root, size = Path(sys.argv[1]), int(sys.argv[2])
with open(root / "huge.txt", "wb") as handle:
    handle.write(b"needle at the start\n" * 1024)  # text first: not skipped as binary
    handle.truncate(size)                            # then sparse zeros: one enormous "line"
server = FilesystemServer(root=root)
server.configure({})
def call(tool, args):
    return anyio.run(server.execute, tool, args, CallContext(conversation_id="rss"))
out = {}
out["grep"] = json.loads(call("grep", {"pattern": "needle", "output_mode": "count", "format": "json"}).result)
out["grep_tail"] = json.loads(call("grep", {"pattern": "zzz", "format": "json"}).result)
out["read"] = call("read_file", {"path": "huge.txt", "limit": 3}).result[:60]
out["write"] = json.loads(call("write_file", {"path": "huge.txt", "content": "x"}).result)
out["edit"] = json.loads(call("edit_file", {"path": "huge.txt", "old_string": "needle", "new_string": "x"}).result)
# VmHWM is this process's own peak; Linux starts ru_maxrss from the parent's (it survives exec).
try:
    status = Path("/proc/self/status").read_text()
    out["rss_mb"] = int(next(l for l in status.splitlines() if l.startswith("VmHWM:")).split()[1]) / 1024
except (OSError, StopIteration):
    out["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (1024 * 1024 if sys.platform == "darwin" else 1024)
print(json.dumps(out))
"""


def probe(root: Path, size: int) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(root), str(size)], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


def check(out: dict) -> None:
    assert out["grep"] == [{"path": "huge.txt", "count": 1024}]
    assert out["grep_tail"] == []
    assert out["read"].startswith("needle at the start\nneedle at the start\n")
    assert out["write"]["error"] == "too_large" and "max_edit_bytes" in out["write"]["message"]
    assert out["edit"]["error"] == "too_large"
    assert out["rss_mb"] < 100, out


def test_a_large_sparse_file_costs_bounded_memory(root):
    check(probe(root, 256 << 20))


@pytest.mark.slow
def test_a_2_gb_sparse_file_costs_under_100_mb(root):
    check(probe(root, 2 << 30))


def test_write_and_edit_refuse_files_over_max_edit_bytes_before_reading(make, root):
    fs = make({"max_edit_bytes": 2048})
    (root / "big.txt").write_text("y" * 4096 + "\n")
    fs.ok("read_file", {"path": "big.txt"})
    for tool, args in (
        ("write_file", {"path": "big.txt", "content": "x"}),
        ("edit_file", {"path": "big.txt", "old_string": "y", "new_string": "x", "replace_all": True}),
    ):
        error = fs.error(tool, args)
        assert error["error"] == "too_large" and "max_edit_bytes" in error["message"]
    assert (root / "big.txt").read_text() == "y" * 4096 + "\n"
    fs.ok("write_file", {"path": "small.txt", "content": "z" * 100})


def test_write_and_edit_refuse_hard_linked_files(make, root, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("TOPSECRET\n")
    (root / "linked.txt").hardlink_to(outside)
    fs = make()
    for tool, args in (
        ("write_file", {"path": "linked.txt", "content": "x"}),
        ("edit_file", {"path": "linked.txt", "old_string": "TOPSECRET", "new_string": "x"}),
    ):
        error = fs.error(tool, args)
        assert error["error"] == "hard_link" and "TOPSECRET" not in str(error)
    assert outside.read_text() == "TOPSECRET\n"
    allowed = make({"allow_hard_links": True})
    allowed.ok("read_file", {"path": "linked.txt"})
    assert allowed.ok("edit_file", {"path": "linked.txt", "old_string": "TOPSECRET", "new_string": "x"})


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_allow_hard_links_must_be_a_boolean(root, value):
    from entropic_mcp import ConfigError
    from entropic_mcp_filesystem import FilesystemServer

    with pytest.raises(ConfigError, match="allow_hard_links"):
        FilesystemServer(root=root).configure({"allow_hard_links": value})
