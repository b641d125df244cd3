"""The log cleaner end to end on real segment files: what survives, what is rewritten, crash safety."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from barnabas.log import (
    CleanerConfig,
    CleanerManager,
    CleaningAbortedError,
    CorruptRecordError,
    InvalidRecordError,
    LogConfig,
    OutOfOrderSequenceError,
    PartitionLog,
    TopicPartition,
)
from barnabas.log.cleaner_config import MAP_ENTRY_BYTES
from barnabas.protocol import DELETE_HORIZON_FLAG, Compression, NewRecord, build_record_batch
from tests.support.peak_memory import measure_peak
from tests.support.raw_records import expanding_batch, raw_batch, raw_record

from .batches import T0, decode
from .compaction import latest_per_key, produce, read_batches, read_records, triples
from .conftest import OpenLog, crash

TP = TopicPartition("orders", 0)
RETENTION = 10_000
COMPACT = LogConfig(
    cleanup_policy="compact",
    segment_bytes=1024,
    index_interval_bytes=0,
    min_cleanable_dirty_ratio=0.0,
    delete_retention_ms=RETENTION,
    file_delete_delay_ms=0,
)

Triple = tuple[int, bytes | None, bytes | None]


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def compacted(open_log: OpenLog, data_dir: Path) -> Callable[..., PartitionLog]:
    def _open(config: LogConfig = COMPACT, **kwargs: object) -> PartitionLog:
        return open_log(config, directory=data_dir / str(TP), **kwargs)

    return _open


class Cleaning:
    """A cleaner over one log, run on the test's thread."""

    def __init__(self, log: PartitionLog, data_dir: Path, config: CleanerConfig | None = None) -> None:
        self.log = log
        self.data_dir = data_dir
        self.manager = CleanerManager(config or CleanerConfig())
        self.logs = {TP: (data_dir, log)}

    def once(self, now_ms: int) -> bool:
        return self.manager.clean_once(self.logs, now_ms)

    def checkpoint(self) -> int | None:
        return self.manager.checkpoints(self.data_dir).get(TP)


def fill(log: PartitionLog, count: int, keys: int = 4, start: int = 0) -> list[Triple]:
    """``count`` one-record batches cycling over ``keys`` keys; return (offset, key, value) of each."""
    produced = []
    for i in range(start, start + count):
        key, value = f"k{i % keys}".encode(), f"v{i}".encode()
        produced.append((produce(log, [(key, value)]), key, value))
    return produced


def leftovers(log: PartitionLog) -> list[str]:
    return sorted(p.name for p in log.directory.iterdir() if p.name.endswith((".cleaned", ".swap")))


# --- what survives -----------------------------------------------------------------------------


def test_only_the_latest_value_per_key_survives_and_offsets_are_kept(compacted: Callable[..., PartitionLog]) -> None:
    log = compacted()
    produced = fill(log, 60)
    originals = {header.base_offset: data for header, data in read_batches(log)}
    active = log.active_segment
    active_base, active_bytes = active.base_offset, active.path.read_bytes()
    cleaning = Cleaning(log, log.directory.parent)

    assert cleaning.once(T0 + 1)

    assert triples(read_records(log)) == latest_per_key(produced, active_base)
    # a batch whose records all stayed is the very same bytes, at the same offset
    assert all(originals[header.base_offset] == data for header, data in read_batches(log))
    assert log.active_segment.path.read_bytes() == active_bytes
    assert (log.log_start_offset, log.log_end_offset) == (0, 60)
    assert cleaning.checkpoint() == active_base
    assert (log.directory.parent / "cleaner-offset-checkpoint").read_text() == f"0\n1\norders 0 {active_base}\n"
    assert leftovers(log) == []


def test_a_second_pass_cleans_what_arrived_since_against_the_clean_part(
    compacted: Callable[..., PartitionLog],
) -> None:
    log = compacted()
    produced = fill(log, 40)
    cleaning = Cleaning(log, log.directory.parent)
    assert cleaning.once(T0 + 1)
    first = cleaning.checkpoint()
    produced += fill(log, 40, keys=6, start=40)
    assert cleaning.once(T0 + 2)
    second = log.active_segment.base_offset
    assert cleaning.checkpoint() == second > (first or 0)
    assert triples(read_records(log)) == latest_per_key(produced, second)


