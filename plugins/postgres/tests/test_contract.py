"""The postgres backend passes the same contract suite as the tinydb backend, on a real server
(one migrated schema per module, emptied before each test)."""

from __future__ import annotations

import pytest
from entropic_mcp.testing import StorageContract


class TestPostgresContract(StorageContract):
    @pytest.fixture
    def open_backend(self, open_empty_pg):
        return open_empty_pg


class TestPostgresContractOneConnection(StorageContract):
    """The same contract when every operation (and the audit) must share a single connection."""

    @pytest.fixture
    def open_backend(self, open_empty_pg):
        return lambda: open_empty_pg(pool_min=1, pool_max=1, audit_batch=1)


class TestPostgresContractSearchingOlderDelegations(StorageContract):
    """The same contract when a search's first look covers only the newest two delegations, so
    nearly every search also ranks the older ones (the path large stores take)."""

    @pytest.fixture
    def open_backend(self, open_empty_pg):
        return lambda: open_empty_pg(search_window=2)
