"""Transactional offsets across a broker restart (issue 37, defects 1 and 4), on the wire.

Defect 1: TxnOffsetCommit, then a restart (SIGTERM or SIGKILL) before EndTxn; after the
restart the offsets are pending again (OffsetFetch with ``require_stable`` answers
UNSTABLE_OFFSET_COMMIT, without it the last committed offset), and EndTxn(commit) makes the new
offset the group's committed one at once - EndTxn(abort) leaves the old one - as Kafka 4.4 does.
The next restart keeps the outcome.

Defect 4: a KIP-848 consumer-protocol member (ConsumerGroupHeartbeat member id and epoch)
commits offsets in four transactions in a row (TxnOffsetCommit with its member id and epoch as
the generation): NONE four times, committed offset 4, with a restart in the middle; another
epoch answers ILLEGAL_GENERATION and an unknown member UNKNOWN_MEMBER_ID, as Kafka 4.4 does
(tests/kafkaref/scenarios.py has the same rows against Kafka).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar

import pytest

from tests.integration.test_transactions_wire import create, end_txn, init
from tests.support.broker_process import BrokerProcess
from tests.support.kafka_wire import WireClient
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import request_types

pytestmark = pytest.mark.integration

ADD_OFFSETS, TXN_COMMIT, COMMIT, FETCH, HEARTBEAT = 25, 28, 8, 9, 68
TOPIC, GROUP = "w", "g"
T = TypeVar("T")
#: Errors a client retries on while a restarted coordinator loads.
RETRIABLE = {
    ErrorCode.coordinator_load_in_progress,
    ErrorCode.coordinator_not_available,
    ErrorCode.not_coordinator,
    ErrorCode.concurrent_transactions,
}


def retry(call: Callable[[], T], error_of: Callable[[T], ErrorCode], timeout_s: float = 20) -> T:
    """``call()`` until its error is not one a client retries (a loading coordinator)."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = call()
        if error_of(result) not in RETRIABLE or time.monotonic() > deadline:
            return result
        time.sleep(0.05)


def add_offsets(c: WireClient, txn_id: str, pid: int, epoch: int) -> ErrorCode:
    t = request_types(ADD_OFFSETS, 3)
    return c.request(  # type: ignore[no-any-return]
        t.AddOffsetsToTxnRequest(
            transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, group_id=GROUP
        )
    ).error_code


def txn_offset_commit(
    c: WireClient,
    txn_id: str,
    pid: int,
    epoch: int,
    offset: int,
    *,
    member_id: str = "",
    generation_id: int = -1,
) -> ErrorCode:
    t = request_types(TXN_COMMIT, 3)
    part = t.TxnOffsetCommitRequestPartition(
        partition_index=0, committed_offset=offset, committed_leader_epoch=-1, committed_metadata=""
    )
    response = c.request(
        t.TxnOffsetCommitRequest(
            transactional_id=txn_id,
            group_id=GROUP,
            producer_id=pid,
            producer_epoch=epoch,
            generation_id=generation_id,
            member_id=member_id,
            group_instance_id=None,
            topics=(t.TxnOffsetCommitRequestTopic(name=TOPIC, partitions=(part,)),),
        )
    )
    return response.topics[0].partitions[0].error_code  # type: ignore[no-any-return]


def offset_commit(c: WireClient, offset: int) -> ErrorCode:
    t = request_types(COMMIT, 8)
    part = t.OffsetCommitRequestPartition(
        partition_index=0, committed_offset=offset, committed_leader_epoch=-1, committed_metadata=""
    )
    response = c.request(
        t.OffsetCommitRequest(
            group_id=GROUP,
            generation_id_or_member_epoch=-1,
            member_id="",
            group_instance_id=None,
            topics=(t.OffsetCommitRequestTopic(name=TOPIC, partitions=(part,)),),
        )
    )
    return response.topics[0].partitions[0].error_code  # type: ignore[no-any-return]


def fetch(c: WireClient, require_stable: bool = False) -> tuple[ErrorCode, int]:
    """(group error or partition error, committed offset) of ``w``-0 for the group."""
    t = request_types(FETCH, 8)
    group = t.OffsetFetchRequestGroup(
        group_id=GROUP,
        topics=(t.OffsetFetchRequestTopics(name=TOPIC, partition_indexes=(0,)),),
    )
    answer = c.request(t.OffsetFetchRequest(groups=(group,), require_stable=require_stable))
    g = answer.groups[0]
    if g.error_code != ErrorCode.none:
        return g.error_code, -1
    p = g.topics[0].partitions[0]
    return p.error_code, int(p.committed_offset)


def fetch_loaded(c: WireClient, require_stable: bool = False) -> tuple[ErrorCode, int]:
    return retry(lambda: fetch(c, require_stable), lambda r: r[0])


def fetch_stable(c: WireClient) -> tuple[ErrorCode, int]:
    """A require_stable fetch retried while UNSTABLE_OFFSET_COMMIT (markers in flight), as a
    consumer does."""
    return retry(
        lambda: fetch(c, require_stable=True),
        lambda r: (
            ErrorCode.concurrent_transactions if r[0] is ErrorCode.unstable_offset_commit else r[0]
        ),
    )