def test_partly_kept_batches_are_rebuilt_with_their_codec_offsets_and_timestamps(
    compacted: Callable[..., PartitionLog], codec: Compression
) -> None:
    log = compacted()
    keys = [b"k0", b"k1", b"k0", b"k2", b"k1", b"k0"]
    records = [NewRecord(k, f"a{i}".encode(), (("h", b"x"),), T0 + 10 * i) for i, k in enumerate(keys)]
    batch = build_record_batch(records, base_timestamp_ms=T0, compression=codec)
    log.append_as_leader(bytearray(batch), 3, T0 + 100)
    produce(log, [(b"k3", b"b0"), (b"k0", b"b1")], compression=codec, now_ms=T0 + 100, leader_epoch=3)
    untouched = read_batches(log)[1][1]
    log.roll(T0 + 100)

    assert Cleaning(log, log.directory.parent).once(T0 + 200)

    (first, data), (_, second_data) = read_batches(log)
    assert (first.base_offset, first.last_offset, first.records_count) == (0, 5, 2)
    assert (first.compression, first.partition_leader_epoch) == (codec, 3)
    assert first.max_timestamp == T0 + 40
    kept = [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in read_records(log)]
    assert kept == [
        (3, b"k2", b"a3", T0 + 30, (("h", b"x"),)),
        (4, b"k1", b"a4", T0 + 40, (("h", b"x"),)),
        (6, b"k3", b"b0", T0 + 100, ()),
        (7, b"k0", b"b1", T0 + 100, ()),
    ]
    assert second_data == untouched
    if codec in (Compression.NONE, Compression.GZIP):  # kafka-python has these codecs natively
        (checked,) = decode(data)
        assert checked.crc_ok and [r.offset for r in checked.records] == [3, 4]


@pytest.fixture(params=list(Compression), ids=lambda c: c.name.lower())
def codec(request: pytest.FixtureRequest) -> Compression:
    return Compression(request.param)


def test_tombstones_live_delete_retention_ms_after_their_first_clean_then_go(
    compacted: Callable[..., PartitionLog],
) -> None:
    log = compacted()
    produce(log, [(b"gone", b"old")])
    produce(log, [(b"gone", None)])  # the tombstone, offset 1
    fill(log, 12, keys=3, start=100)
    log.roll(T0)
    cleaning = Cleaning(log, log.directory.parent)
    first_clean = T0 + 1_000

    assert cleaning.once(first_clean)
    tombstone = next(h for h, _ in read_batches(log) if h.base_offset == 1)
    assert tombstone.delete_horizon_ms == first_clean + RETENTION
    assert tombstone.attributes & DELETE_HORIZON_FLAG
    assert [(r.offset, r.value) for r in read_records(log) if r.key == b"gone"] == [(1, None)]

    fill(log, 12, keys=3, start=200)
    log.roll(T0)
    assert cleaning.once(first_clean + RETENTION - 1)  # one millisecond early: it stays
    assert [(r.offset, r.value) for r in read_records(log) if r.key == b"gone"] == [(1, None)]

    fill(log, 12, keys=3, start=300)
    log.roll(T0)
    assert cleaning.once(first_clean + RETENTION)
    assert [r for r in read_records(log) if r.key == b"gone"] == []


def test_an_idempotent_producers_last_batch_survives_empty_and_keeps_its_state(
    compacted: Callable[..., PartitionLog], data_dir: Path
) -> None:
    log = compacted()
    produce(log, [(b"a", b"1")], producer=(7, 0, 0))  # 0: not its last batch, emptied: dropped
    produce(log, [(b"a", b"2"), (b"b", b"2")], producer=(7, 0, 1))  # 1-2: its last batch, emptied: kept
    produce(log, [(b"a", b"3"), (b"b", b"3")])  # 3-4
    log.roll(T0)

    assert Cleaning(log, data_dir).once(T0 + 1)

    headers = [h for h, _ in read_batches(log)]
    assert [(h.base_offset, h.last_offset, h.records_count) for h in headers] == [(1, 2, 0), (3, 4, 2)]
    empty = headers[0]
    assert (empty.producer_id, empty.producer_epoch, empty.base_sequence, empty.compression) == (7, 0, 1, 0)

    # The state is rebuilt from the log alone (no snapshot): the sequence continues after 2.
    crash(log)
    for snapshot in log.directory.glob("*.snapshot"):
        snapshot.unlink()
    reopened = compacted()
    entry = reopened.producer_state.last_entry(7)
    assert entry is not None and entry.last_seq == 2
    with pytest.raises(OutOfOrderSequenceError):
        produce(reopened, [(b"a", b"4")], producer=(7, 0, 5))
    assert produce(reopened, [(b"a", b"4")], producer=(7, 0, 3)) == 5


