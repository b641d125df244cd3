"""Records of ``__consumer_offsets`` in Kafka's own format, so Kafka's tools could read the topic.

Kafka's GroupCoordinatorRecordSerde (core/.../group/GroupMetadataManager in 3.x):

- an offset commit is key ``OffsetCommitKey`` (version 1: group, topic, partition) and value
  ``OffsetCommitValue`` (version 3: offset, leader epoch, metadata, commit timestamp);
- a group's metadata is key ``GroupMetadataKey`` (version 2: group) and value
  ``GroupMetadataValue`` (version 3: protocol type, generation, protocol, leader, state
  timestamp, members with their subscription and assignment);
- a null value is a tombstone: the offset was deleted, or the group was.

A ``GroupLog`` is where the coordinator writes these records: a partition of ``__consumer_offsets``.

Every field is big-endian; strings carry an int16 length (-1 for null), bytes an int32 one,
arrays an int32 count. Reading accepts the older value versions Kafka wrote (offsets 0-3,
group metadata 0-3); writing always uses the versions above.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from barnabas.protocol import ErrorCode

__all__ = [
    "GroupLog",
    "GroupMetadataKey",
    "GroupMetadataValue",
    "MemberRecord",
    "OffsetCommitKey",
    "OffsetCommitValue",
    "RecordFormatError",
    "RecordPair",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
]

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
GROUP_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

#: A record as written: the encoded key and the encoded value, or None for a tombstone.
RecordPair = tuple[bytes, bytes | None]


class RecordFormatError(ValueError):
    """Bytes that are not a record of ``__consumer_offsets`` this code knows."""


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1  # only value version 1 had it


@dataclass(frozen=True, slots=True)
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberRecord, ...]


Key = OffsetCommitKey | GroupMetadataKey
Value = OffsetCommitValue | GroupMetadataValue


class GroupLog(Protocol):
    """Where the coordinator's records go: a partition of ``__consumer_offsets`` this broker leads."""

    async def append(self, partition: int, records: Sequence[RecordPair]) -> ErrorCode:
        """Write ``records`` and wait until they are replicated; NONE or why not (a group error code)."""
        ...


# -- writing -----------------------------------------------------------------------------------


def _string(value: str | None) -> bytes:
    if value is None:
        return _I16.pack(-1)
    data = value.encode()
    return _I16.pack(len(data)) + data


def _bytes(value: bytes) -> bytes:
    return _I32.pack(len(value)) + value


def encode_key(key: Key) -> bytes:
    if isinstance(key, OffsetCommitKey):
        return b"".join(
            (_I16.pack(OFFSET_KEY_VERSION), _string(key.group), _string(key.topic), _I32.pack(key.partition))
        )
    return _I16.pack(GROUP_KEY_VERSION) + _string(key.group)


def encode_value(value: Value) -> bytes:
    if isinstance(value, OffsetCommitValue):
        return b"".join(
            (
                _I16.pack(OFFSET_VALUE_VERSION),
                _I64.pack(value.offset),
                _I32.pack(value.leader_epoch),
                _string(value.metadata),
                _I64.pack(value.commit_timestamp),
            )
        )
    parts = [
        _I16.pack(GROUP_VALUE_VERSION),
        _string(value.protocol_type),
        _I32.pack(value.generation),
        _string(value.protocol),
        _string(value.leader),
        _I64.pack(value.current_state_timestamp),
        _I32.pack(len(value.members)),
    ]
    for member in value.members:
        parts += [
            _string(member.member_id),
            _string(member.group_instance_id),
            _string(member.client_id),
            _string(member.client_host),
            _I32.pack(member.rebalance_timeout_ms),
            _I32.pack(member.session_timeout_ms),
            _bytes(member.subscription),
            _bytes(member.assignment),
        ]
    return b"".join(parts)


# -- reading -----------------------------------------------------------------------------------


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, fmt: struct.Struct) -> int:
        if self.pos + fmt.size > len(self.data):
            raise RecordFormatError("record is truncated")
        (value,) = fmt.unpack_from(self.data, self.pos)
        self.pos += fmt.size
        return int(value)

    def i16(self) -> int:
        return self._take(_I16)

    def i32(self) -> int:
        return self._take(_I32)

    def i64(self) -> int:
        return self._take(_I64)

    def string(self) -> str | None:
        length = self.i16()
        if length < 0:
            return None
        return self._chunk(length).decode()

    def required_string(self) -> str:
        value = self.string()
        if value is None:
            raise RecordFormatError("a required string is null")
        return value

    def bytes_(self) -> bytes:
        length = self.i32()
        return b"" if length < 0 else self._chunk(length)

    def _chunk(self, length: int) -> bytes:
        if self.pos + length > len(self.data):
            raise RecordFormatError("record is truncated")
        chunk = self.data[self.pos : self.pos + length]
        self.pos += length
        return chunk


def decode_key(data: bytes) -> Key:
    """The key of a ``__consumer_offsets`` record.

    Raises:
        RecordFormatError: an unknown key version, or bytes that do not decode.
    """
    reader = _Reader(data)
    version = reader.i16()
    if version in (0, 1):
        return OffsetCommitKey(reader.required_string(), reader.required_string(), reader.i32())
    if version == GROUP_KEY_VERSION:
        return GroupMetadataKey(reader.required_string())
    raise RecordFormatError(f"unknown key version {version}")


def decode_value(key: Key, data: bytes) -> Value:
    """The value stored under ``key``.

    Raises:
        RecordFormatError: an unknown value version, or bytes that do not decode.
    """
    reader = _Reader(data)
    version = reader.i16()
    if isinstance(key, OffsetCommitKey):
        return _offset_value(reader, version)
    return _group_value(reader, version)


def _offset_value(reader: _Reader, version: int) -> OffsetCommitValue:
    if version not in (0, 1, 2, 3):
        raise RecordFormatError(f"unknown offset value version {version}")
    offset = reader.i64()
    leader_epoch = reader.i32() if version >= 3 else -1
    metadata = reader.string() or ""
    commit_timestamp = reader.i64()
    expire_timestamp = reader.i64() if version == 1 else -1
    return OffsetCommitValue(offset, leader_epoch, metadata, commit_timestamp, expire_timestamp)


def _group_value(reader: _Reader, version: int) -> GroupMetadataValue:
    if version not in (0, 1, 2, 3):
        raise RecordFormatError(f"unknown group metadata value version {version}")
    protocol_type = reader.string() or ""
    generation = reader.i32()
    protocol = reader.string()
    leader = reader.string()
    state_timestamp = reader.i64() if version >= 2 else -1
    members = []
    for _ in range(reader.i32()):
        member_id = reader.required_string()
        instance_id = reader.string() if version >= 3 else None
        client_id = reader.string() or ""
        client_host = reader.string() or ""
        rebalance_timeout = reader.i32() if version >= 1 else -1
        session_timeout = reader.i32()
        if version == 0:
            rebalance_timeout = session_timeout
        members.append(
            MemberRecord(
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                reader.bytes_(),
                reader.bytes_(),
            )
        )
    return GroupMetadataValue(protocol_type, generation, protocol, leader, state_timestamp, tuple(members))