def restart(broker: BrokerProcess, sig: int) -> None:
    broker.stop(sig)
    broker.start()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_pending_offsets_survive_a_restart(broker: BrokerProcess, sig: int, commit: bool) -> None:
    with WireClient(broker.bootstrap) as c:
        create(c, TOPIC)
        assert retry(lambda: offset_commit(c, 1), lambda e: e) == ErrorCode.none
        answer = retry(lambda: init(c, "tx"), lambda r: r.error_code)
        pid, epoch = int(answer.producer_id), int(answer.producer_epoch)
        assert add_offsets(c, "tx", pid, epoch) == ErrorCode.none
        assert txn_offset_commit(c, "tx", pid, epoch, 5) == ErrorCode.none
        assert fetch(c) == (ErrorCode.none, 1), "pending offsets are not committed ones"
        assert fetch(c, require_stable=True) == (ErrorCode.unstable_offset_commit, -1)
    restart(broker, sig)
    with WireClient(broker.bootstrap) as c:
        assert fetch_loaded(c) == (ErrorCode.none, 1)
        assert fetch_loaded(c, require_stable=True) == (ErrorCode.unstable_offset_commit, -1), (
            "the offsets are pending again after the restart"
        )
        error = retry(lambda: end_txn(c, "tx", pid, epoch, commit), lambda e: e)
        assert error == ErrorCode.none
        expected = 5 if commit else 1
        # As Kafka: EndTxn answers once the transaction is decided; the markers follow, and
        # their replay commits (or drops) the pending offsets - no second restart needed. A
        # require_stable fetch answers UNSTABLE_OFFSET_COMMIT until then (clients retry).
        assert fetch_stable(c) == (ErrorCode.none, expected)
        assert fetch(c) == (ErrorCode.none, expected)
    restart(broker, sig)
    with WireClient(broker.bootstrap) as c:
        assert fetch_loaded(c, require_stable=True) == (ErrorCode.none, expected)


def join_consumer_group(c: WireClient) -> tuple[str, int]:
    """A KIP-848 member joins the group: (member id, member epoch)."""
    t = request_types(HEARTBEAT, 0)

    def beat() -> Any:
        return c.request(
            t.ConsumerGroupHeartbeatRequest(
                group_id=GROUP,
                member_id="",
                member_epoch=0,
                instance_id=None,
                rack_id=None,
                rebalance_timeout=timedelta(milliseconds=30000),
                subscribed_topic_names=(TOPIC,),
                server_assignor=None,
                topic_partitions=(),
            )
        )

    answer = retry(beat, lambda r: r.error_code)
    assert answer.error_code == ErrorCode.none, answer
    return str(answer.member_id), int(answer.member_epoch)


def one_transaction(c: WireClient, member_id: str, member_epoch: int, offset: int) -> ErrorCode:
    answer = retry(lambda: init(c, "etl"), lambda r: r.error_code)
    pid, epoch = int(answer.producer_id), int(answer.producer_epoch)
    assert retry(lambda: add_offsets(c, "etl", pid, epoch), lambda e: e) == ErrorCode.none
    error = txn_offset_commit(
        c, "etl", pid, epoch, offset, member_id=member_id, generation_id=member_epoch
    )
    assert retry(lambda: end_txn(c, "etl", pid, epoch, True), lambda e: e) == ErrorCode.none
    return error


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_consumer_protocol_member_commits_in_transactions(broker: BrokerProcess, sig: int) -> None:
    broker.stop()
    broker.overrides["group.consumer.session.timeout.ms"] = "60000"
    broker.start()
    with WireClient(broker.bootstrap) as c:
        create(c, TOPIC)
        member_id, member_epoch = join_consumer_group(c)
        assert [one_transaction(c, member_id, member_epoch, n) for n in (1, 2)] == [
            ErrorCode.none
        ] * 2
        assert fetch_stable(c) == (ErrorCode.none, 2)
    restart(broker, sig)
    with WireClient(broker.bootstrap) as c:
        assert fetch_loaded(c) == (ErrorCode.none, 2)
        # The member and its epoch survive the restart (Kafka keeps them in __consumer_offsets).
        assert [one_transaction(c, member_id, member_epoch, n) for n in (3, 4)] == [
            ErrorCode.none
        ] * 2
        assert fetch_stable(c) == (ErrorCode.none, 4)
        # Kafka's ConsumerGroup.validateOffsetCommit for TxnOffsetCommit.
        # Another epoch: ILLEGAL_GENERATION (Kafka maps STALE_MEMBER_EPOCH so for TxnOffsetCommit).
        assert one_transaction(c, member_id, member_epoch + 1, 9) == ErrorCode.illegal_generation
        assert one_transaction(c, "nobody", member_epoch, 9) == ErrorCode.unknown_member_id
        assert fetch_stable(c) == (ErrorCode.none, 4)
        # One group id, one group: listed once, as a consumer group (not also as classic).
        t = request_types(16, 5)
        listed = c.request(t.ListGroupsRequest(states_filter=(), types_filter=())).groups
        assert [(g.group_id, g.group_type) for g in listed] == [(GROUP, "consumer")]
