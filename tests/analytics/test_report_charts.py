"""The replay report's charts and page, drawn from hand-made tables (no Spark needed)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("matplotlib")

from tidelog.analytics.report import PANEL_TOPICS, _throughput, human_bytes, write_report
from tidelog.analytics.tables import Tables

T0 = dt.datetime(2026, 11, 24, 6, 0, tzinfo=dt.UTC)


def _tables(n_topics: int, lag: bool = True) -> Tables:
    topics = [f"t{i}" for i in range(n_topics)]
    per_minute = [
        {"topic": t, "minute": T0 + dt.timedelta(minutes=m), "records": (10**i) * (m + 1),
         "bytes": (10**i) * 1500 * (m + 1)}
        for i, t in enumerate(topics) for m in range(30)
    ]  # fmt: skip
    return Tables(
        topics=[{"topic": t, "records": 1, "bytes": 1, "first_timestamp": T0,
                 "last_timestamp": T0, "null_keys": 0, "tombstones": 0} for t in topics],
        partitions=[{"topic": t, "partition": 0, "records": 5} for t in topics],
        per_minute=per_minute,
        record_sizes=[],
        size_histogram=[{"topic": "t0", "size_from": 1024, "size_to": 2048, "records": 3}],
        top_keys=[{"topic": "t0", "key": "k", "records": 4}],
        key_skew=[],
        group_lag=[{"group": "g", "topic": "t0", "partition": p, "lag": 1234 * p}
                   for p in range(3)] if lag else [],
    )  # fmt: skip


def test_human_bytes() -> None:
    assert human_bytes(512) == "512 B"
    assert human_bytes(1536) == "1.5 KB"
    assert human_bytes(5 * 1024 * 1024) == "5.0 MB"


def test_one_panel_per_topic_in_utc_with_byte_units() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    t = _tables(3)
    fig: Any = _throughput(plt, t, ["t0", "t1", "t2"], "bytes", "bytes per minute",
                           FuncFormatter(lambda v, _p: human_bytes(v)))  # fmt: skip
    try:
        axes = fig.axes
        assert len(axes) == 3  # a quiet topic keeps its own scale
        assert [ax.get_title(loc="left") for ax in axes] == ["t0", "t1", "t2"]
        assert all(ax.get_yscale() == "linear" and ax.get_ylabel() for ax in axes)
        assert "UTC" in axes[-1].get_xlabel()
        fig.canvas.draw()
        ticks = [label.get_text() for label in axes[2].get_yticklabels() if label.get_text()]
        assert any(x.endswith(("KB", "MB")) for x in ticks), ticks
        shown = [label.get_text() for label in axes[-1].get_xticklabels() if label.get_text()]
        assert len(shown) == len(set(shown)), shown  # no repeated tick labels
    finally:
        plt.close(fig)


def test_many_topics_share_a_log_scale_panel() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    n = PANEL_TOPICS + 2
    t = _tables(n)
    fig: Any = _throughput(plt, t, [f"t{i}" for i in range(n)], "records",
                           "records per minute", FuncFormatter(str))  # fmt: skip
    try:
        (ax,) = fig.axes
        assert ax.get_yscale() == "log" and "log" in ax.get_ylabel()
    finally:
        plt.close(fig)


def test_report_page_uses_the_width_and_labels_lag(tmp_path: Path) -> None:
    page = write_report(_tables(2), tmp_path, title="r", source="s", seconds=1.0, notes=[])
    html = page.read_text()
    assert "img{width:100%" in html
    names = {p.name for p in (tmp_path / "charts").glob("*.png")}
    assert {"records_per_minute.png", "bytes_per_minute.png", "group_lag.png"} <= names
    from PIL import Image

    with Image.open(tmp_path / "charts" / "records_per_minute.png") as img:
        assert img.width >= 1100  # drawn at the page's width, not scaled up


def test_lag_bars_carry_their_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import matplotlib.axes

    labelled: list[list[str]] = []
    real = matplotlib.axes.Axes.bar_label

    def spy(self: Any, container: Any, labels: Any = None, **kw: Any) -> Any:
        labelled.append(list(labels or []))
        return real(self, container, labels=labels, **kw)

    monkeypatch.setattr(matplotlib.axes.Axes, "bar_label", spy)
    write_report(_tables(1), tmp_path, title="r", source="s", seconds=1.0, notes=[])
    assert ["0", "1,234", "2,468"] in labelled
