"""The group coordinators in process: CPU per steady-state heartbeat and per offset commit.

    .venv/bin/python scripts/bench/group_coordinator.py [--tree DIR] [--base-tree DIR]
        [--ops 20000] [--rounds 3] [--json]

One ``GroupCoordinator`` over an in-memory coordinator log (real encoded v2 batches, the high
watermark moved at once) and the event loop's timers, with the consumer (KIP-848) and streams
(KIP-1071) groups installed beside it as ``install(broker)`` wires them. Measured, in CPU
microseconds per operation (``time.process_time``, so the shared machine's load weighs less
than on a wall clock):

- ``consumer-heartbeat``: a member of a 4-member consumer group heartbeats at its epoch (no
  change, nothing written): the checks, the session timer, the reconciliation;
- ``streams-heartbeat``: the same for a 4-member streams group;
- ``offset-commit``: a simple group commits one partition (records encoded, appended, replayed);
- ``classic-heartbeat``: a member of a stable classic group heartbeats.

Beside the CPU time, ``<operation> calls``: the Python and C function calls one operation makes
(``sys.setprofile``, 100 operations), a figure the machine's load does not move.

With ``--base-tree`` each round runs the base tree and then this tree, each in its own
interpreter (``PYTHONPATH`` set to the tree), alternating, so both see the same load.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_CHILD = r"""
import asyncio, json, os, sys, time, uuid

OPS = int(sys.argv[1])

try:  # this tree: the tests' in-memory log lives in tests/support
    from tests.support.coordinator_log import MemoryCoordinatorLog
except ImportError:  # the trees before issue 40
    from tidelog.broker.coordinator.log import MemoryCoordinatorLog
from tidelog.broker.group.timer import LoopTimer
from tidelog.broker.group.config import GroupConfig
from tidelog.broker.group.coordinator import GroupCoordinator
from tidelog.broker.group.consumer.coordinator import ConsumerGroups
from tidelog.broker.group.consumer import heartbeat as chb
from tidelog.broker.group.streams import coordinator as scoord
from tidelog.broker.group.streams.topology import Subtopology, Topology
from tidelog.broker.group.membership import JoinRequest
from tidelog.broker.group.results import CommitPartition, Protocol

TOPIC_ID = uuid.uuid4()


def runtime_fields(coord, write):
    fields = dict(
        write=write,
        schedule=coord.timer.schedule,
        cancel=coord.timer.cancel,
        inactive_error=coord.metadata_log.inactive_error,
    )
    try:
        from tidelog.broker.group.modern import GroupRuntime
    except ImportError:
        return dict(fields, now_ms=coord.timer.now_ms)
    return {"runtime": GroupRuntime(**fields)}


