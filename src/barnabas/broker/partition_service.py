"""Appending to the partitions this broker leads and tracking their followers (Kafka's ReplicaManager part).

What every writer of a led partition needs, whoever it is (the Produce handler, the group
coordinator writing ``__consumer_offsets``, later the transaction coordinator), and what a
follower's fetch tells its leader, live here rather than in one of the handlers:

- ``leader_partition`` finds a partition this broker acts as leader of, or the error a
  leader-only request gets;
- ``begin_append`` checks a batch against the partition (leadership, ``min.insync.replicas`` for
  acks=all) and starts the append: offsets are assigned at once, the segment write runs on the
  log's writer thread;
- ``finish_append`` turns a completed append into its result, lets the leader move the high
  watermark, and wakes the fetches waiting on the partition;
- ``append_and_wait`` does both for a caller that can block the event loop for one write (the
  coordinator's own small records);
- ``track_follower`` records a follower's fetch offset in the broker epoch it was registered in
  when the fetch arrived: it may move the high watermark (waking consumers) and let the follower
  back into the ISR;
- ``followers`` is the follower side (:mod:`.follower_appends`): the replica fetchers append the
  leader's batches and truncate through it. It lives below the replica manager, which builds it
  and hands it to each fetcher; this service only names it, so appending has one home.
"""

from __future__ import annotations

import contextlib
import logging
from typing import NamedTuple

from barnabas.cluster import PartitionState
from barnabas.log import OutOfOrderSequenceError, PartitionLog, PendingAppend
from barnabas.protocol import CorruptRecordError, ErrorCode, KafkaRecordError, ProducePartitionResult

from .errors import error_code_for
from .replication import LeaderReplica, ReplicaManager
from .state import NodeState

__all__ = ["AppendStarted", "LeaderPartition", "PartitionService", "append_failure"]

log = logging.getLogger(__name__)


class AppendStarted(NamedTuple):
    """An append under way: its log, its pending append, and the leader that accepted it."""

    log: PartitionLog
    append: PendingAppend
    leader: LeaderReplica


class LeaderPartition(NamedTuple):
    """A partition this broker acts as leader of: its leader replica, log and state (leader epoch, ISR)."""

    leader: LeaderReplica
    log: PartitionLog
    state: PartitionState


def append_failure(
    index: int, code: ErrorCode, message: str | None = None, record_errors: tuple[tuple[int, str | None], ...] = ()
) -> ProducePartitionResult:
    return ProducePartitionResult(index, code, -1, -1, -1, message, record_errors)


def _error_result(topic_name: str, index: int, exc: BaseException) -> ProducePartitionResult:
    if isinstance(exc, CorruptRecordError):
        log.warning("rejected a batch for %s-%d: %s", topic_name, index, exc)
        return append_failure(index, ErrorCode.corrupt_message, str(exc))
    if isinstance(exc, OutOfOrderSequenceError):
        # Fatal to an idempotent producer whose earlier batches were all acknowledged: worth a line.
        log.info("rejected a batch for %s-%d: %s", topic_name, index, exc)
    code = error_code_for(exc)
    if code is ErrorCode.unknown_server_error or code is ErrorCode.kafka_storage_error:
        log.error("append to %s-%d failed", topic_name, index, exc_info=exc)
    record_errors = exc.record_errors if isinstance(exc, KafkaRecordError) else ()
    return append_failure(index, code, str(exc) or None, record_errors)


