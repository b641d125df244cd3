"""The zero-copy split of a Produce and byte-level merge of Fetch answers, checked against the kio path.

For every version the proxy handles (Produce 3-11, Fetch 4-12): a client's request spanning three
leaders is cut the proxy's way (Produce parts around views of the client's frame; Fetch answers
spliced from the brokers' frames) and the kio way (decode, split or merge, encode), and the two
must be the same bytes (kio's encoding is canonical, and so are the answers here) and decode the
same. Record sets are a RecordBatch (views), empty and null; partitions span several topics; one
partition has no leader, one broker does not answer, one partition carries a given error.

The request: ``orders`` partitions 2, 0, 3, 1 (led by brokers 3, 1, none, 2), ``events`` 1, 0
(both broker 2), ``audit`` 0 (broker 3).
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from barnabas.protocol import (
    ErrorCode,
    build_record_batch,
    decode_request,
    decode_response,
    encode_fetch_response,
    encode_produce_request_parts,
    encode_request,
    encode_response,
    find_fetch_entries,
    make,
    request_class,
    response_class,
)
from barnabas.protocol import FetchPartitionResult as Result
from barnabas.proxy.fetch_merge import merge_fetch_entries
from barnabas.proxy.rewrite import rewrite_fetch
from barnabas.proxy.routes import UNDERSTOOD
from barnabas.proxy.split import PARTITIONED, merge, split

from .wire import CLIENT_ID, cluster_view, payload, produce_entity, proxy_nodes

PRODUCE, FETCH = 0, 1
PRODUCE_VERSIONS = range(UNDERSTOOD[PRODUCE][0], UNDERSTOOD[PRODUCE][1] + 1)
FETCH_VERSIONS = range(UNDERSTOOD[FETCH][0], UNDERSTOOD[FETCH][1] + 1)
NOT_LEADER = ErrorCode.not_leader_or_follower

ASKED: list[tuple[str, list[int]]] = [("orders", [2, 0, 3, 1]), ("events", [1, 0]), ("audit", [0])]
LEADERS: dict[tuple[str, int], int | None] = {
    ("orders", 0): 1,
    ("orders", 1): 2,
    ("orders", 2): 3,
    ("orders", 3): None,
    ("events", 0): 2,
    ("events", 1): 2,
    ("audit", 0): 3,
}
DOWN = 3
#: The record sets no one placed or answered hold nothing special; these are empty and null.
EMPTY, NULL = ("orders", 1), ("events", 0)


def place(topic: Any, index: int) -> int | None:
    return LEADERS[(topic, index)]


def records(topic: str, partition: int) -> bytes | None:
    """A RecordBatch of about 700 bytes (a view in the output), or the empty or null record set."""
    if (topic, partition) == EMPTY:
        return b""
    if (topic, partition) == NULL:
        return None
    values = [(f"{topic}-{partition}-{i}".encode(), b"v%d" % i * 100) for i in range(3)]
    return build_record_batch(values, base_timestamp_ms=1_700_000_000_000 + partition)


# -- Produce ---------------------------------------------------------------------------------------


def produce_frame(version: int) -> bytearray:
    """A client's Produce as the proxy reads it: a writable frame (as a large frame's own buffer)."""
    topic_cls = request_class(PRODUCE, version, "TopicProduceData")
    partition_cls = request_class(PRODUCE, version, "PartitionProduceData")
    body = request_class(PRODUCE, version)(
        transactional_id="txn-7" if version % 2 else None,
        acks=-1,
        timeout=datetime.timedelta(milliseconds=1500),
        topic_data=tuple(
            topic_cls(name=name, partition_data=tuple(partition_cls(index=p, records=records(name, p)) for p in ps))
            for name, ps in ASKED
        ),
    )
    return bytearray(payload(encode_request(PRODUCE, version, 7, CLIENT_ID, body)))


def produce_parts(version: int, frame: bytearray) -> dict[int, list[bytes | memoryview]]:
    """The proxy's split: each leader's part around views of ``frame``."""
    data = decode_request(frame).body
    subs, unplaced = split(PARTITIONED[PRODUCE], data, place)
    assert unplaced == [("orders", 3)]
    return {broker: encode_produce_request_parts(version, 0, CLIENT_ID, sub) for broker, sub in subs.items()}


@pytest.mark.parametrize("version", PRODUCE_VERSIONS)
def test_produce_parts_are_the_bytes_kio_writes_for_each_leader(version: int) -> None:
    frame = produce_frame(version)
    kio_subs, unplaced = split(PARTITIONED[PRODUCE], produce_entity(decode_request(frame).body, version), place)
    assert unplaced == [("orders", 3)]
    ours = produce_parts(version, frame)
    assert ours.keys() == kio_subs.keys() == {1, 2, 3}
    for broker, parts in ours.items():
        joined = b"".join(parts)
        assert joined == payload(encode_request(PRODUCE, version, 0, CLIENT_ID, kio_subs[broker])), broker
        assert produce_entity(decode_request(joined).body, version) == kio_subs[broker]


@pytest.mark.parametrize("version", PRODUCE_VERSIONS)
def test_produce_parts_carry_the_records_as_views_of_the_clients_frame(version: int) -> None:
    frame = produce_frame(version)
    sent: dict[bytes, int] = {}
    for parts in produce_parts(version, frame).values():
        assert len(parts[0]) >= 8, "the first part holds the header the relay rewrites"
        views = [part for part in parts if isinstance(part, memoryview)]
        assert all(view.obj is frame for view in views), "a record set was copied"
        for view in views:
            sent[bytes(view)] = sent.get(bytes(view), 0) + 1
        framing = sum(len(part) for part in parts if not isinstance(part, memoryview))
        assert framing < 120, f"{framing} bytes besides the record views"
    placed = [records(t, p) for (t, p), leader in LEADERS.items() if leader is not None]
    assert sent == {r: 1 for r in placed if r}, "every non-empty record set, once, as a view"


# -- Fetch -----------------------------------------------------------------------------------------


def fetch_body(version: int) -> Any:
    """The client's Fetch as the proxy decodes it."""
    topic_cls = request_class(FETCH, version, "FetchTopic")
    partition_cls = request_class(FETCH, version, "FetchPartition")
    body = make(
        request_class(FETCH, version),
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=500),
        min_bytes=1,
        max_bytes=52_428_800,
        isolation_level=1,
        session_id=0,
        session_epoch=-1,
        forgotten_topics_data=(),
        rack_id="r1",
        topics=tuple(
            make(topic_cls, topic=name, partitions=tuple(make(partition_cls, partition=p, fetch_offset=100 + p,
                                                              partition_max_bytes=1 << 20) for p in ps))
            for name, ps in ASKED
        ),
    )  # fmt: skip
    return decode_request(payload(encode_request(FETCH, version, 7, CLIENT_ID, body))).body


