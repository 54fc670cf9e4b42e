"""Produce v0-2 frames: parsed far enough to answer UNSUPPORTED_VERSION, never trusted."""

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidelog.protocol.errors import FrameDecodeError
from tidelog.protocol.legacy_produce import encode_unsupported_body, parse_topic_partitions


def produce_v0_frame(topics: list[tuple[str, list[int]]], version: int = 0) -> bytes:
    out = struct.pack(">hhih", 0, version, 7, 3) + b"cli" + struct.pack(">hi", 1, 1000)
    out += struct.pack(">i", len(topics))
    for name, parts in topics:
        raw = name.encode()
        out += struct.pack(">h", len(raw)) + raw + struct.pack(">i", len(parts))
        for p in parts:
            out += struct.pack(">ii", p, 4) + b"abcd"
    return out


def test_parse_and_answer_each_version() -> None:
    frame = produce_v0_frame([("t", [0, 1]), ("u", [2])])
    assert parse_topic_partitions(frame) == [("t", [0, 1]), ("u", [2])]
    v0 = encode_unsupported_body(0, [("t", [0])])
    assert v0 == struct.pack(">ih", 1, 1) + b"t" + struct.pack(">iihq", 1, 0, 35, -1)
    v1 = encode_unsupported_body(1, [("t", [0])])
    assert v1 == v0 + struct.pack(">i", 0)
    v2 = encode_unsupported_body(2, [("t", [0])])
    assert v2 == struct.pack(">ih", 1, 1) + b"t" + struct.pack(">iihqqi", 1, 0, 35, -1, -1, 0)


@given(st.binary(max_size=200))
def test_garbage_only_raises_frame_decode_error(data: bytes) -> None:
    frame = struct.pack(">hhi", 0, 0, 1) + data
    try:
        parse_topic_partitions(frame)
    except FrameDecodeError:
        pass


@given(st.integers(min_value=1, max_value=60))
def test_truncated_frames_are_refused(cut: int) -> None:
    frame = produce_v0_frame([("topic", [0, 1, 2])])
    with pytest.raises(FrameDecodeError):
        parse_topic_partitions(frame[: len(frame) - cut])


def test_huge_count_is_refused_before_allocation() -> None:
    frame = struct.pack(">hhih", 0, 0, 1, -1) + struct.pack(">hii", 1, 1000, 2**31 - 1)
    with pytest.raises(FrameDecodeError, match="impossible count"):
        parse_topic_partitions(frame)
