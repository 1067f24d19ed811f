"""``entropic-mcp run``: the reference host with real models per tier, as a user runs it (a real
process against a stub model server on a loopback socket)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_host_models import KEY, Raw, Reply, Stub, results_of

FAKE_SITE = Path(__file__).parent / "fake_site"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "entropic-mcp.toml").write_text(
        '[entropic_mcp]\nplugins = ["fakegood"]\n[storage]\nbackend = "none"\n[permissions]\ndefault = "allow"\n'
    )
    return tmp_path


def entropic(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(FAKE_SITE), os.environ.get("PYTHONPATH", "")]),
        "MODEL_KEY": KEY,
        "ENTROPIC_MCP_DATA_DIR": str(project / "data"),
    }
    return subprocess.run(
        [sys.executable, "-c", "from entropic_mcp.cli import main; main()", "run", *args],
        capture_output=True,
        text=True,
        cwd=project,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )


def test_run_drives_the_lead_on_an_openai_compatible_server_from_flags(project):
    def after(body: dict[str, Any]) -> Reply:
        assert results_of(body) == ["pong"]
        return Reply(text="The server answered pong.")

    with Stub("openai", {"qwen-7b": [Reply(calls=(("good__ping", {}),)), after]}) as stub:
        done = entropic(
            project,
            "ping the server",
            "--api",
            "openai",
            "--base-url",
            stub.url + "/v1",
            "--model",
            "qwen-7b",
            "--api-key-env",
            "MODEL_KEY",
            "--json",
        )
    assert done.returncode == 0, done.stderr
    assert stub.problems == []
    result = json.loads(done.stdout)
    assert result["status"] == "answered" and result["summary"] == "The server answered pong."
    assert result["turns"] == 2 and result["delegations"] == []
    [function] = [t["function"]["name"] for t in stub.requests[0]["tools"]]
    assert function == "good__ping"


def test_run_takes_the_tiers_from_a_models_file_and_prints_the_summary(project):
    (project / "models.toml").write_text(
        '[default]\napi = "anthropic"\nbase_url = "{url}"\nmodel = "small"\napi_key_env = "MODEL_KEY"\n'
        'max_tokens = 256\n\n[tiers.lead]\nmodel = "big"\n'
    )
    with Stub("anthropic", {"big": [Reply(text="All good.")]}) as stub:
        (project / "models.toml").write_text((project / "models.toml").read_text().replace("{url}", stub.url))
        done = entropic(project, "check", "--models", "models.toml")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "All good.\n"
    assert "answered after 1 turn(s)" in done.stderr
    assert stub.problems == [] and stub.requests[0]["max_tokens"] == 256


def test_an_endpoint_error_is_one_line_and_exit_status_1(project):
    # a local server needs no key: none is sent
    with Stub("openai", {"m": [Raw(500, '{"error": {"message": "model crashed"}}')]}, api_key=None) as stub:
        done = entropic(project, "x", "--api", "openai", "--base-url", stub.url + "/v1", "--model", "m")
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    [line] = [x for x in done.stderr.splitlines() if x.startswith("Error:")]
    assert "HTTP 500: model crashed" in line and "see its log" in line


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--model", "m"), "base_url: required for api = 'openai'"),
        (("--api", "anthropic", "--model", "m", "--tier", "researcher"), "--tier takes TIER=MODEL"),
        (("--models", "nope.toml"), "nope.toml: cannot read"),
    ],
)
def test_a_bad_model_setting_is_a_usage_or_config_error(project, args, message):
    done = entropic(project, "x", *args)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert message in done.stderr
