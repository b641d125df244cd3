from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from barnabas.log import (
    InconsistentBrokerIdError,
    InconsistentClusterIdError,
    InconsistentTopicIdError,
    LogConfig,
    LogDirLockedError,
    LogManager,
    MaintenanceSchedule,
    PartitionLog,
    TopicPartition,
)
from barnabas.log.checkpoint import OffsetCheckpointFile
from barnabas.log.meta_properties import read_meta_properties
from barnabas.log.partition_metadata import encode_topic_id

from .batches import T0, idempotent_batch, make_batch, offsets
from .conftest import crash

TOPIC_ID = uuid.UUID("2b5c0a5e-8f4e-4d0a-9a52-6d3c1f0e7b11")


@pytest.fixture
def dirs(tmp_path: Path) -> list[Path]:
    return [tmp_path / "data-a", tmp_path / "data-b"]


@pytest.fixture
def managers(dirs: list[Path]) -> Iterator[list[LogManager]]:
    """Managers made by a test; each is closed (releasing its locks) at teardown."""
    made: list[LogManager] = []
    yield made
    for manager in made:
        manager.close()


def start(
    managers: list[LogManager],
    dirs: list[Path],
    broker_id: int = 1,
    cluster_id: str | None = "c1",
    schedule: MaintenanceSchedule | None = None,
) -> LogManager:
    manager = LogManager(dirs, LogConfig(), broker_id, cluster_id, schedule=schedule)
    managers.append(manager)
    manager.load_all(T0)
    return manager


def test_new_dirs_get_meta_properties_and_a_lock(dirs: list[Path], managers: list[LogManager]) -> None:
    start(managers, dirs, broker_id=7, cluster_id="Xyz-123")
    for log_dir in dirs:
        text = (log_dir / "meta.properties").read_text()
        assert "version=0\n" in text and "broker.id=7\n" in text and "cluster.id=Xyz-123\n" in text
        assert (log_dir / ".lock").exists()


def test_partitions_are_spread_over_the_dirs(dirs: list[Path], managers: list[LogManager]) -> None:
    manager = start(managers, dirs)
    for p in range(4):
        manager.create("orders", p, TOPIC_ID, LogConfig(), T0)
    placed = [manager.log_dir_of("orders", p) for p in range(4)]
    assert placed == [dirs[0].absolute(), dirs[1].absolute(), dirs[0].absolute(), dirs[1].absolute()]
    assert manager.partitions() == [TopicPartition("orders", p) for p in range(4)]
    assert (dirs[1] / "orders-1" / "00000000000000000000.log").exists()


def test_a_new_partition_goes_to_the_dir_with_fewest_counting_loaded_and_deleted_ones(
    dirs: list[Path], managers: list[LogManager]
) -> None:
    manager = start(managers, dirs)
    for p in range(3):  # orders-0 and orders-2 in the first dir, orders-1 in the second
        manager.create("orders", p, TOPIC_ID, LogConfig(), T0)
    manager.close()
    restarted = start(managers, dirs)
    restarted.create("orders", 3, TOPIC_ID, LogConfig(), T0)
    assert restarted.log_dir_of("orders", 3) == dirs[1].absolute(), "the loaded logs count"
    restarted.create("orders", 4, TOPIC_ID, LogConfig(), T0)  # a tie: the first dir, which now holds 3
    for p in (0, 2, 4):
        assert restarted.delete_topic_partition("orders", p)
    restarted.create("orders", 5, TOPIC_ID, LogConfig(), T0)
    assert restarted.log_dir_of("orders", 5) == dirs[0].absolute(), "the deleted logs no longer count"


