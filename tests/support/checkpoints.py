"""Wait for a broker's checkpoint file (written every ``log.flush.offset.checkpoint.interval.ms``
or its Kafka equivalent) to cover given offsets: the condition a test reading a log dir's files
needs, rather than a sleep of about one interval."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path

from tidelog.storage.checkpoint import read_checkpoint

__all__ = ("wait_for_checkpoint",)


def wait_for_checkpoint(
    log_dir: Path, name: str, ends: Mapping[tuple[str, int], int], timeout_s: float = 30.0
) -> None:
    """Until checkpoint file ``name`` of ``log_dir`` holds, for every (topic, partition) of
    ``ends``, an offset at or past its end; fails naming the ones behind at ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        points = read_checkpoint(log_dir / name)
        behind = {tp: points.get(tp) for tp, end in ends.items() if points.get(tp, -1) < end}
        if not behind:
            return
        assert time.monotonic() < deadline, f"{name} never reached {dict(ends)}: {behind}"
        time.sleep(0.05)
