"""__consumer_offsets record schemas and the group -> partition mapping, byte for byte."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidelog.protocol.internal_topics.consumer_offsets import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordReader,
    RecordWriter,
    SchemaError,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
    java_string_hashcode,
    partition_for,
    subscribed_topics,
)


def s16(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    return struct.pack(">h", len(s.encode())) + s.encode()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("a", 97),
        ("abc", 96354),
        ("hello", 99162322),
        ("polygenelubricants", -(2**31)),  # Java's famous Integer.MIN_VALUE hash
        ("\U0001f600", 0xD83D * 31 + 0xDE00),  # a surrogate pair hashes as two code units
    ],
)
def test_java_string_hashcode(text: str, expected: int) -> None:
    assert java_string_hashcode(text) == expected


def test_partition_for_matches_kafka_abs() -> None:
    # Utils.abs(Integer.MIN_VALUE) is 0 (n & 0x7fffffff), not an overflow.
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 99162322 % 50
    h = java_string_hashcode("test-group-with-negative-hash-xyz")
    assert partition_for("test-group-with-negative-hash-xyz", 50) == (h & 0x7FFFFFFF) % 50
    assert all(0 <= partition_for(f"g{i}", 7) < 7 for i in range(200))


def test_offset_commit_key_bytes() -> None:
    key = OffsetCommitKey("grp", "topic", 7)
    raw = encode_offset_commit_key(key)
    assert raw == struct.pack(">h", 1) + s16("grp") + s16("topic") + struct.pack(">i", 7)
    assert decode_key(raw) == key
    # Version 0 keys (old brokers) have the same layout.
    assert decode_key(struct.pack(">h", 0) + raw[2:]) == key


def test_group_metadata_key_bytes() -> None:
    raw = encode_group_metadata_key(GroupMetadataKey("grp"))
    assert raw == struct.pack(">h", 2) + s16("grp")
    assert decode_key(raw) == GroupMetadataKey("grp")


def test_offset_commit_value_v3_bytes() -> None:
    v = OffsetCommitValue(offset=42, metadata="meta", commit_timestamp=1234, leader_epoch=5)
    raw = encode_offset_commit_value(v)
    assert raw == struct.pack(">hqi", 3, 42, 5) + s16("meta") + struct.pack(">q", 1234)
    assert decode_offset_commit_value(raw) == v


def test_offset_commit_value_with_expiry_is_v1() -> None:
    v = OffsetCommitValue(42, "", 1000, -1, 5000)
    raw = encode_offset_commit_value(v)
    assert raw == struct.pack(">hq", 1, 42) + s16("") + struct.pack(">qq", 1000, 5000)
    assert decode_offset_commit_value(raw) == v


def test_offset_commit_value_old_and_flexible_versions() -> None:
    v0 = struct.pack(">hq", 0, 9) + s16("m") + struct.pack(">q", 77)
    assert decode_offset_commit_value(v0) == OffsetCommitValue(9, "m", 77, -1, -1)
    # v4: flexible: compact string (len+1 varint) and an empty tagged-field section.
    v4 = struct.pack(">hqi", 4, 9, 3) + bytes([2]) + b"m" + struct.pack(">q", 77) + b"\x00"
    assert decode_offset_commit_value(v4) == OffsetCommitValue(9, "m", 77, 3, -1)


def _group_value() -> GroupMetadataValue:
    return GroupMetadataValue(
        protocol_type="consumer",
        generation=3,
        protocol="range",
        leader="m1",
        current_state_timestamp=1_700_000_000_000,
        members=(
            MemberMetadata("m1", None, "c1", "/127.0.0.1", 30000, 10000, b"sub1", b"as1"),
            MemberMetadata("m2", "inst-2", "c2", "/127.0.0.1", 30000, 10000, b"sub2", b""),
        ),
    )


def test_group_metadata_value_v3_bytes() -> None:
    value = _group_value()
    raw = encode_group_metadata_value(value)
    expected = (
        struct.pack(">h", 3)
        + s16("consumer")
        + struct.pack(">i", 3)
        + s16("range")
        + s16("m1")
        + struct.pack(">q", 1_700_000_000_000)
        + struct.pack(">i", 2)
        + s16("m1")
        + s16(None)
        + s16("c1")
        + s16("/127.0.0.1")
        + struct.pack(">ii", 30000, 10000)
        + struct.pack(">i", 4)
        + b"sub1"
        + struct.pack(">i", 3)
        + b"as1"
        + s16("m2")
        + s16("inst-2")
        + s16("c2")
        + s16("/127.0.0.1")
        + struct.pack(">ii", 30000, 10000)
        + struct.pack(">i", 4)
        + b"sub2"
        + struct.pack(">i", 0)
    )
    assert raw == expected
    assert decode_group_metadata_value(raw) == value


def test_group_metadata_value_v0_has_no_rebalance_timeout() -> None:
    raw = (
        struct.pack(">h", 0)
        + s16("consumer")
        + struct.pack(">i", 1)
        + s16(None)
        + s16(None)
        + struct.pack(">i", 1)
        + s16("m")
        + s16("c")
        + s16("h")
        + struct.pack(">i", 6000)
        + struct.pack(">i", 0)
        + struct.pack(">i", 0)
    )
    value = decode_group_metadata_value(raw)
    assert value.members[0].rebalance_timeout == 6000
    assert value.current_state_timestamp == -1
    assert value.protocol is None


def test_bad_records_raise_schema_error() -> None:
    with pytest.raises(SchemaError):
        decode_key(struct.pack(">h", 9) + s16("x"))
    with pytest.raises(SchemaError):
        decode_key(struct.pack(">h", 1) + b"\x00")
    with pytest.raises(SchemaError):
        decode_offset_commit_value(struct.pack(">h", 7))
    with pytest.raises(SchemaError):
        decode_group_metadata_value(encode_group_metadata_value(_group_value())[:-3])


def test_subscribed_topics_of_consumer_protocol() -> None:
    sub = struct.pack(">hi", 1, 2) + s16("a") + s16("b") + struct.pack(">i", -1) + b"rest"
    assert subscribed_topics(sub) == frozenset({"a", "b"})
    assert subscribed_topics(b"\x00") is None


names = st.text(max_size=20)


@given(
    group=names,
    topic=names,
    partition=st.integers(0, 2**31 - 1),
    offset=st.integers(-1, 2**63 - 1),
    epoch=st.integers(-1, 2**31 - 1),
    metadata=names,
    ts=st.integers(0, 2**62),
)
def test_offset_records_round_trip(
    group: str, topic: str, partition: int, offset: int, epoch: int, metadata: str, ts: int
) -> None:
    key = OffsetCommitKey(group, topic, partition)
    assert decode_key(encode_offset_commit_key(key)) == key
    value = OffsetCommitValue(offset, metadata, ts, epoch)
    assert decode_offset_commit_value(encode_offset_commit_value(value)) == value


@given(
    members=st.lists(
        st.builds(
            MemberMetadata,
            names,
            st.none() | names,
            names,
            names,
            st.integers(0, 2**31 - 1),
            st.integers(0, 2**31 - 1),
            st.binary(max_size=30),
            st.binary(max_size=30),
        ),
        max_size=4,
    ),
    protocol=st.none() | names,
    leader=st.none() | names,
    generation=st.integers(0, 2**31 - 1),
)
def test_group_metadata_round_trip(
    members: list[MemberMetadata], protocol: str | None, leader: str | None, generation: int
) -> None:
    value = GroupMetadataValue("consumer", generation, protocol, leader, 5, tuple(members))
    assert decode_group_metadata_value(encode_group_metadata_value(value)) == value


@given(
    st.lists(st.one_of(st.none(), st.text(max_size=20)), max_size=5),
    st.binary(max_size=20),
    st.booleans(),
)
def test_record_writer_and_reader_agree_in_both_forms(
    strings: list[str | None], blob: bytes, flexible: bool
) -> None:
    w = RecordWriter(flexible=flexible)
    w.array_len(len(strings))
    for text in strings:
        w.string(text)
    w.bytes_(blob)
    w.no_tags()
    r = RecordReader(bytes(w.buf), flexible=flexible)
    assert [r.nullable_string() for _ in range(r.array_len())] == strings
    assert r.bytes_() == blob
    r.tags()
    assert r.pos == len(w.buf)


def test_record_reader_checks_an_array_length_against_the_record() -> None:
    with pytest.raises(SchemaError, match="longer than the record"):
        RecordReader(struct.pack(">i", 1_000_000) + b"x").array_len()
    with pytest.raises(SchemaError, match="null array"):
        RecordReader(struct.pack(">i", -1)).array_len()
    assert RecordReader(b"\x00", flexible=True).array_len() == 0  # a null compact array
