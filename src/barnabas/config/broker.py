"""Broker configuration: Kafka's property names, loaded from a file, the environment and flags.

Rules this module keeps:

- Precedence, lowest first: defaults, ``server.properties``, ``BARNABAS_*`` environment
  variables, command-line flags.
- An environment variable maps to a key by upper-casing it and turning dots into underscores
  (``BARNABAS_LOG_RETENTION_MS`` → ``log.retention.ms``). Every ``BARNABAS_*`` variable is a
  setting, so a misspelt one stops the broker as an unknown key would, except the few the tools
  read (``BARNABAS_BOOTSTRAP``, ``BARNABAS_DEBUG``, ``BARNABAS_KAFKA_LIB``, ``BARNABAS_TEST_*``).
- A key that is neither defined nor a known Kafka setting that does not apply here is an
  error. Kafka settings that have no meaning in barnabas (thread pools, ZooKeeper timeouts,
  KRaft quorum settings) are accepted so that Kafka's own server.properties loads; each one is
  reported once as ignored.
- Values keep Kafka's defaults unless a comment says why not.
"""

from __future__ import annotations

import difflib
import os
import re
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from barnabas.log import COMPRESSION_TYPES, GZIP_LEVELS, LZ4_LEVELS, ZSTD_LEVELS

from .admin import ADMIN_CONFIG_LIST, AdminListener, parse_admin_listeners
from .authorizer import AUTHORIZER_CONFIG_LIST
from .definitions import (
    INT32_MAX,
    INT64_MAX,
    ConfigDef,
    ConfigError,
    ConfigSource,
    ConfigType,
    at_least,
    between,
    between_or,
    one_of,
    read_properties_file,
)
from .limits import LIMIT_CONFIG_LIST, parse_ip_overrides
from .listeners import (
    DEFAULT_PROTOCOL_MAP,
    LISTENER_CONFIGS,
    SASL_CONFIG_LIST,
    SSL_CONFIG_LIST,
    Listener,
    ListenerSetup,
    listener_override,
    listener_value,
    override_key,
    parse_listener,
    resolve_listeners,
    ssl_settings,
)
from .oauthbearer import OAUTHBEARER_CONFIG_LIST

__all__ = ["BROKER_CONFIGS", "BrokerConfig", "Listener", "load_broker_config", "parse_listener"]

ENV_PREFIX = "BARNABAS_"
#: ``BARNABAS_*`` variables that are not broker settings: read by the CLI, the benchmark and tests.
TOOL_ENV_VARS = frozenset({"BARNABAS_BOOTSTRAP", "BARNABAS_DEBUG", "BARNABAS_KAFKA_LIB"})
TEST_ENV_PREFIX = "BARNABAS_TEST_"
DEFAULT_DATA_DIR = "barnabas-data"

_B = ConfigType.BOOLEAN
_S = ConfigType.STRING
_I = ConfigType.INT
_L = ConfigType.LONG
_D = ConfigType.DOUBLE
_LIST = ConfigType.LIST


def _user_principals(value: list[str]) -> str | None:
    """Each entry is ``User:<name>``: a SASL login's principal type, the only one a proxy logs in as."""
    bad = [entry for entry in value if not entry.startswith("User:") or entry == "User:"]
    return f"{bad[0]!r} is not User:<name>" if bad else None