def test_keyless_records_already_in_a_log_are_dropped_by_the_cleaner(
    compacted: Callable[..., PartitionLog], data_dir: Path
) -> None:
    log = compacted(LogConfig(segment_bytes=1024, file_delete_delay_ms=0))
    produce(log, [(None, b"no key"), (b"k", b"v1")])
    produce(log, [(b"k", b"v2")])
    log.roll(T0)
    log.update_config(COMPACT)  # the topic became compacted
    assert Cleaning(log, data_dir).once(T0 + 1)
    assert triples(read_records(log)) == [(2, b"k", b"v2")]


def test_a_compacted_topic_refuses_keyless_records_as_kafka_does(
    compacted: Callable[..., PartitionLog], open_log: OpenLog
) -> None:
    log = compacted()
    with pytest.raises(InvalidRecordError) as info:
        produce(log, [(b"k", b"v"), (None, b"x"), (None, b"y")])
    message = "Compacted topic cannot accept message without key in topic partition orders-0"
    assert info.value.record_errors == ((1, message), (2, message))
    assert str(info.value) == (
        "One or more records have been rejected due to 2 record errors in total, and only showing the first "
        f"three errors at most: [RecordError(batchIndex=1, message='{message}'), "
        f"RecordError(batchIndex=2, message='{message}')]"
    )
    assert log.log_end_offset == 0
    plain = open_log(LogConfig(), directory=log.directory.with_name("plain-0"))
    assert produce(plain, [(None, b"x")]) == 0  # only compacted topics look at keys


def test_a_header_key_that_is_not_utf8_is_rebuilt_byte_for_byte(compacted: Callable[..., PartitionLog]) -> None:
    log = compacted()
    odd = b"\xff\xfe"  # Kafka takes any bytes here (it reads header keys leniently); so must its cleaner
    batch = raw_batch([raw_record(0, b"kept", b"v", [(odd, b"x")]), raw_record(1, b"gone", b"old")])
    log.append_as_leader(bytearray(batch), 0, T0)
    produce(log, [(b"gone", b"new")])
    log.roll(T0)
    cleaning = Cleaning(log, log.directory.parent)

    assert cleaning.once(T0 + 1)

    assert cleaning.checkpoint() == 3
    ((header, data), _) = read_batches(log)
    assert (header.base_offset, header.last_offset, header.records_count) == (0, 1, 1)  # rebuilt, one record kept
    assert raw_record(0, b"kept", b"v", [(odd, b"x")]) in data


def test_a_bomb_already_in_a_log_fails_the_pass_within_the_topics_bound(
    compacted: Callable[..., PartitionLog],
) -> None:
    # Written while the topic was not compacted, when batches stay opaque; then the policy changed.
    log = compacted(LogConfig(segment_bytes=1 << 16, file_delete_delay_ms=0))
    log.append_as_leader(bytearray(expanding_batch(Compression.ZSTD, 256 << 20)), 0, T0)
    produce(log, [(b"k", b"v")])
    log.roll(T0)
    log.update_config(dataclasses.replace(COMPACT, segment_bytes=1 << 16, max_message_bytes=65_536))  # bound: 4 MiB
    cleaning = Cleaning(log, log.directory.parent)

    with measure_peak() as peak, pytest.raises(CorruptRecordError, match="at most 4194304 bytes"):
        cleaning.once(T0 + 1)
    assert peak.growth < 32 << 20, f"the pass took {peak.growth >> 20} MiB on a bomb"


# --- what is never touched ---------------------------------------------------------------------


def test_nothing_at_or_above_the_high_watermark_is_cleaned(
    compacted: Callable[..., PartitionLog], data_dir: Path
) -> None:
    log = compacted(hw_follows_log_end=False)
    produced = fill(log, 60)
    bases = [s.base_offset for s in log.segments]
    log.high_watermark = bases[2] + 3  # inside the third segment: it and everything after stay
    above = [(h, d) for h, d in read_batches(log) if h.base_offset >= bases[2]]
    cleaning = Cleaning(log, data_dir)

    assert cleaning.once(T0 + 1)

    assert cleaning.checkpoint() == bases[2]
    assert [(h, d) for h, d in read_batches(log) if h.base_offset >= bases[2]] == above
    assert triples(read_records(log)) == latest_per_key(produced, bases[2])


