"""fetch_response_names_nodes: answers the proxy may relay untouched, found without decoding records.

Frames are the broker's own (encode_fetch_response) and kio's (encode_response) for every version 4-12;
the scan must say "names no node" only when decoding would find none, and "names a node" for a
preferred read replica, any tagged field (a current leader, a diverging epoch) or a broken frame.
"""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import pytest

from barnabas.protocol import (
    ErrorCode,
    FetchPartitionResult,
    build_record_batch,
    encode_fetch_response,
    encode_response,
    fetch_response_names_nodes,
    make,
    response_class,
)

VERSIONS = range(4, 13)


def payload(chunks: list[Any]) -> bytes:
    """The frame without its size prefix, as a proxy receives it."""
    return b"".join(bytes(c) for c in chunks)[4:]


def broker_frame(version: int, *, replica: int = -1) -> bytes:
    records = build_record_batch([(b"k", b"v" * 300)], base_timestamp_ms=1)
    topics = [
        ("alpha", [
            FetchPartitionResult(0, 0, 10, 10, 0, [records], aborted_transactions=None),
            FetchPartitionResult(1, 0, 5, 5, 0, [], aborted_transactions=[(7, 3), (8, 4)]),
        ]),
        ("beta", [FetchPartitionResult(2, 6, -1, -1, -1, [], preferred_read_replica=replica)]),
    ]  # fmt: skip
    return payload(encode_fetch_response(version, 99, topics))


def kio_frame(version: int, **partition_fields: Any) -> bytes:
    partition_cls = response_class(1, version, "PartitionData")
    topic_cls = response_class(1, version, "FetchableTopicResponse")
    partition = make(
        partition_cls,
        partition_index=0,
        error_code=ErrorCode.none,
        high_watermark=3,
        last_stable_offset=3,
        log_start_offset=0,
        aborted_transactions=None,
        records=build_record_batch([(None, b"x")], base_timestamp_ms=1),
        **partition_fields,
    )
    response = make(
        response_class(1, version),
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        session_id=0,
        responses=(make(topic_cls, topic="t", topic_id=uuid.uuid4(), partitions=(partition,)),),
    )
    return encode_response(5, response)[4:]


@pytest.mark.parametrize("version", VERSIONS)
def test_the_brokers_own_answers_name_no_node(version: int) -> None:
    assert fetch_response_names_nodes(broker_frame(version), version) is False


@pytest.mark.parametrize("version", VERSIONS)
def test_kio_answers_without_node_fields_name_no_node(version: int) -> None:
    assert fetch_response_names_nodes(kio_frame(version), version) is False


@pytest.mark.parametrize("version", [11, 12])
def test_a_preferred_read_replica_names_a_node(version: int) -> None:
    assert fetch_response_names_nodes(broker_frame(version, replica=2), version) is True
    assert fetch_response_names_nodes(kio_frame(version, preferred_read_replica=1), version) is True


def test_a_current_leader_names_a_node() -> None:
    leader = make(response_class(1, 12, "LeaderIdAndEpoch"), leader_id=2, leader_epoch=4)
    assert fetch_response_names_nodes(kio_frame(12, current_leader=leader), 12) is True


def test_any_tagged_field_counts_as_naming_a_node() -> None:
    diverging = make(response_class(1, 12, "EpochEndOffset"), epoch=3, end_offset=17)
    assert fetch_response_names_nodes(kio_frame(12, diverging_epoch=diverging), 12) is True


@pytest.mark.parametrize("version", [4, 11, 12])
def test_a_frame_that_does_not_walk_counts_as_naming_a_node(version: int) -> None:
    frame = broker_frame(version)
    assert fetch_response_names_nodes(frame[:-7], version) is True, "truncated"
    assert fetch_response_names_nodes(frame + b"\x00", version) is True, "bytes left over"
    assert fetch_response_names_nodes(frame, 13) is True, "a version it does not walk"
