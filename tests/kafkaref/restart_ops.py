"""The steps of the restart-at-every-step differential suite, each one client action sent to one
``Side`` (``restart_pair.py``) over the wire, as a stock client sends it: classic members
(JoinGroup, SyncGroup, LeaveGroup, OffsetCommit), consumer-protocol members
(ConsumerGroupHeartbeat, OffsetCommit with the member epoch), share members
(ShareGroupHeartbeat, ShareFetch, ShareAcknowledge) and a transactional producer on
transaction version 2 (InitProducerId, Produce v12, TxnOffsetCommit v5, EndTxn v5, a second
producer that fences the first, a transaction left to time out).

Each step returns what the client saw (error codes, epochs, offsets), canonical, for the test to
compare between tidelog and Kafka; the ids each broker picked stay on the ``Side``.
"""

from __future__ import annotations

import time
from typing import Any

from kafka.record.default_records import DefaultRecordBatchBuilder

from tests.kafkaref.restart_pair import (
    Member,
    Names,
    Producer,
    Side,
    client_member_id,
    describe_transactions,
)

__all__ = (
    "PARTITIONS",
    "classic_commit",
    "classic_join",
    "classic_leave",
    "consumer_commit",
    "consumer_join",
    "consumer_leave",
    "create_topic",
    "share_acknowledge",
    "share_join",
    "share_leave",
    "txn_end",
    "txn_fence",
    "txn_init",
    "txn_offset_commit",
    "txn_produce",
    "txn_timeout",
)

PARTITIONS = 2
SESSION_TIMEOUT_MS = 300_000  # longer than any run of restarts: members expire only if lost
TXN_TIMEOUT_MS = 300_000
SHORT_TXN_TIMEOUT_MS = 1_000
SETTLE_S = 20.0


def create_topic(side: Side, names: Names) -> dict[str, Any]:
    answer = side.call(
        "create_topics",
        7,
        {
            "topics": [
                {
                    "name": names.topic,
                    "num_partitions": PARTITIONS,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [],
                }
            ],
            "timeout": 10000,
            "validate_only": False,
        },
    )
    wait_for_leaders(side, names)
    return {"error_code": answer["topics"][0]["error_code"]}