def test_a_log_without_compact_in_its_policy_is_never_cleaned(
    compacted: Callable[..., PartitionLog], data_dir: Path
) -> None:
    log = compacted(LogConfig(segment_bytes=1024))
    fill(log, 60)
    assert not Cleaning(log, data_dir).once(T0 + 1)
    assert len(read_records(log)) == 60


def test_reads_inside_a_gap_return_the_next_batch(compacted: Callable[..., PartitionLog], data_dir: Path) -> None:
    log = compacted()
    produced = fill(log, 30, keys=2)
    assert Cleaning(log, data_dir).once(T0 + 1)
    kept = [offset for offset, _, _ in latest_per_key(produced, log.active_segment.base_offset)]
    gap = next(o for o in range(30) if o not in kept)
    following = min(o for o in kept if o > gap)
    result = log.read(gap, 1 << 20)
    assert decode(result.records)[0].base_offset == following
    assert result.next_offset > following


def test_a_follower_replicates_a_compacted_leader_byte_for_byte(
    compacted: Callable[..., PartitionLog], open_log: OpenLog, data_dir: Path
) -> None:
    leader = compacted()
    fill(leader, 60)
    assert Cleaning(leader, data_dir).once(T0 + 1)
    follower = open_log(directory=data_dir.parent / "replica" / "orders-0")
    while follower.log_end_offset < leader.log_end_offset:
        fetched = leader.read(follower.log_end_offset, 300)
        assert follower.append_as_follower(fetched.records, T0).appended
    assert read_batches(follower) == read_batches(leader)


# --- concurrency and aborts --------------------------------------------------------------------


def test_a_pass_on_a_worker_thread_runs_while_the_log_takes_appends(
    compacted: Callable[..., PartitionLog], data_dir: Path
) -> None:
    log = compacted(LogConfig(cleanup_policy="compact", segment_bytes=64 * 1024, min_cleanable_dirty_ratio=0.0))
    produced = fill(log, 3000, keys=50)
    log.roll(T0)
    end = log.active_segment.base_offset
    cleaning = Cleaning(log, data_dir)
    job = cleaning.manager.begin(cleaning.logs, T0 + 1)
    assert job is not None
    outcome: list[object] = []
    worker = threading.Thread(target=lambda: outcome.append(cleaning.manager.clean(job)))
    worker.start()
    appended = 0
    while worker.is_alive():
        produced += fill(log, 1, keys=50, start=10_000 + appended)
        appended += 1
    worker.join()
    (result,) = outcome
    assert cleaning.manager.finish(result, T0 + 2)  # type: ignore[arg-type]
    assert triples(read_records(log)) == latest_per_key(produced, end)
    assert log.log_end_offset == 3000 + appended


def test_a_pass_is_discarded_when_the_log_is_truncated_meanwhile(
    compacted: Callable[..., PartitionLog], data_dir: Path
) -> None:
    log = compacted()
    fill(log, 60)
    cleaning = Cleaning(log, data_dir)
    job = cleaning.manager.begin(cleaning.logs, T0 + 1)
    assert job is not None
    result = cleaning.manager.clean(job)
    assert leftovers(log)  # the .cleaned files exist
    assert cleaning.manager.should_abort(job) is False
    log.truncate_to(30, T0)
    assert cleaning.manager.should_abort(job) is True
    before = read_batches(log)
    assert not cleaning.manager.finish(result, T0 + 2)
    assert read_batches(log) == before
    assert leftovers(log) == []
    assert cleaning.checkpoint() is None


def test_an_aborted_pass_leaves_nothing_behind_and_the_log_stays_cleanable(
    compacted: Callable[..., PartitionLog], data_dir: Path
) -> None:
    log = compacted()
    fill(log, 60)
    cleaning = Cleaning(log, data_dir)
    job = cleaning.manager.begin(cleaning.logs, T0 + 1)
    assert job is not None and log.cleaning
    with pytest.raises(CleaningAbortedError):
        cleaning.manager.clean(job, should_abort=lambda: True)
    assert leftovers(log) == []
    cleaning.manager.abandon(job, CleaningAbortedError("test"))
    assert not log.cleaning
    assert cleaning.once(T0 + 2)


