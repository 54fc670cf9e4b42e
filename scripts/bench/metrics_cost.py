"""Per-call cost of the metrics hooks on the request path (broker/metrics.py), in ns.

Loads ``broker/metrics.py`` of this checkout (or of ``--tree``, for A/B) and times the calls
the router, Produce and Fetch make per request: ``observe_request`` (plain, and with a
long-poll wait), ``topic_in`` and ``topic_out`` (when the tree has them). Best of
``--repeat`` runs of ``--number`` calls each.

    .venv/bin/python scripts/bench/metrics_cost.py
    .venv/bin/python scripts/bench/metrics_cost.py --tree /tmp/before
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=ROOT)
    parser.add_argument("--number", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    spec = importlib.util.spec_from_file_location("bench_metrics", args.tree / "broker/metrics.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_metrics"] = module
    spec.loader.exec_module(module)
    m = module.Metrics()
    calls = {"observe_request": "m.observe_request('Produce', 0.00003)"}
    if hasattr(m, "topic_in"):
        calls["observe_request waited"] = "m.observe_request('Fetch', 0.2, 0, 0.19)"
        calls["topic_in"] = "m.topic_in('orders', 1, 100)"
        calls["topic_out"] = "m.topic_out('orders', 100)"
    for name, stmt in calls.items():
        best = min(timeit.repeat(stmt, globals={"m": m}, number=args.number, repeat=args.repeat))
        print(f"{name:24s} {best / args.number * 1e9:6.0f} ns/call")
    return 0


if __name__ == "__main__":
    sys.exit(main())
