"""find_fetch_entries: each partition's entry in a FetchResponse as a byte range, or None when it must be decoded.

Frames are the broker's own and kio's (as in test_fetch_response_scan) for every version 4-12. The
entries must be what decoding finds, in the frame's order, each range running from its partition
index to the next entry; and the walk must refuse (None) exactly where the scan says a node may be
named: a preferred read replica, any tagged field, a broken frame.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest

from barnabas.protocol import (
    LocalProtocolError,
    decode_response,
    encode_fetch_response_entries,
    fetch_response_names_nodes,
    find_fetch_entries,
    make,
    response_class,
)

from .test_fetch_response_scan import VERSIONS, broker_frame, kio_frame

FETCH = 1


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("make_frame", [broker_frame, kio_frame])
def test_entries_are_what_decoding_finds(version: int, make_frame: Callable[[int], bytes]) -> None:
    frame = make_frame(version)
    entries = find_fetch_entries(frame, version)
    assert entries is not None
    _, decoded = decode_response(FETCH, version, frame)
    assert [(name, [(e.partition_index, e.error_code) for e in es]) for name, es in entries.topics] == [
        (t.topic, [(p.partition_index, p.error_code) for p in t.partitions]) for t in decoded.responses
    ]
    assert entries.throttle_time_ms == decoded.throttle_time.total_seconds() * 1000
    for _, es in entries.topics:
        for entry, following in itertools.pairwise(es):
            assert entry.end == following.start, "entries tile their topic"
        assert int.from_bytes(frame[es[0].start : es[0].start + 4], "big") == es[0].partition_index


@pytest.mark.parametrize("version", VERSIONS)
def test_the_entries_of_a_frame_reassemble_it(version: int) -> None:
    frame = broker_frame(version)
    entries = find_fetch_entries(frame, version)
    assert entries is not None
    topics = [(name, len(es), [memoryview(frame)[e.start : e.end] for e in es]) for name, es in entries.topics]
    chunks = encode_fetch_response_entries(
        version, 99, topics, throttle_time_ms=0, error_code=entries.error_code, session_id=entries.session_id
    )
    assert b"".join(chunks)[4:] == frame


@pytest.mark.parametrize("version", [11, 12])
def test_a_preferred_read_replica_is_refused(version: int) -> None:
    assert find_fetch_entries(broker_frame(version, replica=2), version) is None
    assert find_fetch_entries(kio_frame(version, preferred_read_replica=1), version) is None


def test_tagged_fields_are_refused() -> None:
    leader = make(response_class(FETCH, 12, "LeaderIdAndEpoch"), leader_id=2, leader_epoch=4)
    diverging = make(response_class(FETCH, 12, "EpochEndOffset"), epoch=3, end_offset=17)
    for frame in (kio_frame(12, current_leader=leader), kio_frame(12, diverging_epoch=diverging)):
        assert fetch_response_names_nodes(frame, 12) is True
        assert find_fetch_entries(frame, 12) is None


@pytest.mark.parametrize("version", [4, 11, 12])
def test_a_frame_that_does_not_walk_is_refused(version: int) -> None:
    frame = broker_frame(version)
    for cut in range(len(frame) - 1, 4, -1):
        assert find_fetch_entries(frame[:cut], version) is None, f"truncated at {cut}"
    assert find_fetch_entries(frame + b"\x00", version) is None, "bytes left over"
    assert find_fetch_entries(frame, 13) is None, "a version it does not walk"


def test_versions_it_cannot_write_are_refused() -> None:
    with pytest.raises(LocalProtocolError):
        encode_fetch_response_entries(13, 1, [], throttle_time_ms=0, error_code=0, session_id=0)
