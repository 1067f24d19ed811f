"""``entropic-mcp storage``: conversations, delegations, search, show — tables and JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from entropic_mcp._storage._tinydb import TinyDBBackend
from entropic_mcp.cli import cli


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "entropic-mcp.toml").write_text(
        '[entropic_mcp]\nplugins = []\n[storage]\nbackend = "tinydb"\npath = "store"\n'
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "300")  # rich folds cells at the default 80 columns
    return tmp_path


@pytest.fixture
def filled(project: Path) -> dict[str, str]:
    backend = TinyDBBackend(project / "store")
    root = backend.create_conversation("Refactor the parser", {"user": "ann"})
    backend.save_messages(root, [{"role": "user", "content": "please refactor"}])
    done, child = backend.create_delegation(
        root, "lead", "coder", "split the tokenizer module", 5, [{"path": "tok.py"}]
    )
    backend.save_messages(child, [{"role": "assistant", "content": "tokenizer split into lexer and reader"}])
    backend.complete_delegation(done, "completed", "Tokenizer split; tests pass")
    running, _ = backend.create_delegation(root, "lead", "researcher", "survey tokenizer libraries", 3, None)
    backend.close()
    return {"root": root, "done": done, "child": child, "running": running}


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), obj={})


def test_conversations_json_lists_newest_first(filled: dict[str, str]) -> None:
    result = invoke("storage", "conversations", "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [r["conversation_id"] for r in rows][-1] == filled["root"]
    assert len(rows) == 3


def test_conversations_table_for_people(filled: dict[str, str]) -> None:
    result = invoke("storage", "conversations")
    assert result.exit_code == 0
    assert "Refactor the parser" in result.stdout and "conversations" in result.stdout


def test_delegations_json_and_limit(filled: dict[str, str]) -> None:
    rows = json.loads(invoke("storage", "delegations", "--json", "--limit", "1").stdout)
    assert [r["delegation_id"] for r in rows] == [filled["running"]]
    table = invoke("storage", "delegations").stdout
    assert "lead → coder" in table and "completed" in table and "running" in table


def test_search_finds_completed_delegations(filled: dict[str, str]) -> None:
    rows = json.loads(invoke("storage", "search", "TOKENIZER tests", "--json").stdout)
    assert [r["delegation_id"] for r in rows] == [filled["done"]]
    assert "Tokenizer split" in invoke("storage", "search", "tokenizer").stdout


def test_search_by_scope(filled: dict[str, str], project: Path) -> None:
    backend = TinyDBBackend(project / "store")
    other = backend.create_conversation("elsewhere", None, "tenant-b")
    theirs, _ = backend.create_delegation(other, "lead", "coder", "tokenizer elsewhere", 2, None)
    backend.complete_delegation(theirs, "completed", "tokenizer done there")
    backend.close()
    every = json.loads(invoke("storage", "search", "tokenizer", "--json").stdout)
    assert {r["delegation_id"] for r in every} == {filled["done"], theirs}
    ours = json.loads(invoke("storage", "search", "tokenizer", "--scope", "default", "--json").stdout)
    assert [r["delegation_id"] for r in ours] == [filled["done"]]
    assert json.loads(invoke("storage", "search", "tokenizer", "--scope", "nobody", "--json").stdout) == []
    result = invoke("storage", "search", "tokenizer", "--scope", " ")
    assert result.exit_code == 2 and "--scope is empty" in result.output


def test_search_with_an_empty_query_is_a_usage_error(filled: dict[str, str]) -> None:
    result = invoke("storage", "search", "  ")
    assert result.exit_code == 2 and "query is empty" in result.output


def test_show_a_delegation_with_its_messages(filled: dict[str, str]) -> None:
    data = json.loads(invoke("storage", "show", filled["done"], "--json").stdout)
    assert data["kind"] == "delegation" and data["status"] == "completed"
    assert data["messages"][0]["content"].startswith("tokenizer split")
    text = invoke("storage", "show", filled["done"]).stdout
    assert "Tokenizer split; tests pass" in text and "tok.py" in text


def test_show_a_conversation(filled: dict[str, str]) -> None:
    data = json.loads(invoke("storage", "show", filled["root"], "--json").stdout)
    assert data["kind"] == "conversation" and data["messages"] == [{"role": "user", "content": "please refactor"}]
    assert "please refactor" in invoke("storage", "show", filled["root"]).stdout


def test_show_an_unknown_id_is_a_one_line_error(filled: dict[str, str]) -> None:
    result = invoke("storage", "show", "nope")
    assert result.exit_code == 1
    assert "no delegation or conversation 'nope'" in result.output and "Traceback" not in result.output


def test_a_store_that_does_not_exist_yet_is_empty_and_not_created(project: Path) -> None:
    assert json.loads(invoke("storage", "conversations", "--json").stdout) == []
    assert json.loads(invoke("storage", "stats", "--json").stdout) == {}
    assert not (project / "store").exists()


def test_a_corrupt_store_is_a_one_line_error_naming_the_file(filled: dict[str, str], project: Path) -> None:
    journal = project / "store" / "journal-00000000.jsonl"
    journal.write_bytes(b"garbage\n" + journal.read_bytes())
    result = invoke("storage", "delegations")
    assert result.exit_code == 1
    assert "journal-00000000.jsonl: corrupt entry" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_disabled_storage_says_how_to_enable_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "entropic-mcp.toml").write_text('[storage]\nbackend = "none"\n')
    monkeypatch.chdir(tmp_path)
    result = invoke("storage", "conversations")
    assert result.exit_code == 1 and 'backend = "tinydb"' in result.output


def test_stats_counts(filled: dict[str, str]) -> None:
    counts = json.loads(invoke("storage", "stats", "--json").stdout)
    assert counts["delegations"] == 2 and counts["completed_delegations"] == 1 and counts["messages"] == 2


def test_config_given_with_the_global_option(filled: dict[str, str], project: Path, tmp_path_factory) -> None:
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (elsewhere / "entropic-mcp.toml").write_text(
        f'[entropic_mcp]\nroot = "{project}"\nplugins = []\n[storage]\npath = "store"\n'
    )
    result = CliRunner().invoke(
        cli, ["--config", str(elsewhere / "entropic-mcp.toml"), "storage", "stats", "--json"], obj={}
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["delegations"] == 2


def test_prune_state_deletes_old_documents_of_one_namespace(project: Path) -> None:
    import time

    backend = TinyDBBackend(project / "store")
    backend.save_state("entropic.todo", "chat-1", {"items": []}, 0)
    backend.save_state("other.plugin", "chat-1", {"x": 1}, 0)
    backend.close()
    kept = invoke("storage", "prune-state", "entropic.todo", "--older-than", "1", "--json")
    assert kept.exit_code == 0, kept.output
    assert json.loads(kept.output) == {"namespace": "entropic.todo", "pruned": 0}
    time.sleep(0.02)
    pruned = invoke("storage", "prune-state", "entropic.todo", "--older-than", "0")
    assert pruned.exit_code == 0 and "pruned 1 entropic.todo document older than 0 days" in pruned.output
    backend = TinyDBBackend(project / "store")
    assert backend.load_state("entropic.todo", "chat-1") == (None, 0)
    assert backend.load_state("other.plugin", "chat-1") == ({"x": 1}, 1)
    backend.close()


@pytest.mark.parametrize("args", [["--older-than", "-1"], [], ["--older-than", "soon"]])
def test_prune_state_needs_an_age(project: Path, args: list[str]) -> None:
    result = invoke("storage", "prune-state", "entropic.todo", *args)
    assert result.exit_code == 2 and "--older-than" in result.output


def test_prune_state_of_a_store_not_made_yet_prunes_nothing(project: Path) -> None:
    result = invoke("storage", "prune-state", "entropic.todo", "--older-than", "30")
    assert result.exit_code == 0 and "pruned 0" in result.output
    assert not (project / "store").exists()
