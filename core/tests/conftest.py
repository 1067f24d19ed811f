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
