"""Real request frames recorded from the five client families (tests/interop/wire_log_proxy.py --frames).

Every frame of a version the broker serves must decode completely, and kio must re-encode its body
to the same bytes; a version the broker does not serve (Java 4.4's ApiVersions v5) must be refused
by the registry so the connection answers it as Kafka does. Produce bodies are decoded by hand
(``_produce_request``): theirs must hold what kio reads from the same frame.
"""

from __future__ import annotations

import datetime
import io
import json
from pathlib import Path
from typing import Any

import pytest
from kio.serial import entity_reader, entity_writer

from barnabas.broker.handlers import build_registry
from barnabas.protocol import decode_request, peek_header, request_schema

FRAMES_FILE = Path(__file__).with_name("client_frames.jsonl")
FRAMES = [json.loads(line) for line in FRAMES_FILE.read_text().splitlines()]
REGISTRY = build_registry()


def frame_id(entry: dict[str, Any]) -> str:
    return f"{entry['client']}-{entry['api_key']}v{entry['api_version']}"


def test_every_client_family_is_recorded() -> None:
    assert {entry["client"] for entry in FRAMES} == {"confluent", "kafka-python", "aiokafka", "kafkajs", "java"}


@pytest.mark.parametrize("entry", FRAMES, ids=frame_id)
def test_recorded_frame(entry: dict[str, Any]) -> None:
    frame = bytes.fromhex(entry["frame"])
    api_key, api_version, _ = peek_header(frame)
    spec = REGISTRY.get(api_key)
    assert spec is not None, f"clients sent api_key {api_key}, which the broker does not serve"
    if not spec.accepts(api_version):
        assert api_key == 18, "only ApiVersions may arrive above our range (clients negotiate the rest)"
        return
    request = decode_request(frame)
    assert request.header.api_key == api_key
    assert request.header.api_version == api_version
    if api_key == 0:
        assert produce_fields(request.body, ours=True) == produce_fields(kio_body(frame), ours=False)
        return
    buffer = io.BytesIO()
    entity_writer(type(request.body))(buffer, request.body)
    body = buffer.getvalue()
    assert frame.endswith(body), "kio re-encodes the decoded body to other bytes"


def kio_body(frame: bytes) -> Any:
    """kio's reading of the body: re-encode it to find where the header ends, then read it there."""
    api_key, api_version, _ = peek_header(frame)
    schema = request_schema(api_key, api_version)
    for start in range(8, len(frame)):
        try:
            body, size = entity_reader(schema)(frame, start)
        except Exception:
            continue
        if start + size == len(frame):
            return body
    raise AssertionError("kio reads no body from the frame")


def produce_fields(body: Any, *, ours: bool) -> tuple[Any, ...]:
    timeout = body.timeout_ms if ours else body.timeout // datetime.timedelta(milliseconds=1)
    topics = [
        (t.name, [(int(p.index), None if p.records is None else bytes(p.records)) for p in t.partition_data])
        for t in body.topic_data
    ]
    return body.transactional_id, int(body.acks), timeout, topics
