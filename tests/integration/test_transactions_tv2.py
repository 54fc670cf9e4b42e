"""Transaction version 2 (KIP-890 part 2) on the wire, as Kafka 4's Java client speaks it.

No Java client is installed here, so hand-built kio requests to a real broker play its part:
ApiVersions v4 finalizes ``transaction.version`` 2; InitProducerId; Produce v12 to a partition
never added by AddPartitionsToTxn; EndTxn v5 bumping the epoch (and its retry); the next
transaction with the bumped epoch; fencing of the old epoch; TxnOffsetCommit v5 without
AddOffsetsToTxn; AddPartitionsToTxn v4 ``verify_only``; and a read_committed consumer
(confluent-kafka) that sees the committed records and never the aborted ones.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest

from tests.support.kafka_wire import WireClient
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import request_types
from tidelog.storage.record_codec import encode_batch
from tidelog.storage.record_types import NewRecord

pytestmark = pytest.mark.integration

INIT, PRODUCE, LIST_OFFSETS, API_VERSIONS, CREATE = 22, 0, 2, 18, 19
ADD_PARTITIONS, END_TXN, TXN_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 24, 26, 28, 9, 10


def init(c: WireClient, txn_id: str) -> tuple[int, int]:
    t = request_types(INIT, 5)
    answer = c.request(
        t.InitProducerIdRequest(
            transactional_id=txn_id,
            transaction_timeout=timedelta(seconds=60),
            producer_id=-1,
            producer_epoch=-1,
        )
    )
    assert answer.error_code == ErrorCode.none
    return int(answer.producer_id), int(answer.producer_epoch)


def produce_v12(
    c: WireClient,
    txn_id: str,
    topic: str,
    pid: int,
    epoch: int,
    seq: int,
    values: list[bytes],
    partition: int = 0,
) -> ErrorCode:
    t = request_types(PRODUCE, 12)
    batch = encode_batch(
        [NewRecord(value=v) for v in values],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=True,
    )
    response = c.request(
        t.ProduceRequest(
            transactional_id=txn_id,
            acks=-1,
            timeout=timedelta(seconds=10),
            topic_data=(
                t.TopicProduceData(
                    name=topic,
                    partition_data=(t.PartitionProduceData(index=partition, records=batch),),
                ),
            ),
        )
    )
    return response.responses[0].partition_responses[0].error_code  # type: ignore[no-any-return]


def end_txn_v5(
    c: WireClient, txn_id: str, pid: int, epoch: int, commit: bool
) -> tuple[ErrorCode, int, int]:
    t = request_types(END_TXN, 5)
    answer = c.request(
        t.EndTxnRequest(
            transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, committed=commit
        )
    )
    return answer.error_code, int(answer.producer_id), int(answer.producer_epoch)


def txn_offset_commit_v5(c: WireClient, pid: int, epoch: int, topic: str, offset: int) -> Any:
    t = request_types(TXN_COMMIT, 5)
    committed = c.request(
        t.TxnOffsetCommitRequest(
            transactional_id="app",
            group_id="g-tv2",
            producer_id=pid,
            producer_epoch=epoch,
            generation_id=-1,
            member_id="",
            group_instance_id=None,
            topics=(
                t.TxnOffsetCommitRequestTopic(
                    name=topic,
                    partitions=(
                        t.TxnOffsetCommitRequestPartition(
                            partition_index=0,
                            committed_offset=offset,
                            committed_leader_epoch=-1,
                            committed_metadata="",
                        ),
                    ),
                ),
            ),
        )
    )
    return committed.topics[0].partitions[0].error_code


def committed_offset(c: WireClient, topic: str) -> int:
    t = request_types(OFFSET_FETCH, 7)
    fetched = c.request(
        t.OffsetFetchRequest(
            group_id="g-tv2",
            topics=(t.OffsetFetchRequestTopic(name=topic, partition_indexes=(0,)),),
            require_stable=True,
        )
    )
    return int(fetched.topics[0].partitions[0].committed_offset)


def last_stable_offset(c: WireClient, topic: str, partition: int = 0) -> int:
    t = request_types(LIST_OFFSETS, 2)
    request = t.ListOffsetsRequest(
        replica_id=-1,
        isolation_level=1,  # read_committed: the last stable offset
        topics=(
            t.ListOffsetsTopic(
                name=topic,
                partitions=(t.ListOffsetsPartition(partition_index=partition, timestamp=-1),),
            ),
        ),
    )
    return int(c.request(request).topics[0].partitions[0].offset)


def wait_lso(c: WireClient, topic: str, at_least: int, partition: int = 0) -> int:
    deadline = time.monotonic() + 10
    lso = last_stable_offset(c, topic, partition)
    while lso < at_least and time.monotonic() < deadline:
        time.sleep(0.02)
        lso = last_stable_offset(c, topic, partition)
    return lso


def create(c: WireClient, topic: str, partitions: int = 1) -> None:
    t = request_types(CREATE, 5)
    c.request(
        t.CreateTopicsRequest(
            topics=(
                t.CreatableTopic(
                    name=topic,
                    num_partitions=partitions,
                    replication_factor=1,
                    assignments=(),
                    configs=(),
                ),
            ),
            timeout=timedelta(seconds=10),
            validate_only=False,
        )
    )


def read_committed(bootstrap: str, topic: str, partitions: int, expected: int) -> list[bytes]:
    """Every value a read_committed consumer (confluent-kafka) sees, after ``expected``
    values or the end of every partition."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{topic}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    ended: set[int] = set()
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline and (len(values) < expected or len(ended) < partitions):
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error():
                ended.add(message.partition())
                continue
            values.append(message.value())
    finally:
        consumer.close()
    return values