BROKER_CONFIG_LIST: tuple[ConfigDef, ...] = (
    ConfigDef("broker.id", _I, -1, "This broker's id; -1 derives it from a hostname ordinal or meta.properties.",
              at_least(-1)),
    ConfigDef("node.id", _I, -1, "KRaft's name for broker.id; accepted as an alias.", at_least(-1)),
    ConfigDef("broker.rack", _S, None, "Rack of this broker, used for rack-aware replica placement."),
    # Kafka binds every interface by default; barnabas defaults to loopback so a first run
    # exposes nothing.
    ConfigDef("listeners", _LIST, ["PLAINTEXT://127.0.0.1:9092"], "Listener URIs to bind."),
    ConfigDef("advertised.listeners", _LIST, None, "Listener URIs given to clients; defaults to listeners."),
    ConfigDef("listener.security.protocol.map", _S, DEFAULT_PROTOCOL_MAP, "Listener name to security protocol."),
    ConfigDef("inter.broker.listener.name", _S, None,
              "The listener other brokers connect on; default the one named PLAINTEXT, else the only one."),
    ConfigDef("security.inter.broker.protocol", _S, None,
              "Names the inter-broker listener by its protocol instead (not with inter.broker.listener.name)."),
    ConfigDef("log.dirs", _LIST, None, "Log directories; defaults to log.dir."),
    ConfigDef("log.dir", _S, DEFAULT_DATA_DIR, "Log directory used when log.dirs is unset."),
    ConfigDef("coordination.url", _S, None,
              "Coordination backend URL; defaults to sqlite:///<first log dir>/coordination.db."),
    ConfigDef("num.partitions", _I, 1, "Default partition count for auto-created topics.", at_least(1)),
    ConfigDef("default.replication.factor", _I, 1, "Default replication factor for auto-created topics.",
              at_least(1)),
    ConfigDef("auto.create.topics.enable", _B, True, "Create topics named by Metadata or Produce requests."),
    ConfigDef("delete.topic.enable", _B, True, "Allow DeleteTopics."),
    ConfigDef("message.max.bytes", _I, 1048588, "Largest record batch a topic accepts by default.",
              at_least(0)),
    ConfigDef("socket.request.max.bytes", _I, 104857600, "Largest request frame; larger ones close the connection.",
              at_least(1)),
    ConfigDef("socket.listen.backlog.size", _I, 1024,
              "Connections the kernel queues for each listener until the broker accepts them (Kafka's default is 50: "
              "its acceptor is a thread of its own, barnabas accepts on its event loop, which a connection storm "
              "finds busy; a full queue drops SYNs and clients wait seconds to retry).", at_least(1)),
    ConfigDef("log.segment.bytes", _I, 1073741824, "Segment file size before a roll.", at_least(1 << 20)),
    ConfigDef("log.roll.ms", _L, None, "Time before a segment rolls; overrides log.roll.hours.", at_least(1)),
    ConfigDef("log.roll.hours", _I, 168, "Time before a segment rolls, in hours.", at_least(1)),
    ConfigDef("log.retention.ms", _L, None, "Retention time; -1 keeps forever. Overrides minutes/hours.",
              at_least(-1)),
    ConfigDef("log.retention.minutes", _I, None, "Retention time in minutes.", at_least(-1)),
    ConfigDef("log.retention.hours", _I, 168, "Retention time in hours.", at_least(-1)),
    ConfigDef("log.retention.bytes", _L, -1, "Retention size per partition; -1 is unlimited.", at_least(-1)),
    ConfigDef("log.retention.check.interval.ms", _L, 300000, "How often retention runs.", at_least(1)),
    ConfigDef("log.initial.task.delay.ms", _L, 30000,
              "How long after start retention and the time-based flusher first run (for tests).", at_least(0),
              internal=True),
    ConfigDef("log.index.interval.bytes", _I, 4096, "Bytes between offset index entries.", at_least(0)),
    ConfigDef("log.index.size.max.bytes", _I, 10485760, "Largest offset index; a full index rolls the segment.",
              at_least(4)),
    ConfigDef("log.flush.interval.messages", _L, INT64_MAX, "Messages between fsyncs of a partition.",
              at_least(1)),
    ConfigDef("log.flush.interval.ms", _L, None, "Milliseconds between fsyncs; unset uses the scheduler interval.",
              at_least(0)),
    ConfigDef("log.flush.scheduler.interval.ms", _L, INT64_MAX, "How often the time-based flush is checked."),
    ConfigDef("log.segment.delete.delay.ms", _L, 60000, "Delay before a deleted segment's files go.", at_least(0)),
    ConfigDef("log.message.timestamp.type", _S, "CreateTime", "CreateTime or LogAppendTime.",
              one_of("CreateTime", "LogAppendTime")),
    ConfigDef("log.cleanup.policy", _LIST, ["delete"], "delete, compact or both.", one_of("delete", "compact")),
    ConfigDef("log.cleaner.delete.retention.ms", _L, 86400000, "How long tombstones are kept.", at_least(0)),
    ConfigDef("log.cleaner.min.compaction.lag.ms", _L, 0, "Minimum age before compaction.", at_least(0)),
    ConfigDef("log.cleaner.max.compaction.lag.ms", _L, INT64_MAX, "Maximum age before compaction.", at_least(1)),
    ConfigDef("log.cleaner.min.cleanable.ratio", _D, 0.5, "Dirty ratio that triggers compaction.", between(0, 1)),
    ConfigDef("log.cleaner.enable", _B, True, "Compact logs whose cleanup.policy includes compact."),
    ConfigDef("log.cleaner.dedupe.buffer.size", _L, 134217728, "Memory for one cleaning pass's key map.",
              at_least(1)),
    ConfigDef("log.cleaner.io.buffer.load.factor", _D, 0.9, "How full the cleaner's key map may get.",
              between(0, 1)),
    ConfigDef("log.cleaner.io.buffer.size", _I, 524288, "Bytes the cleaner reads from a segment at once.",
              at_least(1)),
    ConfigDef("log.cleaner.backoff.ms", _L, 15000, "Wait after finding no log to clean.", at_least(0)),
    ConfigDef("log.message.timestamp.before.max.ms", _L, INT64_MAX,
              "Largest allowed age of a record timestamp.", at_least(0)),
    ConfigDef("log.message.timestamp.after.max.ms", _L, 3600000,
              "Largest allowed lead of a record timestamp over broker time.", at_least(0)),
    ConfigDef("min.insync.replicas", _I, 1, "Replicas that must acknowledge acks=all.", at_least(1)),
    ConfigDef("unclean.leader.election.enable", _B, False, "Allow an out-of-sync replica to become leader."),
    ConfigDef("compression.type", _S, "producer", "Codec batches are stored in; producer keeps the producer's.",
              one_of(*COMPRESSION_TYPES)),
    ConfigDef("compression.gzip.level", _I, -1, "gzip level when compression.type is gzip.",
              between_or(*GZIP_LEVELS, -1)),
    ConfigDef("compression.lz4.level", _I, 9, "lz4 level when compression.type is lz4.", between(*LZ4_LEVELS)),
    ConfigDef("compression.zstd.level", _I, 3, "zstd level when compression.type is zstd.", between(*ZSTD_LEVELS)),
    ConfigDef("replica.lag.time.max.ms", _L, 30000, "Lag after which a follower leaves the ISR.", at_least(0)),
    ConfigDef("replica.fetch.max.bytes", _I, 1048576, "Bytes a follower fetches per partition.", at_least(0)),
    ConfigDef("replica.fetch.response.max.bytes", _I, 10485760, "Bytes a follower fetch response holds.",
              at_least(0)),
    ConfigDef("replica.fetch.wait.max.ms", _I, 500, "Longest a follower fetch waits for data.", at_least(0)),
    ConfigDef("replica.fetch.backoff.ms", _I, 1000, "Pause after a follower fetch fails.", at_least(0)),
    ConfigDef("replica.socket.timeout.ms", _I, 30000, "Timeout of a follower's requests.", at_least(1)),
    ConfigDef("replica.high.watermark.checkpoint.interval.ms", _L, 5000,
              "How often high watermarks are checkpointed.", at_least(1)),
    ConfigDef("broker.session.timeout.ms", _I, 9000,
              "Coordination session TTL: a broker silent this long is declared dead.", at_least(1000)),
    ConfigDef("controlled.shutdown.max.wait.ms", _L, 30000,
              "Longest a stopping broker waits for its leadership to move.", at_least(0)),
    ConfigDef("producer.id.expiration.ms", _I, 86400000, "Idle time after which producer state is dropped.",
              at_least(1)),
    ConfigDef("producer.id.expiration.check.interval.ms", _I, 600000, "How often producer ids expire.",
              at_least(1)),
    ConfigDef("offsets.topic.num.partitions", _I, 50, "Partitions of __consumer_offsets.", at_least(1)),
    ConfigDef("offsets.topic.replication.factor", _I, 3, "Replication of __consumer_offsets.", at_least(1)),
    ConfigDef("offsets.topic.segment.bytes", _I, 104857600, "Segment size of __consumer_offsets.", at_least(1)),
    ConfigDef("offsets.commit.timeout.ms", _I, 5000,
              "Longest an offset commit waits for the offsets topic's replicas.", at_least(1)),
    ConfigDef("offset.metadata.max.bytes", _I, 4096, "Largest metadata string of a committed offset.", at_least(0)),
    ConfigDef("offsets.retention.minutes", _I, 10080, "Committed offsets expire after this long (KIP-211).",
              at_least(1)),
    ConfigDef("offsets.retention.check.interval.ms", _L, 600000, "How often expired offsets are removed.",
              at_least(1)),
    ConfigDef("group.min.session.timeout.ms", _I, 6000, "Shortest session timeout a member may ask for.",
              at_least(0)),
    ConfigDef("group.max.session.timeout.ms", _I, 1800000, "Longest session timeout a member may ask for.",
              at_least(0)),
    ConfigDef("group.max.size", _I, 2147483647, "Most members a consumer group may have.", at_least(1)),
    ConfigDef("controlled.shutdown.enable", _B, True, "Move leadership away before shutting down."),
    ConfigDef("auto.leader.rebalance.enable", _B, True, "Move leadership back to preferred replicas."),
    ConfigDef("leader.imbalance.check.interval.seconds", _L, 300, "How often leader imbalance is checked.",
              at_least(1)),
    ConfigDef("leader.imbalance.per.broker.percentage", _I, 10,
              "Share of a broker's preferred partitions led elsewhere that triggers a rebalance.", between(0, 100)),
    ConfigDef("group.initial.rebalance.delay.ms", _I, 3000, "Delay of a new group's first rebalance.",
              at_least(0)),
    ConfigDef("connections.max.idle.ms", _L, 600000,
              "A connection with no request in progress and no bytes in or out for this long is closed; negative: "
              "never."),
    ConfigDef("fetch.max.bytes", _I, 57671680, "Largest Fetch response the broker builds.", at_least(1024)),
    ConfigDef("max.incremental.fetch.session.cache.slots", _I, 1000,
              "Incremental fetch sessions (KIP-227) the broker keeps at most.", at_least(0)),
    ConfigDef("min.incremental.fetch.session.eviction.ms", _I, 120000,
              "How long a fetch session must be unused, or have existed, before a new one may evict it.",
              at_least(0)),
    ConfigDef("broker.id.generation.enable", _B, True, "Accepted for compatibility; ids come from config or host."),
    *ADMIN_CONFIG_LIST,
    *SSL_CONFIG_LIST,
    *SASL_CONFIG_LIST,
    # Not Kafka's (Kafka refuses every authzid that is not the user): barnabas's proxy names its clients so.
    ConfigDef("sasl.proxy.principals", _LIST, [],
              "SASL users (User:<name>, comma-separated) trusted to act for another principal by naming it as the "
              "authorization id (barnabas proxy nodes); the connection's principal is then User:<authzid>.",
              _user_principals),
    *OAUTHBEARER_CONFIG_LIST,
    *LIMIT_CONFIG_LIST,
    *AUTHORIZER_CONFIG_LIST,
)  # fmt: skip

