"""storage.record_codec: round trips, interop with kafka-python's own record code, corruption."""

from __future__ import annotations

import struct
import sys
import types
import zlib
from collections.abc import Iterator

import cramjam
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatch, LegacyRecordBatchBuilder

from tidelog.storage.record_codec import (
    COMPRESSION_CODES,
    DecodedBatch,
    LegacyBatch,
    NewRecord,
    Record,
    RecordColumns,
    RecordDecodeError,
    compress,
    control_marker,
    decode_batch,
    decode_batch_into,
    decode_legacy_entry,
    decompress,
    encode_batch,
    encode_control_batch,
    iter_batches,
    iter_records,
    read_batch_header,
)
from tidelog.storage.record_compression import _xxh32_small

CODECS = list(COMPRESSION_CODES)
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

blob = st.binary(max_size=300)
maybe_blob = st.none() | blob
headers = st.lists(st.tuples(st.text(max_size=20), maybe_blob), max_size=4).map(tuple)
new_records = st.lists(
    st.builds(
        NewRecord, maybe_blob, maybe_blob, headers, st.integers(min_value=0, max_value=2**41)
    ),
    min_size=1,
    max_size=30,
)


@pytest.fixture(autouse=True, scope="module")
def kafka_python_codecs() -> Iterator[None]:
    """kafka-python wants python-snappy and xxhash; give it stand-ins built on cramjam."""
    import kafka.codec as kc

    snappy = types.SimpleNamespace(
        compress=lambda b: bytes(cramjam.snappy.compress_raw(bytes(b))),
        decompress=lambda b: bytes(cramjam.snappy.decompress_raw(bytes(b))),
    )

    def xxh32(b: bytes) -> types.SimpleNamespace:
        return types.SimpleNamespace(digest=lambda: _xxh32_small(bytes(b)).to_bytes(4, "big"))

    xxh = types.SimpleNamespace(xxh32=xxh32)
    saved = kc.snappy, kc.xxhash
    kc.snappy, kc.xxhash = snappy, xxh
    yield
    kc.snappy, kc.xxhash = saved


def _check(decoded: DecodedBatch, recs: list[NewRecord], base: int) -> None:
    assert decoded.records_count == len(recs)
    for i, (got, want) in enumerate(zip(decoded.records, recs, strict=True)):
        assert (got.offset, got.timestamp) == (base + i, want.timestamp)
        assert (got.key, got.value, got.headers) == (want.key, want.value, want.headers)


# ---------------------------------------------------------------- round trips


@pytest.mark.parametrize("codec", CODECS)
@FAST
@given(recs=new_records, base=st.integers(0, 2**62), pid=st.integers(-1, 2**40))
def test_round_trip(codec: str, recs: list[NewRecord], base: int, pid: int) -> None:
    epoch, seq = (-1, -1) if pid == -1 else (3, 2**31 - 5)
    buf = encode_batch(
        recs,
        base_offset=base,
        compression=codec,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )
    d = decode_batch(buf)
    _check(d, recs, base)
    assert (d.compression_name, d.producer_id, d.producer_epoch) == (codec, pid, epoch)
    assert d.size == len(buf) and d.last_offset == base + len(recs) - 1
    assert d.max_timestamp == max(r.timestamp or 0 for r in recs)
    if seq >= 0:  # sequences wrap at Int32.MAX like Kafka's
        assert [r.sequence for r in d.records] == [(seq + i) % 2**31 for i in range(len(recs))]
    assert list(iter_records(buf + buf[:30])) == list(d.records)  # partial tail ignored
    cols = RecordColumns()
    decode_batch_into(buf, cols)
    assert cols.values == [r.value for r in recs] and cols.headers == [r.headers for r in recs]


def test_gaps_last_offset_delta_and_empty_batch() -> None:
    kept = [Record(103, 5, b"a", b"1"), Record(107, 6, b"b", None)]
    buf = encode_batch(kept, base_offset=100, last_offset_delta=9, compression="zstd")
    d = decode_batch(buf)
    assert [r.offset for r in d.records] == [103, 107] and d.last_offset == 109
    assert d.records[1].value is None  # a tombstone
    empty = decode_batch(
        encode_batch(
            [],
            base_offset=50,
            last_offset_delta=4,
            producer_id=7,
            producer_epoch=0,
            base_sequence=10,
        )
    )
    assert (empty.records, empty.last_offset, empty.records_count) == ((), 54, 0)
    with pytest.raises(ValueError, match="increase"):
        encode_batch([Record(5, 0, None, b""), Record(5, 0, None, b"")], base_offset=0)


def test_log_append_time_delete_horizon_and_transactional() -> None:
    recs = [NewRecord(b"k", b"v", (), 10), NewRecord(b"k", b"w", (), 20)]
    d = decode_batch(encode_batch(recs, timestamp_type=1, max_timestamp=999))
    assert [r.timestamp for r in d.records] == [999, 999] and d.timestamp_type == 1
    d = decode_batch(
        encode_batch(
            recs,
            delete_horizon_ms=5000,
            is_transactional=True,
            producer_id=1,
            producer_epoch=0,
            base_sequence=0,
        )
    )
    assert d.has_delete_horizon and d.delete_horizon_ms == 5000 and d.is_transactional
    assert [r.timestamp for r in d.records] == [10, 20]


