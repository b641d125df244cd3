"""What compaction keeps of one batch, for batches the fuzz target (tests/fuzz/targets/compaction.py) found.

A batch in a log may have passed only its header checks: a leader's batch a follower took, or a
client's batch written before its topic was compacted, may hold records whose offsets lie outside the
range its header names. The cleaner must refuse such a batch with the error ``filter_batch`` documents
(CorruptRecordError), when it first reads its keys, not fail as though the codec had been misused.
"""

from __future__ import annotations

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from barnabas.log.offset_map import OffsetMap
from barnabas.log.record_filter import CleanerFilter, FilterStats, filter_batch
from barnabas.protocol import CorruptRecordError, validate_batch

from .batches import T0


def batch_with_offset_deltas(*records: tuple[int, bytes]) -> bytearray:
    """A CRC-valid batch of (offset delta, key) records in that order; the last one's delta ends it."""
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=-1, producer_epoch=-1, base_sequence=-1,
        batch_size=1 << 20,
    )  # fmt: skip
    for delta, key in records:
        builder.append(delta, timestamp=T0, key=key, value=b"v", headers=[])
    return bytearray(builder.build())


def test_a_kept_record_outside_its_batch_s_offsets_makes_the_batch_corrupt() -> None:
    batch = batch_with_offset_deltas((7, b"kept"), (1, b"dropped"))  # lastOffsetDelta 1, a record at delta 7
    header = validate_batch(batch, from_client=False)  # a follower or a recovering log takes it
    offset_map = OffsetMap(10)
    offset_map.put(b"kept", 7)
    offset_map.put(b"dropped", 100)  # written again later: this record goes, the batch is rebuilt
    rules = CleanerFilter(offset_map, T0, 1000, {}, upper_bound_offset=200)
    with pytest.raises(
        CorruptRecordError, match=r"offset delta 7 is not above .* at most the batch's lastOffsetDelta 1"
    ):
        filter_batch(memoryview(batch), header, rules, FilterStats())