BROKER_CONFIGS: dict[str, ConfigDef] = {definition.name: definition for definition in BROKER_CONFIG_LIST}

#: Kafka settings that load without error but have no effect in barnabas, with the reason.
IGNORED_KAFKA_SETTINGS: dict[str, str] = {
    **dict.fromkeys(
        ("num.network.threads", "num.io.threads", "num.recovery.threads.per.data.dir", "num.replica.fetchers",
         "background.threads", "num.replica.alter.log.dirs.threads"),
        "barnabas serves every connection from one event loop",
    ),
    **dict.fromkeys(
        ("socket.send.buffer.bytes", "socket.receive.buffer.bytes"),
        "the operating system's socket defaults are used",
    ),
    **dict.fromkeys(
        ("zookeeper.connect", "zookeeper.connection.timeout.ms", "zookeeper.session.timeout.ms"),
        "coordination is configured with coordination.url",
    ),
    **dict.fromkeys(
        ("process.roles", "controller.quorum.voters", "controller.quorum.bootstrap.servers",
         "controller.listener.names", "metadata.log.dir"),
        "barnabas has no KRaft quorum; the controller is elected through coordination",
    ),
    **dict.fromkeys(
        ("transaction.state.log.replication.factor", "transaction.state.log.min.isr",
         "transaction.state.log.num.partitions", "share.coordinator.state.topic.replication.factor",
         "share.coordinator.state.topic.min.isr", "offsets.topic.min.isr"),
        "transactions and share groups are not implemented yet",
    ),
    "log.cleaner.threads": "one cleaning pass runs at a time, on a worker thread",
    "log.cleaner.io.max.bytes.per.second": "the log cleaner's I/O is not throttled",
    "log.preallocate": "segments are not preallocated",
    "group.coordinator.rebalance.protocols": "only the classic group protocol is served",
    "offsets.load.buffer.size": "__consumer_offsets partitions load in 5 MiB steps",
    **dict.fromkeys(
        ("ssl.keymanager.algorithm", "ssl.trustmanager.algorithm", "ssl.secure.random.implementation",
         "ssl.provider"),
        "TLS is OpenSSL's (Python's ssl module), not a Java provider's",
    ),
}  # fmt: skip


