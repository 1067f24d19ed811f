"""Rules and sandbox together: with the sandbox active, a command the analysis cannot fully
understand but an allow rule matches (``make *``, with ``--eval`` running code) runs, bounded by the kernel; without a
sandbox the same call still asks (here: is refused, as no approver answers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import connect, serve_env

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

ERA = "2026-07-28"
CONFIG = """\
[entropic_mcp]
plugins = ["bash"]
[storage]
backend = "none"
[permissions]
default = "ask"
allow = ["bash.execute:make *"]
deny = ["bash.execute:rm *"]
[sandbox]
mode = "{mode}"
"""
OPAQUE = "make --eval='all: ; @echo inside > made.txt' all"


def project(tmp_path: Path, mode: str) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "entropic-mcp.toml").write_text(CONFIG.format(mode=mode), encoding="utf-8")
    return root


def params(root: Path, tmp_path: Path):
    from mcp import StdioServerParameters

    from conftest import ENTROPIC_MCP

    return StdioServerParameters(
        command=str(ENTROPIC_MCP),
        args=["serve"],
        cwd=str(root),
        env=serve_env({"XDG_DATA_HOME": str(tmp_path / "xdg")}),
    )


async def test_an_opaque_command_an_allow_rule_matches_runs_inside_the_sandbox(tmp_path):
    root = project(tmp_path, "required")
    # outside the root and outside /tmp (inside the sandbox /tmp is a private tmpfs)
    outside = Path("/usr/local") / f"entropic-sandbox-rules-{tmp_path.name}.txt"
    escape = f"make --eval='all: ; @echo escaped > {outside}' all"
    async with connect(params(root, tmp_path), ERA) as peer:
        made = await peer.call("bash.execute", {"command": OPAQUE})
        escaped = await peer.call("bash.execute", {"command": escape})
        denied = await peer.call("bash.execute", {"command": "make --eval='all: ;' all; rm -f x"})
    assert not made.is_error, made
    assert (root / "made.txt").read_text() == "inside\n"
    # allowed by the rule, bounded by the kernel: the write outside the root fails
    assert not outside.exists() and "sandbox" in "".join(b.text for b in escaped.content)
    # deny rules still apply to the parts the analysis does see
    assert denied.is_error and "rm" in denied.content[0].text


async def test_without_a_sandbox_the_same_command_still_asks(tmp_path):
    root = project(tmp_path, "off")
    async with connect(params(root, tmp_path), ERA) as peer:
        refused = await peer.call("bash.execute", {"command": OPAQUE})
    assert refused.is_error and "could not be fully analysed" in refused.content[0].text
    assert not (root / "made.txt").exists()
