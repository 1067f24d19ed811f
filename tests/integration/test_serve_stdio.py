"""`entropic-mcp serve` over real stdio, driven by the official SDK client in every protocol era."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from conftest import BASE_CONFIG, ERAS, connect, group_alive, served_names, stdio_params, wait_until, write_project

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

DIRECTIVES = "entropic-mcp/directives"
KIND = "entropic-mcp/kind"


def text_of(result: Any) -> str:
    assert len(result.content) == 1
    return result.content[0].text


@pytest.mark.parametrize("era", ERAS)
async def test_listing_is_paginated_sorted_and_annotated(tmp_path: Path, era: str) -> None:
    project = write_project(tmp_path, BASE_CONFIG + "[serve]\nlist_page_size = 2\n")
    async with connect(stdio_params(project), era) as peer:
        first = await peer.list_page()
        assert len(first.tools) == 2 and first.next_cursor
        tools = await peer.list_all()
    names = [tool.name for tool in tools]
    # The default names match what every model API accepts (^[a-zA-Z0-9_-]{1,64}$).
    assert names == served_names("_")
    by_name = {tool.name: tool for tool in tools}
    assert by_name["probe_echo"].annotations.read_only_hint is True
    assert by_name["probe_echo"].annotations.open_world_hint is False
    assert by_name["probe_note"].annotations.read_only_hint is False
    assert by_name["probe_note"].annotations.destructive_hint is False


@pytest.mark.parametrize(("plugins", "scope"), [('["probe"]', "public"), ('["probe", "entropic"]', "private")])
async def test_a_listing_that_differs_by_client_is_never_marked_for_shared_caches(
    tmp_path: Path, plugins: str, scope: str
) -> None:
    # With the entropic server, a client without sampling is not listed the delegation tools: a
    # shared cache must not hand its listing to a client that samples (2026-07-28 cacheScope).
    project = write_project(tmp_path, BASE_CONFIG.replace('plugins = ["probe"]', f"plugins = {plugins}"))
    async with connect(stdio_params(project), "2026-07-28") as peer:
        page = await peer.list_page()
    assert page.cache_scope == scope


@pytest.mark.parametrize("era", ERAS)
async def test_calls_carry_result_kind_directives_and_errors(project: Path, era: str) -> None:
    async with connect(stdio_params(project), era) as peer:
        echoed = await peer.call("probe.echo", {"text": "hello"})
        assert text_of(echoed) == "hello" and echoed.is_error is False
        assert echoed.meta[KIND] == "ok"
        assert echoed.meta[DIRECTIVES] == [{"type": "notify_presenter", "key": "echo", "data": {"length": 5}}]

        # probe.info declares an outputSchema: structured content, the text block the same JSON.
        info = await peer.call("probe.info")
        assert info.structured_content["conversation"].startswith("stdio-")
        assert json.loads(text_of(info)) == info.structured_content
        # A JSON object from a tool without one goes over the wire once, as text.
        ended = await peer.call("probe.ended")
        assert ended.structured_content is None and json.loads(text_of(ended)) == {"ended": []}
        assert echoed.structured_content is None

        failed = await peer.call("probe.fail")
        assert failed.is_error is True and failed.meta[KIND] == "error" and failed.structured_content is None
        assert failed.meta.get(DIRECTIVES, []) == []
        assert json.loads(text_of(failed))["error"] == "probe_failure"

        bad_args = await peer.call("probe.echo", {"wrong": 1})
        assert bad_args.is_error is True and bad_args.meta[KIND] == "rejected_schema"

        # A repeat runs again; an identical answer is flagged, never served from a cache.
        duplicate = await peer.call("probe.echo", {"text": "hello"})
        assert duplicate.is_error is False and duplicate.meta[KIND] == "ok"
        assert text_of(duplicate).startswith("[duplicate_call]") and text_of(duplicate).endswith("hello")

        # An unknown tool is a tool error the model can act on, not a protocol error it never sees.
        missing = await peer.call("probe.missing")
        assert missing.is_error is True and json.loads(text_of(missing))["error"] == "unknown_tool"


async def test_structured_content_json_keeps_every_object_structured(tmp_path: Path) -> None:
    project = write_project(tmp_path, BASE_CONFIG + '[serve]\nstructured_content = "json"\n')
    async with connect(stdio_params(project), "2025-11-25") as peer:
        ended = await peer.call("probe.ended")
        assert ended.structured_content == json.loads(text_of(ended)) == {"ended": []}
        failed = await peer.call("probe.fail")
        assert failed.is_error is True and failed.structured_content == json.loads(text_of(failed))
        echoed = await peer.call("probe.echo", {"text": "not an object"})
        assert echoed.structured_content is None


@pytest.mark.parametrize("era", ERAS)
async def test_conversation_key_from_meta_else_one_per_process(project: Path, era: str) -> None:
    async with connect(stdio_params(project), era) as peer:
        mine = await peer.call("probe.info", meta={"entropic-mcp/conversation": "conv-a"})
        assert mine.structured_content["conversation"] == "conv-a"
        first = await peer.call("probe.info")
        second = await peer.call("probe.info")
        assert first.structured_content["conversation"] == second.structured_content["conversation"] != "conv-a"
        # Duplicates are per conversation: the same echo in another conversation runs.
        await peer.call("probe.echo", {"text": "x"}, meta={"entropic-mcp/conversation": "c1"})
        again = await peer.call("probe.echo", {"text": "x"}, meta={"entropic-mcp/conversation": "c2"})
        assert again.meta[KIND] == "ok"


@pytest.mark.parametrize("era", ERAS)
async def test_denied_permission_is_an_error_result(project: Path, era: str) -> None:
    async with connect(stdio_params(project), era) as peer:
        denied = await peer.call("probe.note", {"text": "secret plan"})
    assert denied.is_error is True and denied.meta[KIND] == "rejected_permission"
    assert json.loads(text_of(denied))["error"] == "permission_denied"
    assert not (project / "notes.txt").exists()


@pytest.mark.parametrize("era", ERAS)
async def test_ask_without_elicitation_names_the_rule_to_add(project: Path, era: str) -> None:
    async with connect(stdio_params(project), era) as peer:
        refused = await peer.call("probe.note", {"text": "hello"})
    message = json.loads(text_of(refused))["message"]
    assert refused.meta[KIND] == "rejected_permission"
    assert 'allow = ["probe.note(hello)"]' in message
    assert not (project / "notes.txt").exists()


@pytest.mark.parametrize("era", ERAS)
async def test_ask_is_answered_through_elicitation(project: Path, era: str) -> None:
    from mcp_types import ElicitResult

    asked: list[str] = []
    answers = iter([{"decision": "allow_once"}, None])

    async def elicit(context: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        content = next(answers)
        return ElicitResult(action="accept", content=content) if content else ElicitResult(action="decline")

    async with connect(stdio_params(project), era, elicitation=elicit) as peer:
        allowed = await peer.call("probe.note", {"text": "first"})
        declined = await peer.call("probe.note", {"text": "second"})
    assert allowed.is_error is False and text_of(allowed) == "noted: first"
    assert declined.is_error is True and declined.meta[KIND] == "rejected_permission"
    assert "declined" in json.loads(text_of(declined))["message"]
    assert len(asked) == 2 and "probe.note" in asked[0]
    assert (project / "notes.txt").read_text() == "first\n"


@pytest.mark.parametrize("era", ERAS)
async def test_progress_is_reported_while_a_call_runs(project: Path, era: str) -> None:
    seen: list[tuple[float, str | None]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, message))

    async with connect(stdio_params(project), era) as peer:
        done = await peer.call("probe.sleep", {"seconds": 0.5}, progress=progress)
    assert text_of(done) == "slept 0.5 s"
    assert seen and seen[0][1] is not None and seen[0][1].startswith("slept")


@pytest.mark.parametrize("era", ERAS)
async def test_cancelled_call_kills_its_process_group(project: Path, era: str) -> None:
    marker = project / "pgid"
    async with connect(stdio_params(project), era) as peer:
        with anyio.move_on_after(30) as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(peer.call, "probe.sleep", {"seconds": 60, "pgid_file": str(marker)})
                while not marker.exists():
                    await anyio.sleep(0.02)
                tg.cancel_scope.cancel()
        assert not scope.cancelled_caught
        pgid = int(marker.read_text())
        assert await anyio.to_thread.run_sync(lambda: wait_until(lambda: not group_alive(pgid)))
        after = await peer.call("probe.echo", {"text": "still here"})
        assert text_of(after) == "still here"


async def test_client_that_disconnects_mid_call_leaves_no_process(project: Path) -> None:
    marker = project / "pgid"
    async with anyio.create_task_group() as tg:

        async def call_then_vanish() -> None:
            async with connect(stdio_params(project), "2025-11-25") as peer:
                await peer.call("probe.sleep", {"seconds": 60, "pgid_file": str(marker)})

        tg.start_soon(call_then_vanish)
        while not marker.exists():
            await anyio.sleep(0.02)
        tg.cancel_scope.cancel()
    pgid = int(marker.read_text())
    assert await anyio.to_thread.run_sync(lambda: wait_until(lambda: not group_alive(pgid)))


async def test_underscored_names_map_back_through_the_table(tmp_path: Path) -> None:
    project = write_project(tmp_path, BASE_CONFIG + '[serve]\ntool_names = "underscored"\n')
    async with connect(stdio_params(project), "2026-07-28") as peer:
        names = [tool.name for tool in await peer.list_all()]
        assert names == served_names("__")
        echoed = await peer.call("probe__echo", {"text": "u"})
        assert text_of(echoed) == "u"


@pytest.mark.parametrize("era", ERAS)
async def test_every_spelling_calls_the_tool_and_an_unknown_name_is_a_tool_error_with_the_nearest(
    project: Path, era: str
) -> None:
    async with connect(stdio_params(project), era) as peer:
        for spelling in ("probe_echo", "probe.echo", "probe__echo"):
            assert text_of(await peer.call(spelling, {"text": spelling})) == spelling
        wrong = await peer.call("probe_ecko", {"text": "x"})
        missing = await peer.call("nothing_like_it_at_all", {})
    assert wrong.is_error is True
    body = json.loads(text_of(wrong))
    assert body["error"] == "unknown_tool" and "'probe_echo'" in body["message"]
    assert "'probe_echo'" in json.loads(text_of(wrong))["message"].split("Did you mean", 1)[1]
    assert missing.is_error is True and "tools/list" in json.loads(text_of(missing))["message"]


async def test_dotted_names_stay_available_as_a_setting(tmp_path: Path) -> None:
    project = write_project(tmp_path, BASE_CONFIG + '[serve]\ntool_names = "dotted"\n')
    async with connect(stdio_params(project), "2025-11-25") as peer:
        names = [tool.name for tool in await peer.list_all()]
        assert names[0] == "probe.echo"
        assert text_of(await peer.call("probe_echo", {"text": "d"})) == "d"


@pytest.mark.parametrize("era", ERAS)
async def test_no_approver_tells_the_agent_to_ask_the_user_not_to_edit_the_policy(project: Path, era: str) -> None:
    async with connect(stdio_params(project), era) as peer:
        refused = await peer.call("probe_note", {"text": "hello"})
    message = json.loads(text_of(refused))["message"]
    assert "Ask the user to approve it" in message and "Do not retry it unchanged" in message
    assert "the user's to add, not yours" in message and 'allow = ["probe.note(hello)"]' in message


@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
async def test_a_dismissed_approval_gives_the_same_remedy(project: Path, era: str) -> None:
    from mcp_types import ElicitResult

    async def elicit(context: Any, params: Any) -> ElicitResult:
        return ElicitResult(action="cancel")

    async with connect(stdio_params(project), era, elicitation=elicit) as peer:
        refused = await peer.call("probe_note", {"text": "hello"})
    message = json.loads(text_of(refused))["message"]
    assert refused.is_error is True and "dismissed the approval request" in message
    assert "Ask the user whether to run it" in message and 'allow = ["probe.note(hello)"]' in message
    assert "Do not retry it unchanged" in message and not (project / "notes.txt").exists()


async def test_always_allow_is_stored_and_not_asked_again(project: Path) -> None:
    from mcp_types import ElicitResult

    asked: list[str] = []

    async def elicit(context: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"decision": "always_allow"})

    async with connect(stdio_params(project), "2026-07-28", elicitation=elicit) as peer:
        first = await peer.call("probe.note", {"text": "same"})
        second = await peer.call("probe.note", {"text": "same"}, meta={"entropic-mcp/conversation": "other"})
    assert first.is_error is False and second.is_error is False
    assert len(asked) == 1
    assert "probe.note(same)" in (project / "entropic-mcp.local.toml").read_text()


async def test_the_process_conversation_is_ended_when_stdin_closes(tmp_path: Path) -> None:
    """Its todo list lived in the store; nobody can name that conversation again, so it goes.
    A conversation the client named itself may be continued by a later process: it stays."""
    import orjson
    from entropic_mcp._storage._tinydb import TinyDBBackend

    store = tmp_path / "store"
    project = write_project(
        tmp_path / "project",
        f"""\