class BrokerConfig:
    """Resolved broker settings with where each value came from."""

    def __init__(self, values: Mapping[str, Any], sources: Mapping[str, ConfigSource], ignored: Mapping[str, str]):
        self._values = dict(values)
        self._sources = dict(sources)
        self.ignored = dict(ignored)

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def source(self, key: str) -> ConfigSource:
        return self._sources.get(key, ConfigSource.DEFAULT_CONFIG)

    def items(self) -> list[tuple[str, Any]]:
        return sorted(self._values.items())

    @property
    def broker_id(self) -> int:
        explicit = int(self["broker.id"])
        return explicit if explicit >= 0 else int(self["node.id"])

    @property
    def listeners(self) -> list[Listener]:
        return [parse_listener(uri, "listeners") for uri in self["listeners"]]

    @property
    def admin_listener(self) -> AdminListener | None:
        """Where the admin HTTP endpoint binds; None when it is off."""
        return parse_admin_listeners(self["admin.listeners"])

    @property
    def advertised_listeners(self) -> list[Listener]:
        uris = self["advertised.listeners"] or self["listeners"]
        return [parse_listener(uri, "advertised.listeners") for uri in uris]

    @property
    def listener_setup(self) -> ListenerSetup:
        """Every listener with its protocol and advertised entry, and the inter-broker listener's name.

        Raises:
            ConfigError: an inconsistent listener setting (checked when the config loads).
        """
        return resolve_listeners(self, self._values.get)

    def ssl_for(self, listener: str) -> dict[str, Any]:
        """Every ssl.* value as ``listener`` sees it (its listener.name.<name>.ssl.* overrides first)."""
        return ssl_settings(self, listener, self._values.get)

    def listener_value(self, listener: str, key: str) -> Any:
        """A per-listener setting (``<mechanism>.sasl.jaas.config`` and the like) as ``listener`` sees it."""
        return listener_value(self, listener, key, self._values.get)

    @property
    def log_dirs(self) -> list[Path]:
        dirs = self["log.dirs"] or [self["log.dir"]]
        return [Path(d) for d in dirs]

    @property
    def coordination_url(self) -> str:
        explicit = self["coordination.url"]
        if explicit:
            return str(explicit)
        return f"sqlite://{self.log_dirs[0].resolve() / 'coordination.db'}"

    @property
    def retention_ms(self) -> int:
        if self["log.retention.ms"] is not None:
            return int(self["log.retention.ms"])
        if self["log.retention.minutes"] is not None:
            minutes = int(self["log.retention.minutes"])
            return -1 if minutes < 0 else minutes * 60_000
        hours = int(self["log.retention.hours"])
        return -1 if hours < 0 else hours * 3_600_000

    @property
    def roll_ms(self) -> int:
        if self["log.roll.ms"] is not None:
            return int(self["log.roll.ms"])
        return int(self["log.roll.hours"]) * 3_600_000

    @property
    def flush_ms(self) -> int:
        explicit = self["log.flush.interval.ms"]
        return int(explicit) if explicit is not None else int(self["log.flush.scheduler.interval.ms"])


