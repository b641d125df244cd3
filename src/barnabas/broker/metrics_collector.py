"""The broker's metric families at scrape time: its counters, and gauges read from its state.

Names are those the Prometheus JMX exporter gives Kafka's MBeans (lowercased,
``kafka.server:type=ReplicaManager,name=LeaderCount`` as ``kafka_server_replicamanager_leadercount``),
kafka_exporter's for consumer groups (``kafka_consumergroup_lag``), and ``barnabas_*`` for what Kafka
has no MBean for (the coordination session). docs/operations.md lists them all.

Rules this module keeps:

- It runs on the event loop (the admin endpoint's LoopCollector calls it there), reads the state
  as it is at that moment, and changes nothing but dropping the counters of deleted topics.
- Gauges mean what Kafka's mean on the same broker: the replica manager's count what this broker
  leads or hosts; the controller's are non-zero only on the active controller, so a sum over the
  cluster is the cluster's figure.
- Consumer lag is reported by the group's coordinator, for the partitions whose log it hosts (it
  knows their high watermark); the committed offsets of every partition are there too
  (``kafka_consumergroup_current_offset``), to join with the leaders' ``kafka_log_log_logendoffset``
  where the coordinator hosts no replica.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from barnabas.coordination import SessionState

from .state import BrokerState

__all__ = ["broker_families"]


def broker_families(state: BrokerState, session_state: Callable[[], SessionState | None]) -> list[Metric]:
    """Every metric family of the broker, from its counters and its state now."""
    node = state.node
    node.metrics.forget_topics_but(node.topics.topics)

    def api_name(api_key: int) -> str:
        spec = state.registry.get(api_key)
        return spec.name if spec is not None else str(api_key)

    return [
        *node.metrics.families(api_name),
        *_replica_manager(state),
        *_controller(state),
        *_logs(state),
        *_consumer_groups(state),
        *_coordination(session_state()),
        _gauge(
            "kafka_server_socket_server_metrics_connection_count",
            "Open client connections (Kafka's socket-server-metrics connection-count).",
            len(node.connections),
        ),
        *_connection_limits(state),
        *_client_quotas(state),
        *_fetch_sessions(state),
    ]


def _fetch_sessions(state: BrokerState) -> Iterator[Metric]:
    sessions = state.node.fetch_sessions
    yield _gauge(
        "kafka_server_fetchsessioncache_numincrementalfetchsessions", "Incremental fetch sessions kept.", len(sessions)
    )
    yield _gauge(
        "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached",
        "Partitions over every incremental fetch session.",
        sessions.cached_partitions(),
    )
    yield CounterMetricFamily(
        "kafka_server_fetchsessioncache_incrementalfetchsessionevictions",
        "Fetch sessions evicted to make room for new ones (Kafka's IncrementalFetchSessionEvictionsPerSec).",
        value=sessions.evictions,
    )
    yield CounterMetricFamily(
        "barnabas_fetch_incremental",
        "Fetches taken up within an incremental fetch session (KIP-227).",
        value=sessions.incremental_fetches,
    )


def _connection_limits(state: BrokerState) -> Iterator[Metric]:
    limits = state.node.connection_limits
    open_family = GaugeMetricFamily(
        "barnabas_connections", "Open connections counted against the connection limits, per listener.",
        labels=("listener",),
    )  # fmt: skip
    for listener, count in sorted(limits.by_listener.items()):
        open_family.add_metric([listener], count)
    yield open_family
    refused = CounterMetricFamily(
        "barnabas_connections_refused",
        "Connections closed at accept: over max.connections (listener's or broker's) or max.connections.per.ip.",
        labels=("listener", "limit"),
    )
    for (listener, limit), count in sorted(limits.refused.items()):
        refused.add_metric([listener, limit], count)
    yield refused


#: Quota key -> Kafka's quota metric group and rate name (kafka.server:type=<group>,user=…,client-id=…).
_QUOTA_METRICS = {
    "producer_byte_rate": ("produce", "byte_rate"),
    "consumer_byte_rate": ("fetch", "byte_rate"),
    "request_percentage": ("request", "request_time"),
}


def _client_quotas(state: BrokerState) -> Iterator[Metric]:
    quotas = state.node.quotas
    labels = ("user", "client_id")
    rates = {
        key: GaugeMetricFamily(f"kafka_server_{group}_{name}", f"Each quota'd client's rate ({key}).", labels=labels)
        for key, (group, name) in _QUOTA_METRICS.items()
    }
    for (key, user, client_id), value in sorted(quotas.rates().items()):
        if key in rates:
            rates[key].add_metric([user, client_id], value)
    yield from rates.values()
    throttled = CounterMetricFamily(
        "barnabas_client_quota_throttled", "Answers throttled for a violated client quota.",
        labels=("quota", *labels),
    )  # fmt: skip
    throttle_ms = CounterMetricFamily(
        "barnabas_client_quota_throttle_time_ms", "Throttle time given for a violated client quota, in ms.",
        labels=("quota", *labels),
    )  # fmt: skip
    for (key, user, client_id), (count, total_ms) in sorted(quotas.throttled.items()):
        throttled.add_metric([key, user, client_id], count)
        throttle_ms.add_metric([key, user, client_id], total_ms)
    yield throttled
    yield throttle_ms


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)


def _replica_manager(state: BrokerState) -> Iterator[Metric]:
    node = state.node
    leaders = list(state.replicas.leaders.values())
    under_replicated = under_min_isr = at_min_isr = 0
    for leader in leaders:
        isr, replicas = len(leader.isr), len(leader.replicas)
        under_replicated += isr < replicas
        if node.topic(leader.topic) is None:
            continue
        min_isr = node.min_insync(leader.topic)
        under_min_isr += isr < min_isr
        at_min_isr += isr == min_isr
    yield _gauge("kafka_server_replicamanager_leadercount", "Partitions this broker leads.", len(leaders))
    yield _gauge(
        "kafka_server_replicamanager_partitioncount", "Partitions with a replica on this broker.",
        len(node.logs.partitions()),
    )  # fmt: skip
    yield _gauge(
        "kafka_server_replicamanager_underreplicatedpartitions",
        "Partitions this broker leads whose ISR is smaller than their replica set.",
        under_replicated,
    )
    yield _gauge(
        "kafka_server_replicamanager_underminisrpartitioncount",
        "Partitions this broker leads whose ISR is below min.insync.replicas (acks=all fails).",
        under_min_isr,
    )
    yield _gauge(
        "kafka_server_replicamanager_atminisrpartitioncount",
        "Partitions this broker leads whose ISR is exactly min.insync.replicas.",
        at_min_isr,
    )


def _controller(state: BrokerState) -> Iterator[Metric]:
    node = state.node
    active = state.controller.fence is not None
    offline = partitions = topics = 0
    if active:  # Kafka's controller gauges are the active controller's; the others report 0
        live = node.brokers.live
        for partition_state in node.topics.states.values():
            leader = live.get(partition_state.leader)
            offline += leader is None or not partition_state.in_sync(leader.broker_id, leader.epoch)
        partitions = sum(len(topic.assignment) for topic in node.topics.topics.values())
        topics = len(node.topics.topics)
    yield _gauge(
        "kafka_controller_kafkacontroller_activecontrollercount", "1 on the active controller, else 0.", int(active)
    )
    yield _gauge(
        "kafka_controller_kafkacontroller_offlinepartitionscount",
        "Partitions without a live leader (reported by the active controller).",
        offline,
    )
    yield _gauge(
        "kafka_controller_kafkacontroller_globalpartitioncount",
        "Partitions in the cluster (reported by the active controller).",
        partitions,
    )
    yield _gauge(
        "kafka_controller_kafkacontroller_globaltopiccount",
        "Topics in the cluster (reported by the active controller).",
        topics,
    )


def _logs(state: BrokerState) -> Iterator[Metric]:
    logs = state.node.logs
    labels = ("topic", "partition")
    size = GaugeMetricFamily("kafka_log_log_size", "Bytes of a partition's log on this broker.", labels=labels)
    end = GaugeMetricFamily("kafka_log_log_logendoffset", "A partition's log end offset here.", labels=labels)
    start = GaugeMetricFamily("kafka_log_log_logstartoffset", "A partition's log start offset here.", labels=labels)
    segments = GaugeMetricFamily("kafka_log_log_numlogsegments", "Segments of a partition's log.", labels=labels)
    for topic, partition in logs.partitions():
        partition_log = logs.get(topic, partition)
        if partition_log is None or partition_log.closed:
            continue
        values = [topic, str(partition)]
        size.add_metric(values, partition_log.size_bytes)
        end.add_metric(values, partition_log.log_end_offset)
        start.add_metric(values, partition_log.log_start_offset)
        segments.add_metric(values, partition_log.segment_count)
    return iter((size, end, start, segments))


def _consumer_groups(state: BrokerState) -> Iterator[Metric]:
    node = state.node
    group_labels = ("consumergroup", "topic", "partition")
    current = GaugeMetricFamily(
        "kafka_consumergroup_current_offset", "A group's committed offset (from its coordinator).", labels=group_labels
    )
    lag = GaugeMetricFamily(
        "kafka_consumergroup_lag",
        "High watermark minus a group's committed offset, where the coordinator hosts the partition.",
        labels=group_labels,
    )
    members = GaugeMetricFamily(
        "kafka_consumergroup_members", "Members of a group (from its coordinator).", labels=("consumergroup",)
    )
    for group in sorted(state.groups.list_groups(), key=lambda g: g.group_id):
        members.add_metric([group.group_id], len(group.members))
        for (topic, partition), committed in sorted(group.offsets.items()):
            values = [group.group_id, topic, str(partition)]
            current.add_metric(values, committed.offset)
            partition_log = node.logs.get(topic, partition)
            if partition_log is not None and committed.offset >= 0:
                lag.add_metric(values, max(0, partition_log.high_watermark - committed.offset))
    return iter((current, lag, members))


def _coordination(session: SessionState | None) -> Iterator[Metric]:
    yield _gauge(
        "barnabas_coordination_session_up",
        "1 while the broker's coordination session is connected, else 0 (suspended, lost, or none yet).",
        int(session is SessionState.CONNECTED),
    )
    states = GaugeMetricFamily(
        "barnabas_coordination_session_state", "The coordination session's state, 1 for the current one.",
        labels=("state",),
    )  # fmt: skip
    for candidate in SessionState:
        states.add_metric([candidate.value], int(session is candidate))
    yield states
