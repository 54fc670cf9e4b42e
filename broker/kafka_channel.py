"""One client connection's protocol state without a socket (Kafka's ``KafkaChannel``).

``KafkaChannel`` is sans-io, in the manner of h11's ``Connection``: bytes and answers go in,
frames and what to write come out, and it never touches a transport, a loop or a task. The
asyncio ``KafkaConnection`` (``broker/server.py``) is a thin adapter around it: it feeds the bytes
a read returned, dispatches each frame the channel hands out, gives the channel the answers, writes
what the channel returns, and pauses reading when ``wants_read`` says so. Tests drive it with plain
bytes (``tests/broker/test_kafka_channel.py``).

What it decides:

- Framing: ``FrameReader`` (``broker/network_receive.py``, Kafka's NetworkReceive). A size
  outside ``0..max_request`` comes out of ``next_frame`` as a ``Close``: that connection closes
  at once (its unanswered requests are dropped), no other.
- Order: answers go out strictly in request order. ``answer(a)`` is the answer of the next
  request, ready now; ``pending(token)`` reserves the place of one answered later
  (``answered(slot, a)``). Each returns what may be written now, in order.
- Backpressure (Kafka's muting): no frame is handed out while ``MAX_IN_FLIGHT`` requests are
  unanswered, the transport's write buffer is over its mark (``write_paused``), the connection is
  muted for a client quota (KIP-219: ``Throttled``), or it is closing. Frames already read stay
  held, in order, until ``wants_read`` again.
- A ``FileAnswer`` (record data sent from the segment files) holds the answers behind it until
  ``file_sent``.
- Close: a ``Close`` answer is written after the answers before it, then nothing more. A
  ``Close`` with ``linger_s`` leaves the connection open for the adapter's timer. After the peer's
  end of stream (``peer_closed``) the owed answers are still written, then the connection closes.
- Idle: ``idle_for(now)`` counts from the last byte in or answer out, 0 while an answer is owed.

The clock is passed in (monotonic seconds).

Threading: one event loop; a channel belongs to one connection.
"""

from __future__ import annotations

import collections
from collections.abc import Callable

from tidelog.broker.network_receive import FrameReader, FrameSizeError
from tidelog.broker.request_channel import Answer, Close, Throttled
from tidelog.broker.sendfile import FileAnswer

__all__ = ("MAX_IN_FLIGHT", "KafkaChannel", "Slot")

#: Unanswered requests per connection before no further frame is taken.
MAX_IN_FLIGHT = 128

_WAITING = object()


class Slot:
    """The place of one request's answer in the connection's order. ``token``: what the adapter
    runs the request with (handed back by ``connection_lost``, to be cancelled)."""

    __slots__ = ("answer", "token")

    def __init__(self, answer: object, token: object = None) -> None:
        self.answer = answer
        self.token = token