def aborted(topic: str, partition: int) -> list[tuple[int, int]] | None:
    return {("orders", 0): [(7, 100), (8, 101)], ("events", 1): []}.get((topic, partition))


def kio_answer(version: int, broker: int, sub: Any) -> bytearray:
    """``broker``'s answer to ``sub`` as kio writes it: topics and partitions in reverse order."""
    topic_cls = response_class(FETCH, version, "FetchableTopicResponse")
    partition_cls = response_class(FETCH, version, "PartitionData")
    aborted_cls = response_class(FETCH, version, "AbortedTransaction")

    def entry(name: str, p: int) -> Any:
        txns = aborted(name, p)
        return make(
            partition_cls, partition_index=p, error_code=ErrorCode.none, high_watermark=1000 + p,
            last_stable_offset=900 + p, log_start_offset=10 + p, preferred_read_replica=-1, records=records(name, p),
            aborted_transactions=None if txns is None else tuple(
                make(aborted_cls, producer_id=pid, first_offset=first) for pid, first in txns
            ),
        )  # fmt: skip

    topics = tuple(
        make(
            topic_cls, topic=t.topic, partitions=tuple(entry(t.topic, int(p.partition)) for p in reversed(t.partitions))
        )
        for t in reversed(sub.topics)
    )
    response = make(
        response_class(FETCH, version),
        throttle_time=datetime.timedelta(milliseconds=broker * 10),
        error_code=ErrorCode.none,
        session_id=500 + broker,
        responses=topics,
    )
    return bytearray(payload(encode_response(broker, response)))


def broker_answer(version: int, broker: int, sub: Any) -> bytearray:
    """``broker``'s answer to ``sub`` as a barnabas broker writes it (its hand-written encoder)."""
    topics = [
        (t.topic, [
            Result(int(p.partition), 0, 1000 + int(p.partition), 900 + int(p.partition), 10 + int(p.partition),
                   [r] if (r := records(t.topic, int(p.partition))) else [],
                   aborted_transactions=aborted(t.topic, int(p.partition)))
            for p in t.partitions
        ])
        for t in sub.topics
    ]  # fmt: skip
    chunks = encode_fetch_response(version, broker, topics, throttle_time_ms=broker * 10, session_id=500 + broker)
    return bytearray(payload(b"".join(bytes(c) for c in chunks)))


