"""Many partitions on one broker: create, produce, fetch, descriptors, memory, restarts.

    .venv/bin/python scripts/bench/partitions.py [--topics 20] [--partitions 1000] [--json]
    scripts/bench/run --only partitions          # the same, inside the suite

One ``tidelog serve`` on a fresh log dir with its defaults (``log.open.files.max`` = half the
soft open-file limit, which serve raises to the hard limit), driven by confluent-kafka:

- ``create_s``: each CreateTopics of ``--partitions`` partitions (one topic per request), wall
  time from the request to its answer (min / median / max over the topics);
- ``metadata_ms``: Metadata for every topic (``list_topics()``, median of 5; the client's own
  parsing included);
- ``produce_s`` / ``fetch_s``: one record to every partition, round robin (acks=all: with the
  default ``flush.messages=1`` each is fsynced before its answer), then a consumer assigned to
  every partition reads each one back; every partition must answer;
- ``max_fds``: the broker's open descriptors (``/proc/<pid>/fd``), sampled every 50 ms through
  all of it, against its soft limit;
- ``rss_mb``: the broker's resident set after the fetch, and its peak (VmHWM);
- ``clean_restart_s`` / ``kill_restart_s``: SIGTERM, then a new ``tidelog serve`` on the same
  log dir until it answers ApiVersions; then the same after SIGKILL (recovery).

Goals of issue 20 for 20 x 1,000 on the 2-core machine: create <= 1.5 s, metadata <= 100 ms,
descriptors under the soft limit, clean restart <= 5 s, after SIGKILL <= 15 s, RSS <= 400 MB.
The machine is shared: the 1-minute load average is reported before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import startup

GOALS = {
    "create_s": 1.5,
    "metadata_ms": 100.0,
    "clean_restart_s": 5.0,
    "kill_restart_s": 15.0,
    "rss_mb": 400.0,
}


def _log(msg: str) -> None:
    print(f"bench partitions: {msg}", file=sys.stderr, flush=True)


def _fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def _soft_nofile(pid: int) -> int:
    with open(f"/proc/{pid}/limits") as f:
        for line in f:
            if line.startswith("Max open files"):
                return int(line.split()[3])
    return -1


class FdSampler:
    def __init__(self) -> None:
        self.pid = 0
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            if self.pid:
                self.peak = max(self.peak, _fds(self.pid))


class Serve:
    """One ``tidelog serve`` process on ``log_dir``."""

    def __init__(self, python: str, log_dir: Path, port: int) -> None:
        self.log_dir = log_dir
        self.port = port
        cmd = [
            *startup.tidelog_command(python),
            "--override",
            f"listeners=PLAINTEXT://127.0.0.1:{port}",
            "--override",
            f"log.dirs={log_dir}",
        ]
        self.log_path = log_dir.parent / f"serve-{time.time_ns()}.log"
        with open(self.log_path, "wb") as out:
            t0 = time.perf_counter()
            self.proc = subprocess.Popen(
                cmd,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=startup._env(),
                cwd=log_dir.parent,
            )
            if not startup.api_versions_answered(port, t0 + 600):
                self.proc.kill()
                raise RuntimeError(f"no ApiVersions answer within 600 s (see {self.log_path})")
            self.ready_s = time.perf_counter() - t0

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self, sig: int = signal.SIGTERM) -> float:
        t0 = time.perf_counter()
        self.proc.send_signal(sig)
        self.proc.wait(600)
        return time.perf_counter() - t0


def _create_topics(bootstrap: str, topics: int, partitions: int) -> list[float]:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.list_topics(timeout=30)  # connected before the clock starts
    times = []
    for t in range(topics):
        t0 = time.perf_counter()
        futures = admin.create_topics(
            [NewTopic(f"wide-{t}", num_partitions=partitions, replication_factor=1)],
            operation_timeout=120,
            request_timeout=300,
        )
        for future in futures.values():
            future.result(timeout=300)
        times.append(time.perf_counter() - t0)
        _log(f"topic wide-{t}: {partitions} partitions in {times[-1]:.2f} s")
    return times


def _metadata_ms(bootstrap: str, topics: int, partitions: int) -> list[float]:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.list_topics(timeout=30)
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        md = admin.list_topics(timeout=30)
        times.append((time.perf_counter() - t0) * 1000)
        seen = sum(len(md.topics[f"wide-{t}"].partitions) for t in range(topics))
        if seen != topics * partitions:
            raise RuntimeError(f"Metadata lists {seen} partitions, expected {topics * partitions}")
    return times


def _produce_round_robin(bootstrap: str, topics: int, partitions: int) -> float:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    failed: list[str] = []

    def report(err: Any, msg: Any) -> None:
        if err is not None:
            failed.append(f"{msg.topic()}-{msg.partition()}: {err}")

    t0 = time.perf_counter()
    for p in range(partitions):  # round robin: every topic's partition p, then p + 1
        for t in range(topics):
            producer.produce(
                f"wide-{t}", value=f"{t}/{p}".encode(), partition=p, on_delivery=report
            )
        producer.poll(0)
    if producer.flush(600) != 0:
        raise RuntimeError("the producer did not deliver everything within 600 s")
    elapsed = time.perf_counter() - t0
    if failed:
        raise RuntimeError(f"{len(failed)} produce(s) failed, e.g. {failed[:3]}")
    return elapsed


def _fetch_all(bootstrap: str, topics: int, partitions: int) -> float:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-partitions",
            "enable.auto.commit": False,
            "isolation.level": "read_uncommitted",
        }
    )
    consumer.assign(
        [TopicPartition(f"wide-{t}", p, 0) for t in range(topics) for p in range(partitions)]
    )
    seen: set[tuple[str, int]] = set()
    t0 = time.perf_counter()
    deadline = t0 + 600
    try:
        while len(seen) < topics * partitions and time.perf_counter() < deadline:
            for msg in consumer.consume(10_000, timeout=1.0):
                if msg.error() is None:
                    seen.add((msg.topic(), msg.partition()))
    finally:
        consumer.close()
    if len(seen) != topics * partitions:
        raise RuntimeError(f"fetched from {len(seen)} of {topics * partitions} partitions")
    return time.perf_counter() - t0


def measure(
    python: str = sys.executable, topics: int = 20, partitions: int = 1000
) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="tidelog-partitions-"))
    log_dir = workdir / "data"
    port = startup.free_port()
    sampler = FdSampler()
    sampler.start()
    load_before = os.getloadavg()
    serve: Serve | None = None
    try:
        serve = Serve(python, log_dir, port)
        sampler.pid = serve.pid
        bootstrap = f"127.0.0.1:{port}"
        soft = _soft_nofile(serve.pid)
        create = _create_topics(bootstrap, topics, partitions)
        metadata = _metadata_ms(bootstrap, topics, partitions)
        _log(f"metadata for every topic: median {statistics.median(metadata):.1f} ms")
        produce_s = _produce_round_robin(bootstrap, topics, partitions)
        _log(
            f"produced one record to each of {topics * partitions} partitions in {produce_s:.1f} s"
        )
        fetch_s = _fetch_all(bootstrap, topics, partitions)
        _log(f"fetched from every partition in {fetch_s:.1f} s")
        rss_mb = startup._rss_kb(serve.pid) / 1024
        hwm_mb = startup._rss_kb(serve.pid, "VmHWM") / 1024
        fds_loaded = _fds(serve.pid)
        stop_s = serve.stop()
        sampler.pid = 0
        serve = Serve(python, log_dir, port)
        sampler.pid = serve.pid
        clean_restart_s = serve.ready_s
        _log(f"clean restart: stop {stop_s:.1f} s, start to ApiVersions {clean_restart_s:.1f} s")
        rss_restarted_mb = startup._rss_kb(serve.pid) / 1024
        serve.stop(signal.SIGKILL)
        sampler.pid = 0
        serve = Serve(python, log_dir, port)
        sampler.pid = serve.pid
        kill_restart_s = serve.ready_s
        _log(f"restart after SIGKILL: start to ApiVersions {kill_restart_s:.1f} s")
        serve.stop()
        serve = None
    finally:
        sampler.stop()
        if serve is not None and serve.proc.poll() is None:
            serve.proc.kill()
        shutil.rmtree(workdir, ignore_errors=True)
    figures = {
        "topics": topics,
        "partitions_per_topic": partitions,
        "create_s_min": round(min(create), 3),
        "create_s": round(statistics.median(create), 3),
        "create_s_max": round(max(create), 3),
        "metadata_ms": round(statistics.median(metadata), 1),
        "metadata_ms_max": round(max(metadata), 1),
        "produce_s": round(produce_s, 2),
        "fetch_s": round(fetch_s, 2),
        "max_fds": sampler.peak,
        "fds_after_fetch": fds_loaded,
        "soft_nofile": soft,
        "rss_mb": round(rss_mb, 1),
        "peak_rss_mb": round(hwm_mb, 1),
        "rss_after_restart_mb": round(rss_restarted_mb, 1),
        "clean_stop_s": round(stop_s, 2),
        "clean_restart_s": round(clean_restart_s, 2),
        "kill_restart_s": round(kill_restart_s, 2),
    }
    met = {
        "create_s": figures["create_s_max"] <= GOALS["create_s"],
        "metadata_ms": figures["metadata_ms"] <= GOALS["metadata_ms"],
        "max_fds": figures["max_fds"] < soft,
        "clean_restart_s": figures["clean_restart_s"] <= GOALS["clean_restart_s"],
        "kill_restart_s": figures["kill_restart_s"] <= GOALS["kill_restart_s"],
        "rss_mb": figures["peak_rss_mb"] <= GOALS["rss_mb"],
    }
    return {
        "median": figures,
        "create_runs_s": [round(c, 3) for c in create],
        "metadata_runs_ms": [round(m, 1) for m in metadata],
        "met": met,
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
    }


def render(result: dict[str, Any]) -> str:
    f = result["median"]
    met = result["met"]

    def v(key: str) -> str:
        return "met    " if met[key] else "NOT met"

    n = f["topics"] * f["partitions_per_topic"]
    lines = [
        f"partitions: {f['topics']} topics x {f['partitions_per_topic']:,} partitions "
        f"({n:,}), one tidelog serve with its defaults",
        f"  CreateTopics of {f['partitions_per_topic']:,} partitions  "
        f"median {f['create_s']:.2f} s (min {f['create_s_min']:.2f}, max {f['create_s_max']:.2f})"
        f"  <= 1.5 s (every one)  {v('create_s')}",
        f"  Metadata for every topic               median {f['metadata_ms']:.1f} ms "
        f"(max {f['metadata_ms_max']:.1f})  <= 100 ms  {v('metadata_ms')}",
        f"  one record to every partition (acks=all, round robin)  {f['produce_s']:.1f} s; "
        f"fetched back from every partition in {f['fetch_s']:.1f} s",
        f"  open descriptors, peak                 {f['max_fds']:,} (soft limit "
        f"{f['soft_nofile']:,}; {f['fds_after_fetch']:,} after the fetch)  < soft limit  "
        f"{v('max_fds')}",
        f"  resident set after the fetch           {f['rss_mb']:.0f} MB (peak "
        f"{f['peak_rss_mb']:.0f} MB; {f['rss_after_restart_mb']:.0f} MB after a restart)  "
        f"<= 400 MB  {v('rss_mb')}",
        f"  clean restart (spawn -> ApiVersions)   {f['clean_restart_s']:.2f} s (the stop before "
        f"it: {f['clean_stop_s']:.2f} s)  <= 5 s  {v('clean_restart_s')}",
        f"  restart after SIGKILL                  {f['kill_restart_s']:.2f} s  <= 15 s  "
        f"{v('kill_restart_s')}",
        f"  1-minute load average: {result['loadavg_before'][0]:.2f} before, "
        f"{result['loadavg_after'][0]:.2f} after",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--topics", type=int, default=20)
    p.add_argument("--partitions", type=int, default=1000, help="partitions per topic")
    p.add_argument("--python", default=sys.executable, help="the venv's python (default: this one)")
    p.add_argument("--json", action="store_true", help="print the JSON too")
    args = p.parse_args(argv)
    result = measure(args.python, args.topics, args.partitions)
    print(render(result))
    if args.json:
        print(json.dumps(result, indent=2))
    return 0 if all(result["met"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
