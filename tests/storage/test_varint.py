"""storage.varint is the one varint codec of the file formats; the inlined hot-path copies
(record_codec's record decoder, protocol's wire reader) must agree with it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidelog.protocol.errors import FrameDecodeError
from tidelog.protocol.fast.common import uvarint as wire_uvarint
from tidelog.storage.errors import CorruptRecordError
from tidelog.storage.record_codec import NewRecord, RecordDecodeError, decode_batch, encode_batch
from tidelog.storage.varint import (
    VarintError,
    read_uvarint,
    read_varint,
    write_uvarint,
    write_varint,
)

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)


@given(INT64, st.binary(max_size=4))
def test_signed_round_trip(value: int, tail: bytes) -> None:
    out = bytearray()
    write_varint(value, out)
    assert len(out) <= 10
    data = bytes(out) + tail
    assert read_varint(data, 0, len(data)) == (value, len(out))


@given(st.integers(min_value=0, max_value=2**64 - 1))
def test_unsigned_round_trip(value: int) -> None:
    out = bytearray()
    write_uvarint(value, out)
    assert read_uvarint(bytes(out), 0, len(out)) == (value, len(out))


@given(st.integers(min_value=0, max_value=2**31 - 1))
def test_protocol_wire_reader_agrees(value: int) -> None:
    out = bytearray()
    write_uvarint(value, out)
    view = memoryview(bytes(out))
    assert wire_uvarint("test", view, 0, len(out)) == read_uvarint(view, 0, len(out))


@given(INT64)
def test_truncation_is_both_error_kinds(value: int) -> None:
    out = bytearray()
    write_varint(value, out)
    with pytest.raises(VarintError) as info:
        read_varint(bytes(out), 0, len(out) - 1)
    assert isinstance(info.value, CorruptRecordError)
    assert isinstance(info.value, RecordDecodeError)


def test_longer_than_ten_bytes() -> None:
    with pytest.raises(VarintError, match="longer than 10 bytes"):
        read_uvarint(b"\xff" * 11, 0, 11)
    with pytest.raises(FrameDecodeError):
        wire_uvarint("test", memoryview(b"\xff" * 6), 0, 6)


_SIZED = st.one_of(
    st.binary(max_size=3),
    st.binary(min_size=60, max_size=70),  # around the 1 -> 2 byte step (64)
    st.binary(min_size=8180, max_size=8200),  # around the 2 -> 3 byte step (8192)
)


@settings(deadline=None)  # 8 KiB records on a loaded machine
@given(
    st.lists(
        st.tuples(
            st.one_of(st.none(), _SIZED),
            st.one_of(st.none(), _SIZED),
            st.integers(min_value=-(2**40), max_value=2**40),
        ),
        min_size=1,
        max_size=5,
    ),
    st.integers(min_value=0, max_value=2**40),
)
def test_inlined_record_decoder_agrees_with_the_codec(
    records: list[tuple[bytes | None, bytes | None, int]], base_ts: int
) -> None:
    """record_codec._decode_records reads 1- and 2-byte varints inline and calls
    read_uvarint for longer ones: lengths and deltas on every side of those steps decode to
    what write_varint wrote."""
    recs = [NewRecord(k, v, (), base_ts + d) for k, v, d in records]
    decoded = decode_batch(encode_batch(recs, base_offset=7))
    assert [(r.key, r.value, r.timestamp) for r in decoded.records] == [
        (k, v, base_ts + d) for k, v, d in records
    ]
    assert [r.offset for r in decoded.records] == list(range(7, 7 + len(records)))
