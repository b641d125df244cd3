import struct

import pytest

from barnabas.protocol import NEED_DATA, FrameReader, FrameTooLargeError, RemoteProtocolError


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def test_frames_split_across_and_within_chunks() -> None:
    reader = FrameReader(max_frame_size=1000)
    stream = frame(b"one") + frame(b"") + frame(b"three")
    for i in range(len(stream)):
        reader.receive_data(stream[i : i + 1])
    assert reader.next_frame() == b"one"
    assert reader.next_frame() == b""
    assert reader.next_frame() == b"three"
    assert reader.next_frame() is NEED_DATA
    assert reader.buffered == 0


def test_partial_frame_waits_for_more() -> None:
    reader = FrameReader(max_frame_size=1000)
    data = frame(b"abcdef")
    reader.receive_data(data[:7])
    assert reader.next_frame() is NEED_DATA
    reader.receive_data(data[7:])
    assert reader.next_frame() == b"abcdef"


def test_oversized_prefix_is_refused_before_payload_arrives() -> None:
    reader = FrameReader(max_frame_size=100)
    reader.receive_data(struct.pack(">i", 101))
    with pytest.raises(FrameTooLargeError) as caught:
        reader.next_frame()
    assert caught.value.size == 101
    assert caught.value.limit == 100


def test_negative_size_is_refused() -> None:
    reader = FrameReader(max_frame_size=100)
    reader.receive_data(struct.pack(">i", -5))
    with pytest.raises(FrameTooLargeError):
        reader.next_frame()


def test_end_of_stream_inside_a_frame_is_a_protocol_error() -> None:
    reader = FrameReader(max_frame_size=100)
    reader.receive_data(frame(b"0123456789")[:8])
    reader.receive_data(b"")
    assert reader.ended
    with pytest.raises(RemoteProtocolError):
        reader.next_frame()


def test_clean_end_of_stream_is_need_data() -> None:
    reader = FrameReader(max_frame_size=100)
    reader.receive_data(frame(b"x"))
    reader.receive_data(b"")
    assert reader.next_frame() == b"x"
    assert reader.next_frame() is NEED_DATA


def test_large_volume_compacts_buffer() -> None:
    reader = FrameReader(max_frame_size=1 << 20)
    payload = bytes(range(256)) * 1024
    for _ in range(20):
        reader.receive_data(frame(payload))
        assert reader.next_frame() == payload
    assert reader.buffered == 0
