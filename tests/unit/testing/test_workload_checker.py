"""The queue workload's checker finds each way a run can break the guarantees (and nothing in a clean run)."""

from __future__ import annotations

from collections import defaultdict

from barnabas.testing.checker import WorkloadResult


def clean_run() -> WorkloadResult:
    """Values 0..5 over two partitions, each acknowledged at the offset where it was read back."""
    result = WorkloadResult(sent=6, partitions=2)
    for value in range(6):
        partition, offset = value % 2, value // 2
        result.acked[partition].append(value)
        result.acked_at[partition][offset] = value
        result.consumed[partition].append((offset, value))
    result.ends = {0: 3, 1: 3}
    return result


def test_a_clean_run_has_no_problem() -> None:
    assert clean_run().problems() == []


def test_each_broken_guarantee_is_named() -> None:
    lost = clean_run()
    lost.consumed[0] = lost.consumed[0][:-1]
    assert lost.problems() == ["partition 0: 1 acked values lost, e.g. [4]"]

    moved = clean_run()
    moved.consumed[1] = [(0, 1), (1, 5), (2, 3)]  # 3 and 5 traded places
    assert "partition 1: 2 acked offsets hold another value, e.g. [(1, 3), (2, 5)]" in moved.problems()
    assert "partition 1: values out of produce order" in moved.problems()

    twice = clean_run()
    twice.consumed[0].append((3, 4))
    assert "partition 0: 1 values consumed twice, e.g. 4 at offsets [2, 3]" in twice.problems()

    unknown = clean_run()
    unknown.consumed[0].append((3, 7))  # never sent
    unknown.consumed[1].append((3, 2))  # sent, to the other partition
    assert "partition 0: 1 values never sent there, e.g. [7]" in unknown.problems()
    assert "partition 1: 1 values never sent there, e.g. [2]" in unknown.problems()

    behind = clean_run()
    behind.ends = {0: 3, 1: 2}
    assert behind.problems() == ["partition 1: high watermark 2 not past acked offset 2"]

    unordered = clean_run()
    unordered.consumed = defaultdict(list, {0: [(0, 0), (2, 4), (1, 2)], 1: unordered.consumed[1]})
    assert "partition 0: offsets not strictly increasing" in unordered.problems()


def committed_run(commits: dict[int, list[int]], group_offsets: dict[int, int]) -> WorkloadResult:
    """The clean run, its consumer's acknowledged commits and the group's offsets read afterwards."""
    result = clean_run()
    result.commits = defaultdict(list, commits)
    result.group_offsets = group_offsets
    return result


def test_commits_that_only_move_forward_pass() -> None:
    run = committed_run({0: [1, 1, 3], 1: [2, 3]}, {0: 3, 1: 3})
    assert run.problems() == []
    ahead = committed_run({0: [1, 2]}, {0: 3})  # a later commit, its acknowledgement not seen: not behind
    assert ahead.problems() == []


def test_commits_going_backwards_fail() -> None:
    backwards = committed_run({0: [1, 3, 2, 3], 1: [3]}, {0: 3, 1: 3})
    assert backwards.problems() == ["partition 0: acknowledged commits went backwards 1 times, e.g. to 2 after 3"]

    lost = committed_run({0: [1, 3], 1: [3]}, {0: 1, 1: 3})  # the coordinator forgot an acknowledged commit
    assert lost.problems() == ["partition 0: the group's committed offset 1 is behind the last acknowledged commit 3"]

    gone = committed_run({0: [1, 3], 1: [3]}, {1: 3})
    assert gone.problems() == [
        "partition 0: the group's committed offset None is behind the last acknowledged commit 3"
    ]


def test_a_run_whose_commits_cannot_be_checked_says_so() -> None:
    assert committed_run({}, {}).problems() == ["no offset commit was acknowledged, so none could be checked"]
    unread = committed_run({0: [3]}, {0: 3})
    unread.group_offsets, unread.group_offsets_error = None, "KafkaError{code=_TIMED_OUT}"
    assert unread.problems() == ["the group's committed offsets could not be read: KafkaError{code=_TIMED_OUT}"]
