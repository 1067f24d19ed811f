"""Both built-in backends pass the backend contract of ``entropic_mcp.testing``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from entropic_mcp._storage._tinydb import TinyDBBackend
from entropic_mcp.testing import MemoryStorage, StorageContract


class TestTinyDBContract(StorageContract):
    @pytest.fixture
    def open_backend(self, tmp_path: Path):
        return lambda: TinyDBBackend(tmp_path / "store")


class TestTinyDBContractCompactingOften(StorageContract):
    """The same contract while the store compacts after almost every write."""

    @pytest.fixture
    def open_backend(self, tmp_path: Path):
        return lambda: TinyDBBackend(tmp_path / "store", compact_bytes=1)


class TestTinyDBContractMessagesInSegments(StorageContract):
    """The same contract with every message batch kept in small, rotating segment files."""

    @pytest.fixture
    def open_backend(self, tmp_path: Path):
        return lambda: TinyDBBackend(tmp_path / "store", inline_bytes=1, segment_bytes=300)


class TestMemoryStorageContract(StorageContract):
    shares_store = False

    @pytest.fixture
    def open_backend(self):
        return MemoryStorage


def test_contract_without_an_opener_fails_with_instructions(tmp_path: Path) -> None:
    (tmp_path / "test_forgot.py").write_text(
        "from entropic_mcp.testing import StorageContract\n\nclass TestForgotOpener(StorageContract):\n    pass\n"
    )
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:randomly",
            "-p",
            "no:cacheprovider",
            "-k",
            "create_conversation_returns",
            "test_forgot.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1, result.stdout
    assert "must override the `open_backend` fixture" in result.stdout
