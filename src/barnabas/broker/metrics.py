"""The broker's hot-path counts: requests per API, bytes and messages in per topic, ISR changes, authentications.

Kafka's BrokerTopicMetrics and ReplicaManager meters, counted where the events happen (the
connection, the partition service's completed appends, the replica manager's ISR writes) and
exposed by the admin endpoint under the names the Prometheus JMX exporter gives Kafka's MBeans.

Rules this module keeps:

- Plain integers changed on the event loop only, no locks and no prometheus-client objects on the
  hot path (see ``barnabas.admin_http._requests`` for the measured difference); families are built
  at scrape time, on the loop, by :meth:`BrokerMetrics.families`.
- Bytes and messages in count what a leader appended for any writer (clients' Produce and the
  group coordinator's ``__consumer_offsets`` records), as Kafka's ReplicaManager.appendToLocalLog
  does; a producer's retried duplicate and a failed append count nothing. Messages are the
  batch header's record count: the records are never decoded for it.
- As in Kafka, each per-topic counter has the broker's total beside it, the sample with no
  ``topic`` label; a deleted topic's counters go at the next scrape (Kafka removes its meters).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from prometheus_client.metrics_core import CounterMetricFamily, Metric

from barnabas.admin_http import RequestMetrics

__all__ = ["BrokerMetrics"]


class BrokerMetrics:
    """What the broker counts as it serves; read by the admin endpoint's collector."""

    def __init__(self) -> None:
        self.requests = RequestMetrics()
        self.bytes_in: dict[str, int] = {}
        self.messages_in: dict[str, int] = {}
        self.bytes_in_total = 0
        self.messages_in_total = 0
        #: Record bytes sent to consumers (followers' fetches are replication, not counted: Kafka's BytesOutPerSec).
        self.bytes_out: dict[str, int] = {}
        self.bytes_out_total = 0
        self.isr_shrinks = 0
        self.isr_expands = 0
        #: (listener, outcome) -> count; outcome is Kafka's metric name (successful-authentication, ...).
        self.authentications: dict[tuple[str, str], int] = {}

    def authenticated(self, listener: str, *, success: bool, reauthentication: bool) -> None:
        """A SASL exchange on ``listener`` ended (Kafka's socket-server-metrics authentication counts)."""
        kind = "reauthentication" if reauthentication else "authentication"
        outcome = f"{'successful' if success else 'failed'}_{kind}"
        key = (listener, outcome)
        self.authentications[key] = self.authentications.get(key, 0) + 1

    def appended(self, topic: str, size_bytes: int, records: int) -> None:
        """A leader appended a batch of ``records`` records, ``size_bytes`` long, to ``topic``."""
        bytes_in, messages_in = self.bytes_in, self.messages_in
        bytes_in[topic] = bytes_in.get(topic, 0) + size_bytes
        messages_in[topic] = messages_in.get(topic, 0) + records
        self.bytes_in_total += size_bytes
        self.messages_in_total += records

    def fetched(self, topic: str, size_bytes: int) -> None:
        """A consumer's Fetch answer carries ``size_bytes`` of ``topic``'s records."""
        self.bytes_out[topic] = self.bytes_out.get(topic, 0) + size_bytes
        self.bytes_out_total += size_bytes

    def isr_changed(self, before: Sequence[int], after: Sequence[int]) -> None:
        """A led partition's ISR went from ``before`` to ``after`` (written to coordination).

        Kafka marks IsrShrinksPerSec when members left and IsrExpandsPerSec when members joined;
        a change that does both counts once each.
        """
        if any(r not in after for r in before):
            self.isr_shrinks += 1
        if any(r not in before for r in after):
            self.isr_expands += 1

    def forget_topics_but(self, live: Collection[str]) -> None:
        """Drop the per-topic counts of topics not in ``live`` (deleted ones)."""
        for counts in (self.bytes_in, self.messages_in, self.bytes_out):
            for topic in [t for t in counts if t not in live]:
                del counts[topic]

    def families(self, api_name: Callable[[int], str]) -> list[Metric]:
        """The counters as metric families, API keys named by ``api_name``."""
        bytes_in = _per_topic(
            "kafka_server_brokertopicmetrics_bytesin",
            "Bytes appended to partitions this broker leads, per topic and in all (Kafka's BytesInPerSec).",
            self.bytes_in,
            self.bytes_in_total,
        )
        messages_in = _per_topic(
            "kafka_server_brokertopicmetrics_messagesin",
            "Records appended to partitions this broker leads, per topic and in all (Kafka's MessagesInPerSec).",
            self.messages_in,
            self.messages_in_total,
        )
        bytes_out = _per_topic(
            "kafka_server_brokertopicmetrics_bytesout",
            "Record bytes this broker sent to consumers, per topic and in all (Kafka's BytesOutPerSec).",
            self.bytes_out,
            self.bytes_out_total,
        )
        shrinks = CounterMetricFamily(
            "kafka_server_replicamanager_isrshrinks",
            "ISR changes of partitions this broker leads that removed members (Kafka's IsrShrinksPerSec).",
            value=self.isr_shrinks,
        )
        expands = CounterMetricFamily(
            "kafka_server_replicamanager_isrexpands",
            "ISR changes of partitions this broker leads that added members (Kafka's IsrExpandsPerSec).",
            value=self.isr_expands,
        )
        topics = [bytes_in, messages_in, bytes_out]
        return [*self.requests.families(api_name), *topics, shrinks, expands, *self._authentications()]

    def _authentications(self) -> list[Metric]:
        families: list[Metric] = []
        for outcome in ("successful_authentication", "failed_authentication", "successful_reauthentication",
                        "failed_reauthentication"):  # fmt: skip
            family = CounterMetricFamily(
                f"kafka_server_socket_server_metrics_{outcome}",
                f"SASL exchanges per listener: {outcome.replace('_', ' ')} (Kafka's socket-server-metrics).",
                labels=("listener",),
            )
            for (listener, counted), value in sorted(self.authentications.items()):
                if counted == outcome:
                    family.add_metric([listener], value)
            families.append(family)
        return families


def _per_topic(name: str, documentation: str, per_topic: dict[str, int], total: int) -> CounterMetricFamily:
    family = CounterMetricFamily(name, documentation, labels=("topic",))
    family.add_sample(f"{name}_total", {}, total)  # the all-topics meter has no topic tag in Kafka
    for topic, value in sorted(per_topic.items()):
        family.add_metric([topic], value)
    return family
