"""What the default ``tools/list`` costs a model, against the reference servers for the same scope
(issue 24): entropic-mcp's filesystem and git servers against ``@modelcontextprotocol/server-filesystem``
(npm) and ``mcp-server-git`` (PyPI).

Run: ``python bench/bench_listing.py`` from the development venv (needs node and npm for the
reference filesystem server, installed once under ``bench/.peers/`` as bench_mcp_bytes.py does,
and ``pip install mcp-server-git``). Not a timed benchmark: each figure is a count.

Every server is asked ``tools/list`` over its real stdio (protocol 2025-11-25) with the raw
JSON-RPC client of bench_mcp_bytes.py. Counted per tool: the bytes of its compact JSON
definition (name, description, schemas, annotations: what a host hands the model) and its o200k
tokens (bench_tokens.py's counter). entropic-mcp runs with no settings but the two plugins, so
its descriptions render the default values.

Equivalent tools are compared pairwise (``PAIRS``); entropic-mcp's ``git_diff`` covers what the
reference server splits over ``git_diff``, ``git_diff_staged`` and ``git_diff_unstaged``, so it
is held against the three together. Tools one side has and the other lacks (grep, delete_file,
blame, stash, tags, restore; the reference's media, tree and sizes variants) are shown in the
whole-listing rows, per tool. Target: <= 1.0x for the same scope.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from subprocess import run

sys.path.insert(0, str(Path(__file__).parent))
from _common import record, report
from bench_mcp_bytes import RawStdioClient, clean_env, reference_server
from bench_tokens import counter

PAIRS: dict[str, tuple[str, ...]] = {
    "filesystem_read_file": ("read_text_file",),
    "filesystem_read_files": ("read_multiple_files",),
    "filesystem_write_file": ("write_file",),
    "filesystem_edit_file": ("edit_file",),
    "filesystem_create_directory": ("create_directory",),
    "filesystem_list_directory": ("list_directory",),
    "filesystem_move_file": ("move_file",),
    "filesystem_glob": ("search_files",),
    "filesystem_file_info": ("get_file_info",),
    "git_status": ("git_status",),
    "git_diff": ("git_diff", "git_diff_staged", "git_diff_unstaged"),
    "git_commit": ("git_commit",),
    "git_add": ("git_add",),
    "git_reset": ("git_reset",),
    "git_log": ("git_log",),
    "git_create_branch": ("git_create_branch",),
    "git_checkout": ("git_checkout",),
    "git_show": ("git_show",),
    "git_branch": ("git_branch",),
}


def listing(argv: list[str], root: Path) -> dict[str, str]:
    client = RawStdioClient(argv, root, clean_env())
    try:
        client.start()
        result, _ = client.request("tools/list", {})
    finally:
        client.close()
    return {tool["name"]: json.dumps(tool, separators=(",", ":"), ensure_ascii=False) for tool in result["tools"]}


def main() -> None:
    unit, count = counter()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        run(["git", "init", "-q"], cwd=root, check=True)
        (root / "entropic-mcp.toml").write_text(
            '[entropic_mcp]\nplugins = ["filesystem", "git"]\n[storage]\nbackend = "none"\n', encoding="utf-8"
        )
        ours = listing([str(Path(sys.executable).with_name("entropic-mcp")), "serve"], root)
        theirs = {
            **listing(["node", str(reference_server()), str(root)], root),
            **listing([sys.executable, "-m", "mcp_server_git", "--repository", str(root)], root),
        }
    rows, records = [], []
    sides = {
        "filesystem": ([n for n in PAIRS if n.startswith("filesystem_")], "`@modelcontextprotocol/server-filesystem`"),
        "git": ([n for n in PAIRS if n.startswith("git_")], "`mcp-server-git`"),
    }
    for server, (names, peer) in sides.items():
        peer_names = [p for n in names for p in PAIRS[n]]
        for what, measure in (("bytes", lambda text: len(text.encode())), (unit, count)):
            mine = sum(measure(ours[n]) for n in names)
            other = sum(measure(theirs[p]) for p in peer_names)
            ratio = mine / other
            rows.append((f"{server}: {len(names)} equivalent tools, {what}", mine, other, f"{ratio:.2f}×", "<= 1.0x"))
            records.append(
                {
                    "id": "T1",
                    "what": f"default `tools/list`, {server}: the {len(names)} tools the reference has too "
                    f"({len(peer_names)} of theirs), {what} of the definitions",
                    "peer": f"{peer} {other:,}",
                    "ours": f"{mine:,}",
                    "ratio": f"{ratio:.2f}×",
                    "target": "≤ 1.0× (issue 24)",
                    "met": "yes" if ratio <= 1.0 else "**no**",
                }
            )
    whole_ours = [n for n in ours if n.split("_")[0] in ("filesystem", "git")]
    mine = sum(count(ours[n]) for n in whole_ours) / len(whole_ours)
    other = sum(count(t) for t in theirs.values()) / len(theirs)
    rows.append(
        (
            f"whole listings, {unit} per tool",
            f"{mine:.0f} ({len(whole_ours)})",
            f"{other:.0f} ({len(theirs)})",
            f"{mine / other:.2f}×",
            "—",
        )
    )
    records.append(
        {
            "id": "T1",
            "what": f"default `tools/list`, filesystem + git, whole listings: {unit} per tool "
            f"(ours {len(whole_ours)} tools, the two reference servers {len(theirs)})",
            "peer": f"{other:.0f}",
            "ours": f"{mine:.0f}",
            "ratio": f"{mine / other:.2f}×",
            "target": "—",
            "met": "—",
        }
    )
    worst = sorted(PAIRS, key=lambda n: count(ours[n]) / sum(count(theirs[p]) for p in PAIRS[n]), reverse=True)[:5]
    for name in worst:
        mine, other = count(ours[name]), sum(count(theirs[p]) for p in PAIRS[name])
        rows.append((f"  {name} vs {'+'.join(PAIRS[name])}", mine, other, f"{mine / other:.2f}×", ""))
    report("bench_listing", rows)
    record("listing", records, table="tokens", script="bench/bench_listing.py")


if __name__ == "__main__":
    main()
