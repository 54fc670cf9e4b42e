"""KIP-848 pieces without a broker: Kafka 4's record bytes, the assignors, reconciliation."""

from __future__ import annotations

import uuid

import pytest

from tidelog.broker.group.consumer import records as rec
from tidelog.broker.group.consumer.assignors import AssignmentSpec, assign
from tidelog.broker.group.consumer.model import (
    STABLE,
    UNRELEASED_PARTITIONS,
    UNREVOKED_PARTITIONS,
    ConsumerMember,
    reconcile,
)

T = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
U = uuid.UUID("ffeeddcc-bbaa-9988-7766-554433221100")


def test_keys_are_kafka_bytes() -> None:
    assert rec.encode_key(rec.ConsumerKey(rec.METADATA_KEY, "g")) == b"\x00\x03\x00\x01g"
    member_key = rec.encode_key(rec.ConsumerKey(rec.CURRENT_MEMBER_ASSIGNMENT_KEY, "g", "m1"))
    assert member_key == b"\x00\x08\x00\x01g\x00\x02m1"
    assert rec.decode_key(member_key) == rec.ConsumerKey(8, "g", "m1")
    with pytest.raises(rec.SchemaError):
        rec.decode_key(b"\x00\x02\x00\x01g")  # a classic GroupMetadataKey


def test_values_are_kafka_bytes_and_round_trip() -> None:
    assert rec.encode_epoch_value(5) == b"\x00\x00\x00\x00\x00\x05\x00"
    assert rec.decode_epoch_value(b"\x00\x00\x00\x00\x00\x05\x00") == 5
    # A later Kafka's tagged MetadataHash (tag 0, 8 bytes) is skipped.
    assert rec.decode_epoch_value(b"\x00\x00\x00\x00\x00\x05\x01\x00\x08" + bytes(8)) == 5
    current = rec.CurrentAssignmentValue(3, 2, 0, {T: frozenset({2, 0})}, {})
    raw = rec.encode_current_assignment_value(current)
    assert raw == (
        b"\x00\x00" + b"\x00\x00\x00\x03" + b"\x00\x00\x00\x02" + b"\x00"
        + b"\x02" + T.bytes + b"\x03" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x02" + b"\x00"
        + b"\x01" + b"\x00"
    )  # fmt: skip
    assert rec.decode_current_assignment_value(raw) == current
    member = rec.MemberMetadataValue(None, None, "c", "/h", ("t",), None, 1000, "uniform")
    raw = rec.encode_member_metadata_value(member)
    assert raw == (
        b"\x00\x00" + b"\x00" + b"\x00" + b"\x02c" + b"\x03/h" + b"\x02\x02t" + b"\x00"
        + b"\x00\x00\x03\xe8" + b"\x08uniform" + b"\x00"
    )  # fmt: skip
    assert rec.decode_member_metadata_value(raw) == member
    topics = [rec.TopicMetadata(T, "t", 6)]
    raw = rec.encode_partition_metadata_value(topics)
    assert raw == b"\x00\x00\x02" + T.bytes + b"\x02t" + b"\x00\x00\x00\x06" + b"\x01\x00\x00"
    assert rec.decode_partition_metadata_value(raw) == topics
    target = {T: frozenset({1}), U: frozenset({0, 3})}
    assert rec.decode_target_member_value(rec.encode_target_member_value(target)) == target


def test_uniform_balances_and_sticks() -> None:
    topics = {T: ("t", 6)}
    three = {m: frozenset({T}) for m in ("a", "b", "c")}
    first = assign("uniform", AssignmentSpec(three, topics, {}))
    assert sorted(len(p[T]) for p in first.values()) == [2, 2, 2]
    assert frozenset().union(*(p[T] for p in first.values())) == frozenset(range(6))
    two = {m: frozenset({T}) for m in ("a", "b")}
    second = assign("uniform", AssignmentSpec(two, topics, first))
    assert sorted(len(p[T]) for p in second.values()) == [3, 3]
    assert first["a"][T] <= second["a"][T] and first["b"][T] <= second["b"][T]


def test_range_gives_contiguous_ranges() -> None:
    spec = AssignmentSpec({m: frozenset({T}) for m in ("b", "a")}, {T: ("t", 5)}, {})
    assert assign("range", spec) == {"a": {T: frozenset({0, 1, 2})}, "b": {T: frozenset({3, 4})}}


def test_reconcile_revokes_before_assigning() -> None:
    member = ConsumerMember("m", member_epoch=1, assigned={T: frozenset({0, 1, 2})})
    free = lambda _t, _p: -1  # noqa: E731
    # Target moves partition 2 away and gives 3: 2 must be revoked first.
    step = reconcile(member, {T: frozenset({0, 1, 3})}, 2, {T: frozenset({0, 1, 2})}, free)
    assert step.state == UNREVOKED_PARTITIONS and step.member_epoch == 1
    assert step.assigned == {T: frozenset({0, 1})} and step.pending_revocation == {
        T: frozenset({2})
    }
    # Still owning 2: no progress.
    assert reconcile(step, {T: frozenset({0, 1, 3})}, 2, {T: frozenset({0, 1, 2})}, free) == step
    done = reconcile(step, {T: frozenset({0, 1, 3})}, 2, {T: frozenset({0, 1})}, free)
    assert (done.state, done.member_epoch, done.previous_member_epoch) == (STABLE, 2, 1)
    assert done.assigned == {T: frozenset({0, 1, 3})} and done.pending_revocation == {}


def test_reconcile_waits_for_partitions_another_member_holds() -> None:
    member = ConsumerMember("m", member_epoch=1)
    held_by_other = lambda _t, p: 1 if p == 5 else -1  # noqa: E731
    step = reconcile(member, {T: frozenset({4, 5})}, 2, {}, held_by_other)
    assert (step.state, step.member_epoch) == (UNRELEASED_PARTITIONS, 2)
    assert step.assigned == {T: frozenset({4})}
    freed = reconcile(step, {T: frozenset({4, 5})}, 2, {T: frozenset({4})}, lambda _t, _p: -1)
    assert freed.state == STABLE and freed.assigned == {T: frozenset({4, 5})}
