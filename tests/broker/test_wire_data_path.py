"""Produce, Fetch, ListOffsets, CreateTopics and Metadata against a real broker, exact frames."""

from __future__ import annotations

import socket
import threading
import time
import uuid
from datetime import timedelta
from typing import Any

import pytest
from kio.schema.create_topics.v7 import request as ct7
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v4 import request as f4
from kio.schema.fetch.v16 import request as f16
from kio.schema.find_coordinator.v3 import request as fc3
from kio.schema.list_offsets.v8 import request as lo8
from kio.schema.metadata.v0 import request as md0
from kio.schema.metadata.v12 import request as md12
from kio.schema.produce.v3 import request as p3

from tests.support.fault_wire import fetch_request
from tests.support.kafka_wire import WireClient, encode_request, make_batch, produce_request


def create(
    c: WireClient,
    name: str,
    partitions: int = 1,
    configs: dict[str, str] | None = None,
    *,
    rf: int = -1,
    validate_only: bool = False,
) -> Any:
    return c.request(
        ct7.CreateTopicsRequest(
            topics=(
                ct7.CreatableTopic(
                    name=name,
                    num_partitions=partitions,
                    replication_factor=rf,
                    assignments=(),
                    configs=tuple(
                        ct7.CreatableTopicConfig(name=k, value=v)
                        for k, v in (configs or {}).items()
                    ),
                ),
            ),
            timeout=timedelta(seconds=5),
            validate_only=validate_only,
        )
    ).topics[0]


def produce(
    c: WireClient,
    topic: str,
    records: bytes | None,
    *,
    partition: int = 0,
    acks: int = -1,
    timeout_ms: int = 5000,
) -> Any:
    return (
        c.request(
            produce_request(topic, records, partition=partition, acks=acks, timeout_ms=timeout_ms)
        )
        .responses[0]
        .partition_responses[0]
    )


def fetch(c: WireClient, topic: str, offset: int, **kw: Any) -> Any:
    return c.request(fetch_request(topic, offset, **kw)).responses[0].partitions[0]


def list_offset(c: WireClient, topic: str, timestamp: int, partition: int = 0) -> Any:
    return (
        c.request(
            lo8.ListOffsetsRequest(
                replica_id=-1,
                isolation_level=0,
                topics=(
                    lo8.ListOffsetsTopic(
                        name=topic,
                        partitions=(
                            lo8.ListOffsetsPartition(
                                partition_index=partition, timestamp=timestamp
                            ),
                        ),
                    ),
                ),
            )
        )
        .topics[0]
        .partitions[0]
    )


def metadata_request(names: list[str] | None, auto: bool = True) -> Any:
    topics = (
        None
        if names is None
        else tuple(md12.MetadataRequestTopic(topic_id=None, name=n) for n in names)
    )
    return md12.MetadataRequest(
        topics=topics, allow_auto_topic_creation=auto, include_topic_authorized_operations=False
    )


def metadata(c: WireClient, names: list[str] | None, auto: bool = True) -> Any:
    return c.request(metadata_request(names, auto))


@pytest.fixture
def client(module_broker: Any) -> Any:
    with WireClient(module_broker.bootstrap) as c:
        yield c


# --------------------------------------------------------------------------- produce / fetch


def test_produce_then_fetch_returns_the_batch_bytes(client: WireClient) -> None:
    assert create(client, "pf", 2).error_code == ErrorCode.none
    batch = make_batch([b"a", b"b", b"c"], keys=[b"1", b"2", b"3"])
    first = produce(client, "pf", batch, partition=1)
    assert (first.error_code, first.base_offset, first.log_start_offset) == (ErrorCode.none, 0, 0)
    second = produce(client, "pf", batch, partition=1, acks=1)
    assert second.base_offset == 3
    part = fetch(client, "pf", 0, partition=1)
    assert part.error_code == ErrorCode.none
    assert part.high_watermark == 6 and part.last_stable_offset == 6 and part.log_start_offset == 0
    assert part.aborted_transactions == ()
    assert len(part.records) == 2 * len(batch)
    assert part.records[8 + 4 + 4 + 1 + 4 :].endswith(batch[21 + 40 :])  # body untouched
    # Fetching inside a batch returns that whole batch
    inside = fetch(client, "pf", 4, partition=1)
    assert int.from_bytes(inside.records[:8], "big") == 3
    # Exactly at the HW: an empty answer with empty (not null) records
    at_hw = fetch(client, "pf", 6, partition=1)
    assert at_hw.error_code == ErrorCode.none and at_hw.records == b""


