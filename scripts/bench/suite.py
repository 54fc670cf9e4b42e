"""tidelog's benchmark suite, side by side with peer brokers. Run it as ``scripts/bench/run``.

    scripts/bench/run                        # every workload, 3 runs, tidelog + installed peers
    scripts/bench/run --quick                # small counts, 1 run (CI smoke)
    scripts/bench/run --only produce-kcat,sync-latency --runs 5 --brokers tidelog

Each workload runs ``--runs`` times against each broker (one broker process per broker for the
whole suite, a fresh topic per run); the table shows medians, the JSON in ``bench-results/``
every run, the machine, the date and the settings. Workloads:

  hardware        disk append (1 MiB writes, fsync every 64 MiB) and loopback TCP, MB/s
  produce-kcat    kcat -P -l, 100 B messages, acks=1, one partition: msgs/s, MB/s
  produce-ck      confluent-kafka, 1 KiB, acks=all, linger.ms=5: msgs/s
  produce-ck-100  confluent-kafka, 100 B, acks=1, linger.ms=5 (peers kcat cannot talk to)
  consume-kcat    kcat -C -e from the beginning: msgs/s
  consume-ck      confluent-kafka consumer (assign, no group) from the beginning: msgs/s
  sync-latency    one 100 B produce in flight (raw v7 requests), acks=1: p50/p99/p99.9
  sync-produce    confluent-kafka produce() + flush(), one 100 B record in flight, acks=all,
                  10,000 records on a topic with the broker's defaults (tidelog: durable acks,
                  the answer waits for the group-commit fsync): p50/p90/p99/p99.9/max and a
                  histogram
  sync-produce-plain
                  the same on a topic with flush.messages=9223372036854775807 (page-cache
                  acks, what the peers do); tidelog only
  e2e-latency     produce -> consume at a steady 10,000 msg/s (linger.ms=0): p50/p99/p99.9;
                  5 runs by default; min, median and max of every figure over the runs and
                  how many runs failed (a failed run is never left out silently); a topic
                  with the broker's defaults (tidelog: consumers see records once fsynced)
  e2e-latency-plain
                  the same on a topic with flush.messages=9223372036854775807; tidelog only
  produce-fsync   produce-kcat with acks=all on a topic with flush.messages=1 (fsync before
                  the ack); ratio to produce-kcat
  durable-100     durable vs plain produce, kcat -P -l, acks=all, 100 B: the default
                  (flush.messages=1, the ack waits for the group-commit fsync) against a topic
                  with flush.messages=9223372036854775807 (page-cache acks), back to back on
                  fresh topics; msgs/s of each and durable/plain
  durable-1k      the same with 1 KiB records (produce-ck's count)
  startup         tidelog only (startup.py): `tidelog serve` spawn -> first ApiVersions answer,
                  embedded tidelog.Broker().start(), idle RSS; median of 10 (--runs if more),
                  next to KIP-974's native-image and JVM figures
  partitions      tidelog only (partitions.py): 20 topics x 1,000 partitions (--quick: 2 x 500),
                  each CreateTopics timed, Metadata for every topic, one record produced to
                  every partition round robin and fetched back, peak descriptors against the
                  soft limit, RSS, clean restart and restart after SIGKILL (issue 20)

  loop-stall      tidelog only (loop_stall.py): one-record produce p50/p99/max while ~31 MiB
                  zstd batches stream to a compacted topic on another connection, and alone;
                  --runs runs of 10 s (3 s with --quick); target p99 <= 5 ms
  recovery        tidelog only (recovery.py): a 5 GB partition (0.3 GB with --quick), SIGKILL
                  while producing, time until `tidelog serve` serves again (ApiVersions,
                  Metadata, ListOffsets, a fetch of the last offset); target <= 2 s
The broker's resident set is sampled every 50 ms during each workload, and its peak (VmHWM)
is reported at the end. The broker's CPU time (utime + stime from /proc/<pid>/stat) is read
around each client run: ``broker_cpu_s`` per run, and for the 100 B produce and consume
workloads CPU seconds per million records (``cpu_s_per_m_records``), next to the peers'.

Every server listens on 127.0.0.1 only; every load loop is bounded by a count and a time.
The printed report (table of medians, targets, latency spreads) is built by ``report.py``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hardware
import loop_stall
import partitions
import recovery
import servers
import startup
import workloads as wl
from report import (
    LATENCY_WORKLOADS,
    OWN_RUN,
    SPREAD_KEYS,
    evaluate_targets,
    render,
)

ROOT = Path(__file__).resolve().parents[2]

WORKLOADS = (
    "hardware",
    "produce-kcat",
    "produce-ck",
    "produce-ck-100",
    "consume-kcat",
    "consume-ck",
    "sync-latency",
    "sync-produce",
    "sync-produce-plain",
    "e2e-latency",
    "e2e-latency-plain",
    "produce-fsync",
    "durable-100",
    "durable-1k",
    "startup",
    "partitions",
    "loop-stall",
    "recovery",
)
#: Runs per workload when --runs is not given (every other workload: DEFAULT_RUNS).
DEFAULT_RUNS = 3
RUNS_BY_WORKLOAD = {"e2e-latency": 5, "e2e-latency-plain": 5}


@dataclass(frozen=True)
class Counts:
    produce_kcat: int
    produce_ck: int
    produce_ck_100: int
    consume: int
    sync_latency: int
    sync_produce: int
    e2e_rate: int
    e2e_seconds: float
    e2e_warmup_s: float
    disk_mib: int
    loopback_mib: int


FULL = Counts(
    2_000_000, 500_000, 1_000_000, 2_000_000, 20_000, 10_000, 10_000, 10.0, 1.0, 1024, 2048
)
QUICK = Counts(20_000, 10_000, 20_000, 20_000, 500, 500, 2_000, 1.0, 0.2, 64, 128)


def log(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- RSS sampling


class RssSampler:
    """Samples the server's VmRSS every 50 ms; keeps the maximum per workload label."""

    def __init__(self, server: servers.Server, kill_above_kb: int | None = None) -> None:
        self.server = server
        self.label = "start"
        self.peaks: dict[str, int] = {}
        #: A peer that keeps everything in memory (noida-db) can grow by gigabytes on a
        #: shared machine: above this it is killed and its workload marked failed.
        self.kill_above_kb = kill_above_kb
        self.killed = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            if not self.server.alive():
                wl.ABORT.set()
                return
            kb = self.server.rss_kb()
            label = self.label
            if kb > self.peaks.get(label, 0):
                self.peaks[label] = kb
            if self.kill_above_kb is not None and kb > self.kill_above_kb and not self.killed:
                self.killed = f"killed: resident set {kb // 1024} MB passed the guard"
                log(f"{self.server.name}: {self.killed}")
                self.server.kill()
                wl.ABORT.set()


