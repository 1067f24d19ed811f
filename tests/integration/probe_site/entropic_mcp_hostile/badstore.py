"""A storage backend whose every operation fails."""

from __future__ import annotations

from typing import Any

from entropic_mcp import hookimpl
from entropic_mcp.storage import StorageBackendSpec
from entropic_mcp.testing import MemoryStorage


class BrokenDisk(MemoryStorage):
    def __getattribute__(self, name: str) -> Any:
        if name in ("close", "__class__", "__dict__") or name.startswith("_"):
            return super().__getattribute__(name)
        value = super().__getattribute__(name)
        if callable(value):

            def fail(*args: Any, **kwargs: Any) -> Any:
                raise OSError(5, "Input/output error: the broken disk failed")

            return fail
        return value


@hookimpl
def entropic_mcp_storage_backends() -> Any:
    return StorageBackendSpec(name="brokendisk", factory=lambda config: BrokenDisk())
