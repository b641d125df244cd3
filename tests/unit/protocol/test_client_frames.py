"""Real request frames recorded from the five client families (tests/interop/wire_log_proxy.py --frames).

Every frame of a version the broker serves must decode completely, and kio must re-encode its body
to the same bytes; a version the broker does not serve (Java 4.4's ApiVersions v5) must be refused
by the registry so the connection answers it as Kafka does.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from kio.serial import entity_writer

from barnabas.broker.handlers import build_registry
from barnabas.protocol import decode_request, peek_header

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
    buffer = io.BytesIO()
    entity_writer(type(request.body))(buffer, request.body)
    body = buffer.getvalue()
    assert frame.endswith(body), "kio re-encodes the decoded body to other bytes"