def test_a_topics_partitions_are_listed_as_created_loaded_and_deleted(
    dirs: list[Path], managers: list[LogManager]
) -> None:
    manager = start(managers, dirs)
    for p in (2, 0, 1):
        manager.create("orders", p, TOPIC_ID, LogConfig(), T0)
    manager.create("other", 0, TOPIC_ID, LogConfig(), T0)
    assert manager.partitions_of("orders") == [TopicPartition("orders", p) for p in range(3)]
    manager.close()
    restarted = start(managers, dirs)
    assert restarted.partitions_of("orders") == [TopicPartition("orders", p) for p in range(3)]
    assert restarted.delete_topic_partition("orders", 1)
    assert restarted.partitions_of("orders") == [TopicPartition("orders", 0), TopicPartition("orders", 2)]
    assert restarted.delete_topic_partition("other", 0)
    assert restarted.partitions_of("other") == [] and restarted.partitions_of("never") == []


def test_create_returns_the_existing_log(dirs: list[Path], managers: list[LogManager]) -> None:
    manager = start(managers, dirs)
    log = manager.create("t", 0, TOPIC_ID, LogConfig(), T0)
    assert manager.create("t", 0, TOPIC_ID, LogConfig(), T0) is log
    assert manager.get("t", 0) is log
    assert manager.get("t", 1) is None
    with pytest.raises(InconsistentTopicIdError):
        manager.create("t", 0, uuid.uuid4(), LogConfig(), T0)


def test_create_rejects_illegal_topic_names(dirs: list[Path], managers: list[LogManager]) -> None:
    manager = start(managers, dirs)
    for name in ["", "..", "a/b", "x" * 250, "spaces are bad"]:
        with pytest.raises(ValueError, match="topic name"):
            manager.create(name, 0, None, LogConfig(), T0)


def test_partition_metadata_holds_the_topic_id_as_kafka_writes_it(dirs: list[Path], managers: list[LogManager]) -> None:
    manager = start(managers, dirs)
    manager.create("orders", 0, TOPIC_ID, LogConfig(), T0)
    text = (dirs[0] / "orders-0" / "partition.metadata").read_text()
    assert text == f"version: 0\ntopic_id: {encode_topic_id(TOPIC_ID)}\n"
    assert encode_topic_id(TOPIC_ID) == "K1wKXo9OTQqaUm08Hw57EQ"  # Kafka's Uuid.toString()


def test_clean_restart_restores_every_log(dirs: list[Path], managers: list[LogManager]) -> None:
    manager = start(managers, dirs)
    for p in range(3):
        log = manager.create("orders", p, TOPIC_ID, LogConfig(), T0)
        for _ in range(p + 1):
            log.append_as_leader(make_batch(2), 0, T0)
    manager.get("orders", 2).delete_records_before(3)  # type: ignore[union-attr]
    manager.close()
    for log_dir in dirs:
        assert (log_dir / ".kafka_cleanshutdown").exists()
    assert (dirs[0] / "recovery-point-offset-checkpoint").read_text() == "0\n2\norders 0 2\norders 2 6\n"
    assert (dirs[0] / "log-start-offset-checkpoint").read_text() == "0\n2\norders 0 0\norders 2 3\n"

    restarted = LogManager(dirs, LogConfig(), 1, "c1")
    managers.append(restarted)
    assert all(restarted.clean_shutdown.values())
    assert not any((d / ".kafka_cleanshutdown").exists() for d in dirs)  # removed at start
    assert restarted.load_all(T0) == [TopicPartition("orders", p) for p in range(3)]
    logs = [restarted.get("orders", p) for p in range(3)]
    assert [(log.log_start_offset, log.log_end_offset) for log in logs if log] == [(0, 2), (0, 4), (3, 6)]
    assert all(log is not None and log.topic_id == TOPIC_ID for log in logs)
    assert [log.load_report.recovered_segments for log in logs if log] == [[], [], []], "a clean shutdown is trusted"