# --------------------------------------------------------------------------- one workload


class Context:
    def __init__(self, args: argparse.Namespace, workdir: Path, counts: Counts) -> None:
        self.args = args
        self.workdir = workdir
        self.counts = counts
        self.file_100 = workdir / "messages-100.txt"
        self.file_1k = workdir / "messages-1024.txt"
        self._prepared: dict[tuple[str, str], tuple[str, int]] = {}

    def message_file(self, count: int) -> Path:
        wl.make_message_file(self.file_100, count, 100)
        return self.file_100

    def message_file_1k(self, count: int) -> Path:
        wl.make_message_file(self.file_1k, count, 1024)
        return self.file_1k

    def topic(
        self, server: servers.Server, workload: str, configs: dict[str, str] | None = None
    ) -> str:
        name = f"bench-{workload}-{uuid.uuid4().hex[:8]}"
        wl.create_topic(server.bootstrap, name, configs)
        return name

    def filled_topic(self, server: servers.Server, count: int) -> tuple[str, int]:
        """A topic holding ``count`` 100 B messages (produced once per server, untimed);
        returns it and how many messages it really holds."""
        key = (server.name, str(count))
        if key in self._prepared:
            return self._prepared[key]
        topic = self.topic(server, "consume")
        if server.kcat_ok:
            wl.kcat_produce(server.bootstrap, topic, self.message_file(count), count, 100)
        else:
            wl.ck_produce(server.bootstrap, topic, count, 100, acks="1", linger_ms=5)
        self._prepared[key] = (topic, wl.end_offset(server.bootstrap, topic))
        return self._prepared[key]