def test_retention_of_a_compact_delete_log_waits_for_a_pass_in_progress(
    compacted: Callable[..., PartitionLog], data_dir: Path
) -> None:
    config = LogConfig(cleanup_policy="compact,delete", segment_bytes=1024, retention_ms=1000, file_delete_delay_ms=0)
    log = compacted(config)
    fill(log, 60)
    cleaning = Cleaning(log, data_dir)
    job = cleaning.manager.begin(cleaning.logs, T0 + 1)
    assert job is not None
    assert log.maintain(T0 + 5_000).deleted_segments == []
    cleaning.manager.abandon(job)
    assert log.maintain(T0 + 5_000).deleted_segments


def test_a_small_offset_map_cleans_in_several_passes(compacted: Callable[..., PartitionLog], data_dir: Path) -> None:
    log = compacted()
    produced = fill(log, 60, keys=6)
    end = log.active_segment.base_offset
    config = CleanerConfig(dedupe_buffer_size=3 * MAP_ENTRY_BYTES, dedupe_buffer_load_factor=1.0)
    assert config.max_map_entries == 3
    cleaning = Cleaning(log, data_dir, config)
    checkpoints = []
    while cleaning.once(T0 + 1):
        checkpoints.append(cleaning.checkpoint())
    assert len(checkpoints) > 1 and checkpoints == sorted(checkpoints) and checkpoints[-1] == end
    assert triples(read_records(log)) == latest_per_key(produced, end)


# --- crash safety ------------------------------------------------------------------------------


def test_a_crash_before_the_swap_leaves_the_log_as_it_was(
    compacted: Callable[..., PartitionLog], data_dir: Path
) -> None:
    log = compacted()
    fill(log, 60)
    before = read_batches(log)
    cleaning = Cleaning(log, data_dir)
    job = cleaning.manager.begin(cleaning.logs, T0 + 1)
    assert job is not None
    cleaning.manager.clean(job)
    assert any(name.endswith(".log.cleaned") for name in leftovers(log))
    crash(log)
    reopened = compacted()
    assert leftovers(reopened) == []
    assert read_batches(reopened) == before


@pytest.mark.parametrize("deleted_originals", [0, 1, 2])
def test_a_crash_during_the_swap_is_completed_by_recovery(
    compacted: Callable[..., PartitionLog], data_dir: Path, deleted_originals: int
) -> None:
    log = compacted()
    produced: list[Triple] = []
    for segment in range(6):  # small segments, so one cleaned segment replaces several
        produced += fill(log, 2, start=len(produced))
        unique = f"u{segment}".encode()  # never superseded: each segment keeps its last batch
        produced.append((produce(log, [(unique, b"u")]), unique, b"u"))
        log.roll(T0)
    end = log.active_segment.base_offset
    cleaning = Cleaning(log, data_dir)
    job = cleaning.manager.begin(cleaning.logs, T0 + 1)
    assert job is not None
    result = cleaning.manager.clean(job)
    group = result.groups[0]
    assert len(group.replaces) > 2
    group_end = next((s.base_offset for s in job.segments if s.base_offset not in group.replaces), end)
    assert group.segment.read_next_offset() == group_end
    # What replace_segments does, stopped part way: the .swap is written, some originals renamed.
    group.segment.change_file_suffixes(".cleaned", ".swap")
    originals = {s.base_offset: s for s in log.segments}
    for base in group.replaces[:deleted_originals]:
        originals[base].mark_deleted()
    for cleaned in result.groups:
        cleaned.segment.close()
    crash(log)

    reopened = compacted()

    assert leftovers(reopened) == []
    survivors = {r[0] for r in latest_per_key(produced, end)}
    assert triples(read_records(reopened)) == [r for r in produced if r[0] >= group_end or r[0] in survivors]
    assert [s.base_offset for s in reopened.segments if s.base_offset < group_end] == [0]


def test_cleaned_segments_only_replace_consecutive_closed_segments(
    compacted: Callable[..., PartitionLog], data_dir: Path
) -> None:
    log = compacted()
    fill(log, 60)
    cleaning = Cleaning(log, data_dir)
    job = cleaning.manager.begin(cleaning.logs, T0 + 1)
    assert job is not None
    result = cleaning.manager.clean(job)
    new = [g.segment for g in result.groups]
    segments = log.segments
    with pytest.raises(ValueError, match="consecutive closed segments"):
        log.replace_segments(new, [segments[-1]], T0)  # the active segment
    with pytest.raises(ValueError, match="consecutive closed segments"):
        log.replace_segments(new, [segments[0], segments[2]], T0)  # a hole
    assert log.segments == segments
    assert cleaning.manager.finish(result, T0 + 2)