def wait_for_leaders(side: Side, names: Names, timeout_s: float = 90.0) -> None:
    """Until every partition of the topic has a leader (after a create or a restart)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        meta = _metadata(side, names)
        parts = [p for t in meta["topics"] for p in t["partitions"]]
        if len(parts) == PARTITIONS and all(p["leader_id"] >= 0 for p in parts):
            return
        time.sleep(0.2)
    raise AssertionError(f"{side.name}: {names.topic} has no leaders")


# Classic groups ---------------------------------------------------------------------------


def classic_join(side: Side, names: Names, static: bool) -> dict[str, Any]:
    """JoinGroup (twice when the broker asks for a member id), then SyncGroup as the leader."""
    instance = f"{names.prefix}-static" if static else None
    fields: dict[str, Any] = {
        "group_id": names.classic,
        "session_timeout": SESSION_TIMEOUT_MS,
        "rebalance_timeout": 60_000,
        "member_id": "",
        "group_instance_id": instance,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b"subscription"}],
        "reason": None,
    }
    join = side.call("join_group", 9, fields)
    outcome: dict[str, Any] = {"join": join["error_code"]}
    if join["error_code"] == "member_id_required":
        fields["member_id"] = join["member_id"]
        join = side.call("join_group", 9, fields)
        outcome["rejoin"] = join["error_code"]
    if join["error_code"] != "none":
        return outcome
    leader = join["leader"] == join["member_id"]
    sync = side.call(
        "sync_group",
        5,
        {
            "group_id": names.classic,
            "generation_id": join["generation_id"],
            "member_id": join["member_id"],
            "group_instance_id": instance,
            "protocol_type": "consumer",
            "protocol_name": "range",
            "assignments": [{"member_id": join["member_id"], "assignment": b"assignment"}]
            if leader
            else [],
        },
    )
    outcome.update(generation=join["generation_id"], leader=leader, sync=sync["error_code"])
    if sync["error_code"] == "none":
        side.classic = Member(join["member_id"], join["generation_id"])
        side.classic_instance = instance
    return outcome


def classic_leave(side: Side, names: Names) -> dict[str, Any]:
    member = side.classic
    assert member is not None
    answer = side.call(
        "leave_group",
        5,
        {
            "group_id": names.classic,
            "members": [
                {
                    "member_id": member.member_id,
                    "group_instance_id": side.classic_instance,
                    "reason": "step",
                }
            ],
        },
    )
    side.classic = None
    return {"error_code": answer["error_code"], "members": answer["members"]}


def _offsets(names: Names, partition: int, offset: int) -> list[dict[str, Any]]:
    return [
        {
            "name": names.topic,
            "partitions": [
                {
                    "partition_index": partition,
                    "committed_offset": offset,
                    "committed_leader_epoch": -1,
                    "committed_metadata": "",
                }
            ],
        }
    ]


def classic_commit(side: Side, names: Names, partition: int, offset: int) -> dict[str, Any]:
    """OffsetCommit as the member (or as an admin client when the group has none)."""
    member = side.classic
    if member is None:
        return _offset_commit(side, names, names.classic, -1, "", None, partition, offset)
    return _offset_commit(side, names, names.classic, member.epoch, member.member_id,
                          side.classic_instance, partition, offset)  # fmt: skip


def _offset_commit(
    side: Side,
    names: Names,
    group_id: str,
    generation: int,
    member_id: str,
    instance: str | None,
    partition: int,
    offset: int,
) -> dict[str, Any]:
    answer = side.call(
        "offset_commit",
        9,
        {
            "group_id": group_id,
            "generation_id_or_member_epoch": generation,
            "member_id": member_id,
            "group_instance_id": instance,
            "topics": _offsets(names, partition, offset),
        },
    )
    return {"topics": answer["topics"]}


# Consumer groups (KIP-848) ----------------------------------------------------------------


def _heartbeat(side: Side, names: Names, member: Member, **changes: Any) -> Any:
    fields: dict[str, Any] = {
        "group_id": names.consumer,
        "member_id": member.member_id,
        "member_epoch": member.epoch,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout": -1,
        "subscribed_topic_names": None,
        "server_assignor": None,
        "topic_partitions": member.owned,
    }
    fields.update(changes)
    return side.call("consumer_group_heartbeat", 0, fields)


def _settle_consumers(side: Side, names: Names) -> list[dict[str, Any]]:
    """Heartbeat every member, acknowledging what it was given, until the group is stable
    (every member at the group epoch, owning its target assignment: ConsumerGroupDescribe) or
    ``SETTLE_S`` passed; what each member was told last."""
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + SETTLE_S
    while True:
        seen = []
        for member in list(side.consumers):
            answer = _heartbeat(side, names, member)
            if answer["error_code"] != "none":
                side.consumers.remove(member)
                seen.append({"error_code": answer["error_code"]})
                continue
            if answer["assignment"] is not None:
                member.owned = answer["assignment"]["topic_partitions"]
            member.epoch = answer["member_epoch"]
            seen.append({"error_code": "none", "owned": member.owned})
        if _consumer_group_stable(side, names) or time.monotonic() > deadline:
            return seen
        time.sleep(0.2)


def _consumer_group_stable(side: Side, names: Names) -> bool:
    group = side.call(
        "consumer_group_describe",
        0,
        {"group_ids": [names.consumer], "include_authorized_operations": False},
    )["groups"][0]
    if group["error_code"] != "none":
        return True  # no group (left empty): nothing to settle
    return group["group_state"] in ("Stable", "Empty") and all(
        m["member_epoch"] == group["group_epoch"] and m["assignment"] == m["target_assignment"]
        for m in group["members"]
    )


def consumer_join(side: Side, names: Names) -> dict[str, Any]:
    member = Member(client_member_id(), 0)
    answer = _heartbeat(
        side,
        names,
        member,
        rebalance_timeout=60_000,
        subscribed_topic_names=[names.topic],
        topic_partitions=[],
    )
    outcome: dict[str, Any] = {"error_code": answer["error_code"]}
    if answer["error_code"] == "none":
        member.epoch = answer["member_epoch"]
        if answer["assignment"] is not None:
            member.owned = answer["assignment"]["topic_partitions"]
        side.consumers.append(member)
    outcome["members"] = _settle_consumers(side, names)
    return outcome


def consumer_leave(side: Side, names: Names, index: int) -> dict[str, Any]:
    member = side.consumers.pop(index % len(side.consumers))
    answer = _heartbeat(side, names, member, member_epoch=-1, topic_partitions=None)
    return {
        "error_code": answer["error_code"],
        "epoch": answer["member_epoch"],
        "members": _settle_consumers(side, names),
    }


def consumer_commit(side: Side, names: Names, partition: int, offset: int) -> dict[str, Any]:
    """OffsetCommit v9 as the first consumer-protocol member (its epoch as the generation)."""
    member = side.consumers[0]
    return _offset_commit(side, names, names.consumer, member.epoch, member.member_id, None,
                          partition, offset)  # fmt: skip


# Share groups -----------------------------------------------------------------------------


def _share_heartbeat(side: Side, names: Names, member: Member, **changes: Any) -> Any:
    fields: dict[str, Any] = {
        "group_id": names.share,
        "member_id": member.member_id,
        "member_epoch": member.epoch,
        "rack_id": None,
        "subscribed_topic_names": None,
    }
    fields.update(changes)
    return side.call("share_group_heartbeat", 1, fields)


def share_join(side: Side, names: Names) -> dict[str, Any]:
    member = Member(client_member_id(), 0)
    answer = _share_heartbeat(side, names, member, subscribed_topic_names=[names.topic])
    outcome: dict[str, Any] = {"error_code": answer["error_code"]}
    if answer["error_code"] != "none":
        return outcome
    member.epoch = answer["member_epoch"]
    if answer["assignment"] is not None:
        member.owned = answer["assignment"]["topic_partitions"]
    # Kafka assigns a share partition once its share state is initialised (asynchronously):
    # heartbeat until the only member owns every partition (or SETTLE_S passed).
    deadline = time.monotonic() + SETTLE_S
    while sum(len(t["partitions"]) for t in member.owned) < PARTITIONS:
        if time.monotonic() > deadline:
            break
        time.sleep(0.2)
        again = _share_heartbeat(side, names, member)
        if again["error_code"] != "none":
            outcome["settle"] = again["error_code"]
            return outcome
        member.epoch = again["member_epoch"]
        if again["assignment"] is not None:
            member.owned = again["assignment"]["topic_partitions"]
    side.share = member
    outcome["owned"] = member.owned  # epochs: compared in ShareGroupDescribe, per group
    return outcome


def share_leave(side: Side, names: Names) -> dict[str, Any]:
    member = side.share
    assert member is not None
    side.share = None
    answer = _share_heartbeat(side, names, member, member_epoch=-1)
    return {"error_code": answer["error_code"], "epoch": answer["member_epoch"]}


def share_acknowledge(side: Side, names: Names, partition: int) -> dict[str, Any]:
    """ShareFetch from a new share session (waiting up to a few seconds for records), then
    ShareAcknowledge (accept) of what came, then the session closed: what the member was given
    and what the broker answered."""
    member = side.share
    assert member is not None
    topic_id = _topic_id(side, names)
    fetch_fields: dict[str, Any] = {
        "group_id": names.share,
        "member_id": member.member_id,
        "share_session_epoch": 0,
        "max_wait": 500,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "max_records": 100,
        "batch_size": 100,
        "topics": [
            {
                "topic_id": topic_id,
                "partitions": [{"partition_index": partition, "acknowledgement_batches": []}],
            }
        ],
        "forgotten_topics_data": [],
    }
    acquired: list[list[int]] = []
    error = "none"
    epoch = 0
    for _ in range(6):
        fetch_fields["share_session_epoch"] = epoch
        answer = side.call("share_fetch", 1, fetch_fields)
        epoch = 1 if epoch == 0 else epoch + 1
        error = answer["error_code"]
        parts = [p for t in answer["responses"] for p in t["partitions"]]
        acquired = [
            [r["first_offset"], r["last_offset"]] for p in parts for r in p["acquired_records"]
        ]
        if error != "none" or acquired:
            break
        fetch_fields["topics"] = []  # the session already holds the partition
    outcome: dict[str, Any] = {"fetch": error, "acquired": acquired}
    if acquired:
        ack = side.call(
            "share_acknowledge",
            1,
            {
                "group_id": names.share,
                "member_id": member.member_id,
                "share_session_epoch": epoch,
                "topics": [
                    {
                        "topic_id": topic_id,
                        "partitions": [
                            {
                                "partition_index": partition,
                                "acknowledgement_batches": [
                                    {
                                        "first_offset": first,
                                        "last_offset": last,
                                        "acknowledge_types": [1],
                                    }
                                    for first, last in acquired
                                ],
                            }
                        ],
                    }
                ],
            },
        )
        outcome["acknowledge"] = ack["error_code"]
        outcome["partitions"] = [p for t in ack["responses"] for p in t["partitions"]]
        epoch += 1
    close = side.call(
        "share_acknowledge",
        1,
        {
            "group_id": names.share,
            "member_id": member.member_id,
            "share_session_epoch": -1,
            "topics": [],
        },
    )
    outcome["close"] = close["error_code"]
    return outcome


def _metadata(side: Side, names: Names) -> Any:
    """Metadata of the example's topic."""
    return side.call(
        "metadata",
        12,
        {
            "topics": [{"name": names.topic, "topic_id": None}],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        },
    )


