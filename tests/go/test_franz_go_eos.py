"""franz-go (github.com/twmb/franz-go v1.21, tests/go/eosetl) against a real tidelog broker: a
chain of exactly-once consume-transform-produce stages, the shape of franz-go's own
``TestTxnEtl``, with eager, cooperative, static and consumer-protocol (KIP-848) groups, on
transaction version 2, while the broker is restarted (SIGTERM and SIGKILL) mid-run. At the
end a read_committed reader (librdkafka, another client) finds every record exactly once in
every topic of the chain."""

from __future__ import annotations

import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.eos_program import EOS_BROKER_SETTINGS, ProgramRun, run_with_restarts
from tests.support.go_programs import go_program
from tests.support.read_committed import exactly_once, read_committed

pytestmark = [pytest.mark.integration]

PARTITIONS = 3


@dataclass(frozen=True, slots=True)
class Mode:
    """One sub-test of franz-go's TestTxnEtl: its balancer, protocol and membership."""

    name: str
    balancer: str
    kip848: bool = False
    static: bool = False

    def args(self) -> list[str]:
        return ["-balancer", self.balancer, f"-kip848={str(self.kip848).lower()}",
                f"-static={str(self.static).lower()}"]  # fmt: skip


EAGER = Mode("range", "range")
COOPERATIVE = Mode("cooperative-sticky", "cooperative-sticky")
STATIC = Mode("cooperative-sticky/static", "cooperative-sticky", static=True)
RANGE_848 = Mode("range/848", "range", kip848=True)
STICKY_848 = Mode("sticky/848", "sticky", kip848=True)
STATIC_848 = Mode("sticky/848/static", "sticky", kip848=True, static=True)

# What today's tidelog gets wrong (issue 37); the lead removes the marks once the fixes merge.
# franz-go ends a transaction that produced nothing with EndTxn(abort) (defect 2: today
# INVALID_TXN_STATE, fatal to franz-go) in every mode; restarts between TxnOffsetCommit and
# EndTxn lose the pending offsets (defect 1); KIP-848 members' TxnOffsetCommit is refused
# (defect 4).


def run_chain(
    broker: Any,
    mode: Mode,
    *,
    records: int,
    stages: int,
    restarts: list[signal.Signals],
    deadline_s: float,
) -> tuple[ProgramRun, dict[str, list[str]]]:
    """Run the chain with a broker restart (by each signal of ``restarts``) each time stage 0
    has committed one more share of the records; the run and each topic's problems."""
    from confluent_kafka.admin import AdminClient, NewTopic

    prefix = "etl-" + mode.name.replace("/", "-")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topics = [f"{prefix}-{i}" for i in range(stages + 1)]
    for future in admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in topics]).values():
        future.result(30)
    command = [str(go_program("eosetl")), "-brokers", broker.bootstrap, "-prefix", prefix,
               "-records", str(records), "-stages", str(stages),
               "-deadline", f"{int(deadline_s)}s", *mode.args()]  # fmt: skip
    run = run_with_restarts(command, broker, records=records, restarts=restarts,
                            deadline_s=deadline_s, started_marker="STAGES-STARTED")  # fmt: skip
    problems = {}
    for topic in topics:
        got = read_committed(broker.bootstrap, topic, expect_at_least=records)
        problems[topic] = exactly_once(got, records)
    return run, problems


def check(run: ProgramRun, problems: dict[str, list[str]]) -> None:
    bad = {t: p for t, p in problems.items() if p}
    tail = run.tail()
    assert not bad, f"not every record once: {bad}\n{tail}"
    assert run.result() == "RESULT ok", tail
    errors = [x for x in run.lines if x.startswith("END-ERROR")]
    assert not errors, "transactions failed (franz-go treats these as fatal):\n" + "\n".join(
        errors[:20]
    )


def _modes(*modes: Mode) -> list[Any]:
    return [pytest.param(m, id=m.name)
            for m in modes]  # fmt: skip


@pytest.mark.timeout(300)
@pytest.mark.parametrize("mode", _modes(EAGER, COOPERATIVE, STATIC, STICKY_848))
def test_franz_go_exactly_once_chain_across_restarts(broker_factory: Any, mode: Mode) -> None:
    broker = broker_factory(EOS_BROKER_SETTINGS)
    restarts = [signal.SIGTERM, signal.SIGKILL]
    run, problems = run_chain(broker, mode, records=1000, stages=2, restarts=restarts,
                              deadline_s=120)  # fmt: skip
    check(run, problems)


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize(
    "mode", _modes(EAGER, COOPERATIVE, STATIC, RANGE_848, STICKY_848, STATIC_848)
)
def test_franz_go_exactly_once_chain_long(broker_factory: Any, mode: Mode) -> None:
    """Every TestTxnEtl sub-test, three stages, 20,000 records, four restarts."""
    broker = broker_factory(EOS_BROKER_SETTINGS)
    restarts = [signal.SIGTERM, signal.SIGKILL, signal.SIGTERM, signal.SIGKILL]
    run, problems = run_chain(broker, mode, records=20000, stages=3, restarts=restarts,
                              deadline_s=600)  # fmt: skip
    check(run, problems)


def test_the_go_module_pins_franz_go_v1_21() -> None:
    go_mod = (Path(__file__).parent / "eosetl" / "go.mod").read_text()
    assert "github.com/twmb/franz-go v1.21." in go_mod
