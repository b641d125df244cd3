"""``admin.listeners`` and ``admin.probe.timeout.ms`` (``barnabas.config.admin``), for the broker and the proxy."""

from __future__ import annotations

import pytest

from barnabas.config import ConfigError, load_broker_config, load_proxy_config
from barnabas.config.admin import AdminListener, parse_admin_listeners

PROXY = {"bootstrap.servers": "broker-1:9092"}


def test_off_by_default() -> None:
    assert load_broker_config(environ={}).admin_listener is None
    assert load_proxy_config(None, PROXY).admin_listener is None
    assert load_broker_config(environ={})["admin.probe.timeout.ms"] == 800


@pytest.mark.parametrize(
    ("uri", "listener"),
    [
        ("http://127.0.0.1:9644", AdminListener("127.0.0.1", 9644)),
        ("HTTP://0.0.0.0:0/", AdminListener("0.0.0.0", 0)),
        ("http://:9644", AdminListener("", 9644)),
        ("http://[::1]:9644", AdminListener("::1", 9644)),
    ],
)
def test_one_http_listener(uri: str, listener: AdminListener) -> None:
    assert parse_admin_listeners([uri]) == listener
    assert load_broker_config(overrides={"admin.listeners": uri}, environ={}).admin_listener == listener
    assert load_proxy_config(None, {**PROXY, "admin.listeners": uri}).admin_listener == listener


def test_from_the_environment() -> None:
    config = load_broker_config(environ={"BARNABAS_ADMIN_LISTENERS": "http://127.0.0.1:0"})
    assert config.admin_listener == AdminListener("127.0.0.1", 0)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("https://127.0.0.1:9644", "https:// is not served, only http://"),
        ("http://127.0.0.1:9644,http://127.0.0.1:9645", "at most one admin listener is supported, got 2"),
        ("127.0.0.1:9644", "'127.0.0.1:9644' is not of the form http://host:port"),
        ("http://127.0.0.1:99999", "port 99999 is out of range"),
    ],
)
def test_a_bad_listener_stops_the_broker_and_the_proxy(value: str, message: str) -> None:
    for load in (
        lambda: load_broker_config(overrides={"admin.listeners": value}, environ={}),
        lambda: load_proxy_config(None, {**PROXY, "admin.listeners": value}),
    ):
        with pytest.raises(ConfigError) as refused:
            load()
        assert f"admin.listeners: {message}" in str(refused.value)
        assert "\n" not in str(refused.value)
