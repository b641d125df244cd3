"""with_throttle_time: an encoded answer gets the same bytes its encoder would give with that throttle time."""

from __future__ import annotations

import datetime

import pytest

from barnabas.protocol import (
    ErrorCode,
    FetchPartitionResult,
    ProducePartitionResult,
    decode_response,
    encode_fetch_response,
    encode_produce_response,
    encode_response,
    make,
    response_types,
    with_throttle_time,
)

LIST_GROUPS = 16


@pytest.mark.parametrize("version", [1, 3, 4])  # v1 a plain header, v3+ a flexible one
def test_a_first_field_throttle_is_set_in_place(version: int) -> None:
    types = response_types(LIST_GROUPS, version)
    fields = {"error_code": ErrorCode.none, "groups": ()}
    encoded = encode_response(7, make(types.ListGroupsResponse, throttle_time=datetime.timedelta(0), **fields))
    expected = encode_response(7, make(types.ListGroupsResponse, throttle_time=datetime.timedelta(milliseconds=1234),
                                       **fields))  # fmt: skip
    assert with_throttle_time(LIST_GROUPS, version, encoded, 1234) == expected


@pytest.mark.parametrize("version", [3, 9, 11])
def test_a_produce_answer_is_rewritten_with_the_throttle_after_its_results(version: int) -> None:
    topics = [("t", [ProducePartitionResult(0, 0, 42)])]
    encoded = encode_produce_response(version, 9, topics)
    assert with_throttle_time(0, version, encoded, 500) == encode_produce_response(version, 9, topics,
                                                                                    throttle_time_ms=500)  # fmt: skip


@pytest.mark.parametrize("version", [4, 7, 12])
def test_a_fetch_answer_in_chunks_gets_its_head_patched(version: int) -> None:
    records = [b"x" * 100]
    topics = [("t", [FetchPartitionResult(0, 0, 10, 10, 0, records, -1, None)])]
    chunks = with_throttle_time(1, version, encode_fetch_response(version, 3, topics), 250)
    _, body = decode_response(1, version, b"".join(bytes(c) for c in chunks)[4:])
    assert body.throttle_time == datetime.timedelta(milliseconds=250)
    assert b"".join(bytes(c) for c in chunks) == b"".join(
        bytes(c) for c in encode_fetch_response(version, 3, topics, throttle_time_ms=250)
    )


def test_a_version_without_the_field_is_left_alone() -> None:
    types = response_types(LIST_GROUPS, 0)
    encoded = encode_response(1, make(types.ListGroupsResponse, error_code=ErrorCode.none, groups=()))
    assert with_throttle_time(LIST_GROUPS, 0, encoded, 100) == encoded
