"""Transaction APIs on the wire: Kafka's error code for every bad input, nothing stored.

Raw kio requests to a real broker (``kafka_wire.WireClient``): unknown transactional id, stale
epoch (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH for old versions), EndTxn that does not match
the state, AddPartitionsToTxn for a deleted topic, TxnOffsetCommit from a fenced producer, a
timeout above ``transaction.max.timeout.ms``, transactional data for a partition never added.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.support.kafka_wire import WireClient
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import request_types
from tidelog.storage.record_codec import encode_batch
from tidelog.storage.record_types import NewRecord

pytestmark = pytest.mark.integration

INIT, PRODUCE, ADD_PARTITIONS, ADD_OFFSETS, END_TXN, TXN_COMMIT, FIND = 22, 0, 24, 25, 26, 28, 10


def init(
    c: WireClient,
    txn_id: str,
    version: int = 4,
    timeout_ms: int = 60000,
    pid: int = -1,
    epoch: int = -1,
) -> Any:
    t = request_types(INIT, version)
    extra = {"producer_id": pid, "producer_epoch": epoch} if version >= 3 else {}
    return c.request(
        t.InitProducerIdRequest(
            transactional_id=txn_id, transaction_timeout=timedelta(milliseconds=timeout_ms), **extra
        )
    )


def add_partitions(
    c: WireClient,
    txn_id: str,
    pid: int,
    epoch: int,
    topic: str,
    partitions: tuple[int, ...] = (0,),
    version: int = 3,
) -> dict[int, ErrorCode]:
    t = request_types(ADD_PARTITIONS, version)
    response = c.request(
        t.AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=txn_id,
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=(t.AddPartitionsToTxnTopic(name=topic, partitions=partitions),),
        )
    )
    return {
        int(p.partition_index): p.partition_error_code
        for r in response.results_by_topic_v3_and_below
        for p in r.results_by_partition
    }


def end_txn(
    c: WireClient, txn_id: str, pid: int, epoch: int, commit: bool, version: int = 3
) -> ErrorCode:
    t = request_types(END_TXN, version)
    return c.request(  # type: ignore[no-any-return]
        t.EndTxnRequest(
            transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, committed=commit
        )
    ).error_code


def txn_commit(c: WireClient, txn_id: str, pid: int, epoch: int, version: int = 3) -> ErrorCode:
    t = request_types(TXN_COMMIT, version)
    response = c.request(
        t.TxnOffsetCommitRequest(
            transactional_id=txn_id,
            group_id="g",
            producer_id=pid,
            producer_epoch=epoch,
            generation_id=-1,
            member_id="",
            group_instance_id=None,
            topics=(
                t.TxnOffsetCommitRequestTopic(
                    name="w",
                    partitions=(
                        t.TxnOffsetCommitRequestPartition(
                            partition_index=0,
                            committed_offset=1,
                            committed_leader_epoch=-1,
                            committed_metadata="",
                        ),
                    ),
                ),
            ),
        )
    )
    return response.topics[0].partitions[0].error_code  # type: ignore[no-any-return]


def produce_txn(c: WireClient, topic: str, pid: int, epoch: int, seq: int) -> ErrorCode:
    t = request_types(PRODUCE, 9)
    batch = encode_batch(
        [NewRecord(value=b"x")],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=True,
    )
    response = c.request(
        t.ProduceRequest(
            transactional_id="tx",
            acks=-1,
            timeout=timedelta(seconds=10),
            topic_data=(
                t.TopicProduceData(
                    name=topic, partition_data=(t.PartitionProduceData(index=0, records=batch),)
                ),
            ),
        )
    )
    return response.responses[0].partition_responses[0].error_code  # type: ignore[no-any-return]


def latest(c: WireClient, topic: str) -> int:
    t = request_types(2, 2)
    partition = t.ListOffsetsPartition(partition_index=0, timestamp=-1)
    request = t.ListOffsetsRequest(
        replica_id=-1,
        isolation_level=0,
        topics=(t.ListOffsetsTopic(name=topic, partitions=(partition,)),),
    )
    return int(c.request(request).topics[0].partitions[0].offset)


def create(c: WireClient, topic: str) -> None:
    t = request_types(19, 5)
    c.request(
        t.CreateTopicsRequest(
            topics=(
                t.CreatableTopic(
                    name=topic, num_partitions=1, replication_factor=1, assignments=(), configs=()
                ),
            ),
            timeout=timedelta(seconds=10),
            validate_only=False,
        )
    )


def test_bad_inputs_get_kafka_errors(broker_factory: Any) -> None:
    broker = broker_factory({"transaction.max.timeout.ms": "60000"})
    with WireClient(broker.bootstrap) as c:
        create(c, "w")
        create(c, "gone")
        # a timeout above transaction.max.timeout.ms
        assert init(c, "tx", timeout_ms=60001).error_code == ErrorCode.invalid_transaction_timeout
        # unknown id / producer id
        assert end_txn(c, "nobody", 5, 0, True) == ErrorCode.invalid_producer_id_mapping
        granted = init(c, "tx")
        pid, epoch = int(granted.producer_id), int(granted.producer_epoch)
        assert granted.error_code == ErrorCode.none and epoch == 0
        # nothing open: EndTxn is INVALID_TXN_STATE; transactional data is refused
        assert end_txn(c, "tx", pid, epoch, True) == ErrorCode.invalid_txn_state
        assert produce_txn(c, "w", pid, epoch, 0) == ErrorCode.invalid_txn_state
        # a deleted (unknown) topic: UNKNOWN_TOPIC_OR_PARTITION, the rest not attempted
        t = request_types(20, 4)
        c.request(t.DeleteTopicsRequest(topic_names=("gone",), timeout=timedelta(seconds=10)))
        mixed = add_partitions(c, "tx", pid, epoch, "gone")
        assert mixed == {0: ErrorCode.unknown_topic_or_partition}
        assert add_partitions(c, "tx", pid, epoch, "w") == {0: ErrorCode.none}
        assert produce_txn(c, "w", pid, epoch, 0) == ErrorCode.none
        # a newer instance fences this epoch: the open transaction is aborted
        assert init(c, "tx").error_code == ErrorCode.concurrent_transactions
        again = init(c, "tx")
        while again.error_code == ErrorCode.concurrent_transactions:
            again = init(c, "tx")
        assert again.error_code == ErrorCode.none and again.producer_epoch > epoch + 1
        assert end_txn(c, "tx", pid, epoch, True) == ErrorCode.producer_fenced
        assert end_txn(c, "tx", pid, epoch, True, version=1) == ErrorCode.invalid_producer_epoch
        assert add_partitions(c, "tx", pid, epoch, "w", version=1) == {
            0: ErrorCode.invalid_producer_epoch
        }
        assert txn_commit(c, "tx", pid, epoch) == ErrorCode.producer_fenced
        assert produce_txn(c, "w", pid, epoch, 1) == ErrorCode.invalid_producer_epoch
        # KIP-360: the current producer asks again with its id and epoch: the next epoch
        current = int(again.producer_epoch)
        bumped = init(c, "tx", pid=int(again.producer_id), epoch=current)
        assert bumped.error_code == ErrorCode.none and bumped.producer_epoch == current + 1
        stale = init(c, "tx", pid=int(again.producer_id), epoch=current - 5)
        assert stale.error_code == ErrorCode.producer_fenced
        assert init(c, "tx", version=3, pid=999_999, epoch=3).error_code == (
            ErrorCode.invalid_producer_epoch
        )
        # commit after abort / abort after commit
        pid2, epoch2 = int(bumped.producer_id), int(bumped.producer_epoch)
        assert add_partitions(c, "tx", pid2, epoch2, "w") == {0: ErrorCode.none}
        # offsets without AddOffsetsToTxn: the group's partition is not in the transaction
        assert txn_commit(c, "tx", pid2, epoch2) == ErrorCode.invalid_txn_state
        assert end_txn(c, "tx", pid2, epoch2, False) == ErrorCode.none
        assert end_txn(c, "tx", pid2, epoch2, False) == ErrorCode.none  # a retry
        assert end_txn(c, "tx", pid2, epoch2, True) == ErrorCode.invalid_txn_state
        # markers for a producer that never wrote to the partition: refused, nothing stored
        t = request_types(27, 1)
        before = latest(c, "w")
        answer = c.request(
            t.WriteTxnMarkersRequest(
                markers=(
                    t.WritableTxnMarker(
                        producer_id=424242,
                        producer_epoch=0,
                        transaction_result=True,
                        topics=(t.WritableTxnMarkerTopic(name="w", partition_indexes=(0,)),),
                        coordinator_epoch=0,
                    ),
                )
            )
        )
        assert answer.markers[0].topics[0].partitions[0].error_code == ErrorCode.invalid_txn_state
        after = latest(c, "w")
        assert after == before
        # FindCoordinator for transactions, batched (v4)
        t = request_types(FIND, 4)
        found = c.request(t.FindCoordinatorRequest(key_type=1, coordinator_keys=("tx", "b")))
        assert [x.error_code for x in found.coordinators] == [ErrorCode.none, ErrorCode.none]
    assert "Traceback" not in broker.log_text()