def _per_record_cpu(
    server: servers.Server, count: int, run: Callable[[], dict[str, Any]]
) -> dict[str, Any]:
    """``run()`` with the broker's CPU seconds around it, also per million records."""
    before = server.cpu_seconds()
    figures = run()
    spent = server.cpu_seconds() - before
    figures["client_run_broker_cpu_s"] = round(spent, 3)
    figures["cpu_s_per_m_records"] = spent * 1e6 / count
    return figures


def run_workload(ctx: Context, server: servers.Server, name: str) -> dict[str, Any]:
    c = ctx.counts
    b = server.bootstrap
    if name == "produce-kcat":
        if not server.kcat_ok:
            raise Unsupported("kcat cannot talk to this broker")
        topic = ctx.topic(server, name)
        path = ctx.message_file(c.produce_kcat)
        return _per_record_cpu(
            server,
            c.produce_kcat,
            lambda: wl.kcat_produce(b, topic, path, c.produce_kcat, 100),
        )
    if name == "produce-fsync":
        if not server.kcat_ok:
            raise Unsupported("kcat cannot talk to this broker")
        if not server.fsync_config:
            raise Unsupported("no per-topic fsync setting")
        topic = ctx.topic(server, name, {"flush.messages": "1"})
        return wl.kcat_produce(
            b, topic, ctx.message_file(c.produce_kcat), c.produce_kcat, 100, acks="all"
        )
    if name in ("durable-100", "durable-1k"):
        if not server.kcat_ok:
            raise Unsupported("kcat cannot talk to this broker")
        if not server.fsync_config:
            raise Unsupported("no per-topic fsync setting")
        size = 100 if name == "durable-100" else 1024
        count = c.produce_kcat if size == 100 else c.produce_ck
        path = ctx.message_file(count) if size == 100 else ctx.message_file_1k(count)
        plain = wl.kcat_produce(
            b,
            ctx.topic(server, name, {"flush.messages": str(PLAIN_FLUSH_MESSAGES)}),
            path,
            count,
            size,
            acks="all",
        )
        # flush.messages=1 said explicitly: tidelog's default, not Kafka's
        durable_topic = ctx.topic(server, name, {"flush.messages": "1"})
        durable = wl.kcat_produce(b, durable_topic, path, count, size, acks="all")
        return {
            "msgs_per_s": durable["msgs_per_s"],
            "mb_per_s": durable["mb_per_s"],
            "plain_msgs_per_s": plain["msgs_per_s"],
            "ratio": durable["msgs_per_s"] / plain["msgs_per_s"],
            "command": durable["command"],
        }
    if name == "produce-ck":
        topic = ctx.topic(server, name)
        return wl.ck_produce(b, topic, c.produce_ck, 1024, acks="all", linger_ms=5)
    if name == "produce-ck-100":
        topic = ctx.topic(server, name)
        return _per_record_cpu(
            server,
            c.produce_ck_100,
            lambda: wl.ck_produce(b, topic, c.produce_ck_100, 100, acks="1", linger_ms=5),
        )
    if name == "consume-kcat":
        if not server.kcat_ok:
            raise Unsupported("kcat cannot talk to this broker")
        topic, count = ctx.filled_topic(server, c.consume)
        return _per_record_cpu(server, count, lambda: wl.kcat_consume(b, topic, count))
    if name == "consume-ck":
        topic, count = ctx.filled_topic(server, c.consume)
        return _per_record_cpu(server, count, lambda: wl.ck_consume(b, topic, count))
    if name == "sync-latency":
        topic = ctx.topic(server, name)
        return wl.sync_latency(b, topic, c.sync_latency)
    if name == "sync-produce":
        topic = ctx.topic(server, name)
        return wl.ck_sync_produce(b, topic, c.sync_produce)
    if name == "sync-produce-plain":
        if not server.fsync_config:
            raise Unsupported("acknowledges from memory already (see sync-produce)")
        topic = ctx.topic(server, name, {"flush.messages": str(PLAIN_FLUSH_MESSAGES)})
        return wl.ck_sync_produce(b, topic, c.sync_produce)
    if name == "e2e-latency":
        topic = ctx.topic(server, name)
        return wl.e2e_latency(b, topic, c.e2e_rate, c.e2e_seconds, warmup_s=c.e2e_warmup_s)
    if name == "e2e-latency-plain":
        if not server.fsync_config:
            raise Unsupported("acknowledges from memory already (see e2e-latency)")
        topic = ctx.topic(server, name, {"flush.messages": str(PLAIN_FLUSH_MESSAGES)})
        return wl.e2e_latency(b, topic, c.e2e_rate, c.e2e_seconds, warmup_s=c.e2e_warmup_s)
    raise ValueError(name)


