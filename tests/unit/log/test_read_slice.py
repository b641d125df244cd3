"""read_slice (file ranges for sendfile) against read (bytes): the same batches for every fetch shape."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from barnabas.log import FileSlice, LogConfig, LogError, PartitionLog

from .batches import T0, make_batch
from .conftest import OpenLog

#: Batch record counts and value sizes: small batches, and ones larger than the index interval.
BATCHES = [(1, 10), (3, 200), (2, 3000), (5, 16), (1, 9000), (4, 700), (2, 50), (6, 2500), (1, 5), (3, 1200)] * 3


@pytest.fixture
def filled(open_log: OpenLog) -> PartitionLog:
    log = open_log(LogConfig(index_interval_bytes=1024, segment_bytes=40_000))
    for count, size in BATCHES:
        log.append_as_leader(make_batch(count, value_size=size), 0, T0)
    return log


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    offset_fraction=st.floats(0, 1),
    max_bytes=st.integers(0, 60_000),
    limit_fraction=st.one_of(st.none(), st.floats(0, 1)),
    min_one_batch=st.booleans(),
)
def test_slices_hold_the_bytes_read_returns(
    filled: PartitionLog, offset_fraction: float, max_bytes: int, limit_fraction: float | None, min_one_batch: bool
) -> None:
    end = filled.log_end_offset
    offset = int(offset_fraction * end)
    max_offset = None if limit_fraction is None else int(limit_fraction * end)
    read = filled.read(offset, max_bytes, max_offset, min_one_batch)
    sliced = filled.read_slice(offset, max_bytes, max_offset, min_one_batch)
    assert (sliced.records.read() if sliced.records is not None else b"") == bytes(read.records)
    assert sliced.records is None or len(sliced.records) > 0
    assert sliced.next_offset == read.next_offset
    assert (sliced.high_watermark, sliced.log_start_offset, sliced.log_end_offset) == (
        read.high_watermark,
        read.log_start_offset,
        read.log_end_offset,
    )


def test_an_open_slice_reads_the_file_even_after_the_segment_closes(filled: PartitionLog) -> None:
    sliced = first_slice(filled, 0, 10_000)
    expected = sliced.read()
    fd = sliced.open()
    try:
        filled.close()  # retention or a swap closes segments while a response is being sent
        assert os.pread(fd, sliced.size, sliced.position) == expected
    finally:
        os.close(fd)


def test_a_slice_cannot_be_opened_after_its_segment_was_cut_back(filled: PartitionLog) -> None:
    start = filled.active_segment.base_offset
    sliced = first_slice(filled, start, 1 << 20)
    filled.truncate_to(start + 1, T0)
    with pytest.raises(LogError):
        sliced.open()


def test_a_slice_reads_its_segment_after_retention_deleted_it(filled: PartitionLog) -> None:
    # Taken, then the segment is deleted before the response is sent: as in Kafka, its file is
    # kept (renamed .deleted) until file.delete.delay.ms has passed, and the slice reads it there.
    sliced = first_slice(filled, 0, 10_000)
    expected = sliced.read()
    segment = filled.segments[0]
    filled.delete_records_before(filled.segments[1].base_offset)
    filled.maintain(T0)
    assert segment.closed and segment.path.name.endswith(".deleted")
    assert filled.segments[0] is not segment
    assert sliced.read() == expected
    filled.maintain(T0 + 10 * 60 * 60 * 1000)  # past file.delete.delay.ms: the file is gone
    filled.flush()  # (the removal runs on the log's scheduler thread)
    assert not segment.path.exists()
    with pytest.raises(LogError, match="is gone"):
        sliced.open()
    sliced.close()
    with pytest.raises(LogError):
        sliced.open()


def test_a_slice_reads_its_segment_after_the_log_closed(filled: PartitionLog) -> None:
    sliced = first_slice(filled, 0, 1000)
    expected = sliced.read()
    filled.close()
    assert sliced.read() == expected


def first_slice(log: PartitionLog, offset: int, max_bytes: int) -> FileSlice:
    records = log.read_slice(offset, max_bytes).records
    assert records is not None
    return records
