"""The suite's report: the table of medians, the targets' verdicts, the latency spreads.

``scripts/bench/suite.py`` measures and writes the JSON; this module turns that JSON into
the text ``scripts/bench/run`` prints.
"""

from __future__ import annotations

from typing import Any

import loop_stall
import partitions
import recovery
import startup

#: Workloads that do not run against each broker of the suite.
OWN_RUN = ("hardware", "startup", "partitions", "loop-stall", "recovery")
#: Latency workloads: min / median / max of every figure over the runs, failed runs counted.
LATENCY_WORKLOADS = (
    "sync-latency",
    "sync-produce",
    "sync-produce-plain",
    "e2e-latency",
    "e2e-latency-plain",
)
#: The figures of a latency workload shown as min / median / max over the runs.
SPREAD_KEYS = ("p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms")


TARGETS = {
    "produce-kcat": ">= 1,000,000 msg/s, ahead of every peer",
    "produce-ck": ">= 250,000 msg/s",
    "consume-kcat": ">= 1,000,000 msg/s",
    "sync-latency": "p99 <= 0.3 ms",
    "sync-produce": "p99 <= 0.15 ms in every run",
    "sync-produce-plain": "p99 <= 0.15 ms in every run",
    "e2e-latency": "p99 <= 0.4 ms and p99.9 <= 1 ms in every run, none failed",
    "e2e-latency-plain": "p99 <= 0.4 ms and p99.9 <= 1 ms in every run, none failed",
    "cpu-produce": "<= half of the best peer's CPU s per million 100 B records produced",
    "cpu-consume": "<= half of the best peer's CPU s per million 100 B records consumed",
    "produce-fsync": ">= 50% of produce-kcat",
    "durable-100": ">= 80% of the plain rate",
    "durable-1k": ">= 80% of the plain rate",
    "rss": "<= 150 MB",
}


def _fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    if unit == "ms":
        return f"{value:.3f} ms"
    if unit == "MB":
        return f"{value:,.0f} MB"
    if unit == "MB/s":
        return f"{value:,.0f} MB/s"
    if unit == "s":
        return f"{value:.3f} s" if value < 1 else f"{value:.2f} s"
    if unit == "%":
        return f"{value * 100:.0f}%"
    return f"{value:,.0f}"


Row = tuple[str, str, str, str]  # label, workload, key, unit


