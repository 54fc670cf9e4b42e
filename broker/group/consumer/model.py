"""Consumer groups (KIP-848): members, epochs, and the reconciliation of one member.

A group has a group epoch (bumped when membership, subscriptions or subscribed topic metadata
change), a target assignment computed for that epoch (its assignment epoch), and members, each
with a member epoch, the partitions it owns (``assigned``) and those it must give up
(``pending_revocation``).

``reconcile`` moves one member towards its target as Kafka's CurrentAssignmentBuilder does:

* STABLE at an older epoch: keep ``assigned & target``; partitions of ``assigned`` not in the
  target must be revoked first - while the member still reports owning them the member stays at
  its epoch in UNREVOKED_PARTITIONS with only the kept ones; partitions of the target still
  owned by another member (assigned or pending revocation there) are not given yet
  (UNRELEASED_PARTITIONS) - the member moves to the assignment epoch with what is free;
* UNREVOKED_PARTITIONS: once the heartbeat's owned partitions no longer include the revoked
  ones, reconcile again from epoch + 1;
* UNRELEASED_PARTITIONS: reconcile again (freed partitions are handed over).

States (Kafka's MemberState ids): 0 STABLE, 1 UNREVOKED_PARTITIONS, 2 UNRELEASED_PARTITIONS.
Group states (ConsumerGroupState): Empty, Assigning (group epoch above the assignment epoch),
Reconciling (a member not yet at the assignment epoch or not stable), Stable.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

STABLE = 0
UNREVOKED_PARTITIONS = 1
UNRELEASED_PARTITIONS = 2


Partitions = dict[uuid.UUID, frozenset[int]]


@dataclass(frozen=True, slots=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: int = STABLE
    assigned: Partitions = field(default_factory=dict)
    pending_revocation: Partitions = field(default_factory=dict)

    def subscription_key(self) -> tuple[object, ...]:
        return (
            self.instance_id,
            self.rack_id,
            self.client_id,
            self.client_host,
            self.subscribed_topic_names,
            self.subscribed_topic_regex,
            self.rebalance_timeout_ms,
            self.server_assignor,
        )


@dataclass(slots=True)
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    #: member id -> target partitions (at ``assignment_epoch``)
    target: dict[str, Partitions] = field(default_factory=dict)
    #: topic name -> (topic id, partition count) of the subscribed topics, as last stored
    subscribed_metadata: dict[str, tuple[uuid.UUID, int]] = field(default_factory=dict)

    @property
    def state(self) -> str:
        if not self.members:
            return "Empty"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.state != STABLE:
                return "Reconciling"
        return "Stable"

    def static_member(self, instance_id: str) -> ConsumerMember | None:
        for m in self.members.values():
            if m.instance_id == instance_id:
                return m
        return None

    def partition_epochs(self) -> dict[tuple[uuid.UUID, int], int]:
        """(topic id, partition) -> epoch of the member owning it (assigned or revoking)."""
        out: dict[tuple[uuid.UUID, int], int] = {}
        for m in self.members.values():
            for parts in (m.assigned, m.pending_revocation):
                for tid, ps in parts.items():
                    for p in ps:
                        out[(tid, p)] = m.member_epoch
        return out


def _owns_any(owned: Partitions | None, revoking: Partitions) -> bool:
    if owned is None:
        return True  # not told: assume the member still holds them
    return any(owned.get(tid, frozenset()) & ps for tid, ps in revoking.items())


def reconcile(
    member: ConsumerMember,
    target: Mapping[uuid.UUID, frozenset[int]],
    assignment_epoch: int,
    owned: Partitions | None,
    partition_epoch: Callable[[uuid.UUID, int], int],
) -> ConsumerMember:
    """The member's next state (Kafka's CurrentAssignmentBuilder.build)."""
    if member.state == STABLE:
        if member.member_epoch == assignment_epoch:
            return member
        return _next(member, member.member_epoch, target, assignment_epoch, owned, partition_epoch)
    if member.state == UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return member
        return _next(
            member, member.member_epoch + 1, target, assignment_epoch, owned, partition_epoch
        )
    return _next(member, member.member_epoch, target, assignment_epoch, owned, partition_epoch)


def _with_epoch(member: ConsumerMember, epoch: int, **changes: object) -> ConsumerMember:
    previous = member.member_epoch if epoch != member.member_epoch else member.previous_member_epoch
    return replace(member, member_epoch=epoch, previous_member_epoch=previous, **changes)  # type: ignore[arg-type]


def _next(
    member: ConsumerMember,
    member_epoch: int,
    target: Mapping[uuid.UUID, frozenset[int]],
    assignment_epoch: int,
    owned: Partitions | None,
    partition_epoch: Callable[[uuid.UUID, int], int],
) -> ConsumerMember:
    unreleased = False
    kept: Partitions = {}
    revoking: Partitions = {}
    adding: Partitions = {}
    for tid in set(target) | set(member.assigned):
        goal = target.get(tid, frozenset())
        current = member.assigned.get(tid, frozenset())
        keep = current & goal
        revoke = current - keep
        add = {p for p in goal - keep if partition_epoch(tid, p) == -1}
        if len(add) != len(goal - keep):
            unreleased = True
        if keep:
            kept[tid] = keep
        if revoke:
            revoking[tid] = revoke
        if add:
            adding[tid] = frozenset(add)
    if revoking and _owns_any(owned, revoking):
        return _with_epoch(
            member,
            member_epoch,
            state=UNREVOKED_PARTITIONS,
            assigned=kept,
            pending_revocation=revoking,
        )
    for tid, ps in adding.items():
        kept[tid] = kept.get(tid, frozenset()) | ps
    return _with_epoch(
        member,
        assignment_epoch,
        state=UNRELEASED_PARTITIONS if unreleased else STABLE,
        assigned=kept,
        pending_revocation={},
    )
