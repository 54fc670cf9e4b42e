"""The share-partition state machine alone (broker/share/partition.py), time passed in."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from tidelog.broker.share.partition import (
    AcquiredRange,
    Batch,
    RecordState,
    SharePartition,
    StateBatch,
)

LOCK_MS = 1000


def _sp(limit: int = 3, max_in_flight: int = 100) -> SharePartition:
    return SharePartition(0, delivery_count_limit=limit, max_in_flight=max_in_flight)


def test_acquire_ack_moves_the_start_offset() -> None:
    sp = _sp()
    ranges, sent = sp.acquire("a", [Batch(0, 4), Batch(5, 9)], 500, 0, LOCK_MS)
    assert ranges == [AcquiredRange(0, 9, 1)] and len(sent) == 2
    assert (sp.start_offset, sp.end_offset, sp.acquired_count()) == (0, 10, 10)
    assert sp.acknowledge("a", 0, 3, (1,), 10, LOCK_MS) is ErrorCode.none
    assert sp.start_offset == 4
    # gaps in the middle hold the start offset back until the records below are done
    assert sp.acknowledge("a", 6, 6, (3,), 10, LOCK_MS) is ErrorCode.none
    assert sp.start_offset == 4
    assert sp.acknowledge("a", 4, 5, (1, 0), 10, LOCK_MS) is ErrorCode.none
    assert sp.start_offset == 7


def test_acknowledge_checks_owner_state_and_shape() -> None:
    sp = _sp()
    sp.acquire("a", [Batch(0, 4)], 500, 0, LOCK_MS)
    assert sp.acknowledge("b", 0, 0, (1,), 0, LOCK_MS) is ErrorCode.invalid_record_state
    assert sp.acknowledge("a", 3, 7, (1,), 0, LOCK_MS) is ErrorCode.invalid_record_state
    assert sp.acknowledge("a", 2, 1, (1,), 0, LOCK_MS) is ErrorCode.invalid_request
    assert sp.acknowledge("a", 0, 2, (1, 1), 0, LOCK_MS) is ErrorCode.invalid_request
    assert sp.acknowledge("a", 0, 0, (9,), 0, LOCK_MS) is ErrorCode.invalid_request
    # all or nothing: nothing changed above
    assert sp.acquired_count() == 5
    assert sp.acknowledge("a", 0, 0, (1,), 0, LOCK_MS) is ErrorCode.none
    assert sp.acknowledge("a", 0, 0, (1,), 0, LOCK_MS) is ErrorCode.invalid_record_state


def test_lock_timeout_and_delivery_count_limit() -> None:
    sp = _sp(limit=2)
    sp.acquire("a", [Batch(0, 1)], 500, 0, LOCK_MS)
    assert sp.next_lock_deadline_ms() == LOCK_MS
    assert sp.expire_locks(LOCK_MS - 1) == 0
    assert sp.expire_locks(LOCK_MS) == 2
    assert sp.first_available() == 0
    ranges, _ = sp.acquire("b", [Batch(0, 1)], 500, LOCK_MS, LOCK_MS)
    assert ranges == [AcquiredRange(0, 1, 2)]
    # renew pushes the deadline; the second timeout archives (limit 2)
    assert sp.acknowledge("b", 0, 0, (4,), LOCK_MS + 500, LOCK_MS) is ErrorCode.none
    assert sp.expire_locks(2 * LOCK_MS) == 1  # offset 1 only
    assert sp.records[1].state is RecordState.ARCHIVED
    assert sp.acknowledge("b", 0, 0, (2,), 2 * LOCK_MS, LOCK_MS) is ErrorCode.none
    assert sp.start_offset == 2 and sp.records == {}
    assert sp.archived_total == 2 and sp.redelivered_total == 2


def test_max_records_keeps_batches_whole_and_max_in_flight_limits() -> None:
    sp = _sp(max_in_flight=8)
    ranges, sent = sp.acquire("a", [Batch(0, 4), Batch(5, 9)], 3, 0, LOCK_MS)
    assert ranges == [AcquiredRange(0, 4, 1)] and sent == [Batch(0, 4)]
    ranges, _ = sp.acquire("b", [Batch(5, 9), Batch(10, 14)], 500, 0, LOCK_MS)
    assert ranges == [AcquiredRange(5, 7, 1)]  # 8 records in flight at most
    assert sp.next_fetch_offset() is None


def test_skipped_batches_are_archived_and_not_sent() -> None:
    sp = _sp()
    ranges, sent = sp.acquire("a", [Batch(0, 1), Batch(2, 2, skip=True), Batch(3, 3)], 500, 0, 1)
    assert ranges == [AcquiredRange(0, 1, 1), AcquiredRange(3, 3, 1)]
    assert sent == [Batch(0, 1), Batch(3, 3)]
    assert sp.records[2].state is RecordState.ARCHIVED


def test_release_member_and_snapshot_restore() -> None:
    sp = _sp()
    sp.acquire("a", [Batch(0, 5)], 500, 0, LOCK_MS)
    sp.acknowledge("a", 0, 1, (1,), 0, LOCK_MS)
    sp.acknowledge("a", 3, 3, (3,), 0, LOCK_MS)
    snapshot = sp.snapshot()
    assert snapshot == [
        StateBatch(2, 2, RecordState.AVAILABLE, 1),
        StateBatch(3, 3, RecordState.ARCHIVED, 1),
        StateBatch(4, 5, RecordState.AVAILABLE, 1),
    ]
    restored = _sp()
    restored.restore(sp.start_offset, snapshot)
    assert (restored.start_offset, restored.end_offset) == (2, 6)
    assert restored.first_available() == 2
    assert sp.release_member("a") == 3
    assert sp.acquired_count() == 0


def test_share_state_record_layout_round_trips() -> None:
    import uuid

    from tidelog.protocol.internal_topics.share_group_state import (
        ShareStateKey,
        ShareStateValue,
        StateBatchRecord,
        decode_key,
        decode_value,
        encode_key,
        encode_value,
        java_string_hash,
        partition_for,
    )

    value = ShareStateValue(
        3, 1, 0, 12, (StateBatchRecord(12, 19, 0, 1), StateBatchRecord(20, 20, 4, 5))
    )
    data = encode_value(value)
    assert data[:2] == b"\x00\x00" and decode_value(data) == value
    key = ShareStateKey("g", uuid.uuid4(), 3)
    assert encode_key(key)[:2] == b"\x00\x00" and decode_key(encode_key(key)) == key
    assert java_string_hash("hello") == 99162322  # Java's "hello".hashCode()
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert partition_for("polygenelubricants"[:0] + "g", uuid.UUID(int=0), 0, 50) in range(50)


def test_record_limit_acquires_at_most_max_records() -> None:
    # KIP-1206: batch_optimized keeps the batch whole, record_limit stops inside it
    whole = _sp()
    ranges, _ = whole.acquire("a", [Batch(0, 9)], 3, 0, LOCK_MS)
    assert ranges == [AcquiredRange(0, 9, 1)]
    limited = _sp()
    ranges, sent = limited.acquire("a", [Batch(0, 9)], 3, 0, LOCK_MS, record_limit=True)
    assert ranges == [AcquiredRange(0, 2, 1)] and sent == [Batch(0, 9)]
    assert (limited.end_offset, limited.acquired_count()) == (3, 3)
    # the rest of the batch is acquired by the next fetch (redelivered records count too)
    assert limited.acknowledge("a", 1, 1, (2,), 0, LOCK_MS) is ErrorCode.none
    ranges, _ = limited.acquire("b", [Batch(0, 9)], 3, 0, LOCK_MS, record_limit=True)
    assert ranges == [AcquiredRange(1, 1, 2), AcquiredRange(3, 4, 1)]


def test_renew_extends_the_lock_unless_the_group_disables_it() -> None:
    sp = _sp()
    sp.acquire("a", [Batch(0, 1)], 500, 0, LOCK_MS)
    assert sp.acknowledge("a", 0, 0, (4,), 900, LOCK_MS) is ErrorCode.none
    assert sp.expire_locks(1500) == 1  # offset 1's lock ran out, offset 0's was renewed
    assert sp.records[0].state is RecordState.ACQUIRED
    assert sp.next_lock_deadline_ms() == 1900
    assert (
        sp.acknowledge("a", 0, 0, (4,), 1000, LOCK_MS, renew_enabled=False)
        is ErrorCode.invalid_record_state
    )
