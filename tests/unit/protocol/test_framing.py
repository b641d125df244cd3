import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from barnabas.protocol import LARGE_FRAME, NEED_DATA, BufferPool, FrameReader, FrameTooLargeError, RemoteProtocolError


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


def read_by_socket(reader: FrameReader, stream: bytes, sizes: list[int]) -> None:
    """Feed ``stream`` as a BufferedProtocol transport does: recv_into the buffer the reader offers."""
    position = 0
    i = 0
    while position < len(stream):
        target = reader.get_buffer()
        assert len(target) > 0
        count = min(len(target), sizes[i % len(sizes)], len(stream) - position)
        target[:count] = stream[position : position + count]
        reader.buffer_updated(count)
        position += count
        i += 1


def test_a_large_frame_is_read_into_its_own_buffer() -> None:
    reader = FrameReader(max_frame_size=1 << 22)
    payload = bytes(range(256)) * (LARGE_FRAME // 128)
    read_by_socket(reader, frame(payload), [1 << 20])
    got = reader.next_frame()
    assert isinstance(got, memoryview) and not got.readonly  # handed over, not copied out of a shared buffer
    assert got == payload
    assert reader.next_frame() is NEED_DATA
    assert reader.buffered == 0


def test_reads_go_straight_into_the_large_frame() -> None:
    reader = FrameReader(max_frame_size=1 << 22)
    payload = b"x" * (4 * LARGE_FRAME)
    read_by_socket(reader, frame(payload)[:100], [100])
    target = reader.get_buffer()
    assert len(target) == len(payload) - 96  # exactly the rest of the frame, nothing more
    target[:] = payload[96:]
    reader.buffer_updated(len(target))
    assert reader.next_frame() == payload


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(
        st.sampled_from([0, 1, 7, 100, 508, 509, 1020, 3000, LARGE_FRAME, LARGE_FRAME + 1, 3 * LARGE_FRAME + 5]),
        max_size=12,
    ),
    reads=st.lists(st.integers(min_value=1, max_value=5 * LARGE_FRAME), min_size=1, max_size=8),
)
def test_any_mix_of_frames_and_read_sizes_comes_back_in_order(sizes: list[int], reads: list[int]) -> None:
    payloads = [bytes([i % 251]) * size for i, size in enumerate(sizes)]
    reader = FrameReader(max_frame_size=1 << 22)
    read_by_socket(reader, b"".join(frame(p) for p in payloads), reads)
    got = []
    while (next_frame := reader.next_frame()) is not NEED_DATA:
        got.append(next_frame)
    assert got == payloads
    assert reader.buffered == 0


def test_unread_small_frames_beyond_the_scratch_buffer_are_kept() -> None:
    reader = FrameReader(max_frame_size=1 << 20)
    payloads = [bytes([i % 256]) * 1000 for i in range(2000)]  # ~2 MB, none read until the end
    read_by_socket(reader, b"".join(frame(p) for p in payloads), [65536])
    got = []
    while (next_frame := reader.next_frame()) is not NEED_DATA:
        got.append(next_frame)
    assert got == payloads


def test_an_oversized_prefix_after_whole_frames_is_refused_after_them() -> None:
    reader = FrameReader(max_frame_size=100)
    reader.receive_data(frame(b"ok") + struct.pack(">i", 101))
    assert reader.next_frame() == b"ok"
    with pytest.raises(FrameTooLargeError):
        reader.next_frame()


def test_end_of_stream_inside_a_large_frame_is_a_protocol_error() -> None:
    reader = FrameReader(max_frame_size=1 << 22)
    reader.receive_data(frame(b"y" * (2 * LARGE_FRAME))[:1000])
    reader.receive_data(b"")
    with pytest.raises(RemoteProtocolError):
        reader.next_frame()


def test_a_recycled_buffer_carries_the_next_large_frame() -> None:
    reader = FrameReader(max_frame_size=1 << 22)
    first = b"a" * (3 * LARGE_FRAME)
    read_by_socket(reader, frame(first), [1 << 20])
    got = reader.next_frame()
    assert isinstance(got, memoryview) and got == first
    buffer = got.obj
    reader.recycle(got)
    second = b"b" * (2 * LARGE_FRAME + 7)  # smaller: fits the recycled buffer
    read_by_socket(reader, frame(second) + frame(b"small"), [1 << 20])
    again = reader.next_frame()
    assert isinstance(again, memoryview)
    assert again.obj is buffer and again == second and len(again) == len(second)
    assert reader.next_frame() == b"small"
    larger = b"c" * (8 * LARGE_FRAME)  # does not fit: a new buffer, the recycled one untouched
    reader.recycle(again)
    read_by_socket(reader, frame(larger), [1 << 20])
    third = reader.next_frame()
    assert isinstance(third, memoryview) and third.obj is not buffer and third == larger


def test_huge_frames_are_not_kept_for_reuse() -> None:
    reader = FrameReader(max_frame_size=1 << 26)
    huge = b"h" * ((1 << 24) + 1)
    read_by_socket(reader, frame(huge), [1 << 22])
    got = reader.next_frame()
    assert isinstance(got, memoryview) and len(got) == len(huge)
    buffer = got.obj
    reader.recycle(got)
    read_by_socket(reader, frame(b"s" * (2 * LARGE_FRAME)), [1 << 20])
    small = reader.next_frame()
    assert isinstance(small, memoryview) and small.obj is not buffer


