"""The differential scenarios: each row is one request sent to tidelog and to Apache Kafka.

``(name, api, version, fields)``: ``api`` is kio's module name, ``fields`` the request as plain
data (see ``tests/support/differential.py``; ``"$name.path"`` refers to the same broker's answer
to the earlier row ``name``). Rows run in order against one pair of brokers, so later rows see
what earlier rows made (topics, records, groups, producers). Adding a scenario is adding a row.

Topics made before the rows run (on both brokers, with the leader waited for): ``dt`` (3
partitions), ``dt-compact`` (1 partition, ``cleanup.policy=compact``).
"""

from __future__ import annotations

from typing import Any

from tests.support.kafka_wire import make_batch

Scenario = tuple[str, str, int, dict[str, Any]]

T = "dt"
BATCH = make_batch([b"a", b"b", b"c", b"d", b"e"], keys=[b"k1", b"k2", b"k1", b"k2", b"k1"])
NO_KEY = make_batch([b"x"])
MAX = 1 << 20


def _produce(topic: str, partition: int, records: bytes | None, acks: int = -1) -> dict[str, Any]:
    return {
        "transactional_id": None,
        "acks": acks,
        "timeout": 5000,
        "topic_data": [
            {"name": topic, "partition_data": [{"index": partition, "records": records}]}
        ],
    }


def _fetch(topic: str, partition: int, offset: int, isolation: int = 0) -> dict[str, Any]:
    part = {
        "partition": partition,
        "current_leader_epoch": -1,
        "fetch_offset": offset,
        "last_fetched_epoch": -1,
        "log_start_offset": -1,
        "partition_max_bytes": MAX,
    }
    return {
        "cluster_id": None,
        "replica_id": -1,
        "max_wait": 0,
        "min_bytes": 1,
        "max_bytes": MAX,
        "isolation_level": isolation,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [part]}],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def _list_offsets(topic: str, partition: int, timestamp: int) -> dict[str, Any]:
    return {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [
            {"name": topic, "partitions": [{"partition_index": partition, "timestamp": timestamp}]}
        ],
    }


def _metadata(*topics: str, auto_create: bool = False) -> dict[str, Any]:
    return {
        "topics": [{"name": t, "topic_id": "00000000-0000-0000-0000-000000000000"} for t in topics],
        "allow_auto_topic_creation": auto_create,
        "include_topic_authorized_operations": False,
    }


def _create(name: str, partitions: int, rf: int = 1, **configs: str) -> dict[str, Any]:
    return {
        "topics": [
            {
                "name": name,
                "num_partitions": partitions,
                "replication_factor": rf,
                "assignments": [],
                "configs": [{"name": k.replace("_", "."), "value": v} for k, v in configs.items()],
            }
        ],
        "timeout": 5000,
        "validate_only": False,
    }


def _describe_configs(rtype: int, name: str, *keys: str) -> dict[str, Any]:
    return {
        "resources": [
            {"resource_type": rtype, "resource_name": name, "configuration_keys": list(keys)}
        ],
        "include_synonyms": False,
        "include_documentation": False,
    }


def _join(group: str, member: str) -> dict[str, Any]:
    return {
        "group_id": group,
        "session_timeout": 10000,
        "rebalance_timeout": 10000,
        "member_id": member,
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [
            {"name": "range", "metadata": b"\x00\x00\x00\x00\x00\x01\x00\x02dt\xff\xff\xff\xff"}
        ],
        "reason": None,
    }


def _commit(group: str, generation: int, member: str, offset: int) -> dict[str, Any]:
    return {
        "group_id": group,
        "generation_id_or_member_epoch": generation,
        "member_id": member,
        "group_instance_id": None,
        "topics": [
            {
                "name": T,
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": offset,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                ],
            }
        ],
    }


def _offset_fetch(group: str, topic: str | None) -> dict[str, Any]:
    topics = None if topic is None else [{"name": topic, "partition_indexes": [0, 1]}]
    return {"groups": [{"group_id": group, "topics": topics}], "require_stable": False}


