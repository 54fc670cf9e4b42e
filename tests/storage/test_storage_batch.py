"""Record batch header parsing, validation and offset assignment."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c
from kafka.record import MemoryRecords

from tests.storage.batches import Rec, build_batch, simple_batch
from tidelog.storage import (
    CorruptRecordError,
    InvalidRecordError,
    MessageTooLargeError,
    RecordListTooLargeError,
    UnsupportedMessageFormatError,
    iter_batches,
    parse_batch_header,
    verify_crc,
)
from tidelog.storage.batch import prepare_append, validate_records


def _validate(records: bytes, **kw: object) -> list:  # type: ignore[type-arg]
    args = {"max_message_bytes": 1_000_000, "segment_bytes": 10_000_000}
    args.update(kw)
    return validate_records(records, **args)  # type: ignore[arg-type]


def test_parse_header_fields() -> None:
    batch = build_batch(
        [Rec(b"k", b"v", 1000), Rec(None, b"w", 1005)],
        producer_id=7,
        producer_epoch=3,
        base_sequence=11,
        transactional=True,
    )
    header = parse_batch_header(batch)
    assert header.magic == 2
    assert header.size_in_bytes == len(batch)
    assert header.records_count == 2
    assert header.last_offset_delta == 1
    assert header.last_offset == 1
    assert header.base_timestamp == 1000
    assert header.max_timestamp == 1005
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 3, 11)
    assert header.is_transactional and not header.is_control
    assert header.compression == 0 and header.timestamp_type == 0
    assert header.pack() == batch[:61]
    verify_crc(batch, 0, header)


def test_iter_batches_and_truncation() -> None:
    a, b = simple_batch(2), simple_batch(3, seed=1)
    buf = a + b
    assert [pos for pos, _ in iter_batches(buf)] == [0, len(a)]
    with pytest.raises(CorruptRecordError):
        list(iter_batches(buf[:-1]))
    with pytest.raises(CorruptRecordError):
        list(iter_batches(buf + b"\x00" * 20))


@pytest.mark.parametrize("cut", [1, 10, 16, 30, 60])
def test_truncated_header(cut: int) -> None:
    with pytest.raises(CorruptRecordError) as info:
        parse_batch_header(simple_batch(1)[:cut])
    assert info.value.error_name == "CORRUPT_MESSAGE"


def test_bad_length_and_magic() -> None:
    batch = bytearray(simple_batch(1))
    struct.pack_into(">i", batch, 8, 10)
    with pytest.raises(CorruptRecordError, match="minimum"):
        parse_batch_header(batch)
    batch = bytearray(simple_batch(1))
    batch[16] = 3
    with pytest.raises(CorruptRecordError, match="magic"):
        parse_batch_header(batch)
    batch[16] = 1
    with pytest.raises(UnsupportedMessageFormatError) as info:
        parse_batch_header(batch)
    assert info.value.error_name == "UNSUPPORTED_FOR_MESSAGE_FORMAT"
    assert isinstance(info.value, CorruptRecordError)


def test_validate_errors() -> None:
    good = simple_batch(3)
    assert len(_validate(good + good)) == 2
    flipped = bytearray(good)
    flipped[-1] ^= 0x01
    with pytest.raises(CorruptRecordError, match="CRC"):
        _validate(bytes(flipped))
    with pytest.raises(MessageTooLargeError) as too_large:
        _validate(good, max_message_bytes=len(good) - 1)
    assert too_large.value.error_name == "MESSAGE_TOO_LARGE"
    with pytest.raises(RecordListTooLargeError) as list_large:
        _validate(good + good, segment_bytes=len(good) + 1)
    assert list_large.value.error_name == "RECORD_LIST_TOO_LARGE"
    with pytest.raises(InvalidRecordError):
        _validate(b"")


def _with_fields(batch: bytes, *, last_offset_delta: int, records_count: int) -> bytes:
    out = bytearray(batch)
    struct.pack_into(">i", out, 23, last_offset_delta)
    struct.pack_into(">i", out, 57, records_count)
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


def test_record_count_rules() -> None:
    good = simple_batch(3)
    with pytest.raises(InvalidRecordError) as info:
        _validate(_with_fields(good, last_offset_delta=5, records_count=3))
    assert info.value.error_name == "INVALID_RECORD"
    with pytest.raises(InvalidRecordError):
        _validate(_with_fields(good, last_offset_delta=0, records_count=0))
    control = build_batch([Rec(b"\x00\x00\x00\x00", b"", 5)], control=True)
    with pytest.raises(InvalidRecordError):
        _validate(control)
    assert _validate(control, allow_control=True)


def test_prepare_append_assigns_offsets_without_touching_crc() -> None:
    a, b = simple_batch(2), simple_batch(5, seed=3)
    records = a + b
    prepared = prepare_append(records, _validate(records), base_offset=100, log_append_time_ms=None)
    out = b"".join(bytes(x) for x in prepared.iov)
    assert len(out) == len(records) == prepared.size_in_bytes
    assert [h.base_offset for h in prepared.headers] == [100, 102]
    assert (prepared.first_offset, prepared.last_offset) == (100, 106)
    assert out[8:][: len(a) - 8] == a[8:]
    for pos, header in iter_batches(out):
        verify_crc(out, pos, header)
    mr = MemoryRecords(out)
    offsets = []
    while mr.has_next():
        batch = mr.next_batch()
        assert batch.validate_crc()
        offsets.extend(r.offset for r in batch)
    assert offsets == list(range(100, 107))


def test_prepare_append_log_append_time() -> None:
    batch = build_batch([Rec(b"k", b"v", 1000), Rec(b"k", b"w", 2000)])
    prepared = prepare_append(
        batch, _validate(batch), base_offset=5, log_append_time_ms=99_999, leader_epoch=4
    )
    out = b"".join(bytes(x) for x in prepared.iov)
    header = parse_batch_header(out)
    verify_crc(out, 0, header)
    assert header.timestamp_type == 1
    assert header.max_timestamp == 99_999
    assert header.base_timestamp == 1000
    assert header.partition_leader_epoch == 4
    assert header.base_offset == 5
    assert prepared.max_timestamp == 99_999
    parsed = MemoryRecords(out).next_batch()
    assert parsed.validate_crc()
    assert [r.timestamp for r in parsed] == [99_999, 99_999]
