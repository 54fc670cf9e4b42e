"""Property tests of the producer state: random clients over a network that retries and loses.

Each example drives a few idempotent producers against one partition: new batches, retries of
any of the last five written batches (a lost answer), sequence gaps, stale epochs, epoch bumps,
snapshots and log-start moves. Afterwards the log must hold every batch exactly once and in
sequence order, and the state rebuilt from the log (alone, or from snapshots plus the log after
them) must equal the live one.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.storage.test_producer_state import Log, header
from tidelog.storage.producer_snapshot import (
    CorruptSnapshotError,
    SnapshotEntry,
    decode_snapshot,
    encode_snapshot,
    read_snapshot,
    write_snapshot,
)
from tidelog.storage.producer_state import (
    INT32_MAX,
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
    increment_sequence,
)


@dataclass
class Client:
    producer_id: int
    epoch: int = 0
    next_sequence: int = 0
    written: list[tuple[int, int, int, tuple[int, int]]] = field(default_factory=list)
    # (epoch, base_sequence, count, (first offset, last offset)) in send order


OPS = st.lists(
    st.tuples(
        st.sampled_from(["new", "new", "new", "retry", "gap", "stale", "bump", "snap", "trim"]),
        st.integers(0, 2),  # which client
        st.integers(1, 6),  # a count, a skip, or which cached batch
    ),
    max_size=60,
)


def _run(log: Log, clients: list[Client], ops: list[tuple[str, int, int]]) -> None:
    log_start = 0
    for op, which, n in ops:
        c = clients[which]
        if op == "new":
            answer = log.append(header(c.producer_id, c.epoch, c.next_sequence, n))
            assert answer == (log.leo - n, log.leo - 1)  # freshly written at the end
            c.written.append((c.epoch, c.next_sequence, n, answer))
            c.next_sequence = increment_sequence(c.next_sequence, n)
        elif op == "retry":
            current = [w for w in c.written if w[0] == c.epoch][-5:]
            if not current:
                continue
            epoch, seq, count, answer = current[-min(n, len(current))]
            if answer[1] < log_start:
                continue  # its data was deleted: not a duplicate any more (divergence)
            leo = log.leo
            assert log.append(header(c.producer_id, epoch, seq, count)) == answer
            assert log.leo == leo
        elif op == "gap":
            if not any(w[0] == c.epoch and w[3][1] >= log_start for w in c.written):
                continue  # unknown producers may start anywhere
            leo = log.leo
            with pytest.raises(OutOfOrderSequenceError):
                log.append(header(c.producer_id, c.epoch, increment_sequence(c.next_sequence, n)))
            assert log.leo == leo
        elif op == "stale":
            entry = log.state.last_entry(c.producer_id)
            if entry is None or entry.producer_epoch < c.epoch:
                continue
            with pytest.raises(InvalidProducerEpochError):
                log.append(header(c.producer_id, c.epoch - 1, 0))
        elif op == "bump":
            c.epoch += 1
            c.next_sequence = 0
        elif op == "snap":
            log.state.take_snapshot(log.leo)
        elif op == "trim" and log.written:
            log_start = max(log_start, min(log.leo, log_start + n * 2))
            log.written = [h for h in log.written if h.last_offset >= log_start]
            log.state.on_log_start_offset_incremented(log_start)
    log.log_start = log_start  # type: ignore[attr-defined]


@settings(max_examples=150, deadline=None)
@given(ops=OPS, start_high=st.booleans())
def test_random_clients_exactly_once_and_rebuild(
    ops: list[tuple[str, int, int]], start_high: bool
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        log = Log(Path(tmp) / "t-0")
        clients = [Client(100 + i) for i in range(3)]
        if start_high:  # exercise the wrap of sequences at Int.MAX
            clients[0].next_sequence = INT32_MAX - 3
        _run(log, clients, ops)
        log_start: int = log.log_start  # type: ignore[attr-defined]

        # exactly once, in order: per producer and epoch, the logged sequences follow on
        seen: dict[tuple[int, int], int] = {}
        for h in log.written:
            key = (h.producer_id, h.producer_epoch)
            if key in seen:
                assert h.base_sequence == increment_sequence(seen[key], 1)
            seen[key] = increment_sequence(h.base_sequence, h.last_offset_delta)
        for c in clients:
            offsets = [w[3] for w in c.written]
            assert len(set(offsets)) == len(offsets)  # no batch written twice

        live = dict(log.state.producers)
        # rebuild from the log alone (snapshots moved away) equals the live state
        with tempfile.TemporaryDirectory() as other:
            bare = Log(Path(other) / "t-0")
            bare.written, bare.leo = log.written, log.leo
            state = bare.new_state()
            state.load(
                log_start_offset=log_start,
                log_end_offset=log.leo,
                scan=bare.scan,
                take_snapshot=False,
            )
            assert dict(state.producers) == live

        # rebuild from the snapshots plus the log after them: same producers, epochs and last
        # batches; the cached batches are a suffix of the live ones
        state = log.new_state()
        state.load(log_start_offset=log_start, log_end_offset=log.leo, scan=log.scan)
        assert set(state.producers) == set(live)
        for pid, entry in state.producers.items():
            assert entry.producer_epoch == live[pid].producer_epoch
            assert entry.batches == live[pid].batches[len(live[pid].batches) - len(entry.batches) :]
            assert entry.batches[-1:] == live[pid].batches[-1:]
        # and it answers every retry the live state answers
        log.state = state
        for c in clients:
            for epoch, seq, count, answer in [w for w in c.written if w[0] == c.epoch][-1:]:
                if answer[1] >= log_start:
                    assert log.append(header(c.producer_id, epoch, seq, count)) == answer


ENTRY = st.builds(
    SnapshotEntry,
    producer_id=st.integers(0, 2**63 - 1),
    epoch=st.integers(-1, 2**15 - 1),
    last_sequence=st.integers(-1, INT32_MAX),
    last_offset=st.integers(-1, 2**62),
    offset_delta=st.integers(0, INT32_MAX),
    timestamp=st.integers(-1, 2**62),
    coordinator_epoch=st.integers(-(2**31), INT32_MAX),
    current_txn_first_offset=st.integers(-1, 2**62),
)


@settings(max_examples=100, deadline=None)
@given(entries=st.lists(ENTRY, max_size=20, unique_by=lambda e: e.producer_id))
def test_snapshot_round_trip(entries: list[SnapshotEntry]) -> None:
    data = encode_snapshot(entries)
    assert len(data) == 10 + 46 * len(entries)
    assert decode_snapshot(data) == entries
    with tempfile.TemporaryDirectory() as tmp:
        path = write_snapshot(Path(tmp), 42, entries, sync=True)
        assert path.name == "00000000000000000042.snapshot"
        assert read_snapshot(path) == entries


@settings(max_examples=100, deadline=None)
@given(
    entries=st.lists(ENTRY, min_size=1, max_size=5, unique_by=lambda e: e.producer_id),
    data=st.data(),
)
def test_snapshot_damage_is_detected(entries: list[SnapshotEntry], data: st.DataObject) -> None:
    raw = bytearray(encode_snapshot(entries))
    how = data.draw(st.sampled_from(["flip", "truncate", "extend"]))
    if how == "flip":
        position = data.draw(st.integers(0, len(raw) - 1))
        raw[position] ^= 1 << data.draw(st.integers(0, 7))
    elif how == "truncate":
        del raw[data.draw(st.integers(0, len(raw) - 1)) :]
    else:
        raw += b"\x00" * data.draw(st.integers(1, 50))
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(bytes(raw))