TOPIC, BROKER = 2, 4  # config resource types
G = "dg"

SCENARIOS: list[Scenario] = [
    # Metadata
    ("metadata-known", "metadata", 12, _metadata(T)),
    ("metadata-unknown", "metadata", 12, _metadata("dt-none")),
    ("metadata-invalid-name", "metadata", 12, _metadata("bad/name")),
    ("metadata-auto-create", "metadata", 12, _metadata("dt-auto", auto_create=True)),
    # CreateTopics
    ("create-ok", "create_topics", 7, _create("dt-new", 2)),
    ("create-exists", "create_topics", 7, _create(T, 1)),
    ("create-bad-rf", "create_topics", 7, _create("dt-rf", 1, rf=3)),
    ("create-bad-partitions", "create_topics", 7, _create("dt-zero", 0)),
    ("create-bad-name", "create_topics", 7, _create("bad name!", 1)),
    ("create-bad-config", "create_topics", 7, _create("dt-badcfg", 1, cleanup_policy="nope")),
    ("create-unknown-config", "create_topics", 7, _create("dt-unkcfg", 1, no_such_config="1")),
    ("create-bad-number", "create_topics", 7, _create("dt-badnum", 1, retention_ms="abc")),
    # Produce
    ("produce", "produce", 9, _produce(T, 0, BATCH)),
    ("produce-acks1", "produce", 9, _produce(T, 1, NO_KEY, acks=1)),
    ("produce-unknown-topic", "produce", 9, _produce("dt-none", 0, NO_KEY)),
    ("produce-unknown-partition", "produce", 9, _produce(T, 7, NO_KEY)),
    ("produce-bad-acks", "produce", 9, _produce(T, 0, NO_KEY, acks=2)),
    ("produce-compact-no-key", "produce", 9, _produce("dt-compact", 0, NO_KEY)),
    ("produce-compact-key", "produce", 9, _produce("dt-compact", 0, BATCH)),
    # Fetch
    ("fetch-0", "fetch", 12, _fetch(T, 0, 0)),
    ("fetch-middle", "fetch", 12, _fetch(T, 0, 3)),
    ("fetch-at-end", "fetch", 12, _fetch(T, 0, 5)),
    ("fetch-out-of-range", "fetch", 12, _fetch(T, 0, 100)),
    ("fetch-negative", "fetch", 12, _fetch(T, 0, -5)),
    ("fetch-committed", "fetch", 12, _fetch(T, 0, 0, isolation=1)),
    ("fetch-unknown-topic", "fetch", 12, _fetch("dt-none", 0, 0)),
    ("fetch-unknown-partition", "fetch", 12, _fetch(T, 9, 0)),
    # ListOffsets
    ("list-latest", "list_offsets", 7, _list_offsets(T, 0, -1)),
    ("list-earliest", "list_offsets", 7, _list_offsets(T, 0, -2)),
    ("list-max-timestamp", "list_offsets", 7, _list_offsets(T, 0, -3)),
    ("list-by-time", "list_offsets", 7, _list_offsets(T, 0, 1_700_000_000_002)),
    ("list-future", "list_offsets", 7, _list_offsets(T, 0, 1_900_000_000_000)),
    ("list-empty-partition", "list_offsets", 7, _list_offsets(T, 2, -1)),
    ("list-unknown-topic", "list_offsets", 7, _list_offsets("dt-none", 0, -1)),
    ("list-unknown-partition", "list_offsets", 7, _list_offsets(T, 5, -1)),
    # DescribeConfigs / IncrementalAlterConfigs
    (
        "configs-topic",
        "describe_configs",
        4,
        _describe_configs(
            TOPIC, T, "cleanup.policy", "retention.ms", "segment.bytes", "min.insync.replicas"
        ),
    ),
    (
        "configs-compact",
        "describe_configs",
        4,
        _describe_configs(TOPIC, "dt-compact", "cleanup.policy"),
    ),
    (
        "configs-unknown-topic",
        "describe_configs",
        4,
        _describe_configs(TOPIC, "dt-none", "cleanup.policy"),
    ),
    ("configs-unknown-key", "describe_configs", 4, _describe_configs(TOPIC, T, "no.such.key")),
    (
        "configs-broker",
        "describe_configs",
        4,
        _describe_configs(BROKER, "1", "num.partitions", "log.retention.hours"),
    ),
    ("configs-bad-type", "describe_configs", 4, _describe_configs(99, "x", "a")),
    (
        "alter-ok",
        "incremental_alter_configs",
        1,
        {
            "resources": [
                {
                    "resource_type": TOPIC,
                    "resource_name": T,
                    "configs": [
                        {"name": "retention.ms", "config_operation": 0, "value": "3600000"}
                    ],
                }
            ],
            "validate_only": False,
        },
    ),
    ("configs-after-alter", "describe_configs", 4, _describe_configs(TOPIC, T, "retention.ms")),
    (
        "alter-bad-value",
        "incremental_alter_configs",
        1,
        {
            "resources": [
                {
                    "resource_type": TOPIC,
                    "resource_name": T,
                    "configs": [{"name": "retention.ms", "config_operation": 0, "value": "soon"}],
                }
            ],
            "validate_only": False,
        },
    ),
    (
        "alter-unknown-topic",
        "incremental_alter_configs",
        1,
        {
            "resources": [
                {
                    "resource_type": TOPIC,
                    "resource_name": "dt-none",
                    "configs": [{"name": "retention.ms", "config_operation": 0, "value": "1"}],
                }
            ],
            "validate_only": False,
        },
    ),
    # Groups
    ("find-group", "find_coordinator", 4, {"key_type": 0, "coordinator_keys": [G]}),
    ("find-txn", "find_coordinator", 4, {"key_type": 1, "coordinator_keys": ["dtx"]}),
    ("find-bad-type", "find_coordinator", 4, {"key_type": 7, "coordinator_keys": ["x"]}),
    ("join-needs-id", "join_group", 9, _join(G, "")),
    ("join", "join_group", 9, _join(G, "$join-needs-id.member_id")),
    (
        "sync",
        "sync_group",
        5,
        {
            "group_id": G,
            "generation_id": "$join.generation_id",
            "member_id": "$join.member_id",
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocol_name": "range",
            "assignments": [
                {"member_id": "$join.member_id", "assignment": b"\x00\x00\x00\x00\x00\x00\x00\x00"}
            ],
        },
    ),
    (
        "heartbeat",
        "heartbeat",
        4,
        {
            "group_id": G,
            "generation_id": "$join.generation_id",
            "member_id": "$join.member_id",
            "group_instance_id": None,
        },
    ),
    (
        "heartbeat-old-generation",
        "heartbeat",
        4,
        {
            "group_id": G,
            "generation_id": 99,
            "member_id": "$join.member_id",
            "group_instance_id": None,
        },
    ),
    (
        "heartbeat-unknown-member",
        "heartbeat",
        4,
        {"group_id": G, "generation_id": 1, "member_id": "nobody", "group_instance_id": None},
    ),
    (
        "heartbeat-unknown-group",
        "heartbeat",
        4,
        {
            "group_id": "dg-none",
            "generation_id": 1,
            "member_id": "nobody",
            "group_instance_id": None,
        },
    ),
    ("commit", "offset_commit", 8, _commit(G, "$join.generation_id", "$join.member_id", 3)),  # type: ignore[arg-type]
    ("commit-old-generation", "offset_commit", 8, _commit(G, 99, "$join.member_id", 4)),
    ("commit-unknown-member", "offset_commit", 8, _commit(G, 1, "nobody", 4)),
    ("commit-simple", "offset_commit", 8, _commit("dg-simple", -1, "", 2)),
    ("offset-fetch", "offset_fetch", 8, _offset_fetch(G, T)),
    ("offset-fetch-all", "offset_fetch", 8, _offset_fetch(G, None)),
    ("offset-fetch-unknown-group", "offset_fetch", 8, _offset_fetch("dg-none", T)),
    (
        "describe-group",
        "describe_groups",
        5,
        {"groups": [G, "dg-none"], "include_authorized_operations": False},
    ),
    ("list-groups", "list_groups", 4, {"states_filter": ["Stable"]}),
    (
        "leave",
        "leave_group",
        4,
        {"group_id": G, "members": [{"member_id": "$join.member_id", "group_instance_id": None}]},
    ),
    (
        "leave-unknown-member",
        "leave_group",
        4,
        {"group_id": G, "members": [{"member_id": "nobody", "group_instance_id": None}]},
    ),
    (
        "offset-delete",
        "offset_delete",
        0,
        {"group_id": "dg-simple", "topics": [{"name": T, "partitions": [{"partition_index": 0}]}]},
    ),
    ("delete-groups", "delete_groups", 2, {"groups_names": [G, "dg-none"]}),
    # Producers and transactions
    (
        "init-idempotent",
        "init_producer_id",
        4,
        {
            "transactional_id": None,
            "transaction_timeout": -1,
            "producer_id": -1,
            "producer_epoch": -1,
        },
    ),
    (
        "init-tx",
        "init_producer_id",
        4,
        {
            "transactional_id": "dtx",
            "transaction_timeout": 60000,
            "producer_id": -1,
            "producer_epoch": -1,
        },
    ),
    (
        "init-tx-again",
        "init_producer_id",
        4,
        {
            "transactional_id": "dtx",
            "transaction_timeout": 60000,
            "producer_id": -1,
            "producer_epoch": -1,
        },
    ),
    (
        "init-tx-bad-timeout",
        "init_producer_id",
        4,
        {
            "transactional_id": "dtx2",
            "transaction_timeout": 999_999_999,
            "producer_id": -1,
            "producer_epoch": -1,
        },
    ),
    (
        "end-txn-fenced",
        "end_txn",
        3,
        {
            "transactional_id": "dtx",
            "producer_id": "$init-tx.producer_id",
            "producer_epoch": "$init-tx.producer_epoch",
            "committed": True,
        },
    ),
    (
        "end-txn-not-started",
        "end_txn",
        3,
        {
            "transactional_id": "dtx",
            "producer_id": "$init-tx-again.producer_id",
            "producer_epoch": "$init-tx-again.producer_epoch",
            "committed": True,
        },
    ),
    (
        "end-txn-unknown-id",
        "end_txn",
        3,
        {"transactional_id": "dtx-none", "producer_id": 1, "producer_epoch": 0, "committed": False},
    ),
    # (filtered by this suite's producer: other tests of the session leave transactional ids
    # on the reference broker)
    (
        "list-transactions",
        "list_transactions",
        1,
        {
            "state_filters": [],
            "producer_id_filters": ["$init-tx.producer_id"],
            "duration_filter": -1,
        },
    ),
    (
        "add-partitions-fenced",
        "add_partitions_to_txn",
        3,
        {
            "v3_and_below_transactional_id": "dtx",
            "v3_and_below_producer_id": "$init-tx.producer_id",
            "v3_and_below_producer_epoch": "$init-tx.producer_epoch",
            "v3_and_below_topics": [{"name": T, "partitions": [0]}],
        },
    ),
    (
        "add-partitions-unknown-topic",
        "add_partitions_to_txn",
        3,
        {
            "v3_and_below_transactional_id": "dtx",
            "v3_and_below_producer_id": "$init-tx-again.producer_id",
            "v3_and_below_producer_epoch": "$init-tx-again.producer_epoch",
            "v3_and_below_topics": [{"name": "dt-none", "partitions": [0]}],
        },
    ),
    # DescribeTransactions (its -1 start time read by tests/support/kafka_wire.py), with
    # ListTransactions, over a transaction's life: Empty, then Ongoing, then aborted. (Kafka
    # writes the markers after EndTxn's answer, so what the abort leaves, DescribeTransactions'
    # CompleteAbort and DescribeProducers' entries, is for tests that wait for it:
    # tests/support/txn_table.py.)
    (
        "describe-transactions",
        "describe_transactions",
        0,
        {"transactional_ids": ["dtx", "dtx-none"]},
    ),
    (
        "add-partitions-ok",
        "add_partitions_to_txn",
        3,
        {
            "v3_and_below_transactional_id": "dtx",
            "v3_and_below_producer_id": "$init-tx-again.producer_id",
            "v3_and_below_producer_epoch": "$init-tx-again.producer_epoch",
            "v3_and_below_topics": [{"name": T, "partitions": [1, 2]}],
        },
    ),
    (
        "describe-transactions-ongoing",
        "describe_transactions",
        0,
        {"transactional_ids": ["dtx"]},
    ),
    (
        "list-transactions-ongoing",
        "list_transactions",
        1,
        {
            "state_filters": ["Ongoing"],
            "producer_id_filters": ["$init-tx-again.producer_id"],
            "duration_filter": -1,
        },
    ),
    (
        "end-txn-abort-ongoing",
        "end_txn",
        3,
        {
            "transactional_id": "dtx",
            "producer_id": "$init-tx-again.producer_id",
            "producer_epoch": "$init-tx-again.producer_epoch",
            "committed": False,
        },
    ),
    (
        "offset-for-leader-epoch",
        "offset_for_leader_epoch",
        4,
        {
            "replica_id": -1,
            "topics": [
                {
                    "topic": T,
                    "partitions": [
                        {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0},
                        {"partition": 9, "current_leader_epoch": -1, "leader_epoch": 0},
                    ],
                }
            ],
        },
    ),
    ("list-groups-by-type", "list_groups", 5, {"states_filter": [], "types_filter": ["consumer"]}),
    (
        "describe-producers",
        "describe_producers",
        0,
        {"topics": [{"name": T, "partition_indexes": [0, 9]}]},
    ),
    # ACLs (no authorizer on either broker)
    (
        "describe-acls",
        "describe_acls",
        3,
        {
            "resource_type_filter": 1,
            "resource_name_filter": None,
            "pattern_type_filter": 1,
            "principal_filter": None,
            "host_filter": None,
            "operation": 1,
            "permission_type": 1,
        },
    ),
    # Records and topics
    (
        "delete-records",
        "delete_records",
        2,
        {
            "topics": [{"name": T, "partitions": [{"partition_index": 0, "offset": 2}]}],
            "timeout": 5000,
        },
    ),
    (
        "delete-records-beyond",
        "delete_records",
        2,
        {
            "topics": [{"name": T, "partitions": [{"partition_index": 0, "offset": 99}]}],
            "timeout": 5000,
        },
    ),
    ("list-earliest-after-delete", "list_offsets", 7, _list_offsets(T, 0, -2)),
    ("fetch-below-start", "fetch", 12, _fetch(T, 0, 0)),
    (
        "create-partitions",
        "create_partitions",
        3,
        {
            "topics": [{"name": "dt-new", "count": 4, "assignments": None}],
            "timeout": 5000,
            "validate_only": False,
        },
    ),
    (
        "create-partitions-fewer",
        "create_partitions",
        3,
        {
            "topics": [{"name": "dt-new", "count": 1, "assignments": None}],
            "timeout": 5000,
            "validate_only": False,
        },
    ),
    (
        "create-partitions-unknown",
        "create_partitions",
        3,
        {
            "topics": [{"name": "dt-none", "count": 4, "assignments": None}],
            "timeout": 5000,
            "validate_only": False,
        },
    ),
    (
        "delete-topic",
        "delete_topics",
        6,
        {"topics": [{"name": "dt-new", "topic_id": None}], "timeout": 5000},
    ),
    (
        "delete-topic-unknown",
        "delete_topics",
        6,
        {"topics": [{"name": "dt-none", "topic_id": None}], "timeout": 5000},
    ),
]

