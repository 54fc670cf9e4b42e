"""The sticky task assignor of streams groups (Kafka's ``StickyTaskAssignor``, simplified): every
active task goes to one member; a member keeps the tasks it had while it stays within its fair
share (the task count over the members, rounded up); the tasks left go to the least loaded
member. ``num_standby_replicas`` standby copies of each task go to members of other processes
than its active one, preferring those that had it, then the least loaded.

Kafka divergence: loads are balanced per member, not per process with its thread count; no
warm-up tasks (the task offsets and end offsets members report are not weighed).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["MemberSpec", "TaskAssignment", "Tasks", "assign_tasks"]

#: subtopology id -> partitions (task ids)
Tasks = Mapping[str, frozenset[int]]


@dataclass(frozen=True, slots=True)
class MemberSpec:
    process_id: str
    active: Tasks
    standby: Tasks


@dataclass(frozen=True, slots=True)
class TaskAssignment:
    active: Tasks
    standby: Tasks
    warmup: Tasks


def _flat(tasks: Tasks) -> set[tuple[str, int]]:
    return {(s, p) for s, ps in tasks.items() for p in ps}


def _group(tasks: set[tuple[str, int]]) -> dict[str, frozenset[int]]:
    out: dict[str, set[int]] = {}
    for s, p in tasks:
        out.setdefault(s, set()).add(p)
    return {s: frozenset(ps) for s, ps in sorted(out.items())}


def assign_tasks(
    task_counts: Mapping[str, int],
    members: Mapping[str, MemberSpec],
    num_standby_replicas: int,
) -> dict[str, TaskAssignment]:
    if not members:
        return {}
    all_tasks = sorted((s, p) for s, n in task_counts.items() for p in range(n))
    ids = sorted(members)
    quota = math.ceil(len(all_tasks) / len(ids)) if all_tasks else 0
    active: dict[str, set[tuple[str, int]]] = {m: set() for m in ids}
    owner: dict[tuple[str, int], str] = {}
    valid = set(all_tasks)
    for m in ids:
        for task in sorted(_flat(members[m].active) & valid):
            if task not in owner and len(active[m]) < quota:
                owner[task] = m
                active[m].add(task)
    for task in all_tasks:
        if task in owner:
            continue
        m = min(ids, key=lambda i: (len(active[i]), i))
        owner[task] = m
        active[m].add(task)
    standby: dict[str, set[tuple[str, int]]] = {m: set() for m in ids}
    if num_standby_replicas > 0:
        for task in all_tasks:
            active_process = members[owner[task]].process_id
            for _ in range(num_standby_replicas):
                candidates = [
                    m
                    for m in ids
                    if members[m].process_id != active_process
                    and task not in standby[m]
                    and task not in active[m]
                    and all(
                        members[o].process_id != members[m].process_id
                        for o in ids
                        if task in standby[o]
                    )
                ]
                if not candidates:
                    break
                m = min(
                    candidates,
                    key=lambda i: (
                        task not in _flat(members[i].standby),
                        len(standby[i]) + len(active[i]),
                        i,
                    ),
                )
                standby[m].add(task)
    return {
        m: TaskAssignment(active=_group(active[m]), standby=_group(standby[m]), warmup={})
        for m in ids
    }