def test_fetch_out_of_range_and_unknown(client: WireClient) -> None:
    create(client, "oor")
    produce(client, "oor", make_batch([b"x"]))
    for offset in (2, -1):
        part = fetch(client, "oor", offset)
        assert part.error_code == ErrorCode.offset_out_of_range
        # as Kafka: the offsets of an out-of-range answer are unknown
        assert (part.high_watermark, part.last_stable_offset, part.log_start_offset) == (-1, -1, -1)
    part = fetch(client, "no-such-topic", 0)
    assert part.error_code == ErrorCode.unknown_topic_or_partition and part.records == b""
    assert fetch(client, "oor", 0, partition=7).error_code == ErrorCode.unknown_topic_or_partition


def test_fetch_v16_by_topic_id(client: WireClient) -> None:
    topic_id = create(client, "byid").topic_id
    produce(client, "byid", make_batch([b"x", b"y"]))

    def request(tid: uuid.UUID) -> Any:
        return client.request(
            f16.FetchRequest(
                max_wait=timedelta(0),
                min_bytes=1,
                topics=(
                    f16.FetchTopic(
                        topic_id=tid,
                        partitions=(
                            f16.FetchPartition(
                                partition=0, fetch_offset=0, partition_max_bytes=1 << 20
                            ),
                        ),
                    ),
                ),
                forgotten_topics_data=(),
            )
        )

    answer = request(topic_id)
    assert answer.error_code == ErrorCode.none and answer.session_id == 0
    assert answer.responses[0].topic_id == topic_id
    assert answer.responses[0].partitions[0].high_watermark == 2
    unknown = request(uuid.uuid4()).responses[0].partitions[0]
    assert unknown.error_code == ErrorCode.unknown_topic_id


def test_fetch_v4_and_produce_v3(client: WireClient) -> None:
    create(client, "old")
    answer = (
        client.request(
            p3.ProduceRequest(
                transactional_id=None,
                acks=1,
                timeout=timedelta(seconds=5),
                topic_data=(
                    p3.TopicProduceData(
                        name="old",
                        partition_data=(
                            p3.PartitionProduceData(index=0, records=make_batch([b"v"])),
                        ),
                    ),
                ),
            )
        )
        .responses[0]
        .partition_responses[0]
    )
    assert answer.error_code == ErrorCode.none and answer.base_offset == 0
    fetched = (
        client.request(
            f4.FetchRequest(
                max_wait=timedelta(0),
                min_bytes=1,
                topics=(
                    f4.FetchTopic(
                        topic="old",
                        partitions=(
                            f4.FetchPartition(
                                partition=0, fetch_offset=0, partition_max_bytes=1 << 20
                            ),
                        ),
                    ),
                ),
            )
        )
        .responses[0]
        .partitions[0]
    )
    assert fetched.high_watermark == 1 and len(fetched.records) > 61


def test_unknown_fetch_session_is_refused(client: WireClient) -> None:
    create(client, "sess")
    answer = client.request(fetch_request("sess", 0, session_id=1234))
    assert answer.error_code == ErrorCode.fetch_session_id_not_found


def test_long_poll_returns_as_soon_as_data_arrives(module_broker: Any) -> None:
    with WireClient(module_broker.bootstrap) as c, WireClient(module_broker.bootstrap) as p:
        create(c, "poll")
        c.send(fetch_request("poll", 0, max_wait_ms=10_000))
        time.sleep(0.3)
        started = time.monotonic()
        produce(p, "poll", make_batch([b"wake"]))
        _, answer = c.receive()
        elapsed = time.monotonic() - started
        assert answer.responses[0].partitions[0].high_watermark == 1
        assert len(answer.responses[0].partitions[0].records) > 0
        assert elapsed < 1.0, elapsed