# Share groups (KIP-932): the answers that do not depend on timing (errors, empty describes).
_SHARE_MEMBER = "tidelog-differential-m1"  # a client-chosen member id (Kafka: <= 36 chars)
SCENARIOS += [
    (
        "share-describe-unknown",
        "share_group_describe",
        1,
        {"group_ids": ["ds-none"], "include_authorized_operations": False},
    ),
    (
        "share-heartbeat-unknown-group",
        "share_group_heartbeat",
        1,
        {
            "group_id": "ds-none",
            "member_id": _SHARE_MEMBER,
            "member_epoch": 3,
            "rack_id": None,
            "subscribed_topic_names": None,
        },
    ),
    (
        "share-heartbeat-join-without-topics",
        "share_group_heartbeat",
        1,
        {
            "group_id": "ds-share",
            "member_id": _SHARE_MEMBER,
            "member_epoch": 0,
            "rack_id": None,
            "subscribed_topic_names": None,
        },
    ),
    (
        "share-fetch-unknown-session",
        "share_fetch",
        1,
        {
            "group_id": "ds-none",
            "member_id": _SHARE_MEMBER,
            "share_session_epoch": 5,
            "max_wait": 0,
            "min_bytes": 1,
            "max_bytes": MAX,
            "max_records": 100,
            "batch_size": 100,
            "topics": [],
            "forgotten_topics_data": [],
        },
    ),
]