def test_the_large_frame_being_filled_is_not_counted_as_waiting() -> None:
    # A reader pauses the socket on what waits; the frame being filled must be read whole first.
    reader = FrameReader(max_frame_size=1 << 22)
    small, large = b"s" * 10, b"x" * (4 * LARGE_FRAME)
    read_by_socket(reader, frame(small) + frame(large)[:1000], [2000])
    assert reader.buffered == 14 + 996
    assert reader.waiting == 14
    assert reader.next_frame() == small
    assert reader.waiting == 0
    read_by_socket(reader, frame(large)[1000:], [len(large)])
    assert reader.waiting == reader.buffered == len(large)
    assert reader.next_frame() == large


def test_readers_sharing_a_pool_reuse_each_others_buffers() -> None:
    """A server's connections share one pool: a buffer one handed back carries another's next large frame."""
    pool = BufferPool(max_bytes=1 << 22)
    producer, other = FrameReader(1 << 22, pool), FrameReader(1 << 22, pool)
    read_by_socket(producer, frame(b"a" * (3 * LARGE_FRAME)), [1 << 20])
    got = producer.next_frame()
    assert isinstance(got, memoryview)
    buffer = got.obj
    producer.recycle(got)
    assert pool.kept_bytes == len(buffer)
    read_by_socket(other, frame(b"b" * (2 * LARGE_FRAME)), [1 << 20])
    taken = other.next_frame()
    assert isinstance(taken, memoryview) and taken.obj is buffer and pool.kept_bytes == 0


def test_a_pool_keeps_within_its_byte_budget_dropping_the_smallest() -> None:
    pool = BufferPool(max_bytes=3 << 20)
    small, medium, large = bytearray(1 << 19), bytearray(1 << 20), bytearray(2 << 20)
    for buffer in (small, medium, large):
        pool.give(buffer)
    assert pool.kept_bytes == (1 << 20) + (2 << 20), "the smallest went to make room"
    assert pool.take(1 << 19) is medium  # the smallest kept buffer that fits
    pool.give(bytearray(4 << 20))  # larger than the whole budget: never kept
    assert pool.kept_bytes == 2 << 20 and pool.take(3 << 20) is None


def test_frames_waiting_counts_whole_frames_small_and_large_until_returned() -> None:
    reader = FrameReader(max_frame_size=1 << 24)
    large = bytes(LARGE_FRAME + 10)
    reader.receive_data(frame(b"a") + frame(b"bc") + frame(large)[:100])
    assert reader.frames_waiting == 2  # the large one is not whole yet
    reader.receive_data(frame(large)[100:] + frame(b"d")[:3])
    assert reader.frames_waiting == 3
    assert [bytes(reader.next_frame()) for _ in range(3)] == [b"a", b"bc", large]
    assert reader.frames_waiting == 0 and reader.next_frame() is NEED_DATA


def _resident_kib() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


def test_a_declared_size_costs_no_memory_until_its_bytes_arrive() -> None:
    before = _resident_kib()
    readers = [FrameReader(max_frame_size=1 << 30) for _ in range(20)]
    for reader in readers:
        reader.receive_data(struct.pack(">i", 100 << 20) + bytes(1000))  # 100 MB declared, 1 KB sent
        assert reader.next_frame() is NEED_DATA
    assert _resident_kib() - before < 64 * 1024  # 2 GB declared in all


def test_a_reader_that_returned_every_small_frame_holds_no_buffer() -> None:
    """Most connections only send small requests and sit idle between them: their readers hold no scratch."""
    before = _resident_kib()
    readers = [FrameReader(max_frame_size=1 << 20) for _ in range(4000)]
    request = frame(bytes(range(40)))  # an ApiVersions request's size
    for reader in readers:
        for _ in range(30):
            reader.receive_data(request[:10])
            reader.receive_data(request[10:])
            assert reader.next_frame() == request[4:]
    assert (_resident_kib() - before) / len(readers) < 0.75  # was a 4 KiB page each, and more


def test_a_frame_over_half_the_first_scratch_moves_the_reader_to_a_larger_one() -> None:
    reader = FrameReader(max_frame_size=1 << 20)
    small, middle, big = bytes(100), bytes(range(256)) * 3, bytes(range(250)) * 40
    stream = frame(small) + frame(middle) + frame(small) + frame(big) + frame(small)
    for at in range(0, len(stream), 300):  # reads that end inside frames
        reader.receive_data(stream[at : at + 300])
    assert [reader.next_frame() for _ in range(5)] == [small, middle, small, big, small]
    assert reader.next_frame() is NEED_DATA
    assert reader.buffered == 0


def test_a_read_that_fills_the_first_scratch_moves_the_reader_to_full_size_reads() -> None:
    """A client pipelining small requests: after one read that filled the 1 KiB scratch, reads take 64 KiB."""
    reader = FrameReader(max_frame_size=1 << 20)
    requests = frame(bytes(60)) * 64  # 4 KiB of pipelined 64-byte frames
    view = reader.get_buffer()
    assert len(view) <= 1024
    view[:] = requests[: len(view)]
    reader.buffer_updated(len(view))
    while reader.next_frame() is not NEED_DATA:  # taken at once, as the proxy takes them
        pass
    assert len(reader.get_buffer()) == 64 * 1024
    reader.receive_data(requests[1024:])
    got = []
    while (next_frame := reader.next_frame()) is not NEED_DATA:
        got.append(next_frame)
    assert len(got) == 64 - 1024 // 64 and reader.buffered == 0
