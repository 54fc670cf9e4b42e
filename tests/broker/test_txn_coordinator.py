"""The transaction coordinator's state machine and ``__transaction_state`` records, in process.

The coordinator gets a record store that keeps what it writes (replayed into a second
coordinator to check durability) and a marker writer that records the markers; the clock is
moved by hand. The record bytes are checked against Kafka's layout byte for byte.
"""

from __future__ import annotations

import asyncio
import functools
import struct
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from tidelog.broker.txn.coordinator import TransactionCoordinator
from tidelog.broker.txn.metadata import TransactionMetadata, TxnState
from tidelog.broker.txn.state_manager import TxnConfig
from tidelog.protocol.internal_topics.transaction_state import (
    TxnLogValue,
    TxnSchemaError,
    decode_txn_key,
    decode_txn_value,
    encode_txn_key,
    encode_txn_value,
)


def test_key_and_value_bytes_are_kafkas() -> None:
    assert encode_txn_key("tx") == b"\x00\x00" + b"\x00\x02tx"
    assert decode_txn_key(encode_txn_key("tx")) == "tx"
    assert decode_txn_key(b"\x00\x01\x00\x00") is None  # another record type
    value = TxnLogValue(7, 3, 60000, 1, {"t": [1, 0]}, 1000, 900)
    expected = (
        struct.pack(">hqhib", 0, 7, 3, 60000, 1)
        + struct.pack(">i", 1)
        + b"\x00\x01t"
        + struct.pack(">iii", 2, 0, 1)
        + struct.pack(">qq", 1000, 900)
    )
    assert encode_txn_value(value) == expected
    assert decode_txn_value(expected) == TxnLogValue(7, 3, 60000, 1, {"t": [0, 1]}, 1000, 900)
    empty = encode_txn_value(TxnLogValue(7, 3, 60000, 0, None, 1, -1))
    assert empty[17:21] == b"\xff\xff\xff\xff"  # Empty: a null partition array
    # version 1 (flexible), as Kafka writes it once transaction.version 2 is on
    v1 = (
        struct.pack(">hqhib", 1, 7, 3, 60000, 4)
        + b"\x02"  # one topic
        + b"\x02t"  # compact string
        + b"\x02"
        + struct.pack(">i", 5)
        + b"\x00"  # topic tags
        + struct.pack(">qq", 1000, 900)
        + b"\x01"
        + b"\x00\x08"
        + struct.pack(">q", 6)  # tag 0: previous producer id
    )
    decoded = decode_txn_value(v1)
    assert decoded.partitions == {"t": [5]} and decoded.previous_producer_id == 6
    # written as version 1 for an id of transaction version 2: tags only off their defaults
    tv2 = TxnLogValue(7, 3, 60000, 4, {"t": [5]}, 1000, 900, 6, -1, 2)
    expected_v1 = (
        v1[:-11]  # v1 without its tag section
        + b"\x02"  # two tags
        + b"\x00\x08"
        + struct.pack(">q", 6)  # tag 0: previous producer id
        + b"\x02\x02"
        + struct.pack(">h", 2)  # tag 2: client transaction version
    )
    assert encode_txn_value(tv2) == expected_v1
    assert decode_txn_value(expected_v1) == tv2
    with pytest.raises(TxnSchemaError):
        decode_txn_value(expected[:-3])
    with pytest.raises(TxnSchemaError):
        decode_txn_value(struct.pack(">h", 9) + expected[2:])


def sync(fn: Callable[[], Coroutine[Any, Any, None]]) -> Callable[[], None]:
    """Run an async test in a fresh event loop."""

    @functools.wraps(fn)
    def run() -> None:
        asyncio.run(fn())

    return run