#: Kafka's default flush.messages (never forced): page-cache acknowledgements.
PLAIN_FLUSH_MESSAGES = 2**63 - 1


class Unsupported(Exception):
    """The workload cannot run against this broker (shown as n/a, not as a failure)."""


def runs_for(args: argparse.Namespace, workload: str) -> int:
    """--runs when given, else the workload's default (1 with --quick)."""
    if args.runs is not None:
        return int(args.runs)
    if args.quick:
        return 1
    return RUNS_BY_WORKLOAD.get(workload, DEFAULT_RUNS)


def spread_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """min / median / max of each latency figure over the runs that finished, how many runs
    failed, and the runs' histograms added up."""
    ok = [r for r in runs if "error" not in r and "unsupported" not in r]
    out: dict[str, Any] = {"runs": len(runs), "failed": len(runs) - len(ok)}
    for key in SPREAD_KEYS:
        values = sorted(float(r[key]) for r in ok if key in r)
        if values:
            out[key] = {
                "min": values[0],
                "median": statistics.median(values),
                "max": values[-1],
                "runs": values,
            }
    merged: dict[float, int] = {}
    for r in ok:
        for bound, n in r.get("histogram_ms", ()):
            merged[float(bound)] = merged.get(float(bound), 0) + int(n)
    if merged:
        out["histogram_ms"] = sorted(merged.items())
    return out


def median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return {}
    out: dict[str, Any] = {}
    for key, value in ok[0].items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[key] = statistics.median(float(r[key]) for r in ok if key in r)
    return out


# --------------------------------------------------------------------------- the suite


