"""Absurd declared sizes are refused before anything is allocated or looped over for them.

A frame of a few bytes may declare an array of 2^32 - 1 elements, a string of 2^31 - 1 bytes or
100,000 tagged fields. kio 0.6.5's native reader reserves room for a declared array before reading
it (32 GiB for 2^32 - 1 elements), and a refused reservation aborts the process: one frame would
take the broker down. So every decoder refuses, at once and with its documented error, an array
declaring more elements than the bytes left could hold or more than 1,000,000, and a tagged-field
section of more than 10,000 fields (Kafka 4.4's limits); record batches refuse a record count their
records section cannot hold, and snappy data an uncompressed length it could never expand to (cramjam
allocates it first). A null array where the schema has none is refused as Kafka refuses it.

The cases that would make native code allocate run in a child process under an address-space limit,
so a reservation by declared size shows as a crash of that child rather than of the test run.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import time
from typing import Any

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from barnabas.protocol import (
    CorruptRecordError,
    RemoteProtocolError,
    build_record_batch,
    decode_batch_records,
    decode_request,
    decode_response,
    fetch_response_names_nodes,
    scan_record_keys,
)
from barnabas.protocol._declared_sizes import check_declared_sizes
from barnabas.protocol._produce_request import decode_produce_request
from tests.fuzz.kio_samples import ALL_SCHEMAS, encode_body, sample_entity

INT32_MAX = 2**31 - 1
PAD = b"\x00" * 900  # what a crafted 1 KiB frame carries after its declarations


def uvarint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def header(api_key: int, version: int, *, flexible: bool, tags: bytes = b"\x00") -> bytes:
    return struct.pack(">hhih", api_key, version, 7, 1) + b"c" + (tags if flexible else b"")


#: Crafted request frames, each about 1 KiB, that kio would read by declared size.
KIO_REQUESTS = {
    "Metadata v1, 2^31-1 topics": header(3, 1, flexible=False) + struct.pack(">i", INT32_MAX) + PAD,
    "Metadata v9, 2^32-1 topics": header(3, 9, flexible=True) + uvarint(2**32) + PAD,
    "Fetch v4, 2^31-1 topics": header(1, 4, flexible=False) + struct.pack(">iiiib", -1, 0, 0, 0, 0)
    + struct.pack(">i", INT32_MAX) + PAD,
    "Fetch v12, a topic of 2^32-1 partitions": header(1, 12, flexible=True)
    + struct.pack(">iiiibii", -1, 0, 0, 0, 0, 0, -1) + uvarint(2) + uvarint(2) + b"t" + uvarint(2**32) + PAD,
    "ElectLeaders v0, 2^31-1 int32 partitions": header(43, 0, flexible=False) + struct.pack(">ih", 1, 1) + b"t"
    + struct.pack(">i", INT32_MAX) + PAD,
    "Metadata v9, 100,000 tagged fields": header(3, 9, flexible=True) + uvarint(1) + b"\x00\x00\x00"
    + uvarint(100_000) + b"\x00\x00" * 400,
    "Metadata v9, a tagged field of 2^31 bytes": header(3, 9, flexible=True) + uvarint(1) + b"\x00\x00\x00"
    + uvarint(1) + uvarint(0) + uvarint(2**31) + PAD,
    "SaslAuthenticate v1, 2^31-1 auth bytes": header(36, 1, flexible=False) + struct.pack(">i", INT32_MAX) + PAD,
    "Metadata v12, a topic name of 2^31-1 bytes": header(3, 12, flexible=True) + uvarint(2) + bytes(16)
    + uvarint(2**31) + PAD,
}  # fmt: skip

#: Crafted response frames (correlation id, then the body), for the proxy's and a follower's decoder.
KIO_RESPONSES = {
    "Metadata v9 response, 2^32-1 brokers": (3, 9, struct.pack(">i", 7) + b"\x00" + bytes(4) + uvarint(2**32) + PAD),
    "Fetch v11 response, 2^31-1 topics": (1, 11, struct.pack(">iihi", 7, 0, 0, 0) + struct.pack(">i", INT32_MAX) + PAD),
}

_CHILD = r"""
import json, resource, sys, time
from barnabas.protocol import KafkaRecordError, RemoteProtocolError, decode_request, decode_response
from barnabas.protocol import decode_batch_records, scan_record_keys
cases = json.load(sys.stdin)
vm = int(next(line for line in open("/proc/self/status") if line.startswith("VmSize")).split()[1]) * 1024
resource.setrlimit(resource.RLIMIT_AS, (vm + (512 << 20), resource.RLIM_INFINITY))
for name, (kind, key, version, data) in cases.items():
    print(json.dumps({"started": name}), flush=True)
    started = time.perf_counter()
    data = bytes.fromhex(data)
    try:
        if kind == "request":
            decode_request(data)
        elif kind == "response":
            decode_response(key, version, data)
        else:
            try:
                scan_record_keys(data)
            except KafkaRecordError:
                pass
            decode_batch_records(data)
        outcome = "decoded"
    except (RemoteProtocolError, KafkaRecordError):
        outcome = "refused"
    except Exception as exc:
        outcome = f"{type(exc).__name__}: {exc}"
    print(json.dumps({"name": name, "outcome": outcome, "ms": (time.perf_counter() - started) * 1000}), flush=True)
