"""KafkaChannel (broker/kafka_channel.py): one connection's protocol state, without a socket.

Bytes and answers go in; frames, what to write, pauses and closes come out. The clock is a list
the test moves.
"""

from __future__ import annotations

import struct

from tidelog.broker.kafka_channel import MAX_IN_FLIGHT, KafkaChannel
from tidelog.broker.request_channel import Close, Throttled
from tidelog.broker.sendfile import FileAnswer


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def channel(max_request: int = 1000) -> tuple[KafkaChannel, Clock]:
    clock = Clock()
    return KafkaChannel(max_request, clock), clock


def frames(ch: KafkaChannel) -> list[bytes]:
    out = []
    while (f := ch.next_frame()) is not None:
        assert isinstance(f, memoryview)
        out.append(bytes(f))
    return out


def test_pipelined_frames_come_out_in_order_and_answers_go_out_at_once() -> None:
    ch, _ = channel()
    ch.receive_data(frame(b"a") + frame(b"b") + frame(b"c")[:3])
    assert frames(ch) == [b"a", b"b"]
    ch.receive_data(frame(b"c")[3:])
    assert frames(ch) == [b"c"]
    # Nothing owed before them: each ready answer is written at once.
    assert ch.answer(b"A") == b"A"
    assert ch.answer(None) is None  # acks=0: no answer, nothing held
    assert ch.drained


def test_answers_are_written_in_request_order_whatever_order_they_complete_in() -> None:
    ch, _ = channel()
    first = ch.pending("task-1")
    second = ch.pending("task-2")
    assert ch.answer(b"third") is None  # ready, but behind two owed answers
    assert ch.answer(None) is None  # acks=0 in the middle
    fifth = ch.pending("task-5")
    assert ch.answered(second, b"second") == []
    assert ch.in_flight == 5
    assert ch.answered(first, b"first") == [b"first", b"second", b"third"]
    assert not ch.drained
    assert ch.answered(fifth, [b"fi", b"fth"]) == [[b"fi", b"fth"]]
    assert ch.drained


def test_max_in_flight_stops_taking_frames_until_answers_catch_up() -> None:
    ch, _ = channel()
    ch.receive_data(b"".join(frame(b"%d" % i) for i in range(MAX_IN_FLIGHT + 5)))
    slots = []
    while (f := ch.next_frame()) is not None:
        assert isinstance(f, memoryview)
        slots.append(ch.pending())
    assert len(slots) == MAX_IN_FLIGHT and not ch.wants_read
    assert ch.has_frame() is False  # held, not lost
    ch.answered(slots[0], b"0")
    assert ch.wants_read
    assert frames(ch)[:1] == [b"%d" % MAX_IN_FLIGHT]


def test_a_full_write_buffer_pauses_reading_and_its_drain_resumes() -> None:
    ch, _ = channel()
    ch.receive_data(frame(b"x") + frame(b"y"))
    assert frames(ch)[:0] == []
    ch.write_paused = True
    ch.receive_data(frame(b"z"))
    assert not ch.wants_read
    assert ch.next_frame() is None
    ch.write_paused = False
    assert ch.has_frame()


def test_an_oversized_frame_closes_only_this_connection_at_once() -> None:
    bad, _ = channel(max_request=10)
    good, _ = channel(max_request=10)
    bad.pending("owed")
    bad.receive_data(frame(b"x" * 11) + frame(b"after"))
    close = bad.next_frame()
    assert isinstance(close, Close) and "socket.request.max.bytes" in close.reason
    assert bad.next_frame() is None and bad.closing  # nothing after it is taken
    good.receive_data(frame(b"ok"))
    assert frames(good) == [b"ok"]


def test_a_negative_size_closes_too() -> None:
    ch, _ = channel()
    ch.receive_data(struct.pack(">i", -1))
    assert isinstance(ch.next_frame(), Close)