def run_server(ctx: Context, name: str, selected: list[str]) -> dict[str, Any]:
    server = servers.make_server(name, ctx.workdir / name, tree=ctx.args.tree)
    result: dict[str, Any] = {"version": server.version(), "note": server.note, "workloads": {}}
    log(f"starting {name}")
    try:
        start_t0 = time.perf_counter()
        server.start()
        result["start_s"] = time.perf_counter() - start_t0
        result["rss_after_start_mb"] = server.rss_kb() / 1024
    except Exception as exc:
        result["error"] = f"did not start: {exc}"
        log(result["error"])
        return result
    result["vmhwm_after_start_mb"] = server.peak_rss_kb() / 1024
    guard = None if name == "tidelog" else int(ctx.args.peer_rss_limit_gb * 1024 * 1024)
    sampler = RssSampler(server, guard)
    sampler.start()
    try:
        for workload in selected:
            if workload in OWN_RUN:
                continue
            sampler.label = workload
            wl.ABORT.clear()
            runs: list[dict[str, Any]] = []
            for i in range(runs_for(ctx.args, workload)):
                if not server.alive():
                    runs.append({"error": "the broker died"})
                    break
                started = time.perf_counter()
                load_before = os.getloadavg()[0]
                cpu_before = server.cpu_seconds()
                try:
                    figures = run_workload(ctx, server, workload)
                except Unsupported as exc:
                    runs = [{"unsupported": str(exc)}]
                    log(f"{name} {workload}: n/a ({exc})")
                    break
                except Exception as exc:
                    figures = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
                if name == "tidelog" and figures.get("acked_not_in_log"):
                    figures["error"] = (
                        f"{figures['acked_not_in_log']} acked messages not in the log"
                    )
                if sampler.killed:
                    figures = {"error": sampler.killed}
                figures["wall_s"] = round(time.perf_counter() - started, 3)
                # The broker's own CPU time for the run (topic creation and checks included):
                # unlike rates, it barely moves when other work shares the machine.
                figures["broker_cpu_s"] = round(server.cpu_seconds() - cpu_before, 3)
                # Other work on the machine skews every figure: keep the 1-minute load average.
                figures["loadavg_1m"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
                runs.append(figures)
                log(f"{name} {workload} run {i + 1}: {_short(figures)}")
                if "error" in figures and name != "tidelog":
                    break  # a peer that failed once fails again: do not spend minutes on it
            entry: dict[str, Any] = {"runs": runs, "median": median_of(runs)}
            if workload in LATENCY_WORKLOADS:
                entry["spread"] = spread_of(runs)
            if runs and "unsupported" in runs[0]:
                entry = {"unsupported": runs[0]["unsupported"]}
            entry["peak_rss_mb"] = sampler.peaks.get(workload, 0) / 1024
            entry["vmhwm_after_mb"] = server.peak_rss_kb() / 1024 if server.alive() else None
            result["workloads"][workload] = entry
    finally:
        sampler.stop()
        result["peak_rss_mb"] = server.peak_rss_kb() / 1024 if server.alive() else None
        result["peak_rss_sampled_mb"] = max(sampler.peaks.values(), default=0) / 1024
        code = server.stop()
        result["exit_code"] = code
        if name == "tidelog" and code not in (0, None):
            log(f"tidelog exited {code}:\n{server.log_tail()}")
    return result


def _short(figures: dict[str, Any]) -> str:
    keys = (
        "msgs_per_s",
        "mb_per_s",
        "plain_msgs_per_s",
        "ratio",
        "p50_ms",
        "p99_ms",
        "p999_ms",
        "error",
    )
    return ", ".join(
        f"{k}={figures[k]:.4g}" if isinstance(figures[k], float) else f"{k}={figures[k]}"
        for k in keys
        if k in figures
    )


def run_hardware(ctx: Context) -> dict[str, Any]:
    runs = []
    for _ in range(runs_for(ctx.args, "hardware")):
        disk = hardware.disk_append(ctx.workdir, ctx.counts.disk_mib)
        net = hardware.loopback_tcp(ctx.counts.loopback_mib)
        runs.append(
            {"disk_append_mb_per_s": disk["mb_per_s"], "loopback_mb_per_s": net["mb_per_s"]}
        )
        log(f"hardware: disk {disk['mb_per_s']:.0f} MB/s, loopback {net['mb_per_s']:.0f} MB/s")
    return {"runs": runs, "median": median_of(runs)}


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="scripts/bench/run",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--quick", action="store_true", help="small counts and 1 run (CI smoke)")
    p.add_argument("--only", default="", help="comma-separated workloads (default: all)")
    p.add_argument(
        "--runs",
        type=int,
        default=None,
        help="runs per workload (default 3, e2e-latency 5; 1 with --quick)",
    )
    p.add_argument(
        "--brokers",
        default="",
        help="comma-separated: tidelog,tansu,noida,kafka (default: tidelog and every installed "
        "peer)",
    )
    p.add_argument(
        "--dir", type=Path, default=None, help="work directory (default: a new one in /tmp)"
    )
    p.add_argument("--out", type=Path, default=ROOT / "bench-results", help="where the JSON goes")
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    p.add_argument(
        "--peer-rss-limit-gb",
        type=float,
        default=4.0,
        help="kill a peer whose resident set passes this (default 4 GB; protects the machine)",
    )
    p.add_argument(
        "--tree",
        type=Path,
        default=None,
        help="run tidelog's code from this checkout (PYTHONPATH) - for experiments",
    )
    args = p.parse_args(argv)
    if args.runs is not None and args.runs < 1:
        p.error("--runs must be >= 1")
    selected = [w.strip() for w in args.only.split(",") if w.strip()] or list(WORKLOADS)
    unknown = [w for w in selected if w not in WORKLOADS]
    if unknown:
        p.error(f"unknown workload(s) {', '.join(unknown)}; choose from {', '.join(WORKLOADS)}")
    args.selected = [w for w in WORKLOADS if w in selected]
    available = servers.available_servers()
    if args.brokers:
        wanted = [b.strip() for b in args.brokers.split(",") if b.strip()]
        bad = [b for b in wanted if b not in available]
        if bad:
            p.error(f"unknown broker(s) {', '.join(bad)}; choose from {', '.join(available)}")
        missing = [b for b in wanted if available[b] != "ok"]
        if missing:
            p.error("; ".join(f"{b}: {available[b]}" for b in missing))
        args.broker_list = wanted
    else:
        args.broker_list = [b for b, why in available.items() if why == "ok"]
        for b, why in available.items():
            if why != "ok":
                log(f"peer {b} skipped: {why} (pip install '.[bench]')")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    counts = QUICK if args.quick else FULL
    if shutil.which("kcat") is None:
        log("kcat is not installed (apt-get install kcat); kcat workloads will fail")
    own_dir = args.dir is None
    workdir = Path(tempfile.mkdtemp(prefix="tidelog-bench-")) if own_dir else args.dir
    workdir.mkdir(parents=True, exist_ok=True)
    ctx = Context(args, workdir, counts)
    started = dt.datetime.now(dt.UTC)
    load = os.getloadavg()[0]
    if load > (os.cpu_count() or 1) * 0.5:
        log(
            f"the 1-minute load average is {load:.1f} on {os.cpu_count()} cores: other work "
            "on this machine will skew the figures"
        )
    results: dict[str, Any] = {
        "date": started.isoformat(timespec="seconds"),
        "machine": {**hardware.machine_info(), "loadavg_at_start": os.getloadavg()},
        "settings": {
            "quick": args.quick,
            "runs": args.runs,
            "runs_by_workload": {w: runs_for(args, w) for w in args.selected},
            "counts": counts.__dict__,
            "kcat_produce": {"acks": "1", **wl.KCAT_PRODUCE_SETTINGS},
            "produce_ck": {"size": 1024, "acks": "all", "linger.ms": 5},
            "produce_ck_100": {"size": 100, "acks": "1", "linger.ms": 5},
            "produce_fsync": {
                "topic": {"flush.messages": "1"},
                "acks": "all",
                **wl.KCAT_PRODUCE_SETTINGS,
            },
            "durable": {
                "plain_topic": {"flush.messages": str(PLAIN_FLUSH_MESSAGES)},
                "durable_topic": "broker defaults (flush.messages=1)",
                "acks": "all",
                **wl.KCAT_PRODUCE_SETTINGS,
            },
            "sync_latency": {"request": "Produce v7", "acks": 1, "size": 100, "warmup": 1000},
            "sync_produce": {
                "client": "confluent-kafka produce() + flush() per record",
                "acks": "all",
                "linger.ms": 0,
                "size": 100,
                "warmup": 1000,
                "plain_topic": {"flush.messages": str(PLAIN_FLUSH_MESSAGES)},
            },
            "e2e": {
                "producer": {"acks": "1", "linger.ms": 0},
                "consumer": {"fetch.wait.max.ms": 100},
            },
            "brokers": args.broker_list,
            "tidelog_tree": str(args.tree) if args.tree else None,
        },
        "workloads": args.selected,
        "servers": {},
    }
    try:
        if "hardware" in args.selected:
            results["hardware"] = run_hardware(ctx)
        if "startup" in args.selected:
            log("startup: tidelog serve and the embedded broker, 10+ runs each")
            results["startup"] = startup.measure(sys.executable, max(10, args.runs or 0))
        if "partitions" in args.selected:
            topics, per_topic = (2, 500) if args.quick else (20, 1000)
            log(f"partitions: {topics} topics x {per_topic} partitions on one tidelog serve")
            results["partitions"] = partitions.measure(sys.executable, topics, per_topic)
        if "loop-stall" in args.selected:
            runs = args.runs or DEFAULT_RUNS
            seconds = 3.0 if args.quick else 10.0
            log(f"loop-stall: {runs} run(s) of {seconds:.0f} s")
            results["loop-stall"] = [loop_stall.measure(seconds) for _ in range(runs)]
        if "recovery" in args.selected:
            runs = args.runs or DEFAULT_RUNS
            gb = 0.3 if args.quick else 5.0
            log(f"recovery: a {gb} GB partition, {runs} run(s) (needs {gb:.1f} GB of disk)")
            results["recovery"] = recovery.measure(gb, runs, args.dir)
        if any(w not in OWN_RUN for w in args.selected):
            for name in args.broker_list:
                results["servers"][name] = run_server(ctx, name, args.selected)
    finally:
        if own_dir and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    results["targets"] = evaluate_targets(results)
    results["duration_s"] = round((dt.datetime.now(dt.UTC) - started).total_seconds(), 1)
    args.out.mkdir(parents=True, exist_ok=True)
    out = (
        args.out / f"bench-{started.strftime('%Y%m%d-%H%M%S')}{'-quick' if args.quick else ''}.json"
    )
    out.write_text(json.dumps(results, indent=2, default=str) + "\n")
    print(render(results))
    print(f"\nresults: {out}")
    tl = results["servers"].get("tidelog")
    failed = tl is not None and (
        "error" in tl
        or any("error" in r for e in tl.get("workloads", {}).values() for r in e.get("runs", []))
        or tl.get("exit_code") not in (0, None)
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
