"""``/healthz`` and ``/readyz`` on the HTTP transport, for load balancers and orchestrators.

``/healthz``: the process answers HTTP (liveness). ``/readyz``: it should get traffic — every
enabled plugin loaded and the store answering within a deadline (a worker whose store is
unreachable otherwise starts, passes TCP checks and fails every call that needs it). Both are
answered before the bearer-token check: they reveal nothing but the names of failed plugins and
the store's error class, and probes rarely carry credentials.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import anyio
import orjson

if TYPE_CHECKING:
    from .._manager import ServerManager

log = logging.getLogger("entropic_mcp.serve")

HEALTH = "/healthz"
READY = "/readyz"
#: How long the store may take to answer the readiness probe.
STORE_DEADLINE = 2.0


class Probes:
    def __init__(self, manager: ServerManager, *, store_deadline: float = STORE_DEADLINE) -> None:
        self.manager = manager
        self.store_deadline = store_deadline

    def handles(self, path: str) -> bool:
        return path in (HEALTH, READY)

    async def __call__(self, scope: dict[str, Any], send: Any) -> None:
        if scope["path"] == HEALTH:
            await _json(send, 200, {"status": "alive"})
            return
        problems = self._plugin_problems()
        store = await self._store_problem()
        if store is not None:
            problems.append(store)
        if problems:
            await _json(send, 503, {"status": "not ready", "problems": problems})
        else:
            await _json(send, 200, {"status": "ready"})

    def _plugin_problems(self) -> list[str]:
        return [f"plugin {p.name!r} failed to load" for p in self.manager.plugins.listing() if p.status == "failed"]

    async def _store_problem(self) -> str | None:
        if self.manager.config.storage.backend == "none":
            return None

        def probe() -> None:
            storage = self.manager.storage
            if storage is not None and hasattr(storage, "load_state"):
                storage.load_state("entropic-mcp.readyz", "probe")

        try:
            with anyio.fail_after(self.store_deadline):
                await anyio.to_thread.run_sync(probe, abandon_on_cancel=True)
        except TimeoutError:
            return f"the store did not answer within {self.store_deadline:g} s"
        except Exception as exc:
            log.warning("readiness: the store failed: %s", exc)
            return f"the store failed ({type(exc).__name__})"
        return None


async def _json(send: Any, status: int, body: dict[str, Any]) -> None:
    data = orjson.dumps(body)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
                (b"cache-control", b"no-store"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})
