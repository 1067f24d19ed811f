"""The project's own tests run with broken plugins as errors (never silently skipped), and under
CI=true a skipped test fails the run unless `.ci/allowed-skips.toml` lists it with its reason."""

from __future__ import annotations

import fnmatch
import os
import tomllib
from pathlib import Path

import pytest

os.environ["ENTROPIC_MCP_STRICT_PLUGINS"] = "1"

ALLOWED_SKIPS = Path(__file__).parent / ".ci" / "allowed-skips.toml"
_skipped: list[tuple[str, str]] = []


def allowed_skips(path: Path = ALLOWED_SKIPS) -> list[dict[str, str]]:
    """The ledger's entries; each names a test (a node-id glob), why it skips, and what holds it."""
    entries = tomllib.loads(path.read_text("utf-8")).get("skip", []) if path.exists() else []
    for entry in entries:
        missing = {"test", "why", "held_by"} - set(entry)
        if missing:
            raise pytest.UsageError(f"{path}: entry {entry!r} lacks {', '.join(sorted(missing))}")
    return entries


def unlisted_skips(skipped: list[tuple[str, str]], entries: list[dict[str, str]]) -> list[tuple[str, str]]:
    return [
        (node, reason) for node, reason in skipped if not any(fnmatch.fnmatchcase(node, e["test"]) for e in entries)
    ]


@pytest.fixture(autouse=True)
def user_data_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """entropic-mcp's per-user data (default stores, .mcp.json approvals) in a fresh directory for
    every package's tests, never the real ~/.local/share (tests/integration has its own, by XDG)."""
    path = tmp_path_factory.mktemp("entropic-data")
    monkeypatch.setenv("ENTROPIC_MCP_DATA_DIR", str(path))
    return path


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        _skipped.append((report.nodeid, reason))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if os.environ.get("CI") != "true" or not _skipped:
        return
    unlisted = unlisted_skips(_skipped, allowed_skips())
    if not unlisted:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_sep("=", "skipped under CI=true and not listed in .ci/allowed-skips.toml", red=True)
        for node, reason in unlisted:
            reporter.write_line(f"{node}: {reason}")
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
