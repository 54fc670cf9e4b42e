"""``scripts/bench/kcat_consume_timeline.py`` splits a kcat consume run by librdkafka's own time
stamps: the broker's part, the client's parse and the client's queue-full back-off."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "scripts" / "bench"

# librdkafka 2.0.2's debug lines (debug=fetch,msg), trimmed to what the script reads.
LINES = [
    "%7|100.000|FETCH|c| [thrd:b]: b/1: Fetch topic t [0] at offset 0 (v2)",
    '%7|100.002|FETCH|c| [thrd:b]: b/1: Topic t [0] MessageSet size 999845, error "Success"',
    "%7|100.006|CONSUME|c| [thrd:b]: b/1: Enqueue 9164 message(s) (907236 bytes) on t [0]",
    "%7|100.006|FETCH|c| [thrd:b]: b/1: Topic t [0] in state active at offset 0 "
    "(103484/100000 msgs, 10004/65536 kb queued, opv 2) is not fetchable: "
    "queued.min.messages exceeded",
    "%7|100.406|FETCH|c| [thrd:b]: b/1: Fetch topic t [0] at offset 9164 (v2)",
    '%7|100.407|FETCH|c| [thrd:b]: b/1: Topic t [0] MessageSet size 999845, error "Success"',
    "%7|100.410|CONSUME|c| [thrd:b]: b/1: Enqueue 9164 message(s) (907236 bytes) on t [0]",
    "%7|100.411|FETCH|c| [thrd:b]: b/1: Topic t [0] in state stopped at offset 0 "
    "(0/100000 msgs, 0/65536 kb queued, opv 2) is not fetchable: forced removal",
    "not a debug line",
]


def test_a_run_is_split_into_broker_parse_and_the_clients_back_off() -> None:
    code = (
        "import kcat_consume_timeline as k, json, sys; "
        "r = k.split_timeline(json.loads(sys.stdin.read()), 0.5); "
        "print(r.fetches, round(r.broker_s, 3), round(r.parse_s, 3), r.stalls, "
        "round(r.stall_s, 3))"
    )

    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=BENCH,
        input=json.dumps(LINES),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    # Two Fetches answered in 2 + 1 ms, parsed in 4 + 3 ms; one queue-full stall of 400 ms
    # (the end-of-run removal is not a stall).
    assert out == ["2", "0.003", "0.007", "1", "0.4"]