"""


def refused_within_512_mib(cases: dict[str, tuple[str, int, int, bytes]]) -> None:
    """Decode each case in a child process with 512 MiB of address space to spare: each must be refused at once."""
    child = subprocess.run(
        [sys.executable, "-c", _CHILD],
        input=json.dumps(
            {name: (kind, key, version, data.hex()) for name, (kind, key, version, data) in cases.items()}
        ),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "RUST_BACKTRACE": "0"},
    )
    lines = [json.loads(line) for line in child.stdout.splitlines()]
    started = [line["started"] for line in lines if "started" in line]
    results = {line["name"]: line for line in lines if "name" in line}
    assert child.returncode == 0, f"the decoder died on {started[-1]!r}: {child.stderr.strip()[:400]}"
    assert {name: r["outcome"] for name, r in results.items()} == dict.fromkeys(cases, "refused")
    slow = {name: round(r["ms"], 1) for name, r in results.items() if r["ms"] > 50}
    assert not slow, f"refused, but not at once: {slow}"


def test_kio_never_reads_by_declared_size_within_512_mib_of_address_space() -> None:
    cases = {name: ("request", 0, 0, frame) for name, frame in KIO_REQUESTS.items()}
    cases |= {name: ("response", key, version, frame) for name, (key, version, frame) in KIO_RESPONSES.items()}
    refused_within_512_mib(cases)


def test_snappy_records_declaring_gigabytes_are_refused_before_decompressing() -> None:
    """Found by the compaction fuzz target: raw snappy starts with the uncompressed length, and
    cramjam allocates it before decompressing; 4 GiB refused aborts the process."""
    declared = uvarint(2**32 - 1) + bytes(20)
    xerial = b"\x82SNAPPY\x00" + struct.pack(">iii", 1, 1, len(declared)) + declared
    cases = {
        "raw snappy": ("records", 0, 0, snappy_batch(declared)),
        "xerial snappy": ("records", 0, 0, snappy_batch(xerial)),
    }
    refused_within_512_mib(cases)


def test_an_array_over_a_million_elements_is_refused_even_when_the_frame_holds_them() -> None:
    # ElectLeaders v0: one topic with 1,000,001 int32 partitions, all present (4 MB).
    frame = header(43, 0, flexible=False) + struct.pack(">ih", 1, 1) + b"t" + struct.pack(">i", 1_000_001)
    frame += bytes(4 * 1_000_001) + struct.pack(">i", 1000)
    with pytest.raises(RemoteProtocolError, match="1000001 elements"):
        decode_request(frame)


def test_a_million_elements_are_still_accepted() -> None:
    frame = header(43, 0, flexible=False) + struct.pack(">ih", 1, 1) + b"t" + struct.pack(">i", 1_000_000)
    frame += bytes(4 * 1_000_000) + struct.pack(">i", 1000)
    assert len(decode_request(frame).body.topic_partitions[0].partitions) == 1_000_000


# A null array (count -1, or 0 in compact form) where the schema has no null: found by the proxy_split
# and proxy_rewrite fuzz targets, whose split and rewrites iterate the array. kio reads it as None;
# Kafka refuses it ("non-nullable field ... was serialized as null").


@pytest.mark.parametrize(
    "frame",
    [
        header(1, 4, flexible=False) + struct.pack(">iiiib", -1, 0, 0, 0, 0) + struct.pack(">i", -1),
        header(1, 12, flexible=True) + struct.pack(">iiiibii", -1, 0, 0, 0, 0, 0, -1) + b"\x00\x01\x01\x00",
        header(1, 4, flexible=False) + struct.pack(">iiiib", -1, 0, 0, 0, 0) + struct.pack(">ih", 1, 1) + b"t"
        + struct.pack(">i", -1),
    ],
    ids=["Fetch v4 topics", "Fetch v12 topics", "Fetch v4 partitions"],
)  # fmt: skip
def test_a_null_array_the_schema_does_not_allow_is_refused(frame: bytes) -> None:
    with pytest.raises(RemoteProtocolError, match="null"):
        decode_request(frame)


def test_a_null_array_the_schema_allows_is_still_read_as_none() -> None:
    assert decode_request(header(3, 1, flexible=False) + struct.pack(">i", -1)).body.topics is None
    assert decode_request(header(3, 9, flexible=True) + b"\x00\x00\x00\x00\x00").body.topics is None


def test_a_response_with_a_null_array_the_schema_does_not_allow_is_refused() -> None:
    # FindCoordinator v4: throttle time, then a null Coordinators array
    with pytest.raises(RemoteProtocolError, match="null"):
        decode_response(10, 4, struct.pack(">i", 7) + b"\x00" + bytes(4) + b"\x00\x00")


# -- barnabas's own decoders -------------------------------------------------------------------------


def produce(version: int, body: bytes) -> bytes:
    return header(0, version, flexible=version >= 9) + body


@pytest.mark.parametrize(
    ("version", "body"),
    [
        (3, struct.pack(">hhii", -1, 1, 1000, INT32_MAX) + PAD),  # 2^31-1 topics
        (9, b"\x00" + struct.pack(">hi", 1, 1000) + uvarint(2**32 - 1) + PAD),  # compact: 2^32-2 topics
        (3, struct.pack(">hhiih", -1, 1, 1000, 1, 1) + b"t" + struct.pack(">i", INT32_MAX) + PAD),  # partitions
        (3, struct.pack(">hhii", -1, 1, 1000, 1_000_001) + b"\x00\x00" * 1_000_001),  # held, but over the limit
    ],
    ids=["topics", "compact topics", "partitions", "over a million"],
)
def test_produce_refuses_arrays_it_cannot_hold_at_once(version: int, body: bytes) -> None:
    frame = produce(version, body)
    with pytest.raises(RemoteProtocolError, match="declares an array of"):
        decode_produce_request(frame, len(header(0, version, flexible=version >= 9)), version)


def test_produce_refuses_a_tagged_field_section_over_ten_thousand() -> None:
    body = b"\x00" + struct.pack(">hi", 1, 1000) + uvarint(1) + uvarint(10_001) + b"\x00\x00" * 10_001
    with pytest.raises(RemoteProtocolError, match="10001 tagged fields"):
        decode_produce_request(produce(9, body), len(header(0, 9, flexible=True)), 9)


@pytest.mark.parametrize("count", [10_001, 100_000, 2**32])
def test_a_request_header_with_too_many_tagged_fields_is_refused(count: int) -> None:
    frame = header(3, 12, flexible=True, tags=uvarint(count) + b"\x00\x00" * min(count, 10_001))
    with pytest.raises(RemoteProtocolError, match=f"{count} tagged fields"):
        decode_request(frame + b"\x01\x00\x00\x00")


def test_ten_thousand_header_tags_are_still_skipped() -> None:
    tags = uvarint(10_000) + b"".join(uvarint(tag) + b"\x00" for tag in range(10_000))
    frame = header(3, 12, flexible=True, tags=tags) + b"\x00\x00\x00\x00"
    assert decode_request(frame).body.topics is None


def response_header_tags(count: int) -> bytes:
    return struct.pack(">i", 7) + uvarint(count) + b"\x00\x00" * 200


def test_a_response_header_with_too_many_tagged_fields_is_refused() -> None:
    with pytest.raises(RemoteProtocolError, match="100000 tagged fields"):
        decode_response(3, 12, response_header_tags(100_000))


def snappy_batch(records: bytes) -> bytes:
    """A snappy batch of one record whose compressed records are ``records`` (CRC made right)."""
    batch = bytearray(build_record_batch([(b"k", b"v")], base_timestamp_ms=1, compression=2))[:61] + records
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return bytes(batch)


def batch_with(records_count: int, records: bytes) -> bytes:
    """A v2 batch holding ``records`` that declares ``records_count`` records (CRC made right)."""
    batch = bytearray(build_record_batch([(b"k", b"v")], base_timestamp_ms=1))[:61] + records
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">i", batch, 57, records_count)
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return bytes(batch)


@pytest.mark.parametrize("decode", [decode_batch_records, scan_record_keys])
def test_a_record_count_the_records_cannot_hold_is_refused(decode: object) -> None:
    batch = batch_with(INT32_MAX, b"\x00" * 700)
    with pytest.raises(CorruptRecordError, match="2147483647 records"):
        decode(batch)  # type: ignore[operator]


def test_a_record_header_count_the_record_cannot_hold_is_refused() -> None:
    # length 10, attributes, timestamp and offset deltas, null key, null value, then 2^31-1 headers
    record = b"\x14\x00\x00\x00\x01\x01" + b"\xfe\xff\xff\xff\x0f" + b"\x00" * 5
    with pytest.raises(CorruptRecordError, match="2147483647 headers"):
        decode_batch_records(batch_with(1, record))


@pytest.mark.timeout(10)
def test_the_fetch_scan_does_not_loop_over_a_declared_count() -> None:
    # FetchResponse v5: one topic, one partition, then 2^31-1 aborted transactions in a few bytes.
    frame = struct.pack(">ii", 7, 0) + struct.pack(">ih", 1, 1) + b"t" + struct.pack(">i", 1)
    frame += struct.pack(">ihqqq", 0, 0, 0, 0, 0) + struct.pack(">i", INT32_MAX) + PAD
    started = time.perf_counter()
    assert fetch_response_names_nodes(frame, 5) is True, "a frame it cannot walk may name a node"
    assert time.perf_counter() - started < 0.05


# -- the walk agrees with kio on every message it can write ----------------------------------------


@pytest.mark.parametrize("width", [0, 2])
def test_the_walk_ends_where_kio_wrote_the_last_byte_for_every_schema(width: int) -> None:
    """Every request and response class kio has, every field set (tagged ones too), arrays of ``width``."""
    for schema in ALL_SCHEMAS:
        body = b"\xee" * 3 + encode_body(sample_entity(schema, width))
        assert check_declared_sizes(schema, body, 3) == len(body), schema


@settings(max_examples=60, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(ALL_SCHEMAS).flatmap(lambda schema: st.tuples(st.just(schema), st.from_type(schema))))
def test_the_walk_ends_where_kio_wrote_the_last_byte_for_any_message(case: tuple[type[Any], Any]) -> None:
    schema, entity = case
    body = b"\xee" * 3 + encode_body(entity)
    assert check_declared_sizes(schema, body, 3) == len(body)
