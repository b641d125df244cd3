"""Every partition log of a broker across its log dirs (Kafka's LogManager).

Rules this module keeps:

- A log dir is used by one process at a time: ``<dir>/.lock`` is held with
  ``flock(LOCK_EX | LOCK_NB)`` from construction to :meth:`LogManager.close`. flock belongs to
  an open file description, so even a second manager in the same process is refused.
- ``meta.properties`` pins a dir to one broker.id and cluster.id; a mismatch is refused, never
  overwritten (Kafka's InconsistentBrokerIdException / InconsistentClusterIdException).
- ``.kafka_cleanshutdown`` is removed at start and written by a clean :meth:`LogManager.close`.
  With it no segment is recovered (every log was closed whole, as Kafka's LogLoader trusts);
  only each active segment's tail after its last index entry is checked. Without it, segments
  from the recovery point on are recovered, and partitions missing from the recovery-point
  checkpoint from offset 0.
- Partition dirs are ``<topic>-<partition>``; deleted ones are renamed ``<name>.<uuid hex>-delete``
  before removal, and leftovers of that are removed at load.
- ``recovery-point-offset-checkpoint`` and ``log-start-offset-checkpoint`` per dir are written by
  :meth:`LogManager.checkpoint`, every ``checkpoint_interval_ms`` from :meth:`LogManager.maintain`,
  and at close.
- ``replication-offset-checkpoint`` per dir holds every log's high watermark (Kafka's
  ReplicaManager writes it; here the log manager owns the dirs). It is written by
  :meth:`LogManager.checkpoint_high_watermarks`, every ``high_watermark_checkpoint_interval_ms``
  (replica.high.watermark.checkpoint.interval.ms) from :meth:`LogManager.maintain`, and at close;
  at load each log gets its entry as :attr:`PartitionLog.checkpointed_high_watermark`.
- The log cleaner's state (``cleaner-offset-checkpoint`` per dir, the pass in progress) lives in
  :attr:`LogManager.cleaner`. The manager plans a pass (:meth:`LogManager.begin_cleaning`) and
  swaps it in on the caller's thread; only ``cleaner.clean(job)`` may run on another thread, and
  the caller must let a pass in flight finish (or abort) before :meth:`LogManager.close`.
- No clock is read: callers pass ``now_ms``.
- With ``background_writes`` (the default) every log writes its leader batches on one shared
  :class:`AppendWriter` thread, stopped after the logs are closed; and the disk work that need
  not hold up the caller runs on one :class:`LogScheduler` thread: syncing rolled segments,
  removing deleted segments and partition dirs, and writing the checkpoints
  :meth:`LogManager.maintain` takes (their content is taken on the caller's thread). The
  scheduler is drained before :meth:`LogManager.close` writes the final checkpoints, so no older
  one lands after them.
"""

from __future__ import annotations

import collections
import fcntl
import logging
import os
import shutil
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from .append_writer import AppendWriter
from .checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    OffsetCheckpointFile,
)
from .cleaner import CleaningJob
from .cleaner_config import CleanerConfig
from .cleaner_manager import CleanerManager
from .config import LogConfig
from .errors import (
    CorruptCheckpointError,
    InconsistentBrokerIdError,
    InconsistentClusterIdError,
    InconsistentTopicIdError,
    LogDirLockedError,
    LogError,
)
from .files import (
    DELETE_DIR_SUFFIX,
    TopicPartition,
    fsync_dir,
    parse_partition_dir_name,
    partition_dir_name,
    validate_topic_name,
    write_atomically,
)
from .log import MaintenanceResult, PartitionLog, remove_deleted_dir
from .log_dir_failures import LogDirFailures
from .meta_properties import MetaProperties, new_directory_id, read_meta_properties, write_meta_properties
from .periodic import Periodic
from .scheduler import LogScheduler, run_soon

__all__ = ["CLEAN_SHUTDOWN_FILE", "LOCK_FILE", "LogManager", "MaintenanceSchedule"]

