"""The hand-written ProduceRequest encoder against kio: the same bytes for the same request, v3-v11.

Requests are generated (null and empty record sets, several topics, any client id), decoded the
proxy's way (record views) and encoded again in parts; the parts must join to kio's frame, with
each non-empty record set passed through as the very view it was given.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from barnabas.protocol import LocalProtocolError, decode_request, encode_produce_request_parts, encode_request
from barnabas.protocol._produce_request import PRODUCE_REQUEST_VERSIONS, ProduceRequestData

from .test_produce_request import kio_request, names, topics

PRODUCE = 0


@settings(max_examples=150, deadline=None)
@given(
    version=st.sampled_from(list(PRODUCE_REQUEST_VERSIONS)),
    client_id=st.one_of(st.none(), names),
    transactional_id=st.one_of(st.none(), names),
    acks=st.sampled_from([-1, 0, 1]),
    timeout_ms=st.integers(0, 2**31 - 1),
    data=topics,
)
def test_writes_what_kio_writes(  # noqa: PLR0917 - one parameter per generated field
    version: int, client_id: str | None, transactional_id: str | None, acks: int, timeout_ms: int, data: Any
) -> None:
    expected = encode_request(
        PRODUCE, version, 42, client_id, kio_request(version, transactional_id, acks, timeout_ms, data)
    )
    frame = bytearray(expected[4:])
    decoded: ProduceRequestData = decode_request(frame).body
    parts = encode_produce_request_parts(version, 42, client_id, decoded)
    assert b"".join(parts) == expected[4:]
    given_views = [p.records for t in decoded.topic_data for p in t.partition_data if p.records]
    views = [part for part in parts if isinstance(part, memoryview)]
    assert len(views) == len(given_views) and all(a is b for a, b in zip(views, given_views, strict=True))
    assert all(isinstance(part, bytes) or part.obj is frame for part in parts), "only the records are views"


def test_versions_it_cannot_write_are_refused() -> None:
    data = ProduceRequestData(None, 1, 1000, ())
    for version in (2, 12):
        with pytest.raises(LocalProtocolError):
            encode_produce_request_parts(version, 1, "c", data)
    with pytest.raises(LocalProtocolError):
        encode_produce_request_parts(9, 1, "c", ProduceRequestData(None, 1 << 20, 1000, ()))