class Harness:
    def __init__(self) -> None:
        self.now = 1_000_000
        self.records: list[tuple[str, TxnLogValue | None]] = []
        self.markers: list[tuple[str, int, int, bool, frozenset[tuple[str, int]]]] = []
        self.next_id = 100
        self.hold_writes = False
        self.held: list[asyncio.Future[None]] = []
        self.aborted: list[tuple[int, int, tuple[tuple[str, int], ...]]] = []
        self.coordinator = self.make()

    def make(self) -> TransactionCoordinator:
        return TransactionCoordinator(
            TxnConfig(max_timeout_ms=60000, id_expiration_ms=10_000),
            write_record=self.write,
            write_markers=self.write_markers,
            new_producer_id=self.new_id,
            clock=lambda: self.now,
            abort_markers=lambda pid, epoch, tps: self.aborted.append((pid, epoch, tuple(tps))),
        )

    def write(
        self,
        txn_id: str,
        value: TxnLogValue | None,
        *,
        lazy: bool = False,
        defer_flush: bool = False,
    ) -> Awaitable[None]:
        self.records.append((txn_id, value))
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self.hold_writes:
            self.held.append(done)  # durable when the test says so
        else:
            done.set_result(None)  # durable at once; a lazy record's may be dropped unawaited
        return done

    def write_markers(self, md: TransactionMetadata, commit: bool) -> Awaitable[None]:
        """Appends at once (as the broker's does), durable when awaited."""
        self.markers.append(
            (md.transactional_id, md.producer_id, md.producer_epoch, commit,
             frozenset(md.partitions))
        )  # fmt: skip

        async def durable() -> None:
            return None

        return durable()

    async def new_id(self) -> int:
        self.next_id += 1
        return self.next_id


@sync
async def test_lifecycle_and_replay() -> None:
    h = Harness()
    c = h.coordinator
    assert (await c.init_producer_id("tx", 1000, -1, -1))[
        0
    ] is ErrorCode.coordinator_load_in_progress
    c.activate()
    assert (await c.init_producer_id("tx", 60001, -1, -1))[
        0
    ] is ErrorCode.invalid_transaction_timeout
    error, pid, epoch = await c.init_producer_id("tx", 1000, -1, -1)
    assert (error, pid, epoch) == (ErrorCode.none, 101, 0)
    assert await c.add_partitions("tx", pid, epoch, [("t", 0), ("t", 1)]) is ErrorCode.none
    assert c.transactions["tx"].state is TxnState.ONGOING
    assert c.partition_in_transaction(pid, epoch, "t", 1)
    assert (await c.end_txn("tx", pid, epoch, True))[0] is ErrorCode.none
    # the markers are appended before EndTxn's answer; Complete once they are durable
    assert h.markers[-1] == ("tx", pid, epoch, True, frozenset({("t", 0), ("t", 1)}))
    await c.markers.settled("tx")
    assert c.transactions["tx"].state is TxnState.COMPLETE_COMMIT
    states = [v.state_id for _, v in h.records if v is not None]
    assert states == [0, 1, 2, 4]  # Empty, Ongoing, PrepareCommit, CompleteCommit
    assert (await c.end_txn("tx", pid, epoch, True))[0] is ErrorCode.none  # a retry
    assert (await c.end_txn("tx", pid, epoch, False))[0] is ErrorCode.invalid_txn_state
    assert (await c.end_txn("tx", pid, epoch + 1, True))[0] is ErrorCode.producer_fenced
    assert (await c.end_txn("tx", pid + 5, epoch, True))[0] is ErrorCode.invalid_producer_id_mapping

    # replay into a fresh coordinator: same state
    again = h.make()
    again.load(h.records)
    again.activate()
    md = again.transactions["tx"]
    assert (md.producer_id, md.producer_epoch, md.state) == (pid, epoch, TxnState.COMPLETE_COMMIT)


@sync
async def test_prepared_transaction_is_completed_after_restart() -> None:
    h = Harness()
    h.records.append(("tx", TxnLogValue(5, 2, 1000, 2, {"t": [0]}, 10, 5)))  # PrepareCommit
    c = h.coordinator
    c.load(h.records)
    c.activate()
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert h.markers == [("tx", 5, 2, True, frozenset({("t", 0)}))]
    assert c.transactions["tx"].state is TxnState.COMPLETE_COMMIT


