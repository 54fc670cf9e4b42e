"""What each Admin method of the Java client 4.4 gets from tidelog (tests/java/test_java_clients.py
checks it; docs/java-clients.md lists it): "ok", or the exception the client raises."""

from __future__ import annotations

_UNSUPPORTED = "UnsupportedVersionException"

# method -> (tidelog's answer, what a single-node Kafka 4.x broker answers, note)
ADMIN_ROWS: dict[str, tuple[str, str, str]] = {
    "createTopics": ("ok", "ok", ""),
    "listTopics": ("ok", "ok", ""),
    "describeTopics(names)": ("ok", "ok", ""),
    "describeTopics(ids)": ("ok", "ok", ""),
    "deleteTopics(names)": ("ok", "ok", ""),
    "deleteTopics(ids)": ("ok", "ok", ""),
    "describeConfigs(topic)": ("ok", "ok", ""),
    "describeConfigs(broker)": ("ok", "ok", ""),
    "incrementalAlterConfigs": ("ok", "ok", ""),
    "createPartitions": ("ok", "ok", ""),
    "deleteRecords": ("ok", "ok", ""),
    "listOffsets(earliest)": ("ok", "ok", ""),
    "listOffsets(latest)": ("ok", "ok", ""),
    "listOffsets(maxTimestamp)": ("ok", "ok", ""),
    "listOffsets(forTimestamp)": ("ok", "ok", ""),
    "listOffsets(earliestLocal)": ("ok", "ok", ""),
    # Kafka divergence: ListOffsets v9+ (latest tiered, -5) is not offered: no tiered storage.
    "listOffsets(latestTiered)": (_UNSUPPORTED, "ok (-1: no tiered storage)", "ListOffsets v1-8"),
    "describeLogDirs": ("ok", "ok", ""),
    "describeReplicaLogDirs": ("ok", "ok", ""),
    "describeCluster": ("ok", "ok", ""),
    "describeFeatures": (
        "ok",
        "ok",
        "group.version 1, share.version 1, streams.version 1, transaction.version 2",
    ),
    # Kafka divergence: features are fixed by the release (no UpdateFeatures).
    "updateFeatures": (_UNSUPPORTED, "ok", "features are fixed"),
    # Kafka divergence: no KRaft quorum to describe or change.
    "describeMetadataQuorum": (_UNSUPPORTED, "ok", "no KRaft quorum"),
    "listGroups": ("ok", "ok", ""),
    "listConsumerGroups": ("ok", "ok", ""),
    "describeConsumerGroups": ("ok", "ok", "classic and consumer groups"),
    "describeClassicGroups": ("ok", "ok", ""),
    # Share groups are served (docs/share-groups.md); the program asks about one that does not
    # exist, which both brokers answer with GROUP_ID_NOT_FOUND (tests/kafkaref checks describe).
    "describeShareGroups": (
        "GroupIdNotFoundException", "GroupIdNotFoundException", "a group that does not exist"),
    "describeStreamsGroups": ("GroupIdNotFoundException", "ok", "a group that does not exist"),
    "listConsumerGroupOffsets": ("ok", "ok", ""),
    "alterConsumerGroupOffsets": ("ok", "ok", ""),
    "deleteConsumerGroupOffsets": ("ok", "ok", ""),
    "listShareGroupOffsets": (
        "GroupIdNotFoundException", "GroupIdNotFoundException", "a group that does not exist"),
    "removeMembersFromConsumerGroup": (
        "UnknownMemberIdException", "UnknownMemberIdException", "an unknown member"),
    "deleteConsumerGroups": ("ok", "ok", ""),
    "listTransactions": ("ok", "ok", ""),
    "describeTransactions": ("ok", "ok", ""),
    "describeProducers": ("ok", "ok", ""),
    "abortTransaction": ("ok", "ok", "an open transaction"),
    "fenceProducers": ("ok", "ok", ""),
    "createAcls": ("SecurityDisabledException", "SecurityDisabledException", "no authorizer"),
    "describeAcls": ("SecurityDisabledException", "SecurityDisabledException", "no authorizer"),
    "deleteAcls": ("SecurityDisabledException", "SecurityDisabledException", "no authorizer"),
    "alterUserScramCredentials": ("ok", "ok", ""),
    "describeUserScramCredentials": ("ok", "ok", ""),
    # Kafka divergence: client quotas are not served.
    "describeClientQuotas": ("ok", "ok", ""),
    "alterClientQuotas": ("ok", "ok", ""),
    "electLeaders": ("ok", "ok", "per partition: election not needed"),
    "alterPartitionReassignments": (
        "NoReassignmentInProgressException", "NoReassignmentInProgressException",
        "cancel with none in progress"),
    "listPartitionReassignments": ("ok", "ok", ""),
    # Kafka divergence: one log dir per partition stays put (no AlterReplicaLogDirs).
    "alterReplicaLogDirs": (_UNSUPPORTED, "LogDirNotFoundException", "to a dir not in log.dirs"),
    # Kafka divergence: no delegation tokens (Kafka without them: DelegationTokenDisabled).
    "createDelegationToken": (_UNSUPPORTED, "DelegationTokenDisabledException", ""),
    "describeDelegationToken": (_UNSUPPORTED, "DelegationTokenDisabledException", ""),
    # Kafka divergence: ListConfigResources (KIP-1142) is not served.
    "listConfigResources": (_UNSUPPORTED, "ok", ""),
    # Kafka divergence: no controller quorum: broker registration and Raft voters are Kafka's.
    "unregisterBroker": (_UNSUPPORTED, "BrokerIdNotRegisteredException", "broker 1"),
    "addRaftVoter": (_UNSUPPORTED, "error from the controller quorum", ""),
    "removeRaftVoter": (_UNSUPPORTED, "error from the controller quorum", ""),
}  # fmt: skip

ADMIN_TABLE = {method: row[0] for method, row in ADMIN_ROWS.items()}
