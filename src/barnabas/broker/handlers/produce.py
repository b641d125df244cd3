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
produce to one gets INVALID_TOPIC_EXCEPTION, as in Kafka, whatever the ACLs. A topic the
principal may not WRITE gets TOPIC_AUTHORIZATION_FAILED before anything else is looked at.
Batches are appended as opaque bytes (ARCHITECTURE.md: record batches stay opaque), except that
the log of a compacted topic looks for keyless records: INVALID_RECORD with Kafka's message and
per-record errors (RecordErrors, v8+).
Offsets are assigned while the request is handled, in request order; the segment writes run on
the log's writer thread, and the answer (or, for acks=0, nothing) waits until they landed.
Produce is pipelined: the connection starts on the next request meanwhile, and answers in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import Awaitable
from typing import NamedTuple

from barnabas.protocol import (
    ErrorCode,
    ProducePartitionResult,
    ProduceRequestData,
    Request,
    encode_produce_response,
)
from barnabas.security.acl import AclOperation, ResourceType

from ..partition_service import AppendStarted, append_failure
from ..registry import CLOSE_CONNECTION, ApiSpec, Response
from ..replication import LeaderReplica
from ._authorize import allowed_names
from ._needs import PartitionNeeds

API_KEY = 0


class _Wait(NamedTuple):
    """An acks=all append waiting for the high watermark: where its result goes, and what it waits for."""

    topic_position: int
    partition_position: int
    topic_name: str
    leader: LeaderReplica
    required_offset: int


class _InFlight(NamedTuple):
    """An append whose write has not landed yet: where its result goes."""

    topic_position: int
    partition_position: int
    topic_name: str
    partition: int
    started: AppendStarted


def _body(request: Request) -> ProduceRequestData:
    """The body as the protocol's own Produce decoder reads it: typed already, records as views of the frame.

    Raises:
        TypeError: the body came from elsewhere (``decode_request`` reads every version served, v3-v11).
    """
    body = request.body
    if not isinstance(body, ProduceRequestData):
        raise TypeError(f"a Produce v{request.header.api_version} body must be a ProduceRequestData, not {type(body)}")
    return body


def handle(state: PartitionNeeds, request: Request) -> Response | Awaitable[Response]:
    body = _body(request)
    acks = body.acks
    now_ms = state.node.now_ms()
    results: list[tuple[str, list[ProducePartitionResult]]] = []
    waits: list[_Wait] = []
    in_flight: list[_InFlight] = []
    # WRITE on each topic (KafkaApis.handleProduceRequest); None: authorization is off.
    writable = None
    if state.node.acls is not None:
        writable = allowed_names(state, AclOperation.WRITE, ResourceType.TOPIC, (t.name for t in body.topic_data))
    for topic in body.topic_data:
        partitions: list[ProducePartitionResult] = []
        for data in topic.partition_data:
            if acks not in (-1, 0, 1):
                outcome = append_failure(data.index, ErrorCode.invalid_required_acks)
            elif writable is not None and topic.name not in writable:
                outcome = append_failure(data.index, ErrorCode.topic_authorization_failed)
            elif (known := state.node.topic(topic.name)) is not None and known.internal:
                outcome = append_failure(
                    data.index, ErrorCode.invalid_topic_exception, f"Cannot append to internal topic {topic.name}"
                )
            elif body.transactional_id is not None:
                outcome = append_failure(
                    data.index,
                    ErrorCode.transactional_id_authorization_failed,
                    "transactions are not supported yet",
                )
            else:
                started = state.partitions.begin_append(topic.name, data.index, data.records, acks=acks, now_ms=now_ms)
                if isinstance(started, ProducePartitionResult):
                    outcome = started
                elif started.append.done:
                    position = (len(results), len(partitions))
                    outcome = _settle(state, acks, waits, position, topic.name, data.index, started)
                else:
                    in_flight.append(_InFlight(len(results), len(partitions), topic.name, data.index, started))
                    outcome = append_failure(data.index, ErrorCode.unknown_server_error)  # replaced once it lands
            partitions.append(outcome)
        results.append((topic.name, partitions))
    if in_flight:
        return _respond_when_written(state, request, body, results, waits, in_flight)
    return _respond(state, request, body, results, waits)


