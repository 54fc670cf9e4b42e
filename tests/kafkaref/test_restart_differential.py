"""Restart at every step, compared with Apache Kafka 4.4 (issue 37, "How to know it holds").

Hypothesis's stateful testing (``RuleBasedStateMachine``) makes sequences of client actions on
groups and transactions (``restart_ops.py``: classic, consumer-protocol and share members
joining, leaving, committing, acknowledging; a transactional producer initialising,
producing, committing offsets in its transaction, committing, aborting, being fenced by a
second producer, timing out) with broker restarts (SIGTERM or SIGKILL) between any two steps.
Every step goes to tidelog and to Kafka 4.4 alike; what the client saw must be the same, and
after every step so must everything a client can observe (``restart_pair.observe``:
OffsetFetch, DescribeGroups, ConsumerGroupDescribe, ShareGroupDescribe,
DescribeShareGroupOffsets, ListGroups, DescribeTransactions, ListTransactions, the records a
read_committed consumer gets), with ids, hosts and times replaced by markers.

Both brokers live for the module; each example works on its own topic, groups and
transactional ids. Kafka restarts in seconds, not milliseconds, so a restart happens only
when the ``restart`` rule is drawn, at most ``max_restarts`` times an example. The default
profile is short (a few examples of a few steps, ~2-3 minutes); the slow one runs many more.
"""

from __future__ import annotations

import signal
import threading
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from tests.kafkaref import restart_ops as ops
from tests.kafkaref.restart_pair import Names, Side, canonical, compare, observe
from tests.support.broker_process import BrokerProcess
from tests.support.jvm import jvm_set_classpath
from tests.support.kafka_reference import KafkaProcess

pytestmark = pytest.mark.integration

# The same settings on both brokers: sessions longer than any run of Kafka restarts (members
# expire only if a broker loses them), timed-out transactions found quickly.
SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    "group.consumer.session.timeout.ms": "300000",
    "group.consumer.max.session.timeout.ms": "300000",
    "group.share.session.timeout.ms": "300000",
    "group.share.max.session.timeout.ms": "300000",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
}


@dataclass
class Pair:
    tidelog: BrokerProcess
    kafka: KafkaProcess
    sides: tuple[Side, Side]
    examples: int = 0
    restarts: int = 0
    first_failure: str | None = None


def _restart_tidelog(broker: BrokerProcess) -> Callable[[signal.Signals], None]:
    def restart(sig: signal.Signals) -> None:
        if sig == signal.SIGKILL:
            broker.kill()
            broker.start()
        else:
            broker.restart()

    return restart


def _restart_kafka(kafka: KafkaProcess) -> Callable[[signal.Signals], None]:
    def restart(sig: signal.Signals) -> None:
        if sig == signal.SIGKILL:
            kafka.kill()
        else:
            kafka.stop()  # the reference: its exit code (0, or 143 mid-start) is not ours to judge
        kafka.start()

    return restart


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    classpath = jvm_set_classpath("kafka")
    base = tmp_path_factory.mktemp("restart_differential")
    (base / "tidelog").mkdir()
    tidelog = BrokerProcess(base / "tidelog", SETTINGS).start()
    kafka = KafkaProcess(classpath, base / "kafka", SETTINGS)
    try:
        kafka.start()
        sides = (
            Side("tidelog", tidelog.bootstrap, _restart_tidelog(tidelog)),
            Side("kafka", kafka.bootstrap, _restart_kafka(kafka)),
        )
        for side in sides:
            _warm_up(side)
        yield Pair(tidelog, kafka, sides)
        for side in sides:
            side.close()
    finally:
        kafka.stop()
        if tidelog.running:
            assert tidelog.stop() == 0, tidelog.log_text()[-3000:]


def _warm_up(side: Side) -> None:
    """Kafka makes __consumer_offsets and __transaction_state on first use (retriable errors
    meanwhile, which ``Side.call`` waits out)."""
    side.call("find_coordinator", 4, {"key_type": 0, "coordinator_keys": ["warm-up"]})
    side.call("find_coordinator", 4, {"key_type": 1, "coordinator_keys": ["warm-up"]})
    side.call(
        "init_producer_id",
        5,
        {
            "transactional_id": "warm-up",
            "transaction_timeout": 60000,
            "producer_id": -1,
            "producer_epoch": -1,
        },
    )


PARTITION = st.integers(0, ops.PARTITIONS - 1)
OFFSET = st.integers(0, 9)
SIGNAL = st.sampled_from([signal.SIGTERM, signal.SIGKILL])