logger = logging.getLogger(__name__)

LOCK_FILE = ".lock"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
#: Kafka's log.flush.offset.checkpoint.interval.ms default.
DEFAULT_CHECKPOINT_INTERVAL_MS = 60_000
#: Kafka's replica.high.watermark.checkpoint.interval.ms default.
DEFAULT_HIGH_WATERMARK_CHECKPOINT_INTERVAL_MS = 5_000


@dataclass(frozen=True, slots=True)
class MaintenanceSchedule:
    """How often :meth:`LogManager.maintain` runs each log's periodic duties (Kafka's settings; 0: every call).

    Retention and the flusher first run ``initial_task_delay_ms`` after the first call, as Kafka's
    LogManager schedules them; producer expiration one interval after it, as each UnifiedLog does.
    """

    #: log.retention.check.interval.ms
    retention_check_interval_ms: int = 0
    #: log.flush.scheduler.interval.ms
    flush_check_interval_ms: int = 0
    #: producer.id.expiration.check.interval.ms
    producer_expiration_check_interval_ms: int = 0
    #: log.initial.task.delay.ms
    initial_task_delay_ms: int = 0


class LogManager:
    """Owns the log dirs of one broker and the partition logs in them."""

    def __init__(
        self,
        log_dirs: Sequence[Path],
        default_config: LogConfig,
        broker_id: int,
        cluster_id: str | None,
        *,
        checkpoint_interval_ms: int = DEFAULT_CHECKPOINT_INTERVAL_MS,
        high_watermark_checkpoint_interval_ms: int = DEFAULT_HIGH_WATERMARK_CHECKPOINT_INTERVAL_MS,
        schedule: MaintenanceSchedule | None = None,
        cleaner_config: CleanerConfig | None = None,
        background_writes: bool = True,
        foreign_paths: Collection[Path] = (),
    ) -> None:
        """Create, lock and identify every log dir.

        ``foreign_paths`` are other components' files that may live in a log dir (the embedded
        coordination database): left alone without a warning. ``schedule`` says when retention,
        the time-based flush and producer expiration run (None: at every :meth:`maintain`).

        Raises:
            LogDirLockedError: another process holds a dir's ``.lock``.
            InconsistentBrokerIdError: a dir's ``meta.properties`` names another broker.id.
            InconsistentClusterIdError: a dir names another cluster, or the dirs disagree.
            ValueError: no log dirs, or the same dir twice.
        """
        if not log_dirs:
            raise ValueError("at least one log dir is required")
        self.log_dirs = [Path(d).absolute() for d in log_dirs]
        if len(set(self.log_dirs)) != len(self.log_dirs):
            raise ValueError(f"duplicate log dirs in {[str(d) for d in self.log_dirs]}")
        self.default_config = default_config
        self.foreign_paths = frozenset(Path(p).absolute() for p in foreign_paths)
        self.broker_id = broker_id
        self.checkpoint_interval_ms = checkpoint_interval_ms
        self.high_watermark_checkpoint_interval_ms = high_watermark_checkpoint_interval_ms
        self.schedule = schedule or MaintenanceSchedule()
        self._retention = Periodic(self.schedule.retention_check_interval_ms, self.schedule.initial_task_delay_ms)
        self._flusher = Periodic(self.schedule.flush_check_interval_ms, self.schedule.initial_task_delay_ms)
        self._producer_expiry = Periodic(self.schedule.producer_expiration_check_interval_ms)
        self._locks: dict[Path, int] = {}
        self._logs: dict[TopicPartition, tuple[Path, PartitionLog]] = {}
        #: Per topic, the partitions of ``_logs`` (a reconcile of a few topics must not walk every log).
        self._by_topic: dict[str, set[int]] = {}
        #: The logs that told they need tending (PartitionLog.attach_tending): a tick with no periodic
        #: duty due visits these, not every log.
        self._tending: set[TopicPartition] = set()
        #: Partitions per log dir, kept as ``_logs`` changes (counting them per create was quadratic).
        self._per_dir: collections.Counter[Path] = collections.Counter()
        self._last_checkpoint_ms: int | None = None
        self._last_hw_checkpoint_ms: int | None = None
        #: What each checkpoint file was last given to write (periodic writes of the same contents are skipped).
        self._checkpointed: dict[Path, dict[TopicPartition, int]] = {}
        self._closed = False
        #: The log dirs a failed write took offline; the broker listens (Kafka's LogDirFailureChannel).
        self.failures = LogDirFailures(self.log_dirs)
        #: The log cleaner: which compacted log to clean next, its checkpoints, the pass in flight.
        self.cleaner = CleanerManager(cleaner_config or CleanerConfig())
        self._writer: AppendWriter | None = None
        self._scheduler: LogScheduler | None = None
        #: Renamed partition dirs of deleted logs, and when their files go (delete_topic_partition).
        self._doomed_dirs: list[tuple[int, Path]] = []
        try:
            for log_dir in self.log_dirs:
                log_dir.mkdir(parents=True, exist_ok=True)
                self._lock(log_dir)
            fresh = {d for d in self.log_dirs if read_meta_properties(d) is None}
            #: Dirs that had no ``meta.properties``: new, or emptied since the broker last ran.
            self.fresh_dirs = frozenset(fresh)
            self.cluster_id = self._check_meta_properties(cluster_id)
            #: Each dir's ``directory.id`` (KIP-858), given to a dir that had none.
            self.directory_ids = {d: self._directory_id(d) for d in self.log_dirs}
            #: Per dir: closed cleanly last time, or new (either way nothing unflushed was lost).
            self.clean_shutdown = {d: self._take_clean_shutdown_marker(d) or d in fresh for d in self.log_dirs}
        except BaseException:
            self._release_locks()
            raise
        if background_writes:
            self._writer = AppendWriter()
            self._scheduler = LogScheduler()

    # --- identity and locking ----------------------------------------------------------------

    def _lock(self, log_dir: Path) -> None:
        lock_file = log_dir / LOCK_FILE
        fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise LogDirLockedError(log_dir, lock_file) from None
        self._locks[log_dir] = fd

    def _release_locks(self) -> None:
        for fd in self._locks.values():
            os.close(fd)  # closing the description releases the flock
        self._locks.clear()

    def _check_meta_properties(self, cluster_id: str | None) -> str | None:
        found: dict[Path, MetaProperties | None] = {}
        for log_dir in self.log_dirs:
            try:
                found[log_dir] = read_meta_properties(log_dir)
            except CorruptCheckpointError as exc:
                raise LogError(f"cannot use log dir {log_dir}: {exc}") from exc
        stored_clusters = {m.cluster_id for m in found.values() if m is not None and m.cluster_id is not None}
        for log_dir, meta in found.items():
            if meta is not None and meta.broker_id != self.broker_id:
                raise InconsistentBrokerIdError(
                    f"configured broker.id {self.broker_id} doesn't match stored broker.id {meta.broker_id} "
                    f"in {log_dir / 'meta.properties'}; if you moved your data, make sure the configured "
                    "broker.id matches; to create a new broker, empty the log dirs"
                )
            if meta is not None and cluster_id is not None and meta.cluster_id not in (None, cluster_id):
                raise InconsistentClusterIdError(
                    f"the cluster id {cluster_id} doesn't match stored cluster.id {meta.cluster_id} in "
                    f"{log_dir / 'meta.properties'}: the broker is trying to join the wrong cluster"
                )
        if cluster_id is None and len(stored_clusters) > 1:
            raise InconsistentClusterIdError(f"log dirs belong to different clusters: {sorted(stored_clusters)}")
        resolved = cluster_id if cluster_id is not None else next(iter(stored_clusters), None)
        for log_dir, meta in found.items():
            if meta is None or (meta.cluster_id is None and resolved is not None):
                kept_id = meta.directory_id if meta is not None else None
                write_meta_properties(log_dir, MetaProperties(self.broker_id, resolved, directory_id=kept_id))
        return resolved

    def _directory_id(self, log_dir: Path) -> str:
        meta = read_meta_properties(log_dir)
        assert meta is not None  # written by _check_meta_properties
        if meta.directory_id is not None:
            return meta.directory_id
        directory_id = new_directory_id()
        write_meta_properties(log_dir, replace(meta, directory_id=directory_id))
        return directory_id

    def _take_clean_shutdown_marker(self, log_dir: Path) -> bool:
        marker = log_dir / CLEAN_SHUTDOWN_FILE
        if not marker.exists():
            return False
        # Removed before anything is loaded: a crash from here on must count as unclean.
        marker.unlink()
        fsync_dir(log_dir)
        return True

    # --- loading and creating ----------------------------------------------------------------

    def load_all(self, now_ms: int, topic_configs: Mapping[str, LogConfig] | None = None) -> list[TopicPartition]:
        """Open every partition dir in every log dir, honouring the checkpoints.

        Args:
            now_ms: the current time.
            topic_configs: per-topic configs; topics not in it use ``default_config``.

        Returns:
            The partitions loaded, sorted.

        Raises:
            LogError: the same partition exists in two log dirs.
        """
        self._check_open()
        configs = topic_configs or {}
        loaded: list[TopicPartition] = []
        for log_dir in self.log_dirs:
            clean = self.clean_shutdown[log_dir]
            recovery_points = self._read_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT)
            start_offsets = self._read_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT)
            high_watermarks = self._read_checkpoint(log_dir / REPLICATION_OFFSET_CHECKPOINT)
            warned = clean
            for child in sorted(log_dir.iterdir()):
                if not child.is_dir():
                    continue
                if child.name.endswith(DELETE_DIR_SUFFIX):
                    logger.info("removing partition dir %s left over from a deletion", child)
                    shutil.rmtree(child, ignore_errors=True)
                    continue
                tp = parse_partition_dir_name(child.name)
                if tp is None:
                    if child.absolute() not in self.foreign_paths:
                        logger.warning("ignoring %s: not a partition dir", child)
                    continue
                if tp in self._logs:
                    raise LogError(f"duplicate log directories for {tp}: {self._logs[tp][1].directory} and {child}")
                if not warned:
                    logger.warning("no clean shutdown marker in %s: recovering its logs", log_dir)
                    warned = True
                recovery_point = recovery_points.get(tp)
                if recovery_point is None and not clean:
                    recovery_point = 0
                log = PartitionLog.open(
                    child,
                    configs.get(tp.topic, self.default_config),
                    now_ms,
                    recovery_point=recovery_point,
                    log_start_offset=start_offsets.get(tp),
                    high_watermark=high_watermarks.get(tp),
                    clean_shutdown=clean,
                )
                self._attach(tp, log)
                log.attach_failure_channel(self.failures.report)
                self._logs[tp] = (log_dir, log)
                self._by_topic.setdefault(tp.topic, set()).add(tp.partition)
                self._per_dir[log_dir] += 1
                self.cleaner.reopened(tp)
                loaded.append(tp)
        self._last_checkpoint_ms = self._last_hw_checkpoint_ms = now_ms
        return sorted(loaded)

    def _attach(self, tp: TopicPartition, log: PartitionLog) -> None:
        """Give a log opened here the manager's writer and scheduler, and a place in the ticks."""
        log.attach_tending(partial(self._tending.add, tp))
        log.attach_writer(self._writer)
        log.attach_scheduler(self._scheduler)
        if log.needs_tending:
            self._tending.add(tp)

    def partition_dirs(self) -> dict[TopicPartition, Path]:
        """Every partition dir in the log dirs, loaded or not (a restore reads them before loading)."""
        found: dict[TopicPartition, Path] = {}
        for log_dir in self.log_dirs:
            for child in sorted(log_dir.iterdir()):
                tp = parse_partition_dir_name(child.name) if child.is_dir() else None
                if tp is not None and not child.name.endswith(DELETE_DIR_SUFFIX):
                    found.setdefault(tp, child)
        return found

    @staticmethod
    def _read_checkpoint(path: Path) -> dict[TopicPartition, int]:
        try:
            return OffsetCheckpointFile(path).read()
        except CorruptCheckpointError as exc:
            logger.warning("ignoring %s: %s", path, exc)
            return {}

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        """The open log of a partition, or None (a plain tuple finds a TopicPartition key: it is called per
        partition of every fetch, where building the named tuple was a tenth of a broker's time at rest)."""
        entry = self._logs.get((topic, partition))  # type: ignore[call-overload]
        return entry[1] if entry is not None else None

    def highest_producer_id(self) -> int:
        """The highest producer id any open log holds a state of (-1: none)."""
        return max((pid for _, log in self._logs.values() for pid in log.producer_state.producers), default=-1)

    def partitions(self) -> list[TopicPartition]:
        """Every partition with an open log, sorted."""
        return sorted(self._logs)

    def partitions_of(self, topic: str) -> list[TopicPartition]:
        """The partitions of ``topic`` with an open log, sorted."""
        return [TopicPartition(topic, p) for p in sorted(self._by_topic.get(topic, ()))]

    def log_dir_of(self, topic: str, partition: int) -> Path | None:
        """The log dir holding a partition, or None."""
        entry = self._logs.get(TopicPartition(topic, partition))
        return entry[0] if entry is not None else None

    def create(
        self, topic: str, partition: int, topic_id: uuid.UUID | None, config: LogConfig, now_ms: int
    ) -> PartitionLog:
        """Create a partition's log on the log dir with the fewest partitions (or return the existing one).

        Raises:
            ValueError: an illegal topic name or a negative partition.
            InconsistentTopicIdError: the partition exists with another topic id.
        """
        self._check_open()
        validate_topic_name(topic)
        if partition < 0:
            raise ValueError(f"partition {partition} of {topic} is negative")
        tp = TopicPartition(topic, partition)
        existing = self._logs.get(tp)
        if existing is not None:
            log = existing[1]
            if topic_id is not None and log.topic_id is not None and log.topic_id != topic_id:
                raise InconsistentTopicIdError(f"{tp} exists with topic id {log.topic_id}, not {topic_id}")
            return log
        log_dir = min(self.log_dirs, key=lambda d: self._per_dir[d])
        log = PartitionLog.open(log_dir / partition_dir_name(topic, partition), config, now_ms, topic_id=topic_id)
        self._attach(tp, log)
        log.attach_failure_channel(self.failures.report)
        self._logs[tp] = (log_dir, log)
        self._by_topic.setdefault(tp.topic, set()).add(tp.partition)
        self._per_dir[log_dir] += 1
        return log

    def delete_topic_partition(self, topic: str, partition: int, now_ms: int | None = None) -> bool:
        """Delete a partition's log; return whether it existed.

        The partition dir is renamed away at once. Its files go on the scheduler's thread, at
        once without ``now_ms``, else ``file.delete.delay.ms`` later (Kafka's delayed log
        deletion: removing gigabytes competes with the appends of the moment).
        """
        self._check_open()
        tp = TopicPartition(topic, partition)
        entry = self._logs.pop(tp, None)
        self._tending.discard(tp)
        held = self._by_topic.get(tp.topic)
        if held is not None:
            held.discard(tp.partition)
            if not held:
                del self._by_topic[tp.topic]
        if entry is None:
            return False
        self._per_dir[entry[0]] -= 1
        log = entry[1]
        doomed = log.delete(remove=False)
        self.cleaner.forget(entry[0], tp)
        if doomed is not None:
            due = now_ms + log.config.file_delete_delay_ms if now_ms is not None else -1
            self._doomed_dirs.append((due, doomed))
            self._remove_due_dirs(now_ms if now_ms is not None else -1)
        return True

    def _remove_due_dirs(self, now_ms: int) -> None:
        due = [path for deadline, path in self._doomed_dirs if deadline <= now_ms]
        if not due:
            return
        self._doomed_dirs = [(deadline, path) for deadline, path in self._doomed_dirs if deadline > now_ms]
        for path in due:
            run_soon(self._scheduler, partial(remove_deleted_dir, path))

    def update_config(self, topic: str, config: LogConfig) -> None:
        """Apply a topic config change to every partition of ``topic``."""
        for tp in self.partitions_of(topic):
            self._logs[tp][1].update_config(config)

    # --- periodic work -----------------------------------------------------------------------

    def maintain(self, now_ms: int) -> dict[TopicPartition, MaintenanceResult]:
        """Run the logs' maintenance, and the checkpoints when they are due; return what changed."""
        results: dict[TopicPartition, MaintenanceResult] = {}
        for _ in self.maintenance(now_ms, results):
            pass
        return results

    def maintenance(
        self,
        now_ms: int,
        results: dict[TopicPartition, MaintenanceResult] | None = None,
        *,
        step_done: Callable[[], bool] = lambda: False,
    ) -> Iterator[None]:
        """:meth:`maintain` in steps, yielding between them: a caller on an event loop serves others in
        between. ``step_done`` is asked after each log and ends the step when true (the caller keeps the
        time: a log whose time index is read for the first time may take milliseconds). ``results``
        collects what changed.

        A tick with no periodic duty due visits only the logs that told they need tending (files to
        remove, writes to settle); one with retention due plans every log's segments. With 10,000
        partitions, visiting each one every tick held the event loop for ~40 ms every second, and
        asking each whether it needed tending took half of an idle broker's CPU at 30,000. A log
        created meanwhile waits for the next tick; one closed meanwhile (deleted, or the manager
        closing) is passed over.
        """
        self._check_open()
        self._remove_due_dirs(now_ms)
        retention, flush = self._retention.due(now_ms), self._flusher.due(now_ms)
        expire_producers = self._producer_expiry.due(now_ms)
        every_log = retention or flush or expire_producers
        # The keys, not the items: 10,000 fresh (key, value) tuples a second that outlive the yields
        # would be promoted to the oldest GC generation and bring on full collections.
        for tp in list(self._logs if every_log else self._tending):
            entry = self._logs.get(tp)
            log = entry[1] if entry is not None else None
            if log is not None and not log.closed:
                result = log.maintain(now_ms, retention=retention, flush=flush, expire_producers=expire_producers)
                if results is not None and result.changed:
                    results[tp] = result
            if log is None or log.closed or not log.needs_tending:
                self._tending.discard(tp)
            else:
                self._tending.add(tp)
            if step_done():
                yield
                if self._closed:
                    return
        if self._last_checkpoint_ms is None:
            self._last_checkpoint_ms = now_ms
        elif now_ms - self._last_checkpoint_ms >= self.checkpoint_interval_ms:
            self._write_checkpoints(self._checkpoint_contents())
            self._last_checkpoint_ms = now_ms
        if self._last_hw_checkpoint_ms is None:
            self._last_hw_checkpoint_ms = now_ms
        elif now_ms - self._last_hw_checkpoint_ms >= self.high_watermark_checkpoint_interval_ms:
            self._write_checkpoints(self._high_watermark_contents())
            self._last_hw_checkpoint_ms = now_ms

    def wait_for_syncs(self) -> None:
        """Return once the background work queued so far (syncs, checkpoints, removals) is done."""
        if self._scheduler is not None:
            self._scheduler.wait()

    def _write_checkpoints(self, contents: list[tuple[Path, dict[TopicPartition, int]]]) -> None:
        """Write checkpoint files on the scheduler's thread (here without one), those whose contents
        changed since the last write: an idle broker with 30,000 partitions spent a tenth of its CPU
        rewriting the same high watermarks every 5 s."""
        for path, offsets in contents:
            if self._checkpointed.get(path) == offsets:
                continue
            self._checkpointed[path] = offsets
            queued = run_soon(self._scheduler, partial(OffsetCheckpointFile(path).write, offsets))
            if queued is not None:
                queued.add_done_callback(partial(self._checkpoint_written, path))

    def _checkpoint_written(self, path: Path, future: Future[None]) -> None:
        """A failed write takes its dir offline, and is not what the file holds: forget it, so the next
        due tick writes those contents again."""
        if (error := future.exception()) is not None:
            self._checkpointed.pop(path, None)
            logger.error("writing %s failed: %s", path, error)
            self.failures.report(path, error)

    def begin_cleaning(self, now_ms: int) -> CleaningJob | None:
        """Plan a cleaning pass over the filthiest compacted log, or None (see :class:`CleanerManager`).

        Run the pass with ``cleaner.clean(job)`` (on any thread), then ``cleaner.finish(result,
        now_ms)`` or ``cleaner.abandon(job, error)`` on this one.
        """
        self._check_open()
        return self.cleaner.begin(self._logs, now_ms)

    def clean_once(self, now_ms: int) -> bool:
        """Plan, run and swap in one cleaning pass on this thread; return whether a log was cleaned."""
        self._check_open()
        return self.cleaner.clean_once(self._logs, now_ms)

    def checkpoint(self) -> None:
        """Write every log dir's recovery-point and log-start-offset checkpoints (on this thread)."""
        for path, offsets in self._checkpoint_contents():
            OffsetCheckpointFile(path).write(offsets)

    def checkpoint_high_watermarks(self) -> None:
        """Write every log dir's ``replication-offset-checkpoint`` (ReplicaManager.checkpointHighWatermarks)."""
        for path, offsets in self._high_watermark_contents():
            OffsetCheckpointFile(path).write(offsets)

    def _checkpoint_contents(self) -> list[tuple[Path, dict[TopicPartition, int]]]:
        contents = []
        for log_dir in self.log_dirs:
            logs = {tp: log for tp, (d, log) in self._logs.items() if d == log_dir}
            contents.append((log_dir / RECOVERY_POINT_CHECKPOINT, {tp: log.recovery_point for tp, log in logs.items()}))
            contents.append(
                (log_dir / LOG_START_OFFSET_CHECKPOINT, {tp: log.log_start_offset for tp, log in logs.items()})
            )
        return contents

    def _high_watermark_contents(self) -> list[tuple[Path, dict[TopicPartition, int]]]:
        return [
            (
                log_dir / REPLICATION_OFFSET_CHECKPOINT,
                {tp: log.high_watermark for tp, (d, log) in self._logs.items() if d == log_dir},
            )
            for log_dir in self.log_dirs
        ]

    def close(self) -> None:
        """Clean shutdown: close every log, checkpoint, mark each dir clean, release the locks.

        A dir gets its clean-shutdown marker only when every log in it closed without error.
        """
        if self._closed:
            return
        self.cleaner.stopping = True
        failed: set[Path] = set()
        try:
            if self._scheduler is not None:
                self._scheduler.close()  # its checkpoint writes must not land after the final ones
            for tp, (log_dir, log) in sorted(self._logs.items()):
                try:
                    log.close()
                except Exception:
                    logger.exception("closing the log of %s failed", tp)
                    failed.add(log_dir)
            self.checkpoint()
            self.checkpoint_high_watermarks()
            for log_dir in self.log_dirs:
                if log_dir not in failed:
                    write_atomically(log_dir / CLEAN_SHUTDOWN_FILE, b'{"version":0,"brokerEpoch":-1}')
        finally:
            if self._writer is not None:
                self._writer.close()
            self._release_locks()
            self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise LogError("the log manager is closed")