def _topic_id(side: Side, names: Names) -> str:
    return str(_metadata(side, names)["topics"][0]["topic_id"])


# Transactions (transaction version 2) -----------------------------------------------------


def _init(side: Side, transactional_id: str, timeout_ms: int) -> Any:
    return side.call(
        "init_producer_id",
        5,
        {
            "transactional_id": transactional_id,
            "transaction_timeout": timeout_ms,
            "producer_id": -1,
            "producer_epoch": -1,
        },
    )


def txn_init(side: Side, names: Names) -> dict[str, Any]:
    answer = _init(side, names.txn, TXN_TIMEOUT_MS)
    if answer["error_code"] == "none":
        side.producer = Producer(answer["producer_id"], answer["producer_epoch"])
    return {"error_code": answer["error_code"], "producer_epoch": answer["producer_epoch"]}


def txn_fence(side: Side, names: Names) -> dict[str, Any]:
    """A second producer with the same transactional.id: the first one's epoch is stale now
    (the side keeps the first producer, whose next steps are fenced)."""
    answer = _init(side, names.txn, TXN_TIMEOUT_MS)
    return {"error_code": answer["error_code"], "producer_epoch": answer["producer_epoch"]}


def _produce(
    side: Side, transactional_id: str, producer: Producer, topic: str, partition: int, value: str
) -> dict[str, Any]:
    sequence = producer.sequences.get(partition, 0)
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=True,
        producer_id=producer.producer_id,
        producer_epoch=producer.epoch,
        base_sequence=sequence,
        batch_size=1 << 20,
    )
    # now, not a fixed time: Kafka's time retention (7 days) would delete older segments
    now_ms = int(time.time() * 1000)
    builder.append(0, timestamp=now_ms, key=value.encode(), value=value.encode(), headers=[])
    answer = side.call(
        "produce",
        12,
        {
            "transactional_id": transactional_id,
            "acks": -1,
            "timeout": 10_000,
            "topic_data": [
                {
                    "name": topic,
                    "partition_data": [{"index": partition, "records": bytes(builder.build())}],
                }
            ],
        },
    )
    part = answer["responses"][0]["partition_responses"][0]
    if part["error_code"] == "none":
        producer.sequences[partition] = sequence + 1
    return {"error_code": part["error_code"], "base_offset": part["base_offset"]}