async def main():
    config = GroupConfig(offsets_topic_num_partitions=1, initial_rebalance_delay_ms=0)
    log = MemoryCoordinatorLog(1)
    coord = GroupCoordinator(config, log, LoopTimer())
    await coord.start()

    def cwrite(group_id, records):
        return coord.metadata_log.write(group_id, records, replay=True, at_append=True)

    consumer = ConsumerGroups(chb.Host(
        **runtime_fields(coord, cwrite),
        classic_group_busy=lambda g: None,
        drop_classic_group=lambda g: None,
        topics=lambda: {"t": (TOPIC_ID, 8)},
        timeouts=lambda g: (45000, 5000),
        assignors=("uniform",),
        max_size=1000,
    ))
    coord.consumer_groups = consumer

    async def create(_topics):
        return None

    streams = scoord.StreamsGroups(scoord.Host(
        **runtime_fields(coord, lambda g, r: coord.metadata_log.write(g, r)),
        other_group=lambda g: False,
        partitions=lambda: {"t": 8},
        create_topics=create,
        settings=lambda g: (45000, 5000, 0),
        max_size=1000,
    ))
    coord.streams_groups = streams
    coord.offset_manager.streams_groups = streams

    def creq(member_id, epoch, owned):
        return chb.HeartbeatRequest(
            group_id="cg", member_id=member_id, member_epoch=epoch, instance_id=None,
            rack_id=None, rebalance_timeout_ms=30000 if epoch == 0 else -1,
            subscribed_topic_names=("t",) if epoch == 0 else None, subscribed_topic_regex=None,
            server_assignor=None, owned=owned, client_id="c", client_host="/127.0.0.1",
            api_version=1,
        )

    members = {}
    for i in range(4):
        r = await consumer.heartbeat(creq(f"m{i}", 0, {}))
        members[r.member_id] = r
    for _ in range(3):  # converge: every member acknowledges what it was given
        for mid in list(members):
            group = consumer.groups["cg"]
            m = group.members[mid]
            members[mid] = await consumer.heartbeat(creq(mid, m.member_epoch, m.assigned))
    mid = sorted(members)[0]
    m = consumer.groups["cg"].members[mid]
    steady = creq(mid, m.member_epoch, m.assigned)

    topology = Topology(epoch=1, subtopologies=(Subtopology("0", source_topics=("t",)),))

    def sreq(member_id, epoch, reported):
        return scoord.StreamsHeartbeat(
            group_id="sg", member_id=member_id, member_epoch=epoch,
            endpoint_information_epoch=0, instance_id=None, rack_id=None,
            rebalance_timeout_ms=30000 if epoch == 0 else -1,
            topology=topology if epoch == 0 else None, reported=reported,
            process_id="p-" + member_id if epoch == 0 else None, user_endpoint=None,
            client_tags=None, shutdown_application=False, client_id="c",
            client_host="/127.0.0.1",
        )

    from tidelog.broker.group.streams.model import TaskSet
    for i in range(4):
        await streams.heartbeat(sreq(f"s{i}", 0, TaskSet()))
    for _ in range(3):
        for sid in sorted(streams.groups["sg"].members):
            sm = streams.groups["sg"].members[sid]
            await streams.heartbeat(sreq(sid, sm.member_epoch, sm.assigned))
    sid = sorted(streams.groups["sg"].members)[0]
    sm = streams.groups["sg"].members[sid]
    ssteady = sreq(sid, sm.member_epoch, sm.assigned)

    # a stable classic group of one member
    join = await coord.join_group(JoinRequest(
        group_id="classic", member_id="", protocol_type="consumer",
        protocols=(Protocol("range", b""),), session_timeout_ms=30000,
        rebalance_timeout_ms=30000, group_instance_id=None, client_id="c",
        client_host="/127.0.0.1", require_known_member_id=False,
        supports_skip_assignment=False,
    ))
    await coord.sync_group("classic", join.generation_id, join.member_id, None, None, None,
                           {join.member_id: b""})

    out = {}

    async def measure(name, op):
        for _ in range(200):  # warm up
            await op()
        t0 = time.process_time()
        for _ in range(OPS):
            await op()
        out[name] = (time.process_time() - t0) / OPS * 1e6
        calls = [0]

        def count(frame, event, arg):
            if event in ("call", "c_call"):
                calls[0] += 1

        sys.setprofile(count)
        for _ in range(100):
            await op()
        sys.setprofile(None)
        out[name + " calls"] = calls[0] / 100

    async def cons():
        r = await consumer.heartbeat(steady)
        assert r.error == 0, r

    async def strm():
        r = await streams.heartbeat(ssteady)
        assert r.error == 0, r

    parts = [CommitPartition("t", 0, 10, leader_epoch=0, metadata="")]

    async def commit():
        r = await coord.commit_offsets("simple", -1, "", parts)
        assert r[0].error == 0, r

    async def classic():
        r = coord.heartbeat("classic", join.generation_id, join.member_id, None)
        assert r == 0, r

    await measure("consumer-heartbeat", cons)
    await measure("streams-heartbeat", strm)
    await measure("offset-commit", commit)
    await measure("classic-heartbeat", classic)
    print(json.dumps(out))
    os._exit(0)  # the session timers stay scheduled


asyncio.run(main())
"""


def run_tree(tree: Path, ops: int) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(ops)],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{tree}: {done.stderr.strip()}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", type=Path, default=ROOT)
    ap.add_argument("--base-tree", type=Path)
    ap.add_argument("--ops", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    trees = [("base", args.base_tree)] if args.base_tree else []
    trees.append(("after", args.tree))
    runs: dict[str, list[dict[str, float]]] = {name: [] for name, _ in trees}
    for _ in range(args.rounds):
        for name, tree in trees:
            runs[name].append(run_tree(tree, args.ops))
    best: dict[str, dict[str, float]] = {
        name: {k: min(r[k] for r in rs) for k in rs[0]} for name, rs in runs.items()
    }
    load = os.getloadavg()
    if args.json:
        print(json.dumps({"best_us": best, "runs": runs, "load": load}))
        return
    print(
        f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; CPU us/op, best of {args.rounds}"
    )
    names = list(best[trees[0][0]])
    print(f"{'operation':26}" + "".join(f"{n:>10}" for n, _ in trees))
    for op in names:
        print(f"{op:26}" + "".join(f"{best[n][op]:10.1f}" for n, _ in trees))


if __name__ == "__main__":
    main()
