"""``partition.metadata``: the topic id a partition dir belongs to (Kafka's PartitionMetadataFile).

Rules this module keeps:

- The format is Kafka's, two lines: ``version: 0`` and ``topic_id: <id>``.
- The id is written as Kafka writes a Uuid: URL-safe base64 of its 16 bytes without padding
  (22 characters), so Kafka's tools and a Kafka broker read our dirs. Reading also accepts the
  canonical 36-character UUID string.
- The file is written atomically once, when the partition is created or first told its id.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from pathlib import Path

from .errors import CorruptCheckpointError
from .files import write_atomically

__all__ = ["PARTITION_METADATA", "decode_topic_id", "encode_topic_id", "read_topic_id", "write_topic_id"]

PARTITION_METADATA = "partition.metadata"
_VERSION = 0


def encode_topic_id(topic_id: uuid.UUID) -> str:
    """Kafka's Uuid.toString(): URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode("ascii").rstrip("=")


def decode_topic_id(text: str) -> uuid.UUID:
    """Parse Kafka's base64 form or a canonical UUID string.

    Raises:
        ValueError: neither form.
    """
    text = text.strip()
    if len(text) == 22:
        try:
            return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))
        except (binascii.Error, ValueError) as exc:
            raise ValueError(f"malformed topic id {text!r}") from exc
    return uuid.UUID(text)


def write_topic_id(directory: Path, topic_id: uuid.UUID, *, sync: bool = True) -> None:
    """Write ``partition.metadata`` in ``directory`` (durably unless ``sync`` is False)."""
    text = f"version: {_VERSION}\ntopic_id: {encode_topic_id(topic_id)}\n"
    write_atomically(directory / PARTITION_METADATA, text.encode("ascii"), sync=sync)


def read_topic_id(directory: Path) -> uuid.UUID | None:
    """The topic id recorded in ``directory``, or None when there is no ``partition.metadata``.

    Raises:
        CorruptCheckpointError: the file is malformed or of an unknown version.
    """
    path = directory / PARTITION_METADATA
    try:
        lines = path.read_text("ascii").splitlines()
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as exc:
        raise CorruptCheckpointError(f"{path} is not ASCII text") from exc
    fields: dict[str, str] = {}
    for line in lines:
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    if fields.get("version") != str(_VERSION) or "topic_id" not in fields:
        raise CorruptCheckpointError(f"{path} is malformed: {lines!r}")
    try:
        return decode_topic_id(fields["topic_id"])
    except ValueError as exc:
        raise CorruptCheckpointError(f"{path}: {exc}") from exc
