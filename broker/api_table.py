"""Every API the broker serves, known without importing its handler module.

The ApiVersions answer is the first thing every client asks for; it needs only these rows, so a
broker answers it before it has imported its handler modules and the group and transaction
coordinators they use (``broker/router.py`` imports a handler on the first request of its API,
and the broker imports the rest right after it starts listening).

Each row repeats its handler's ``SPEC`` (``broker/handlers/<module>.py``): the name, the
versions it serves and the lowest version advertised (when below ``min_version``, see
``HandlerSpec.advertised_min_version``). ``tests/broker/test_api_table.py`` checks that every
row matches its module's SPEC and that every handler has a row; a new handler (or a changed
version range) adds or edits its row here.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ("API_TABLE", "HANDLERS_PACKAGE", "ApiEntry")

#: Where the handler modules live.
HANDLERS_PACKAGE = "tidelog.broker.handlers"


@dataclass(frozen=True, slots=True)
class ApiEntry:
    """One API: its key, name, handler module (in ``HANDLERS_PACKAGE``) and versions."""

    api_key: int
    name: str
    module: str
    min_version: int
    max_version: int
    advertised_min_version: int | None = None

    @property
    def advertised(self) -> tuple[int, int, int]:
        """``(api_key, lowest advertised version, max_version)`` as ApiVersions lists it."""
        low = self.min_version
        if self.advertised_min_version is not None:
            low = min(low, self.advertised_min_version)
        return self.api_key, low, self.max_version


API_TABLE: tuple[ApiEntry, ...] = (
    ApiEntry(0, "Produce", "produce", 3, 12, 0),
    ApiEntry(1, "Fetch", "fetch", 4, 16),
    ApiEntry(2, "ListOffsets", "list_offsets", 1, 8),
    ApiEntry(3, "Metadata", "metadata", 0, 13),
    ApiEntry(8, "OffsetCommit", "offset_commit", 2, 9),
    ApiEntry(9, "OffsetFetch", "offset_fetch", 1, 9),
    ApiEntry(10, "FindCoordinator", "find_coordinator", 0, 4),
    ApiEntry(11, "JoinGroup", "join_group", 0, 9),
    ApiEntry(12, "Heartbeat", "heartbeat", 0, 4),
    ApiEntry(13, "LeaveGroup", "leave_group", 0, 5),
    ApiEntry(14, "SyncGroup", "sync_group", 0, 5),
    ApiEntry(15, "DescribeGroups", "describe_groups", 0, 5),
    ApiEntry(16, "ListGroups", "list_groups", 0, 5),
    ApiEntry(17, "SaslHandshake", "sasl_handshake", 0, 1),
    ApiEntry(18, "ApiVersions", "api_versions", 0, 4),
    ApiEntry(19, "CreateTopics", "create_topics", 2, 7),
    ApiEntry(20, "DeleteTopics", "delete_topics", 1, 6),
    ApiEntry(21, "DeleteRecords", "delete_records", 0, 2),
    ApiEntry(22, "InitProducerId", "init_producer_id", 0, 5),
    ApiEntry(23, "OffsetForLeaderEpoch", "offset_for_leader_epoch", 2, 4),
    ApiEntry(24, "AddPartitionsToTxn", "add_partitions_to_txn", 0, 5),
    ApiEntry(25, "AddOffsetsToTxn", "add_offsets_to_txn", 0, 4),
    ApiEntry(26, "EndTxn", "end_txn", 0, 5),
    ApiEntry(27, "WriteTxnMarkers", "write_txn_markers", 1, 1),
    ApiEntry(28, "TxnOffsetCommit", "txn_offset_commit", 0, 5),
    ApiEntry(29, "DescribeAcls", "describe_acls", 1, 3),
    ApiEntry(30, "CreateAcls", "create_acls", 1, 3),
    ApiEntry(31, "DeleteAcls", "delete_acls", 1, 3),
    ApiEntry(32, "DescribeConfigs", "describe_configs", 1, 4),
    ApiEntry(33, "AlterConfigs", "alter_configs", 0, 2),
    ApiEntry(35, "DescribeLogDirs", "describe_log_dirs", 1, 4),
    ApiEntry(36, "SaslAuthenticate", "sasl_authenticate", 0, 2),
    ApiEntry(37, "CreatePartitions", "create_partitions", 0, 3),
    ApiEntry(42, "DeleteGroups", "delete_groups", 0, 2),
    ApiEntry(43, "ElectLeaders", "elect_leaders", 0, 2),
    ApiEntry(44, "IncrementalAlterConfigs", "incremental_alter_configs", 0, 1),
    ApiEntry(45, "AlterPartitionReassignments", "alter_partition_reassignments", 0, 1),
    ApiEntry(46, "ListPartitionReassignments", "list_partition_reassignments", 0, 0),
    ApiEntry(47, "OffsetDelete", "offset_delete", 0, 0),
    ApiEntry(48, "DescribeClientQuotas", "describe_client_quotas", 0, 1),
    ApiEntry(49, "AlterClientQuotas", "alter_client_quotas", 0, 1),
    ApiEntry(50, "DescribeUserScramCredentials", "describe_user_scram_credentials", 0, 0),
    ApiEntry(51, "AlterUserScramCredentials", "alter_user_scram_credentials", 0, 0),
    ApiEntry(60, "DescribeCluster", "describe_cluster", 0, 1),
    ApiEntry(61, "DescribeProducers", "describe_producers", 0, 0),
    ApiEntry(65, "DescribeTransactions", "describe_transactions", 0, 0),
    ApiEntry(66, "ListTransactions", "list_transactions", 0, 1),
    ApiEntry(68, "ConsumerGroupHeartbeat", "consumer_group_heartbeat", 0, 1),
    ApiEntry(69, "ConsumerGroupDescribe", "consumer_group_describe", 0, 1),
    ApiEntry(75, "DescribeTopicPartitions", "describe_topic_partitions", 0, 0),
    ApiEntry(76, "ShareGroupHeartbeat", "share_group_heartbeat", 1, 1),
    ApiEntry(77, "ShareGroupDescribe", "share_group_describe", 1, 1),
    ApiEntry(78, "ShareFetch", "share_fetch", 1, 2),
    ApiEntry(79, "ShareAcknowledge", "share_acknowledge", 1, 2),
    ApiEntry(88, "StreamsGroupHeartbeat", "streams_group_heartbeat", 0, 0),
    ApiEntry(89, "StreamsGroupDescribe", "streams_group_describe", 0, 0),
    ApiEntry(90, "DescribeShareGroupOffsets", "describe_share_group_offsets", 0, 1),
    ApiEntry(91, "AlterShareGroupOffsets", "alter_share_group_offsets", 0, 0),
    ApiEntry(92, "DeleteShareGroupOffsets", "delete_share_group_offsets", 0, 0),
)