[entropic_mcp]
plugins = ["entropic"]
[storage]
backend = "tinydb"
path = {str(store)!r}
[permissions]
default = "allow"
""",
    )
    async with connect(stdio_params(project), "2026-07-28") as peer:
        await peer.call("entropic.todo", {"action": "add", "content": "this process only"})
        await peer.call(
            "entropic.todo", {"action": "add", "content": "kept"}, meta={"entropic-mcp/conversation": "chat-7"}
        )
    keys = {
        op["key"]
        for line in (store / "journal-00000000.jsonl").read_bytes().splitlines()
        if (op := orjson.loads(line))["op"] == "save_state"
    }
    [process_key] = keys - {"chat-7"}
    assert process_key.startswith("stdio-")
    assert wait_until(lambda: _loaded(TinyDBBackend, store, process_key) == (None, 0))
    assert _loaded(TinyDBBackend, store, "chat-7") == ({"items": [{"content": "kept", "status": "pending"}]}, 1)


def _loaded(backend_class: Any, store: Path, key: str) -> Any:
    backend = backend_class(store)
    try:
        return backend.load_state("entropic.todo", key)
    finally:
        backend.close()


@pytest.mark.parametrize("key", ["", "   ", "chat\x00one", "line\nbreak", "x" * 257, 42, ["a"]])
async def test_a_bad_conversation_key_is_refused_with_what_to_send(project: Path, key: Any) -> None:
    from mcp import MCPError

    async with connect(stdio_params(project), "2026-07-28") as peer:
        with pytest.raises(MCPError, match="printable characters") as caught:
            await peer.call("probe.info", meta={"entropic-mcp/conversation": key})
        assert "send e.g. a chat id" in str(caught.value)
        ok = await peer.call("probe.info", meta={"entropic-mcp/conversation": "chat 7 — ünïcode ✓"})
        assert ok.structured_content["conversation"] == "chat 7 — ünïcode ✓"