class RestartDifferential(RuleBasedStateMachine):
    """One example: a sequence of steps, each sent to both brokers and compared. A step that
    does not apply (a member leaving when there is none) does nothing: rules have no
    preconditions on what the brokers answered, so Hypothesis draws the same steps when it runs
    an example again."""

    pair: Pair
    max_restarts = 2

    def __init__(self) -> None:
        super().__init__()
        self.pair.examples += 1
        self.names = Names(f"rx{self.pair.examples}")
        self.restarts = 0
        self.trace: list[str] = []
        self.acknowledged = False
        self.values = 0
        self.last = "start"
        for side in self.sides:
            side.reset()
        self.both("create topic", ops.create_topic)

    @property
    def sides(self) -> tuple[Side, Side]:
        return self.pair.sides

    @property
    def tidelog(self) -> Side:
        return self.sides[0]

    def both(self, what: str, step: Callable[..., Any], *args: Any) -> Any:
        """``step`` on tidelog, then on Kafka; what the client saw must be the same (returned)."""
        self.last = what
        self.trace.append(what)
        try:
            ours, theirs = (canonical(step(side, self.names, *args), side) for side in self.sides)
        except Exception as exc:
            self.remember(f"step {what} raised {exc!r}\n{traceback.format_exc()}")
            raise
        self.check(f"step {what}", ours, theirs)
        return ours

    def remember(self, failure: str) -> None:
        if self.pair.first_failure is None:
            steps = "\n".join(f"  {i}. {s}" for i, s in enumerate(self.trace, 1))
            self.pair.first_failure = f"{failure}\nsteps of example {self.names.prefix}:\n{steps}"

    def check(self, what: str, ours: Any, theirs: Any) -> None:
        """``compare``, keeping the first difference of the run with the steps that led to it
        (Hypothesis replays a failing example, and a replay against brokers that moved on can
        take another path: the first report is the one to read)."""
        try:
            compare(what, ours, theirs)
        except AssertionError as exc:
            self.remember(str(exc))
            raise

    def value(self) -> str:
        self.values += 1
        return f"{self.names.prefix}-v{self.values}"

    def teardown(self) -> None:
        print(f"example {self.names.prefix}: " + "; ".join(self.trace))  # shown with -s

    @invariant()
    def clients_see_the_same(self) -> None:
        try:
            ours, theirs = (
                observe(side, self.names, ops.PARTITIONS, self.acknowledged) for side in self.sides
            )
        except Exception as exc:
            self.remember(f"observing after {self.last} raised {exc!r}\n{traceback.format_exc()}")
            raise
        self.check(f"after {self.last}", ours, theirs)

    # Restarts -----------------------------------------------------------------------------

    @precondition(lambda self: self.restarts < self.max_restarts)
    @rule(sig=SIGNAL)
    def restart(self, sig: signal.Signals) -> None:
        self.restarts += 1
        self.pair.restarts += 1
        self.last = f"restart ({sig.name})"
        self.trace.append(self.last)
        failures: list[BaseException] = []

        def run(side: Side) -> None:
            try:
                side.restart(sig)
            except BaseException as exc:  # reported below, in the test's thread
                failures.append(exc)

        threads = [threading.Thread(target=run, args=(side,)) for side in self.sides]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if failures:
            self.remember(f"{self.last} failed: {failures[0]!r}")
            raise failures[0]
        for side in self.sides:
            ops.wait_for_leaders(side, self.names)

    # Classic group ------------------------------------------------------------------------

    @rule(static=st.booleans())
    def classic_join(self, static: bool) -> None:
        if self.tidelog.classic is not None:
            return
        self.both(f"classic join (static={static})", ops.classic_join, static)

    @rule()
    def classic_leave(self) -> None:
        if self.tidelog.classic is None:
            return
        self.both("classic leave", ops.classic_leave)

    @rule(partition=PARTITION, offset=OFFSET)
    def classic_commit(self, partition: int, offset: int) -> None:
        self.both(f"classic commit p{partition}@{offset}", ops.classic_commit, partition, offset)

    # Consumer group (KIP-848) -------------------------------------------------------------

    @rule()
    def consumer_join(self) -> None:
        if len(self.tidelog.consumers) >= 2:
            return
        self.both("consumer join", ops.consumer_join)

    @rule(index=st.integers(0, 1))
    def consumer_leave(self, index: int) -> None:
        if not self.tidelog.consumers:
            return
        self.both(f"consumer leave #{index}", ops.consumer_leave, index)

    @rule(partition=PARTITION, offset=OFFSET)
    def consumer_commit(self, partition: int, offset: int) -> None:
        if not self.tidelog.consumers:
            return
        self.both(f"consumer commit p{partition}@{offset}", ops.consumer_commit, partition, offset)

    # Share group --------------------------------------------------------------------------

    @rule()
    def share_join(self) -> None:
        if self.tidelog.share is not None:
            return
        self.both("share join", ops.share_join)

    @rule()
    def share_leave(self) -> None:
        if self.tidelog.share is None:
            return
        self.both("share leave", ops.share_leave)

    @rule(partition=PARTITION)
    def share_acknowledge(self, partition: int) -> None:
        if self.tidelog.share is None:
            return
        seen = self.both(f"share fetch+acknowledge p{partition}", ops.share_acknowledge, partition)
        self.acknowledged |= bool(seen["acquired"])

    # Transactions -------------------------------------------------------------------------

    @rule()
    def txn_init(self) -> None:
        self.both("txn init", ops.txn_init)

    @rule(partition=PARTITION)
    def txn_produce(self, partition: int) -> None:
        if self.tidelog.producer is None:
            return
        self.both(f"txn produce p{partition}", ops.txn_produce, partition, self.value())

    @rule(
        group=st.sampled_from(["classic", "consumer"]),
        partition=PARTITION,
        offset=OFFSET,
        add_offsets=st.booleans(),
    )
    def txn_offset_commit(self, group: str, partition: int, offset: int, add_offsets: bool) -> None:
        if self.tidelog.producer is None:
            return
        what = f"TxnOffsetCommit {group} p{partition}@{offset} (AddOffsetsToTxn={add_offsets})"
        self.both(what, ops.txn_offset_commit, group, partition, offset, add_offsets)

    @rule(commit=st.booleans())
    def txn_end(self, commit: bool) -> None:
        if self.tidelog.producer is None:
            return
        self.both("txn commit" if commit else "txn abort", ops.txn_end, commit)

    @rule()
    def txn_fence(self) -> None:
        if self.tidelog.producer is None:
            return
        self.both("txn fenced by a second producer", ops.txn_fence)

    @rule()
    def txn_timeout(self) -> None:
        self.both("txn left to time out", ops.txn_timeout, self.value())

    # Sequences the issue names, drawn as one rule so a short run meets them ------------------

    @rule(sig=SIGNAL, offset=OFFSET)
    def txn_offsets_across_restart(self, sig: signal.Signals, offset: int) -> None:
        """TxnOffsetCommit, a restart, then the commit: the offset is committed at once."""
        if self.restarts >= self.max_restarts:
            return
        if self.tidelog.producer is None:
            self.both("txn init", ops.txn_init)
        self.both("txn produce p0", ops.txn_produce, 0, self.value())
        what = f"TxnOffsetCommit classic p0@{offset} (AddOffsetsToTxn=False)"
        self.both(what, ops.txn_offset_commit, "classic", 0, offset, False)
        self.restart(sig)
        self.both("txn commit", ops.txn_end, True)

    @rule()
    def consumer_member_commits_in_transactions(self) -> None:
        """A consumer-protocol member's offsets in three transactions in a row."""
        if not self.tidelog.consumers:
            self.both("consumer join", ops.consumer_join)
        if self.tidelog.producer is None:
            self.both("txn init", ops.txn_init)
        for offset in (1, 2, 3):
            self.both("txn produce p1", ops.txn_produce, 1, self.value())
            what = f"TxnOffsetCommit consumer p1@{offset} (AddOffsetsToTxn=False)"
            self.both(what, ops.txn_offset_commit, "consumer", 1, offset, False)
            self.both("txn commit", ops.txn_end, True)


