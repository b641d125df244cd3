"""Proxy settings (``barnabas.config.proxy``): defaults, then the file, then the flags; bad ones stop it."""

from __future__ import annotations

from pathlib import Path

import pytest

from barnabas.config import ConfigError
from barnabas.config.proxy import PROXY_CONFIGS, load_proxy_config

BOOTSTRAP = {"bootstrap.servers": "broker-1:9092"}


def refusal(file: Path | None = None, **overrides: str) -> str:
    """The one-line reason ``load_proxy_config`` refuses these settings for."""
    with pytest.raises(ConfigError) as refused:
        load_proxy_config(file, overrides)
    message = str(refused.value)
    assert "\n" not in message
    return message


def test_defaults_with_only_a_bootstrap_server() -> None:
    config = load_proxy_config(None, BOOTSTRAP)
    assert config.bootstrap == [("broker-1", 9092)]
    assert (config.listener.host, config.listener.port) == ("127.0.0.1", 9192)
    assert config.advertised is None
    assert config["proxy.peers"] == []
    assert config["broker.rack"] is None
    assert {key: config[key] for key in PROXY_CONFIGS} == {key: d.default for key, d in PROXY_CONFIGS.items()} | {
        "bootstrap.servers": ["broker-1:9092"]
    }


def test_flags_override_the_file(tmp_path: Path) -> None:
    file = tmp_path / "proxy.properties"
    file.write_text(
        "bootstrap.servers=broker-1:9092,[::1]:9093\n"
        "listeners=PLAINTEXT://0.0.0.0:9192\n"
        "broker.rack=r1\n"
        "request.timeout.ms=5000\n"
    )
    config = load_proxy_config(file, {"request.timeout.ms": "7000", "advertised.listeners": "PLAINTEXT://proxy-a:9192"})
    assert config["request.timeout.ms"] == 7000  # the flag
    assert config["broker.rack"] == "r1"  # the file
    assert config.bootstrap == [("broker-1", 9092), ("::1", 9093)]
    assert (config.listener.host, config.listener.port) == ("0.0.0.0", 9192)
    assert config.advertised is not None
    assert (config.advertised.host, config.advertised.port) == ("proxy-a", 9192)
    assert config["metadata.max.age.ms"] == PROXY_CONFIGS["metadata.max.age.ms"].default


def test_an_unknown_key_is_refused_naming_it_and_where_it_came_from(tmp_path: Path) -> None:
    file = tmp_path / "proxy.properties"
    file.write_text("bootstrap.servers=broker-1:9092\nlog.dirs=/tmp/x\n")
    message = refusal(file)
    assert "'log.dirs'" in message
    assert str(file) in message
    message = refusal(None, **BOOTSTRAP, **{"proxy.peer": "a:1"})
    assert "'proxy.peer'" in message
    assert "command line" in message


def test_an_invalid_value_is_refused_naming_the_key_and_origin() -> None:
    message = refusal(None, **BOOTSTRAP, **{"metadata.max.age.ms": "10"})
    assert "metadata.max.age.ms" in message
    assert "command line" in message
    message = refusal(None, **BOOTSTRAP, **{"request.timeout.ms": "soon"})
    assert "request.timeout.ms" in message
    assert "'soon'" in message


def test_no_bootstrap_server_is_refused() -> None:
    assert "bootstrap.servers" in refusal()
    assert "bootstrap.servers" in refusal(None, **{"bootstrap.servers": ""})


@pytest.mark.parametrize("servers", ["broker-1", "broker-1:", ":9092", "broker-1:0", "broker-1:99999"])
def test_a_bad_bootstrap_server_is_refused(servers: str) -> None:
    assert "bootstrap.servers" in refusal(None, **{"bootstrap.servers": servers})


@pytest.mark.parametrize(
    "listeners",
    ["127.0.0.1:9192", "PLAINTEXT://127.0.0.1", "PLAINTEXT://127.0.0.1:70000", "PLAINTEXT://a:1,PLAINTEXT://b:2"],
)
def test_a_bad_listener_is_refused(listeners: str) -> None:
    assert "listeners" in refusal(None, **BOOTSTRAP, listeners=listeners)


def test_advertised_port_0_is_refused() -> None:
    message = refusal(None, **BOOTSTRAP, **{"advertised.listeners": "PLAINTEXT://proxy-a:0"})
    assert "advertised.listeners" in message
    assert "port 0" in message


def test_listening_on_port_0_is_allowed() -> None:
    config = load_proxy_config(None, {**BOOTSTRAP, "listeners": "PLAINTEXT://127.0.0.1:0"})
    assert config.listener.port == 0


def test_an_unreadable_file_is_refused(tmp_path: Path) -> None:
    assert str(tmp_path / "missing.properties") in refusal(tmp_path / "missing.properties", **BOOTSTRAP)


def test_peers_and_coordination_are_one_or_the_other() -> None:
    reason = refusal(**{"bootstrap.servers": "b:9092", "proxy.peers": "a:1,b:2", "coordination.url": "sqlite:///x.db"})
    assert "proxy.peers and coordination.url" in reason and "\n" not in reason


def test_coordination_settings_are_read() -> None:
    config = load_proxy_config(
        overrides={"bootstrap.servers": "b:9092", "coordination.url": "etcd://e:2379/p", "proxy.node.id": "4"}
    )
    assert (config["coordination.url"], config["proxy.node.id"], config["proxy.session.timeout.ms"]) == (
        "etcd://e:2379/p",
        4,
        6000,
    )
