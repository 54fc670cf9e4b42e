"""Restart times of a broker holding many small partitions, from one reusable log dir.

    .venv/bin/python scripts/bench/restart.py [--topics 20] [--partitions 1000] [--runs 2]
        [--template DIR] [--only clean|kill] [--tree DIR] [--json]

``partitions.py`` measures each restart once, at the end of a run of several minutes. This
bench builds the log dir once (kept under ``--template``, reused while its size matches) and
times ``tidelog serve`` from spawn to its first ApiVersions answer on fresh copies of it:

- ``clean``: the broker had created ``--topics`` x ``--partitions`` partitions (CreateTopics,
  confluent-kafka's AdminClient), received one record in each (acks=all) and was stopped with
  SIGTERM (clean-shutdown marker present);
- ``kill``: that log dir was started once more and the broker SIGKILLed as soon as it answered
  ApiVersions (as ``partitions.py`` does), so the next start recovers every partition's active
  segment.

To see where a start spends its time, profile ``LogManager.startup()`` in-process on a copy
(``py-spy record --format raw -- python <script>``; a profiler wrapped around ``tidelog serve``
here would be stopped by the SIGTERM meant for the broker). The 1-minute load average is
reported next to every figure: the machine is shared.
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
from pathlib import Path
from typing import Any

import partitions
import startup

DEFAULT_TEMPLATE = Path(tempfile.gettempdir()) / "tidelog-restart-template"


def _log(msg: str) -> None:
    print(f"bench restart: {msg}", file=sys.stderr, flush=True)


def _stamp(template: Path) -> Path:
    return template / "built.json"


def _copy(source: Path, target: Path) -> None:
    """Copy a log dir keeping sparse files sparse (an active segment's index files are
    preallocated to ``segment.index.bytes``: 20,000 of them would be 400 GB written out)."""
    subprocess.run(["cp", "-a", "--sparse=always", str(source), str(target)], check=True)


def build(python: str, template: Path, topics: int, per_topic: int) -> None:
    """Make ``template/clean`` and ``template/kill`` (skipped when they match already)."""
    stamp = _stamp(template)
    want = {"topics": topics, "partitions": per_topic}
    if stamp.exists() and json.loads(stamp.read_text()) == want:
        _log(f"reusing {template} ({topics} x {per_topic})")
        return
    shutil.rmtree(template, ignore_errors=True)
    template.mkdir(parents=True)
    work = template / "work"
    work.mkdir()
    port = startup.free_port()
    serve = partitions.Serve(python, work / "data", port)
    try:
        bootstrap = f"127.0.0.1:{port}"
        partitions._create_topics(bootstrap, topics, per_topic)
        partitions._produce_round_robin(bootstrap, topics, per_topic)
        serve.stop()
        _copy(work / "data", template / "clean")
        serve = partitions.Serve(python, work / "data", port)
        serve.stop(signal.SIGKILL)
        _copy(work / "data", template / "kill")
    finally:
        if serve.proc.poll() is None:
            serve.proc.kill()
    shutil.rmtree(work, ignore_errors=True)
    stamp.write_text(json.dumps(want))


def start_once(python: str, source: Path) -> dict[str, Any]:
    """Copy ``source`` and time one start on the copy (then stop it with SIGTERM)."""
    run_dir = Path(tempfile.mkdtemp(prefix="tidelog-restart-"))
    try:
        _copy(source, run_dir / "data")
        subprocess.run(["sync"], check=False)
        port = startup.free_port()
        load = os.getloadavg()[0]
        serve = partitions.Serve(python, run_dir / "data", port)
        cpu_ms = startup._cpu_ms(serve.pid)
        serve.stop()
        return {"start_s": round(serve.ready_s, 2), "cpu_s": round(cpu_ms / 1000, 2), "load": load}
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--topics", type=int, default=20)
    p.add_argument("--partitions", type=int, default=1000, help="partitions per topic")
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--template", type=Path, default=DEFAULT_TEMPLATE)
    p.add_argument("--only", choices=("clean", "kill"), help="one case only")
    p.add_argument("--python", default=sys.executable)
    p.add_argument(
        "--tree", type=Path, help="run tidelog from this source tree (A/B against an export)"
    )
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    startup.TREE = args.tree
    build(args.python, args.template, args.topics, args.partitions)
    results: dict[str, list[dict[str, Any]]] = {}
    for case in ("clean", "kill"):
        if args.only and case != args.only:
            continue
        results[case] = []
        for _ in range(args.runs):
            run = start_once(args.python, args.template / case)
            results[case].append(run)
            _log(
                f"{case}: start to ApiVersions {run['start_s']:.2f} s, broker CPU "
                f"{run['cpu_s']:.2f} s, load {run['load']:.2f}"
            )
    n = args.topics * args.partitions
    for case, runs in results.items():
        each = ", ".join(f"{r['start_s']:.2f} s at load {r['load']:.1f}" for r in runs)
        median = statistics.median(r["start_s"] for r in runs)
        cpu = statistics.median(r["cpu_s"] for r in runs)
        print(
            f"{case} start, {n:,} partitions: median {median:.2f} s ({each}); "
            f"broker CPU median {cpu:.2f} s"
        )
    if args.json:
        print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