def test_restart_after_a_crash_recovers(dirs: list[Path], managers: list[LogManager]) -> None:
    manager = start(managers, dirs)
    log = manager.create("t", 0, None, LogConfig(), T0)
    log.append_as_leader(make_batch(2), 0, T0)
    log.append_as_leader(make_batch(2), 0, T0)
    crash(log)
    manager._release_locks()  # the process died: its locks went with it
    managers.remove(manager)
    segment = dirs[0] / "t-0" / "00000000000000000000.log"
    segment.write_bytes(segment.read_bytes()[:-7])

    restarted = LogManager(dirs, LogConfig(), 1, "c1")
    managers.append(restarted)
    assert not any(restarted.clean_shutdown.values())
    restarted.load_all(T0)
    recovered = restarted.get("t", 0)
    assert recovered is not None and recovered.log_end_offset == 2
    assert recovered.load_report.recovered_segments == [0]
    assert offsets(recovered.read(0, 1 << 20).records) == [0, 1]


def test_a_second_process_cannot_use_a_locked_dir(dirs: list[Path], managers: list[LogManager]) -> None:
    start(managers, dirs)
    script = textwrap.dedent(
        f"""
        from pathlib import Path
        from barnabas.log import LogConfig, LogDirLockedError, LogManager
        try:
            LogManager([Path({str(dirs[1])!r})], LogConfig(), 1, "c1")
        except LogDirLockedError as exc:
            print("LOCKED", exc)
        else:
            print("ACQUIRED")
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    lock = dirs[1].absolute() / ".lock"
    assert out.stdout.strip() == f"LOCKED log dir {dirs[1].absolute()} is in use by another process (lock file {lock})"


def test_a_dir_locked_by_another_process_is_refused(dirs: list[Path], managers: list[LogManager]) -> None:
    dirs[1].mkdir(parents=True)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, sys\n"
            f"f = open({str(dirs[1] / '.lock')!r}, 'a')\n"
            "fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
            "print('held', flush=True)\n"
            "sys.stdin.read()\n",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(LogDirLockedError, match="is in use by another process"):
            LogManager(dirs, LogConfig(), 1, "c1")
        # the failed manager released the lock it had already taken on the first dir
        start(managers, [dirs[0]]).close()
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
    start(managers, dirs)  # free again once the holder exited


def test_a_closed_manager_releases_its_locks(dirs: list[Path], managers: list[LogManager]) -> None:
    start(managers, dirs).close()
    start(managers, dirs)


def test_broker_id_mismatch_is_refused(dirs: list[Path], managers: list[LogManager]) -> None:
    start(managers, dirs, broker_id=1).close()
    with pytest.raises(InconsistentBrokerIdError, match=r"broker.id 2 doesn't match stored broker.id 1"):
        LogManager(dirs, LogConfig(), 2, "c1")
    start(managers, dirs, broker_id=1)  # the failed attempt released every lock


def test_cluster_id_mismatch_is_refused(dirs: list[Path], managers: list[LogManager]) -> None:
    start(managers, dirs, cluster_id="c1").close()
    with pytest.raises(InconsistentClusterIdError, match="wrong cluster"):
        LogManager(dirs, LogConfig(), 1, "c2")


def test_the_stored_cluster_id_is_adopted(dirs: list[Path], managers: list[LogManager]) -> None:
    start(managers, dirs, cluster_id="c1").close()
    assert start(managers, dirs, cluster_id=None).cluster_id == "c1"


def test_each_dir_gets_a_directory_id_it_keeps(dirs: list[Path], managers: list[LogManager]) -> None:
    """KIP-858: a random Kafka Uuid per dir, written into meta.properties once and read back ever after."""
    first = start(managers, dirs)
    ids = first.directory_ids
    assert set(ids) == set(first.log_dirs) and len(set(ids.values())) == 2
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{22}", directory_id) for directory_id in ids.values()), ids
    assert first.fresh_dirs == frozenset(first.log_dirs)
    for log_dir, directory_id in ids.items():
        assert f"directory.id={directory_id}\n" in (log_dir / "meta.properties").read_text()
    first.close()
    again = start(managers, dirs)
    assert again.directory_ids == ids and again.fresh_dirs == frozenset()


def test_a_dir_from_before_directory_ids_gets_one_and_keeps_its_identity(
    dirs: list[Path], managers: list[LogManager]
) -> None:
    for log_dir in dirs:
        log_dir.mkdir(parents=True)
        (log_dir / "meta.properties").write_text("version=0\nbroker.id=1\ncluster.id=c1\n")
    manager = start(managers, dirs, cluster_id=None)
    assert manager.cluster_id == "c1" and manager.fresh_dirs == frozenset()
    for log_dir in dirs:
        meta = read_meta_properties(log_dir)
        assert meta is not None and (meta.broker_id, meta.cluster_id) == (1, "c1")
        assert meta.directory_id == manager.directory_ids[log_dir.absolute()]


def test_delete_topic_partition(dirs: list[Path], managers: list[LogManager]) -> None:
    manager = start(managers, dirs)
    manager.create("gone", 0, None, LogConfig(), T0).append_as_leader(make_batch(1), 0, T0)
    assert manager.delete_topic_partition("gone", 0)
    assert not manager.delete_topic_partition("gone", 0)
    assert manager.get("gone", 0) is None
    assert not (dirs[0] / "gone-0").exists()  # renamed away at once; removed in the background
    manager.wait_for_syncs()
    assert [p.name for p in dirs[0].iterdir() if p.is_dir()] == []
    manager.checkpoint()
    assert (dirs[0] / "recovery-point-offset-checkpoint").read_text() == "0\n0\n"


def test_a_deleted_partition_dir_goes_file_delete_delay_ms_later(dirs: list[Path], managers: list[LogManager]) -> None:
    manager = start(managers, dirs)
    config = LogConfig(file_delete_delay_ms=60_000)
    manager.create("later", 0, None, config, T0).append_as_leader(make_batch(1), 0, T0)
    assert manager.delete_topic_partition("later", 0, T0)
    renamed = [p.name for p in dirs[0].iterdir() if p.is_dir()]
    assert len(renamed) == 1 and renamed[0].startswith("later-0.") and renamed[0].endswith("-delete")
    manager.maintain(T0 + 59_999)
    manager.wait_for_syncs()
    assert [p.name for p in dirs[0].iterdir() if p.is_dir()] == renamed  # not due yet
    manager.maintain(T0 + 60_000)
    manager.wait_for_syncs()
    assert [p.name for p in dirs[0].iterdir() if p.is_dir()] == []


def test_leftover_delete_dirs_are_removed_at_load(dirs: list[Path], managers: list[LogManager]) -> None:
    leftover = dirs[0] / f"gone-0.{uuid.uuid4().hex}-delete"
    leftover.mkdir(parents=True)
    (leftover / "00000000000000000000.log").write_bytes(b"x")
    assert start(managers, dirs).partitions() == []
    assert not leftover.exists()


def test_update_config_reaches_every_partition_of_the_topic(dirs: list[Path], managers: list[LogManager]) -> None:
    manager = start(managers, dirs)
    for p in range(2):
        manager.create("t", p, None, LogConfig(), T0)
    other = manager.create("u", 0, None, LogConfig(), T0)
    manager.update_config("t", LogConfig(retention_ms=5))
    assert [manager.get("t", p).config.retention_ms for p in range(2)] == [5, 5]  # type: ignore[union-attr]
    assert other.config.retention_ms == LogConfig().retention_ms


def expiring_log(manager: LogManager, partition: int, file_delete_delay_ms: int = 0) -> PartitionLog:
    """Partition ``partition`` of ``t`` (retention.ms 1 s) with a rolled segment of two records written at T0."""
    log = manager.create(
        "t", partition, None, LogConfig(retention_ms=1000, file_delete_delay_ms=file_delete_delay_ms), T0
    )
    log.append_as_leader(make_batch(2, timestamp=T0), 0, T0)
    log.roll(T0)
    return log


def test_maintain_runs_retention_and_checkpoints_when_due(dirs: list[Path], managers: list[LogManager]) -> None:
    manager = start(managers, dirs)
    log = expiring_log(manager, 0)
    log.append_as_leader(make_batch(2, timestamp=T0 + 100_000), 0, T0)
    results = manager.maintain(T0 + 2000)
    assert results[TopicPartition("t", 0)].deleted_segments == [(0, "retention_ms")]
    assert not (dirs[0] / "log-start-offset-checkpoint").exists()
    manager.maintain(T0 + 60_000)
    manager.wait_for_syncs()  # checkpoints are written on the scheduler's thread
    assert (dirs[0] / "log-start-offset-checkpoint").read_text() == "0\n1\nt 0 2\n"


def test_retention_runs_on_kafkas_schedule(dirs: list[Path], managers: list[LogManager]) -> None:
    """First log.initial.task.delay.ms after the first maintenance, then every log.retention.check.interval.ms."""
    schedule = MaintenanceSchedule(retention_check_interval_ms=300_000, initial_task_delay_ms=30_000)
    manager = start(managers, dirs, schedule=schedule)
    log = expiring_log(manager, 0)

    def deleted(now_ms: int) -> list[tuple[int, str]]:
        result = manager.maintain(now_ms).get(TopicPartition("t", 0))
        return list(result.deleted_segments) if result is not None else []

    assert deleted(T0) == []  # the first tick: retention is due 30 s on
    assert deleted(T0 + 29_999) == []
    assert deleted(T0 + 30_000) == [(0, "retention_ms")]
    log.append_as_leader(make_batch(2, timestamp=T0), 0, T0 + 30_000)
    log.roll(T0 + 30_000)
    assert deleted(T0 + 31_000) == []  # expired, but the next check is 300 s after the first
    assert deleted(T0 + 329_999) == []
    assert deleted(T0 + 330_000) == [(2, "retention_ms")]


def test_deleted_files_go_between_retention_checks(dirs: list[Path], managers: list[LogManager]) -> None:
    """A tick with no duty due still removes what file.delete.delay.ms has released, and only that."""
    schedule = MaintenanceSchedule(retention_check_interval_ms=300_000, initial_task_delay_ms=0)
    manager = start(managers, dirs, schedule=schedule)
    expiring = expiring_log(manager, 0, file_delete_delay_ms=60_000)
    idle = manager.create("t", 1, None, LogConfig(), T0)
    manager.wait_for_syncs()  # the new logs' files are synced on the scheduler's thread
    manager.maintain(T0)  # the first tick (settles those syncs)
    assert manager.maintain(T0 + 2_000) == {}  # expired, but retention is not due
    (deleted,) = manager.maintain(T0 + 300_000).values()
    assert deleted.deleted_segments == [(0, "retention_ms")] and deleted.removed_files == []
    assert not idle.needs_tending and expiring.needs_tending
    assert manager.maintain(T0 + 359_999) == {}
    (removed,) = manager.maintain(T0 + 360_000).values()
    assert [path.suffix for path in removed.removed_files].count(".deleted") >= 1
    manager.wait_for_syncs()  # files are removed on the scheduler's thread
    assert not any(path.exists() for path in removed.removed_files)
    manager.maintain(T0 + 360_001)  # settles the roll's segment sync, which may have finished only now
    assert not expiring.needs_tending


def test_a_tick_with_no_duty_due_visits_only_the_logs_that_need_tending(
    dirs: list[Path], managers: list[LogManager]
) -> None:
    """Each visit asks ``step_done`` once: an idle tick asks it of no log, not of all 31."""
    schedule = MaintenanceSchedule(
        retention_check_interval_ms=300_000,
        flush_check_interval_ms=1_000_000,
        producer_expiration_check_interval_ms=1_000_000,
        initial_task_delay_ms=0,
    )
    manager = start(managers, dirs, schedule=schedule)
    idle = [manager.create("idle", partition, None, LogConfig(), T0) for partition in range(30)]
    expiring_log(manager, 0, file_delete_delay_ms=60_000)

    def visits(now_ms: int) -> int:
        asked = 0

        def step_done() -> bool:
            nonlocal asked
            asked += 1
            return False

        for _ in manager.maintenance(now_ms, step_done=step_done):
            pass
        return asked

    manager.wait_for_syncs()  # the new logs' files and the roll are synced on the scheduler's thread
    assert visits(T0) == 31, "retention is due at the first tick: every log"
    assert visits(T0 + 1_000) == 0
    assert visits(T0 + 300_000) == 31, "retention again: every log (it deletes the expired segment)"
    assert visits(T0 + 300_001) == 1, "the deleted segment's files wait for file.delete.delay.ms"
    assert visits(T0 + 360_000) == 1, "and go now"
    manager.wait_for_syncs()
    visits(T0 + 360_001)  # settles the removal and the retention roll's sync, which may have finished only now
    assert visits(T0 + 360_002) == 0
    idle[3].append_as_leader(make_batch(2, timestamp=T0), 0, T0 + 360_002)
    idle[3].roll(T0 + 360_002)
    assert visits(T0 + 360_003) >= 1, "a roll's segment sync is settled by a tick"
    manager.wait_for_syncs()
    visits(T0 + 360_004)
    assert visits(T0 + 360_005) == 0


def test_maintenance_yields_between_steps_and_passes_over_logs_deleted_meanwhile(
    dirs: list[Path], managers: list[LogManager]
) -> None:
    manager = start(managers, dirs)  # every duty due at every tick
    for partition in range(20):
        expiring_log(manager, partition)
    results: dict[TopicPartition, object] = {}
    asked = iter(range(1_000))
    steps = manager.maintenance(T0 + 2_000, results, step_done=lambda: next(asked) % 3 == 2)  # 3 logs a step
    next(steps)
    assert len(results) == 3, "the first step: three logs, not all"
    assert manager.delete_topic_partition("t", 19, T0 + 2_000)
    yielded = 1 + sum(1 for _ in steps)
    assert yielded == 20 // 3  # asked after each of the 20 logs, the deleted one too
    assert sorted(tp.partition for tp in results) == list(range(19)), "every log but the one deleted meanwhile"
    assert all(r.deleted_segments == [(0, "retention_ms")] for r in results.values())  # type: ignore[attr-defined]


def test_producer_ids_expire_every_check_interval(dirs: list[Path], managers: list[LogManager]) -> None:
    manager = start(managers, dirs, schedule=MaintenanceSchedule(producer_expiration_check_interval_ms=600_000))
    log = manager.create("t", 0, None, LogConfig(producer_id_expiration_ms=1000), T0)
    log.append_as_leader(idempotent_batch(7, 0, 0), 0, T0)
    manager.maintain(T0)
    manager.maintain(T0 + 599_999)
    assert 7 in log.producer_state.producers, "expired, but not checked yet"
    result = manager.maintain(T0 + 600_000)[TopicPartition("t", 0)]
    assert result.expired_producers == [7]


def test_read_broker_id(dirs: list[Path], managers: list[LogManager]) -> None:
    from barnabas.log import read_broker_id

    assert read_broker_id(dirs[0]) is None
    start(managers, dirs, broker_id=12)
    assert read_broker_id(dirs[0]) == 12
    (dirs[1] / "meta.properties").write_text("version=0\n")
    assert read_broker_id(dirs[1]) is None


# --- high watermark checkpoint (replication-offset-checkpoint) ---------------------------------


def _replicated(manager: LogManager, partition: int, records: int, high_watermark: int) -> PartitionLog:
    """A partition driven as replication will: leader appends, then its own high watermark."""
    log = manager.create("t", partition, None, LogConfig(), T0)
    log.append_as_leader(make_batch(records), 0, T0)
    log.hw_follows_log_end = False
    log.high_watermark = high_watermark
    return log


def test_high_watermarks_round_trip_through_a_clean_restart(dirs: list[Path], managers: list[LogManager]) -> None:
    manager = start(managers, dirs)
    _replicated(manager, 0, 5, 3)
    manager.create("t", 1, None, LogConfig(), T0).append_as_leader(make_batch(4), 0, T0)  # single replica
    manager.create("t", 2, None, LogConfig(), T0)
    manager.close()
    assert (dirs[0] / "replication-offset-checkpoint").read_text() == "0\n2\nt 0 3\nt 2 0\n"
    assert (dirs[1] / "replication-offset-checkpoint").read_text() == "0\n1\nt 1 4\n"

    restarted = start(managers, dirs)
    logs = [restarted.get("t", p) for p in range(3)]
    assert [log.checkpointed_high_watermark for log in logs if log] == [3, 4, 0]
    # Single-replica behaviour is unchanged: the high watermark is the log end until
    # replication takes the partition over and starts from the checkpoint.
    assert [log.high_watermark for log in logs if log] == [5, 4, 0]
    log = logs[0]
    assert log is not None and log.hw_follows_log_end
    log.hw_follows_log_end = False
    log.high_watermark = log.checkpointed_high_watermark  # type: ignore[assignment]
    assert log.high_watermark == 3


def test_no_checkpoint_entry_keeps_the_log_end(dirs: list[Path], managers: list[LogManager]) -> None:
    manager = start(managers, dirs)
    manager.create("t", 0, None, LogConfig(), T0).append_as_leader(make_batch(2), 0, T0)
    manager.close()
    (dirs[0] / "replication-offset-checkpoint").unlink()
    log = start(managers, dirs).get("t", 0)
    assert log is not None and (log.checkpointed_high_watermark, log.high_watermark) == (None, 2)


def test_high_watermarks_are_checkpointed_by_maintain_when_due(dirs: list[Path], managers: list[LogManager]) -> None:
    manager = start(managers, dirs)
    log = _replicated(manager, 0, 5, 1)
    path = dirs[0] / "replication-offset-checkpoint"
    manager.maintain(T0 + 4_999)
    manager.wait_for_syncs()  # checkpoints are written on the scheduler's thread
    assert not path.exists()
    manager.maintain(T0 + 5_000)  # replica.high.watermark.checkpoint.interval.ms
    manager.wait_for_syncs()
    assert path.read_text() == "0\n1\nt 0 1\n"
    assert not (dirs[0] / "recovery-point-offset-checkpoint").exists()  # that one waits 60 s
    log.high_watermark = 4
    manager.maintain(T0 + 9_999)
    manager.wait_for_syncs()
    assert path.read_text() == "0\n1\nt 0 1\n"
    manager.maintain(T0 + 10_000)
    manager.wait_for_syncs()
    assert path.read_text() == "0\n1\nt 0 4\n"


def test_unchanged_high_watermarks_are_not_written_again(dirs: list[Path], managers: list[LogManager]) -> None:
    """The file is replaced (a new inode) only when a high watermark moved since the last write."""
    manager = start(managers, dirs)
    log = _replicated(manager, 0, 5, 1)
    path = dirs[0] / "replication-offset-checkpoint"
    manager.maintain(T0 + 5_000)
    manager.wait_for_syncs()
    written = path.stat().st_ino
    manager.maintain(T0 + 10_000)
    manager.wait_for_syncs()
    assert path.stat().st_ino == written, "nothing moved: not rewritten"
    log.high_watermark = 3
    manager.maintain(T0 + 15_000)
    manager.wait_for_syncs()
    assert path.stat().st_ino != written and path.read_text() == "0\n1\nt 0 3\n"


def test_the_high_watermark_interval_is_configurable(dirs: list[Path], managers: list[LogManager]) -> None:
    manager = LogManager(dirs, LogConfig(), 1, "c1", high_watermark_checkpoint_interval_ms=100)
    managers.append(manager)
    manager.load_all(T0)
    _replicated(manager, 0, 2, 2)
    manager.maintain(T0 + 100)
    manager.wait_for_syncs()
    assert (dirs[0] / "replication-offset-checkpoint").read_text() == "0\n1\nt 0 2\n"


def test_a_crash_keeps_the_last_written_high_watermarks(dirs: list[Path], managers: list[LogManager]) -> None:
    manager = start(managers, dirs)
    log = _replicated(manager, 0, 5, 2)
    manager.checkpoint_high_watermarks()
    log.high_watermark = 5  # never checkpointed
    crash(log)
    manager._release_locks()  # the process died: its locks went with it
    managers.remove(manager)

    restarted = start(managers, dirs)
    assert not any(restarted.clean_shutdown.values())
    recovered = restarted.get("t", 0)
    assert recovered is not None and recovered.checkpointed_high_watermark == 2


def test_a_checkpointed_high_watermark_is_clamped_into_the_log(dirs: list[Path], managers: list[LogManager]) -> None:
    manager = start(managers, dirs)
    for p in range(2):
        log = manager.create("t", p, None, LogConfig(), T0)
        log.append_as_leader(make_batch(5), 0, T0)
    manager.get("t", 1).delete_records_before(4)  # type: ignore[union-attr]
    where = {p: manager.log_dir_of("t", p) for p in range(2)}
    manager.close()
    # A crash lost data the checkpoint had seen; a stale entry lies below the log start.
    for p, high_watermark in [(0, 50), (1, 1)]:
        log_dir = where[p]
        assert log_dir is not None
        OffsetCheckpointFile(log_dir / "replication-offset-checkpoint").write({TopicPartition("t", p): high_watermark})
    restarted = start(managers, dirs)
    assert [restarted.get("t", p).checkpointed_high_watermark for p in range(2)] == [5, 4]  # type: ignore[union-attr]


def test_a_corrupt_high_watermark_checkpoint_is_ignored(dirs: list[Path], managers: list[LogManager]) -> None:
    manager = start(managers, dirs)
    manager.create("t", 0, None, LogConfig(), T0).append_as_leader(make_batch(2), 0, T0)
    manager.close()
    (dirs[0] / "replication-offset-checkpoint").write_text("0\n7\nt 0 1\n")
    log = start(managers, dirs).get("t", 0)
    assert log is not None and (log.checkpointed_high_watermark, log.high_watermark) == (None, 2)


def test_a_log_opened_as_a_replica_starts_from_the_checkpoint(dirs: list[Path]) -> None:
    directory = dirs[0] / "t-0"
    log = PartitionLog.open(directory, LogConfig(), T0)
    log.append_as_leader(make_batch(5), 0, T0)
    log.close()
    replica = PartitionLog.open(directory, LogConfig(), T0, high_watermark=3, hw_follows_log_end=False)
    assert (replica.high_watermark, replica.checkpointed_high_watermark) == (3, 3)
    replica.close()
    no_entry = PartitionLog.open(directory, LogConfig(), T0, hw_follows_log_end=False)
    assert (no_entry.high_watermark, no_entry.checkpointed_high_watermark) == (5, None)
    no_entry.close()


def test_a_new_partition_is_made_durable_off_the_callers_thread(
    dirs: list[Path], managers: list[LogManager], fsyncs: list[tuple[str, Path]]
) -> None:
    """Kafka flushes a new log's partition.metadata on its scheduler; nothing of the creation waits on the disk."""
    manager = start(managers, dirs)
    fsyncs.clear()
    manager.create("orders", 0, TOPIC_ID, LogConfig(), T0)
    here = threading.current_thread().name
    assert [path for thread, path in fsyncs if thread == here] == []
    manager.wait_for_syncs()
    partition_dir = dirs[0].absolute() / "orders-0"
    synced = {path for _, path in fsyncs}
    assert {partition_dir / "partition.metadata", partition_dir, dirs[0].absolute()} <= synced
