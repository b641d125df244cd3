"""__consumer_offsets records: Kafka's byte layout, round trips, older versions, bad bytes."""

from __future__ import annotations

import struct

import pytest

from barnabas.groups.group import GroupState
from barnabas.groups.loader import load_groups
from barnabas.groups.partitioner import java_string_hash, partition_for
from barnabas.groups.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberRecord,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordFormatError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)


def test_offset_key_and_value_have_kafkas_layout() -> None:
    key = encode_key(OffsetCommitKey("g", "t", 7))
    assert key == struct.pack(">hh1sh1si", 1, 1, b"g", 1, b"t", 7)
    value = encode_value(OffsetCommitValue(offset=42, leader_epoch=3, metadata="m", commit_timestamp=1000))
    assert value == struct.pack(">hqih1sq", 3, 42, 3, 1, b"m", 1000)


def test_group_key_has_kafkas_layout() -> None:
    assert encode_key(GroupMetadataKey("grp")) == struct.pack(">hh3s", 2, 3, b"grp")


def test_records_round_trip() -> None:
    member = MemberRecord("m-1", "instance-1", "client", "/127.0.0.1", 300000, 45000, b"\x00sub", b"\x00asg")
    value = GroupMetadataValue("consumer", 5, "range", "m-1", 1234, (member,))
    key = GroupMetadataKey("grp")
    assert decode_key(encode_key(key)) == key
    assert decode_value(key, encode_value(value)) == value
    offset_key = OffsetCommitKey("grp", "topic", 2)
    offset_value = OffsetCommitValue(10, -1, "", 99)
    assert decode_value(offset_key, encode_value(offset_value)) == offset_value


def test_older_offset_value_versions_decode() -> None:
    key = OffsetCommitKey("g", "t", 0)
    v1 = struct.pack(">hqh2sqq", 1, 5, 2, b"md", 100, 200)  # with the expire timestamp
    assert decode_value(key, v1) == OffsetCommitValue(5, -1, "md", 100, 200)
    v0 = struct.pack(">hqhq", 0, 6, 0, 100)
    assert decode_value(key, v0) == OffsetCommitValue(6, -1, "", 100)


def test_bad_bytes_raise_record_format_error() -> None:
    with pytest.raises(RecordFormatError):
        decode_key(struct.pack(">h", 9))
    with pytest.raises(RecordFormatError):
        decode_key(struct.pack(">hh", 1, 50))  # a string longer than the record
    with pytest.raises(RecordFormatError):
        decode_value(OffsetCommitKey("g", "t", 0), struct.pack(">h", 4))


def test_partition_for_matches_javas_string_hash() -> None:
    # Values printed by Java's String.hashCode for the same strings.
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert java_string_hash("\U0001f600") == 1772899  # a surrogate pair, as Java sees it
    assert java_string_hash("my-group") == -1906497762
    assert partition_for("my-group", 50) == 36
    assert partition_for("polygenelubricants", 50) == 0


def test_loading_applies_records_in_order_with_tombstones() -> None:
    def offset(group: str, partition: int, value: int | None) -> tuple[bytes, bytes | None]:
        key = encode_key(OffsetCommitKey(group, "t", partition))
        return key, None if value is None else encode_value(OffsetCommitValue(value, -1, "", 0))

    member = MemberRecord("m-1", None, "c", "/h", 1000, 6000, b"s", b"a")
    metadata = GroupMetadataValue("consumer", 3, "range", "m-1", 50, (member,))
    records = [
        offset("a", 0, 5),
        offset("a", 0, 9),
        offset("a", 1, 4),
        offset("a", 1, None),
        (encode_key(GroupMetadataKey("a")), encode_value(metadata)),
        offset("b", 0, 1),
        (encode_key(GroupMetadataKey("gone")), encode_value(metadata)),
        (encode_key(GroupMetadataKey("gone")), None),
        (b"\x00\x09junk", b""),
    ]
    groups = load_groups(records, now_ms=77)
    assert sorted(groups) == ["a", "b"]
    a = groups["a"]
    assert {tp: v.offset for tp, v in a.offsets.items()} == {("t", 0): 9}
    assert (a.state, a.generation, a.protocol_name, a.leader_id) == (GroupState.STABLE, 3, "range", "m-1")
    assert a.members["m-1"].assignment == b"a"
    b = groups["b"]
    assert (b.state, b.members, b.protocol_type) == (GroupState.EMPTY, {}, None)
