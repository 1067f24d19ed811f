"""/healthz and /readyz answer a load balancer: alive, and ready only when plugins and store are."""

import anyio
import orjson
import pytest
from entropic_mcp._serve._probes import Probes
from entropic_mcp.testing import make_manager


def answer(probes: Probes, path: str) -> tuple[int, dict]:
    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    anyio.run(probes, {"type": "http", "path": path}, send)
    return sent[0]["status"], orjson.loads(sent[1]["body"])


def test_a_healthy_worker_is_alive_and_ready(tmp_path):
    probes = Probes(make_manager(tmp_path))
    assert answer(probes, "/healthz") == (200, {"status": "alive"})
    assert answer(probes, "/readyz") == (200, {"status": "ready"})


def test_a_failed_plugin_makes_the_worker_not_ready(tmp_path):
    from entropic_mcp import PluginLoadWarning

    manager = make_manager(tmp_path)
    manager.plugins.strict = False
    with pytest.warns(PluginLoadWarning):
        manager.plugins.fail("weather", "import failed: boom")
    status, body = answer(Probes(manager), "/readyz")
    assert status == 503 and body == {"status": "not ready", "problems": ["plugin 'weather' failed to load"]}
    assert answer(Probes(manager), "/healthz")[0] == 200


def test_a_store_that_does_not_answer_in_time_makes_the_worker_not_ready(tmp_path):
    import threading

    manager = make_manager(tmp_path, config={"storage": {"backend": "tinydb", "path": str(tmp_path / "s")}})
    release = threading.Event()

    class Stuck:
        def load_state(self, namespace, key):
            release.wait(10)

    manager._storage, manager._storage_opened = Stuck(), True
    try:
        status, body = answer(Probes(manager, store_deadline=0.2), "/readyz")
    finally:
        release.set()
    assert status == 503 and body["problems"] == ["the store did not answer within 0.2 s"]
