"""What the two heartbeat protocols share: consumer groups (KIP-848, ``group/consumer``) and
streams groups (KIP-1071, ``group/streams``). As Kafka's ``GroupMetadataManager`` serves
``consumerGroupHeartbeat`` and ``streamsGroupHeartbeat`` with the same helpers, each coordinator
composes these (no common base class):

- ``GroupRuntime``: what a coordinator uses of the classic coordinator's runtime - the writes
  to the group's ``__consumer_offsets`` partition, the keyed timer, whether it is loaded;
- ``check_heartbeat``, ``check_member_epoch``, ``check_capacity``: the request checks and the
  fencing of a heartbeat (Kafka's ``throwIfMemberEpochIsInvalid``), raising ``Refused``;
  ``group_not_found``: GROUP_ID_NOT_FOUND's message (heartbeats and the Describe APIs);
- ``MemberTimers``: a member's session and rebalance timers (Kafka's session and rebalance
  timeouts), keyed per group type, member by member;
- ``write_in_background``: the records of a change nobody waits for (a fencing, a deletion);
- ``offset_member_error``: the member check of OffsetCommit / OffsetFetch / TxnOffsetCommit
  (Kafka's ``validateOffsetCommit`` of a modern group).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from kio.schema.errors import ErrorCode

from tidelog.broker.coordinator.log import CoordinatorLogError, KeyValue
from tidelog.broker.group.results import Refused

__all__ = [
    "LEAVE_GROUP_MEMBER_EPOCH",
    "LEAVE_GROUP_STATIC_MEMBER_EPOCH",
    "GroupRuntime",
    "MemberTimers",
    "check_capacity",
    "check_heartbeat",
    "check_member_epoch",
    "group_not_found",
    "offset_member_error",
    "write_in_background",
]

#: A heartbeat's member epoch that leaves the group (Kafka's LEAVE_GROUP_MEMBER_EPOCH).
LEAVE_GROUP_MEMBER_EPOCH = -1
#: A static member's temporary leave (Kafka's LEAVE_GROUP_STATIC_MEMBER_EPOCH).
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


@dataclass(frozen=True, slots=True)
class GroupRuntime:
    """What a consumer or streams group coordinator uses of the classic coordinator."""

    #: append records to the group's partition (raises CoordinatorLogError); await for the HW
    write: Callable[[str, Sequence[KeyValue]], Awaitable[None]]
    schedule: Callable[[str, int, Callable[[], None]], None]
    cancel: Callable[[str], None]
    #: ErrorCode while the coordinator loads or is stopped, else None
    inactive_error: Callable[[], ErrorCode | None]


class _Member(Protocol):
    @property
    def member_epoch(self) -> int: ...


def check_heartbeat(
    group_id: str,
    member_id: str,
    instance_id: str | None,
    member_epoch: int,
    rebalance_timeout_ms: int,
    *,
    member_id_always: bool,
) -> None:
    """The checks every heartbeat gets (raising ``Refused`` INVALID_REQUEST); a join's
    protocol-specific checks follow. ``member_id_always``: the client picks its member id
    (streams), else only a member past its join names one (consumer)."""
    if not group_id:
        raise Refused(ErrorCode.invalid_request, "GroupId can't be empty.")
    if instance_id is not None and not instance_id:
        raise Refused(ErrorCode.invalid_request, "InstanceId can't be empty.")
    if (member_id_always or member_epoch > 0) and not member_id:
        raise Refused(ErrorCode.invalid_request, "MemberId can't be empty.")
    if member_epoch == 0:
        if rebalance_timeout_ms == -1:
            raise Refused(
                ErrorCode.invalid_request, "RebalanceTimeoutMs must be provided in first request."
            )
    elif member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        raise Refused(ErrorCode.invalid_request, f"MemberEpoch {member_epoch} is invalid.")
    if member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH and instance_id is None:
        raise Refused(ErrorCode.invalid_request, "InstanceId can't be null.")


def check_member_epoch(
    group_type: str,
    request_epoch: int,
    member_epoch: int,
    previous_member_epoch: int,
    lost_answer: Callable[[], bool] = lambda: True,
) -> None:
    """FENCED_MEMBER_EPOCH for an epoch above the member's, or below it unless it is the
    previous epoch of a member whose last answer was lost (``lost_answer``: the consumer
    protocol also wants the partitions it reports still assigned)."""
    if request_epoch > member_epoch:
        raise Refused(
            ErrorCode.fenced_member_epoch,
            f"The {group_type} group member has a greater member epoch ({request_epoch}) than "
            f"the one known by the group coordinator ({member_epoch}). The member must "
            "abandon all its partitions and rejoin.",
        )
    if request_epoch < member_epoch and not (
        request_epoch == previous_member_epoch and lost_answer()
    ):
        raise Refused(
            ErrorCode.fenced_member_epoch,
            f"The {group_type} group member has a smaller member epoch ({request_epoch}) than "
            f"the one known by the group coordinator ({member_epoch}). The member must "
            "abandon all its partitions and rejoin.",
        )


def group_not_found(group_id: str, group_type: str, other_type: bool) -> str:
    """GROUP_ID_NOT_FOUND's message: the id is a group of another type, or no group."""
    if other_type:
        return f"Group {group_id} is not a {group_type} group."
    return f"Group {group_id} not found."


