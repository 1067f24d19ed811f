"""Every git tool through the official MCP client (the SDK on both sides, the whole pipeline)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import orjson
from entropic_mcp.testing import make_manager, served_client
from git_testkit import Repo, init_repo, make_server

#: (tool, arguments, a fragment the text result must contain) in an order that makes sense on
#: the fixture repository.
CALLS: list[tuple[str, dict[str, Any], str]] = [
    ("git.status", {}, '"unstaged":[{"path":"a.txt","status":"modified"}]'),
    ("git.diff", {}, "+changed"),
    ("git.diff", {"format": "stat"}, "a.txt | 2 +-"),
    ("git.diff", {"format": "name_only"}, "a.txt"),
    ("git.log", {"body": True, "stats": True}, '"body":"why it changed"'),
    ("git.show", {"revision": "HEAD:a.txt"}, "two"),
    ("git.blame", {"path": "a.txt", "revision": "HEAD"}, "\ttwo"),
    ("git.branch", {}, '"current":"main"'),
    ("git.stash", {"message": "wip"}, '"stashed":true'),
    ("git.stash_list", {}, "On main: wip"),
    ("git.stash", {"action": "pop"}, '"popped":"stash@{0}"'),
    ("git.restore", {"paths": ["a.txt"]}, '"restored":["a.txt"]'),
    ("git.create_tag", {"name": "v1", "message": "first release"}, '"annotated":true'),
    ("git.tag", {}, '"message":"first release"'),
    ("git.add", {"paths": ["b.txt"]}, '"staged":["b.txt"]'),
    ("git.reset", {}, '"unstaged":["b.txt"]'),
    ("git.add", {"paths": ["b.txt"]}, '"staged":["b.txt"]'),
    ("git.commit", {"message": "add b"}, '"sha"'),
    ("git.create_branch", {"name": "feature", "checkout": False}, '"branch":"feature"'),
    ("git.checkout", {"target": "feature"}, '"branch":"feature"'),
]


def _repo(tmp_path: Path) -> Repo:
    repo = init_repo(tmp_path / "work")
    repo.commit("one", **{"a.txt": "one\n", "secrets__key": "s3cr3t\n"})
    repo.commit("two\n\nwhy it changed", **{"a.txt": "two\n"})
    repo.write("a.txt", "changed\n")
    repo.write("b.txt", "new\n")
    (repo.path / ".entropicignore").write_text("secrets/\n")
    return repo


def test_every_tool_through_the_official_client(tmp_path):
    repo = _repo(tmp_path)
    manager = make_manager(
        repo.path,
        config={"permissions": {"default": "allow"}, "servers": {"git": {"network": True}}},
        servers=[make_server(repo.path, network=True)],
    )

    async def main() -> tuple[list[str], list[Any], list[Any]]:
        async with served_client(manager) as client:
            names = [tool.name for tool in (await client.list_tools()).tools]
            results = [await client.call_tool(tool, args) for tool, args, _ in CALLS]
            refusals = [
                await client.call_tool("git.fetch", {"remote": "nowhere"}),
                await client.call_tool("git.show", {"revision": "HEAD:secrets/key"}),
                await client.call_tool("git.push", {"branch": "+main"}),
                await client.call_tool("git.stash", {"action": "explode"}),
            ]
            return names, results, refusals

    names, results, refusals = anyio.run(main)
    assert {
        f"git_{n}" for n in ("blame", "stash", "stash_list", "restore", "tag", "create_tag", "fetch", "pull", "push")
    } <= set(names)
    for (tool, args, fragment), result in zip(CALLS, results, strict=True):
        text = "".join(getattr(part, "text", "") for part in result.content)
        assert result.is_error is False, (tool, args, text)
        assert fragment in text, (tool, args, text)
        assert "s3cr3t" not in text
    fetch, hidden, refspec, schema = refusals
    assert fetch.is_error and "nowhere" in orjson.loads(fetch.content[0].text)["message"]
    assert hidden.is_error and orjson.loads(hidden.content[0].text)["error"] == "path_hidden"
    assert refspec.is_error and orjson.loads(refspec.content[0].text)["error"] == "invalid_argument"
    assert schema.is_error and schema.meta["entropic-mcp/kind"] == "rejected_schema"


def test_network_tools_are_not_listed_with_the_network_off(tmp_path):
    repo = _repo(tmp_path)
    manager = make_manager(repo.path, config={"permissions": {"default": "allow"}}, servers=[make_server(repo.path)])

    async def main() -> tuple[list[str], Any]:
        async with served_client(manager) as client:
            names = [tool.name for tool in (await client.list_tools()).tools]
            return names, await client.call_tool("git_push", {})

    names, push = anyio.run(main)
    assert "git_status" in names and not {"git_fetch", "git_pull", "git_push"} & set(names)
    assert push.is_error and orjson.loads(push.content[0].text)["error"] == "unknown_tool"