def test_answers_after_a_long_poll_keep_request_order(module_broker: Any) -> None:
    """A waiting fetch holds back the answers of requests pipelined behind it (Kafka answers
    in order on a connection); they all come once the poll is answered."""
    with WireClient(module_broker.bootstrap) as c, WireClient(module_broker.bootstrap) as p:
        create(c, "poll-order")
        first = c.send(fetch_request("poll-order", 0, max_wait_ms=10_000))
        second = c.send(metadata_request(["poll-order"]))
        third = c.send(fetch_request("poll-order", 0, max_wait_ms=0))
        c.sock.settimeout(0.3)
        with pytest.raises(TimeoutError):
            c.sock.recv(1, socket.MSG_PEEK)  # nothing answered while the poll waits
        c.sock.settimeout(10)
        produce(p, "poll-order", make_batch([b"go"]))
        got = [c.receive() for _ in range(3)]
        assert [cid for cid, _ in got] == [first, second, third]
        assert len(got[0][1].responses[0].partitions[0].records) > 0
        assert got[1][1].topics[0].name == "poll-order"


def test_long_poll_waits_for_min_bytes(module_broker: Any) -> None:
    with WireClient(module_broker.bootstrap) as c, WireClient(module_broker.bootstrap) as p:
        create(c, "minb")
        batch = make_batch([b"m" * 200])
        c.send(fetch_request("minb", 0, max_wait_ms=10_000, min_bytes=2 * len(batch)))
        produce(p, "minb", batch)
        c.sock.settimeout(0.3)
        with pytest.raises(TimeoutError):
            c.sock.recv(1, socket.MSG_PEEK)  # one batch is less than min_bytes
        c.sock.settimeout(10)
        produce(p, "minb", make_batch([b"m" * 200]))
        _, answer = c.receive()
        part = answer.responses[0].partitions[0]
        assert part.high_watermark == 2 and len(part.records) == 2 * len(batch)


def test_long_poll_times_out_empty(client: WireClient) -> None:
    create(client, "quiet")
    started = time.monotonic()
    part = fetch(client, "quiet", 0, max_wait_ms=300)
    assert 0.25 <= time.monotonic() - started < 3
    assert part.records == b"" and part.error_code == ErrorCode.none


def test_fetch_max_bytes_still_returns_one_whole_batch(client: WireClient) -> None:
    create(client, "big")
    batch = make_batch([b"x" * 5000])
    produce(client, "big", batch)
    produce(client, "big", batch)
    part = fetch(client, "big", 0, max_bytes=10)
    assert len(part.records) == len(batch)


def test_produce_errors(client: WireClient) -> None:
    create(client, "perr")
    assert produce(client, "nope", make_batch([b"x"])).error_code == (
        ErrorCode.unknown_topic_or_partition
    )
    bad = bytearray(make_batch([b"x"]))
    bad[-1] ^= 0xFF  # breaks the CRC
    answer = produce(client, "perr", bytes(bad))
    assert answer.error_code == ErrorCode.corrupt_message and answer.base_offset == -1
    assert produce(client, "perr", make_batch([b"x"]), acks=2).error_code == (
        ErrorCode.invalid_required_acks
    )
    assert fetch(client, "perr", 0).high_watermark == 0  # nothing was appended


def test_produce_acks_zero_sends_no_answer(client: WireClient) -> None:
    # page-cache acks: the fetch right after sees the record without waiting for an fsync
    create(client, "acks0", configs={"flush.messages": "9223372036854775807"})
    client.send(produce_request("acks0", make_batch([b"q"]), acks=0))
    # the next answer on the connection is the fetch's
    part = fetch(client, "acks0", 0)
    assert part.high_watermark == 1


def test_acks_all_waits_for_flush_with_flush_messages_1(broker_factory: Any) -> None:
    b = broker_factory({"log.flush.interval.messages": "1"})
    with WireClient(b.bootstrap) as c:
        create(c, "durable")
        answer = produce(c, "durable", make_batch([b"a", b"b"]))
        assert answer.error_code == ErrorCode.none and answer.base_offset == 0
        assert fetch(c, "durable", 0).high_watermark == 2


def test_log_append_time_is_answered(client: WireClient) -> None:
    create(client, "lat", configs={"message.timestamp.type": "LogAppendTime"})
    before = time.time()
    answer = produce(client, "lat", make_batch([b"x"], timestamp_ms=5))
    assert answer.log_append_time is not None
    assert abs(answer.log_append_time.timestamp() - before) < 10


def test_pipelined_produce_keeps_order(client: WireClient) -> None:
    create(client, "order")
    ids = [
        client.send(produce_request("order", make_batch([b"%d" % i]), acks=1)) for i in range(30)
    ]
    offsets = []
    for cid in ids:
        got, answer = client.receive()
        assert got == cid
        offsets.append(answer.responses[0].partition_responses[0].base_offset)
    assert offsets == list(range(30))


# --------------------------------------------------------------------------- list offsets