def test_control_batch() -> None:
    buf = encode_control_batch(
        0, base_offset=42, producer_id=9, producer_epoch=2, coordinator_epoch=7, timestamp=1
    )
    d = decode_batch(buf)
    assert d.is_control and d.is_transactional and d.records[0].is_control
    assert control_marker(d.records[0]) == (0, 7) and d.records[0].control_type == 0
    data = encode_batch([NewRecord(b"k", b"v", (), 1)], base_offset=41) + buf
    assert [r.offset for r in iter_records(data)] == [41]
    assert [r.offset for r in iter_records(data, include_control=True)] == [41, 42]
    with pytest.raises(RecordDecodeError):
        control_marker(decode_batch(data).records[0])


# ---------------------------------------------------------------- interop with kafka-python


@pytest.mark.parametrize("codec", CODECS)
@FAST
@given(recs=new_records, base=st.integers(0, 2**40))
def test_kafka_python_builds_we_decode(codec: str, recs: list[NewRecord], base: int) -> None:
    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=COMPRESSION_CODES[codec],
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=2**30,
    )
    for i, r in enumerate(recs):
        b.append(i, timestamp=r.timestamp, key=r.key, value=r.value, headers=list(r.headers))
    buf = bytearray(b.build())
    struct.pack_into(">q", buf, 0, base)  # the broker assigns the base offset
    _check(decode_batch(bytes(buf)), recs, base)


@pytest.mark.parametrize("codec", CODECS)
@FAST
@given(recs=new_records, base=st.integers(0, 2**40))
def test_we_build_kafka_python_decodes(codec: str, recs: list[NewRecord], base: int) -> None:
    batch = DefaultRecordBatch(encode_batch(recs, base_offset=base, compression=codec))
    assert batch.validate_crc() and batch.base_offset == base
    got = list(batch)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in got] == [
        (base + i, r.timestamp, r.key, r.value) for i, r in enumerate(recs)
    ]
    assert [tuple(r.headers) for r in got] == [r.headers for r in recs]


def test_raw_and_framed_snappy_decode() -> None:
    """librdkafka sends raw snappy; others the snappy framing format; Java xerial blocks."""
    data = b"hello kafka " * 500
    for blob_ in (
        bytes(cramjam.snappy.compress_raw(data)),
        bytes(cramjam.snappy.compress(data)),
        compress("snappy", data),
    ):
        assert decompress(2, blob_) == data
    big = b"x" * 100_000  # several xerial blocks
    assert decompress(2, compress("snappy", big)) == big


def test_zstd_without_content_size_and_gzip_members() -> None:
    import zstandard

    data = b"abc" * 10_000
    frame = zstandard.ZstdCompressor(write_content_size=False).compress(data)
    assert decompress(4, frame) == data
    assert decompress(1, compress("gzip", data[:10]) + compress("gzip", data[10:])) == data
    with pytest.raises(RecordDecodeError, match="limit"):
        decompress(4, frame, limit=1000)
    with pytest.raises(RecordDecodeError, match="limit"):
        decompress(1, compress("gzip", data), limit=1000)


# ---------------------------------------------------------------- legacy v0 / v1


def _legacy(
    magic: int,
    codec: int,
    recs: list[tuple[bytes | None, bytes | None]],
    base: int,
    wrapper_offset: int | None = None,
) -> bytes:
    b = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=2**30)
    for i, (k, v) in enumerate(recs):
        b.append(i if codec else base + i, timestamp=1000 + i, key=k, value=v)
    buf = bytearray(b.build())
    if codec:  # a broker writes the wrapper: v0 inner offsets absolute, v1 wrapper = last offset
        if magic == 0:
            return _legacy_wrap_v0(recs, codec, base)
        struct.pack_into(
            ">q", buf, 0, base + len(recs) - 1 if wrapper_offset is None else wrapper_offset
        )
    return bytes(buf)


def _msg(
    offset: int, magic: int, attrs: int, ts: int, key: bytes | None, value: bytes | None
) -> bytes:
    def field(b: bytes | None) -> bytes:
        return struct.pack(">i", -1) if b is None else struct.pack(">i", len(b)) + b

    body = bytes((magic, attrs)) + (struct.pack(">q", ts) if magic else b"") + field(key)
    body += field(value)
    return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + body


def _legacy_wrap_v0(recs: list[tuple[bytes | None, bytes | None]], codec: int, base: int) -> bytes:
    inner = b"".join(_msg(base + i, 0, 0, -1, k, v) for i, (k, v) in enumerate(recs))
    payload = compress(codec, inner) if codec != 3 else _old_kafka_lz4(inner)
    return _msg(base + len(recs) - 1, 0, codec, -1, None, payload)


def _old_kafka_lz4(data: bytes) -> bytes:
    import kafka.codec as kc

    return bytes(kc.lz4_encode_old_kafka(data))