class PartitionService:
    """Appends to the partitions this broker leads and tracks their followers, for every writer."""

    def __init__(self, node: NodeState, replicas: ReplicaManager) -> None:
        self.node = node
        self.replicas = replicas
        self.followers = replicas.followers

    def leader_partition(
        self, topic: str, partition: int, current_leader_epoch: int = -1
    ) -> LeaderPartition | ErrorCode:
        """The partition if this broker leads it, else the error a leader-only request gets.

        Kafka's ReplicaManager.getPartitionOrError plus its leader-epoch check (KIP-320): an unknown
        topic or partition is UNKNOWN_TOPIC_OR_PARTITION, a partition this broker does not lead is
        NOT_LEADER_OR_FOLLOWER, and a ``current_leader_epoch`` (-1 means unchecked) older than the
        leader's is FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH.

        Leading means acting as leader (the replica manager's LeaderReplica), not being named leader
        by the stored state: a broker that restarted is named there until the controller elects
        anew, and must not answer for a log that may have lost what it never flushed.
        """
        topic_metadata = self.node.topic(topic)
        if topic_metadata is None or partition not in topic_metadata.assignment:
            return ErrorCode.unknown_topic_or_partition
        leader = self.replicas.leader(topic, partition)
        if leader is None:
            return ErrorCode.not_leader_or_follower
        leader_epoch = leader.state.leader_epoch
        if current_leader_epoch >= 0 and current_leader_epoch != leader_epoch:
            if current_leader_epoch < leader_epoch:
                return ErrorCode.fenced_leader_epoch
            return ErrorCode.unknown_leader_epoch
        return LeaderPartition(leader, leader.log, leader.state)

    def still_leads(self, topic_name: str, index: int, leader: LeaderReplica) -> bool:
        """Whether ``leader`` (the replica that took an append) is still this broker's leader of the partition."""
        return not leader.resigned and self.replicas.leader(topic_name, index) is leader

    def begin_append(
        self, topic_name: str, index: int, records: bytes | memoryview | None, *, acks: int, now_ms: int
    ) -> ProducePartitionResult | AppendStarted:
        """Check one partition's batch and start appending it: a failure, or the append under way.

        A writable view of the request frame is patched and written in place; anything else is copied first.
        """
        partition = self.leader_partition(topic_name, index)
        if isinstance(partition, ErrorCode):
            return append_failure(index, partition)
        partition_state, partition_log = partition.state, partition.log
        if acks == -1:
            min_isr = self.node.min_insync(topic_name)
            if len(partition_state.isr) < min_isr:
                return append_failure(
                    index,
                    ErrorCode.not_enough_replicas,
                    f"ISR has {len(partition_state.isr)} replicas, min.insync.replicas is {min_isr}",
                )
        buffer = records if isinstance(records, memoryview) and not records.readonly else bytearray(records or b"")
        try:
            pending = partition_log.begin_append_as_leader(buffer, partition_state.leader_epoch, now_ms)
        except Exception as exc:
            return _error_result(topic_name, index, exc)
        return AppendStarted(partition_log, pending, partition.leader)

    def finish_append(self, topic_name: str, index: int, started: AppendStarted) -> ProducePartitionResult:
        """The result of a completed append; a successful one may move the high watermark and wakes fetches."""
        append, leader = started.append, started.leader
        if append.error is not None:
            return _error_result(topic_name, index, append.error)
        if not leader.resigned:
            leader.maybe_advance_high_watermark()
        result = append.result
        if not result.duplicate:
            self.node.fetch_waiters.notify((topic_name, index))
            if (header := append.header) is not None:  # bytes and messages in, from the batch header
                self.node.metrics.appended(topic_name, header.size, header.records_count)
        return ProducePartitionResult(
            index, ErrorCode.none, result.base_offset, result.log_append_time_ms, result.log_start_offset
        )

    def append_and_wait(
        self, topic_name: str, index: int, records: bytes | None, *, acks: int, now_ms: int
    ) -> ProducePartitionResult:
        """Append one partition's batch and wait for the write (the coordinator's own records)."""
        started = self.begin_append(topic_name, index, records, acks=acks, now_ms=now_ms)
        if isinstance(started, ProducePartitionResult):
            return started
        append = started.append
        if not append.done:
            if append.landed is not None:
                with contextlib.suppress(BaseException):  # completing the append records its error
                    append.landed.result()
            started.log.complete_appends(self.node.now_ms())
        return self.finish_append(topic_name, index, started)

    def follower_identity(self, replica_id: int) -> tuple[int, int]:
        """The fetching replica and the broker epoch it is registered in now (-1 if it is not)."""
        info = self.node.brokers.live.get(replica_id)
        return replica_id, info.epoch if info is not None else -1

    def track_follower(self, leader: LeaderReplica, replica: tuple[int, int], fetch_offset: int, now_ms: int) -> None:
        """A follower fetched from ``fetch_offset`` of the partition ``leader`` leads (as ``leader_partition``
        found it): it may move the high watermark or join the ISR."""
        replica_id, broker_epoch = replica
        node = self.node
        if leader.on_follower_fetch(replica_id, fetch_offset, now_ms, broker_epoch):
            node.fetch_waiters.notify((leader.topic, leader.partition))  # consumers may read further now
        joining = not leader.state.in_sync(replica_id, broker_epoch)
        if joining and replica_id in leader.wants_to_join(node.brokers.epochs(), now_ms, self.replicas.lag_time_max_ms):
            self.replicas.poke_isr()
