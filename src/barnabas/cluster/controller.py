"""The controller: one broker, elected through coordination, keeps every partition led.

ZooKeeper-mode Kafka's KafkaController, reduced to what storage-driven brokers need (no
controller-to-broker RPCs: brokers reconcile from the partition states it writes):

- It runs for election ``controller``; the winner's epoch fences every write it makes, so a
  deposed controller (a paused process, a lost session) cannot overwrite its successor's work.
- Whenever brokers or partition states may have changed (``poke()``), it compares each
  partition's state with the live brokers and their broker epochs: a partition whose leader is
  gone, or back as a new incarnation (a restart, however fast: KIP-380), gets a new leader from
  the members of its ISR still registered in the epoch they joined in (the first in assignment
  order), with the leader epoch bumped; replicas that are gone or restarted leave the ISR until
  their leader takes them back. No such replica means a returned ISR member leads again (a
  cleanly stopped one first); none of those either means no leader (-1, the ISR kept as the
  last known) unless unclean leader election is enabled for the topic, which takes any live
  replica and accepts losing what it lacks.
- Partition-state writes are compare-and-set on the key's version, because partition leaders
  change their ISR concurrently; a conflict re-reads the key and tries again next round.
- On request (the ElectLeaders and AlterPartitionReassignments handlers of the broker that is
  controller) it runs preferred or unclean elections and starts or cancels reassignments; each
  pass completes the reassignments whose target replicas are all in sync, and, with
  ``auto.leader.rebalance.enable``, moves leadership back to preferred replicas every
  ``leader.imbalance.check.interval.seconds`` (rules in ``leadership``). One lock keeps these
  writes in order, as Kafka's single controller thread does.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

from barnabas.coordination import (
    CoordinationError,
    Fence,
    FencedError,
    LeaderElection,
    Metastore,
    Session,
    SessionLostError,
    SessionState,
    VersionConflictError,
)
from barnabas.protocol import ErrorCode
from barnabas.time_slices import TimeSlices

from .brokers import BrokerRegistry
from .leadership import (
    ElectionError,
    Live,
    broker_epochs,
    cancel_reassignment,
    completed_reassignment,
    elected,
    imbalanced_partitions,
    initial_state,
    preferred_election,
    reassign,
    recovered_election,
    settle_on,
    unclean_election,
)
from .model import PartitionState, Topic, describe_partitions
from .topic_store import TopicStore

__all__ = ["CONTROLLER_ELECTION", "Controller", "LeaderRebalance", "NotControllerError", "next_partition_state"]

TopicPartition = tuple[str, int]
#: Times a request-driven move re-reads and decides again after losing a compare-and-set, waiting
#: ``CONFLICT_BACKOFF_S`` × the attempt number in between: partition leaders change ISRs meanwhile,
#: and on a loaded host a catching-up replica's ISR can change several times within one move.
MOVE_ATTEMPTS = 10
CONFLICT_BACKOFF_S = 0.05
#: Election refusals that rest on the ISR, which leaders change: checked against the store first.
ISR_REFUSALS = (ErrorCode.preferred_leader_not_available, ErrorCode.eligible_leaders_not_available)

log = logging.getLogger(__name__)

CONTROLLER_ELECTION = "controller"
#: Pause after a coordination error before the controller tries again.
RETRY_S = 0.5
#: The controller re-checks everything at least this often, even without a hint, if its view of the
#: topics or brokers moved since its last pass (a pass over the same view decides the same).
RECHECK_S = 5.0
#: How long a partition of a stored topic may lack a state before the controller writes one: its
#: creator writes it right after the topic, unless it stopped in between.
MISSING_STATE_GRACE_S = 2.0


def next_partition_state(
    state: PartitionState, replicas: Sequence[int], live: Live, *, unclean: bool
) -> PartitionState | None:
    """The state a partition should move to given the live brokers, or None if it is right as is.

    A replica counts as in sync only in the broker epoch it joined the ISR in: a broker that
    restarted, however fast, is a new incarnation that may have lost what it never flushed
    (KIP-380, KIP-966). So an ISR member that is gone, or back as a new incarnation, leaves the
    ISR; a leader that is either is replaced by the first in-sync replica at the next leader
    epoch. Only when no ISR member is in sync any more does one that came back lead again (a
    cleanly stopped one first), as Kafka keeps the last ISR member and elects it when it returns.
    A partition restored from its replicas' logs waits for all of them (``recovered_election``).
    """
    if state.recovered is not None:
        return recovered_election(state, replicas, live)
    current = state.current_isr(broker_epochs(live))
    if state.leader in current:
        return state.with_isr(current, {}) if current != state.isr else None
    candidates = [r for r in replicas if r in current]
    if candidates:
        return elected(state, candidates[0], current, live)
    returned = sorted((r for r in replicas if r in state.isr and r in live), key=lambda r: not live[r].clean)
    if returned:
        return elected(state, returned[0], returned[:1], live)
    live_replicas = [r for r in replicas if r in live]
    if unclean and live_replicas:
        return elected(state, live_replicas[0], live_replicas[:1], live)
    if state.leader == -1:
        return None
    return dataclasses.replace(state, leader=-1, leader_epoch=state.leader_epoch + 1)


class NotControllerError(Exception):
    """This broker is not the acting controller (Kafka's NOT_CONTROLLER)."""


@dataclasses.dataclass(frozen=True, slots=True)
class LeaderRebalance:
    """``auto.leader.rebalance.enable``'s settings: how often, and above which imbalance."""

    interval_s: float
    threshold_percent: int


class Controller:
    """Runs for controller while the broker lives; while elected, keeps partitions led."""

    def __init__(
        self,
        metastore: Metastore,
        topics: TopicStore,
        brokers: BrokerRegistry,
        broker_id: int,
        *,
        unclean: Callable[[Topic], bool],
        rebalance: LeaderRebalance | None = None,
    ) -> None:
        self._election = LeaderElection(metastore, CONTROLLER_ELECTION)
        self._topics = topics
        self._brokers = brokers
        self._broker_id = broker_id
        self._unclean = unclean
        self._rebalance = rebalance
        self._next_rebalance = float("inf")
        self._missing_since: dict[TopicPartition, float] = {}
        self._wake = asyncio.Event()
        self._lock = asyncio.Lock()
        #: The fence of this broker's current term, None while it is not acting as controller.
        self.fence: Fence | None = None
        self._won: Fence | None = None  # the last term won, kept for resign() after run() stops
        #: Rounds of the serving loop, and the passes over every partition they ran (for tests: a re-check
        #: at rest runs none).
        self.rounds = 0
        self.passes = 0
        #: Partitions its passes decided (for tests: a change costs its own topic's partitions).
        self.decided = 0

    def poke(self) -> None:
        """Something may have changed: decide soon what did (see :meth:`_serve`)."""
        self._wake.set()

    async def run(self, session: Session) -> None:
        """Stand for election with ``session`` and serve every term won, until the session ends."""
        while session.state is not SessionState.LOST:
            try:
                fence = await self._election.nominate(session, str(self._broker_id))
            except SessionLostError:
                return
            except CoordinationError as exc:
                log.warning("controller election failed (%s); retrying", exc)
                await asyncio.sleep(RETRY_S)
                continue
            log.info("broker %d is the controller (epoch %d)", self._broker_id, fence.epoch)
            self.fence = self._won = fence
            if self._rebalance is not None:
                self._next_rebalance = time.monotonic() + self._rebalance.interval_s
            try:
                await self._serve(fence, session)
            except FencedError:
                log.warning("controller epoch %d was superseded", fence.epoch)
            finally:
                self.fence = None

    async def resign(self) -> None:
        """Give the seat up (a stopping broker, after ``run`` was cancelled) so another takes over at once."""
        fence, self._won, self.fence = self._won, None, None
        if fence is not None:
            with contextlib.suppress(CoordinationError):
                await self._election.resign(fence)

    async def _serve(self, fence: Fence, session: Session) -> None:
        """Pass over the partitions whenever something may need deciding.

        A pass decides the topics whose document or partition states changed since a pass last took
        them up (each topic's generation in the store's cache): a leader's ISR change, every one a
        watch event, cost a pass over every partition (92-165 ms at 10,000). Every partition is
        decided again when the live brokers moved, a whole reload replaced the topics, something
        comes due with time alone (a missing state's grace, a rebalance), or a pass failed.
        """
        passed_on: tuple[int, int] | None = None  # the view the last complete full pass started from
        seen: dict[str, tuple[int, int]] = {}  # each topic's generation when a pass last took it up
        topics = self._topics
        while session.state is not SessionState.LOST and self.fence is fence:
            self.rounds += 1
            poked = self._wake.is_set()
            self._wake.clear()
            view = (topics.loads_done, self._brokers.generation)
            full = view != passed_on or self._time_bound()
            changed: list[str] | None = None
            if not full:
                changed = [name for name in topics.topics if topics.topic_generation(name) != seen.get(name)]
                changed += [name for name in seen if name not in topics.topics]
            if session.state is SessionState.CONNECTED and (full or poked or changed):
                self.passes += 1
                taken = {name: topics.topic_generation(name) for name in (topics.topics if full else changed or ())}
                try:
                    await self.reconcile(fence, changed)
                except FencedError:
                    raise
                except CoordinationError as exc:
                    log.warning("controller could not update partition states (%s); retrying", exc)
                    passed_on = None
                    self._wake.set()
                    await asyncio.sleep(RETRY_S)
                    continue
                if full:
                    passed_on, seen = view, {}
                for name in changed or ():
                    seen.pop(name, None)
                seen.update((name, generation) for name, generation in taken.items() if name in topics.topics)
            until_rebalance = self._next_rebalance - time.monotonic()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(min(RECHECK_S, until_rebalance), 0.0)):
                    await self._wake.wait()

    def _time_bound(self) -> bool:
        """Whether the next pass has work that comes due with time alone (missing states, a rebalance)."""
        return bool(self._missing_since) or (self._rebalance is not None and time.monotonic() >= self._next_rebalance)

    async def reconcile(self, fence: Fence, topics: Collection[str] | None = None) -> int:
        """One pass: leaders for every partition (of ``topics`` when given), finished reassignments, due
        rebalancing.

        Returns how many partition states it changed.
        """
        async with self._lock:
            changed = await self._write_missing_states(fence, topics)
            changed += await self._elect_where_needed(fence, topics)
            changed += await self._complete_reassignments(fence)
            if self._rebalance is not None and time.monotonic() >= self._next_rebalance:
                self._next_rebalance = time.monotonic() + self._rebalance.interval_s
                changed += await self._rebalance_leaders(fence, self._rebalance.threshold_percent)
        return changed

    async def _elect_where_needed(self, fence: Fence, topics: Collection[str] | None) -> int:
        """Move every partition (of ``topics`` when given) that needs it, in few commits (a failed broker's
        hundreds of partitions at once)."""
        live = dict(self._brokers.live)
        wanted: dict[TopicPartition, tuple[PartitionState, int]] = {}
        before: dict[TopicPartition, PartitionState] = {}
        # With 100,000 partitions the loop serves between slices; each state is read with its
        # version when its turn comes (never a copy from before a yield: the compare-and-set on
        # that version must guard the state the decision was made on).
        slices = TimeSlices()
        for name, partition in self._partitions_of(topics):
            self.decided += 1
            if slices.due():
                await asyncio.sleep(0)
            state = self._topics.states.get((name, partition))
            if state is None:
                continue
            topic = self._topics.topics.get(name)
            version = self._topics.state_version(name, partition)
            if topic is None or version is None or partition not in topic.assignment:
                continue
            new_state = next_partition_state(state, topic.assignment[partition], live, unclean=self._unclean(topic))
            if new_state is not None:
                wanted[(name, partition)] = (dataclasses.replace(new_state, controller_epoch=fence.epoch), version)
                before[(name, partition)] = state
        written = await self._topics.update_states_fenced(fence, wanted)
        if len(written) < len(wanted):
            self._wake.set()  # leaders changed some ISRs meanwhile: decide those again
        moved: dict[tuple[str, int, int], dict[int, int]] = {}
        for (name, partition), state in sorted(written.items()):
            old = before[(name, partition)]
            moved.setdefault((name, old.leader, state.leader), {})[partition] = state.leader_epoch
            log.debug("%s-%d: leader %d -> %d, epoch %d, isr %s",
                      name, partition, old.leader, state.leader, state.leader_epoch, list(state.isr))  # fmt: skip
        for (name, old_leader, new_leader), epochs in sorted(moved.items()):  # a line per topic and move
            what = f"leader {old_leader} -> {new_leader}" if old_leader != new_leader else f"ISR of leader {new_leader}"
            log.info("%s: %s for %s", name, what, describe_partitions(epochs))
        return len(written)

    def _partitions_of(self, topics: Collection[str] | None) -> list[TopicPartition]:
        """The partitions with a state, of ``topics`` when given."""
        if topics is None:
            return list(self._topics.states)
        stored, states = self._topics.topics, self._topics.states
        return [(n, p) for n in topics if n in stored for p in stored[n].assignment if (n, p) in states]

    async def _write_missing_states(self, fence: Fence, topics: Collection[str] | None) -> int:
        """Write a first state for partitions (of ``topics`` when given) whose creator stopped before writing it."""
        now = time.monotonic()
        missing = self._topics.missing_states(topics)
        kept = {} if topics is None else {tp: at for tp, at in self._missing_since.items() if tp[0] not in topics}
        self._missing_since = kept | {(t.name, p): self._missing_since.get((t.name, p), now) for t, p in missing}
        due: dict[str, tuple[Topic, list[int]]] = {}
        for topic, partition in missing:
            if now - self._missing_since[(topic.name, partition)] >= MISSING_STATE_GRACE_S:
                due.setdefault(topic.name, (topic, []))[1].append(partition)
        changed = 0
        live = dict(self._brokers.live)
        for topic, partitions in due.values():
            states = {p: initial_state(topic.assignment[p], live) for p in partitions}
            written = await self._topics.write_new_states(topic, states, fence)
            if written:
                log.warning("%s: wrote the missing states of partitions %s", topic.name, sorted(written))
            changed += len(written)
        return changed

    async def _complete_reassignments(self, fence: Fence) -> int:
        live = dict(self._brokers.live)
        changed = 0
        for topic in list(self._topics.topics.values()):
            for partition in list(topic.reassigning):
                state = self._topics.states.get((topic.name, partition))
                current = self._topics.topics.get(topic.name)
                if state is None or current is None:
                    continue
                done = completed_reassignment(current, partition, state, live)
                if done is None:
                    continue
                try:
                    await self._move(fence, *done, partition)
                except VersionConflictError:
                    self._wake.set()
                    continue
                changed += 1
                log.info(
                    "%s-%d: reassignment complete, replicas %s",
                    topic.name,
                    partition,
                    list(done[0].assignment[partition]),
                )
        return changed

    async def _rebalance_leaders(self, fence: Fence, threshold_percent: int) -> int:
        live = dict(self._brokers.live)
        chosen = imbalanced_partitions(self._topics.topics, self._topics.states, live, threshold_percent)
        if chosen:
            log.info("leader rebalance: moving %d partitions back to their preferred leader", len(chosen))
        results = await self._elect(fence, chosen, preferred=True)
        return sum(1 for error in results.values() if error is None)

    # -- requests (the broker that is controller serves them) --------------------------------------

    def _acting_fence(self) -> Fence:
        fence = self.fence
        if fence is None:
            raise NotControllerError(f"broker {self._broker_id} is not the controller")
        return fence

    async def elect_leaders(
        self, partitions: Iterable[TopicPartition] | None, *, preferred: bool
    ) -> dict[TopicPartition, ElectionError | None]:
        """Run a preferred or unclean election on ``partitions`` (None: every partition that needs one).

        Without a list only partitions where an election was possible are reported, as Kafka does.

        Raises:
            NotControllerError: this broker is not the controller.
            FencedError, CoordinationError: the writes could not be made.
        """
        fence = self._acting_fence()
        async with self._lock:
            if partitions is not None:
                return await self._elect(fence, list(partitions), preferred=preferred)
            everything = await self._elect(fence, sorted(self._topics.states), preferred=preferred)
            return {tp: e for tp, e in everything.items() if e is None or e.code != ErrorCode.election_not_needed}

    async def _elect(
        self, fence: Fence, partitions: Sequence[TopicPartition], *, preferred: bool
    ) -> dict[TopicPartition, ElectionError | None]:
        results: dict[TopicPartition, ElectionError | None] = {}
        for name, partition in partitions:
            refreshed = False
            for attempt in range(MOVE_ATTEMPTS):
                if attempt:
                    await asyncio.sleep(CONFLICT_BACKOFF_S * attempt)
                topic = self._topics.topics.get(name)
                state = self._topics.states.get((name, partition))
                version = self._topics.state_version(name, partition)
                if topic is None or state is None or version is None or partition not in topic.assignment:
                    results[(name, partition)] = _unknown(name, partition)
                    break
                live = dict(self._brokers.live)
                elect = preferred_election if preferred else unclean_election
                wanted = elect(state, topic.assignment[partition], live)
                if isinstance(wanted, ElectionError) and wanted.code in ISR_REFUSALS and not refreshed:
                    # Leaders change the ISR and the cache learns of it by watch: before refusing
                    # for want of an in-sync replica, read what the store holds now.
                    await self._topics.refresh_state(name, partition)
                    refreshed = True
                    continue
                if isinstance(wanted, ElectionError):
                    results[(name, partition)] = wanted
                    break
                wanted = dataclasses.replace(wanted, controller_epoch=fence.epoch)
                try:
                    await self._topics.update_state_fenced(fence, name, partition, wanted, version)
                except VersionConflictError:
                    continue
                kind = "preferred" if preferred else "unclean"
                log.info(
                    "%s-%d: %s election, leader %d -> %d, epoch %d",
                    name,
                    partition,
                    kind,
                    state.leader,
                    wanted.leader,
                    wanted.leader_epoch,
                )
                results[(name, partition)] = None
                break
            else:
                results[(name, partition)] = ElectionError(ErrorCode.request_timed_out, "The partition kept changing.")
        return results

    async def alter_reassignments(
        self, changes: Mapping[TopicPartition, Sequence[int] | None], *, allow_replication_factor_change: bool = True
    ) -> dict[TopicPartition, ElectionError | None]:
        """Start (target replicas) or cancel (None) reassignments; report each partition's outcome.

        Raises:
            NotControllerError: this broker is not the controller.
            FencedError, CoordinationError: the writes could not be made.
        """
        fence = self._acting_fence()
        results: dict[TopicPartition, ElectionError | None] = {}
        async with self._lock:
            for (name, partition), target in changes.items():
                results[(name, partition)] = await self._alter_one(
                    fence, name, partition, target, allow_replication_factor_change
                )
        self._wake.set()  # a reassignment whose target is in sync already completes at once
        return results

    async def _alter_one(
        self, fence: Fence, name: str, partition: int, target: Sequence[int] | None, allow_rf_change: bool
    ) -> ElectionError | None:
        for attempt in range(MOVE_ATTEMPTS):
            if attempt:
                await asyncio.sleep(CONFLICT_BACKOFF_S * attempt)
            topic = self._topics.topics.get(name)
            state = self._topics.states.get((name, partition))
            if topic is None or state is None or partition not in topic.assignment:
                return _unknown(name, partition)
            live = dict(self._brokers.live)
            if target is None:
                reverted = cancel_reassignment(topic, partition, state, live)
                if isinstance(reverted, ElectionError):
                    return reverted
                moved, new_state = reverted
            else:
                problem = _target_problem(topic, partition, target, live, allow_rf_change)
                if problem is not None:
                    return problem
                moved = reassign(topic, partition, target)
                new_state = settle_on(state, moved.assignment[partition], live)
                if new_state.leader < 0:
                    new_state = dataclasses.replace(state, leader_epoch=state.leader_epoch + 1)
            try:
                await self._move(fence, moved, new_state, partition)
            except VersionConflictError:
                continue
            log.info(
                "%s-%d: reassignment %s, replicas %s (adding %s, removing %s)",
                name, partition, "cancelled" if target is None else "started", list(moved.assignment[partition]),
                list(moved.reassigning[partition].adding) if partition in moved.reassigning else [],
                list(moved.reassigning[partition].removing) if partition in moved.reassigning else [],
            )  # fmt: skip
            return None
        return ElectionError(ErrorCode.request_timed_out, "The partition kept changing.")

    async def _move(self, fence: Fence, topic: Topic, state: PartitionState, partition: int) -> None:
        version = self._topics.state_version(topic.name, partition)
        if version is None:
            raise VersionConflictError(f"{topic.name}-{partition} has no stored state")
        wanted = dataclasses.replace(state, controller_epoch=fence.epoch)
        await self._topics.move_fenced(fence, topic, {partition: wanted}, {partition: version})


def _unknown(name: str, partition: int) -> ElectionError:
    return ElectionError(ErrorCode.unknown_topic_or_partition, f"The partition {name}-{partition} does not exist.")


def _target_problem(
    topic: Topic, partition: int, target: Sequence[int], live: Live, allow_rf_change: bool
) -> ElectionError | None:
    """Why ``target`` is not a valid reassignment target (Kafka's checks and messages), or None."""
    if not target:
        return ElectionError(
            ErrorCode.invalid_replica_assignment, "Empty replica list specified in partition reassignment."
        )
    if len(set(target)) != len(target):
        return ElectionError(
            ErrorCode.invalid_replica_assignment,
            f"Duplicate replica ids in partition reassignment replica list: {list(target)}",
        )
    unknown = sorted(r for r in target if r not in live)
    if unknown:
        return ElectionError(
            ErrorCode.invalid_replica_assignment, f"The proposed assignment contains non-existent brokerIDs: {unknown}"
        )
    current = len(topic.original_replicas(partition))
    if not allow_rf_change and len(target) != current:
        return ElectionError(
            ErrorCode.invalid_replication_factor,
            f"The replication factor is changed from {current} to {len(target)} but "
            "allowReplicationFactorChange is false",
        )
    return None
