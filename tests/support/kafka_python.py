"""Working around a kafka-python 3.0.12 group bug, so tests with its consumers test the broker.

kafka-python joins a group before it has its subscription's metadata. A leader that assigned without it
rejoins when the metadata arrives, and its own assignment clears that reason while its SyncGroup is in
flight; if the poll's timeout ends meanwhile, later polls never collect the finished join
(``join_group_async`` loops only ``while need_rejoin()``; the Java client also waits for a pending
join): the member stops heartbeating, is removed from the group and never rejoins.
"""

from __future__ import annotations

from typing import Any


def with_topic_metadata(consumer: Any) -> Any:
    """``consumer`` (subscribed) once it holds the cluster's topic metadata, which keeps it out of that path."""
    consumer.topics()
    return consumer
