"""`entropic-mcp run` with the first-party plugins: a lead and a researcher on real-model adapters
(OpenAI-compatible and Anthropic wire formats) against stub servers that check every request,
then every record in the store. The stubs live in core/tests/test_host_models.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "core" / "tests"))
from test_host_models import KEY, Reply, Stub, last_text, results_of

pytestmark = pytest.mark.integration
ENTROPIC = [sys.executable, "-c", "from entropic_mcp.cli import main; main()"]

CONFIG = """\
[entropic_mcp]
plugins = ["filesystem", "entropic"]

[storage]
backend = "tinydb"
path = "{store}"

[permissions]
default = "allow"

[servers.entropic]
tiers = ["lead", "researcher"]

[identities.researcher.keys]
"filesystem.*" = "READ"
"entropic.complete" = "WRITE"
"""

RETRY = "[http]\nretries = 5\nbackoff = 'exponential'\nmax_delay = 30\n"
FINDING = "HTTP retries: 5, exponential backoff, max_delay = 30 s (config/retry.toml, [http])"


def script() -> dict[str, list[Any]]:
    def researcher_read(body: dict[str, Any]) -> Reply:
        found = "\n".join(results_of(body))
        assert "config/retry.toml" in found and "max_delay" in found and "exponential" in found
        return Reply(calls=(("filesystem__write_file", {"path": "config/retry.toml", "content": "retries = 0\n"}),))

    def researcher_refused(body: dict[str, Any]) -> Reply:
        [refusal] = results_of(body)
        error = json.loads(refusal)
        assert error["error"] == "access_denied", refusal
        assert "READ access to 'filesystem__write_file', which needs WRITE" in error["message"]
        return Reply(text="Done reading.", calls=(("entropic__complete", {"summary": FINDING}),))

    def lead_delegate(body: dict[str, Any]) -> Reply:
        assert "retries = 5" in "\n".join(results_of(body))
        task = {"target": "researcher", "task": "Find how HTTP retries are configured and their limits."}
        return Reply(calls=(("entropic__delegate", task),))

    def lead_complete(body: dict[str, Any]) -> Reply:
        note = last_text(body)
        assert "to 'researcher' completed" in note and FINDING in note, note
        return Reply(calls=(("entropic__complete", {"summary": "Lead: " + FINDING}),))

    return {
        "lead": [Reply(calls=(("filesystem__grep", {"pattern": "retries"}),)), lead_delegate, lead_complete],
        "researcher": [
            Reply(
                text="Reading.",
                calls=(
                    ("filesystem__read_file", {"path": "config/retry.toml"}),
                    ("filesystem__grep", {"pattern": "max_delay|backoff"}),
                ),
            ),
            researcher_read,
            researcher_refused,
        ],
    }


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_run_lead_and_researcher_with_the_first_party_plugins(wire, tmp_path):
    project = tmp_path / "project"
    (project / "config").mkdir(parents=True)
    (project / "config" / "retry.toml").write_text(RETRY)
    store = tmp_path / "store"
    (project / "entropic-mcp.toml").write_text(CONFIG.format(store=store))

    with Stub(wire, script()) as stub:
        base = stub.url + ("/v1" if wire == "openai" else "")
        (project / "models.toml").write_text(
            f'[default]\napi = "{wire}"\nbase_url = "{base}"\nmodel = "lead"\napi_key_env = "MODEL_KEY"\n'
            '[tiers.researcher]\nmodel = "researcher"\n'
        )
        done = subprocess.run(
            [*ENTROPIC, "run", "Sort out retries", "--models", "models.toml", "--json"],
            capture_output=True,
            text=True,
            cwd=project,
            env={**os.environ, "MODEL_KEY": KEY},
            stdin=subprocess.DEVNULL,
            timeout=300,
        )
    assert stub.problems == [], (stub.problems, [r["messages"][-2:] for r in stub.of("researcher")])
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "completed" and result["summary"] == "Lead: " + FINDING
    [delegation] = result["delegations"]
    assert delegation["status"] == "completed" and delegation["summary"] == FINDING
    assert (project / "config" / "retry.toml").read_text() == RETRY  # the researcher's keys refused the write

    # the researcher was offered only what its keys allow (no delegation tools at NONE) under wire names
    offered = stub.of("researcher")[0]["tools"]
    names = {t["function"]["name"] if wire == "openai" else t["name"] for t in offered}
    assert {"filesystem__read_file", "filesystem__grep", "entropic__complete"} <= names
    assert "entropic__delegate" not in names and all("." not in n for n in names)

    from entropic_mcp import ServerManager, load_config

    manager = ServerManager.from_config(load_config(project / "entropic-mcp.toml"))
    try:
        record = manager.storage.load_delegation_with_messages(delegation["delegation_id"])
        assert record["status"] == "completed" and record["target_tier"] == "researcher"
        assert record["summary"] == FINDING
        calls = [c["name"] for m in record["messages"] for c in m.get("tool_calls", ())]
        assert calls == ["filesystem.read_file", "filesystem.grep", "filesystem.write_file", "entropic.complete"]
        refused = next(m for m in record["messages"] if m.get("name") == "filesystem.write_file")
        assert refused["is_error"] is True
        lead = manager.storage.load_conversation(result["conversation_id"])["messages"]
        assert any(FINDING in (m.get("content") or "") for m in lead if m["role"] == "user")
    finally:
        manager.close()