@sync
async def test_fencing_timeout_and_expiration() -> None:
    h = Harness()
    c = h.coordinator
    c.activate()
    _, pid, epoch = await c.init_producer_id("tx", 1000, -1, -1)
    await c.add_partitions("tx", pid, epoch, [("t", 0)])
    # a second instance: the open transaction is aborted with a bumped epoch
    assert (await c.init_producer_id("tx", 1000, -1, -1))[0] is ErrorCode.concurrent_transactions
    for _ in range(5):
        await asyncio.sleep(0)
    assert h.markers[-1][2:4] == (epoch + 1, False)
    error, _, new_epoch = await c.init_producer_id("tx", 1000, -1, -1)
    assert error is ErrorCode.none and new_epoch == epoch + 2
    assert await c.add_partitions("tx", pid, epoch, [("t", 0)]) is ErrorCode.producer_fenced
    # KIP-360: the current producer retries a bump whose answer it lost
    assert (await c.init_producer_id("tx", 1000, pid, new_epoch))[2] == new_epoch + 1
    assert (await c.init_producer_id("tx", 1000, pid, new_epoch))[2] == new_epoch + 1
    assert (await c.init_producer_id("tx", 1000, pid + 9, 0))[0] is ErrorCode.producer_fenced

    # a transaction older than its timeout is aborted and its producer fenced
    current = c.transactions["tx"].producer_epoch
    await c.add_partitions("tx", pid, current, [("t", 1)])
    h.now += 1001
    assert c.abort_timed_out() == 1
    for _ in range(5):
        await asyncio.sleep(0)
    md = c.transactions["tx"]
    assert md.state is TxnState.COMPLETE_ABORT and md.producer_epoch == current + 1
    assert (await c.end_txn("tx", pid, current, True))[0] is ErrorCode.producer_fenced

    # idle past transactional.id.expiration.ms: a tombstone, then gone
    h.now += 10_000
    assert await c.expire_transactional_ids() == 1
    assert "tx" not in c.transactions and h.records[-1] == ("tx", None)


@sync
async def test_transaction_version_2_bumps_the_epoch_and_recognises_retries() -> None:
    h = Harness()
    c = h.coordinator
    c.activate()
    _, pid, epoch = await c.init_producer_id("tx", 1000, -1, -1)
    assert await c.add_partitions("tx", pid, epoch, [("t", 0)], client_txn_version=2) is (
        ErrorCode.none
    )
    assert await c.end_txn("tx", pid, epoch, True, client_txn_version=2) == (
        ErrorCode.none,
        pid,
        epoch + 1,
    )
    # the markers carry the bumped epoch; the records are value version 1 (TV2)
    assert h.markers[-1][1:4] == (pid, epoch + 1, True)
    assert [v.client_transaction_version for _, v in h.records if v is not None][-1] == 2
    # a retry with the epoch before the bump: the same answer; the bumped one now is fenced
    assert await c.end_txn("tx", pid, epoch, True, client_txn_version=2) == (
        ErrorCode.none,
        pid,
        epoch + 1,
    )
    assert (await c.end_txn("tx", pid, epoch, False, client_txn_version=2))[0] is (
        ErrorCode.invalid_txn_state
    )
    # the bumped epoch is the producer's now: committing again has nothing to commit
    assert (await c.end_txn("tx", pid, epoch + 1, True, client_txn_version=2))[0] is (
        ErrorCode.invalid_txn_state
    )
    assert (await c.end_txn("tx", pid, epoch + 2, True, client_txn_version=2))[0] is (
        ErrorCode.producer_fenced
    )
    assert await c.add_partitions("tx", pid, epoch, [("t", 0)], 2) is ErrorCode.producer_fenced
    # replay keeps the version and the epoch
    again = h.make()
    again.load(h.records)
    md = again.transactions["tx"]
    assert (md.producer_epoch, md.client_txn_version) == (epoch + 1, 2)

    # the epoch runs out: the answer carries a new producer id, epoch 0
    md = c.transactions["tx"]
    md.producer_epoch = 32766
    assert await c.add_partitions("tx", pid, 32766, [("t", 0)], 2) is ErrorCode.none
    error, new_pid, new_epoch = await c.end_txn("tx", pid, 32766, False, client_txn_version=2)
    assert (error, new_epoch) == (ErrorCode.none, 0) and new_pid != pid
    assert h.markers[-1][1:4] == (pid, 32767, False)  # markers: the old id, bumped epoch
    await c.markers.settled("tx")
    assert (md.producer_id, md.producer_epoch, md.previous_producer_id) == (new_pid, 0, pid)
    assert await c.end_txn("tx", pid, 32766, False, client_txn_version=2) == (
        ErrorCode.none,
        new_pid,
        0,
    )
    assert c.partition_in_transaction(new_pid, 0, "t", 0) is False
    assert await c.add_partitions("tx", new_pid, 0, [("t", 0)], 2) is ErrorCode.none
    assert c.partition_in_transaction(new_pid, 0, "t", 0)