ANSWERS = {"kio": kio_answer, "broker": broker_answer}


def answers_to(version: int, encoder: str) -> tuple[Any, list[bytearray], dict[tuple[Any, int], ErrorCode]]:
    """The client's Fetch, the answers of brokers 1 and 2, and the failed partitions (broker 3's, unplaced)."""
    body = fetch_body(version)
    subs, unplaced = split(PARTITIONED[FETCH], body, place)
    answers = [ANSWERS[encoder](version, broker, sub) for broker, sub in subs.items() if broker != DOWN]
    failed = dict.fromkeys(unplaced, NOT_LEADER)
    failed.update({(t.topic, int(p.partition)): NOT_LEADER for t in subs[DOWN].topics for p in t.partitions})
    failed[("audit", 0)] = ErrorCode.unknown_topic_or_partition
    return body, answers, failed


def kio_merge(version: int, body: Any, answers: list[bytearray], failed: dict[tuple[Any, int], ErrorCode]) -> bytes:
    """What the router answered before the zero-copy merge: decode, merge, rewrite, encode."""
    decoded = [decode_response(FETCH, version, answer)[1] for answer in answers]
    merged = merge(PARTITIONED[FETCH], version, body, decoded, failed)
    merged = rewrite_fetch(merged, version, cluster_view(), proxy_nodes(), lambda topic: topic.topic)
    return encode_response(7, merged)


def spliced(version: int, body: Any, answers: list[bytearray], failed: dict[tuple[Any, int], ErrorCode]) -> list[Any]:
    found = []
    for answer in answers:
        entries = find_fetch_entries(answer, version)
        assert entries is not None, "an answer naming no node must be spliceable"
        found.append((answer, entries))
    return merge_fetch_entries(version, 7, body, found, failed)


@pytest.mark.parametrize("encoder", ANSWERS)
@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_fetch_merge_is_the_bytes_kio_writes(version: int, encoder: str) -> None:
    body, answers, failed = answers_to(version, encoder)
    chunks = spliced(version, body, answers, failed)
    ours = b"".join(chunks)
    expected = kio_merge(version, body, answers, failed)
    assert decode_response(FETCH, version, payload(ours)) == decode_response(FETCH, version, payload(expected))
    assert ours == expected
    client_sees = decode_response(FETCH, version, payload(ours))[1]
    assert [(t.topic, [p.partition_index for p in t.partitions]) for t in client_sees.responses] == ASKED
    codes = {(t.topic, p.partition_index): p.error_code for t in client_sees.responses for p in t.partitions}
    assert codes == {
        ("orders", 2): NOT_LEADER,  # broker 3 did not answer
        ("orders", 0): ErrorCode.none,
        ("orders", 3): NOT_LEADER,  # no leader
        ("orders", 1): ErrorCode.none,
        ("events", 1): ErrorCode.none,
        ("events", 0): ErrorCode.none,
        ("audit", 0): ErrorCode.unknown_topic_or_partition,
    }
    assert client_sees.throttle_time == datetime.timedelta(milliseconds=20)  # the slowest answer's
    if version >= 7:
        assert (client_sees.session_id, client_sees.error_code) == (0, ErrorCode.none)


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_fetch_merge_without_answers_is_kios(version: int) -> None:
    body = fetch_body(version)
    ours = b"".join(merge_fetch_entries(version, 7, body, [], {}))
    expected = encode_response(7, merge(PARTITIONED[FETCH], version, body, [], {}))
    assert ours == expected


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_fetch_merge_passes_the_records_as_views_of_the_brokers_frames(version: int) -> None:
    body, answers, failed = answers_to(version, "broker")
    chunks = spliced(version, body, answers, failed)
    views = [c for c in chunks if isinstance(c, memoryview) and any(c.obj is answer for answer in answers)]
    framing = sum(len(chunk) for chunk in chunks) - sum(len(view) for view in views)
    assert framing < 250, f"{framing} bytes written besides the brokers' entries"
    in_views = b"".join(bytes(view) for view in views)
    answered = [(t, p) for (t, p), leader in LEADERS.items() if leader not in (None, DOWN)]
    for topic, partition in answered:
        record_set = records(topic, partition)
        if record_set:
            assert in_views.count(record_set) == 1, (topic, partition)