def _run(pair: Pair, *, examples: int, steps: int, max_restarts: int, derandomize: bool) -> None:
    machine = type(
        "RestartDifferentialRun",
        (RestartDifferential,),
        {"pair": pair, "max_restarts": max_restarts},
    )
    try:
        run_state_machine_as_test(
            machine,
            settings=settings(
                max_examples=examples,
                stateful_step_count=steps,
                derandomize=derandomize,
                deadline=None,
                database=None,
                phases=(Phase.generate,),  # no shrinking: each Kafka restart costs seconds
                suppress_health_check=list(HealthCheck),
            ),
        )
    except Exception:
        if pair.first_failure is None:
            raise
    if pair.first_failure is not None:
        raise AssertionError(pair.first_failure)


@pytest.mark.parametrize(
    ("examples", "steps", "max_restarts", "derandomize"),
    [
        pytest.param(4, 10, 2, True, id="short", marks=[pytest.mark.timeout(600)]),
        pytest.param(
            60, 30, 6, False, id="long", marks=[pytest.mark.slow, pytest.mark.timeout(4 * 3600)]
        ),
    ],
)
def test_restart_at_every_step(
    pair: Pair, examples: int, steps: int, max_restarts: int, derandomize: bool
) -> None:
    """The short profile runs by default (~2-3 minutes) on the same drawn sequences every run
    (a regression check that cannot flake on a new draw); the long one, marked slow, draws new
    sequences each run to explore."""
    _run(pair, examples=examples, steps=steps, max_restarts=max_restarts, derandomize=derandomize)


def test_the_suite_observes_every_api_the_issue_names() -> None:
    source = (Path(__file__).parent / "restart_pair.py").read_text()
    for api in ("offset_fetch", "describe_groups", "consumer_group_describe",
                "share_group_describe", "describe_share_group_offsets", "list_groups",
                "describe_transactions", "list_transactions", "read_committed"):  # fmt: skip
        assert f'"{api}"' in source or f"{api}(" in source, api