def txn_produce(side: Side, names: Names, partition: int, value: str) -> dict[str, Any]:
    assert side.producer is not None
    return _produce(side, names.txn, side.producer, names.topic, partition, value)


def txn_offset_commit(
    side: Side, names: Names, group: str, partition: int, offset: int, add_offsets: bool
) -> dict[str, Any]:
    """TxnOffsetCommit v5 (after AddOffsetsToTxn when ``add_offsets``: the Java client on
    transaction version 2 leaves it out, others send it) for ``group``: ``classic`` (as its
    member, or generation -1 when it has none), ``consumer`` (as its first member)."""
    producer = side.producer
    assert producer is not None
    outcome: dict[str, Any] = {}
    group_id = names.classic if group == "classic" else names.consumer
    if group == "classic":
        member = side.classic
        generation, member_id = (member.epoch, member.member_id) if member else (-1, "")
        instance = side.classic_instance if member else None
    else:
        first = side.consumers[0] if side.consumers else None
        generation, member_id = (first.epoch, first.member_id) if first else (-1, "")
        instance = None
    if add_offsets:
        added = side.call(
            "add_offsets_to_txn",
            4,
            {
                "transactional_id": names.txn,
                "producer_id": producer.producer_id,
                "producer_epoch": producer.epoch,
                "group_id": group_id,
            },
        )
        outcome["add_offsets"] = added["error_code"]
        if added["error_code"] != "none":
            return outcome
    answer = side.call(
        "txn_offset_commit",
        5,
        {
            "transactional_id": names.txn,
            "group_id": group_id,
            "producer_id": producer.producer_id,
            "producer_epoch": producer.epoch,
            "generation_id": generation,
            "member_id": member_id,
            "group_instance_id": instance,
            "topics": _offsets(names, partition, offset),
        },
    )
    outcome["topics"] = answer["topics"]
    return outcome


