"""quixstreams (confluent-kafka underneath) on tidelog, as its users run it: ``python
quix_app.py`` (tests/stream_processing/quix_app.py: per-key sums over one-second tumbling windows,
``processing_guarantee="exactly-once"``, window state in RocksDB backed by a changelog topic).

The app is SIGKILLed mid-run, with a window half aggregated and its input offsets committed,
the broker is SIGKILLed and restarted, and the app is started again on an EMPTY state dir (as on
a new machine): the half window's state can only come back from the changelog. The output
(read_committed) must hold every window of every key once, with the right sum.

quixstreams pins confluent-kafka below the version the dev extra installs, so it runs from its
own venv, ``.cache/quixstreams`` (./scripts/test makes it; pyproject's ``quixstreams`` extra).
"""

from __future__ import annotations

import json
import shutil
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.stream_processing.apps import (
    HERE,
    AppProcess,
    produce,
    read_all,
    wait_for,
)
from tests.support.migration import committed_offsets

ROOT = HERE.parents[1]
QUIX_PYTHON = ROOT / ".cache" / "quixstreams" / "bin" / "python"
pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(300),
    pytest.mark.skipif(
        not QUIX_PYTHON.exists(), reason="no .cache/quixstreams venv: ./scripts/test makes it"
    ),
]

GROUP = "qx-window-sums"
KEYS = ("k0", "k1", "k2")
WINDOWS = 10
PER_WINDOW = 4  # readings per key and window, 200 ms apart
BASE_MS = 1_750_000_000_000  # a whole second: windows start at BASE_MS + w * 1000
WAIT_S = 120.0

Reading = tuple[bytes, bytes, int]


def _readings() -> list[Reading]:
    out = []
    for w in range(WINDOWS):
        for j in range(PER_WINDOW):
            for i, key in enumerate(KEYS):
                n = 100 * w + 10 * j + i
                out.append(
                    (key.encode(), json.dumps({"n": n}).encode(), BASE_MS + w * 1000 + j * 200)
                )
    return out


def _expected() -> dict[tuple[str, int], int]:
    return {
        (key, BASE_MS + w * 1000): sum(100 * w + 10 * j + i for j in range(PER_WINDOW))
        for w in range(WINDOWS)
        for i, key in enumerate(KEYS)
    }


def _windows(bootstrap: str) -> list[tuple[str, int, int, int]]:
    """(key, start, end, value) of every committed window in the output."""
    out = []
    for key, value in read_all(bootstrap, "qx-window-sums"):
        row = json.loads(value)
        out.append((key.decode(), row["start"], row["end"], row["value"]))
    return out


def test_exactly_once_windows_survive_sigkill_and_a_lost_state_dir(
    broker: Any, tmp_path: Path
) -> None:
    readings = _readings()
    # The first run sees windows 0-5 whole and half of window 6 (two of its four readings).
    half = (6 * PER_WINDOW + 2) * len(KEYS)
    first, rest = readings[:half], readings[half:]
    # A reading far in event time after the last closes the last windows (partition closing).
    flush: Reading = (b"flush", json.dumps({"n": 0}).encode(), BASE_MS + 60_000)

    state_dir = tmp_path / "state"
    app = AppProcess(
        str(QUIX_PYTHON),
        HERE / "quix_app.py",
        [],
        {"QUIX_BROKER": broker.bootstrap, "QUIX_STATE_DIR": str(state_dir), "PYTHONPATH": ""},
        tmp_path,
    )
    produce(broker.bootstrap, "qx-readings", first)
    app.start()
    try:
        # Mid-run: every reading of the first part processed and its offset committed (with the
        # changelog records of the half window, in the same transaction).
        wait_for(
            f"committed offset {len(first)}",
            lambda: (
                committed_offsets(broker.bootstrap, GROUP).get(("qx-readings", 0)) == len(first)
            ),
            WAIT_S,
            app,
        )
        closed_before = _windows(broker.bootstrap)
        app.stop(signal.SIGKILL)
        broker.kill()  # the broker too: the changelog and the committed offsets are on its disk
        broker.start()
        shutil.rmtree(state_dir)  # a new machine: the state comes back from the changelog
        produce(broker.bootstrap, "qx-readings", [*rest, flush])
        app.start()
        want = _expected()
        wait_for(
            f"{len(want)} windows",
            lambda: len(_windows(broker.bootstrap)) >= len(want),
            WAIT_S,
            app,
        )
    finally:
        if app.running:
            app.stop(signal.SIGKILL)
    windows = _windows(broker.bootstrap)
    got = [((key, start), value) for key, start, _, value in windows]
    assert len(got) == len(set(k for k, _ in got)), f"a window twice: {sorted(got)}"
    assert dict(got) == want, app.log_tail()
    assert all(end - start == 1000 for _, start, end, _ in windows)
    # windows 0-5 of every key were closed before the kill
    assert {(k, s) for k, s, _, _ in closed_before} == {
        (key, BASE_MS + w * 1000) for w in range(6) for key in KEYS
    }
