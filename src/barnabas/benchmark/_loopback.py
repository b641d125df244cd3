"""The raw loopback ceiling: the bytes a producer (or a broker answering fetches) would send, moved
between two trivial Python processes with blocking sockets.

Rules this module keeps:

- The frames are real Kafka frames built with barnabas.protocol: a ProduceRequest v7 carrying one
  1 MiB RecordBatch v2 of ``record_size`` records (what librdkafka sends with batch.size=1 MiB),
  and a FetchResponse carrying the same batch. Their content does not matter to the sockets, but
  their sizes match what the broker handles.
- Ingress (client → server, the produce direction): the sender keeps ``in_flight`` frames
  outstanding; the sink reads each frame whole with ``recv_into`` a preallocated buffer and
  answers an 8-byte ack (size + correlation id), like a broker's small produce response.
- Egress (server → client, the fetch direction): the client keeps ``in_flight`` small requests
  outstanding and reads each 1 MiB response whole with ``recv_into``.
- Rates count record values carried (frames × records per frame × record size), like the
  producer and consumer phases; ``wire_bytes`` counts whole frames.
- Nothing else happens per frame: this is what Python can move through loopback TCP on this
  machine, the ceiling any Python broker's throughput is compared with.
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass
from typing import Any

from barnabas.protocol import FetchPartitionResult, build_record_batch, encode_fetch_response

from ._settings import BATCH_BYTES

__all__ = [
    "LoopbackJob",
    "build_fetch_frame",
    "build_produce_frame",
    "loopback_client",
    "loopback_server",
    "records_per_frame",
]

_ACK = struct.Struct(">ii")  # size (4), correlation id
_REQUEST_HEAD = struct.Struct(">ihhi")  # size, api key, api version, correlation id
_PRODUCE_V7 = 7
_FETCH_V11 = 11
_RECORD_OVERHEAD = 12  # per-record varints and attributes for a 1 KiB unkeyed record
_BATCH_HEADER = 61
_CLIENT_ID = b"barnabas-bench"
_TOPIC = b"bench"
_RECEIVE_TIMEOUT_S = 60.0


def records_per_frame(record_size: int) -> int:
    """How many ``record_size`` records fill one 1 MiB batch (as librdkafka's batch.size does)."""
    return max(1, (BATCH_BYTES - _BATCH_HEADER) // (record_size + _RECORD_OVERHEAD))


def _record_batch(record_size: int) -> bytes:
    count = records_per_frame(record_size)
    value = bytes(range(256)) * (record_size // 256 + 1)
    records = [(None, value[:record_size])] * count
    return build_record_batch(records, base_timestamp_ms=int(time.time() * 1000))


def _string(value: bytes) -> bytes:
    return struct.pack(">h", len(value)) + value


def build_produce_frame(record_size: int) -> bytes:
    """A whole ProduceRequest v7 frame (size prefix included) with one ~1 MiB batch."""
    batch = _record_batch(record_size)
    body = (
        struct.pack(">h", -1)  # transactional_id: null
        + struct.pack(">hi", 1, 30_000)  # acks, timeout_ms
        + struct.pack(">i", 1)
        + _string(_TOPIC)
        + struct.pack(">i", 1)
        + struct.pack(">i", 0)  # partition index
        + struct.pack(">i", len(batch))
        + batch
    )
    head = struct.pack(">hhi", 0, _PRODUCE_V7, 1) + _string(_CLIENT_ID)
    payload = head + body
    return struct.pack(">i", len(payload)) + payload


def build_fetch_frame(record_size: int) -> bytes:
    """A whole FetchResponse v11 frame (size prefix included) with one ~1 MiB batch."""
    batch = _record_batch(record_size)
    result = FetchPartitionResult(0, 0, 1 << 20, 1 << 20, 0, (batch,))
    return b"".join(encode_fetch_response(_FETCH_V11, 1, [(_TOPIC.decode(), [result])]))


def _fetch_request_frame() -> bytes:
    """A small stand-in for a FetchRequest: only its size and correlation id matter here."""
    payload = struct.pack(">hhi", 1, _FETCH_V11, 1) + _string(_CLIENT_ID) + bytes(40)
    return struct.pack(">i", len(payload)) + payload


def _recv_exact(sock: socket.socket, view: memoryview) -> bool:
    """Fill ``view`` from ``sock``; False if the peer closed first."""
    got = 0
    size = len(view)
    while got < size:
        n = sock.recv_into(view[got:], size - got)
        if n == 0:
            return False
        got += n
    return True


def _recv_frame(sock: socket.socket, head: memoryview, buffer: memoryview) -> int:
    """Read one size-prefixed frame into ``buffer``; its payload size, or -1 at end of stream."""
    if not _recv_exact(sock, head):
        return -1
    size: int = struct.unpack_from(">i", head, 0)[0]
    if size > len(buffer):
        raise ValueError(f"frame of {size} bytes exceeds the {len(buffer)}-byte buffer")
    if not _recv_exact(sock, buffer[:size]):
        return -1
    return size


@dataclass(frozen=True)
class LoopbackJob:
    """One loopback measurement: a direction (``ingress`` or ``egress``), for ``seconds``."""

    direction: str
    record_size: int
    seconds: float
    in_flight: int


def loopback_server(job: LoopbackJob, ports: Any, results: Any) -> None:
    """Process entry point: accept one connection and sink (ingress) or serve (egress) frames."""
    direction, record_size = job.direction, job.record_size
    cpu0 = time.process_time()
    server = socket.create_server(("127.0.0.1", 0))
    ports.put(server.getsockname()[1])
    server.settimeout(_RECEIVE_TIMEOUT_S)
    conn, _ = server.accept()
    conn.settimeout(_RECEIVE_TIMEOUT_S)
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    head = memoryview(bytearray(4))
    buffer = memoryview(bytearray(4 * BATCH_BYTES))
    frames = 0
    with conn, server:
        if direction == "ingress":
            ack = bytearray(_ACK.size)
            while _recv_frame(conn, head, buffer) >= 0:
                # Echo the correlation id (payload bytes 4..8), as a produce response would.
                _ACK.pack_into(ack, 0, 4, int.from_bytes(buffer[4:8], "big"))
                conn.sendall(ack)
                frames += 1
        else:
            response = build_fetch_frame(record_size)
            cpu0 = time.process_time()
            while _recv_frame(conn, head, buffer) >= 0:
                conn.sendall(response)
                frames += 1
    results.put({"role": "server", "frames": frames, "cpu_s": time.process_time() - cpu0})


def loopback_client(job: LoopbackJob, port: int, results: Any) -> None:
    """Process entry point: drive the server for ``job.seconds`` with ``job.in_flight`` frames outstanding."""
    direction, record_size, seconds, in_flight = job.direction, job.record_size, job.seconds, job.in_flight
    sock = socket.create_connection(("127.0.0.1", port), timeout=_RECEIVE_TIMEOUT_S)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    head = memoryview(bytearray(4))
    buffer = memoryview(bytearray(4 * BATCH_BYTES))
    if direction == "ingress":
        frame = build_produce_frame(record_size)
        request, frame_bytes = frame, len(frame)
    else:
        request = _fetch_request_frame()
        frame_bytes = len(build_fetch_frame(record_size))
    outstanding = frames = 0
    cpu0 = time.process_time()
    start = time.monotonic()
    deadline = start + seconds
    with sock:
        while True:
            now = time.monotonic()
            if now < deadline:
                sock.sendall(request)
                outstanding += 1
            elif outstanding == 0:
                break
            if outstanding >= in_flight or now >= deadline:
                if _recv_frame(sock, head, buffer) < 0:
                    raise ConnectionError("the loopback server closed the connection early")
                outstanding -= 1
                frames += 1
        elapsed = time.monotonic() - start
    results.put({
        "role": "client", "direction": direction, "frames": frames, "frame_bytes": frame_bytes,
        "wire_bytes": frames * frame_bytes, "bytes": frames * records_per_frame(record_size) * record_size,
        "seconds": elapsed, "cpu_s": time.process_time() - cpu0,
    })  # fmt: skip
