"""Bytes in, frames out: the framing of a connection without a socket (Kafka's NetworkReceive).

``FrameReader`` is sans-io: ``feed`` gives it the bytes a read returned, ``next_frame`` hands
out the complete frames in order. It never touches a transport, a loop or a clock, so tests
drive it with plain bytes (``tests/broker/test_network_receive.py``); ``KafkaChannel``
(``broker/kafka_channel.py``) owns one per connection and decides when to ask for the next frame
(backpressure: frames not asked for stay held, in order, until it asks again).

Frame: ``size:int32`` (big-endian, the bytes that follow) then ``size`` bytes (request header
and body). A size below 0 or above ``max_request`` is answered with ``FrameSizeError`` (the
connection closes); ``max_request`` may change between frames (it is
``sasl.server.max.receive.size`` until a SASL connection authenticates).

Copies: a frame is a read-only ``memoryview`` slice of the bytes it arrived in when it arrived
whole; bytes of a frame split over reads are joined in a buffer first. A frame of
``BIG_FRAME_BYTES`` or more that is not complete yet is gathered into one buffer of its final
size as its bytes arrive and handed out as a read-only view of that buffer: no copy of the whole
frame is ever made (one of 32 MiB would stall every other connection of the loop).

Threading: one event loop; a reader belongs to one connection.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

__all__ = ["BIG_FRAME_BYTES", "FrameReader", "FrameSizeError"]

_SIZE = struct.Struct(">i")
#: Frames at least this large are gathered in a buffer of their own size (see the module).
BIG_FRAME_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True)
class FrameSizeError:
    """A frame's size prefix outside ``0..limit``: the connection must close."""

    size: int
    limit: int


class FrameReader:
    """The frames of one connection's byte stream (see the module)."""

    __slots__ = (
        "_after",
        "_big",
        "_big_filled",
        "_buffer",
        "_end",
        "_need",
        "_pos",
        "_view",
        "max_request",
    )

    def __init__(self, max_request: int) -> None:
        #: The largest frame accepted (size prefix excluded).
        self.max_request = max_request
        #: Bytes of an incomplete frame (not a big one), and how many the frame needs in all.
        self._buffer = bytearray()
        self._need = 0
        #: A big frame being gathered (size prefix included) and how much of it has arrived.
        self._big: bytearray | None = None
        self._big_filled = 0
        #: The bytes frames are being handed out from, and the position in them.
        self._view: memoryview | None = None
        self._pos = 0
        self._end = 0
        #: What arrived after a big frame completed, taken once its frame was handed out.
        self._after: bytes | None = None

    def feed(self, data: bytes) -> None:
        """Bytes read from the connection, in order."""
        self._accept(data)

    def next_frame(self) -> memoryview | FrameSizeError | None:
        """The next complete frame (without its size prefix), a size error, or None (more
        bytes needed)."""
        if self._view is None and self._buffer and len(self._buffer) >= self._need:
            self._take_buffer()
        while self._view is not None:
            view = self._view
            pos = self._pos
            end = self._end
            if end - pos >= 4:
                (size,) = _SIZE.unpack_from(view, pos)
                if size < 0 or size > self.max_request:
                    return FrameSizeError(size, self.max_request)
                if end - pos - 4 >= size:
                    self._pos = pos + 4 + size
                    return view[pos + 4 : pos + 4 + size]
            self._hold()
        return None

    def has_frame(self) -> bool:
        """Whether ``next_frame`` may have a frame (or an error) without more bytes."""
        return self._view is not None or (bool(self._buffer) and len(self._buffer) >= self._need)

    @property
    def gathering_big(self) -> bool:
        """Whether a big frame is being gathered."""
        return self._big is not None

    def clear(self) -> None:
        """Forget every byte held (the connection is gone)."""
        self._buffer = bytearray()
        self._big = None
        self._big_filled = 0
        self._view = None
        self._after = None

    # ------------------------------------------------------------------ internals

    def _accept(self, data: bytes) -> None:
        if self._view is not None:
            self._hold()  # frames not asked for yet come first
        big = self._big
        if big is not None:
            filled = self._big_filled
            take = min(len(big) - filled, len(data))
            big[filled : filled + take] = memoryview(data)[:take]
            filled += take
            if filled < len(big):
                self._big_filled = filled
                return
            self._big = None
            self._big_filled = 0
            self._set_view(memoryview(big).toreadonly())
            rest = data[take:]
            self._after = rest if rest else None
            return
        if self._buffer:
            self._buffer += data
            if len(self._buffer) < self._need:
                return
            self._take_buffer()
            return
        if data:
            self._set_view(memoryview(data))

    def _take_buffer(self) -> None:
        data = bytes(self._buffer)
        self._buffer = bytearray()
        self._set_view(memoryview(data))

    def _set_view(self, view: memoryview) -> None:
        self._view = view
        self._pos = 0
        self._end = len(view)

    def _hold(self) -> None:
        """Keep what is left of the current bytes for later: in the buffer, or as the start of
        a big frame; then take what arrived after a big frame."""
        view = self._view
        assert view is not None
        pos = self._pos
        end = self._end
        self._view = None
        if pos < end:
            self._stash(view, pos, end)
        after = self._after
        if after is not None:
            self._after = None
            self._accept(after)

    def _stash(self, view: memoryview, pos: int, end: int) -> None:
        if end - pos >= 4:
            (size,) = _SIZE.unpack_from(view, pos)
            if BIG_FRAME_BYTES <= size <= self.max_request and end - pos < 4 + size:
                big = bytearray(4 + size)
                big[: end - pos] = view[pos:end]
                self._big = big
                self._big_filled = end - pos
                return
        self._buffer = bytearray(view[pos:end])
        if len(self._buffer) >= 4:
            (size,) = _SIZE.unpack_from(self._buffer, 0)
            self._need = 4 + size
        else:
            self._need = 4
