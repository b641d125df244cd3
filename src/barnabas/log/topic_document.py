"""``barnabas-topic.json``: a copy of the topic's stored document in each of its partition dirs.

Kafka keeps a topic's replica assignment and config only in its metadata (ZooKeeper, the KRaft
log); when that is lost, the logs on the brokers' volumes are all that is left, and Strimzi's
users learn that a cluster recreated on old volumes does not come back by itself. barnabas keeps
the topic's document (id, assignment, config overrides) beside each of its partitions' logs, so
a cluster whose coordination store was lost is rebuilt from its volumes (``broker.topic_restore``).

Rules this module keeps:

- The bytes are opaque here: the broker writes the document as the coordination store holds it.
- The file is replaced atomically but not fsynced: it is rewritten whenever the document changes,
  and a copy lost in a crash is rewritten at the next start; a partition dir whose copy is
  missing is simply not one a restore can use.
- Kafka loads a partition dir's segment, index and checkpoint files by name and ignores others,
  so a Kafka broker still reads these dirs.
"""

from __future__ import annotations

from pathlib import Path

from .files import write_atomically

__all__ = ["TOPIC_DOCUMENT", "read_topic_document", "write_topic_document"]

TOPIC_DOCUMENT = "barnabas-topic.json"


def write_topic_document(directory: Path, data: bytes) -> None:
    """Replace the copy of the topic document in partition dir ``directory``."""
    write_atomically(directory / TOPIC_DOCUMENT, data, sync=False)


def read_topic_document(directory: Path) -> bytes | None:
    """The copy in partition dir ``directory``, or None if it has none."""
    try:
        return (directory / TOPIC_DOCUMENT).read_bytes()
    except FileNotFoundError:
        return None
