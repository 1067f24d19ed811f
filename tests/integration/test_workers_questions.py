"""Stateless workers (issue 27), questions asked later in a call: an outside-root approval asked
while the tool runs, a delegation's sampling turns and the approval of a child's tool call, each
answered through whichever worker the client's retry reaches. Two `entropic-mcp serve --transport
http` workers on one PostgreSQL store behind haproxy round robin (docs/deployment.md), official-SDK
2026-07-28 clients; the same scenario against one worker gives the same answers, and what ran
before a question (the child's tool call, the parent's delegate) ran once.

Needs ``ENTROPIC_MCP_TEST_POSTGRES_DSN`` and ``haproxy`` on PATH (.ci/run installs it).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest
from test_workers import CONVERSATION_KEY, KIND, _text, deployment

from conftest import write_project

pytestmark = [pytest.mark.integration]

VERSION = "2026-07-28"


def _project(root: Path, dsn: str, schema: str) -> Path:
    return write_project(
        root,
        f"""\
[entropic_mcp]
plugins = ["probe", "entropic", "filesystem", "postgres"]
[storage]
backend = "postgres"
options = {{ dsn = {json.dumps(dsn)}, schema = {json.dumps(schema)}, audit_flush_seconds = 0.2 }}
[permissions]
default = "ask"
allow = ["filesystem.*", "entropic.*", "probe.info"]
[servers.filesystem]
allow_outside_root = "optional"
[servers.entropic]
tiers = ["lead", "researcher"]
[servers.entropic.profiles.researcher]
tools = ["probe.note", "filesystem.read_file"]
max_turns = 5
""",
    )


class Model:
    """The child's scripted turns: a note (its approval asked), a read outside the root (asked), done."""

    def __init__(self, outside: Path) -> None:
        self.turns = [
            [("probe_note", {"text": "child was here"}, "c1")],
            [("filesystem_read_file", {"path": str(outside / "a.txt")}, "c2")],
            [("entropic_complete", {"summary": "noted and read"}, "c3")],
        ]
        self.requests = 0

    async def __call__(self, context: Any, params: Any) -> Any:
        from mcp_types import CreateMessageResultWithTools, TextContent, ToolUseContent

        self.requests += 1
        if not self.turns:
            return CreateMessageResultWithTools(
                role="assistant", content=[TextContent(type="text", text="done")], model="scripted"
            )
        content = [ToolUseContent(type="tool_use", id=i, name=n, input=a) for n, a, i in self.turns.pop(0)]
        return CreateMessageResultWithTools(role="assistant", content=content, model="scripted", stop_reason="toolUse")


def _shown(text: str, outside: Path) -> str:
    """Text with the run's own directories (each worker has its project root) spelt the same."""
    import re

    text = text.replace(str(outside), "<outside>")
    text = re.sub(re.escape(str(outside.parent)) + r"/worker\d", "<root>", text)
    return re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<uuid>", text)


async def scenario(url: str, outside: Path) -> dict[str, Any]:
    """One conversation's calls whose questions come while the tool runs; what the client saw."""
    from mcp import Client
    from mcp_types import ElicitResult, SamplingCapability, SamplingToolsCapability

    asked: list[str] = []

    async def elicit(context: Any, params: Any) -> ElicitResult:
        asked.append(_shown(params.message.split("\n", 1)[0], outside))
        decision = "deny_once" if "refused.txt" in params.message else "allow_once"
        return ElicitResult(action="accept", content={"decision": decision})

    model = Model(outside)
    meta = {CONVERSATION_KEY: f"mid-{uuid.uuid4().hex[:8]}"}
    answers: list[tuple[str, str, str]] = []
    async with Client(
        url,
        mode="auto",
        elicitation_callback=elicit,
        sampling_callback=model,
        sampling_capabilities=SamplingCapability(tools=SamplingToolsCapability()),
        read_timeout_seconds=60,
        input_required_max_rounds=20,
    ) as client:
        assert client.protocol_version == VERSION

        async def call(label: str, name: str, arguments: dict[str, Any]) -> None:
            result = await client.call_tool(name, arguments, meta=meta)
            answers.append((label, result.meta[KIND], _shown(_text(result), outside)))

        await call("read outside", "filesystem_read_file", {"path": str(outside / "a.txt")})
        await call("write outside", "filesystem_write_file", {"path": str(outside / "b.txt"), "content": "once\n"})
        await call("refused outside", "filesystem_read_file", {"path": str(outside / "refused.txt")})
        await call("delegate", "entropic_delegate", {"target": "researcher", "task": "Note, then read a.txt"})
    return {"answers": answers, "asked": asked, "turns": model.requests}


def _run(tmp_path: Path, workers: int) -> tuple[dict[str, Any], list[dict[str, Any]], list[str], int]:
    outside = tmp_path / "outside"
    outside.mkdir(parents=True)
    (outside / "a.txt").write_text("outside words\n", encoding="utf-8")
    (outside / "refused.txt").write_text("never shown\n", encoding="utf-8")
    with deployment(tmp_path, workers, _project) as (url, served, (dsn, schema)):
        seen = anyio.run(scenario, url, outside)
        notes = [
            line
            for n in range(workers)
            if (tmp_path / f"worker{n}" / "notes.txt").exists()
            for line in (tmp_path / f"worker{n}" / "notes.txt").read_text().splitlines()
        ]
        written = (outside / "b.txt").read_text()
        import psycopg
        from psycopg import sql

        def audited() -> list[dict[str, Any]]:
            with psycopg.connect(dsn) as conn:
                rows = conn.execute(
                    sql.SQL("SELECT record FROM {}.tool_calls ORDER BY seq").format(sql.Identifier(schema))
                ).fetchall()
            return [row[0] for row in rows]

        from conftest import wait_until

        assert wait_until(lambda: sum(1 for r in audited() if r.get("tool") == "entropic.complete") >= 1, 15)
        rows = audited()
        with psycopg.connect(dsn) as conn:
            left = conn.execute(
                sql.SQL("SELECT count(*) FROM {}.states WHERE namespace IN ('serve.relay', 'serve.paused')").format(
                    sql.Identifier(schema)
                )
            ).fetchone()
    assert left == (0,)
    tools = [str(r.get("tool") or r.get("name")) for r in rows]
    return seen, rows, notes, int(written == "once\n") + 10 * tools.count("filesystem.write_file")


