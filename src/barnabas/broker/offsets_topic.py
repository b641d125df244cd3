"""The broker's side of ``__consumer_offsets``: create it, write the coordinator's records, load it.

Kafka's GroupMetadataManager I/O, over this broker's logs and replication:

- The topic is created on first need (FindCoordinator, as Kafka does) with
  ``offsets.topic.num.partitions`` partitions, replication ``min(offsets.topic.replication.factor,
  live brokers)``, ``cleanup.policy=compact`` and ``offsets.topic.segment.bytes``.
- ``append`` writes one batch as the partition's leader and waits, as acks=all does, for every
  in-sync replica (at most ``offsets.commit.timeout.ms``); errors become the group error codes
  Kafka maps them to (NOT_COORDINATOR when leadership moved, COORDINATOR_NOT_AVAILABLE when the
  write could not be replicated, INVALID_COMMIT_OFFSET_SIZE when it is too large).
- When this broker becomes leader of a partition the coordinator starts loading it: the whole
  log is read in the background and handed over; losing leadership unloads the partition.
- When a topic is deleted, the groups' committed offsets for it are deleted as well; offsets also
  expire after ``offsets.retention.minutes`` (rules in ``groups.expiry``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from barnabas.config import BrokerConfig
from barnabas.groups import GroupConfig, GroupCoordinator
from barnabas.log import OffsetOutOfRangeError
from barnabas.protocol import ErrorCode, build_record_batch, decode_batch_records, iter_batch_headers

from .topic_admin import TopicAdminError, create_topic

if TYPE_CHECKING:
    from .partition_service import PartitionService
    from .state import NodeState

__all__ = ["OFFSETS_TOPIC", "OffsetsTopic"]

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
#: Bytes read per step while loading a partition (Kafka's offsets.load.buffer.size).
LOAD_CHUNK_BYTES = 5 * 1024 * 1024

_NOT_COORDINATOR = {ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch, ErrorCode.unknown_leader_epoch}
_NOT_AVAILABLE = {
    ErrorCode.unknown_topic_or_partition,
    ErrorCode.not_enough_replicas,
    ErrorCode.not_enough_replicas_after_append,
    ErrorCode.request_timed_out,
}
_TOO_LARGE = {ErrorCode.message_too_large, ErrorCode.record_list_too_large, ErrorCode.invalid_fetch_size}


def coordinator_error(code: ErrorCode) -> ErrorCode:
    """The group error a failed write of ``__consumer_offsets`` gets (Kafka's GroupMetadataManager mapping)."""
    if code is ErrorCode.none:
        return code
    if code in _NOT_COORDINATOR:
        return ErrorCode.not_coordinator
    if code in _NOT_AVAILABLE:
        return ErrorCode.coordinator_not_available
    if code in _TOO_LARGE:
        return ErrorCode.invalid_commit_offset_size
    return ErrorCode.unknown_server_error


def group_config(config: BrokerConfig) -> GroupConfig:
    return GroupConfig(
        min_session_timeout_ms=int(config["group.min.session.timeout.ms"]),
        max_session_timeout_ms=int(config["group.max.session.timeout.ms"]),
        max_size=int(config["group.max.size"]),
        initial_rebalance_delay_ms=int(config["group.initial.rebalance.delay.ms"]),
        max_metadata_bytes=int(config["offset.metadata.max.bytes"]),
    )


class OffsetsTopic:
    """Owns the broker's group coordinator and is where it writes (its GroupLog)."""

    def __init__(self, state: NodeState, partitions: PartitionService) -> None:
        self.state = state
        self.partitions = partitions
        self.coordinator = GroupCoordinator(
            state.broker_id, group_config(state.config), self, self.partition_count, state.now_ms
        )
        self._creating = asyncio.Lock()
        self._loads: dict[int, asyncio.Task[None]] = {}
        self._known_topics = set(state.topics.topics)
        self._forgetting: set[asyncio.Task[int]] = set()
        self._expiry: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._expiry = asyncio.get_running_loop().create_task(self.expire_offsets_forever(), name="offsets expiry")

    def partition_count(self) -> int:
        topic = self.state.topic(OFFSETS_TOPIC)
        return topic.partition_count if topic is not None else int(self.state.config["offsets.topic.num.partitions"])

    async def ensure_exists(self) -> bool:
        """Create the topic if it is missing; whether it exists now."""
        if self.state.topic(OFFSETS_TOPIC) is not None:
            return True
        async with self._creating:
            if self.state.topic(OFFSETS_TOPIC) is not None:
                return True
            config = self.state.config
            factor = min(int(config["offsets.topic.replication.factor"]), len(self.state.live_brokers()))
            try:
                await create_topic(
                    self.state,
                    OFFSETS_TOPIC,
                    num_partitions=int(config["offsets.topic.num.partitions"]),
                    replication_factor=factor,
                    # Kafka's groupMetadataTopicConfigs: the coordinator's batches stay as it writes them.
                    configs={
                        "cleanup.policy": "compact",
                        "compression.type": "producer",
                        "segment.bytes": str(config["offsets.topic.segment.bytes"]),
                    },
                )
            except TopicAdminError as exc:
                if exc.error_code is not ErrorCode.topic_already_exists:
                    log.warning("could not create %s: %s", OFFSETS_TOPIC, exc.message)
                    return False
        return self.state.topic(OFFSETS_TOPIC) is not None

    # -- writing ---------------------------------------------------------------------------------

    async def append(self, partition: int, records: Sequence[tuple[bytes, bytes | None]]) -> ErrorCode:
        state = self.state
        now_ms = state.now_ms()
        batch = build_record_batch(list(records), base_timestamp_ms=now_ms)
        result = self.partitions.append_and_wait(OFFSETS_TOPIC, partition, batch, acks=-1, now_ms=now_ms)
        if result.error_code != ErrorCode.none:
            return coordinator_error(ErrorCode(result.error_code))
        state.fetch_waiters.notify((OFFSETS_TOPIC, partition))
        leader = self.partitions.replicas.leader(OFFSETS_TOPIC, partition)
        if leader is None:
            return ErrorCode.not_coordinator
        timeout_s = int(state.config["offsets.commit.timeout.ms"]) / 1000
        code = await leader.wait_for_high_watermark(leader.log.log_end_offset, timeout_s)
        return coordinator_error(code)

    async def expire_offsets_forever(self) -> None:
        """Every ``offsets.retention.check.interval.ms``, delete offsets older than ``offsets.retention.minutes``."""
        config = self.state.config
        retention_ms = int(config["offsets.retention.minutes"]) * 60_000
        interval_s = int(config["offsets.retention.check.interval.ms"]) / 1000
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self.coordinator.expire_offsets(retention_ms)
            except Exception:
                log.exception("expiring committed offsets failed; will retry")

    def topics_changed(self) -> None:
        """Metadata changed: committed offsets of topics that are gone are deleted too."""
        names = set(self.state.topics.topics)
        gone, self._known_topics = self._known_topics - names, names
        if gone:
            task = asyncio.get_running_loop().create_task(self.coordinator.forget_topics(gone))
            self._forgetting.add(task)
            task.add_done_callback(self._forgetting.discard)

    # -- leadership ------------------------------------------------------------------------------

    def on_leadership(self, topic: str, partition: int, leader_epoch: int | None) -> None:
        """A partition's leadership here began (its epoch) or ended (None): load or unload its groups."""
        if topic != OFFSETS_TOPIC:
            return
        if (running := self._loads.pop(partition, None)) is not None:
            running.cancel()
        if leader_epoch is None:
            self.coordinator.unload(partition)
            return
        self.coordinator.begin_loading(partition, leader_epoch)
        task = asyncio.get_running_loop().create_task(
            self._load(partition, leader_epoch), name=f"load offsets {partition}"
        )
        self._loads[partition] = task
        task.add_done_callback(
            lambda done: self._loads.pop(partition, None) if self._loads.get(partition) is done else None
        )

    async def _load(self, partition: int, leader_epoch: int) -> None:
        records: list[tuple[bytes, bytes | None]] = []
        partition_log = self.state.logs.get(OFFSETS_TOPIC, partition)
        if partition_log is None:
            return
        offset = partition_log.log_start_offset
        while offset < partition_log.log_end_offset:
            try:
                read = partition_log.read(offset, LOAD_CHUNK_BYTES)
            except OffsetOutOfRangeError:  # truncated or deleted meanwhile: leadership moved on
                return
            data = bytes(read.records)
            if not data:
                break
            for position, header in iter_batch_headers(data):
                if header.is_control:
                    continue
                for record in decode_batch_records(memoryview(data)[position : position + header.size]):
                    if record.key is not None:
                        records.append((record.key, record.value))
            offset = read.next_offset
            await asyncio.sleep(0)  # let requests in between chunks
        self.coordinator.finish_loading(partition, leader_epoch, records)

    async def close(self) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
        for task in list(self._loads.values()):
            task.cancel()
        self._loads.clear()
        await self.coordinator.close()
