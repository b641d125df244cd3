"""Write the committed seed corpora: ``python -m tests.fuzz.seeds`` rewrites ``tests/fuzz/corpus/``.

Seeds are real inputs, built by the codecs the broker and its clients use: request frames recorded
from the five client families (``tests/unit/protocol/client_frames.jsonl``), one request and one
response frame per (API, version) the broker serves or the proxy understands, filled in by
``kio_samples`` and encoded by the repo's own encoders, record batches from ``build_record_batch``
(every codec, headers, tombstones, keyless records, producer ids) and from kafka-python, and the
coordination values as barnabas writes them. Each file is named by the first 16 hex digits of its
SHA-1, so rerunning writes the same files; files found by fuzzing (crash reproducers) are added by
hand with the same naming and stay, since this script only ever adds.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import struct
import uuid
from collections.abc import Iterator
from pathlib import Path

from barnabas.broker.handlers import build_registry
from barnabas.cluster.brokers import BrokerEndpoint, BrokerInfo
from barnabas.cluster.claims import BrokerClaim
from barnabas.cluster.model import PartitionState, Reassignment, Topic
from barnabas.protocol import (
    Compression,
    NewRecord,
    build_record_batch,
    encode_request,
    encode_response,
    request_class,
    response_class,
)
from barnabas.proxy.routes import UNDERSTOOD
from tests.fuzz.kio_samples import sample_entity
from tests.fuzz.targets.proxy_rewrite import APIS as REWRITTEN_APIS
from tests.unit.log.batches import make_batch

CORPUS = Path(__file__).with_name("corpus")
CLIENT_FRAMES = Path(__file__).parents[1] / "unit" / "protocol" / "client_frames.jsonl"
T0 = 1_700_000_000_000
_SPLIT_APIS = (0, 1, 2, 21, 23)


def client_frames(max_size: int = 8192) -> Iterator[tuple[int, int, bytes]]:
    """(api key, version, frame) of each recorded client frame up to ``max_size`` bytes."""
    for line in CLIENT_FRAMES.read_text().splitlines():
        entry = json.loads(line)
        frame = bytes.fromhex(entry["frame"])
        if len(frame) <= max_size:
            yield entry["api_key"], entry["api_version"], frame


def served() -> set[tuple[int, int]]:
    """(api key, version) of every request the broker accepts or the proxy routes."""
    pairs = set()
    for spec in build_registry():
        low = spec.min_version if spec.accept_min is None else spec.accept_min
        pairs |= {(spec.key, version) for version in range(low, spec.max_version + 1)}
    for api_key, (low, high) in UNDERSTOOD.items():
        pairs |= {(api_key, version) for version in range(low, high + 1)}
    return pairs


def request_frame(api_key: int, version: int, width: int) -> bytes:
    return encode_request(api_key, version, 7, "seed", sample_entity(request_class(api_key, version), width))[4:]


def batches() -> Iterator[bytes]:
    """Record batches as producers and the log write them."""
    records = [
        NewRecord(b"k1", b"a" * 30, [("h", b"x"), ("empty", None)]),
        NewRecord(b"k2", None),
        NewRecord(None, b"keyless"),
        NewRecord(b"k1", b"b", (), T0 + 5),
    ]
    for codec in Compression:
        yield build_record_batch(records, base_timestamp_ms=T0, compression=codec)
        yield build_record_batch(
            records[:2], base_timestamp_ms=T0, compression=codec, base_offset=40, producer_id=9, producer_epoch=1,
            base_sequence=3, partition_leader_epoch=2, timestamp_type_log_append=True,
        )  # fmt: skip
    yield build_record_batch([(b"k", b"v")], base_timestamp_ms=T0, is_transactional=True, producer_id=4)
    yield bytes(make_batch(3))  # kafka-python's encoder, an independent one


def produce_body(version: int, records: bytes) -> bytes:
    """A Produce body (after the header) carrying ``records`` for one partition."""
    module = request_class(0, version)
    topic_cls = request_class(0, version, "TopicProduceData")
    partition_cls = request_class(0, version, "PartitionProduceData")
    body = module(
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=30),
        topic_data=(topic_cls(name="orders", partition_data=(partition_cls(index=0, records=records),)),),
    )
    frame = encode_request(0, version, 7, None, body)
    header = 4 + 10 + (1 if version >= 9 else 0)
    return frame[header:]


def frames_programs() -> Iterator[bytes]:
    """Programs for the frames target: op bytes as tests/fuzz/targets/frames.py reads them."""
    literal = [b"\x00" + bytes([len(chunk)]) + chunk for chunk in _chunks(_client_stream(), 200)]
    yield b"\x01" + b"".join(literal[:6]) + b"\x03"
    yield b"\x01\x07\x03" + b"".join(literal[:6]) + b"\x03\x05\x03"
    yield b"\x03\x02\x01\x11\x70\x03\x04\x02\x01\x20\x00\x03\x06\x02\x00\x00\x10\x03\x04"  # large frames, recycled
    yield b"\x02\x06\x07\x00\x02\x00\x10\x00\x03\x02\x00\x01\x00\x05\x03"  # by get_buffer, closed inside a frame
    yield b"\x00\x01\x7f\xff\xff\xff\x03"  # a size prefix over the limit
    yield b"\x00\x02\x00\x00\x05\x03\x07\x01\x02\x00\x00\x40\x03"


def _client_stream() -> bytes:
    return b"".join(struct.pack(">i", len(frame)) + frame for _, _, frame in list(client_frames(300))[:8])


def _chunks(data: bytes, size: int) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


def seeds() -> dict[str, list[bytes]]:
    corpus: dict[str, list[bytes]] = {name: [] for name in ("frames", "requests", "produce", "record_batch")}
    corpus |= {name: [] for name in ("compaction", "coordination", "proxy_rewrite", "proxy_split")}
    corpus["frames"] += frames_programs()
    recorded = list(client_frames())
    corpus["requests"] += [frame for _, _, frame in recorded]
    for api_key, version in sorted(served()):
        corpus["requests"].append(request_frame(api_key, version, 1))
    for api_key, version, frame in recorded:
        if api_key == 0 and 3 <= version <= 11:
            (client_id,) = struct.unpack_from(">h", frame, 8)
            body = frame[10 + max(client_id, 0) + (1 if version >= 9 else 0) :]
            corpus["produce"].append(bytes([version - 3, 0]) + body)
        if api_key in _SPLIT_APIS:
            corpus["proxy_split"].append(frame)
    all_batches = list(batches())
    for index, batch in enumerate(all_batches):
        version = (3, 9, 11)[index % 3]
        corpus["produce"].append(bytes([version - 3, 1]) + produce_body(version, batch))
        corpus["record_batch"].append(b"\x00\x00\x00" + batch)
        corpus["compaction"].append(bytes([index % 32 | 1, 0b10100101]) + batch)
    corpus["record_batch"].append(b"\x00\x00\x28" + all_batches[1] + all_batches[3])  # a follower's fetch
    corpus["record_batch"].append(b"\x00\x00\x00" + all_batches[0] + all_batches[0][:30])  # a partial batch
    corpus["coordination"] += coordination_values()
    for index, api_key in enumerate(REWRITTEN_APIS):
        low, high = UNDERSTOOD[api_key]
        for version in range(low, high + 1):
            body = sample_entity(response_class(api_key, version), 1)
            corpus["proxy_rewrite"].append(bytes([index, version - low]) + encode_response(7, body)[4:])
    for api_key in _SPLIT_APIS:
        low, high = UNDERSTOOD[api_key]
        for version in range(low, high + 1):
            corpus["proxy_split"].append(request_frame(api_key, version, 2))
    return corpus


def coordination_values() -> list[bytes]:
    topic_id = uuid.UUID("0b8f5a4e-6c1d-4d0e-9a51-2f3c4d5e6f70")
    topic = Topic("orders", topic_id, {0: (1, 2), 1: (2, 3)}, {"cleanup.policy": "compact"}, False)
    moving = Topic("orders", topic_id, {0: (3, 1, 2)}, {}, True, {0: Reassignment((3,), (1,))})
    state = PartitionState(1, 3, (1, 2), 4, {1: 10, 2: 11}, topic_id)
    endpoints = (BrokerEndpoint("PLAINTEXT", "h", 9092), BrokerEndpoint("SSL", "h", 9093, "SSL"))
    broker = BrokerInfo(7, "broker-7.internal", 9092, "r1", 3, True, endpoints)
    claim = BrokerClaim(7, "cluster-x", frozenset({"dir-a", "dir-b"}))
    return [
        b"\x00" + topic.to_json(),
        b"\x00" + moving.to_json(),
        b"\x01" + state.to_json(),
        b"\x01" + PartitionState(-1, 0, ()).to_json(),
        b"\x02" + broker.to_json(),
        b"\x02" + BrokerInfo(8, "h", 1).to_json(),
        b"\x03" + claim.to_bytes(),
    ]


def write(corpus: dict[str, list[bytes]]) -> dict[str, int]:
    """Add every seed not yet there; return how many files each target's corpus holds."""
    counts = {}
    for name, inputs in corpus.items():
        directory = CORPUS / name
        directory.mkdir(parents=True, exist_ok=True)
        for data in inputs:
            path = directory / hashlib.sha1(data).hexdigest()[:16]
            if not path.exists():
                path.write_bytes(data)
        counts[name] = len(list(directory.iterdir()))
    return counts


if __name__ == "__main__":
    for target, count in write(seeds()).items():
        size = sum(path.stat().st_size for path in (CORPUS / target).iterdir())
        print(f"{target}: {count} files, {size} bytes")