def txn_end(side: Side, names: Names, commit: bool) -> dict[str, Any]:
    producer = side.producer
    assert producer is not None
    answer = side.call(
        "end_txn",
        5,
        {
            "transactional_id": names.txn,
            "producer_id": producer.producer_id,
            "producer_epoch": producer.epoch,
            "committed": commit,
        },
    )
    if answer["error_code"] == "none":
        side.producer = Producer(answer["producer_id"], answer["producer_epoch"])
    return {"error_code": answer["error_code"], "producer_epoch": answer["producer_epoch"]}


def txn_timeout(side: Side, names: Names, value: str) -> dict[str, Any]:
    """A producer with a short transaction timeout writes one record and goes quiet; the
    coordinator aborts the transaction (waited for: until DescribeTransactions no longer shows
    it open)."""
    init = _init(side, names.txn_timeout, SHORT_TXN_TIMEOUT_MS)
    outcome: dict[str, Any] = {"init": init["error_code"]}
    if init["error_code"] != "none":
        return outcome
    producer = Producer(init["producer_id"], init["producer_epoch"])
    outcome["produce"] = _produce(side, names.txn_timeout, producer, names.topic, 1, value)
    deadline = time.monotonic() + 60
    state = "?"
    while time.monotonic() < deadline:
        states = describe_transactions(side, [names.txn_timeout])["transaction_states"]
        state = states[0]["transaction_state"]
        if state not in ("Ongoing", "PrepareAbort", "PrepareEpochFence"):
            break
        time.sleep(0.2)
    outcome["state"] = state
    return outcome
