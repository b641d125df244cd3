"""The hand-written ProduceRequest decoder against kio: the same fields from the same bytes, v3-v11."""

from __future__ import annotations

import datetime
import importlib
import io
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.serial import entity_reader, entity_writer

from barnabas.protocol import RemoteProtocolError, decode_request
from barnabas.protocol._produce_request import PRODUCE_REQUEST_VERSIONS, decode_produce_request

names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=20)
records = st.one_of(st.none(), st.binary(max_size=300))
partitions = st.lists(st.tuples(st.integers(-(2**31), 2**31 - 1), records), max_size=4)
topics = st.lists(st.tuples(names, partitions), max_size=4)


def kio_request(version: int, transactional_id: str | None, acks: int, timeout_ms: int, data: Any) -> Any:
    module = importlib.import_module(f"kio.schema.produce.v{version}.request")
    return module.ProduceRequest(
        transactional_id=transactional_id,
        acks=acks,
        timeout=datetime.timedelta(milliseconds=timeout_ms),
        topic_data=tuple(
            module.TopicProduceData(
                name=name,
                partition_data=tuple(module.PartitionProduceData(index=i, records=r) for i, r in parts),
            )
            for name, parts in data
        ),
    )


def encode(entity: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


def as_plain(entity: Any, *, ours: bool) -> tuple[Any, ...]:
    timeout = entity.timeout_ms if ours else entity.timeout // datetime.timedelta(milliseconds=1)
    return (
        entity.transactional_id,
        int(entity.acks),
        timeout,
        [
            (t.name, [(int(p.index), None if p.records is None else bytes(p.records)) for p in t.partition_data])
            for t in entity.topic_data
        ],
    )


@settings(max_examples=150, deadline=None)
@given(
    version=st.sampled_from(list(PRODUCE_REQUEST_VERSIONS)),
    transactional_id=st.one_of(st.none(), names),
    acks=st.sampled_from([-1, 0, 1, 7]),
    timeout_ms=st.integers(0, 2**31 - 1),
    data=topics,
    writable=st.booleans(),
)
def test_decodes_what_kio_decodes(  # noqa: PLR0917 - one parameter per generated field
    version: int, transactional_id: str | None, acks: int, timeout_ms: int, data: Any, writable: bool
) -> None:
    entity = kio_request(version, transactional_id, acks, timeout_ms, data)
    body = encode(entity)
    prefix = b"\x01\x02\x03"  # the decoder starts where the request header ended
    frame = bytearray(prefix + body) if writable else prefix + body
    ours = decode_produce_request(frame, len(prefix), version)
    theirs, _ = entity_reader(type(entity))(body, 0)
    assert as_plain(ours, ours=True) == as_plain(theirs, ours=False)


def test_records_are_views_of_a_bytearray_frame() -> None:
    body = encode(kio_request(9, None, 1, 1000, [("orders", [(0, b"batch-bytes")])]))
    frame = bytearray(body)
    view = decode_produce_request(frame, 0, 9).topic_data[0].partition_data[0].records
    assert isinstance(view, memoryview) and not view.readonly
    view[0:5] = b"BATCH"  # patching the records patches the frame: no copy in between
    assert b"BATCH-bytes" in frame


def test_unknown_tagged_fields_are_skipped() -> None:
    body = encode(kio_request(9, None, 1, 1000, [("orders", [(3, b"abc")])]))
    assert body.endswith(b"\x00\x00\x00")  # partition, topic and body tagged fields, all empty
    tagged = body[:-3] + b"\x01\x07\x02hi" + b"\x01\x09\x00" + b"\x02\x01\x01x\x02\x01y"
    decoded = decode_produce_request(tagged, 0, 9)
    assert decoded.topic_data[0].name == "orders"
    assert bytes(decoded.topic_data[0].partition_data[0].records or b"") == b"abc"


@pytest.mark.parametrize("version", [7, 9])
def test_truncated_bodies_are_protocol_errors(version: int) -> None:
    body = encode(kio_request(version, "tx", 1, 1000, [("orders", [(0, b"x" * 50)])]))
    for cut in range(len(body)):
        with pytest.raises(RemoteProtocolError):
            decode_produce_request(body[:cut], 0, version)


def test_negative_lengths_are_protocol_errors() -> None:
    body = struct.pack(">hhii", -1, 1, 1000, 1) + struct.pack(">h", 1) + b"t" + struct.pack(">ii", 1, 0)
    assert decode_produce_request(body + struct.pack(">i", -1), 0, 7).topic_data[0].partition_data[0].records is None
    with pytest.raises(RemoteProtocolError):
        decode_produce_request(body + struct.pack(">i", -2), 0, 7)
    with pytest.raises(RemoteProtocolError):
        decode_produce_request(struct.pack(">hhii", -1, 1, 1000, -3), 0, 7)


def test_decode_request_uses_it_for_produce() -> None:
    body = encode(kio_request(7, None, -1, 1500, [("orders", [(1, b"r")])]))
    header = struct.pack(">hhih", 0, 7, 99, 1) + b"c"
    request = decode_request(bytearray(header + body))
    assert request.header.correlation_id == 99
    assert request.body.timeout_ms == 1500 and request.body.acks == -1
    assert bytes(request.body.topic_data[0].partition_data[0].records) == b"r"
