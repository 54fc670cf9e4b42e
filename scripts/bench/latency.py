"""Latency and cost per request (issue 33), tidelog and the peers side by side in one run.

    .venv/bin/python scripts/bench/latency.py --runs 3
    .venv/bin/python scripts/bench/latency.py --runs 1 --brokers tidelog --no-peers-strace

One process per broker for the whole run; each run visits every broker (the order rotates
from run to run) and, for tidelog, both ack policies: ``page-cache`` (a topic with
``flush.messages=9223372036854775807``, as the peers, which never fsync) and ``durable`` (the
default: the ack waits for the group-commit fsync). Per broker and policy:

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


def rate_figures(server: servers.Server, topic: str, count: int) -> dict[str, Any]:
    cpu0 = server.cpu_seconds()
    result = wl.ck_produce(server.bootstrap, topic, count, 1024, acks="all", linger_ms=5)
    cpu = server.cpu_seconds() - cpu0
    return {"msgs_per_s": result["msgs_per_s"], "cpu_s_per_m": cpu / count * 1e6}


_STRACE_LINE = re.compile(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$")


def strace_figures(server: servers.Server, topic: str, count: int) -> dict[str, Any]:
    """Syscalls per sync produce, counted by ``strace -c -f -p`` over the whole loop (the
    client's connection set-up and metadata requests included: a few dozen calls in all)."""
    with tempfile.NamedTemporaryFile("r", suffix=".strace") as out:
        tracer = subprocess.Popen(
            ["strace", "-c", "-f", "-o", out.name, "-p", str(server.pid)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(1.0)  # attached to every thread
        try:
            wl.ck_sync_produce(server.bootstrap, topic, count, warmup=0)
        finally:
            tracer.send_signal(signal.SIGINT)
            tracer.wait(30)
        calls: dict[str, int] = {}
        for line in Path(out.name).read_text().splitlines():
            m = _STRACE_LINE.match(line)
            if m and m.group(2) != "total":
                calls[m.group(2)] = int(m.group(1))
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
    ap.add_argument("--brokers", default="tidelog,tansu,noida")
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
    labels = list(dict.fromkeys(r["label"] for r in report["runs"]))
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
    return "\n".join(out)


if __name__ == "__main__":
    raise SystemExit(main())