def env_var_for(key: str) -> str:
    """The environment variable that overrides ``key``."""
    return ENV_PREFIX + key.upper().replace(".", "_").replace("-", "_")


def _settings_from_env(env: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """Every ``BARNABAS_*`` variable as a setting, except those barnabas's tools read.

    Raises:
        ConfigError: a variable names no setting (a typo would otherwise be silently ignored).
    """
    by_name = {env_var_for(key): key for key in (*BROKER_CONFIGS, *IGNORED_KAFKA_SETTINGS)}
    found = {}
    for name, value in env.items():
        if not name.startswith(ENV_PREFIX) or name in TOOL_ENV_VARS or name.startswith(TEST_ENV_PREFIX):
            continue
        key = by_name.get(name)
        if key is None:
            close = difflib.get_close_matches(name, by_name, n=1, cutoff=0.8)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigError(f"unknown setting in the environment: {name}{hint}")
        found[key] = (value, name)
    return found


def load_broker_config(
    file: Path | None = None,
    overrides: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> BrokerConfig:
    """Resolve settings from defaults, a properties file, ``BARNABAS_*`` variables and flags.

    Raises:
        ConfigError: an unknown key, an unreadable file or an invalid value.
    """
    raw = read_properties_file(file) if file is not None else {}  # key -> (value, origin)
    env = os.environ if environ is None else environ
    raw.update(_settings_from_env(env))
    for key, value in (overrides or {}).items():
        raw[key] = (value, "command line")

    values = {key: definition.default for key, definition in BROKER_CONFIGS.items()}
    sources: dict[str, ConfigSource] = {}
    ignored: dict[str, str] = {}
    for key, (value, origin) in raw.items():
        if key in IGNORED_KAFKA_SETTINGS:
            ignored[key] = IGNORED_KAFKA_SETTINGS[key]
            continue
        stored, definition = key, BROKER_CONFIGS.get(key)
        if (override := listener_override(key)) is not None:  # listener.name.<name>.ssl.*
            stored, definition = override_key(*override), LISTENER_CONFIGS[override[1]]
        if definition is None:
            raise ConfigError(f"unknown setting {key!r} (from {origin})")
        try:
            values[stored] = definition.parse(value)
        except ConfigError as exc:
            raise ConfigError(f"{exc} (from {origin}{'' if stored == definition.name else ', as ' + key})") from None
        sources[stored] = ConfigSource.STATIC_BROKER_CONFIG
    config = BrokerConfig(values, sources, ignored)
    _check_consistency(config)
    return config


def _check_consistency(config: BrokerConfig) -> None:
    config.admin_listener  # noqa: B018 - parsed now so that a bad value stops the broker at once
    config.listener_setup  # noqa: B018 - resolving it checks every listener and ssl.* setting together
    if config["broker.id"] >= 0 and config["node.id"] >= 0 and config["broker.id"] != config["node.id"]:
        raise ConfigError(f"broker.id={config['broker.id']} and node.id={config['node.id']} disagree")
    if config["message.max.bytes"] > config["socket.request.max.bytes"]:
        raise ConfigError("message.max.bytes must not exceed socket.request.max.bytes")
    if config["max.connections.per.ip"] == 0 and not parse_ip_overrides(config["max.connections.per.ip.overrides"]):
        raise ConfigError("max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides is set")
    if config["log.segment.bytes"] > INT32_MAX:
        raise ConfigError("log.segment.bytes must fit in an int")
    # Kafka's KafkaConfig.validateValues: a follower's long poll must not outlast its own request
    # timeout, nor the time its leader waits before dropping it from the ISR.
    if config["replica.fetch.wait.max.ms"] > config["replica.socket.timeout.ms"]:
        raise ConfigError("replica.socket.timeout.ms must be at least replica.fetch.wait.max.ms")
    if config["replica.fetch.wait.max.ms"] > config["replica.lag.time.max.ms"]:
        raise ConfigError("replica.fetch.wait.max.ms must not exceed replica.lag.time.max.ms")


def hostname_ordinal(hostname: str | None = None) -> int | None:
    """The N of a StatefulSet-style hostname ``name-N``, if it has one.

    The hostname is ``$HOSTNAME`` where set (a pod's is its name), else the kernel's.
    """
    host = (hostname or os.environ.get("HOSTNAME") or socket.gethostname()).split(".")[0]
    match = re.search(r"-(\d+)$", host)
    return int(match.group(1)) if match else None
