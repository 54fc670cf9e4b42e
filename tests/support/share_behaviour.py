"""Share-group behaviours that clients observe, measured the same way on any broker.

Each function runs one scenario with real clients (confluent-kafka's ``ShareConsumer``,
``AdminClient``, and raw ShareGroupHeartbeat requests) against ``bootstrap`` and returns a plain
observation; ``tests/kafkaref/test_share_differential.py`` runs them on tidelog and on Apache
Kafka 4.4 and compares the observations. Topic and group names are the caller's (distinct).
"""

from __future__ import annotations

import subprocess
import time
import uuid
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from tests.support.differential import build, plain, request_class
from tests.support.kafka_wire import WireClient, make_batch

__all__ = (
    "ack_after_topic_deleted",
    "acks_of_a_closing_consumer",
    "acquired_by_one_fetch",
    "by_duration_start",
    "first_assignment_of_members_joining_together",
    "first_fetch_shape",
    "java_share_modes",
    "set_group_configs",
)


_ADMINS: dict[str, AdminClient] = {}
_COORDINATOR_NOT_READY = (
    "not_coordinator",
    "coordinator_not_available",
    "coordinator_load_in_progress",
)


def _admin(bootstrap: str) -> AdminClient:
    """One admin client per broker, kept (a dropped client ends its pending futures)."""
    if bootstrap not in _ADMINS:
        _ADMINS[bootstrap] = AdminClient({"bootstrap.servers": bootstrap})
    return _ADMINS[bootstrap]


def _topic(bootstrap: str, name: str, partitions: int) -> None:
    _admin(bootstrap).create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    deadline = time.monotonic() + 30
    while True:
        meta = _admin(bootstrap).list_topics(name, timeout=10).topics[name]
        ready = meta.error is None and len(meta.partitions) == partitions
        if ready and all(p.leader >= 0 for p in meta.partitions.values()):
            return
        assert time.monotonic() < deadline, f"topic {name} has no leaders: {meta}"
        time.sleep(0.2)


def set_group_configs(bootstrap: str, group: str, configs: dict[str, str]) -> None:
    """IncrementalAlterConfigs (SET) of share-group configs on the GROUP resource."""
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
            for k, v in configs.items()
        ],
    )
    for future in _admin(bootstrap).incremental_alter_configs([resource]).values():
        future.result(30)


def _earliest(bootstrap: str, group: str, **more: str) -> None:
    """The group starts at the earliest record (and ``more`` group configs, ``_`` for ``.``)."""
    configs = {"share.auto.offset.reset": "earliest"}
    configs.update({k.replace("_", "."): v for k, v in more.items()})
    set_group_configs(bootstrap, group, configs)


def _produce(bootstrap: str, topic: str, partition: int, n: int) -> None:
    """``n`` records in exactly one batch (a raw Produce: a client may split them)."""
    values = [f"{partition}-{i}".encode() for i in range(n)]
    batch = make_batch(values, timestamp_ms=int(time.time() * 1000))
    fields = {
        "transactional_id": None,
        "acks": -1,
        "timeout": 30000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}],
    }
    with WireClient(bootstrap, timeout=30.0) as client:
        answer = plain(client.request(build(request_class("produce", 9), fields)))
    codes = [p["error_code"] for t in answer["responses"] for p in t["partition_responses"]]
    assert codes == ["none"], answer


def _consumer(bootstrap: str, group: str, topic: str) -> ShareConsumer:
    consumer = ShareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "share.acknowledgement.mode": "explicit",
            "log_level": 3,
        }
    )
    consumer.subscribe([topic])
    return consumer


def _accept(
    consumer: ShareConsumer, enough: int, timeout_s: float, *, must: bool = True
) -> list[Any]:
    """Poll, ACCEPT every record, until ``enough`` records came or ``timeout_s`` passed (which
    fails the scenario when ``must``); the records."""
    got: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < enough:
        if time.monotonic() >= deadline:
            assert not must, f"only {len(got)} of {enough} records"
            break
        batch = [m for m in consumer.poll(0.5) if m.error() is None]
        for m in batch:
            consumer.acknowledge(m)
        got.extend(batch)
    return got