def test_list_offsets(client: WireClient) -> None:
    create(client, "lo")
    assert list_offset(client, "lo", -3).offset == -1  # empty log: nothing has a timestamp
    produce(client, "lo", make_batch([b"a", b"b", b"c"], timestamp_ms=1000))  # ts 1000..1002
    produce(client, "lo", make_batch([b"d"], timestamp_ms=500))  # offset 3, ts 500
    assert list_offset(client, "lo", -1).offset == 4
    assert list_offset(client, "lo", -2).offset == 0
    by_max = list_offset(client, "lo", -3)
    assert (by_max.offset, by_max.timestamp) == (2, 1002)
    found = list_offset(client, "lo", 1001)
    assert (found.offset, found.timestamp) == (1, 1001)
    none = list_offset(client, "lo", 5000)
    assert (none.offset, none.timestamp, none.error_code) == (-1, -1, ErrorCode.none)
    assert list_offset(client, "nope", -1).error_code == ErrorCode.unknown_topic_or_partition


# --------------------------------------------------------------------------- create topics


def test_create_topics_errors_and_answers(client: WireClient) -> None:
    ok = create(client, "ct-ok", 3, {"retention.ms": "1000"})
    assert ok.error_code == ErrorCode.none and ok.num_partitions == 3
    assert ok.replication_factor == 1 and ok.topic_id != uuid.UUID(int=0)
    configs = {c.name: c for c in ok.configs}
    assert configs["retention.ms"].value == "1000" and configs["retention.ms"].config_source == 1
    assert configs["segment.bytes"].value == "1073741824"
    assert create(client, "ct-ok").error_code == ErrorCode.topic_already_exists
    assert create(client, "ct-rf", rf=3).error_code == ErrorCode.invalid_replication_factor
    assert create(client, "ct-parts", 0).error_code == ErrorCode.invalid_partitions
    assert create(client, "bad/name").error_code == ErrorCode.invalid_topic_exception
    assert create(client, "x" * 250).error_code == ErrorCode.invalid_topic_exception
    assert create(client, "..").error_code == ErrorCode.invalid_topic_exception
    bad_config = create(client, "ct-cfg", configs={"no.such.config": "1"})
    assert bad_config.error_code == ErrorCode.invalid_config and bad_config.error_message
    bad_value = create(client, "ct-cfg", configs={"retention.ms": "soon"})
    assert bad_value.error_code == ErrorCode.invalid_config
    dry = create(client, "ct-dry", 2, validate_only=True)
    assert dry.error_code == ErrorCode.none and dry.num_partitions == 2
    assert metadata(client, ["ct-dry"], auto=False).topics[0].error_code == (
        ErrorCode.unknown_topic_or_partition
    )
    defaulted = create(client, "ct-default", -1)
    assert defaulted.error_code == ErrorCode.none and defaulted.num_partitions == 1


# --------------------------------------------------------------------------- metadata


def test_metadata(client: WireClient, module_broker: Any) -> None:
    created = create(client, "md", 2)
    answer = metadata(client, ["md", "bad name!", "md-auto"])
    assert answer.cluster_id and answer.controller_id == 1
    assert [(b.node_id, b.host, b.port) for b in answer.brokers] == [
        (1, "127.0.0.1", module_broker.port)
    ]
    md, bad, auto = answer.topics
    assert md.error_code == ErrorCode.none and md.topic_id == created.topic_id
    assert [
        (p.partition_index, p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes)
        for p in md.partitions
    ] == [(0, 1, 0, (1,), (1,)), (1, 1, 0, (1,), (1,))]
    assert bad.error_code == ErrorCode.invalid_topic_exception
    assert auto.error_code == ErrorCode.none and len(auto.partitions) == 1  # auto-created
    not_allowed = metadata(client, ["md-no-auto"], auto=False).topics[0]
    assert not_allowed.error_code == ErrorCode.unknown_topic_or_partition
    everything = {t.name: t for t in metadata(client, None).topics}
    assert {"md", "md-auto"} <= set(everything)
    assert "md-no-auto" not in everything
    if "__consumer_offsets" in everything:
        assert everything["__consumer_offsets"].is_internal
    v0_all = client.request(md0.MetadataRequest(topics=()))
    assert {t.name for t in v0_all.topics} == set(everything)


