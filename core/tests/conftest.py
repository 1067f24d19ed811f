from pathlib import Path

import pytest

FAKE_SITE = Path(__file__).parent / "fake_site"


@pytest.fixture
def fake_site(monkeypatch):
    """Put the committed fake distributions (working, broken, raising, unknown, dup, blocked) on the path."""
    monkeypatch.syspath_prepend(str(FAKE_SITE))
    return FAKE_SITE


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(autouse=True)
def user_data_dir(tmp_path_factory, monkeypatch):
    """entropic-mcp's per-user data (default stores, .mcp.json approvals) in a fresh directory, never ~."""
    path = tmp_path_factory.mktemp("entropic-data")
    monkeypatch.setenv("ENTROPIC_MCP_DATA_DIR", str(path))
    return path
