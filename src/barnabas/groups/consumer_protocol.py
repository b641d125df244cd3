"""What the coordinator must understand of the "consumer" protocol's opaque member metadata.

Only OffsetDelete needs it: offsets of topics a live consumer group subscribes to are refused
(GROUP_SUBSCRIBED_TO_TOPIC). A ConsumerProtocolSubscription starts with an int16 version and
an array (int32 count) of int16-length topic names in every version.
"""

from __future__ import annotations

import struct

from .group import Group

__all__ = ["subscribed_topics"]


def subscribed_topics(group: Group) -> set[str]:
    """Topics a consumer group's members subscribe to (ConsumerProtocolSubscription's topic list)."""
    topics: set[str] = set()
    protocol = group.protocol_name or ""
    for member in group.members.values():
        data = member.metadata_for(protocol)
        try:
            (count,) = struct.unpack_from(">i", data, 2)
            pos = 6
            for _ in range(max(count, 0)):
                (length,) = struct.unpack_from(">h", data, pos)
                topics.add(data[pos + 2 : pos + 2 + length].decode())
                pos += 2 + length
        except (struct.error, UnicodeDecodeError):
            continue  # not the consumer protocol's encoding: nothing to protect
    return topics