def test_questions_asked_mid_call_are_answered_on_any_worker_as_on_one(tmp_path: Path) -> None:
    alone, alone_rows, alone_notes, alone_write = _run(tmp_path / "one", 1)
    shared, shared_rows, shared_notes, shared_write = _run(tmp_path / "two", 2)
    assert shared["answers"] == alone["answers"]
    assert shared["asked"] == alone["asked"]
    assert shared["turns"] == alone["turns"] == 3

    answers = {label: (kind, text) for label, kind, text in alone["answers"]}
    assert answers["read outside"][0] == "ok" and "outside words" in answers["read outside"][1]
    assert answers["write outside"][0] == "ok"
    assert answers["refused outside"][0] == "error" and "outside_root_rejected" in answers["refused outside"][1]
    kind, body = answers["delegate"]
    assert kind == "ok" and json.loads(body)["summary"] == "noted and read", body
    # The outside-root questions (three at the top, one in the child) and the child's note approval.
    assert [q.split(" wants")[0].split(" (")[0] for q in alone["asked"]] == [
        "The tool filesystem.read_file",
        "The tool filesystem.write_file",
        "The tool filesystem.read_file",
        "Allow the tool call probe.note",
        "The tool filesystem.read_file",
    ]
    # Nothing ran twice: one note, one write (and one audit row of it), one audit row per call.
    for notes, write, rows in ((alone_notes, alone_write, alone_rows), (shared_notes, shared_write, shared_rows)):
        assert notes == ["child was here"]
        assert write == 11
        names = [str(r.get("tool") or r.get("name")) for r in rows]
        assert names.count("probe.note") == 1 and names.count("filesystem.read_file") == 3, names
        assert names.count("entropic.delegate") == 1


# -- a forged or tampered request state, under round robin -------------------------------------------


class Rpc:
    """Raw 2026-07-28 JSON-RPC (the SDK client never lets a test alter a requestState)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.ids = 0

    def call(self, conversation: str, tool: str, arguments: dict[str, Any], **extra: Any) -> dict[str, Any]:
        self.ids += 1
        meta = {
            "io.modelcontextprotocol/protocolVersion": VERSION,
            "io.modelcontextprotocol/clientInfo": {"name": "tamper-test", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
            CONVERSATION_KEY: conversation,
        }
        params = {"name": tool, "arguments": arguments, "_meta": meta, **extra}
        body = {"jsonrpc": "2.0", "id": self.ids, "method": "tools/call", "params": params}
        headers = {
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "MCP-Protocol-Version": VERSION,
            "Mcp-Method": "tools/call",
            "Mcp-Name": tool,
        }
        request = urllib.request.Request(self.url, data=json.dumps(body).encode(), headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                kind, text = response.headers.get("content-type", ""), response.read().decode()
        except urllib.error.HTTPError as error:
            kind, text = error.headers.get("content-type", ""), error.read().decode()
        if kind.startswith("text/event-stream"):
            messages = [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]
            return next(m for m in messages if m.get("id") == self.ids)
        return dict(json.loads(text))


ALLOW = {"entropic-mcp/approval": {"action": "accept", "content": {"decision": "allow_once"}}}


def test_a_forged_or_tampered_request_state_is_refused_on_either_worker(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a.txt").write_text("outside words\n", encoding="utf-8")
    with deployment(tmp_path, 2, _project) as (url, _, _):
        rpc = Rpc(url)
        read = {"path": str(outside / "a.txt")}
        first = rpc.call("tamper", "filesystem_read_file", read)["result"]
        assert first["resultType"] == "input_required", first
        state = first["requestState"]
        nonce, _, mac = state.partition(".")
        flipped = mac[:-1] + ("0" if mac[-1] != "0" else "1")
        attempts = {
            "tampered mac": (state.replace(mac, flipped), "tamper", read),
            "forged": (f"{uuid.uuid4().hex}.{'0' * 32}", "tamper", read),
            "other conversation": (state, "someone-else", read),
            "other arguments": (state, "tamper", {"path": str(outside / "b.txt")}),
        }
        # Four refusals: round robin puts two on each worker (the asking one and the other).
        for label, (sent, conversation, arguments) in attempts.items():
            answer = rpc.call(conversation, "filesystem_read_file", arguments, requestState=sent, inputResponses=ALLOW)
            assert answer.get("error", {}).get("data", {}).get("reason") == "invalid_request_state", (label, answer)
        # None of them used the state up: the genuine retry is answered, once.
        done = rpc.call("tamper", "filesystem_read_file", read, requestState=state, inputResponses=ALLOW)["result"]
        assert done["resultType"] == "complete" and "outside words" in done["content"][0]["text"], done
        again = rpc.call("tamper", "filesystem_read_file", read, requestState=state, inputResponses=ALLOW)
        assert again.get("error", {}).get("data", {}).get("reason") == "invalid_request_state", again
