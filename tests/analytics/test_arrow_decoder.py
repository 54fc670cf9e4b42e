"""analytics.arrow.ArrowDecoder (vectorised) equals the codec's strict decoding, row for row."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidelog.analytics.arrow import ArrowDecoder, headers_array, to_arrow
from tidelog.storage.record_codec import (
    NewRecord,
    RecordColumns,
    RecordDecodeError,
    batch_records_bytes,
    decode_batch_into,
    encode_batch,
)

maybe = st.none() | st.binary(max_size=200)
headers = st.lists(st.tuples(st.text(max_size=8), maybe), max_size=3).map(tuple)
record = st.builds(NewRecord, maybe, maybe, headers, st.integers(0, 2**45))
fixed = st.builds(NewRecord, st.just(b"k"), st.binary(min_size=90, max_size=90).map(bytes),
                  st.just(()), st.integers(10**12, 10**12 + 50))  # fmt: skip
batches = st.lists(
    st.tuples(st.lists(record | fixed, min_size=1, max_size=40),
              st.sampled_from(["none", "gzip", "snappy", "lz4", "zstd"]),
              st.sampled_from([0, 1])),
    min_size=1, max_size=6,
)  # fmt: skip


def _build(spec: list[tuple[list[NewRecord], str, int]]) -> list[bytes]:
    out, base = [], 7
    for recs, codec, ts_type in spec:
        max_ts = 123 if ts_type else None
        out.append(encode_batch(recs, base_offset=base, compression=codec,
                                timestamp_type=ts_type, max_timestamp=max_ts))  # fmt: skip
        base += len(recs) + 3  # gaps between batches
    return out


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=batches, cut=st.tuples(st.integers(0, 60), st.integers(0, 400)), hdrs=st.booleans())
def test_vectorised_equals_codec(spec: list[tuple[list[NewRecord], str, int]],
                                 cut: tuple[int, int], hdrs: bool) -> None:  # fmt: skip
    start, end = cut[0], cut[0] + cut[1]
    dec = ArrowDecoder("t", 3, start, end, hdrs)
    cols = RecordColumns()
    for buf in _build(spec):
        dec.add(*batch_records_bytes(buf))
        decode_batch_into(buf, cols)
    got = dec.flush()
    want = to_arrow(cols, "t", 3, hdrs)
    keep = [i for i, o in enumerate(cols.offsets) if start <= o < end]
    assert got is not None
    assert got.to_pylist() == want.take(pa.array(keep, pa.int64())).to_pylist()
    assert got.schema == want.schema


def test_runs_of_one_size() -> None:
    recs = [NewRecord(None, b"x" * 100, (), 1000 + i) for i in range(500)]
    dec = ArrowDecoder("t", 0, 0, 10**9, False)
    buf = encode_batch(recs, base_offset=0)
    dec.add(*batch_records_bytes(buf))
    got = dec.flush()
    assert got is not None and got.num_rows == 500
    assert got.column("value").to_pylist() == [b"x" * 100] * 500
    assert got.column("offset").to_pylist() == list(range(500))
    h, region = batch_records_bytes(buf)
    found = dec._starts(region, np.frombuffer(region, np.uint8), [h], [0, len(region)])
    assert found is not None and len(found[0]) == 500 and (found[1] > found[0]).all()


@pytest.mark.parametrize("where", [5, 40, 200, -3])
def test_corrupt_records_fall_back_and_raise(where: int) -> None:
    recs = [NewRecord(b"k%d" % i, b"v" * i, (("h", b"x"),), i) for i in range(30)]
    h, region = batch_records_bytes(encode_batch(recs))
    bad = bytearray(region)
    bad[where] ^= 0x5A
    dec = ArrowDecoder("t", 0, 0, 10**9, True)
    dec.add(h, bytes(bad))
    try:
        got = dec.flush()
    except RecordDecodeError:
        return
    cols = RecordColumns()  # if it decoded, it must be what the strict codec reads too
    from tidelog.analytics.arrow import _rebuild

    decode_batch_into(_rebuild(h, bytes(bad)), cols, verify_crc=False)
    assert got is not None and got.to_pylist() == to_arrow(cols, "t", 0, True).to_pylist()


def test_a_record_without_headers_has_null_headers_as_in_sparks_connector() -> None:
    got = headers_array([(), (("k", b"v"), ("n", None)), ()]).to_pylist()
    assert got == [None, [{"key": "k", "value": b"v"}, {"key": "n", "value": None}], None]