def _settle(  # noqa: PLR0917 - where the result goes and what it came from
    state: PartitionNeeds,
    acks: int,
    waits: list[_Wait],
    position: tuple[int, int],
    topic_name: str,
    index: int,
    started: AppendStarted,
) -> ProducePartitionResult:
    """A completed append's result; with acks=all, what it must wait for is added to ``waits``.

    acks=all needs the leader that accepted the batch to lead still once the batch is complete
    (Kafka's DelayedProduce answers NOT_LEADER_OR_FOLLOWER otherwise): a later leader may never
    have received it. The wait is for the end of this batch, or for a duplicate the log end.
    """
    outcome = state.partitions.finish_append(topic_name, index, started)
    leader = started.leader
    if acks != -1 or outcome.error_code != ErrorCode.none:
        return outcome
    if not state.partitions.still_leads(topic_name, index, leader):
        return append_failure(index, ErrorCode.not_leader_or_follower)
    result = started.append.result
    required = started.log.log_end_offset if result.duplicate else result.last_offset + 1
    if started.log.high_watermark < required:
        waits.append(_Wait(*position, topic_name, leader, required))
    return outcome


async def _respond_when_written(  # noqa: PLR0917 - the request, what it asked, and where the results stand
    state: PartitionNeeds,
    request: Request,
    body: ProduceRequestData,
    results: list[tuple[str, list[ProducePartitionResult]]],
    waits: list[_Wait],
    in_flight: list[_InFlight],
) -> Response:
    # One writer thread writes in submission order: once the last write landed, all have.
    for item in reversed(in_flight):
        landed = item.started.append.landed
        if not item.started.append.done and landed is not None and not landed.done():
            # A failed write is not this task's error: completing the appends records it, and
            # their partitions answer KAFKA_STORAGE_ERROR as Kafka does for a failed log write.
            with contextlib.suppress(Exception):
                await asyncio.wrap_future(landed)
    now_ms = state.node.now_ms()
    acks = body.acks
    for item in in_flight:
        if not item.started.append.done:
            item.started.log.complete_appends(now_ms)
        position = (item.topic_position, item.partition_position)
        outcome = _settle(state, acks, waits, position, item.topic_name, item.partition, item.started)
        results[item.topic_position][1][item.partition_position] = outcome
    response = _respond(state, request, body, results, waits)
    if inspect.isawaitable(response):
        return await response
    return response


def _respond(
    state: PartitionNeeds,
    request: Request,
    body: ProduceRequestData,
    results: list[tuple[str, list[ProducePartitionResult]]],
    waits: list[_Wait],
) -> Response | Awaitable[Response]:
    if body.acks == 0:
        failed = any(outcome.error_code != ErrorCode.none for _, partitions in results for outcome in partitions)
        return CLOSE_CONNECTION if failed else None
    if waits:
        return _respond_when_replicated(state, request, body, results, waits)
    return encode_produce_response(request.header.api_version, request.header.correlation_id, results)


async def _respond_when_replicated(
    state: PartitionNeeds,
    request: Request,
    body: ProduceRequestData,
    results: list[tuple[str, list[ProducePartitionResult]]],
    waits: list[_Wait],
) -> Response:
    timeout_s = max(body.timeout_ms, 0) / 1000

    async def settle(item: _Wait) -> None:
        partitions = results[item.topic_position][1]
        outcome = partitions[item.partition_position]
        leader = item.leader
        code = await leader.wait_for_high_watermark(item.required_offset, timeout_s)
        if code is ErrorCode.none and len(leader.isr) < state.node.min_insync(item.topic_name):
            code = ErrorCode.not_enough_replicas_after_append
        if code is not ErrorCode.none:
            partitions[item.partition_position] = append_failure(outcome.partition_index, code)

    await asyncio.gather(*(settle(item) for item in waits))
    return encode_produce_response(request.header.api_version, request.header.correlation_id, results)


SPEC = ApiSpec(API_KEY, "Produce", 0, 11, handle, accept_min=3, pipelined=True)
