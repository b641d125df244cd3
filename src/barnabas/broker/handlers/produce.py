"""Produce (key 0): validate each partition's batch, append it, answer with its offsets.

Kafka semantics kept: acks must be -1, 0 or 1 (INVALID_REQUIRED_ACKS); a partition this
broker does not lead gets NOT_LEADER_OR_FOLLOWER; acks=all with fewer in-sync replicas than
``min.insync.replicas`` gets NOT_ENOUGH_REPLICAS before anything is written; the log checks the
batch itself (Kafka's order, error codes carried by its exceptions); with acks=0 there is no
response, and an error closes the connection (the client's only way to learn of it).
acks=all answers once the high watermark has passed the batch, i.e. every in-sync replica has
it (Kafka's DelayedProduce): REQUEST_TIMED_OUT after the request's timeout,
NOT_LEADER_OR_FOLLOWER if leadership moves meanwhile, and NOT_ENOUGH_REPLICAS_AFTER_APPEND if
the ISR shrank below ``min.insync.replicas`` while it waited.
Internal topics (``__consumer_offsets``) are written only by their coordinator: a client's
produce to one gets INVALID_TOPIC_EXCEPTION, as in Kafka.
Batches are appended as opaque bytes (ARCHITECTURE.md: record batches stay opaque), except that
the log of a compacted topic looks for keyless records: INVALID_RECORD with Kafka's message and
per-record errors (RecordErrors, v8+).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import NamedTuple

from barnabas.protocol import (
    CorruptRecordError,
    ErrorCode,
    KafkaRecordError,
    ProducePartitionResult,
    Request,
    encode_produce_response,
)

from ..errors import error_code_for
from ..registry import CLOSE_CONNECTION, ApiSpec, Response
from ..state import BrokerState

API_KEY = 0
log = logging.getLogger(__name__)


def _failure(
    index: int, code: ErrorCode, message: str | None = None, record_errors: tuple[tuple[int, str | None], ...] = ()
) -> ProducePartitionResult:
    return ProducePartitionResult(index, code, -1, -1, -1, message, record_errors)


def _min_insync(state: BrokerState, topic_name: str) -> int:
    overrides = state.topics.topics[topic_name].config
    return int(overrides.get("min.insync.replicas", state.config["min.insync.replicas"]))


class _Pending(NamedTuple):
    """An acks=all append waiting for the high watermark: where its result goes, and what it waits for."""

    topic_position: int
    partition_position: int
    topic_name: str
    required_offset: int


def append_partition(
    state: BrokerState, topic_name: str, index: int, records: bytes | None, *, acks: int, now_ms: int
) -> ProducePartitionResult:
    partition = state.leader_partition(topic_name, index)
    if isinstance(partition, ErrorCode):
        return _failure(index, partition)
    partition_state, partition_log = partition.state, partition.log
    if acks == -1:
        min_isr = _min_insync(state, topic_name)
        if len(partition_state.isr) < min_isr:
            return _failure(
                index,
                ErrorCode.not_enough_replicas,
                f"ISR has {len(partition_state.isr)} replicas, min.insync.replicas is {min_isr}",
            )
    try:
        result = partition_log.append_as_leader(bytearray(records or b""), partition_state.leader_epoch, now_ms)
    except CorruptRecordError as exc:
        log.warning("rejected a batch for %s-%d: %s", topic_name, index, exc)
        return _failure(index, ErrorCode.corrupt_message, str(exc))
    except Exception as exc:
        code = error_code_for(exc)
        if code is ErrorCode.unknown_server_error or code is ErrorCode.kafka_storage_error:
            log.exception("append to %s-%d failed", topic_name, index)
        record_errors = exc.record_errors if isinstance(exc, KafkaRecordError) else ()
        return _failure(index, code, str(exc) or None, record_errors)
    if state.replicas is not None and (leader := state.replicas.leader(topic_name, index)) is not None:
        leader.maybe_advance_high_watermark()
    return ProducePartitionResult(
        index, ErrorCode.none, result.base_offset, result.log_append_time_ms, result.log_start_offset
    )


def handle(state: BrokerState, request: Request) -> Response | Awaitable[Response]:
    body = request.body
    acks = int(body.acks)
    now_ms = state.now_ms()
    results: list[tuple[str, list[ProducePartitionResult]]] = []
    pending: list[_Pending] = []
    failed = False
    for topic in body.topic_data:
        partitions: list[ProducePartitionResult] = []
        for data in topic.partition_data:
            if acks not in (-1, 0, 1):
                outcome = _failure(data.index, ErrorCode.invalid_required_acks)
            elif (known := state.topic(topic.name)) is not None and known.internal:
                outcome = _failure(
                    data.index, ErrorCode.invalid_topic_exception, f"Cannot append to internal topic {topic.name}"
                )
            elif body.transactional_id is not None:
                outcome = _failure(
                    data.index,
                    ErrorCode.transactional_id_authorization_failed,
                    "transactions are not supported yet",
                )
            else:
                outcome = append_partition(state, topic.name, data.index, data.records, acks=acks, now_ms=now_ms)
                if outcome.error_code == ErrorCode.none and outcome.base_offset >= 0:
                    state.fetch_waiters.notify((topic.name, data.index))
                    if acks == -1:
                        required = _required_offset(state, topic.name, data.index)
                        if required is not None:
                            pending.append(_Pending(len(results), len(partitions), topic.name, required))
            failed = failed or outcome.error_code != ErrorCode.none
            partitions.append(outcome)
        results.append((topic.name, partitions))
    if acks == 0:
        return CLOSE_CONNECTION if failed else None
    if pending:
        return _respond_when_replicated(state, request, results, pending)
    return encode_produce_response(request.header.api_version, request.header.correlation_id, results)


def _required_offset(state: BrokerState, topic: str, index: int) -> int | None:
    """The high watermark the append just made needs, or None when it has it already.

    Handling is synchronous up to here, so the log end offset is the end of this batch (or,
    for a duplicate, past its original): waiting for it is exact or conservative.
    """
    leader = state.replicas.leader(topic, index) if state.replicas is not None else None
    if leader is None:
        return None
    required = leader.log.log_end_offset
    return None if leader.log.high_watermark >= required else required


async def _respond_when_replicated(
    state: BrokerState,
    request: Request,
    results: list[tuple[str, list[ProducePartitionResult]]],
    pending: list[_Pending],
) -> Response:
    timeout_s = max(int(request.body.timeout.total_seconds() * 1000), 0) / 1000

    async def settle(item: _Pending) -> None:
        topic_name, partitions = results[item.topic_position]
        outcome = partitions[item.partition_position]
        leader = state.replicas.leader(topic_name, outcome.partition_index) if state.replicas is not None else None
        code = (
            ErrorCode.not_leader_or_follower
            if leader is None
            else await leader.wait_for_high_watermark(item.required_offset, timeout_s)
        )
        if code is ErrorCode.none and leader is not None and len(leader.isr) < _min_insync(state, topic_name):
            code = ErrorCode.not_enough_replicas_after_append
        if code is not ErrorCode.none:
            partitions[item.partition_position] = _failure(outcome.partition_index, code)

    await asyncio.gather(*(settle(item) for item in pending))
    return encode_produce_response(request.header.api_version, request.header.correlation_id, results)


SPEC = ApiSpec(API_KEY, "Produce", 0, 11, handle, accept_min=3)