# TxnOffsetCommit from a KIP-848 consumer-protocol member (issue 37, defect 4): validated against
# the consumer group's member and member epoch, as Kafka's ConsumerGroup.validateOffsetCommit.
# One transaction, so no marker is in flight between the rows.
_CG = "dcg-txn"


def _txn_offset_commit(member: str, generation: Any) -> dict[str, Any]:
    return {
        "transactional_id": "dtx-cg",
        "group_id": _CG,
        "producer_id": "$init-tx-cg.producer_id",
        "producer_epoch": "$init-tx-cg.producer_epoch",
        "generation_id": generation,
        "member_id": member,
        "group_instance_id": None,
        "topics": [
            {
                "name": T,
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": 1,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                ],
            }
        ],
    }


SCENARIOS += [
    (
        "cg-txn-join",
        "consumer_group_heartbeat",
        0,
        {
            "group_id": _CG,
            "member_id": "",
            "member_epoch": 0,
            "instance_id": None,
            "rack_id": None,
            "rebalance_timeout": 30000,
            "subscribed_topic_names": [T],
            "server_assignor": None,
            "topic_partitions": [],
        },
    ),
    (
        "init-tx-cg",
        "init_producer_id",
        4,
        {
            "transactional_id": "dtx-cg",
            "transaction_timeout": 60000,
            "producer_id": -1,
            "producer_epoch": -1,
        },
    ),
    (
        "add-offsets-cg",
        "add_offsets_to_txn",
        3,
        {
            "transactional_id": "dtx-cg",
            "producer_id": "$init-tx-cg.producer_id",
            "producer_epoch": "$init-tx-cg.producer_epoch",
            "group_id": _CG,
        },
    ),
    (
        "txn-offset-commit-cg-member",
        "txn_offset_commit",
        3,
        _txn_offset_commit("$cg-txn-join.member_id", "$cg-txn-join.member_epoch"),
    ),
    (
        "txn-offset-commit-cg-stale-epoch",
        "txn_offset_commit",
        3,
        _txn_offset_commit("$cg-txn-join.member_id", 99),
    ),
    (
        "txn-offset-commit-cg-unknown-member",
        "txn_offset_commit",
        3,
        _txn_offset_commit("nobody", "$cg-txn-join.member_epoch"),
    ),
    ("txn-offset-commit-cg-no-member", "txn_offset_commit", 3, _txn_offset_commit("", -1)),
    (
        "end-txn-cg",
        "end_txn",
        3,
        {
            "transactional_id": "dtx-cg",
            "producer_id": "$init-tx-cg.producer_id",
            "producer_epoch": "$init-tx-cg.producer_epoch",
            "committed": True,
        },
    ),
]
