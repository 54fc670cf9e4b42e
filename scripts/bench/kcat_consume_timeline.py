"""Where the time of ``kcat -C`` goes, broker by broker: the kcat consume row of docs/latency.md.

    .venv/bin/python scripts/bench/kcat_consume_timeline.py [--brokers tidelog,kafka]
        [--records 1000000] [--runs 5]

Starts each broker (as ``scripts/bench/run`` does), fills one partition with ``--records``
100 B records through ``kcat -P`` (the suite's fill), then runs the suite's ``kcat -C -e``
(``fetch.wait.max.ms=10``) ``--runs`` times per broker, the brokers taking turns run by run,
with librdkafka's own timeline on (``debug=fetch,msg``: a millisecond time stamp when a Fetch
is sent, when its answer is handled, and when its records are queued for the application).
Per run it splits the wall time into:

- ``broker``: from each Fetch sent to its answer handled (the broker's work, the socket and the
  client's receive): the only part a broker's code can change;
- ``parse``: from the answer handled to its records queued (librdkafka's parse of ~1 MiB);
- ``stalls``: librdkafka's own flow control: when more than ``queued.min.messages`` (100,000)
  records wait for the application (kcat's printing thread), the partition stops being
  fetchable and librdkafka fetches again only after a back-off of a few hundred milliseconds.
  A broker that answers sooner fills that queue sooner.

It prints, per broker, the medians of the runs (wall, broker, parse, stalls, fetches) and the
broker's milliseconds per Fetch; and the runs without a stall apart. The debug output costs
the client some CPU, so the wall times here run above the suite's ``consume-kcat``; the split is
what this script is for.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import servers  # noqa: E402
import workloads as wl  # noqa: E402

TOPIC = "timeline"


@dataclass(frozen=True, slots=True)
class Run:
    """One ``kcat -C`` run, split by librdkafka's time stamps (seconds)."""

    wall_s: float
    fetches: int
    broker_s: float
    parse_s: float
    stalls: int
    stall_s: float


def split_timeline(debug_lines: list[str], wall_s: float) -> Run:
    """Reads librdkafka's ``debug=fetch,msg`` lines (``%7|<epoch s>|FETCH|...``) of one run."""
    events: list[tuple[str, float]] = []
    stalls = 0
    for line in debug_lines:
        fields = line.split("|", 3)
        if len(fields) < 4:
            continue
        try:
            at = float(fields[1])
        except ValueError:
            continue
        text = fields[3]
        if "Fetch topic" in text:
            events.append(("sent", at))
        elif "MessageSet size" in text:
            events.append(("answered", at))
        elif "Enqueue" in text:
            events.append(("queued", at))
        elif "is not fetchable" in text and "state active" in text:
            stalls += 1
    broker_s = parse_s = stall_s = 0.0
    for (kind, at), (next_kind, next_at) in itertools.pairwise(events):
        if kind == "sent" and next_kind == "answered":
            broker_s += next_at - at
        elif kind == "answered" and next_kind == "queued":
            parse_s += next_at - at
        elif kind == "queued" and next_kind == "sent" and next_at - at > 0.05:
            stall_s += next_at - at
    fetches = sum(1 for kind, _ in events if kind == "sent")
    return Run(wall_s, fetches, broker_s, parse_s, stalls, stall_s)


def kcat_consume_run(bootstrap: str, count: int) -> Run:
    """The suite's ``kcat -C -e`` (``workloads.kcat_consume``) with librdkafka's time stamps."""
    figures = wl.kcat_consume(bootstrap, TOPIC, count, time_limit=300.0, debug="fetch,msg")
    return split_timeline(figures["debug_lines"], figures["seconds"])


def report(name: str, runs: list[Run]) -> str:
    def med(values: list[float]) -> float:
        return statistics.median(values) if values else float("nan")

    calm = [r for r in runs if r.stalls == 0]
    per_fetch_ms = med([1000 * r.broker_s / r.fetches for r in runs if r.fetches])
    lines = [
        f"{name}: {len(runs)} runs, wall {med([r.wall_s for r in runs]):.3f} s, "
        f"broker {med([r.broker_s for r in runs]):.3f} s ({per_fetch_ms:.2f} ms per Fetch), "
        f"parse {med([r.parse_s for r in runs]):.3f} s, "
        f"stalls {sum(r.stalls for r in runs)} ({med([r.stall_s for r in runs]):.3f} s), "
        f"fetches {med([float(r.fetches) for r in runs]):.0f}",
        f"  runs without a stall: {len(calm)}, wall {med([r.wall_s for r in calm]):.3f} s",
        "  each run (wall / broker / parse / stall s): "
        + ", ".join(
            f"{r.wall_s:.2f}/{r.broker_s:.2f}/{r.parse_s:.2f}/{r.stall_s:.2f}" for r in runs
        ),
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--brokers", default="tidelog,kafka")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    names = [n for n in args.brokers.split(",") if n]
    available = servers.available_servers()
    with tempfile.TemporaryDirectory(prefix="kcat-timeline-") as tmp:
        work = Path(tmp)
        messages = work / "messages"
        wl.make_message_file(messages, args.records, 100)
        started: list[servers.Server] = []
        try:
            for name in names:
                if available.get(name) != "ok":
                    print(f"{name}: skipped ({available.get(name, 'unknown broker')})")
                    continue
                server = servers.make_server(name, work / name)
                server.start()
                started.append(server)
                wl.create_topic(server.bootstrap, TOPIC)
                wl.kcat_produce(server.bootstrap, TOPIC, messages, args.records, 100)
            results: dict[str, list[Run]] = {s.name: [] for s in started}
            for _ in range(args.runs):
                for server in started:
                    results[server.name].append(kcat_consume_run(server.bootstrap, args.records))
        finally:
            for server in started:
                server.stop()
    for name, runs in results.items():
        print(report(name, runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
