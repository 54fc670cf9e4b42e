"""Streams groups and their members (Kafka's ``StreamsGroup``, ``StreamsGroupMember``) and the
reconciliation of a member towards its target assignment (Kafka's streams
``CurrentAssignmentBuilder``): tasks the member must give up are revoked first (the member stays
at its epoch, state UNREVOKED_TASKS, until a heartbeat reports them gone); then it moves to the
target epoch and gets its target tasks, less active tasks another member still owns (state
UNRELEASED_TASKS until they are released)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from tidelog.broker.group.streams.assignor import TaskAssignment, Tasks
from tidelog.broker.group.streams.topology import ConfiguredTopology, Topology

__all__ = [
    "EMPTY_TASKS",
    "StreamsGroup",
    "StreamsMember",
    "TaskSet",
    "reconcile",
]

STABLE = "STABLE"
UNREVOKED_TASKS = "UNREVOKED_TASKS"
UNRELEASED_TASKS = "UNRELEASED_TASKS"


@dataclass(frozen=True, slots=True)
class TaskSet:
    """Active, standby and warm-up tasks (subtopology id -> partitions)."""

    active: Tasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)
    warmup: Tasks = field(default_factory=dict)

    def is_empty(self) -> bool:
        return not (_flat(self.active) or _flat(self.standby) or _flat(self.warmup))


EMPTY_TASKS = TaskSet()


def _flat(tasks: Tasks) -> set[tuple[str, int]]:
    return {(s, p) for s, ps in tasks.items() for p in ps}


def _group(tasks: set[tuple[str, int]]) -> dict[str, frozenset[int]]:
    out: dict[str, set[int]] = {}
    for s, p in tasks:
        out.setdefault(s, set()).add(p)
    return {s: frozenset(ps) for s, ps in sorted(out.items())}


@dataclass(frozen=True, slots=True)
class StreamsMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: str = STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    topology_epoch: int = -1
    process_id: str = ""
    user_endpoint: tuple[str, int] | None = None
    client_tags: tuple[tuple[str, str], ...] = ()
    assigned: TaskSet = EMPTY_TASKS
    revoking: TaskSet = EMPTY_TASKS


@dataclass(slots=True)
class StreamsGroup:
    group_id: str
    group_epoch: int = 0
    target_epoch: int = 0
    topology: Topology | None = None
    configured: ConfiguredTopology = field(default_factory=ConfiguredTopology)
    #: topic name -> partitions, of the topology's topics, as last seen
    metadata: dict[str, int] = field(default_factory=dict)
    members: dict[str, StreamsMember] = field(default_factory=dict)
    targets: dict[str, TaskAssignment] = field(default_factory=dict)
    endpoint_epoch: int = 0

    def state(self) -> str:
        """Kafka's StreamsGroupState names."""
        if not self.members:
            return "Empty"
        if self.topology is None or not self.configured.ready:
            return "NotReady"
        if self.group_epoch != self.target_epoch:
            return "Assigning"
        if any(
            m.member_epoch != self.target_epoch or m.state != STABLE for m in self.members.values()
        ):
            return "Reconciling"
        return "Stable"

    def active_owned_by_others(self, member_id: str) -> set[tuple[str, int]]:
        out: set[tuple[str, int]] = set()
        for m in self.members.values():
            if m.member_id != member_id:
                out |= _flat(m.assigned.active) | _flat(m.revoking.active)
        return out


def _target_set(target: TaskAssignment | None) -> TaskSet:
    if target is None:
        return EMPTY_TASKS
    return TaskSet(active=target.active, standby=target.standby, warmup=target.warmup)


def _reported_revoked(member: StreamsMember, reported: TaskSet | None) -> bool:
    if reported is None:
        return False
    return not (
        _flat(reported.active) & _flat(member.revoking.active)
        or _flat(reported.standby) & _flat(member.revoking.standby)
        or _flat(reported.warmup) & _flat(member.revoking.warmup)
    )


def reconcile(
    member: StreamsMember,
    target_epoch: int,
    target: TaskAssignment | None,
    owned_by_others: set[tuple[str, int]],
    reported: TaskSet | None,
) -> StreamsMember:
    """The member's next state (see the module docstring)."""
    if member.state == UNREVOKED_TASKS:
        if not _reported_revoked(member, reported):
            return member
        member = replace(member, state=STABLE, revoking=EMPTY_TASKS)
    elif member.member_epoch == target_epoch and member.state == STABLE:
        return member
    want = _target_set(target)
    current = member.assigned
    revoke = TaskSet(
        active=_group(_flat(current.active) - _flat(want.active)),
        standby=_group(_flat(current.standby) - _flat(want.standby)),
        warmup=_group(_flat(current.warmup) - _flat(want.warmup)),
    )
    if _flat(revoke.active) or _flat(revoke.standby) or _flat(revoke.warmup):
        keep = TaskSet(
            active=_group(_flat(current.active) & _flat(want.active)),
            standby=_group(_flat(current.standby) & _flat(want.standby)),
            warmup=_group(_flat(current.warmup) & _flat(want.warmup)),
        )
        return replace(member, state=UNREVOKED_TASKS, assigned=keep, revoking=revoke)
    active = _flat(want.active)
    withheld = active & owned_by_others
    assigned = TaskSet(active=_group(active - withheld), standby=want.standby, warmup=want.warmup)
    return replace(
        member,
        state=UNRELEASED_TASKS if withheld else STABLE,
        previous_member_epoch=member.member_epoch,
        member_epoch=target_epoch,
        assigned=assigned,
        revoking=EMPTY_TASKS,
    )
