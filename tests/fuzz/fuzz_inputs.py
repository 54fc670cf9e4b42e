"""Hypothesis strategies for hostile Kafka requests.

- ``requests(api_key, version)``: a request built by Hypothesis from kio's schema class (every
  field drawn from its type; ``records`` from ``record_sets``), encoded by kio's writer.
- ``mutated(frame)``: a valid encoding damaged: bit flips, truncation, a length or count field
  overwritten with an extreme value, bytes inserted, deleted or repeated.
- ``raw_frames``: any bytes behind any size prefix (negative, zero, huge, off by some).
- ``record_sets``: record batches, valid or damaged: bad CRC, wrong length, wrong record count,
  non-zero base offset, unknown magic or codec, compressed garbage, truncated, concatenated.
"""

from __future__ import annotations

import struct
from typing import Any

from crc32c import crc32c
from hypothesis import strategies as st
from kio.index import load_request_schema
from kio.static.primitive import Records

from tests.support.kafka_wire import encode_request, make_batch
from tidelog.protocol.codec import is_known

__all__ = (
    "SPECIAL_INT32",
    "framed",
    "mutated",
    "raw_frames",
    "record_sets",
    "register",
    "requests",
)

SPECIAL_INT32 = (-(2**31), -2, -1, 0, 1, 7, 0x7FFF, 0x8000, 0xFFFF, 2**24, 2**31 - 1)
SPECIAL_INT16 = (-(2**15), -2, -1, 0, 1, 0x7FFF)
# Varints of extreme lengths (compact arrays and strings: length + 1).
SPECIAL_VARINTS = (b"\x00", b"\x7f", b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\xff\x7f", b"\x80" * 6)


def framed(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def _fix_crc(batch: bytearray) -> None:
    if len(batch) >= 21:
        struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))


@st.composite
def valid_batches(draw: st.DrawFn) -> bytes:
    count = draw(st.integers(1, 5))
    values = [draw(st.binary(max_size=40)) for _ in range(count)]
    keys = [draw(st.one_of(st.none(), st.binary(max_size=10))) for _ in range(count)]
    compression = draw(st.sampled_from((0, 0, 1, 2, 3, 4)))
    return make_batch(values, keys=keys, compression=compression)


@st.composite
def bad_batches(draw: st.DrawFn) -> bytes:
    batch = bytearray(draw(valid_batches()))
    kind = draw(
        st.sampled_from(
            (
                "crc",
                "length",
                "count",
                "base_offset",
                "magic",
                "attributes",
                "codec_garbage",
                "last_delta",
                "producer",
                "records_garbage",
                "truncate",
                "trailing",
            )
        )
    )
    fix = draw(st.booleans())  # a right CRC gets the damage past the CRC check
    if kind == "crc":
        batch[17] ^= 0xFF
        fix = False
    elif kind == "length":
        struct.pack_into(">i", batch, 8, draw(st.sampled_from((*SPECIAL_INT32, len(batch) - 11))))
    elif kind == "count":
        struct.pack_into(">i", batch, 57, draw(st.sampled_from(SPECIAL_INT32)))
    elif kind == "base_offset":
        struct.pack_into(">q", batch, 0, draw(st.integers(-(2**63), 2**63 - 1)))
    elif kind == "magic":
        batch[16] = draw(st.sampled_from((0, 1, 3, 255)))
    elif kind == "attributes":
        struct.pack_into(">h", batch, 21, draw(st.integers(-(2**15), 2**15 - 1)))
    elif kind == "codec_garbage":
        batch[22] = (batch[22] & ~0x07) | draw(st.integers(1, 7))
        batch[61:] = draw(st.binary(min_size=0, max_size=80))
        struct.pack_into(">i", batch, 8, len(batch) - 12)
    elif kind == "last_delta":
        struct.pack_into(">i", batch, 23, draw(st.sampled_from(SPECIAL_INT32)))
    elif kind == "producer":
        struct.pack_into(
            ">qhi",
            batch,
            43,
            draw(st.integers(-2, 2**40)),
            draw(st.integers(-2, 5)),
            draw(st.sampled_from(SPECIAL_INT32)),
        )
    elif kind == "records_garbage":
        if len(batch) > 61:
            start = draw(st.integers(61, len(batch) - 1))
            batch[start:] = draw(
                st.binary(min_size=len(batch) - start, max_size=len(batch) - start)
            )
    elif kind == "truncate":
        del batch[draw(st.integers(0, len(batch) - 1)) :]
        fix = False
    elif kind == "trailing":
        batch += draw(st.binary(min_size=1, max_size=30))
        fix = False
    if fix:
        _fix_crc(batch)
    return bytes(batch)