ROWS: list[Row] = [
    ("produce 100 B kcat, msgs/s", "produce-kcat", "msgs_per_s", ""),
    ("produce 100 B kcat, MB/s", "produce-kcat", "mb_per_s", "MB/s"),
    ("produce 1 KiB ck acks=all, msgs/s", "produce-ck", "msgs_per_s", ""),
    ("produce 100 B ck acks=1, msgs/s", "produce-ck-100", "msgs_per_s", ""),
    ("consume kcat, msgs/s", "consume-kcat", "msgs_per_s", ""),
    ("consume ck, msgs/s", "consume-ck", "msgs_per_s", ""),
    ("sync produce raw v7 acks=1 p50", "sync-latency", "p50_ms", "ms"),
    ("sync produce raw v7 acks=1 p99", "sync-latency", "p99_ms", "ms"),
    ("sync produce ck acks=all p50", "sync-produce", "p50_ms", "ms"),
    ("sync produce ck acks=all p99", "sync-produce", "p99_ms", "ms"),
    ("sync produce ck acks=all p99.9", "sync-produce", "p999_ms", "ms"),
    ("sync produce ck plain topic p50", "sync-produce-plain", "p50_ms", "ms"),
    ("sync produce ck plain topic p99", "sync-produce-plain", "p99_ms", "ms"),
    ("e2e 10k msg/s p50", "e2e-latency", "p50_ms", "ms"),
    ("e2e 10k msg/s p99", "e2e-latency", "p99_ms", "ms"),
    ("e2e 10k msg/s p99.9", "e2e-latency", "p999_ms", "ms"),
    ("e2e 10k msg/s plain topic p50", "e2e-latency-plain", "p50_ms", "ms"),
    ("e2e 10k msg/s plain topic p99", "e2e-latency-plain", "p99_ms", "ms"),
    ("e2e 10k msg/s plain topic p99.9", "e2e-latency-plain", "p999_ms", "ms"),
    ("produce fsync (acks=all), msgs/s", "produce-fsync", "msgs_per_s", ""),
    ("plain 100 B kcat acks=all, msgs/s", "durable-100", "plain_msgs_per_s", ""),
    ("durable 100 B kcat acks=all, msgs/s", "durable-100", "msgs_per_s", ""),
    ("durable / plain, 100 B", "durable-100", "ratio", "%"),
    ("plain 1 KiB kcat acks=all, msgs/s", "durable-1k", "plain_msgs_per_s", ""),
    ("durable 1 KiB kcat acks=all, msgs/s", "durable-1k", "msgs_per_s", ""),
    ("durable / plain, 1 KiB", "durable-1k", "ratio", "%"),
    ("broker CPU s / M records, produce kcat", "produce-kcat", "cpu_s_per_m_records", "s"),
    ("broker CPU s / M records, produce ck", "produce-ck-100", "cpu_s_per_m_records", "s"),
    ("broker CPU s / M records, consume kcat", "consume-kcat", "cpu_s_per_m_records", "s"),
    ("broker CPU s / M records, consume ck", "consume-ck", "cpu_s_per_m_records", "s"),
    ("broker CPU s, produce-kcat run", "produce-kcat", "broker_cpu_s", "s"),
    ("broker CPU s, sync-latency run", "sync-latency", "broker_cpu_s", "s"),
    ("broker CPU s, e2e-latency run", "e2e-latency", "broker_cpu_s", "s"),
]


def _cell(server: dict[str, Any], workload: str, key: str, unit: str) -> str:
    if "error" in server and not server.get("workloads"):
        return "no start"
    entry = server.get("workloads", {}).get(workload)
    if entry is None:
        return "-"
    if "unsupported" in entry:
        return "n/a"
    value = entry["median"].get(key)
    if value is None:
        return "error"
    mark = " *" if entry["median"].get("acked_not_in_log") else ""
    return _fmt(value, unit) + mark


