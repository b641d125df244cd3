"""Writing to the partitions this broker follows (Kafka's Partition, follower side).

The follower half of the partition service: a replica fetcher decides *what* to write (the
leader's batches, where to cut after a leader change), this module writes it and keeps what
depends on the write right — the follower's high watermark never passes its own log end, and
the fetches waiting on the partition wake. It sits below the replica manager, which hands it
to every fetcher, so the fetchers never touch a log's write side themselves; the leader half
(:mod:`.partition_service`) sits above and reaches this one as ``PartitionService.followers``.
"""

from __future__ import annotations

import logging

from barnabas.log import PartitionLog

from .state import NodeState

__all__ = ["FollowerAppends"]

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


class FollowerAppends:
    def __init__(self, node: NodeState) -> None:
        self.node = node

    def append(
        self, tp: TopicPartition, partition_log: PartitionLog, records: bytes | memoryview | None, leader_hw: int
    ) -> None:
        """Append the leader's batches unchanged, then follow its high watermark as far as this log reaches."""
        if records:
            partition_log.append_as_follower(records, self.node.now_ms())
        partition_log.high_watermark = min(leader_hw, partition_log.log_end_offset)
        self.node.fetch_waiters.notify(tp)

    def truncate_to(self, partition_log: PartitionLog, offset: int) -> None:
        """Cut the log back to ``offset``: what follows was never on the leader's log (KIP-101/279)."""
        partition_log.truncate_to(offset, self.node.now_ms())

    def start_over_at(self, partition_log: PartitionLog, offset: int) -> None:
        """Empty the log and start it at ``offset``: the leader no longer has anything this log could extend."""
        partition_log.truncate_fully_and_start_at(offset, self.node.now_ms())