def test_api_versions_v4_finalizes_transaction_version_2(broker: Any) -> None:
    with WireClient(broker.bootstrap) as c:
        v4 = c.request(request_types(API_VERSIONS, 4).ApiVersionsRequest(
            client_software_name="t", client_software_version="1"
        ))  # fmt: skip
        supported = {f.name: (f.min_version, f.max_version) for f in v4.supported_features}
        finalized = {
            f.name: (f.min_version_level, f.max_version_level) for f in v4.finalized_features
        }
        assert supported["transaction.version"] == (0, 2)
        assert finalized["transaction.version"] == (2, 2)
        assert v4.finalized_features_epoch >= 0
        ranges = {int(k.api_key): (k.min_version, k.max_version) for k in v4.api_keys}
        assert ranges[PRODUCE][1] == 12 and ranges[END_TXN][1] == 5
        assert ranges[TXN_COMMIT][1] == 5 and ranges[ADD_PARTITIONS][1] == 5
        # v3 answers stay free of tagged fields (librdkafka 2.0.2 / kcat cannot read them)
        v3 = c.request(request_types(API_VERSIONS, 3).ApiVersionsRequest(
            client_software_name="t", client_software_version="1"
        ))  # fmt: skip
        assert v3.supported_features == () and v3.finalized_features == ()
        assert v3.finalized_features_epoch == -1


