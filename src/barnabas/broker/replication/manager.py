"""This broker's replicas: lead, follow or drop each one as the stored partition states say.

Kafka's ReplicaManager driven by storage instead of LeaderAndIsr requests: ``poke()`` (called on
every metadata hint) schedules a reconcile that compares the partition states in the TopicStore
with the roles this broker plays, and

- makes a partition whose state names this broker as leader, in sync in this incarnation's
  broker epoch, a LeaderReplica (a new one for each new leader epoch, after recording the
  epoch's start in the log's leader epoch cache). A state that names this broker as leader in
  an earlier incarnation is not acted on: the broker restarted (or lost its session) since, may
  have lost what it had not flushed, and waits for the controller to elect anew (KIP-380);
- hands a partition led elsewhere to the fetcher for that leader, which truncates it against the
  leader and then replicates it;
- creates logs for new replicas and removes logs of deleted topics (``reconcile_local_logs``);
- keeps the copy of each topic's document beside its logs current, and reports its log end into
  partitions restored from the replicas' logs (``topic_restore``).

The leader's ISR changes are written here, one at a time, with compare-and-set on the partition
key (ZooKeeper-mode Kafka's leader-driven ISR updates): expansion as soon as a follower catches
up, shrinking when one lags longer than ``replica.lag.time.max.ms``. While coordination is
unreachable the writes fail and are retried; produce and fetch go on meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import TYPE_CHECKING

from barnabas.cluster import PartitionState, describe_partitions
from barnabas.coordination import CoordinationError, VersionConflictError
from barnabas.log import PartitionLog
from barnabas.time_slices import SLICE_S, TimeSlices

from ..follower_appends import FollowerAppends
from ..topic_admin import reconcile_local_logs, stored_log_config
from ..topic_restore import LogEndReports, TopicDocuments
from .fetcher import ReplicaFetcher
from .leader import LeaderReplica

if TYPE_CHECKING:
    from ..state import NodeState

__all__ = ["ReplicaManager"]

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
#: How long a reconcile pass of the loop runs before it lets the event loop serve (its own
#: coordination session's renewals among what waits).
RECONCILE_SLICE_S = SLICE_S


class ReplicaManager:
    def __init__(self, state: NodeState) -> None:
        self.state = state
        #: The follower side of appending, which every fetcher writes through.
        self.followers = FollowerAppends(state)
        self.leaders: dict[TopicPartition, LeaderReplica] = {}
        #: Partitions followed: (leader id, leader epoch).
        self.following: dict[TopicPartition, tuple[int, int]] = {}
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._configs: dict[str, dict[str, str]] = {}
        self._reconcile_wake = asyncio.Event()
        #: Set after every reconcile, i.e. after every metadata change (controlled shutdown waits on it).
        self.reconciled = asyncio.Event()
        self._isr_wake = asyncio.Event()
        #: ``replica.lag.time.max.ms``: how long a follower may go without catching up and stay in sync (read
        #: once: every follower fetch asks).
        self.lag_time_max_ms = int(state.config["replica.lag.time.max.ms"])
        self._tasks: list[asyncio.Task[None]] = []
        self._roles = RoleChanges()
        #: What a pass over everything was last taken from (see :meth:`_view`); None: a full pass is due.
        self._view_seen: tuple[object, ...] | None = None
        #: Per stored topic, its generation (TopicStore.topic_generation) when a pass last took it up.
        self._topics_seen: dict[str, tuple[int, int]] = {}
        #: Partitions looked at by passes, for tests and benchmarks: a change costs its topic's partitions.
        self.looks = 0
        self._topic_documents = TopicDocuments(state.logs)
        self._log_end_reports = LogEndReports(state.topics, state.broker_id)
        #: Told (topic, partition, leader epoch) when this broker starts leading a partition,
        #: (topic, partition, None) when it stops; the group coordinator loads its groups so.
        self.leadership_listeners: list[Callable[[str, int, int | None], None]] = []

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Start the loops; the first pass runs in slices too (a restart revisits every partition it holds)."""
        self._reconcile_wake.set()
        self._tasks = [
            asyncio.create_task(self._reconcile_loop(), name="replica reconcile"),
            asyncio.create_task(self._isr_loop(), name="isr updates"),
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._log_end_reports.stop()
        for fetcher in self.fetchers.values():
            await fetcher.close()
        self.fetchers = {}
        self._tasks = []
        for leader in self.leaders.values():
            leader.resign()

    def poke(self) -> None:
        """Metadata may have changed: reconcile soon what changed (see :meth:`_reconcile_in_slices`)."""
        self._reconcile_wake.set()

    def poke_isr(self) -> None:
        self._isr_wake.set()

    def reconcile_now(self, topics: Collection[str] | None = None) -> None:
        """Take up a change this broker made itself (the watch would, a little later), so that the
        partitions it leads accept requests as soon as the admin request is answered; only the
        ``topics`` it changed when given (see :meth:`reconcile`)."""
        try:
            self.reconcile(topics)
        except Exception:
            log.exception("reconciling replicas after a topic change failed; the next change retries")

    # -- queries used by the request handlers ----------------------------------------------------

    def leader(self, topic: str, partition: int) -> LeaderReplica | None:
        """The partition's LeaderReplica, if this broker leads it with its current log."""
        leader = self.leaders.get((topic, partition))
        if leader is None or self.state.logs.get(topic, partition) is not leader.log:
            return None
        return leader

    def led_by_an_earlier_incarnation(self) -> list[TopicPartition]:
        """Partitions the stored state names this broker leader of in an earlier broker epoch.

        They wait for the controller to elect again (moving leadership, or granting it anew).
        """
        me, epoch = self.state.broker_id, self.state.broker_epoch
        return [tp for tp, s in self.state.topics.states.items() if s.leader == me and not s.in_sync(me, epoch)]

    def leading_with_others_in_sync(self) -> list[TopicPartition]:
        """Partitions this broker leads that another live in-sync replica could take over."""
        live = self.state.brokers.live
        me = self.state.broker_id
        return [tp for tp, leader in self.leaders.items() if any(r != me and r in live for r in leader.isr)]

    async def wait_until_none(
        self, pending: Callable[[], list[TopicPartition]], timeout_s: float
    ) -> list[TopicPartition]:
        """Wait, at most ``timeout_s``, until ``pending()`` finds nothing after a reconcile; return what is left."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                while pending():
                    self.reconciled.clear()
                    await self.reconciled.wait()
        return pending()

    # -- reconciling -------------------------------------------------------------------------------

    async def _reconcile_loop(self) -> None:
        while True:
            await self._reconcile_wake.wait()
            self._reconcile_wake.clear()
            try:
                await self._reconcile_in_slices()
            except Exception:
                self._view_seen = None  # what the failed pass took up is not done: the next one does everything
                log.exception("reconciling replicas failed; will retry on the next change")

    def reconcile(self, topics: Collection[str] | None = None) -> None:
        """Make this broker's roles, logs and topic copies what the stored metadata says.

        With ``topics``, only those topics' partitions: a topic this broker just created or grew
        is led before the answer goes out without a pass over every partition (creating 10,000
        partitions as topics of 100 made that quadratic). Every full pass (each watch event)
        still covers everything, those topics included.
        """
        for _ in self._pass(topics):
            pass

    async def _reconcile_in_slices(self) -> None:
        """A :meth:`reconcile` of what changed, letting the event loop run every ``RECONCILE_SLICE_S``.

        Only the topics whose document or partition states changed since a pass last took them up
        are visited (a watch event naming one partition cost a pass over all of them: 70-75 ms at
        10,000 partitions, on every broker, for every change); everything when the broker's view of
        itself or of the live brokers moved, or a whole load replaced the topics (:meth:`_view`).

        Leading 33,000 partitions at once (a broker that registered again after a restart) took
        16 s in one go: the event loop renewed no coordination session meanwhile, the broker lost
        it, and the next election started the same again.
        """
        topics = self.state.topics
        view = self._view()
        changed: list[str] | None = None
        if view == self._view_seen:
            changed = [name for name in topics.topics if topics.topic_generation(name) != self._topics_seen.get(name)]
            changed += [name for name in self._topics_seen if name not in topics.topics]
            for name in changed:
                self._topics_seen.pop(name, None)
        else:
            self._view_seen = view
            self._topics_seen = {}
        for name in topics.topics if changed is None else changed:
            if name in topics.topics:
                self._topics_seen[name] = topics.topic_generation(name)
        slices = TimeSlices(RECONCILE_SLICE_S)
        for _ in self._pass(changed):
            if slices.due():
                await asyncio.sleep(0)

    def _view(self) -> tuple[object, ...]:
        """What every partition's role depends on beside its own topic: a change here needs a full pass."""
        s = self.state
        return (s.topics.loads_done, s.brokers.generation, s.broker_epoch, s.deposed, s.unregistered)

    def _pass(self, topics: Collection[str] | None) -> Iterator[None]:
        """One reconcile pass (over ``topics`` when given, else everything), a step per topic and partition.

        Local logs and topic copies are brought in line a topic at a time (creating the logs of a
        topic another broker made takes a while), and each partition is looked up afresh when its
        turn comes: whoever drives the steps may let other work run between them, and what
        changes meanwhile wakes another pass. Only a full pass forgets the topic copies of
        logs that are gone.
        """
        state = self.state
        wanted = None if topics is None else set(topics)
        local: dict[str, list[TopicPartition]] = {}
        logs = state.logs
        for held in logs.partitions() if wanted is None else [tp for name in wanted for tp in logs.partitions_of(name)]:
            local.setdefault(held.topic, []).append(held)
        for name in sorted(set(state.topics.topics) | set(local) if wanted is None else wanted):
            yield
            reconcile_local_logs(state, [name], local.get(name, []))
            self._topic_documents.sync(state.topics.topics, only=[name])
        stored = state.topics.topics
        mine = self._mine([name for name in (stored if wanted is None else wanted) if name in stored])
        if wanted is None:
            self._topic_documents.forget_gone()
        self._apply_configs(wanted)
        self._drop_all_but(mine, wanted)
        for tp in mine:
            yield
            self._reconcile_partition(tp)
        self._end_pass()

    def _mine(self, names: Collection[str]) -> list[TopicPartition]:
        """The partitions of the stored topics ``names`` this broker holds a replica of."""
        me, stored = self.state.broker_id, self.state.topics.topics
        return [(name, p) for name in names for p, replicas in stored[name].assignment.items() if me in replicas]

    def _drop_all_but(self, mine: list[TopicPartition], topics: Collection[str] | None) -> None:
        """Stop leading and following every partition (of ``topics`` when given) not in ``mine``."""
        wanted = set(mine)

        def dropped(tp: TopicPartition) -> bool:
            return tp not in wanted and (topics is None or tp[0] in topics)

        for tp in [tp for tp in self.leaders if dropped(tp)]:
            self._stop_leading(tp)
        for tp in [tp for tp in self.following if dropped(tp)]:
            self._unfollow(tp)

    def _reconcile_partition(self, tp: TopicPartition) -> None:
        """Lead, follow or drop one partition as its stored state says now."""
        self.looks += 1
        state = self.state
        me = state.broker_id
        topic = state.topics.topics.get(tp[0])
        replicas = None if topic is None else topic.assignment.get(tp[1])
        partition_state = state.topics.states.get(tp)
        partition_log = state.logs.get(*tp)
        if replicas is None or me not in replicas or partition_state is None or partition_log is None:
            return  # (no longer this broker's since the pass began: the pass that change woke drops it)
        self._log_end_reports.maybe_report(tp, partition_state, partition_log)
        if partition_state.leader == me and (state.deposed or not partition_state.in_sync(me, state.broker_epoch)):
            self._stop_leading(tp)  # a leadership of an earlier incarnation: the controller elects anew
            self._unfollow(tp)
        elif partition_state.leader == me:
            current = self.leaders.get(tp)
            if current is None or current.log is not partition_log:
                self._become_leader(tp, replicas, partition_state)
            elif current.leader_epoch != partition_state.leader_epoch or current.replicas != replicas:
                self._lead_on(current, replicas, partition_state)
            elif current.state != partition_state:
                current.set_state(partition_state)
        else:
            self._stop_leading(tp)
            if partition_state.leader >= 0:
                self._follow(tp, partition_state.leader, partition_state.leader_epoch)
            else:
                self._unfollow(tp)

    def _end_pass(self) -> None:
        for leader_id in [i for i, f in self.fetchers.items() if not f.partitions]:
            asyncio.get_running_loop().create_task(self.fetchers.pop(leader_id).close())
        self._roles.flush()
        self.reconciled.set()

    def _apply_configs(self, only: Collection[str] | None) -> None:
        """Give the logs of changed topic configs (of the topics ``only`` names, when given) their new config."""
        stored = self.state.topics.topics
        changed: set[str] = set()
        for name in stored if only is None else only:
            topic = stored.get(name)
            if topic is None:
                self._configs.pop(name, None)
                continue
            if self._configs.get(name) != topic.config:
                if name in self._configs:
                    self.state.logs.update_config(name, stored_log_config(self.state.config, topic))
                    changed.add(name)
                self._configs[name] = dict(topic.config)
        if changed:  # min.insync.replicas may have moved: a leader's HW may hold, or move on
            for (name, _), leader in self.leaders.items():
                if name in changed:
                    leader.min_isr = self.state.min_insync(name)
                    leader.maybe_advance_high_watermark()
        for name in [n for n in self._configs if n not in stored] if only is None else []:
            del self._configs[name]

    def _become_leader(self, tp: TopicPartition, replicas: tuple[int, ...], partition_state: PartitionState) -> None:
        state = self.state
        self._stop_leading(tp)
        self._unfollow(tp)
        partition_log = state.logs.get(*tp)
        assert partition_log is not None
        if len(replicas) > 1:
            _stop_hw_following_log_end(partition_log)
        else:
            partition_log.hw_follows_log_end = True
            partition_log.high_watermark = partition_log.log_end_offset
        _start_epoch(partition_log, partition_state.leader_epoch)
        leader = LeaderReplica(*tp, partition_log, partition_state, replicas, state.broker_id, state.monotonic_ms())
        leader.min_isr = state.min_insync(tp[0])
        self.leaders[tp] = leader
        leader.maybe_advance_high_watermark()
        for listener in self.leadership_listeners:
            listener(*tp, partition_state.leader_epoch)
        state.fetch_waiters.notify(tp)
        self._roles.note(tp, "leading", partition_state.leader_epoch)
        log.debug("%s-%d: leader at epoch %d, isr %s", *tp, partition_state.leader_epoch, list(partition_state.isr))

    def _lead_on(self, leader: LeaderReplica, replicas: tuple[int, ...], partition_state: PartitionState) -> None:
        """Still the leader, at a new epoch or with new replicas (an election elsewhere, a reassignment)."""
        partition_log = leader.log
        _start_epoch(partition_log, partition_state.leader_epoch)
        if len(replicas) > 1:
            partition_log.hw_follows_log_end = False  # the HW it reached stays; replication moves it on
        else:
            partition_log.hw_follows_log_end = True
            partition_log.high_watermark = partition_log.log_end_offset
        leader.renew(partition_state, replicas, self.state.monotonic_ms())
        tp = (leader.topic, leader.partition)
        self.state.fetch_waiters.notify(tp)
        self._roles.note(tp, "leading on", partition_state.leader_epoch)
        log.debug("%s-%d: leading on at epoch %d, replicas %s, isr %s", *tp, partition_state.leader_epoch,
                  list(replicas), list(partition_state.isr))  # fmt: skip

    def _stop_leading(self, tp: TopicPartition) -> None:
        leader = self.leaders.pop(tp, None)
        if leader is not None:
            leader.log.wait_for_appends()  # what this leader accepted is in its log before it follows
            leader.resign()
            self.state.fetch_waiters.notify(tp)
            for listener in self.leadership_listeners:
                listener(*tp, None)

    def _follow(self, tp: TopicPartition, leader_id: int, leader_epoch: int) -> None:
        current = self.following.get(tp)
        if current == (leader_id, leader_epoch):
            return
        if current is not None and current[0] != leader_id and (old := self.fetchers.get(current[0])):
            old.remove(tp)
        partition_log = self.state.logs.get(*tp)
        assert partition_log is not None
        _stop_hw_following_log_end(partition_log)
        self.following[tp] = (leader_id, leader_epoch)
        fetcher = self.fetchers.get(leader_id)
        if fetcher is None:
            fetcher = self.fetchers[leader_id] = ReplicaFetcher(self.state, self.followers, leader_id)
            fetcher.start()
        fetcher.add(tp, leader_epoch)
        self._roles.note(tp, f"following broker {leader_id}", leader_epoch)
        log.debug("%s-%d: following broker %d at epoch %d", *tp, leader_id, leader_epoch)

    def _unfollow(self, tp: TopicPartition) -> None:
        current = self.following.pop(tp, None)
        if current is not None and (fetcher := self.fetchers.get(current[0])):
            fetcher.remove(tp)

    # -- ISR changes -------------------------------------------------------------------------------

    async def _isr_loop(self) -> None:
        lag_ms = self.lag_time_max_ms
        interval_s = min(max(lag_ms / 2000, 0.05), 5.0)
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(interval_s):
                    await self._isr_wake.wait()
            self._isr_wake.clear()
            live = self.state.brokers.epochs()
            now_ms = self.state.monotonic_ms()
            for tp, leader in list(self.leaders.items()):
                if leader.resigned:
                    continue
                joining = leader.wants_to_join(live, now_ms, lag_ms)
                lagging = leader.lagging(now_ms, lag_ms)
                if not joining and not lagging:
                    continue
                if self.state.unregistered:
                    # ISR changes wait for a registration, as a fenced broker's AlterPartition is refused (each
                    # write also waited out a request timeout on a store it had lost: a pass over 20 partitions
                    # took 100 s, its lag figures as old); only whether the cluster has moved on is asked.
                    if not self.state.deposed and leader.abandoned(lagging):
                        self._depose(tp, lag_ms)
                        break
                    continue
                isr = tuple(r for r in leader.replicas if (r in leader.isr and r not in lagging) or r in joining)
                try:
                    await self._write_isr(tp, leader, isr, joining)
                except CoordinationError as exc:
                    log.warning("%s-%d: ISR change to %s not written (%s); will retry", *tp, list(isr), exc)
                # Read again after a write, which may have waited seconds on an unreachable store (read
                # once a pass otherwise: the pass over every leader runs every few seconds).
                now_ms = self.state.monotonic_ms()

    def _depose(self, tp: TopicPartition, lag_ms: int) -> None:
        """Lead nothing and list this broker as not live until it registers again (NodeState.deposed).

        Unregistered, it cannot tell a coordination outage, in which every broker keeps its last
        view and its followers keep fetching, from its own loss, after which the controller elects
        other leaders. Followers that all stopped fetching tell the second: a client that knows
        only this broker (librdkafka asks only brokers it is connected to for Metadata) was held
        by its stale answers for good, where now it looks elsewhere.
        """
        state = self.state
        state.deposed = True
        log.warning(
            "broker %d: unregistered, and no follower of %s-%d has fetched for %d ms: the cluster has moved on;"
            " leading nothing and listing itself as not live until it registers again",
            state.broker_id, *tp, lag_ms,
        )  # fmt: skip
        self.poke()

    async def _write_isr(
        self, tp: TopicPartition, leader: LeaderReplica, isr: tuple[int, ...], joining: dict[int, int]
    ) -> None:
        """Write the ISR ``isr``, the members in ``joining`` in sync in the broker epochs given there.

        A joining follower's registration is read afresh first: one that is no longer registered in
        the epoch its progress was made in (it restarted) does not join.
        """
        topics = self.state.topics
        stored = topics.states.get(tp)
        version = topics.state_version(*tp)
        if stored is None or version is None or leader.resigned:
            return
        me = self.state.broker_id
        moved = stored.leader != me or stored.leader_epoch != leader.leader_epoch
        if moved or not stored.in_sync(me, self.state.broker_epoch):
            self.poke()  # the controller moved the partition; reconcile will resign it
            return
        joining = dict(joining)
        for replica, epoch in list(joining.items()):
            registered = await self.state.brokers.read(replica)
            if registered is None or registered.epoch != epoch:
                del joining[replica]
                if not (registered is not None and stored.in_sync(replica, registered.epoch)):
                    isr = tuple(r for r in isr if r != replica)
        if isr == stored.isr and not joining:
            return
        wanted = stored.with_isr(isr, joining)
        try:
            await topics.update_state(*tp, wanted, version)
        except VersionConflictError:  # the controller changed the state meanwhile
            self.poke()
            self.poke_isr()
            return
        log.info("%s-%d: %s from %s to %s", *tp, _isr_change(stored.isr, isr), list(stored.isr), list(isr))
        self.state.metrics.isr_changed(stored.isr, isr)
        if not leader.resigned:
            leader.set_state(wanted)


class RoleChanges:
    """The roles a reconcile took on, logged as one line per topic and role instead of one per partition."""

    def __init__(self) -> None:
        self._changes: dict[tuple[str, str], dict[int, int]] = {}

    def note(self, tp: TopicPartition, role: str, leader_epoch: int) -> None:
        self._changes.setdefault((tp[0], role), {})[tp[1]] = leader_epoch

    def flush(self) -> None:
        for (topic, role), epochs in sorted(self._changes.items()):
            log.info("%s: %s %s", topic, role, describe_partitions(epochs))
        self._changes = {}


def _start_epoch(partition_log: PartitionLog, leader_epoch: int) -> None:
    """Record that ``leader_epoch`` starts at the log end, unless the log knows it already.

    Appends of the previous epoch still being written land first: the new epoch starts after them.
    The checkpoint is synced before the log's recovery point passes it, not here: a restart or a
    creation leads thousands of partitions at once, and two fsyncs each held the event loop.
    """
    partition_log.wait_for_appends()
    latest = partition_log.latest_epoch
    if latest is None or leader_epoch > latest:
        partition_log.leader_epoch_cache.assign(leader_epoch, partition_log.log_end_offset, sync=False)


def _stop_hw_following_log_end(partition_log: PartitionLog) -> None:
    """A replicated partition's high watermark comes from replication, starting at the checkpoint."""
    if partition_log.hw_follows_log_end:
        partition_log.hw_follows_log_end = False
        if partition_log.checkpointed_high_watermark is not None:
            partition_log.high_watermark = partition_log.checkpointed_high_watermark


def _isr_change(before: Sequence[int], after: Sequence[int]) -> str:
    """Kafka's words for an ISR change in its log: members left (shrinking), joined (expanding), or both."""
    shrinks, expands = any(r not in after for r in before), any(r not in before for r in after)
    if shrinks and not expands:
        return "Shrinking ISR"
    if expands and not shrinks:
        return "Expanding ISR"
    return "Changing ISR"