class KafkaChannel:
    """The protocol state of one connection (see the module)."""

    __slots__ = (
        "_clock",
        "_max_request",
        "_pending",
        "closed",
        "closing",
        "last_active",
        "muted_until",
        "reader",
        "sending_file",
        "write_paused",
    )

    def __init__(self, max_request: int, clock: Callable[[], float]) -> None:
        #: Bytes in, frames out.
        self.reader = FrameReader(max_request)
        self._max_request = max_request
        self._clock = clock
        #: Answers not written yet, in request order (ready ones wait behind earlier ones).
        self._pending: collections.deque[Slot] = collections.deque()
        #: The transport's write buffer is over its high-water mark.
        self.write_paused = False
        #: A ``FileAnswer`` is being sent: the answers behind it wait.
        self.sending_file = False
        #: No more frames are taken (end of stream, a close on its way, shutdown).
        self.closing = False
        #: A ``Close`` was handed out: nothing more is written.
        self.closed = False
        #: Muted for a client quota until this time (``clock`` seconds), else None.
        self.muted_until: float | None = None
        #: Clock time of the last byte in or answer out.
        self.last_active = clock()

    # ------------------------------------------------------------------ bytes in, frames out

    def receive_data(self, data: bytes) -> None:
        """Bytes read from the connection (decrypted), in order."""
        self.last_active = self._clock()
        self.reader.feed(data)

    @property
    def wants_read(self) -> bool:
        """Whether frames may be taken (and the socket read): see the module."""
        return not (
            self.write_paused
            or self.closing
            or self.muted_until is not None
            or len(self._pending) >= MAX_IN_FLIGHT
        )

    def next_frame(self) -> memoryview | Close | None:
        """The next request frame, a ``Close`` (a size outside the limits: close now), or None
        (no complete frame, or not to be taken now: ``wants_read``)."""
        if not self.wants_read:
            return None
        frame = self.reader.next_frame()
        if frame is None or type(frame) is memoryview:
            return frame
        assert isinstance(frame, FrameSizeError)
        self.closing = True
        limit = (
            "socket.request.max.bytes"
            if frame.limit == self._max_request
            else "sasl.server.max.receive.size, before authentication"
        )
        return Close(f"request size {frame.size} is outside 0..{frame.limit} ({limit})")

    def limit_frames(self, max_request: int) -> None:
        """Frames at most ``max_request`` bytes until ``authenticated`` (a SASL listener's
        ``sasl.server.max.receive.size``)."""
        self.reader.max_request = min(self.reader.max_request, max_request)

    def authenticated(self) -> None:
        """Frames up to the listener's limit again."""
        self.reader.max_request = self._max_request

    def has_frame(self) -> bool:
        """Whether ``next_frame`` has something without more bytes (when ``wants_read``)."""
        return self.wants_read and self.reader.has_frame()

    # ------------------------------------------------------------------ answers in, writes out

    def answer(self, answer: Answer) -> Answer | None:
        """The answer of the next request, ready now: returned when it may be written now
        (nothing before it is owed), else held in order (None). ``None`` itself (no answer:
        Produce with acks=0) is never returned."""
        if self._pending or self.sending_file:
            self._pending.append(Slot(answer))
            return None
        if answer is None or self.closed:
            return None
        return self._emit(answer)

    def pending(self, token: object = None) -> Slot:
        """Reserve the place of the next request's answer, given later to ``answered``."""
        slot = Slot(_WAITING, token)
        self._pending.append(slot)
        return slot

    def answered(self, slot: Slot, answer: Answer) -> list[Answer]:
        """The answer of a reserved place; returns what may be written now, in order."""
        slot.answer = answer
        slot.token = None
        return self.writable()

    def file_sent(self) -> list[Answer]:
        """A ``FileAnswer`` is out; returns the answers that waited behind it."""
        self.sending_file = False
        self.last_active = self._clock()
        return self.writable()

    def writable(self) -> list[Answer]:
        """The answers at the head of the order that are ready (up to a ``FileAnswer`` or a
        ``Close``), removed from it."""
        out: list[Answer] = []
        pending = self._pending
        while pending and not self.sending_file and not self.closed:
            answer = pending[0].answer
            if answer is _WAITING:
                break
            pending.popleft()
            if answer is not None:
                out.append(self._emit(answer))  # type: ignore[arg-type]
        return out

    def _emit(self, answer: Answer) -> Answer:
        self.last_active = self._clock()
        inner = answer.answer if type(answer) is Throttled else answer
        if type(inner) is FileAnswer:
            self.sending_file = True
        elif type(inner) is Close and not inner.linger_s:
            # Nothing more is written; the requests still running stay listed until
            # ``connection_lost`` hands them back to be cancelled.
            self.closing = self.closed = True
        return answer

    # ------------------------------------------------------------------ the transport's news

    def mute(self, throttle_ms: int) -> float | None:
        """Muted for ``throttle_ms`` (a ``Throttled`` answer was written; the longer mute
        wins). Returns the new end of the mute, or None when an earlier mute lasts longer."""
        until = self._clock() + throttle_ms / 1000
        if self.muted_until is not None and self.muted_until >= until:
            return None
        self.muted_until = until
        return until

    def unmute(self) -> None:
        """The mute's time is over (the adapter's timer)."""
        if self.muted_until is not None and self._clock() >= self.muted_until:
            self.muted_until = None

    def peer_closed(self) -> None:
        """The client closed its side: no more frames; the owed answers still go out."""
        self.closing = True

    @property
    def drained(self) -> bool:
        """Nothing owed: no answer held or awaited, no file being sent (or a ``Close`` went
        out: nothing more will be)."""
        return self.closed or (not self._pending and not self.sending_file)

    @property
    def in_flight(self) -> int:
        """Requests whose answers are not written yet."""
        return len(self._pending)

    def idle_for(self, now: float) -> float:
        """Seconds since the last byte in or answer out; 0 while an answer is owed."""
        return 0.0 if self._pending or self.sending_file else now - self.last_active

    def connection_lost(self) -> list[object]:
        """The connection is gone: forget everything; returns the tokens of the requests
        still running (to be cancelled)."""
        tokens = [s.token for s in self._pending if s.token is not None]
        self._pending.clear()
        self.reader.clear()
        self.closing = self.closed = True
        self.sending_file = False
        self.write_paused = False
        self.muted_until = None
        return tokens
