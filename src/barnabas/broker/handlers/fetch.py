"""Fetch (key 1): read whole batches up to the high watermark, long-polling on min_bytes.

Kafka semantics kept: partitions are read in request order and share the response's
``max_bytes`` (capped by ``fetch.max.bytes``); the first partition that has data may exceed
both limits by one batch (KIP-74) so a consumer never stalls on a large batch; a fetch offset
inside a batch returns that batch; an offset outside [log start, log end] gets
OFFSET_OUT_OF_RANGE; ``current_leader_epoch`` older than the leader's gets
FENCED_LEADER_EPOCH, newer gets UNKNOWN_LEADER_EPOCH. The response waits up to ``max_wait``
until ``min_bytes`` are available, an error is found, or new data arrives that satisfies it.
Fetch sessions are not kept: every response carries session id 0, which clients treat as
"send full requests" (KIP-227). Records are answered as segment file ranges
(``PartitionLog.read_slice``), which the connection sends with sendfile: no record byte is read
into the broker (Kafka's FileRecords and transferTo).

A fetch with a replica id is a follower's: it reads up to the log end offset instead of the
high watermark, and its fetch offset tells the leader how far that follower has come (which
may move the high watermark and let the follower back into the ISR), in the broker epoch the
follower was registered in when the fetch arrived.
"""

from __future__ import annotations

import time
from typing import Any

from barnabas.log import FileSlice
from barnabas.log import errors as log_errors
from barnabas.protocol import ErrorCode, FetchPartitionResult, Request, encode_fetch_response

from ..registry import ApiSpec
from ..state import BrokerState

API_KEY = 1


def _error(
    index: int, code: ErrorCode, high_watermark: int = -1, log_start: int = -1
) -> FetchPartitionResult[FileSlice]:
    return FetchPartitionResult(index, code, high_watermark, high_watermark, log_start, ())


def _read_partition(
    state: BrokerState,
    topic_name: str,
    partition: Any,
    limit: int,
    *,
    first: bool,
    read_committed: bool,
    replica: tuple[int, int] | None,
) -> FetchPartitionResult[FileSlice]:
    index = int(partition.partition)
    found = state.partitions.leader_partition(topic_name, index, int(getattr(partition, "current_leader_epoch", -1)))
    if isinstance(found, ErrorCode):
        return _error(index, found)  # Kafka reports high watermark -1 with any partition error
    partition_log = found.log
    fetch_offset = int(partition.fetch_offset)
    if replica is not None:
        state.partitions.track_follower(topic_name, index, replica, fetch_offset)
    high_watermark = partition_log.high_watermark
    log_start = partition_log.log_start_offset
    max_bytes = min(int(partition.partition_max_bytes), limit)
    try:
        result = partition_log.read_slice(
            fetch_offset,
            max_bytes,
            max_offset=partition_log.log_end_offset if replica is not None else high_watermark,
            min_one_batch=first,
        )
    except log_errors.OffsetOutOfRangeError:
        return _error(index, ErrorCode.offset_out_of_range, high_watermark, log_start)
    records = (result.records,) if result.records is not None else ()
    return FetchPartitionResult(
        index, ErrorCode.none, high_watermark, high_watermark, log_start, records,
        aborted_transactions=() if read_committed else None,
    )  # fmt: skip


def _read_all(
    state: BrokerState, body: Any, max_bytes: int, replica: tuple[int, int] | None
) -> tuple[list[tuple[str, list[FetchPartitionResult[FileSlice]]]], int, bool]:
    read_committed = int(getattr(body, "isolation_level", 0)) == 1
    remaining = max_bytes
    total = 0
    errors = False
    results = []
    for topic in body.topics:
        partitions = []
        for partition in topic.partitions:
            outcome = _read_partition(
                state,
                topic.topic,
                partition,
                max(remaining, 0),
                first=total == 0,
                read_committed=read_committed,
                replica=replica,
            )
            size = sum(len(chunk) for chunk in outcome.records)
            total += size
            remaining -= size
            errors = errors or outcome.error_code != ErrorCode.none
            partitions.append(outcome)
        results.append((topic.topic, partitions))
    return results, total, errors


async def handle(state: BrokerState, request: Request) -> list[bytes | memoryview | FileSlice]:
    body = request.body
    max_bytes = min(int(getattr(body, "max_bytes", 2**31 - 1)), int(state.node.config["fetch.max.bytes"]))
    min_bytes = int(body.min_bytes)
    deadline = time.monotonic() + body.max_wait.total_seconds()
    watched = [(topic.topic, int(p.partition)) for topic in body.topics for p in topic.partitions]
    replica_id = int(getattr(body, "replica_id", -1))
    # The follower's incarnation is taken once, as the fetch arrives: a long poll re-reads its
    # partitions later, when the registration may already be a newer incarnation's.
    replica = state.partitions.follower_identity(replica_id) if replica_id >= 0 else None
    while True:
        results, total, errors = _read_all(state, body, max_bytes, replica)
        remaining = deadline - time.monotonic()
        if total >= min_bytes or errors or remaining <= 0 or not watched:
            break
        await state.node.fetch_waiters.wait(watched, remaining)
    return encode_fetch_response(request.header.api_version, request.header.correlation_id, results)


SPEC = ApiSpec(API_KEY, "Fetch", 4, 12, handle)
