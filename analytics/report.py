"""`report.html`: the replay's analytics at a glance, with PNG charts (matplotlib) beside it and
embedded in it, so the page works when moved alone.

Charts: throughput per minute with one panel per topic (up to ``PANEL_TOPICS`` topics; more
share one panel on a log scale), so a busy topic does not flatten a quiet one; time axes in UTC
(said on the axis) with concise, non-repeating tick labels; bytes in B/KB/MB; every axis
labelled; lag bars carry their values; the images are drawn wide and fill the page width."""

from __future__ import annotations

import base64
import datetime as dt
import html
from pathlib import Path
from typing import Any

from tidelog.analytics.tables import Tables

_CSS = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
h1{margin-bottom:.2em}.sub{color:#666;margin-top:0}
.cards{display:flex;flex-wrap:wrap;gap:12px;margin:1em 0}
.card{border:1px solid #ddd;border-radius:8px;padding:10px 16px;min-width:140px}
.card b{display:block;font-size:1.5em}.card span{color:#666;font-size:.9em}
img{width:100%;height:auto;border:1px solid #eee;margin:6px 0}
table{border-collapse:collapse;margin:8px 0 20px;font-size:.9em}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}th{background:#f4f4f4}
td.l,th.l{text-align:left}.warn{color:#a40}"""


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"


#: At most this many topics get a throughput panel each; more share one log-scale panel.
PANEL_TOPICS = 6
#: Width of every chart, inches (at 100 dpi: 1200 px, the page's width).
CHART_WIDTH = 12.0


def _fmt(v: Any) -> str:
    if isinstance(v, dt.datetime):
        return v.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(v, float):
        return f"{v:,.2f}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return "" if v is None else str(v)


def _table(rows: list[dict[str, Any]], limit: int = 200) -> str:
    if not rows:
        return "<p><i>(none)</i></p>"
    cols = list(rows[0])
    head = "".join(
        f'<th class="{"l" if c in ("topic", "key", "group") else ""}">{html.escape(c)}</th>'
        for c in cols
    )
    body = []
    for r in rows[:limit]:
        cells = "".join(
            f'<td class="{"l" if c in ("topic", "key", "group") else ""}">'
            f"{html.escape(_fmt(r.get(c)))}</td>"
            for c in cols
        )
        body.append(f"<tr>{cells}</tr>")
    more = f"<p>… {len(rows) - limit} more rows in the JSON table</p>" if len(rows) > limit else ""
    return f"<table><tr>{head}</tr>{''.join(body)}</table>{more}"


def charts(t: Tables, out: Path) -> dict[str, Path]:
    """Draw the PNG charts into `out`; returns title -> path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    out.mkdir(parents=True, exist_ok=True)
    made: dict[str, Path] = {}
    byte_ticks = FuncFormatter(lambda v, _pos: human_bytes(v))

    def save(fig: Any, name: str, title: str) -> None:
        fig.tight_layout()
        path = out / f"{name}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        made[title] = path

    topics = [r["topic"] for r in t.topics]
    if t.per_minute:
        for metric, label in (("records", "records per minute"), ("bytes", "bytes per minute")):
            fig = _throughput(plt, t, topics, metric, label, byte_ticks)
            save(fig, f"{metric}_per_minute", f"{label.capitalize()}")
    if t.partitions:
        fig, ax = plt.subplots(figsize=(CHART_WIDTH, 4))
        labels = [f"{r['topic']}-{r['partition']}" for r in t.partitions]
        ax.bar(range(len(labels)), [r["records"] for r in t.partitions], color="#4878a8")
        ax.set_xticks(range(len(labels)), labels, rotation=60, ha="right", fontsize="small")
        ax.set_xlabel("partition (topic-partition)")
        ax.set_ylabel("records")
        ax.set_title("Records per partition (an uneven row means partition skew)")
        save(fig, "records_per_partition", "Records per partition")
    if t.size_histogram:
        fig, ax = plt.subplots(figsize=(CHART_WIDTH, 4))
        buckets = sorted({(h["size_from"], h["size_to"]) for h in t.size_histogram})
        width = 0.8 / max(len(topics), 1)
        for i, topic in enumerate(topics):
            got = {
                (h["size_from"], h["size_to"]): h["records"]
                for h in t.size_histogram
                if h["topic"] == topic
            }
            ax.bar(
                [j + i * width for j in range(len(buckets))],
                [got.get(b, 0) for b in buckets],
                width=width,
                label=topic,
            )
        ax.set_xticks(
            range(len(buckets)),
            [f"{human_bytes(a)}-{human_bytes(b - 1)}" for a, b in buckets],
            rotation=45,
            fontsize="small",
        )
        ax.set_xlabel("record size (key + value)")
        ax.set_ylabel("records")
        ax.set_title("Record sizes")
        ax.legend(fontsize="small")
        save(fig, "record_sizes", "Record sizes")
    if t.top_keys:
        shown = topics[:3]
        fig, axes = plt.subplots(1, len(shown), figsize=(CHART_WIDTH, 4.2), squeeze=False)
        for ax, topic in zip(axes[0], shown, strict=True):
            rows = [k for k in t.top_keys if k["topic"] == topic][:10][::-1]
            ax.barh([k["key"][:24] for k in rows], [k["records"] for k in rows], color="#c06030")
            ax.set_title(f"Top keys: {topic}", fontsize="medium")
            ax.set_xlabel("records")
            ax.set_ylabel("key")
            ax.tick_params(axis="y", labelsize="small")
        save(fig, "top_keys", "Top keys")
    if t.group_lag:
        fig, ax = plt.subplots(figsize=(CHART_WIDTH, 4))
        labels = [f"{r['topic']}-{r['partition']}" for r in t.group_lag]
        bars = ax.bar(range(len(labels)), [r["lag"] for r in t.group_lag], color="#a03040")
        ax.bar_label(bars, labels=[f"{int(r['lag']):,}" for r in t.group_lag], fontsize="small")
        ax.set_xticks(range(len(labels)), labels, rotation=60, ha="right", fontsize="small")
        ax.set_xlabel("partition (topic-partition)")
        ax.set_ylabel("records behind")
        ax.set_title(f"Consumer group lag: {t.group_lag[0]['group']}")
        save(fig, "group_lag", "Consumer group lag")
    return made


def _throughput(
    plt: Any, t: Tables, topics: list[str], metric: str, label: str, byte_ticks: Any
) -> Any:
    """One panel per topic (each with its own y scale), or one log-scale panel for many."""
    import matplotlib.dates as mdates

    minutes = sorted({r["minute"] for r in t.per_minute})
    pad = dt.timedelta(minutes=max(1, int((minutes[-1] - minutes[0]).total_seconds()) // 1200))
    tz = minutes[0].tzinfo or dt.UTC
    panels = topics if len(topics) <= PANEL_TOPICS else [""]
    fig, axes = plt.subplots(
        len(panels), 1, figsize=(CHART_WIDTH, 1.2 + 1.9 * len(panels)), sharex=True,
        squeeze=False,
    )  # fmt: skip
    for ax, panel in zip(axes[:, 0], panels, strict=True):
        for topic in topics if panel == "" else [panel]:
            pts = [r for r in t.per_minute if r["topic"] == topic]
            ax.plot([r["minute"] for r in pts], [r[metric] for r in pts], marker=".", label=topic)
        if panel == "":
            ax.set_yscale("log")
            ax.legend(loc="upper left", fontsize="small", ncol=2)
            ax.set_ylabel(f"{label} (log)")
        else:
            ax.set_ylim(bottom=0)
            ax.set_ylabel(label if len(panels) == 1 else metric)
            ax.set_title(panel, fontsize="medium", loc="left")
        if metric == "bytes":
            ax.yaxis.set_major_formatter(byte_ticks)
        ax.grid(axis="y", alpha=0.3)
    locator = mdates.AutoDateLocator(tz=tz)  # type: ignore[no-untyped-call]
    bottom = axes[-1, 0]
    bottom.xaxis.set_major_locator(locator)
    concise = mdates.ConciseDateFormatter(locator, tz=tz)  # type: ignore[no-untyped-call]
    bottom.xaxis.set_major_formatter(concise)
    bottom.set_xlim(minutes[0] - pad, minutes[-1] + pad)
    bottom.set_xlabel(f"time ({tz})")
    fig.suptitle(f"Throughput: {label}" + (" per topic" if len(panels) > 1 else ""))
    return fig


def write_report(
    t: Tables, out_dir: Path, *, title: str, source: str, seconds: float, notes: list[str]
) -> Path:
    """Write `report.html` and its charts (in `charts/` beside it); returns the page's path."""
    pngs = charts(t, out_dir / "charts")
    firsts = [r["first_timestamp"] for r in t.topics if r["first_timestamp"] is not None]
    lasts = [r["last_timestamp"] for r in t.topics if r["last_timestamp"] is not None]
    span = f"{_fmt(min(firsts))} → {_fmt(max(lasts))} UTC" if firsts else "no records"
    cards = [
        (f"{t.total_records:,}", "records"),
        (human_bytes(t.total_bytes), "key + value bytes"),
        (str(len(t.topics)), "topics"),
        (str(len(t.partitions)), "partitions"),
        (f"{sum(int(r['null_keys']) for r in t.topics):,}", "null keys"),
        (f"{sum(int(r['tombstones']) for r in t.topics):,}", "tombstones"),
    ]
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
        f"<style>{_CSS}</style></head><body><h1>{html.escape(title)}</h1>",
        f'<p class="sub">{html.escape(source)} · {html.escape(span)} · '
        f"replayed in {seconds:.1f} s</p>",
        '<div class="cards">',
        *(f'<div class="card"><b>{v}</b><span>{k}</span></div>' for v, k in cards),
        "</div>",
        *(f'<p class="warn">{html.escape(n)}</p>' for n in notes),
    ]
    for name, path in pngs.items():
        data = base64.b64encode(path.read_bytes()).decode()
        parts.append(
            f"<h3>{html.escape(name)}</h3><img alt='{html.escape(name)}' "
            f"src='data:image/png;base64,{data}'>"
        )
    sections = [
        ("Topics", t.topics),
        ("Partitions", t.partitions),
        ("Record sizes", t.record_sizes),
        ("Key skew", t.key_skew),
        ("Top keys", t.top_keys),
        ("Consumer group lag", t.group_lag),
        ("Schemas over time", t.schema_versions),
        ("Decoded records", t.decoding),
    ]
    optional = ("Consumer group lag", "Schemas over time", "Decoded records")
    for name, rows in sections:
        if rows or name not in optional:
            parts.append(f"<h2>{name}</h2>{_table(rows)}")
    parts.append(
        "<p class='sub'>Size = len(key) + len(value). Key skew = records of the "
        "busiest key / mean records per key; partition skew likewise per partition. "
        "Tombstone = null value.</p></body></html>"
    )
    page = out_dir / "report.html"
    page.write_text("\n".join(parts))
    return page