def test_auto_create_disabled(broker_factory: Any) -> None:
    b = broker_factory({"auto.create.topics.enable": "false"})
    with WireClient(b.bootstrap) as c:
        assert metadata(c, ["nope"]).topics[0].error_code == ErrorCode.unknown_topic_or_partition


def test_restart_keeps_topics_ids_and_data(broker_factory: Any) -> None:
    b = broker_factory({"num.partitions": "3"})
    with WireClient(b.bootstrap) as c:
        created = create(c, "keep", 2, {"retention.ms": "86400000"})
        produce(c, "keep", make_batch([b"1", b"2"]), partition=1)
        cluster_id = metadata(c, None).cluster_id
    b.restart()
    with WireClient(b.bootstrap) as c:
        answer = metadata(c, ["keep"], auto=False)
        assert answer.cluster_id == cluster_id
        topic = answer.topics[0]
        assert topic.topic_id == created.topic_id and len(topic.partitions) == 2
        part = fetch(c, "keep", 0, partition=1)
        assert part.high_watermark == 2 and len(part.records) > 0
    assert (b.log_dir / ".kafka_cleanshutdown").exists() is False  # removed at start-up
    b.stop()
    assert (b.log_dir / ".kafka_cleanshutdown").exists()
    assert (b.log_dir / "tidelog-topics.json").exists()


def test_concurrent_connections(module_broker: Any) -> None:
    with WireClient(module_broker.bootstrap) as c:
        create(c, "conc")
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            with WireClient(module_broker.bootstrap) as c:
                for _ in range(20):
                    assert produce(c, "conc", make_batch([b"%d" % n]), acks=1).error_code == 0
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    with WireClient(module_broker.bootstrap) as c:
        assert list_offset(c, "conc", -1).offset == 160


def test_shutdown_answers_in_flight_long_poll(broker_factory: Any) -> None:
    import signal

    b = broker_factory()
    with WireClient(b.bootstrap) as c:
        create(c, "bye")
        cid = c.send(fetch_request("bye", 0, max_wait_ms=30_000))
        time.sleep(0.3)
        started = time.monotonic()
        b.proc.send_signal(signal.SIGTERM)
        got, answer = c.receive()
        assert got == cid and answer.responses[0].partitions[0].records == b""
        assert time.monotonic() - started < 5
        assert c.is_closed()
    assert b.proc.wait(10) == 0


def test_client_that_does_not_read_is_paused_not_buffered(module_broker: Any) -> None:
    """Backpressure: 400 pipelined fetches of ~64 KiB answers from a client that reads
    nothing: the broker stops reading from it (others are served meanwhile), and every answer
    arrives, in order, once the client reads."""
    with WireClient(module_broker.bootstrap) as c:
        create(c, "flood")
        produce(c, "flood", make_batch([b"z" * 65000]))
    flooder = WireClient(module_broker.bootstrap, timeout=60)
    frames = b"".join(encode_request(fetch_request("flood", 0), cid) for cid in range(1, 401))
    for cid in range(1, 401):
        flooder._sent[cid] = (1, 12)
    sender = threading.Thread(target=flooder.send_raw, args=(frames,))
    sender.start()
    time.sleep(1.0)
    with WireClient(module_broker.bootstrap) as other:  # the broker still serves others
        started = time.monotonic()
        assert metadata(other, ["flood"], auto=False).topics[0].error_code == ErrorCode.none
        assert time.monotonic() - started < 2
    got = []
    for _ in range(400):
        cid, answer = flooder.receive()
        got.append(cid)
        assert len(answer.responses[0].partitions[0].records) > 65000
    sender.join(30)
    flooder.close()
    assert got == list(range(1, 401))


def test_acks_zero_failure_closes_the_connection(module_broker: Any) -> None:
    """Kafka closes an acks=0 producer's connection when an append fails, so it notices."""
    with WireClient(module_broker.bootstrap) as c:
        c.send(produce_request("no-such-topic-acks0", make_batch([b"x"]), acks=0))
        assert c.is_closed()


def test_clients_cannot_append_to_internal_topics(client: WireClient) -> None:
    # As in Kafka, the first group lookup creates __consumer_offsets.
    found = client.request(fc3.FindCoordinatorRequest(key="g", key_type=0))
    assert found.error_code == ErrorCode.none
    names = {t.name for t in metadata(client, None).topics}
    assert "__consumer_offsets" in names
    answer = produce(client, "__consumer_offsets", make_batch([b"x"]))
    assert answer.error_code == ErrorCode.invalid_topic_exception
