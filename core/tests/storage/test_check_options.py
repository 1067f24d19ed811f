"""check_options: a backend's [storage] options checked against the table of those it takes (the
tinydb and postgres backends use it; a third-party backend may)."""

from __future__ import annotations

import pytest
from entropic_mcp import ConfigError
from entropic_mcp.storage import check_options

TABLE = {
    "dsn": (str, None, "where the server is"),
    "pool_min": (int, 1, "connections kept open"),
    "pool_max": (int, 10, "most connections open"),
    "deadline": (float, 5.0, "seconds an operation may take"),
}


def test_the_options_given_are_returned_and_defaults_stay_the_backends():
    given = {"dsn": "host=x", "pool_min": 0, "pool_max": 3, "deadline": 2}
    assert check_options(given, TABLE, "mystore", zero_allowed=("pool_min",)) == given
    assert check_options({}, TABLE, "mystore") == {}


@pytest.mark.parametrize(
    "options, message",
    [
        ({"path": "x"}, r"options\.path: unknown option for the mystore backend; expected one of: dsn, pool_min"),
        ({"dsn": ""}, r"options\.dsn: expected a non-empty string \(where the server is\), got ''"),
        ({"dsn": 5}, r"options\.dsn: expected a non-empty string"),
        ({"pool_max": 0}, r"options\.pool_max: expected a positive int \(most connections open\), got 0"),
        ({"pool_max": 2.5}, r"options\.pool_max: expected a positive int"),
        ({"pool_max": True}, r"options\.pool_max: expected a positive int"),
        ({"pool_min": -1}, r"options\.pool_min: expected an int >= 0 \(connections kept open\), got -1"),
        ({"deadline": 0}, r"options\.deadline: expected a positive float"),
        ({"deadline": "5"}, r"options\.deadline: expected a positive float"),
    ],
)
def test_a_bad_option_is_a_config_error_naming_the_key_and_what_it_takes(options, message):
    with pytest.raises(ConfigError, match=rf"^\[storage\] {message}"):
        check_options(options, TABLE, "mystore", zero_allowed=("pool_min",))


def test_zero_is_refused_unless_allowed():
    with pytest.raises(ConfigError, match="pool_min: expected a positive int"):
        check_options({"pool_min": 0}, TABLE, "mystore")
