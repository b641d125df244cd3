"""The proxy's partitioned requests: a client's request cut by partition leader, then answers merged back.

Input: a request frame of Produce, Fetch, ListOffsets, DeleteRecords or OffsetForLeaderEpoch (the
APIs the proxy splits), as a client sends it. It is decoded as the proxy decodes it
(``decode_request``, documented: RemoteProtocolError) and cut by a placement of each (topic,
partition) on one of three brokers or on none (``split``). Every sub-request must encode for the
broker (``encode_request``; a Produce's around its record views, ``encode_produce_request_parts``)
and decode again with its partitions and, for a Produce, the same record bytes;
every partition of the request must be in exactly one sub-request or among the unplaced. Then the
answers are merged (``merge``), once with no broker answering and once with each broker answering
for its sub-request, and the merged answer must encode and hold every requested partition once, in
the request's order. None of those after the decoder documents an error.
"""

from __future__ import annotations

import zlib
from collections.abc import Hashable
from typing import Any

from barnabas.protocol import (
    ErrorCode,
    ProduceRequestData,
    RemoteProtocolError,
    decode_request,
    decode_response,
    encode_produce_request_parts,
    encode_request,
    encode_response,
)
from barnabas.proxy.routes import UNDERSTOOD
from barnabas.proxy.split import PARTITIONED, Partitioned, merge, partition_index, split
from tests.fuzz.harness import Target, attempt


def _place(topic: Any, index: int) -> Hashable | None:
    broker = zlib.crc32(f"{topic}/{index}".encode()) % 4
    return None if broker == 3 else 101 + broker


def _partitions(spec: Partitioned, body: Any) -> list[tuple[Any, int]]:
    return [
        (getattr(topic, spec.topic), partition_index(spec, p))
        for topic in getattr(body, spec.topics)
        for p in getattr(topic, spec.partitions)
    ]


def _answered(spec: Partitioned, response: Any) -> list[tuple[Any, int]]:
    return [
        (getattr(topic, spec.topic), int(getattr(p, spec.response_index)))
        for topic in getattr(response, spec.response_topics)
        for p in getattr(topic, spec.response_partitions)
    ]


def _records(body: Any) -> list[bytes | None]:
    return [
        None if p.records is None else bytes(p.records)
        for topic in getattr(body, "topic_data", ())
        for p in topic.partition_data
    ]


def _sub_frame(api_key: int, version: int, client_id: str | None, sub: Any) -> bytes:
    """The sub-request as its broker receives it (without the size prefix)."""
    if isinstance(sub, ProduceRequestData):
        return b"".join(bytes(part) for part in encode_produce_request_parts(version, 7, client_id, sub))
    return encode_request(api_key, version, 7, client_id, sub)[4:]


def run(data: bytes) -> None:
    request = attempt(lambda: decode_request(data), RemoteProtocolError)
    if request is None:
        return
    api_key, version = request.header.api_key, request.header.api_version
    spec = PARTITIONED.get(api_key)
    if spec is None or not UNDERSTOOD[api_key][0] <= version <= UNDERSTOOD[api_key][1]:
        return
    entity = request.body
    asked = _partitions(spec, entity)
    subs, unplaced = split(spec, entity, _place)
    spread: list[tuple[Any, int]] = list(unplaced)
    answers = []
    for sub in subs.values():
        again = decode_request(_sub_frame(api_key, version, request.header.client_id, sub)).body
        assert _partitions(spec, again) == _partitions(spec, sub), "a sub-request does not survive the wire"
        assert _records(again) == _records(sub), "a sub-request's records do not survive the wire"
        spread += _partitions(spec, sub)
        answers.append(merge(spec, version, sub, [], {}))  # the broker's answer: every partition refused
    assert sorted(spread, key=repr) == sorted(asked, key=repr), "split lost or duplicated a partition"
    failed = dict.fromkeys(unplaced, ErrorCode.not_leader_or_follower)
    for merged in (merge(spec, version, entity, [], failed), merge(spec, version, entity, answers, failed)):
        _, reread = decode_response(api_key, version, encode_response(7, merged)[4:])
        assert _answered(spec, reread) == asked, "the merged answer does not answer the request in order"


TARGET = Target("proxy_split", run, __doc__ or "", max_len=8192)
