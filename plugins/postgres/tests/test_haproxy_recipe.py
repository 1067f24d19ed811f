"""The haproxy recipe the integration tests and the benchmarks run is docs/deployment.md's."""

from __future__ import annotations

import re
from pathlib import Path

from entropic_mcp_postgres.testing import haproxy_recipe

DEPLOYMENT = Path(__file__).resolve().parents[3] / "docs" / "deployment.md"


def _documented() -> str:
    block = re.search(r"```haproxy\n(.*?)```", DEPLOYMENT.read_text(encoding="utf-8"), re.S)
    assert block, "docs/deployment.md has no haproxy block"
    return "".join(re.sub(r"\s+#.*$", "", line) + "\n" for line in block.group(1).splitlines())


def test_the_recipe_is_the_one_docs_deployment_shows():
    assert haproxy_recipe(8080, [8765, 8766]) == _documented()


def test_affinity_replaces_only_the_balance_lines_and_logging_adds_its_own():
    plain = haproxy_recipe(9000, [1, 2, 3]).splitlines()
    sticky = haproxy_recipe(9000, [1, 2, 3], balance="balance hdr(X-Conversation)\nhash-type consistent")
    assert sticky.splitlines() == [
        *plain[: plain.index("    balance roundrobin")],
        "    balance hdr(X-Conversation)",
        "    hash-type consistent",
        *plain[plain.index("    balance roundrobin") + 1 :],
    ]
    logged = haproxy_recipe(9000, [1], log=True, check_every="1s")
    assert "    log stdout format raw local0\n" in logged and "    log global\n    option httplog\n" in logged
    assert "default-server inter 1s fall 3 rise 1" in logged
    assert logged.endswith("    server w0 127.0.0.1:1 check\n")