def test_transaction_version_2_flow(broker: Any) -> None:
    topic = "tv2"
    with WireClient(broker.bootstrap) as c:
        create(c, topic, partitions=2)
        pid, epoch = init(c, "app")
        # Produce v12 adds the partition itself: no AddPartitionsToTxn
        assert produce_v12(c, "app", topic, pid, epoch, 0, [b"a1", b"a2"]) == ErrorCode.none
        assert produce_v12(c, "app", topic, pid, epoch, 2, [b"a3"]) == ErrorCode.none
        assert produce_v12(c, "app", topic, pid, epoch, 0, [b"b1"], partition=1) == ErrorCode.none
        assert last_stable_offset(c, topic) == 0  # open: read_committed stays before it
        # AddPartitionsToTxn v4 verify_only: in the transaction or not, nothing written
        t = request_types(ADD_PARTITIONS, 4)
        verified = c.request(
            t.AddPartitionsToTxnRequest(
                transactions=(
                    t.AddPartitionsToTxnTransaction(
                        transactional_id="app",
                        producer_id=pid,
                        producer_epoch=epoch,
                        verify_only=True,
                        topics=(t.AddPartitionsToTxnTopic(name="tv2", partitions=(0, 1)),),
                    ),
                )
            )
        )
        assert verified.error_code == ErrorCode.none
        results = verified.results_by_transaction[0].topic_results[0].results_by_partition
        assert {int(r.partition_index): r.partition_error_code for r in results} == {
            0: ErrorCode.none,
            1: ErrorCode.none,
        }
        # EndTxn v5: the commit bumps the epoch and answers it; a retry gets the same answer
        assert end_txn_v5(c, "app", pid, epoch, True) == (ErrorCode.none, pid, epoch + 1)
        assert end_txn_v5(c, "app", pid, epoch, True) == (ErrorCode.none, pid, epoch + 1)
        assert end_txn_v5(c, "app", pid, epoch, False)[0] == ErrorCode.invalid_txn_state
        assert wait_lso(c, topic, 4) == 4  # 3 records + the COMMIT marker
        assert wait_lso(c, topic, 2, partition=1) == 2
        # the old epoch is fenced by the markers and the coordinator
        assert produce_v12(c, "app", topic, pid, epoch, 3, [b"z"]) == (
            ErrorCode.invalid_producer_epoch
        )
        # the next transaction runs on the bumped epoch, sequences from 0; then an abort
        epoch += 1
        assert produce_v12(c, "app", topic, pid, epoch, 0, [b"x1"]) == ErrorCode.none
        # TxnOffsetCommit v5 adds the group's offsets partition itself (no AddOffsetsToTxn);
        # the client finds the group coordinator first, as the Java client does
        t = request_types(FIND_COORDINATOR, 3)
        found = c.request(t.FindCoordinatorRequest(key="g-tv2", key_type=0))
        assert found.error_code == ErrorCode.none
        assert txn_offset_commit_v5(c, pid, epoch, topic, 4) == ErrorCode.none
        assert end_txn_v5(c, "app", pid, epoch, False) == (ErrorCode.none, pid, epoch + 1)
        epoch += 1
        assert wait_lso(c, topic, 6) == 6  # x1 + the ABORT marker
        # a third transaction, committed, then a newer instance fences this one
        assert committed_offset(c, topic) == -1  # the aborted offset never shows
        assert produce_v12(c, "app", topic, pid, epoch, 0, [b"c1"]) == ErrorCode.none
        assert txn_offset_commit_v5(c, pid, epoch, topic, 8) == ErrorCode.none
        assert end_txn_v5(c, "app", pid, epoch, True) == (ErrorCode.none, pid, epoch + 1)
        assert wait_lso(c, topic, 8) == 8
        deadline = time.monotonic() + 10
        while committed_offset(c, topic) != 8 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert committed_offset(c, topic) == 8
        new_pid, new_epoch = init(c, "app")
        assert (new_pid, new_epoch) == (pid, epoch + 2)
        assert produce_v12(c, "app", topic, pid, epoch + 1, 0, [b"zombie"]) == (
            ErrorCode.invalid_producer_epoch
        )
        assert end_txn_v5(c, "app", pid, epoch + 1, True)[0] == ErrorCode.producer_fenced
        # transaction version 1 still works for the same id: AddPartitionsToTxn v3 + EndTxn v3
        t = request_types(ADD_PARTITIONS, 3)
        added = c.request(
            t.AddPartitionsToTxnRequest(
                v3_and_below_transactional_id="app",
                v3_and_below_producer_id=new_pid,
                v3_and_below_producer_epoch=new_epoch,
                v3_and_below_topics=(t.AddPartitionsToTxnTopic(name=topic, partitions=(1,)),),
            )
        )
        assert added.results_by_topic_v3_and_below[0].results_by_partition[
            0
        ].partition_error_code == (ErrorCode.none)
        t = request_types(END_TXN, 3)
        ended = c.request(
            t.EndTxnRequest(
                transactional_id="app",
                producer_id=new_pid,
                producer_epoch=new_epoch,
                committed=True,
            )
        )
        assert ended.error_code == ErrorCode.none
    values = read_committed(broker.bootstrap, topic, 2, 5)
    assert sorted(values) == [b"a1", b"a2", b"a3", b"b1", b"c1"]
    assert "Traceback" not in broker.log_text()