legacy_recs = st.lists(st.tuples(maybe_blob, maybe_blob), min_size=1, max_size=10)


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4"])
@FAST
@given(recs=legacy_recs, base=st.integers(0, 2**40))
def test_legacy_message_sets(
    magic: int, codec: str, recs: list[tuple[bytes | None, bytes | None]], base: int
) -> None:
    buf = _legacy(magic, COMPRESSION_CODES[codec], recs, base)
    got = list(iter_records(buf))
    assert [(r.offset, r.key, r.value, r.magic) for r in got] == [
        (base + i, k, v, magic) for i, (k, v) in enumerate(recs)
    ]
    want_ts = [1000 + i for i in range(len(recs))] if magic else [-1] * len(recs)
    assert [r.timestamp for r in got] == want_ts
    # kafka-python reads the same first outer message (the whole set when compressed)
    first = decode_legacy_entry(buf)
    theirs = list(LegacyRecordBatch(buf[: first.size], magic))
    assert [(r.offset, r.key, r.value) for r in theirs] == [
        (r.offset, r.key, r.value) for r in first.records
    ]


def test_legacy_v1_wrapper_rules() -> None:
    recs = [(b"a", b"1"), (b"b", b"2"), (None, b"3")]
    assert [r.offset for r in iter_records(_legacy(1, 1, recs, 0, wrapper_offset=0))] == [0, 1, 2]
    inner = b"".join(_msg(i, 1, 0, 50 + i, k, v) for i, (k, v) in enumerate(recs))
    wrapper = _msg(12, 1, 1 | 0x08, 777, None, compress("gzip", inner))  # LogAppendTime
    e = decode_legacy_entry(wrapper)
    assert isinstance(e, LegacyBatch) and e.base_offset == 10 and e.last_offset == 12
    assert [(r.offset, r.timestamp, r.timestamp_type) for r in e.records] == [
        (10, 777, 1),
        (11, 777, 1),
        (12, 777, 1),
    ]
    with pytest.raises(RecordDecodeError, match="below"):
        decode_legacy_entry(_msg(1, 1, 1, 0, None, compress("gzip", inner)))
    mixed = wrapper + encode_batch([NewRecord(b"k", b"v", (), 5)], base_offset=13)
    kinds = [type(b) for b in iter_batches(mixed)]
    assert kinds == [LegacyBatch, DecodedBatch]


# ---------------------------------------------------------------- corruption


def _sample() -> bytes:
    recs = [NewRecord(b"k%d" % i, b"v" * i, (("h", b"x"),), 1000 + i) for i in range(20)]
    return encode_batch(recs, base_offset=5)


def test_every_truncation_is_clean() -> None:
    buf = _sample()
    for n in range(len(buf)):
        assert list(iter_batches(buf[:n])) == []  # a partial tail: nothing, no error
        with pytest.raises(RecordDecodeError):
            decode_batch(buf[:n])


def test_crc_mismatch_and_bad_header() -> None:
    buf = bytearray(_sample())
    buf[-1] ^= 0xFF
    with pytest.raises(RecordDecodeError, match="CRC"):
        decode_batch(bytes(buf))
    bad = bytearray(_sample())
    bad[16] = 7
    with pytest.raises(RecordDecodeError, match="magic"):
        read_batch_header(bytes(bad))
    struct.pack_into(">i", bad, 8, 3)
    with pytest.raises(RecordDecodeError, match="length"):
        list(iter_batches(bytes(bad)))


@pytest.mark.parametrize("codec", CODECS)
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_flipped_bytes_raise_only_record_decode_error(codec: str, data: st.DataObject) -> None:
    recs = [NewRecord(b"k%d" % i, b"value" * i, (("h", b"x"), ("n", None)), i) for i in range(8)]
    buf = bytearray(encode_batch(recs, base_offset=3, compression=codec))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(buf) - 1))
        buf[i] = data.draw(st.integers(0, 255))
    try:
        for _ in iter_batches(bytes(buf), verify_crc=False):
            pass
    except RecordDecodeError:
        pass


@settings(max_examples=300, deadline=None)
@given(raw=st.binary(min_size=0, max_size=200), magic=st.sampled_from([0, 1, 2]))
def test_garbage_raises_only_record_decode_error(raw: bytes, magic: int) -> None:
    buf = bytearray(struct.pack(">qi", 0, len(raw) + 9) + b"\0\0\0\0" + bytes((magic,)) + raw)
    for fn in (decode_batch, decode_legacy_entry, lambda b: list(iter_batches(b))):
        try:
            fn(bytes(buf))
        except RecordDecodeError:
            pass


@pytest.mark.parametrize("codec", [1, 2, 3, 4, 9])
def test_garbage_compressed_payload(codec: int) -> None:
    for junk in (b"", b"\x05", b"\x82SNAPPY\x00" + b"\0" * 8 + b"\x7f\xff\xff\xff", b"x" * 50):
        with pytest.raises(RecordDecodeError):
            decompress(codec, junk)


def test_record_size_and_memoryview_input() -> None:
    buf = _sample()
    assert decode_batch(memoryview(buf)).records == decode_batch(buf).records
    assert Record(0, 0, b"ab", None).size == 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
