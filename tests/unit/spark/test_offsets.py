"""Offset JSON, range planning, minPartitions splitting and maxOffsetsPerTrigger pro-rating, without Spark."""

from __future__ import annotations

from barnabas.spark.offsets import (
    OffsetRange,
    TopicPartition,
    new_records,
    offsets_from_json,
    offsets_to_json,
    plan_ranges,
    rate_limit,
    split_ranges,
)

T0, T1, T2, T3 = (TopicPartition("t", p) for p in range(4))


def test_offset_json_is_kafkas_topic_partition_offset_document() -> None:
    offsets = {TopicPartition("b", 1): 7, TopicPartition("a", 10): 3, TopicPartition("a", 2): 5}
    document = offsets_to_json(offsets)
    assert document == {"a": {"2": 5, "10": 3}, "b": {"1": 7}}
    assert list(document) == ["a", "b"]
    assert offsets_from_json(document) == offsets


def test_plan_ranges_drops_empty_ranges_and_starts_new_partitions_at_earliest() -> None:
    ranges, problems = plan_ranges({T0: 5, T1: 9}, {T0: 8, T1: 9, T2: 4}, {T2: 0})
    assert ranges == [OffsetRange("t", 0, 5, 8), OffsetRange("t", 2, 0, 4)]
    assert problems == []


def test_plan_ranges_reports_data_loss() -> None:
    ranges, problems = plan_ranges({T0: 5, T1: 9}, {T0: 3, T2: 4}, {T2: 2})
    assert ranges == [OffsetRange("t", 2, 2, 4)]
    assert len(problems) == 3
    assert "t-1 is gone" in problems[0]
    assert "t-0's offset was changed from 5 to 3" in problems[1]
    assert "Added partition t-2 starts from 2 instead of 0" in problems[2]


def test_no_min_partitions_is_one_task_per_kafka_partition() -> None:
    ranges = [OffsetRange("t", 0, 0, 100), OffsetRange("t", 1, 5, 5), OffsetRange("t", 2, 0, 1)]
    assert split_ranges(ranges, None) == [ranges[0], ranges[2]]
    assert split_ranges(ranges, 2) == [ranges[0], ranges[2]]


def test_min_partitions_splits_large_ranges_like_kafka_offset_range_calculator() -> None:
    # KafkaOffsetRangeCalculatorSuite: "with minPartition = 3" over sizes 1 and 10 → [1], [3, 3, 4] … here
    # the small range stays whole and the large one takes the remaining parts.
    ranges = [OffsetRange("t", 0, 1, 2), OffsetRange("t", 1, 1, 11)]
    assert split_ranges(ranges, 3) == [
        OffsetRange("t", 0, 1, 2),
        OffsetRange("t", 1, 1, 6),
        OffsetRange("t", 1, 6, 11),
    ]
    even = split_ranges([OffsetRange("t", 0, 0, 10)], 3)
    assert [(r.start, r.end) for r in even] == [(0, 3), (3, 6), (6, 10)]


def test_min_partitions_covers_every_offset_exactly_once() -> None:
    ranges = [OffsetRange("t", p, 10 * p, 10 * p + size) for p, size in enumerate([1000, 7, 300, 0])]
    pieces = split_ranges(ranges, 8)
    assert 7 <= len(pieces) <= 9
    for source in ranges:
        covered = [o for r in pieces if r.partition == source.partition for o in range(r.start, r.end)]
        assert covered == list(range(source.start, source.end))


def test_max_records_per_partition_caps_each_task() -> None:
    pieces = split_ranges([OffsetRange("t", 0, 0, 25)], None, 10)
    assert [(r.start, r.end) for r in pieces] == [(0, 8), (8, 16), (16, 25)]


def test_rate_limit_pro_rates_by_backlog_rounding_down() -> None:
    start = {T0: 0, T1: 0, T2: 0, T3: 0}
    latest = {T0: 10_000, T1: 10_000, T2: 10_000, T3: 10_000}
    end = rate_limit(3000, start, latest, {})
    assert end == {T0: 750, T1: 750, T2: 750, T3: 750}
    end = rate_limit(3000, start, {T0: 10_000, T1: 20_000, T2: 0, T3: 0}, {})
    assert end == {T0: 1000, T1: 2000, T2: 0, T3: 0}
    # A limit above the backlog reads everything; below it, each equal share is rounded down.
    end = rate_limit(1000, {T0: 0, T1: 0, T2: 0}, {T0: 50, T1: 50, T2: 50}, {})
    assert end == {T0: 50, T1: 50, T2: 50}
    end = rate_limit(100, {T0: 0, T1: 0, T2: 0}, {T0: 500, T1: 500, T2: 500}, {})
    assert end == {T0: 33, T1: 33, T2: 33}


def test_rate_limit_never_starves_a_small_partition() -> None:
    end = rate_limit(10, {T0: 0, T1: 0}, {T0: 10_000, T1: 1}, {})
    # T1's share is 10 * 1/10001 < 1 → rounded up to 1 (Spark: "don't completely starve small partitions").
    assert end == {T0: 9, T1: 1}


def test_rate_limit_includes_new_partitions_from_their_earliest_offset() -> None:
    end = rate_limit(100, {T0: 0}, {T0: 100, T1: 200}, {T1: 100})
    assert end == {T0: 50, T1: 150}


def test_rate_limit_with_nothing_new_returns_latest() -> None:
    assert rate_limit(10, {T0: 5}, {T0: 5}, {}) == {T0: 5}


def test_new_records_counts_backlog_from_start_or_earliest() -> None:
    assert new_records({T0: 5, T1: 9}, {T0: 8, T1: 9, T2: 4}, {T2: 1}) == 3 + 0 + 3
    assert new_records({T0: 5}, {T0: 3}, {}) == 0