@sync
async def test_prepared_states_follow_the_table() -> None:
    """PrepareCommit/PrepareAbort last only while the markers are written (over the wire a
    request waits for them): here the state is loaded and left prepared."""
    for state, commit in ((TxnState.PREPARE_COMMIT, True), (TxnState.PREPARE_ABORT, False)):
        h = Harness()
        c = h.coordinator
        # epoch 4 is the bumped one (transaction version 2): 3 is the producer's retry
        c.load([("tx", TxnLogValue(7, 4, 1000, int(state), {"t": [0]}, 10, 5, 7, -1, 2))])
        c.state.status = "active"  # answering, without completing the prepared transaction
        for epoch, same, other in (
            (3, ErrorCode.concurrent_transactions, ErrorCode.invalid_txn_state),
            (4, ErrorCode.producer_fenced, ErrorCode.producer_fenced),
            (2, ErrorCode.producer_fenced, ErrorCode.producer_fenced),
        ):
            assert (await c.end_txn("tx", 7, epoch, commit, 2))[0] is same, (state, epoch)
            assert (await c.end_txn("tx", 7, epoch, not commit, 2))[0] is other, (state, epoch)
        assert (await c.init_producer_id("tx", 1000, -1, -1))[0] is (
            ErrorCode.concurrent_transactions
        )
        assert await c.add_partitions("tx", 7, 4, [("t", 1)], 2) is (
            ErrorCode.concurrent_transactions
        )
        # TV1: only the current epoch; the same outcome is in progress
        assert (await c.end_txn("tx", 7, 4, commit))[0] is ErrorCode.concurrent_transactions
        assert (await c.end_txn("tx", 7, 4, not commit))[0] is ErrorCode.invalid_txn_state


@sync
async def test_exhausted_epoch_moves_init_producer_id_to_a_new_producer_id() -> None:
    h = Harness()
    c = h.coordinator
    c.load([("tx", TxnLogValue(7, 32766, 1000, 4, None, 10, 5, 7, -1, 2))])
    c.activate()
    error, pid, epoch = await c.init_producer_id("tx", 1000, 7, 32766)
    assert (error, epoch) == (ErrorCode.none, 0) and pid != 7
    md = c.transactions["tx"]
    assert (md.previous_producer_id, md.last_producer_epoch) == (7, 32766)
    # the retry of that InitProducerId (its answer lost): the old id at the exhausted epoch
    assert await c.init_producer_id("tx", 1000, 7, 32766) == (ErrorCode.none, pid, 0)
    # the server's own abort never rotates: at Short.MAX_VALUE it aborts without a bump
    c.load([("tx", TxnLogValue(9, 32767, 1000, 1, {"t": [0]}, 10, 5, 9, -1, 2))])
    assert c.transactions["tx"].state is TxnState.ONGOING
    h.now += 5000
    assert c.abort_timed_out() == 1
    await c.markers.settled("tx")
    for _ in range(5):
        await asyncio.sleep(0)
    md = c.transactions["tx"]
    assert (md.state, md.producer_id, md.producer_epoch) == (TxnState.COMPLETE_ABORT, 9, 32767)


