"""The controller: one broker, elected through coordination, keeps every partition led.

ZooKeeper-mode Kafka's KafkaController, reduced to what storage-driven brokers need (no
controller-to-broker RPCs: brokers reconcile from the partition states it writes):

- It runs for election ``controller``; the winner's epoch fences every write it makes, so a
  deposed controller (a paused process, a lost session) cannot overwrite its successor's work.
- Whenever brokers or partition states may have changed (``poke()``), it compares each
  partition's state with the live brokers: a partition whose leader is gone gets a new leader
  from the live members of its ISR (the first in assignment order), with the leader epoch
  bumped; replicas that are gone leave the ISR. No in-sync replica alive means no leader
  (-1, the ISR kept as the last known) unless unclean leader election is enabled for the topic,
  which takes any live replica and accepts losing what it lacks.
- Partition-state writes are compare-and-set on the key's version, because partition leaders
  change their ISR concurrently; a conflict re-reads the key and tries again next round.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Callable, Collection, Sequence

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

from .brokers import BrokerRegistry
from .model import PartitionState, Topic
from .topic_store import TopicStore

__all__ = ["CONTROLLER_ELECTION", "Controller", "next_partition_state"]

log = logging.getLogger(__name__)

CONTROLLER_ELECTION = "controller"
#: Pause after a coordination error before the controller tries again.
RETRY_S = 0.5
#: The controller re-checks everything at least this often, even without a hint.
RECHECK_S = 5.0


def next_partition_state(
    state: PartitionState, replicas: Sequence[int], live: Collection[int], *, unclean: bool
) -> PartitionState | None:
    """The state a partition should move to given the live brokers, or None if it is right as is."""
    if state.leader in live:
        isr = tuple(r for r in state.isr if r in live)
        if state.leader not in isr:
            isr = (state.leader, *isr)
        return dataclasses.replace(state, isr=isr) if isr != state.isr else None
    candidates = [r for r in replicas if r in live and r in state.isr]
    if candidates:
        isr = tuple(r for r in state.isr if r in live)
        return PartitionState(candidates[0], state.leader_epoch + 1, isr, state.controller_epoch)
    live_replicas = [r for r in replicas if r in live]
    if unclean and live_replicas:
        return PartitionState(live_replicas[0], state.leader_epoch + 1, (live_replicas[0],), state.controller_epoch)
    if state.leader == -1:
        return None
    return PartitionState(-1, state.leader_epoch + 1, state.isr, state.controller_epoch)


class Controller:
    """Runs for controller while the broker lives; while elected, keeps partitions led."""

    def __init__(
        self,
        metastore: Metastore,
        topics: TopicStore,
        brokers: BrokerRegistry,
        broker_id: int,
        unclean: Callable[[Topic], bool],
    ) -> None:
        self._election = LeaderElection(metastore, CONTROLLER_ELECTION)
        self._topics = topics
        self._brokers = brokers
        self._broker_id = broker_id
        self._unclean = unclean
        self._wake = asyncio.Event()
        #: The fence of this broker's current term, None while it is not acting as controller.
        self.fence: Fence | None = None
        self._won: Fence | None = None  # the last term won, kept for resign() after run() stops

    def poke(self) -> None:
        """Something may have changed: re-check every partition soon."""
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
        while session.state is not SessionState.LOST and self.fence is fence:
            self._wake.clear()
            if session.state is SessionState.CONNECTED:
                try:
                    await self.reconcile(fence)
                except FencedError:
                    raise
                except CoordinationError as exc:
                    log.warning("controller could not update partition states (%s); retrying", exc)
                    self._wake.set()
                    await asyncio.sleep(RETRY_S)
                    continue
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(RECHECK_S):
                    await self._wake.wait()

    async def reconcile(self, fence: Fence) -> int:
        """One pass over every partition; return how many states it changed."""
        live = set(self._brokers.live)
        changed = 0
        for (name, partition), state in list(self._topics.states.items()):
            topic = self._topics.topics.get(name)
            version = self._topics.state_version(name, partition)
            if topic is None or version is None or partition not in topic.assignment:
                continue
            wanted = next_partition_state(state, topic.assignment[partition], live, unclean=self._unclean(topic))
            if wanted is None:
                continue
            wanted = dataclasses.replace(wanted, controller_epoch=fence.epoch)
            try:
                await self._topics.update_state_fenced(fence, name, partition, wanted, version)
            except VersionConflictError:  # a leader changed its ISR meanwhile; decide again
                self._wake.set()
                continue
            changed += 1
            log.info(
                "%s-%d: leader %d -> %d, epoch %d, isr %s",
                name, partition, state.leader, wanted.leader, wanted.leader_epoch, list(wanted.isr),
            )  # fmt: skip
        return changed
