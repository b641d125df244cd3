"""Kafka's ConnectionQuotas: per listener, per broker (the inter-broker listener exempt), per address."""

from __future__ import annotations

import pytest

from barnabas.broker.connection_limits import ConnectionLimits, client_address, limits_from_config
from barnabas.config import ConfigError, load_broker_config


def test_each_limit_refuses_and_a_release_makes_room() -> None:
    limits = ConnectionLimits(
        max_connections=3, per_ip=2, per_ip_overrides={"10.0.0.9": 3}, per_listener={"EXTERNAL": 1},
        inter_broker_listener="INTERNAL",
    )  # fmt: skip
    assert limits.admit("INTERNAL", "10.0.0.1") is None
    assert limits.admit("INTERNAL", "10.0.0.1") is None
    assert "maximum of 2 connections" in (limits.admit("INTERNAL", "10.0.0.1") or "")
    assert limits.admit("EXTERNAL", "10.0.0.2") is None
    assert "listener EXTERNAL" in (limits.admit("EXTERNAL", "10.0.0.3") or "")
    assert "the broker already has" in (limits.admit("CLIENTS", "10.0.0.9") or "")
    assert limits.admit("INTERNAL", "10.0.0.9") is None  # the inter-broker listener is exempt from max.connections
    assert limits.refused == {("INTERNAL", "max.connections.per.ip"): 1, ("EXTERNAL", "max.connections"): 1,
                              ("CLIENTS", "max.connections"): 1}  # fmt: skip
    limits.release("INTERNAL", "10.0.0.1")
    assert limits.admit("INTERNAL", "10.0.0.1") is None
    assert (limits.total, limits.by_ip["10.0.0.1"], limits.by_listener) == (4, 2, {"INTERNAL": 3, "EXTERNAL": 1})


def test_an_ipv4_client_of_a_dual_stack_socket_counts_as_its_ipv4_address() -> None:
    assert client_address("::ffff:127.0.0.1") == "127.0.0.1"
    assert client_address("::1") == "::1"


def test_the_limits_come_from_kafkas_settings(tmp_path: object) -> None:
    config = load_broker_config(overrides={
        "listeners": "PLAINTEXT://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT",
        "max.connections": "100", "listener.name.external.max.connections": "7",
        "max.connections.per.ip": "0", "max.connections.per.ip.overrides": "127.0.0.1:5,localhost:6",
    }, environ={})  # fmt: skip
    limits = limits_from_config(config)
    assert limits.per_listener == {"PLAINTEXT": 100, "EXTERNAL": 7}
    assert limits.inter_broker_listener == "PLAINTEXT"
    assert limits.per_ip == 0 and limits.per_ip_overrides["127.0.0.1"] in (5, 6)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"max.connections.per.ip": "0"}, "can be set to zero only if"),
        ({"max.connections.per.ip.overrides": "127.0.0.1"}, "is not host:count"),
        ({"max.connections.per.ip.overrides": "bad_host!:3"}, "is not a valid host"),
        ({"max.connections": "-1"}, "must be at least 0"),
        ({"queued.max.requests": "0"}, "must be at least 1"),
        ({"listener.name.plaintext.max.connections": "-2"}, "must be at least 0"),
    ],
)
def test_bad_limit_settings_stop_the_broker(settings: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_broker_config(overrides=settings, environ={})
