"""Transactional offsets in the offset manager: pending per producer id, committed or dropped
only by replaying the transaction's marker, the same replay live and at load (issue 37)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from tests.broker.group.group_harness import Harness, run
from tidelog.broker.group.results import CommitPartition


def _offset(h: Harness, require_stable: bool = False) -> tuple[ErrorCode, int]:
    p = h.coord.fetch_offsets("g", [("t", [0])], require_stable).topics[0].partitions[0]
    return p.error, p.offset


async def _txn_commit(h: Harness, producer_id: int, offset: int) -> ErrorCode:
    errors = await h.coord.commit_transactional_offsets(
        group_id="g",
        producer_id=producer_id,
        producer_epoch=0,
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        partitions=[CommitPartition("t", 0, offset)],
        partition_exists=lambda _t, _p: True,
    )
    return errors[0].error


@run
async def test_pending_until_the_marker_and_again_after_a_restart() -> None:
    h = await Harness().start()
    await h.coord.commit_offsets("g", -1, "", [CommitPartition("t", 0, 1)])
    assert await _txn_commit(h, 7, 5) is ErrorCode.none
    assert _offset(h) == (ErrorCode.none, 1)
    assert _offset(h, require_stable=True) == (ErrorCode.unstable_offset_commit, -1)
    # A restart replays the transactional batch: pending again, not committed, not lost.
    h2 = await Harness(log=h.log, timer=h.timer).start()
    assert _offset(h2) == (ErrorCode.none, 1)
    assert _offset(h2, require_stable=True) == (ErrorCode.unstable_offset_commit, -1)
    partition = h2.coord.partition_for("g")
    await h2.coord.complete_transaction(partition, 7, 0, True)
    assert _offset(h2, require_stable=True) == (ErrorCode.none, 5)
    h3 = await Harness(log=h.log, timer=h.timer).start()
    assert _offset(h3, require_stable=True) == (ErrorCode.none, 5)


@run
async def test_abort_drops_and_a_later_plain_commit_wins() -> None:
    h = await Harness().start()
    partition = h.coord.partition_for("g")
    assert await _txn_commit(h, 7, 5) is ErrorCode.none
    await h.coord.complete_transaction(partition, 7, 0, False)
    assert _offset(h, require_stable=True) == (ErrorCode.none, -1)
    # A plain commit after the transactional one: the later record wins at the COMMIT marker.
    assert await _txn_commit(h, 8, 6) is ErrorCode.none
    await h.coord.commit_offsets("g", -1, "", [CommitPartition("t", 0, 9)])
    await h.coord.complete_transaction(partition, 8, 0, True)
    assert _offset(h) == (ErrorCode.none, 9)
    h2 = await Harness(log=h.log, timer=h.timer).start()
    assert _offset(h2, require_stable=True) == (ErrorCode.none, 9)