def test_the_limit_before_authentication_is_named_and_lifted_after() -> None:
    ch, _ = channel(max_request=1000)
    ch.limit_frames(8)
    ch.receive_data(frame(b"x" * 9))
    close = ch.next_frame()
    assert isinstance(close, Close) and "sasl.server.max.receive.size" in close.reason
    ch2, _ = channel(max_request=1000)
    ch2.limit_frames(8)
    ch2.authenticated()
    ch2.receive_data(frame(b"x" * 9))
    assert frames(ch2) == [b"x" * 9]


def test_a_close_answer_goes_out_after_earlier_answers_and_drops_the_rest() -> None:
    """A malformed request (the router answers Close) closes after the answers before it."""
    ch, _ = channel()
    earlier = ch.pending()
    assert ch.answer(Close("malformed")) is None
    assert ch.answer(b"later") is None
    running = ch.pending("still-running")
    ch.receive_data(frame(b"more"))
    out = ch.answered(earlier, b"earlier")
    assert out[0] == b"earlier" and isinstance(out[1], Close) and len(out) == 2
    assert ch.closed and ch.next_frame() is None and ch.drained
    assert ch.answered(running, b"too late") == []  # nothing is written after the close
    assert ch.connection_lost() == []
    # A request still running when the close goes out is handed back to be cancelled.
    ch2, _ = channel()
    ch2.answer(Close("malformed"))
    ch2.pending("long-poll")
    assert ch2.connection_lost() == ["long-poll"]


def test_a_lingering_close_keeps_the_connection_open() -> None:
    ch, _ = channel()
    linger = Close("", linger_s=1.0)
    assert ch.answer(linger) is linger
    assert not ch.closed
    ch.receive_data(frame(b"next"))
    assert frames(ch) == [b"next"]


def test_a_file_answer_holds_the_answers_behind_it() -> None:
    ch, _ = channel()
    file_answer = FileAnswer(b"head", (), b"")
    assert ch.answer(file_answer) is file_answer
    assert ch.answer(b"behind") is None
    assert not ch.drained and ch.idle_for(1e9) == 0.0
    assert ch.file_sent() == [b"behind"]
    assert ch.drained


def test_throttled_mutes_until_its_time_and_the_longer_mute_wins() -> None:
    ch, clock = channel()
    throttled = Throttled(b"answer", 500)
    assert ch.answer(throttled) is throttled  # the answer goes out at once (KIP-219)
    assert ch.mute(500) == 100.5
    assert ch.mute(100) is None  # shorter than the one running
    ch.receive_data(frame(b"x"))
    assert ch.next_frame() is None and not ch.wants_read
    clock.now = 100.4
    ch.unmute()
    assert ch.muted_until == 100.5  # early timer: still muted
    clock.now = 100.5
    ch.unmute()
    assert frames(ch) == [b"x"]


def test_after_the_peers_end_of_stream_owed_answers_still_go_out() -> None:
    ch, _ = channel()
    slot = ch.pending()
    ch.receive_data(frame(b"late"))
    ch.peer_closed()
    assert ch.next_frame() is None and not ch.drained
    assert ch.answered(slot, b"owed") == [b"owed"]
    assert ch.drained and ch.closing


def test_idle_time_counts_from_the_last_byte_in_or_answer_out() -> None:
    ch, clock = channel()
    clock.now = 110.0
    ch.receive_data(frame(b"r"))
    frames(ch)
    slot = ch.pending()
    clock.now = 200.0
    assert ch.idle_for(clock.now) == 0.0  # an answer is owed
    clock.now = 205.0
    ch.answered(slot, b"a")
    clock.now = 207.0
    assert ch.idle_for(clock.now) == 2.0


def test_connection_lost_hands_back_the_running_requests() -> None:
    ch, _ = channel()
    ch.pending("task-a")
    done = ch.pending("task-b")
    ch.answered(ch.pending("task-c"), b"c")
    ch.answer(b"ready")
    ch.answered(done, b"b")
    ch.pending("task-d")
    assert ch.connection_lost() == ["task-a", "task-d"]
    assert ch.drained and ch.closed and ch.next_frame() is None