def check_capacity(group_type: str, members: int, max_size: int) -> None:
    """GROUP_MAX_SIZE_REACHED when a new member would exceed ``max_size``."""
    if members >= max_size:
        raise Refused(
            ErrorCode.group_max_size_reached,
            f"The {group_type} group has reached its maximum capacity of {max_size} members.",
        )


def offset_member_error(
    members: Mapping[str, _Member], member_id: str | None, member_epoch: int
) -> ErrorCode:
    """An offset request naming a member: it must exist (UNKNOWN_MEMBER_ID) at its current
    epoch (STALE_MEMBER_EPOCH)."""
    member = members.get(member_id or "")
    if member is None:
        return ErrorCode.unknown_member_id
    if member_epoch != member.member_epoch:
        return ErrorCode.stale_member_epoch
    return ErrorCode.none


class MemberTimers:
    """A member's session timer (no heartbeat for the session timeout: fenced) and rebalance
    timer (partitions or tasks not revoked within the rebalance timeout: fenced), on the
    coordinator's keyed timer under ``<prefix>-session:<group>:<member>`` and
    ``<prefix>-rebalance:<group>:<member>``."""

    __slots__ = ("_cancel", "_prefix", "_schedule")

    def __init__(self, prefix: str, runtime: GroupRuntime) -> None:
        self._prefix = prefix
        self._schedule = runtime.schedule
        self._cancel = runtime.cancel

    def schedule_session(
        self, group_id: str, member_id: str, session_ms: int, expired: Callable[[], None]
    ) -> None:
        self._schedule(f"{self._prefix}-session:{group_id}:{member_id}", session_ms, expired)

    def schedule_rebalance(
        self, group_id: str, member_id: str, timeout_ms: int, expired: Callable[[], None]
    ) -> None:
        self._schedule(f"{self._prefix}-rebalance:{group_id}:{member_id}", timeout_ms, expired)

    def cancel_rebalance(self, group_id: str, member_id: str) -> None:
        self._cancel(f"{self._prefix}-rebalance:{group_id}:{member_id}")

    def cancel(self, group_id: str, member_id: str) -> None:
        """Both timers of a member that is gone."""
        self._cancel(f"{self._prefix}-session:{group_id}:{member_id}")
        self.cancel_rebalance(group_id, member_id)


def write_in_background(
    runtime: GroupRuntime, group_id: str, writes: Sequence[KeyValue], what: str, log: logging.Logger
) -> None:
    """Append the records of a change nobody waits for (a fencing on a timer, a deletion); a
    failed append is logged with ``what`` was written."""
    try:
        waiter = runtime.write(group_id, writes)
    except CoordinatorLogError as exc:
        log.warning("group %s: writing %s failed: %s", group_id, what, exc)
        return
    task = asyncio.ensure_future(waiter)
    task.add_done_callback(lambda t: t.cancelled() or t.exception())