def _produce_v12_request(
    txn_id: str, topic: str, pid: int, epoch: int, seq: int, value: bytes, partition: int
) -> Any:
    t = request_types(PRODUCE, 12)
    batch = encode_batch(
        [NewRecord(value=value)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=True,
    )
    return t.ProduceRequest(
        transactional_id=txn_id,
        acks=-1,
        timeout=timedelta(seconds=10),
        topic_data=(
            t.TopicProduceData(
                name=topic,
                partition_data=(t.PartitionProduceData(index=partition, records=batch),),
            ),
        ),
    )


def test_pipelined_implicit_adds_keep_the_order(broker: Any) -> None:
    """Pipelined Produce v12 batches of one producer, the first for partitions not yet in
    the transaction: each waits for the adds before it, so sequences stay in order."""
    with WireClient(broker.bootstrap) as c:
        create(c, "pipe", partitions=3)
        pid, epoch = init(c, "piper")
        sent = []
        for seq in range(6):
            partition = seq % 3
            request = _produce_v12_request(
                "piper", "pipe", pid, epoch, seq // 3, b"v%d" % seq, partition
            )
            sent.append(c.send(request))
        answers = [c.receive() for _ in sent]
        assert [cid for cid, _ in answers] == sent
        for _, answer in answers:
            part = answer.responses[0].partition_responses[0]
            assert part.error_code == ErrorCode.none
        offsets = [int(a.responses[0].partition_responses[0].base_offset) for _, a in answers]
        assert offsets == [0, 0, 0, 1, 1, 1]
        assert end_txn_v5(c, "piper", pid, epoch, True) == (ErrorCode.none, pid, epoch + 1)
        for partition in range(3):
            assert wait_lso(c, "pipe", 3, partition) == 3
    assert "Traceback" not in broker.log_text()


def test_transaction_version_2_state_survives_a_kill(broker_factory: Any) -> None:
    """The bumped epoch and the client transaction version are in __transaction_state
    (value version 1): after SIGKILL the retry of the EndTxn is still recognised."""
    broker = broker_factory()
    with WireClient(broker.bootstrap) as c:
        create(c, "kept")
        pid, epoch = init(c, "durable")
        assert produce_v12(c, "durable", "kept", pid, epoch, 0, [b"k"]) == ErrorCode.none
        assert end_txn_v5(c, "durable", pid, epoch, True) == (ErrorCode.none, pid, epoch + 1)
        assert wait_lso(c, "kept", 2) == 2
    broker.kill()
    broker.start()
    with WireClient(broker.bootstrap) as c:
        deadline = time.monotonic() + 20
        answer = end_txn_v5(c, "durable", pid, epoch, True)
        while answer[0] == ErrorCode.coordinator_load_in_progress and time.monotonic() < deadline:
            time.sleep(0.1)
            answer = end_txn_v5(c, "durable", pid, epoch, True)
        assert answer == (ErrorCode.none, pid, epoch + 1)  # a retry, recognised after restart
        # 2, or 3 when the kill came before the CompleteCommit record was on disk: the start
        # then completed the transaction again (a second COMMIT marker, as Kafka may write)
        start = last_stable_offset(c, "kept")
        assert start in (2, 3)
        assert produce_v12(c, "durable", "kept", pid, epoch + 1, 0, [b"k2"]) == ErrorCode.none
        assert end_txn_v5(c, "durable", pid, epoch + 1, True) == (ErrorCode.none, pid, epoch + 2)
        assert wait_lso(c, "kept", start + 2) == start + 2
    assert read_committed(broker.bootstrap, "kept", 1, 2) == [b"k", b"k2"]


def test_add_partitions_v4_batched_form_and_bad_inputs(broker: Any) -> None:
    with WireClient(broker.bootstrap) as c:
        create(c, "batched", partitions=2)
        pid, epoch = init(c, "b1")
        t = request_types(ADD_PARTITIONS, 5)

        def transaction(txn_id: str, verify_only: bool, partitions: tuple[int, ...]) -> Any:
            return t.AddPartitionsToTxnTransaction(
                transactional_id=txn_id,
                producer_id=pid,
                producer_epoch=epoch,
                verify_only=verify_only,
                topics=(t.AddPartitionsToTxnTopic(name="batched", partitions=partitions),),
            )

        def codes(answer: Any) -> list[dict[int, ErrorCode]]:
            return [
                {
                    int(p.partition_index): p.partition_error_code
                    for topic in r.topic_results
                    for p in topic.results_by_partition
                }
                for r in answer.results_by_transaction
            ]

        added = c.request(
            t.AddPartitionsToTxnRequest(transactions=(transaction("b1", False, (0,)),))
        )
        assert added.error_code == ErrorCode.none
        assert codes(added) == [{0: ErrorCode.none}]
        verified = c.request(
            t.AddPartitionsToTxnRequest(transactions=(transaction("b1", True, (0, 1)),))
        )
        assert codes(verified) == [{0: ErrorCode.none, 1: ErrorCode.invalid_txn_state}]
        # the same transactional id twice in one request: INVALID_REQUEST for both
        twice = c.request(
            t.AddPartitionsToTxnRequest(
                transactions=(transaction("b1", True, (0,)), transaction("b1", True, (1,)))
            )
        )
        assert codes(twice) == [{0: ErrorCode.invalid_request}, {1: ErrorCode.invalid_request}]
        # an unknown transactional id: INVALID_PRODUCER_ID_MAPPING, for Produce v12 too
        unknown = c.request(
            t.AddPartitionsToTxnRequest(transactions=(transaction("nobody", False, (0,)),))
        )
        assert codes(unknown) == [{0: ErrorCode.invalid_producer_id_mapping}]
        assert produce_v12(c, "nobody", "batched", pid, epoch, 0, [b"n"], partition=1) == (
            ErrorCode.invalid_producer_id_mapping
        )
        # what was refused was not written: the partition is empty
        assert last_stable_offset(c, "batched", 1) == 0
        # Produce v12 to a partition that does not exist: refused, not added
        assert produce_v12(c, "b1", "batched", pid, epoch, 0, [b"m"], partition=7) == (
            ErrorCode.unknown_topic_or_partition
        )
        t65 = request_types(65, 0)
        described = c.request(t65.DescribeTransactionsRequest(transactional_ids=("b1",)))
        state = described.transaction_states[0]
        assert state.transaction_state == "Ongoing"
        assert [(x.topic, tuple(x.partitions)) for x in state.topics] == [("batched", (0,))]
        assert end_txn_v5(c, "b1", pid, epoch, False) == (ErrorCode.none, pid, epoch + 1)
    assert "Traceback" not in broker.log_text()