def record_sets() -> st.SearchStrategy[bytes | None]:
    one = st.one_of(valid_batches(), bad_batches())
    return st.one_of(
        st.none(),
        st.just(b""),
        st.binary(max_size=120),
        one,
        st.lists(one, min_size=2, max_size=4).map(b"".join),
    )


def register() -> None:
    """Teach Hypothesis how to build kio's ``Records`` fields."""
    st.register_type_strategy(
        Records, record_sets().map(lambda b: None if b is None else Records(b))
    )


@st.composite
def _old_produce_body(draw: st.DrawFn) -> bytes:
    """A Produce v0-2 body (no kio schema): acks, timeout, [topic, [partition, records]]."""
    body = struct.pack(">hi", draw(st.sampled_from((-1, 0, 1, 2))), draw(st.integers(0, 5000)))
    topics = draw(st.lists(st.text(max_size=20), max_size=3))
    body += struct.pack(">i", len(topics))
    for name in topics:
        encoded = name.encode("utf-8", "replace")
        body += struct.pack(">h", len(encoded)) + encoded
        parts = draw(st.lists(st.integers(-2, 3), max_size=3))
        body += struct.pack(">i", len(parts))
        for index in parts:
            records = draw(record_sets()) or b""
            body += struct.pack(">ii", index, len(records)) + records
    return body


@st.composite
def requests(draw: st.DrawFn, api_key: int, version: int) -> bytes:
    """One framed request of that API version, every field drawn by Hypothesis.

    Versions kio has no schema for (Produce v0-2, advertised and refused as Kafka 4 does) get
    a body built here.
    """
    if not is_known(api_key, version):
        correlation = draw(st.integers(-(2**31), 2**31 - 1))
        header = struct.pack(">hhih", api_key, version, correlation, 4) + b"fuzz"
        body = draw(_old_produce_body()) if api_key == 0 else draw(st.binary(max_size=100))
        return framed(header + body)
    request: Any = draw(st.from_type(load_request_schema(api_key, version)))
    try:
        return encode_request(
            request,
            draw(st.integers(-(2**31), 2**31 - 1)),
            draw(st.one_of(st.none(), st.text(max_size=20))),
        )
    except (UnicodeEncodeError, ValueError, OverflowError, struct.error):
        # kio refuses some drawn values (lone surrogates...): send them as damaged bytes
        return framed(struct.pack(">hhi", api_key, version, 0) + b"\xff\xff")


@st.composite
def mutated(draw: st.DrawFn, frame: bytes) -> tuple[bytes, bool]:
    """``(bytes, framed)``: the frame damaged one of several ways; ``framed`` when the size
    prefix still matches."""
    body = bytearray(frame[4:])
    kind = draw(
        st.sampled_from(
            ("flip", "truncate", "int32", "int16", "varint", "insert", "delete", "repeat", "prefix")
        )
    )
    if not body:
        kind = "insert"
    if kind == "flip":
        for _ in range(draw(st.integers(1, 8))):
            position = draw(st.integers(0, len(body) - 1))
            body[position] ^= 1 << draw(st.integers(0, 7))
    elif kind == "truncate":
        del body[draw(st.integers(0, len(body) - 1)) :]
    elif kind in ("int32", "int16", "varint"):
        position = draw(st.integers(min(8, len(body) - 1), len(body) - 1))
        if kind == "int32":
            value = struct.pack(">i", draw(st.sampled_from(SPECIAL_INT32)))
        elif kind == "int16":
            value = struct.pack(">h", draw(st.sampled_from(SPECIAL_INT16)))
        else:
            value = draw(st.sampled_from(SPECIAL_VARINTS))
        body[position : position + len(value)] = value
    elif kind == "insert":
        position = draw(st.integers(0, len(body)))
        body[position:position] = draw(st.binary(min_size=1, max_size=64))
    elif kind == "delete":
        start = draw(st.integers(0, len(body) - 1))
        del body[start : start + draw(st.integers(1, 16))]
    elif kind == "repeat":
        start = draw(st.integers(0, len(body) - 1))
        body[start:start] = body[start : start + draw(st.integers(1, 64))] * draw(
            st.integers(1, 50)
        )
    else:  # the size prefix lies
        prefix = draw(st.sampled_from((*SPECIAL_INT32, len(body) + 1, len(body) - 1)))
        return struct.pack(">i", prefix) + bytes(body), prefix == len(body)
    return framed(bytes(body)), True


@st.composite
def raw_frames(draw: st.DrawFn) -> bytes:
    body = draw(st.binary(max_size=300))
    prefix = draw(
        st.one_of(
            st.just(len(body)),
            st.sampled_from((*SPECIAL_INT32, 104857600, 104857601)),
            st.integers(-(2**31), 2**31 - 1),
        )
    )
    return struct.pack(">i", prefix) + body
