"""Latency and cost per request (issue 33), tidelog and the peers side by side in one run.

    .venv/bin/python scripts/bench/latency.py --runs 3
    .venv/bin/python scripts/bench/latency.py --runs 1 --brokers tidelog,kafka --strace 0

One process per broker for the whole run; each run visits every broker (the order rotates
from run to run) and, for tidelog, both ack policies: ``page-cache`` (a topic with
``flush.messages=9223372036854775807``, as the peers, which never fsync) and ``durable`` (the
default: the ack waits for the group-commit fsync). Apache Kafka, when Java and the jars of
``scripts/jvm-deps kafka`` are there, runs both too: its default (page-cache acks) and a topic
with ``flush.messages=1`` (an fsync per append before the ack). The goals compare tidelog with
the native peers (Tansu, noida-db). Per broker and policy:

- sync produce: confluent-kafka, one 100 B record in flight (``produce(); flush()``),
  acks=all: p50 / p99, and the broker's CPU time per request (utime + stime of its process
  tree over the timed loop, divided by the requests);
- 1 KiB acks=all: confluent-kafka, linger.ms=5, as fast as one client goes: msg/s and the
  broker's CPU seconds per million records;
- (first run only) ``strace -c -f -p`` on the broker during a shorter sync loop: syscalls per
  request, ``epoll_wait`` calls per request (event-loop iterations: the loop blocks or polls
  once per iteration) and ``futex`` calls per request (thread hand-offs).

Figures that depend on the load are printed as min / median over the runs; the counts do not.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import servers
import workloads as wl

PLAIN_FLUSH = str(2**63 - 1)
#: (broker, policy, topic configs)
POLICIES = {
    "tidelog": (("page-cache", {"flush.messages": PLAIN_FLUSH}), ("durable", {})),
    "tansu": (("memory", {}),),
    "noida": (("page-cache", {}),),
    # Apache Kafka (the reference broker, from scripts/jvm-deps' jars): its default flush policy
    # acknowledges from the page cache; flush.messages=1 fsyncs every append before the ack.
    "kafka": (("page-cache", {}), ("durable", {"flush.messages": "1"})),
}


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def sync_figures(server: servers.Server, topic: str, count: int, warmup: int) -> dict[str, Any]:
    cpu0 = server.cpu_seconds()
    result = wl.ck_sync_produce(server.bootstrap, topic, count, warmup=warmup)
    cpu = server.cpu_seconds() - cpu0
    return {
        "p50_ms": result["p50_ms"],
        "p99_ms": result["p99_ms"],
        "cpu_us_per_request": cpu / (count + warmup) * 1e6,
    }


#: The pause between two paced probe fsyncs: about what a sync produce spends between its
#: fsyncs (the client's round trip and the broker's work on a page-cache ack).
PACED_GAP_S = 0.0002


def fsync_figures(directory: Path, count: int = 1000) -> dict[str, Any]:
    """The disk's own cost of a durable ack: append 170 B (a sync produce's batch) + fsync,
    ``count`` times, p50 / p99, twice: back to back, and paced (a ``PACED_GAP_S`` sleep before
    each, as a sync produce leaves the disk idle between its fsyncs; on this machine's virtual
    disk an fsync after a pause costs more than one right after another). The goal (durable
    sync p99 <= fsync p99 + 0.3 ms) is shown against both."""
    figures: dict[str, Any] = {"label": "disk"}
    for name, gap_s in (("fsync", 0.0), ("paced_fsync", PACED_GAP_S)):
        path = directory / "fsync-probe"
        samples = []
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            chunk = b"x" * 170
            for _ in range(count):
                if gap_s:
                    time.sleep(gap_s)
                started = time.perf_counter_ns()
                os.write(fd, chunk)
                os.fsync(fd)
                samples.append((time.perf_counter_ns() - started) / 1e6)
        finally:
            os.close(fd)
            path.unlink()
        samples.sort()
        figures[f"{name}_p50_ms"] = samples[len(samples) // 2]
        figures[f"{name}_p99_ms"] = samples[int(len(samples) * 0.99)]
    return figures


def rate_figures(server: servers.Server, topic: str, count: int) -> dict[str, Any]:
    cpu0 = server.cpu_seconds()
    result = wl.ck_produce(server.bootstrap, topic, count, 1024, acks="all", linger_ms=5)
    cpu = server.cpu_seconds() - cpu0
    return {"msgs_per_s": result["msgs_per_s"], "cpu_s_per_m": cpu / count * 1e6}


_STRACE_LINE = re.compile(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$")


def syscall_counts(pid: int, work: Callable[[], object]) -> dict[str, int]:
    """System calls of process ``pid`` (every thread) while ``work()`` runs, by name, counted
    by ``strace -c -f -p``."""
    with tempfile.NamedTemporaryFile("r", suffix=".strace") as out:
        tracer = subprocess.Popen(
            ["strace", "-c", "-f", "-o", out.name, "-p", str(pid)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(1.0)  # attached to every thread
        try:
            work()
        finally:
            tracer.send_signal(signal.SIGINT)
            tracer.wait(30)
        calls: dict[str, int] = {}
        for line in Path(out.name).read_text().splitlines():
            m = _STRACE_LINE.match(line)
            if m and m.group(2) != "total":
                calls[m.group(2)] = int(m.group(1))
    return calls


def strace_figures(server: servers.Server, topic: str, count: int) -> dict[str, Any]:
    """Syscalls per sync produce, counted by ``strace -c -f -p`` over the whole loop (the
    client's connection set-up and metadata requests included: a few dozen calls in all)."""
    calls = syscall_counts(
        server.pid, lambda: wl.ck_sync_produce(server.bootstrap, topic, count, warmup=0)
    )
    total = sum(calls.values())
    epoll = sum(v for k, v in calls.items() if k.startswith("epoll"))
    top = sorted(calls.items(), key=lambda kv: -kv[1])[:8]
    return {
        "syscalls_per_request": total / count,
        "epoll_waits_per_request": epoll / count,
        "futex_per_request": calls.get("futex", 0) / count,
        "top": {k: round(v / count, 2) for k, v in top},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--brokers", default="tidelog,tansu,noida,kafka")
    ap.add_argument("--sync", type=int, default=3000, help="timed sync produces per run")
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--rate", type=int, default=100_000, help="1 KiB records per rate run")
    ap.add_argument("--strace", type=int, default=1000, help="sync produces under strace (0: none)")
    ap.add_argument("--only", default="sync,rate", help="sync,rate")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument(
        "--base-tree",
        type=Path,
        default=None,
        help="also run tidelog from this checkout (before/after in one run), as tidelog-base",
    )
    args = ap.parse_args(argv)
    only = set(args.only.split(","))
    available = servers.available_servers()
    names = [n for n in args.brokers.split(",") if available.get(n) == "ok"]
    for n in args.brokers.split(","):
        if n not in names:
            log(f"{n}: skipped ({available.get(n, 'unknown')})")
    workdir = Path(tempfile.mkdtemp(prefix="tidelog-latency-"))
    started: list[servers.Server] = []
    runs: list[dict[str, Any]] = []
    counts: dict[str, dict[str, Any]] = {}
    loads = [load()]
    try:
        for name in names:
            server = servers.make_server(name, workdir / name)
            server.start()
            started.append(server)
        if args.base_tree is not None:
            base = servers.Tidelog(
                "tidelog-base", workdir / "base", fsync_config=True, tree=args.base_tree
            )
            base.start()
            started.insert(0, base)
        for run in range(args.runs):
            order = started[run % len(started) :] + started[: run % len(started)]
            disk = {**fsync_figures(workdir), "run": run, "load": load()}
            log(json.dumps(disk))
            runs.append(disk)
            for server in order:
                for policy, configs in POLICIES[server.name.removesuffix("-base")]:
                    label = f"{server.name}/{policy}"
                    figures: dict[str, Any] = {"label": label, "run": run, "load": load()}
                    if "sync" in only:
                        topic = f"lat-sync-{policy}-{run}"
                        wl.create_topic(server.bootstrap, topic, configs or None)
                        figures.update(sync_figures(server, topic, args.sync, args.warmup))
                        if run == 0 and args.strace:
                            counts[label] = strace_figures(server, topic, args.strace)
                    if "rate" in only:
                        topic = f"lat-rate-{policy}-{run}"
                        wl.create_topic(server.bootstrap, topic, configs or None)
                        figures.update(rate_figures(server, topic, args.rate))
                    log(json.dumps(figures))
                    runs.append(figures)
            loads.append(load())
    finally:
        for server in started:
            server.stop()
    report = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "loads": loads,
        "versions": {s.name: s.version() for s in started},
        "runs": runs,
        "counts": counts,
    }
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    print(render(report))
    return 0


def _spread(values: list[float], fmt: str) -> str:
    if not values:
        return "-"
    return f"{fmt.format(min(values))} / {fmt.format(statistics.median(values))}"


def render(report: dict[str, Any]) -> str:
    labels = [lb for lb in dict.fromkeys(r["label"] for r in report["runs"]) if lb != "disk"]
    disk = [r for r in report["runs"] if r["label"] == "disk"]
    rows = [
        ("sync produce p50, ms", "p50_ms", "{:.3f}"),
        ("sync produce p99, ms", "p99_ms", "{:.3f}"),
        ("broker CPU per sync produce, us", "cpu_us_per_request", "{:.0f}"),
        ("1 KiB acks=all, msg/s", "msgs_per_s", "{:,.0f}"),
        ("broker CPU s per M records (1 KiB)", "cpu_s_per_m", "{:.2f}"),
    ]
    out = [
        f"latency.py, {report['date']}, load {' -> '.join(report['loads'])}, "
        f"min / median of {max(r['run'] for r in report['runs']) + 1} runs",
        "",
        "| figure | " + " | ".join(labels) + " |",
        "|---|" + "---:|" * len(labels),
    ]
    for title, key, fmt in rows:
        cells = [
            _spread([r[key] for r in report["runs"] if r["label"] == lb and key in r], fmt)
            for lb in labels
        ]
        if any(c != "-" for c in cells):
            out.append(f"| {title} | " + " | ".join(cells) + " |")
    paced_title = f"the same, paced ({PACED_GAP_S * 1e3:.1f} ms pause before each)"
    for title, prefix in (
        ("write 170 B + fsync on the same disk", "fsync"),
        (paced_title, "paced_fsync"),
    ):
        measured = [r for r in disk if f"{prefix}_p50_ms" in r]
        if measured:
            out.append(
                f"| {title}, p50 / p99, ms | "
                + _spread([r[f"{prefix}_p50_ms"] for r in measured], "{:.3f}")
                + " / "
                + _spread([r[f"{prefix}_p99_ms"] for r in measured], "{:.3f}")
                + " (min / median each) |"
                + " |" * (len(labels) - 1)
            )
    counts = report["counts"]
    for title, key in (
        ("syscalls per sync produce", "syscalls_per_request"),
        ("epoll_wait per sync produce (loop iterations)", "epoll_waits_per_request"),
        ("futex per sync produce (thread hand-offs)", "futex_per_request"),
    ):
        if counts:
            cells = [f"{counts[lb][key]:.1f}" if lb in counts else "-" for lb in labels]
            out.append(f"| {title} | " + " | ".join(cells) + " |")
    for lb, c in counts.items():
        out.append(f"\n{lb} syscalls per sync produce: {c['top']}")
    out.extend(goals(report["runs"], disk))
    return "\n".join(out)


def goals(runs: list[dict[str, Any]], disk: list[dict[str, Any]]) -> list[str]:
    """Issue 33's goals on the medians of this run (tidelog, not tidelog-base)."""

    def med(label: str, key: str) -> float | None:
        values = [r[key] for r in runs if r["label"] == label and key in r]
        return statistics.median(values) if values else None

    peers = [lb for lb in ("tansu/memory", "noida/page-cache") if med(lb, "p50_ms") is not None]
    out = ["", "goals (medians of this run):"]

    def verdict(name: str, value: float | None, limit: float | None, fmt: str, le: bool) -> None:
        if value is None or limit is None:
            out.append(f"- {name}: not measured")
            return
        met = value <= limit if le else value >= limit
        sign = "<=" if le else ">="
        out.append(
            f"- {name}: {fmt.format(value)} {sign} {fmt.format(limit)}: "
            + ("met" if met else "NOT met")
        )

    if peers:
        best_p50 = min(med(lb, "p50_ms") or 1e9 for lb in peers)
        best_p99 = min(med(lb, "p99_ms") or 1e9 for lb in peers)
        best_rate = max(med(lb, "msgs_per_s") or 0.0 for lb in peers)
        best_cpu = min(med(lb, "cpu_s_per_m") or 1e9 for lb in peers)
        # Issue 41: p50 and p99 each at most 1.5x the fastest peer's.
        verdict(
            "page-cache sync p50 <= 1.5x best peer",
            med("tidelog/page-cache", "p50_ms"),
            1.5 * best_p50,
            "{:.3f} ms",
            True,
        )
        verdict(
            "page-cache sync p99 <= 1.5x best peer",
            med("tidelog/page-cache", "p99_ms"),
            1.5 * best_p99,
            "{:.3f} ms",
            True,
        )
        verdict(
            "page-cache 1 KiB rate >= best peer",
            med("tidelog/page-cache", "msgs_per_s"),
            best_rate,
            "{:,.0f}/s",
            False,
        )
        verdict(
            "CPU per M records <= half the best peer",
            med("tidelog/page-cache", "cpu_s_per_m"),
            best_cpu / 2 if best_cpu < 1e9 else None,
            "{:.2f} s",
            True,
        )
    if disk:
        fsync_p99 = statistics.median(r["fsync_p99_ms"] for r in disk)
        verdict(
            "durable sync p99 <= fsync p99 + 0.3 ms (back-to-back fsyncs)",
            med("tidelog/durable", "p99_ms"),
            fsync_p99 + 0.3,
            "{:.3f} ms",
            True,
        )
        paced = [r["paced_fsync_p99_ms"] for r in disk if "paced_fsync_p99_ms" in r]
        if paced:
            verdict(
                "durable sync p99 <= fsync p99 + 0.3 ms (paced fsyncs, as a sync produce)",
                med("tidelog/durable", "p99_ms"),
                statistics.median(paced) + 0.3,
                "{:.3f} ms",
                True,
            )
    plain_rate = med("tidelog/page-cache", "msgs_per_s")
    verdict(
        "durable 1 KiB rate >= 90% of page-cache",
        med("tidelog/durable", "msgs_per_s"),
        0.9 * plain_rate if plain_rate else None,
        "{:,.0f}/s",
        False,
    )
    return out


if __name__ == "__main__":
    raise SystemExit(main())