def test_the_tables_cover_every_state_and_request() -> None:
    from tidelog.broker.txn.metadata import END_TXN, END_TXN_TV1, VALID_PREVIOUS_STATES

    live = [s for s in TxnState if s not in (TxnState.DEAD, TxnState.PREPARE_EPOCH_FENCE)]
    for table in (END_TXN, END_TXN_TV1):
        assert set(table) == {(s, commit) for s in live for commit in (True, False)}
    assert set(VALID_PREVIOUS_STATES) == set(TxnState)


@sync
async def test_early_ongoing_record_and_hanging_abort() -> None:
    """Produce v12's add (``early``): the partition may be written as soon as the Ongoing
    record is appended; EndTxn waits until it is durable. A failed Ongoing record leaves the
    records hanging: they are aborted and the producer's epoch is fenced."""
    h = Harness()
    c = h.coordinator
    c.activate()
    _, pid, epoch = await c.init_producer_id("tx", 60000, -1, -1)
    h.hold_writes = True
    assert await c.add_partitions("tx", pid, epoch, [("t", 0)], 2, early=True) is ErrorCode.none
    assert c.transactions["tx"].state is TxnState.EMPTY  # not durable yet
    assert c.partition_in_transaction(pid, epoch, "t", 0)
    assert not c.partition_in_transaction(pid, epoch, "t", 1)
    assert not c.holds_open_transaction(pid, epoch, ("t", 0))
    end = asyncio.ensure_future(c.end_txn("tx", pid, epoch, True, client_txn_version=2))
    await asyncio.sleep(0)
    assert not end.done()  # waits for the Ongoing record
    h.hold_writes = False
    h.held.pop().set_result(None)
    assert await end == (ErrorCode.none, pid, epoch + 1)
    assert c.transactions["tx"].state is TxnState.COMPLETE_COMMIT
    # The next transaction's Ongoing record fails: its records are aborted, the epoch fenced.
    epoch += 1
    h.hold_writes = True
    assert await c.add_partitions("tx", pid, epoch, [("t", 0)], 2, early=True) is ErrorCode.none
    h.hold_writes = False
    h.held.pop().set_exception(OSError("fsync failed"))
    await c.settled("tx")  # the Ongoing record's failure, then the fence
    await c.settled("tx")
    assert h.aborted == [(pid, epoch, (("t", 0),))]
    md = c.transactions["tx"]
    assert (md.state, md.producer_epoch) == (TxnState.EMPTY, epoch + 1)
    assert not c.partition_in_transaction(pid, epoch, "t", 0)


def test_holds_open_transaction_by_state() -> None:
    """Which open transactions a loaded coordinator knows (the rest hang)."""

    async def run() -> None:
        h = Harness()
        c = h.coordinator

        def value(pid: int, epoch: int, state: TxnState, tv: int) -> TxnLogValue:
            partitions = None if state is TxnState.COMPLETE_COMMIT else {"t": [0]}
            return TxnLogValue(pid, epoch, 60000, int(state), partitions, 1, 1, -1, -1, tv)

        c.load(
            [
                ("on", value(1, 5, TxnState.ONGOING, 2)),
                ("pc", value(2, 6, TxnState.PREPARE_COMMIT, 2)),
                ("p1", value(3, 4, TxnState.PREPARE_ABORT, 0)),
                ("cc", value(4, 2, TxnState.COMPLETE_COMMIT, 2)),
            ]
        )
        holds = c.holds_open_transaction
        assert holds(1, 5, ("t", 0)) and not holds(1, 4, ("t", 0)) and not holds(1, 5, ("t", 1))
        # version 2: the records of the prepared transaction have the epoch before the bump;
        # an open transaction at the bumped epoch began after its markers
        assert holds(2, 5, ("t", 0)) and not holds(2, 6, ("t", 0))
        assert holds(3, 4, ("t", 0))  # version 1: no bump
        assert not holds(4, 2, ("t", 0)) and not holds(99, 0, ("t", 0))
        assert c.is_hanging(4, 2, ("t", 0)) and c.is_hanging(2, 6, ("t", 0))
        assert not c.is_hanging(1, 5, ("t", 0))
        assert not c.is_hanging(99, 0, ("t", 0))  # unknown producer: left to an operator

    asyncio.run(run())