def evaluate_targets(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    tl = results["servers"].get("tidelog", {})
    w = tl.get("workloads", {})

    def med(workload: str, key: str) -> float | None:
        value = w.get(workload, {}).get("median", {}).get(key)
        return float(value) if value is not None else None

    out: dict[str, dict[str, Any]] = {}
    produce = med("produce-kcat", "msgs_per_s")
    if produce is not None:
        peers = {
            n: s.get("workloads", {}).get("produce-kcat", {}).get("median", {}).get("msgs_per_s")
            for n, s in results["servers"].items()
            if n != "tidelog"
        }
        measured = {n: v for n, v in peers.items() if v is not None}
        ahead = all(produce > v for v in measured.values())
        out["produce-kcat"] = {
            "value": produce,
            "met": produce >= 1_000_000 and ahead,
            "peers": measured,
        }
    limits: tuple[tuple[str, str, float, float], ...] = (  # workload, key, at least, at most
        ("produce-ck", "msgs_per_s", 250_000, float("inf")),
        ("consume-kcat", "msgs_per_s", 1_000_000, float("inf")),
        ("sync-latency", "p99_ms", 0.0, 0.3),
    )
    for workload, key, low, high in limits:
        value = med(workload, key)
        if value is not None:
            out[workload] = {"value": value, "met": low <= value <= high}
    # Latency goals hold in every run: the worst run (a failed run fails the goal).
    every_run = {
        "sync-produce": (("p99_ms", 0.15),),
        "sync-produce-plain": (("p99_ms", 0.15),),
        "e2e-latency": (("p99_ms", 0.4), ("p999_ms", 1.0)),
        "e2e-latency-plain": (("p99_ms", 0.4), ("p999_ms", 1.0)),
    }
    for workload, goals in every_run.items():
        spread = w.get(workload, {}).get("spread")
        if not spread or spread["failed"] == spread["runs"]:
            continue
        worst = {key: spread[key]["max"] for key, _ in goals if key in spread}
        met = spread["failed"] == 0 and all(
            key in worst and worst[key] <= limit for key, limit in goals
        )
        out[workload] = {
            "value": worst.get("p99_ms", float("nan")),
            "worst": worst,
            "failed": spread["failed"],
            "runs": spread["runs"],
            "met": met,
        }
    for goal, workloads in (
        ("cpu-produce", ("produce-kcat", "produce-ck-100")),
        ("cpu-consume", ("consume-kcat", "consume-ck")),
    ):
        for workload in workloads:
            mine = med(workload, "cpu_s_per_m_records")
            peers = {
                n: s.get("workloads", {})
                .get(workload, {})
                .get("median", {})
                .get("cpu_s_per_m_records")
                for n, s in results["servers"].items()
                if n != "tidelog"
            }
            measured = {n: float(v) for n, v in peers.items() if v is not None}
            if mine is None or not measured:
                continue
            best = min(measured.values())
            out[f"{goal} ({workload})"] = {
                "value": mine,
                "peers": measured,
                "met": mine <= best / 2,
                "goal": goal,
            }
    fsync = med("produce-fsync", "msgs_per_s")
    if fsync is not None and produce:
        out["produce-fsync"] = {"value": fsync / produce, "met": fsync / produce >= 0.5}
    for workload in ("durable-100", "durable-1k"):
        ratio = med(workload, "ratio")
        if ratio is not None:
            out[workload] = {"value": ratio, "met": ratio >= 0.8}
    rss = tl.get("peak_rss_mb")
    if rss:
        out["rss"] = {"value": rss, "met": rss <= 150}
    return out


#: Issue 41's goals, each a ratio of tidelog to the best peer in the same run: (label, workload
#: for tidelog, workload for the peers, key, higher is better, the ratio that meets the goal).
#: Latencies compare tidelog's page-cache topic (``sync-produce-plain``) with the peers, which
#: never fsync; the whole run's CPU and peak RSS are summed or maxed over the workloads.
PEER_GOALS: tuple[tuple[str, str, str, str, bool, float], ...] = (
    ("kcat produce 100 B, msg/s", "produce-kcat", "produce-kcat", "msgs_per_s", True, 1.0),
    ("confluent-kafka 1 KiB acks=all, msg/s", "produce-ck", "produce-ck", "msgs_per_s", True, 1.0),
    ("kcat consume, msg/s", "consume-kcat", "consume-kcat", "msgs_per_s", True, 1.0),
    ("sync produce p50, ms", "sync-produce-plain", "sync-produce", "p50_ms", False, 1.5),
    ("sync produce p99, ms", "sync-produce-plain", "sync-produce", "p99_ms", False, 1.5),
)


def peer_ratios(results: dict[str, Any]) -> list[str]:
    """Issue 41's goal lines: tidelog against the best peer of this run, one line each."""
    servers = results["servers"]
    peers = [n for n in servers if n != "tidelog"]
    if "tidelog" not in servers or not peers:
        return []

    def med(name: str, workload: str, key: str) -> float | None:
        value = servers[name].get("workloads", {}).get(workload, {}).get("median", {}).get(key)
        return float(value) if isinstance(value, int | float) and value > 0 else None

    lines: list[str] = []
    for label, mine_w, peer_w, key, higher, limit in PEER_GOALS:
        mine = med("tidelog", mine_w, key)
        theirs = {n: v for n in peers if (v := med(n, peer_w, key)) is not None}
        if mine is None or not theirs:
            continue
        best_name = (max if higher else min)(theirs, key=lambda n: theirs[n])
        best = theirs[best_name]
        ratio = mine / best
        met = ratio >= limit if higher else ratio <= limit
        want = f">= {limit:g}x" if higher else f"<= {limit:g}x"
        shown = "{:,.3f}" if key.endswith("_ms") else "{:,.0f}"
        lines.append(
            f"{label}: tidelog {shown.format(mine)} / {best_name} {shown.format(best)} = "
            f"{ratio:.2f}x "
            f"(goal {want}): {'met' if met else 'NOT met'}"
        )

    def cpu_of(name: str) -> dict[str, float]:
        return {
            w: float(e["median"]["broker_cpu_s"])
            for w, e in servers[name].get("workloads", {}).items()
            if w not in OWN_RUN and e.get("median", {}).get("broker_cpu_s")
        }

    mine_cpu = cpu_of("tidelog")
    cpu_ratios: dict[str, tuple[float, float]] = {}
    for n in peers:
        common = set(mine_cpu) & set(theirs_cpu := cpu_of(n))
        if common:  # only the workloads both ran: a peer that cannot run one is not cheaper
            ours, their = sum(mine_cpu[w] for w in common), sum(theirs_cpu[w] for w in common)
            if their > 0:
                cpu_ratios[n] = (ours, their)
    if cpu_ratios:
        # the peer closest to us: ahead of it is ahead of all
        n = max(cpu_ratios, key=lambda k: cpu_ratios[k][0] / cpu_ratios[k][1])
        ours, their = cpu_ratios[n]
        lines.append(
            f"broker CPU, the workloads both ran, s: tidelog {ours:,.1f} / {n} {their:,.1f} = "
            f"{ours / their:.2f}x (goal <= 1x, stays ahead): "
            + ("met" if ours <= their else "NOT met")
        )
    rss = {n: servers[n].get("peak_rss_mb") for n in servers}
    mine_rss = rss.get("tidelog")
    theirs_rss = {n: float(v) for n in peers if (v := rss.get(n))}
    if mine_rss and theirs_rss:
        n = min(theirs_rss, key=lambda k: theirs_rss[k])
        ratio = float(mine_rss) / theirs_rss[n]
        lines.append(
            f"peak RSS, MiB: tidelog {float(mine_rss):,.0f} / {n} {theirs_rss[n]:,.0f} = "
            f"{ratio:.2f}x (goal <= 1x, stays ahead): {'met' if ratio <= 1 else 'NOT met'}"
        )
    return lines


def render_spreads(results: dict[str, Any]) -> str:
    """Latency workloads: min / median / max of each figure over the runs, failed runs, and
    the runs' latencies together as a histogram."""
    out: list[str] = []
    for name, server in results["servers"].items():
        for workload in LATENCY_WORKLOADS:
            spread = server.get("workloads", {}).get(workload, {}).get("spread")
            if not spread:
                continue
            out.append(
                f"{name} {workload}: {spread['runs']} runs, {spread['failed']} failed "
                "(min / median / max over the runs that finished)"
            )
            for key in SPREAD_KEYS:
                if key in spread:
                    f = spread[key]
                    label = key.removesuffix("_ms").replace("p999", "p99.9")
                    out.append(
                        f"  {label:6} {f['min']:9.3f} {f['median']:9.3f} {f['max']:9.3f} ms"
                        f"   runs: {' '.join(f'{v:.3f}' for v in f['runs'])}"
                    )
            histogram = spread.get("histogram_ms")
            if histogram:
                total = sum(n for _, n in histogram) or 1
                out.append("  histogram of every run's latencies:")
                low = 0.0
                for bound, n in histogram:
                    if n == 0:
                        low = bound
                        continue
                    upper = "inf" if bound == float("inf") else f"{bound:g}"
                    bar = "#" * max(1, round(50 * n / total)) if n else ""
                    out.append(f"    {f'{low:g}-{upper} ms':>14} {n:8d} {n / total:7.2%} {bar}")
                    low = bound
    return "\n".join(out)


def render(results: dict[str, Any]) -> str:
    names = list(results["servers"])
    hw = results.get("hardware", {}).get("median", {})
    disk = hw.get("disk_append_mb_per_s")
    net = hw.get("loopback_mb_per_s")
    header = ["metric (median)", *names]
    lines: list[list[str]] = []
    for label, workload, key, unit in ROWS:
        if workload not in results["workloads"]:
            continue
        lines.append([label, *(_cell(results["servers"][n], workload, key, unit) for n in names)])
    if any(w not in OWN_RUN for w in results["workloads"]):
        lines.append(
            [
                "broker peak RSS (VmHWM)",
                *(
                    _fmt(results["servers"][n].get("peak_rss_mb"), "MB")
                    if results["servers"][n].get("peak_rss_mb")
                    else "-"
                    for n in names
                ),
            ]
        )
    widths = [max(len(r[i]) for r in [header, *lines]) for i in range(len(header))]
    out = []
    for row in [header, *lines]:
        out.append(
            "  ".join(
                c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(row)
            )
        )
    out.insert(1, "-" * len(out[0]))
    text = "\n".join(out) if lines else ""
    if hw:
        text += f"\n\nmachine: disk append {_fmt(disk, 'MB/s')}, loopback TCP {_fmt(net, 'MB/s')}"
        tl = results["servers"].get("tidelog", {}).get("workloads", {})
        produce_mb = tl.get("produce-kcat", {}).get("median", {}).get("mb_per_s")
        if produce_mb and disk:
            text += f"; tidelog produce-kcat = {produce_mb / disk:.0%} of disk append"
        consume = tl.get("consume-kcat", {}).get("median", {}).get("msgs_per_s")
        if consume and net:
            # on the wire a 100 B message costs ~ 100 B value + ~8 B record overhead
            text += f", consume-kcat payload = {consume * 100 / 1e6 / net:.0%} of loopback TCP"
    targets = results.get("targets", {})
    if targets:
        text += "\n\ntidelog targets:"
        for key, t in targets.items():
            value = t["value"]
            shown = (
                f"{value:.0%}"
                if key in ("produce-fsync", "durable-100", "durable-1k")
                else f"{value:.3f} ms"
                if key.endswith("latency")
                else f"{value:.3f} s/M"
                if key.startswith("cpu-")
                else f"{value:,.0f} MB"
                if key == "rss"
                else f"{value:,.0f} msg/s"
            )
            if "worst" in t:
                shown = ", ".join(
                    f"{k.removesuffix('_ms').replace('p999', 'p99.9')} {v:.3f} ms"
                    for k, v in t["worst"].items()
                )
                shown = f"worst run: {shown}; {t['failed']} of {t['runs']} runs failed"
            if key.startswith("cpu-"):
                shown += (
                    " (peers: " + ", ".join(f"{n} {v:.3f}" for n, v in t["peers"].items()) + ")"
                )
            verdict = "met    " if t["met"] else "NOT met"
            if key == "produce-kcat" and not t.get("peers"):
                shown += " (no peer measured)"
            target = TARGETS[t.get("goal", key)]
            text += f"\n  {verdict}  {key:14} {shown:>16}  (target {target})"
    ratios = peer_ratios(results)
    if ratios:
        text += "\n\ngoals of issue 41, tidelog against the best peer of this run:\n  "
        text += "\n  ".join(ratios)
    spreads = render_spreads(results)
    if spreads:
        text += "\n\n" + spreads
    if results.get("startup"):
        text = (text + "\n\n" if text else "") + startup.render(results["startup"])
    if results.get("partitions"):
        text = (text + "\n\n" if text else "") + partitions.render(results["partitions"])
    for run in results.get("loop-stall", []):
        text = (text + "\n\n" if text else "") + loop_stall.render(run)
    if results.get("recovery"):
        text = (text + "\n\n" if text else "") + recovery.render(results["recovery"])
    notes = [f"{n}: {s['note']}" for n, s in results["servers"].items() if s.get("note")]
    if any(
        e.get("median", {}).get("acked_not_in_log")
        for s in results["servers"].values()
        for e in s.get("workloads", {}).values()
    ):
        notes.append("*: the broker acknowledged every message but its log holds fewer (JSON)")
    if notes:
        text += "\n\nnotes:\n  " + "\n  ".join(notes)
    return text
