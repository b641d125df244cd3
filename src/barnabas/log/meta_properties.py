"""``meta.properties``: which broker and cluster a log dir belongs to (Kafka's MetaProperties).

Rules this module keeps:

- The format is Java properties as Kafka writes them in ZooKeeper mode: ``version=0``,
  ``broker.id=N``, ``cluster.id=...``. Reading also understands KRaft's ``version=1`` with
  ``node.id``, so a dir formatted by ``kafka-storage.sh`` is recognised rather than clobbered.
- ``directory.id`` (KIP-858) names the dir itself: a random Kafka Uuid given when the dir is
  formatted, kept for its life. The broker's claim in coordination binds it to the broker id, so
  an emptied or swapped disk is noticed at start instead of silently joining as the old broker.
- The file is written atomically; a dir whose file names another broker or cluster is refused
  by the caller, never rewritten.
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass
from pathlib import Path

from .errors import CorruptCheckpointError
from .files import write_atomically

__all__ = [
    "META_PROPERTIES",
    "MetaProperties",
    "new_directory_id",
    "read_broker_id",
    "read_meta_properties",
    "write_meta_properties",
]

META_PROPERTIES = "meta.properties"


@dataclass(frozen=True, slots=True)
class MetaProperties:
    """The identity a log dir was formatted with."""

    broker_id: int
    cluster_id: str | None = None
    version: int = 0
    directory_id: str | None = None


def read_meta_properties(log_dir: Path) -> MetaProperties | None:
    """The dir's identity, or None when it has no ``meta.properties`` yet.

    Raises:
        CorruptCheckpointError: the file has no usable version or broker/node id.
    """
    path = log_dir / META_PROPERTIES
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        return None
    props: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            key, sep, value = line.partition(":")
        props[key.strip()] = value.strip()
    try:
        version = int(props["version"])
        broker_id = int(props["broker.id"] if version == 0 else props["node.id"])
    except (KeyError, ValueError) as exc:
        raise CorruptCheckpointError(f"{path} has no usable version and broker.id/node.id: {exc}") from exc
    return MetaProperties(broker_id, props.get("cluster.id") or None, version, props.get("directory.id") or None)


def write_meta_properties(log_dir: Path, meta: MetaProperties) -> None:
    """Write ``meta.properties`` (version 0, ZooKeeper-mode layout)."""
    lines = ["#", "#Written by barnabas", "version=0", f"broker.id={meta.broker_id}"]
    if meta.cluster_id is not None:
        lines.append(f"cluster.id={meta.cluster_id}")
    if meta.directory_id is not None:
        lines.append(f"directory.id={meta.directory_id}")
    write_atomically(log_dir / META_PROPERTIES, ("\n".join(lines) + "\n").encode("utf-8"))


def new_directory_id() -> str:
    """A directory id as Kafka's ``Uuid.randomUuid().toString()`` writes one: 16 random bytes, URL-safe base64."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def read_broker_id(log_dir: Path) -> int | None:
    """The broker id stored in ``log_dir``, or None when there is none or it is unreadable.

    It serves broker id discovery before the log dirs are locked; the
    :class:`~barnabas.log.LogManager` checks the file strictly afterwards.
    """
    meta = _read_leniently(log_dir)
    return meta.broker_id if meta is not None else None


def read_cluster_id(log_dir: Path) -> str | None:
    """The cluster id stored in ``log_dir``, or None when there is none or it is unreadable.

    It serves a coordination store that lost its cluster id (a cluster recreated on its old
    volumes) before the log dirs are checked strictly.
    """
    meta = _read_leniently(log_dir)
    return meta.cluster_id if meta is not None else None


def _read_leniently(log_dir: Path) -> MetaProperties | None:
    """``meta.properties`` for a look before the strict check: None when absent or unreadable."""
    try:
        return read_meta_properties(log_dir)
    except (CorruptCheckpointError, OSError, UnicodeDecodeError):
        return None
