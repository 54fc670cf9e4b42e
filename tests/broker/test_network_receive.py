"""FrameReader (broker/network_receive.py): bytes in, frames out, without a socket."""

from __future__ import annotations

import struct

import pytest

from tidelog.broker.network_receive import BIG_FRAME_BYTES, FrameReader, FrameSizeError


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def drain(reader: FrameReader) -> list[bytes]:
    out = []
    while True:
        f = reader.next_frame()
        if f is None:
            return out
        assert not isinstance(f, FrameSizeError)
        out.append(bytes(f))


def test_whole_frames_of_one_read_are_read_only_slices() -> None:
    reader = FrameReader(1000)
    reader.feed(frame(b"one") + frame(b"") + frame(b"three"))
    first = reader.next_frame()
    assert isinstance(first, memoryview) and first.readonly and bytes(first) == b"one"
    assert drain(reader) == [b"", b"three"]
    assert not reader.has_frame()


@pytest.mark.parametrize("step", [1, 2, 3, 5, 7])
def test_frames_split_over_reads_come_out_whole_and_in_order(step: int) -> None:
    stream = b"".join(frame(bytes([i]) * i) for i in range(1, 12))
    reader = FrameReader(1000)
    got: list[bytes] = []
    for i in range(0, len(stream), step):
        reader.feed(stream[i : i + step])
        got += drain(reader)
    assert got == [bytes([i]) * i for i in range(1, 12)]


@pytest.mark.parametrize("size", [-1, 1001])
def test_a_size_outside_the_limit_is_an_error(size: int) -> None:
    reader = FrameReader(1000)
    reader.feed(frame(b"ok") + struct.pack(">i", size))
    assert drain_one(reader) == b"ok"
    assert reader.next_frame() == FrameSizeError(size, 1000)


def drain_one(reader: FrameReader) -> bytes:
    f = reader.next_frame()
    assert isinstance(f, memoryview)
    return bytes(f)


def test_the_limit_may_change_between_frames() -> None:
    reader = FrameReader(4)  # before authentication
    reader.feed(frame(b"auth") + frame(b"a bigger request"))
    assert drain_one(reader) == b"auth"
    reader.max_request = 1000  # authenticated
    assert drain_one(reader) == b"a bigger request"


def test_frames_not_asked_for_stay_held_in_order() -> None:
    """Backpressure: the connection stops asking; later reads queue behind the held frames."""
    reader = FrameReader(1000)
    reader.feed(frame(b"a") + frame(b"b") + frame(b"c")[:3])
    assert drain_one(reader) == b"a"
    assert reader.has_frame()
    reader.feed(frame(b"c")[3:] + frame(b"d"))
    assert drain(reader) == [b"b", b"c", b"d"]


def test_a_big_frame_is_gathered_into_one_buffer_and_what_follows_is_kept() -> None:
    body = bytes(range(256)) * (BIG_FRAME_BYTES // 256 + 1)
    stream = frame(b"small") + frame(body) + frame(b"after")
    reader = FrameReader(len(body) + 1)
    reader.feed(stream[:1000])
    assert drain_one(reader) == b"small"
    assert reader.next_frame() is None
    assert reader.gathering_big
    position = 1000
    while position < len(stream) - 3:
        reader.feed(stream[position : position + 65536])
        position += 65536
        if position < len(frame(b"small")) + len(frame(body)):
            assert reader.next_frame() is None
    reader.feed(stream[position:])
    big = reader.next_frame()
    assert isinstance(big, memoryview) and big.readonly and big == body
    assert drain(reader) == [b"after"]


def test_clear_forgets_everything() -> None:
    reader = FrameReader(1000)
    reader.feed(frame(b"x") + b"\x00\x00")
    reader.clear()
    assert not reader.has_frame() and reader.next_frame() is None
    reader.feed(frame(b"y"))
    assert drain(reader) == [b"y"]
