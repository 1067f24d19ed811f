"""Under CI=true a skip fails the run unless .ci/allowed-skips.toml lists it (the root conftest.py)."""

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).parents[2]

TESTS = """\
import pytest

def test_runs():
    pass

def test_listed():
    pytest.skip("listed on purpose")

@pytest.mark.skipif(True, reason="nobody listed me")
def test_unlisted():
    pass
"""


def _run(where: Path, *, ci: bool) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci:
        env["CI"] = "true"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_sample.py"],
        cwd=where,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    shutil.copy(REPO / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_sample.py").write_text(TESTS)
    (tmp_path / ".ci").mkdir()
    (tmp_path / ".ci" / "allowed-skips.toml").write_text(
        '[[skip]]\ntest = "test_sample.py::test_listed"\nwhy = "on purpose"\nheld_by = "nothing, a sample"\n'
    )
    return tmp_path


def test_an_unlisted_skip_fails_the_run_under_ci_and_is_named(sample: Path) -> None:
    result = _run(sample, ci=True)
    assert result.returncode == 1, result.stdout
    assert "not listed in .ci/allowed-skips.toml" in result.stdout
    assert "test_sample.py::test_unlisted: " in result.stdout and "nobody listed me" in result.stdout
    assert "test_sample.py::test_listed:" not in result.stdout


def test_outside_ci_skips_are_reported_as_usual(sample: Path) -> None:
    assert _run(sample, ci=False).returncode == 0


def test_listed_skips_pass_under_ci(sample: Path) -> None:
    (sample / "test_sample.py").write_text(TESTS.replace('@pytest.mark.skipif(True, reason="nobody listed me")\n', ""))
    result = _run(sample, ci=True)
    assert result.returncode == 0, result.stdout


def test_an_entry_without_its_reason_is_a_usage_error(sample: Path) -> None:
    (sample / ".ci" / "allowed-skips.toml").write_text('[[skip]]\ntest = "test_sample.py::*"\n')
    result = _run(sample, ci=True)
    assert result.returncode != 0
    assert "lacks held_by, why" in result.stdout + result.stderr


def test_every_entry_of_the_project_ledger_says_why_and_what_holds_it() -> None:
    entries = tomllib.loads((REPO / ".ci" / "allowed-skips.toml").read_text())["skip"]
    assert entries
    for entry in entries:
        assert entry["why"].strip() and entry["held_by"].strip(), entry
