"""Produce (key 0): validate each partition's batch, append it, answer with its offsets.

Kafka semantics kept: acks must be -1, 0 or 1 (INVALID_REQUIRED_ACKS); a partition this
broker does not lead gets NOT_LEADER_OR_FOLLOWER; acks=all with fewer in-sync replicas than
``min.insync.replicas`` gets NOT_ENOUGH_REPLICAS before anything is written; the log checks the
batch itself (Kafka's order, error codes carried by its exceptions); with acks=0 there is no
response, and an error closes the connection (the client's only way to learn of it).
Batches are appended as opaque bytes (ARCHITECTURE.md: record batches stay opaque).
"""

from __future__ import annotations

import logging

from barnabas.protocol import (
    CorruptRecordError,
    ErrorCode,
    ProducePartitionResult,
    Request,
    encode_produce_response,
)

from ..errors import error_code_for
from ..registry import CLOSE_CONNECTION, ApiSpec, Response
from ..state import BrokerState

API_KEY = 0
log = logging.getLogger(__name__)


def _failure(index: int, code: ErrorCode, message: str | None = None) -> ProducePartitionResult:
    return ProducePartitionResult(index, code, -1, -1, -1, message)


def append_partition(
    state: BrokerState, topic_name: str, index: int, records: bytes | None, *, acks: int, now_ms: int
) -> ProducePartitionResult:
    partition = state.leader_partition(topic_name, index)
    if isinstance(partition, ErrorCode):
        return _failure(index, partition)
    partition_state, partition_log = partition.state, partition.log
    if acks == -1:
        overrides = state.topics.topics[topic_name].config
        min_isr = int(overrides.get("min.insync.replicas", state.config["min.insync.replicas"]))
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
        return _failure(index, code, str(exc) or None)
    return ProducePartitionResult(
        index, ErrorCode.none, result.base_offset, result.log_append_time_ms, result.log_start_offset
    )


def handle(state: BrokerState, request: Request) -> Response:
    body = request.body
    acks = int(body.acks)
    now_ms = state.now_ms()
    results = []
    failed = False
    for topic in body.topic_data:
        partitions = []
        for data in topic.partition_data:
            if acks not in (-1, 0, 1):
                outcome = _failure(data.index, ErrorCode.invalid_required_acks)
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
            failed = failed or outcome.error_code != ErrorCode.none
            partitions.append(outcome)
        results.append((topic.name, partitions))
    if acks == 0:
        return CLOSE_CONNECTION if failed else None
    return encode_produce_response(request.header.api_version, request.header.correlation_id, results)


SPEC = ApiSpec(API_KEY, "Produce", 0, 11, handle, accept_min=3)
