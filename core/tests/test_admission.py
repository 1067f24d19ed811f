"""HTTP admission before authentication: connections still waiting for a request head are capped
per client and in all, oldest first; a connection whose head arrived is never counted."""

from __future__ import annotations

import pytest
from entropic_mcp import ConfigError, config_from_dict
from entropic_mcp._config import ServeConfig
from entropic_mcp._serve._admission import Admission


class Connection:
    def __init__(self, admission: Admission, client: str) -> None:
        self.admission = admission
        self.client = client
        self.dropped = False
        admission.admit(self, client)

    def drop(self) -> None:
        self.dropped = True


def test_a_client_over_its_cap_loses_its_oldest_waiting_connection():
    admission = Admission(ServeConfig(max_pending_per_client=3, max_pending_connections=100))
    flood = [Connection(admission, "10.0.0.9") for _ in range(10)]
    other = Connection(admission, "10.0.0.1")
    assert [c.dropped for c in flood] == [True] * 7 + [False] * 3
    assert not other.dropped and len(admission) == 4


def test_the_server_over_its_cap_loses_the_oldest_waiting_connection_of_anyone():
    admission = Admission(ServeConfig(max_pending_per_client=10, max_pending_connections=4))
    connections = [Connection(admission, f"10.0.0.{i}") for i in range(6)]
    assert [c.dropped for c in connections] == [True, True, False, False, False, False]


def test_a_connection_whose_head_arrived_is_not_counted():
    admission = Admission(ServeConfig(max_pending_per_client=2, max_pending_connections=100))
    served = Connection(admission, "127.0.0.1")
    admission.release(served)  # its request head is complete
    later = [Connection(admission, "127.0.0.1") for _ in range(5)]
    assert not served.dropped and sum(c.dropped for c in later) == 3


@pytest.mark.parametrize(
    ("key", "value"),
    [("header_timeout_seconds", 0), ("body_timeout_seconds", -1), ("max_pending_per_client", 0)],
)
def test_serve_admission_settings_are_checked(tmp_path, key, value):
    with pytest.raises(ConfigError, match=f"serve.{key}"):
        config_from_dict({"serve": {key: value}}, root=tmp_path)
    assert config_from_dict({}, root=tmp_path).serve.header_timeout_seconds == 10.0
