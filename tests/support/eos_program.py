"""An exactly-once client program under test (tests/go/eosetl, the Java client's
EosConsumerProtocol) run against a real broker that is restarted while it works.

The program prints one fact a line; ``ProgramRun`` reads them as they come:
``STAGES-STARTED``/``INPUT-DONE`` (work has begun), ``PROGRESS [stage=<i>] committed=<n>``,
``RESULT ok|FAIL ...``. ``run_with_restarts`` restarts the broker (SIGTERM: graceful, must exit
0; SIGKILL: no shutdown work) each time stage 0 has committed one more share of the records,
then waits for the program's end.
"""

from __future__ import annotations

import signal
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ("EOS_BROKER_SETTINGS", "ProgramRun", "run_with_restarts")

# The broker of the exactly-once program tests: groups rebalance at once, consumer-protocol
# members that a restart cut off are fenced in seconds, timed-out transactions found quickly.
EOS_BROKER_SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    "group.consumer.session.timeout.ms": "10000",
    "group.consumer.min.session.timeout.ms": "6000",
    "group.consumer.heartbeat.interval.ms": "1000",
    "group.consumer.min.heartbeat.interval.ms": "1000",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
}


@dataclass
class ProgramRun:
    """The program's lines, read as it runs."""

    started_marker: str
    lines: list[str] = field(default_factory=list)
    committed: dict[int, int] = field(default_factory=dict)
    started: threading.Event = field(default_factory=threading.Event)
    changed: threading.Condition = field(default_factory=threading.Condition)

    def read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip("\n")
            with self.changed:
                self.lines.append(line)
                if line.startswith(self.started_marker):
                    self.started.set()
                elif line.startswith("PROGRESS"):
                    fields = dict(p.split("=", 1) for p in line.split()[1:] if "=" in p)
                    stage = int(fields.get("stage", "0"))
                    self.committed[stage] = int(fields["committed"])
                self.changed.notify_all()

    def wait_committed(self, stage: int, at_least: int, timeout_s: float) -> bool:
        with self.changed:
            return self.changed.wait_for(
                lambda: self.committed.get(stage, 0) >= at_least, timeout=timeout_s
            )

    def result(self) -> str:
        return next((x for x in reversed(self.lines) if x.startswith("RESULT")), "no RESULT line")

    def tail(self, n: int = 40) -> str:
        return "\n".join(self.lines[-n:])


def run_with_restarts(
    command: Sequence[str],
    broker: Any,
    *,
    records: int,
    restarts: Sequence[signal.Signals],
    deadline_s: float,
    started_marker: str,
) -> ProgramRun:
    """Run ``command``; restart ``broker`` (a BrokerProcess) once per signal of ``restarts``,
    the n-th once stage 0 has committed n/(len+1) of the records (or a third of the deadline
    passed: a stuck run is restarted anyway and the final check tells what went wrong)."""
    run = ProgramRun(started_marker)
    proc = subprocess.Popen(
        list(command), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    reader = threading.Thread(target=run.read, args=(proc,), daemon=True)
    reader.start()
    try:
        assert run.started.wait(180), f"the program did not start its work:\n{run.tail()}"
        for n, sig in enumerate(restarts, start=1):
            run.wait_committed(0, records * n // (len(restarts) + 1), deadline_s / 3)
            if sig == signal.SIGKILL:
                broker.kill()
                broker.start()
            else:
                broker.restart()
        proc.wait(deadline_s + 120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join(10)
    return run
