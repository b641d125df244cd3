"""A local cluster of real `barnabas broker` processes sharing one coordination URL, with faults on demand.

Brokers start together (launched at once, then waited for), so a 3-broker cluster is ready in
about the time one broker takes. Cluster state is read the way a client reads it: Metadata
through confluent-kafka's AdminClient, from any live broker. Faults are what a deployment sees:
a broker killed (crash), paused (a hung process or a long GC pause: it holds its connections
and answers nothing), stopped cleanly, restarted on its port.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .broker import Broker

__all__ = ["FAST_FAILOVER", "BrokerCluster"]

#: Settings that make failure detection and ISR changes quick enough for tests.
FAST_FAILOVER = {
    "broker.session.timeout.ms": "3000",
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "200",
    "controlled.shutdown.max.wait.ms": "10000",
}
POLL_S = 0.05


class BrokerCluster:
    """``size`` brokers (ids 0..size-1) in ``base``/broker-i, sharing ``coordination_url``
    (default an SQLite file in ``base``), with FAST_FAILOVER under ``properties``."""

    def __init__(
        self,
        base: Path,
        size: int = 3,
        coordination_url: str | None = None,
        properties: Mapping[str, str] | None = None,
        *,
        start_timeout_s: float = 60.0,
    ) -> None:
        self.base = Path(base)
        self.coordination_url = coordination_url or f"sqlite:///{self.base / 'coordination.db'}"
        self.start_timeout_s = start_timeout_s
        merged = {**FAST_FAILOVER, **(properties or {})}
        self.brokers = [self.make_broker(self.base / f"broker-{i}", i, merged) for i in range(size)]

    def make_broker(self, data_dir: Path, broker_id: int, properties: Mapping[str, str]) -> Broker:
        """One of the cluster's brokers (a subclass may build its own kind)."""
        return Broker(data_dir, broker_id, coordination_url=self.coordination_url, properties=properties)

    def start(self) -> BrokerCluster:
        """Start every broker at once and wait until Metadata lists them all.

        A cluster that does not come up is killed before the error is raised: its caller never got
        it to stop, so nothing else would stop its brokers.
        """
        try:
            for broker in self.brokers:
                broker.launch()
            deadline = time.monotonic() + self.start_timeout_s
            for broker in self.brokers:
                broker.wait_ready(max(0.0, deadline - time.monotonic()))
            self.wait_until_every_broker_sees_all()
        except BaseException:
            self.stop()
            raise
        return self

    def wait_until_every_broker_sees_all(self) -> None:
        """Every live broker's Metadata lists every broker: a topic created through any of them finds them all."""
        for broker in self.alive():
            self.wait_for(lambda md: len(md.brokers) == len(self.brokers), "every broker registered", ask=[broker])

    def stop(self) -> None:
        """Kill every broker (a test's cluster is thrown away: no clean shutdown to wait for)."""
        for broker in self.brokers:
            broker.kill()

    @property
    def bootstrap(self) -> str:
        """Every broker's address (those never started are left out)."""
        return ",".join(b.bootstrap for b in self.brokers if b.port)

    def alive(self) -> list[Broker]:
        return [b for b in self.brokers if b.running]

    # --- what a client sees ------------------------------------------------------------------

    def admin(self) -> Any:
        """A confluent-kafka AdminClient on the live brokers."""
        from confluent_kafka.admin import AdminClient

        live = ",".join(b.bootstrap for b in self.alive())
        return AdminClient({"bootstrap.servers": live, "socket.timeout.ms": 5000})

    def metadata(self, timeout_s: float = 10.0) -> Any:
        return self.admin().list_topics(timeout=timeout_s)

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 3, **config: str) -> None:
        """Create a topic and wait until every live broker lists each partition led, with a full ISR."""
        from confluent_kafka.admin import NewTopic

        admin = self.admin()  # kept alive until the futures resolve
        futures = admin.create_topics([NewTopic(name, partitions, replication_factor, config=config)])
        for future in futures.values():
            future.result(timeout=30)
        # A new topic's ISR is full from its creation, so the first broker to list it says nothing of
        # the others, which may not have heard of it yet.
        self.wait_for_everywhere(lambda md: self.fully_replicated(md, name), f"{name} led with a full ISR")

    @staticmethod
    def fully_replicated(md: Any, topic: str) -> bool:
        found = md.topics.get(topic)
        if found is None or found.error is not None or not found.partitions:
            return False
        return all(p.leader >= 0 and sorted(p.isrs) == sorted(p.replicas) for p in found.partitions.values())

    def wait_for(
        self,
        condition: Callable[[Any], bool],
        what: str,
        timeout_s: float = 60.0,
        ask: Sequence[Broker] | None = None,
    ) -> None:
        """Poll Metadata until ``condition`` holds, asking each live broker (or each of ``ask``) in turn.

        A broker always lists itself, so whether broker N is registered is a question for the others.

        Raises:
            TimeoutError: it did not hold in time (the last Metadata seen is in the message).
        """
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + timeout_s
        last: object = None
        while time.monotonic() < deadline:
            for broker in self.alive() if ask is None else ask:
                try:
                    md = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=5)
                except Exception as exc:  # a broker going down mid-call; ask the next one
                    last = exc
                    continue
                if condition(md):
                    return
                # Which broker answered and which brokers it lists: a partition that never becomes whole may
                # wait on a broker that some view has lost.
                last = {
                    "asked": broker.broker_id,
                    "brokers": sorted(md.brokers),
                    **{t: [(p.id, p.leader, p.isrs) for p in m.partitions.values()] for t, m in md.topics.items()},
                }
            time.sleep(POLL_S)
        raise TimeoutError(f"timed out waiting for {what}; last seen: {last}")

    def wait_for_everywhere(self, condition: Callable[[Any], bool], what: str, timeout_s: float = 60.0) -> None:
        """:meth:`wait_for` on each live broker's own Metadata in turn: what a client's next request meets
        wherever it goes (a broker that has not heard of a change yet answers from before it)."""
        for broker in self.alive():
            self.wait_for(condition, what, timeout_s, ask=[broker])

    def leader_of(self, topic: str, partition: int) -> int:
        return int(self.metadata().topics[topic].partitions[partition].leader)

    def controller(self) -> int:
        return int(self.metadata().controller_id)

    # --- faults ------------------------------------------------------------------------------

    def kill(self, broker_id: int) -> None:
        """Crash a broker (SIGKILL)."""
        self.brokers[broker_id].kill()

    def pause(self, broker_id: int) -> None:
        """Hang a broker (SIGSTOP) until ``resume``."""
        self.brokers[broker_id].pause()

    def resume(self, broker_id: int) -> None:
        self.brokers[broker_id].resume()

    def restart(self, broker_id: int) -> None:
        """Start a broker again on its port (stopping it cleanly first if it runs)."""
        self.brokers[broker_id].restart()

    def heal(self) -> None:
        """Every broker running and registered again: resume the paused, start the stopped."""
        for broker in self.brokers:
            broker.resume()
        stopped = [broker for broker in self.brokers if not broker.running]
        for broker in stopped:
            broker.launch()
        deadline = time.monotonic() + self.start_timeout_s
        for broker in stopped:
            broker.wait_ready(max(0.0, deadline - time.monotonic()))
        self.wait_until_every_broker_sees_all()
