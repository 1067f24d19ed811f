"""HTTP admission before authentication: connections still waiting for a request head are capped
per client (past a short grace for bursts) and in all (the most crowded address first); a
connection whose head arrived is never counted."""

from __future__ import annotations

import pytest
from entropic_mcp import ConfigError, config_from_dict
from entropic_mcp._config import ServeConfig
from entropic_mcp._serve._admission import PENDING_GRACE_SECONDS, Admission


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Connection:
    def __init__(self, admission: Admission, client: str) -> None:
        self.admission = admission
        self.client = client
        self.dropped = False
        admission.admit(self, client)

    def drop(self) -> None:
        self.dropped = True


def test_a_client_over_its_cap_loses_its_oldest_waiting_connection_once_it_has_waited():
    clock = Clock()
    admission = Admission(ServeConfig(max_pending_per_client=3, max_pending_connections=100), clock)
    flood = []
    for _ in range(10):
        flood.append(Connection(admission, "10.0.0.9"))
        clock.now += PENDING_GRACE_SECONDS  # a slowloris: each socket held a while
    other = Connection(admission, "10.0.0.1")
    assert [c.dropped for c in flood] == [True] * 7 + [False] * 3
    assert not other.dropped and len(admission) == 4


def test_a_burst_of_one_client_within_the_grace_loses_nothing():
    # Fifty clients of one process, or all clients behind one load balancer, connecting at once.
    clock = Clock()
    admission = Admission(ServeConfig(max_pending_per_client=16, max_pending_connections=256), clock)
    burst = []
    for _ in range(50):
        burst.append(Connection(admission, "127.0.0.1"))
        clock.now += 0.005
    assert not any(c.dropped for c in burst) and len(admission) == 50
    clock.now += PENDING_GRACE_SECONDS
    late = Connection(admission, "127.0.0.1")  # the burst's oldest has now waited past the grace
    assert burst[0].dropped and not late.dropped and not any(c.dropped for c in burst[1:])


def test_the_server_over_its_cap_loses_the_oldest_waiting_connection_of_the_most_crowded_client():
    admission = Admission(ServeConfig(max_pending_per_client=10, max_pending_connections=4), Clock())
    lone = Connection(admission, "10.0.0.1")
    crowd = [Connection(admission, "10.0.0.9") for _ in range(5)]
    assert not lone.dropped
    assert [c.dropped for c in crowd] == [True, True, False, False, False]


def test_the_server_over_its_cap_among_equals_loses_the_oldest():
    admission = Admission(ServeConfig(max_pending_per_client=10, max_pending_connections=4), Clock())
    connections = [Connection(admission, f"10.0.0.{i}") for i in range(6)]
    assert [c.dropped for c in connections] == [True, True, False, False, False, False]


def test_a_connection_whose_head_arrived_is_not_counted():
    clock = Clock()
    admission = Admission(ServeConfig(max_pending_per_client=2, max_pending_connections=100), clock)
    served = Connection(admission, "127.0.0.1")
    admission.release(served)  # its request head is complete
    later = []
    for _ in range(5):
        later.append(Connection(admission, "127.0.0.1"))
        clock.now += PENDING_GRACE_SECONDS
    assert not served.dropped and sum(c.dropped for c in later) == 3


@pytest.mark.parametrize(
    ("key", "value"),
    [("header_timeout_seconds", 0), ("body_timeout_seconds", -1), ("max_pending_per_client", 0)],
)
def test_serve_admission_settings_are_checked(tmp_path, key, value):
    with pytest.raises(ConfigError, match=f"serve.{key}"):
        config_from_dict({"serve": {key: value}}, root=tmp_path)
    assert config_from_dict({}, root=tmp_path).serve.header_timeout_seconds == 10.0
