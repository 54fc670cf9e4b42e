"""What the coordinator answers: plain values, free of any wire version.

Handlers turn these into the kio response of the version they were asked in.
"""

from __future__ import annotations

from dataclasses import dataclass

from kio.schema.errors import ErrorCode

UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1


@dataclass(frozen=True, slots=True)
class Protocol:
    """One protocol a member supports (name, e.g. "range", and its opaque metadata)."""

    name: str
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinedMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupResult:
    error: ErrorCode
    member_id: str = UNKNOWN_MEMBER_ID
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    members: tuple[JoinedMember, ...] = ()


@dataclass(frozen=True, slots=True)
class SyncGroupResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class MemberIdentity:
    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class LeaveMemberResult:
    member_id: str
    group_instance_id: str | None
    error: ErrorCode


@dataclass(frozen=True, slots=True)
class LeaveGroupResult:
    error: ErrorCode
    members: tuple[LeaveMemberResult, ...] = ()


@dataclass(frozen=True, slots=True)
class PartitionOffset:
    """A committed offset as OffsetFetch reports it (offset -1: none committed)."""

    partition: int
    offset: int = -1
    leader_epoch: int = -1
    metadata: str | None = ""
    error: ErrorCode = ErrorCode.none


@dataclass(frozen=True, slots=True)
class TopicOffsets:
    topic: str
    partitions: tuple[PartitionOffset, ...]


@dataclass(frozen=True, slots=True)
class OffsetFetchResult:
    error: ErrorCode
    topics: tuple[TopicOffsets, ...] = ()


@dataclass(frozen=True, slots=True)
class CommitPartition:
    """One partition of an OffsetCommit request."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""


@dataclass(frozen=True, slots=True)
class PartitionError:
    topic: str
    partition: int
    error: ErrorCode


@dataclass(frozen=True, slots=True)
class OffsetDeleteResult:
    error: ErrorCode
    partitions: tuple[PartitionError, ...] = ()


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    #: Kafka's GroupType name: "classic" (JoinGroup/SyncGroup) or "consumer" (KIP-848).
    group_type: str = "classic"


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class DescribedGroup:
    group_id: str
    error: ErrorCode
    state: str = "Dead"
    protocol_type: str = ""
    protocol_data: str = ""
    members: tuple[DescribedMember, ...] = ()


class Refused(Exception):
    """A heartbeat or commit of a consumer or streams group refused with ``error`` (answered to
    the member with ``message``)."""

    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message
