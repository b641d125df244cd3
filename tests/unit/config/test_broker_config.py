from pathlib import Path

import pytest

from barnabas.config import ConfigError, ConfigSource, cleaner_config_for, load_broker_config
from barnabas.config.broker import hostname_ordinal
from barnabas.config.definitions import parse_properties
from barnabas.log import CleanerConfig


def test_properties_syntax() -> None:
    text = "# comment\n! also\nbroker.id=3\nlisteners : PLAINTEXT://127.0.0.1:9093\nlog.dirs /a,\\\n  /b\n"
    assert parse_properties(text) == {
        "broker.id": "3",
        "listeners": "PLAINTEXT://127.0.0.1:9093",
        "log.dirs": "/a,/b",
    }


def test_precedence_file_env_flags(tmp_path: Path) -> None:
    config_file = tmp_path / "server.properties"
    config_file.write_text("num.partitions=2\nlog.retention.ms=1000\nmessage.max.bytes=5000\n")
    config = load_broker_config(
        config_file,
        overrides={"message.max.bytes": "7000"},
        environ={
            "BARNABAS_LOG_RETENTION_MS": "2000",
            "BARNABAS_MESSAGE_MAX_BYTES": "6000",
            "BARNABAS_BOOTSTRAP": "127.0.0.1:1",  # the CLI's, not a setting
            "BARNABAS_TEST_ANYTHING": "x",
        },
    )
    assert config["num.partitions"] == 2
    assert config.retention_ms == 2000
    assert config["message.max.bytes"] == 7000
    assert config.source("num.partitions") is ConfigSource.STATIC_BROKER_CONFIG
    assert config.source("log.segment.bytes") is ConfigSource.DEFAULT_CONFIG


def test_kafka_defaults_and_synonyms() -> None:
    config = load_broker_config(environ={})
    assert config.retention_ms == 168 * 3_600_000
    assert config.roll_ms == 168 * 3_600_000
    assert config["message.max.bytes"] == 1048588
    assert config["auto.create.topics.enable"] is True
    assert config.log_dirs == [Path("barnabas-data")]
    assert config.coordination_url.startswith("sqlite:///") and config.coordination_url.endswith("coordination.db")
    minutes = load_broker_config(overrides={"log.retention.minutes": "3"}, environ={})
    assert minutes.retention_ms == 180_000


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"no.such.setting": "1"}, "unknown setting 'no.such.setting'"),
        ({"num.partitions": "many"}, "num.partitions: 'many' is not a valid int"),
        ({"num.partitions": "0"}, "num.partitions: value 0 must be at least 1"),
        ({"auto.create.topics.enable": "yes"}, "auto.create.topics.enable"),
        ({"log.message.timestamp.type": "Now"}, "log.message.timestamp.type"),
        ({"listeners": "127.0.0.1:9092"}, "not of the form NAME://host:port"),
        ({"message.max.bytes": "200000000"}, "must not exceed socket.request.max.bytes"),
        ({"replica.socket.timeout.ms": "400"}, "replica.socket.timeout.ms must be at least replica.fetch.wait.max.ms"),
        ({"replica.lag.time.max.ms": "400"}, "replica.fetch.wait.max.ms must not exceed replica.lag.time.max.ms"),
    ],
)
def test_invalid_settings_fail_with_one_line(overrides: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_broker_config(overrides=overrides, environ={})
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_kafka_settings_without_meaning_are_ignored_not_fatal(tmp_path: Path) -> None:
    config_file = tmp_path / "server.properties"
    config_file.write_text("num.network.threads=3\nzookeeper.connect=localhost:2181\nbroker.id=0\n")
    config = load_broker_config(config_file, environ={})
    assert set(config.ignored) == {"num.network.threads", "zookeeper.connect"}


def test_the_log_cleaner_settings_are_kafkas(tmp_path: Path) -> None:
    defaults = cleaner_config_for(load_broker_config(environ={}))
    assert defaults == CleanerConfig(
        enable=True, dedupe_buffer_size=134217728, dedupe_buffer_load_factor=0.9, io_buffer_size=524288
    )
    assert defaults.backoff_ms == 15_000
    config_file = tmp_path / "server.properties"
    config_file.write_text("log.cleaner.enable=false\nlog.cleaner.backoff.ms=100\nlog.cleaner.threads=2\n")
    config = load_broker_config(config_file, environ={})
    assert (cleaner_config_for(config).enable, cleaner_config_for(config).backoff_ms) == (False, 100)
    assert set(config.ignored) == {"log.cleaner.threads"}


def test_unreadable_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_broker_config(tmp_path / "missing.properties", environ={})


def test_hostname_ordinal(monkeypatch: pytest.MonkeyPatch) -> None:
    assert hostname_ordinal("barnabas-2.barnabas.default.svc") == 2
    assert hostname_ordinal("laptop") is None
    monkeypatch.setenv("HOSTNAME", "barnabas-7")
    assert hostname_ordinal() == 7, "a pod's HOSTNAME names it"


def test_a_misspelt_setting_in_the_environment_stops_the_broker() -> None:
    with pytest.raises(ConfigError, match=r"BARNABAS_LOG_RETENSION_MS \(did you mean BARNABAS_LOG_RETENTION_MS\?\)"):
        load_broker_config(environ={"BARNABAS_LOG_RETENSION_MS": "5"})
    with pytest.raises(ConfigError, match=r"unknown setting in the environment: BARNABAS_WHATEVER$"):
        load_broker_config(environ={"BARNABAS_WHATEVER": "5"})


def test_an_ignored_kafka_setting_in_the_environment_is_ignored() -> None:
    assert "num.network.threads" in load_broker_config(environ={"BARNABAS_NUM_NETWORK_THREADS": "8"}).ignored