def _first_records(consumer: ShareConsumer, timeout_s: float = 60.0) -> list[Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = [m for m in consumer.poll(0.5) if m.error() is None]
        if got:
            return got
    raise AssertionError("no records within the deadline")


def first_fetch_shape(bootstrap: str, topic: str) -> list[int]:
    """Two partitions of 50 records each; the record counts per partition of the first poll
    that returns records (sorted)."""
    _topic(bootstrap, topic, 2)
    _earliest(bootstrap, topic)
    for p in (0, 1):
        _produce(bootstrap, topic, p, 50)
    consumer = _consumer(bootstrap, topic, topic)
    try:
        got = _first_records(consumer)
        counts: dict[int, int] = {}
        for m in got:
            counts[m.partition()] = counts.get(m.partition(), 0) + 1
            consumer.acknowledge(m)
        consumer.commit_sync(30)
        return sorted(counts.values())
    finally:
        consumer.close()


def ack_after_topic_deleted(bootstrap: str, topic: str) -> list[str]:
    """Acquire records, delete their topic, then acknowledge them: the error names of
    ``commit_sync``'s result (one per partition; "NO_ERROR" for a success)."""
    _topic(bootstrap, topic, 1)
    _earliest(bootstrap, topic)
    _produce(bootstrap, topic, 0, 5)
    consumer = _consumer(bootstrap, topic, topic)
    try:
        got = _first_records(consumer)
        _admin(bootstrap).delete_topics([topic])[topic].result(30)
        deadline = time.monotonic() + 30
        while topic in _admin(bootstrap).list_topics(timeout=10).topics:
            assert time.monotonic() < deadline, "topic not deleted"
            time.sleep(0.2)
        for m in got:
            consumer.acknowledge(m)
        result = consumer.commit_sync(30)
        return sorted(_error_name(e) for e in result.values())
    finally:
        consumer.close()


def _error_name(error: Any) -> str:
    if error is None:
        return "NO_ERROR"
    if isinstance(error, KafkaException) and error.args:
        error = error.args[0]
    if isinstance(error, KafkaError):
        return str(error.name())
    return str(error)


def acks_of_a_closing_consumer(bootstrap: str, topic: str, java_classpath: str = "") -> int:
    """A consumer acknowledges (ACCEPT) what it got and closes without committing (its close
    sends the last acknowledgements and its leave heartbeat together): confluent-kafka's
    ShareConsumer, or the Java one (``ShareModes close``) with ``java_classpath``. How many of
    those records a second consumer of the group then receives within 5 s (none when the
    acknowledgements were kept)."""
    if java_classpath:
        seen = java_share_modes(java_classpath, bootstrap, topic, "close", 10, 15000)
        assert len(seen["accepted"]) == 10, seen
    else:
        _topic(bootstrap, topic, 1)
        _earliest(bootstrap, topic)
        _produce(bootstrap, topic, 0, 10)
        first = _consumer(bootstrap, topic, topic)
        _accept(first, 10, 60)
        first.close()
    second = _consumer(bootstrap, topic, topic)
    try:
        return len(_accept(second, 1 << 30, 5, must=False))
    finally:
        second.close()


def _heartbeat(client: WireClient, group: str, member: str, epoch: int, topic: str) -> Any:
    fields = {
        "group_id": group,
        "member_id": member,
        "member_epoch": epoch,
        "rack_id": None,
        "subscribed_topic_names": [topic] if epoch == 0 else None,
    }
    return plain(client.request(build(request_class("share_group_heartbeat", 1), fields)))


def first_assignment_of_members_joining_together(
    bootstrap: str, topic: str, partitions: int = 4
) -> dict[str, Any]:
    """Two members join one group back to back (ShareGroupHeartbeat epoch 0); then each
    heartbeats until the assignment is settled. Returns the partition counts each first answer
    assigned, and whether the settled assignment splits the partitions between them."""
    _topic(bootstrap, topic, partitions)
    members = [str(uuid.uuid4()), str(uuid.uuid4())]
    clients = [WireClient(bootstrap, timeout=30.0) for _ in members]
    try:
        first = []
        epochs = []
        current: list[set[int]] = []
        # as a client does first: FindCoordinator (Kafka creates __consumer_offsets on it)
        found = {"key_type": 0, "coordinator_keys": [topic]}
        clients[0].request(build(request_class("find_coordinator", 4), found))
        for client, member in zip(clients, members, strict=True):
            answer = _heartbeat(client, topic, member, 0, topic)
            deadline = time.monotonic() + 30
            # a broker that has just started may not have loaded its group coordinator yet
            while answer["error_code"] in _COORDINATOR_NOT_READY:
                assert time.monotonic() < deadline, answer
                time.sleep(0.2)
                answer = _heartbeat(client, topic, member, 0, topic)
            assert answer["error_code"] == "none", answer
            parts = _parts(answer)
            first.append(len(parts))
            epochs.append(answer["member_epoch"])
            current.append(parts)
        deadline = time.monotonic() + 30
        while True:
            for i, (client, member) in enumerate(zip(clients, members, strict=True)):
                answer = _heartbeat(client, topic, member, epochs[i], topic)
                assert answer["error_code"] == "none", answer
                epochs[i] = answer["member_epoch"]
                if answer["assignment"] is not None:
                    current[i] = _parts(answer)
            if len(current[0] | current[1]) == partitions and not current[0] & current[1]:
                break
            assert time.monotonic() < deadline, f"not settled: {current}"
            time.sleep(0.3)
        for client, member in zip(clients, members, strict=True):
            _heartbeat(client, topic, member, -1, topic)
        return {"first": first, "settled": sorted(len(c) for c in current)}
    finally:
        for client in clients:
            client.close()


def _parts(answer: dict[str, Any]) -> set[int]:
    assignment = answer["assignment"] or {"topic_partitions": []}
    return {p for t in assignment["topic_partitions"] for p in t["partitions"]}


def _share_fetch(
    client: WireClient, group: str, member: str, epoch: int, topic_id: Any, mode: int
) -> Any:
    fields = {
        "group_id": group,
        "member_id": member,
        "share_session_epoch": epoch,
        "max_wait": 2000,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "max_records": 3,
        "batch_size": 3,
        "share_acquire_mode": mode,
        "is_renew_ack": False,
        "topics": [
            {
                "topic_id": topic_id,
                "partitions": [{"partition_index": 0, "acknowledgement_batches": []}],
            }
        ],
        "forgotten_topics_data": [],
    }
    return plain(client.request(build(request_class("share_fetch", 2), fields)))


def acquired_by_one_fetch(bootstrap: str, topic: str, mode: int) -> list[int]:
    """Ten records in one batch; a member fetches with MaxRecords 3 and ShareAcquireMode
    ``mode`` (0 batch_optimized, 1 record_limit). The record counts of the acquired ranges of the
    first ShareFetch answer that acquires any."""
    _topic(bootstrap, topic, 1)
    _earliest(bootstrap, topic)
    _produce(bootstrap, topic, 0, 10)
    member = str(uuid.uuid4())
    with WireClient(bootstrap, timeout=30.0) as client:
        answer = _heartbeat(client, topic, member, 0, topic)
        epoch = answer["member_epoch"]
        deadline = time.monotonic() + 30
        while not _parts(answer):
            assert time.monotonic() < deadline, f"never assigned: {answer}"
            time.sleep(0.3)
            answer = _heartbeat(client, topic, member, epoch, topic)
            epoch = answer["member_epoch"]
        topic_id = answer["assignment"]["topic_partitions"][0]["topic_id"]
        session_epoch = 0
        while True:
            got = _share_fetch(client, topic, member, session_epoch, topic_id, mode)
            assert got["error_code"] == "none", got
            session_epoch += 1
            ranges = [
                r["last_offset"] - r["first_offset"] + 1
                for t in got["responses"]
                for p in t["partitions"]
                for r in p["acquired_records"]
            ]
            if ranges:
                _heartbeat(client, topic, member, -1, topic)
                return ranges
            assert time.monotonic() < deadline, f"nothing acquired: {got}"


def java_share_modes(
    classpath: str, bootstrap: str, topic: str, mode: str, records: int, lock_ms: int
) -> dict[str, Any]:
    """``ShareModes`` (tests/jvm/share, the Java KafkaShareConsumer 4.4) on a fresh topic of
    ``records`` records (group lock duration ``lock_ms``): its poll sizes, renewals, commit
    errors and the delivery count of each accepted offset."""
    _topic(bootstrap, topic, 1)
    _earliest(bootstrap, topic, share_record_lock_duration_ms=str(lock_ms))
    _produce(bootstrap, topic, 0, records)
    done = subprocess.run(
        ["java", "-cp", classpath, "ShareModes", bootstrap, topic, topic, mode, str(records),
         str(lock_ms)],
        capture_output=True, text=True, timeout=150,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out: dict[str, Any] = {"accepted": {}}
    for line in done.stdout.split("\n"):
        if line.startswith(("polls", "renewals", "errors")):
            name, _, value = line.partition(" ")
            out[name] = value
        elif ":" in line:
            offset, count = line.split(":")
            out["accepted"][int(offset)] = int(count)
    return out


def by_duration_start(bootstrap: str, topic: str) -> list[int]:
    """Five records stamped two hours ago, then five stamped now; the group starts with
    ``share.auto.offset.reset=by_duration:PT1H``: the offsets a consumer reads (sorted)."""
    _topic(bootstrap, topic, 1)
    now_ms = int(time.time() * 1000)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(10):
        stamp = now_ms - 7_200_000 if i < 5 else now_ms
        producer.produce(topic, value=f"{i}".encode(), partition=0, timestamp=stamp)
    assert producer.flush(30) == 0
    set_group_configs(bootstrap, topic, {"share.auto.offset.reset": "by_duration:PT1H"})
    consumer = _consumer(bootstrap, topic, topic)
    try:
        got = _accept(consumer, 5, 60)
        got += _accept(consumer, 1 << 30, 2, must=False)  # nothing older comes after
        return sorted(m.offset() for m in got)
    finally:
        consumer.close()
