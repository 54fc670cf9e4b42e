"""The transaction coordinator's transition table as rows a broker must answer, over the wire.

One table for both brokers: tests/integration/test_txn_transition_table.py runs it against
tidelog (with restarts between steps), tests/kafkaref/test_txn_transition_table.py against
Apache Kafka 4.4, so the expected answers are proven to be Kafka's.

A row is a transactional id's story: steps that bring it to a state (InitProducerId, an
AddPartitionsToTxn, an EndTxn), then the request under test, each with the answer it must get.
Epochs are written relative to the producer's own view (``Producer.epoch``: the epoch of its
last successful InitProducerId or EndTxn v5 answer): ``0`` its epoch, ``-1`` the one before (a
transaction version 2 client retrying the EndTxn whose answer it lost), ``-2`` an older one,
``+1`` a newer one. ``Describe`` checks the coordinator's own view (DescribeTransactions) and
``Restart`` restarts the broker (tidelog only; the state must be rebuilt from
``__transaction_state`` identically: the runner compares DescribeTransactions before and after).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import pytest

from tests.support.differential import build, plain, request_class
from tests.support.kafka_wire import WireClient

__all__ = (
    "EXPIRY_CONFIG",
    "EXPIRY_ROWS",
    "ROWS",
    "TOPIC",
    "Add",
    "AddOffsets",
    "Describe",
    "End",
    "Init",
    "Producer",
    "Producers",
    "Restart",
    "Row",
    "WaitGone",
    "WaitState",
    "assert_row",
    "params",
    "prepare_broker",
    "run_row",
)

TOPIC = "txn-table"
#: The transaction timeout of every row but the timeout one (long: nothing times out).
TIMEOUT_MS = 60_000
#: The timeout row's transaction timeout.
SHORT_TIMEOUT_MS = 1_000
#: How long a row waits for a state that takes time (markers, the timeout abort: Kafka checks
#: for timed-out transactions every 10 s by default).
WAIT_S = 45.0


@dataclass
class Producer:
    """The client's view of its transactional id."""

    transactional_id: str
    producer_id: int = -1
    epoch: int = -1


@dataclass(frozen=True)
class Init:
    """InitProducerId v5; ``expected``: send the producer's id and this epoch (KIP-360),
    ``expected_pid_offset`` moves the id sent."""

    error: str = "none"
    expected: int | None = None
    expected_pid_offset: int = 0
    timeout_ms: int = TIMEOUT_MS
    #: The epoch answered, relative to the producer's epoch before the step (None: unchecked).
    answer_epoch: int | None = None
    retry_until_none: bool = False


@dataclass(frozen=True)
class Add:
    """AddPartitionsToTxn v3 of partition 0 (the transaction becomes Ongoing)."""

    error: str = "none"
    epoch: int = 0
    pid_offset: int = 0


@dataclass(frozen=True)
class AddOffsets:
    """AddOffsetsToTxn v3 (the group's ``__consumer_offsets`` partition joins the transaction)."""

    error: str = "none"


@dataclass(frozen=True)
class End:
    """EndTxn: v5 (transaction version 2) unless ``version`` says otherwise."""

    commit: bool
    epoch: int = 0
    error: str = "none"
    version: int = 5
    pid_offset: int = 0
    #: The epoch answered (v5 with NONE), relative to the producer's epoch before the step.
    answer_epoch: int | None = None


@dataclass(frozen=True)
class WaitState:
    """Wait until DescribeTransactions shows ``state`` (markers written, a timeout's abort)."""

    state: str


@dataclass(frozen=True)
class WaitGone:
    """Wait until DescribeTransactions answers TRANSACTIONAL_ID_NOT_FOUND (the id expired)."""


@dataclass(frozen=True)
class Describe:
    """DescribeTransactions: the state, and the coordinator's epoch relative to the producer's."""

    state: str
    epoch: int = 0


@dataclass(frozen=True)
class Producers:
    """DescribeProducers of the row partition: the producer's entry carries the epoch of the
    markers (relative to the producer's; None: no entry)."""

    epoch: int | None = 0


@dataclass(frozen=True)
class Restart:
    """Restart the broker: SIGTERM (``kill`` False) or SIGKILL."""

    kill: bool = False


Step = Init | Add | AddOffsets | End | WaitState | WaitGone | Describe | Producers | Restart


@dataclass(frozen=True)
class Row:
    name: str
    steps: tuple[Step, ...]
    why: str = ""
    #: False: a restart between some steps changes the answer (the last epoch, which Kafka's
    #: record does not hold either, is lost at a restart).
    restart_anywhere: bool = True

    def restarting_at_every_step(self) -> Row:
        """This row with a restart between every two steps (SIGTERM and SIGKILL in turn)."""
        steps: list[Step] = []
        for index, step in enumerate(self.steps):
            if index and not isinstance(step, Restart):
                steps.append(Restart(kill=index % 2 == 1))
            steps.append(step)
        return Row(self.name, tuple(steps), self.why, self.restart_anywhere)


def _row(name: str, *steps: Step, why: str = "", restart_anywhere: bool = True) -> Row:
    return Row(name, steps, why, restart_anywhere)


# Setups: the states a row starts from.
EMPTY = (Init(), Init())  # epoch 1 (so that the epoch before it exists)
ONGOING = (*EMPTY, Add())
COMPLETE_COMMIT = (*ONGOING, End(True, answer_epoch=1), WaitState("CompleteCommit"))
COMPLETE_ABORT = (*ONGOING, End(False, answer_epoch=1), WaitState("CompleteAbort"))

ROWS: tuple[Row, ...] = (
    # -- transaction version 2 (EndTxn v5) -------------------------------------------------
    _row("empty-commit", *EMPTY, End(True, error="invalid_txn_state"), Describe("Empty")),
    _row(
        "empty-abort",
        *EMPTY,
        Restart(),
        End(False, answer_epoch=1),
        WaitState("CompleteAbort"),
        Describe("CompleteAbort"),
        why="issue 37 defect 2: aborting a transaction with nothing in it bumps the epoch",
    ),
    _row("empty-commit-retry-epoch", *EMPTY, End(True, epoch=-1, error="producer_fenced")),
    _row("empty-abort-retry-epoch", *EMPTY, End(False, epoch=-1, error="producer_fenced")),
    _row("empty-abort-newer-epoch", *EMPTY, End(False, epoch=1, error="producer_fenced")),
    _row(
        "ongoing-commit",
        *ONGOING,
        Producers(None),
        End(True, answer_epoch=1),
        WaitState("CompleteCommit"),
        Describe("CompleteCommit"),
        Producers(0),
        why="the markers carry the bumped epoch (what the partition's producer state shows)",
    ),
    _row(
        "ongoing-abort",
        *ONGOING,
        Restart(kill=True),
        End(False, answer_epoch=1),
        WaitState("CompleteAbort"),
        Describe("CompleteAbort"),
    ),
    _row("ongoing-commit-retry-epoch", *ONGOING, End(True, epoch=-1, error="producer_fenced")),
    _row("ongoing-abort-older-epoch", *ONGOING, End(False, epoch=-2, error="producer_fenced")),
    _row("ongoing-commit-newer-epoch", *ONGOING, End(True, epoch=1, error="producer_fenced")),
    _row(
        "ongoing-commit-other-producer-id",
        *ONGOING,
        End(True, pid_offset=1000, error="invalid_producer_id_mapping"),
    ),
    _row(
        "complete-commit-commit-retry",
        *COMPLETE_COMMIT,
        Restart(kill=True),
        End(True, epoch=-1, answer_epoch=0),
        Describe("CompleteCommit"),
    ),
    _row(
        "complete-commit-commit",
        *COMPLETE_COMMIT,
        End(True, error="invalid_txn_state"),
        Describe("CompleteCommit"),
    ),
    _row(
        "complete-commit-abort",
        *COMPLETE_COMMIT,
        Restart(),
        End(False, answer_epoch=1),
        WaitState("CompleteAbort"),
        Describe("CompleteAbort"),
        why="issue 37 defect 3: abort after a commit, at the epoch the commit answered",
    ),
    _row(
        "complete-commit-abort-retry-epoch",
        *COMPLETE_COMMIT,
        End(False, epoch=-1, error="invalid_txn_state"),
    ),
    _row(
        "complete-commit-older-epoch",
        *COMPLETE_COMMIT,
        End(True, epoch=-2, error="producer_fenced"),
    ),
    _row(
        "complete-abort-abort-retry",
        *COMPLETE_ABORT,
        Restart(kill=True),
        End(False, epoch=-1, answer_epoch=0),
        Describe("CompleteAbort"),
    ),
    _row(
        "complete-abort-abort",
        *COMPLETE_ABORT,
        End(False, answer_epoch=1),
        WaitState("CompleteAbort"),
        Describe("CompleteAbort"),
    ),
    _row("complete-abort-commit", *COMPLETE_ABORT, End(True, error="invalid_txn_state")),
    _row(
        "complete-abort-commit-retry-epoch",
        *COMPLETE_ABORT,
        End(True, epoch=-1, error="invalid_txn_state"),
    ),
    _row(
        "complete-commit-next-transaction",
        *COMPLETE_COMMIT,
        Add(),
        Describe("Ongoing"),
        End(True, answer_epoch=1),
        WaitState("CompleteCommit"),
    ),
    _row(
        "complete-abort-next-transaction",
        *COMPLETE_ABORT,
        Add(),
        Describe("Ongoing"),
        End(False, answer_epoch=1),
        WaitState("CompleteAbort"),
    ),
    _row("end-unknown-transactional-id", End(False, error="invalid_producer_id_mapping")),
    # -- AddPartitionsToTxn / AddOffsetsToTxn --------------------------------------------------
    _row("add-older-epoch", *EMPTY, Add(epoch=-1, error="producer_fenced"), Describe("Empty")),
    _row("add-newer-epoch", *EMPTY, Add(epoch=1, error="producer_fenced")),
    _row(
        "add-other-producer-id", *EMPTY, Add(pid_offset=1000, error="invalid_producer_id_mapping")
    ),
    _row(
        "add-offsets-starts-transaction",
        *EMPTY,
        AddOffsets(),
        Describe("Ongoing"),
        End(True, answer_epoch=1),
        WaitState("CompleteCommit"),
    ),
    _row(
        "add-after-commit-retry-epoch",
        *COMPLETE_COMMIT,
        Add(epoch=-1, error="producer_fenced"),
        Describe("CompleteCommit"),
    ),
    # -- transaction version 0/1 (EndTxn v4): the epoch never moves ---------------------------
    _row("tv1-empty-abort", *EMPTY, End(False, version=4, error="invalid_txn_state")),
    _row("tv1-empty-commit", *EMPTY, End(True, version=4, error="invalid_txn_state")),
    _row(
        "tv1-ongoing-commit-then-retry",
        *ONGOING,
        End(True, version=4),
        WaitState("CompleteCommit"),
        Describe("CompleteCommit"),
        Restart(),
        End(True, version=4),
        End(False, version=4, error="invalid_txn_state"),
        End(True, version=4, epoch=-1, error="producer_fenced"),
    ),
    _row(
        "tv1-ongoing-abort-then-commit",
        *ONGOING,
        End(False, version=4),
        WaitState("CompleteAbort"),
        End(True, version=4, error="invalid_txn_state"),
        End(False, version=4),
    ),
    # -- InitProducerId ------------------------------------------------------------------------
    _row(
        "init-after-commit",
        *COMPLETE_COMMIT,
        Init(answer_epoch=1),
        Describe("Empty"),
    ),
    _row(
        "init-fences-ongoing",
        *ONGOING,
        Init(error="concurrent_transactions"),
        WaitState("CompleteAbort"),
        Describe("CompleteAbort", epoch=1),
        End(True, error="invalid_txn_state"),
        Restart(kill=True),
        End(False, answer_epoch=1),
        Init(answer_epoch=1, retry_until_none=True),
        Describe("Empty"),
        why="the fence aborts with the epoch bumped once: the old producer's abort is a retry",
    ),
    _row(
        "init-keeps-producer-with-epoch",
        *EMPTY,
        Init(expected=0, answer_epoch=1),
        Init(expected=-1, answer_epoch=0),
        Init(expected=-2, error="producer_fenced"),
        Init(expected=0, expected_pid_offset=1000, error="producer_fenced"),
        Describe("Empty"),
        restart_anywhere=False,
    ),
    _row(
        "init-unknown-id-with-producer",
        Init(expected=5, expected_pid_offset=1001),
        Describe("Empty"),
        why="KIP-360: a producer whose id the coordinator lost gets a new id at epoch 0",
    ),
    _row(
        "timeout-aborts-with-epoch-bump",
        Init(timeout_ms=SHORT_TIMEOUT_MS),
        Add(),
        WaitState("CompleteAbort"),
        Describe("CompleteAbort", epoch=1),
        End(True, error="invalid_txn_state"),
        Restart(),
        Describe("CompleteAbort", epoch=1),
        End(False, answer_epoch=1),
        Describe("CompleteAbort"),
        Init(answer_epoch=1),
        why="the coordinator aborts with the epoch bumped once: the producer's abort is a retry",
    ),
)


#: The broker settings of ``EXPIRY_ROWS`` (ids idle for a second are removed).
EXPIRY_CONFIG = {
    "transactional.id.expiration.ms": "1000",
    "transaction.remove.expired.transaction.cleanup.interval.ms": "200",
}

#: Rows that need ``EXPIRY_CONFIG`` (Dead: Kafka's removeExpiredTransactionalIds).
EXPIRY_ROWS: tuple[Row, ...] = (
    _row(
        "expired-id-is-gone",
        Init(),
        Add(),
        End(True, answer_epoch=1),
        WaitState("CompleteCommit"),
        WaitGone(),
        End(False, error="invalid_producer_id_mapping"),
        Add(error="invalid_producer_id_mapping"),
        Restart(kill=True),
        Init(),
        Describe("Empty"),
        why="an idle id expires (a tombstone): it is unknown, and InitProducerId starts afresh",
    ),
)


def _request(client: WireClient, api: str, version: int, fields: dict[str, Any]) -> Any:
    return plain(client.request(build(request_class(api, version), fields)))


def describe(client: WireClient, transactional_id: str) -> dict[str, Any]:
    answer = _request(client, "describe_transactions", 0, {"transactional_ids": [transactional_id]})
    return dict(answer["transaction_states"][0])


def prepare_broker(client: WireClient) -> None:
    """The row topic, and what Kafka makes on first use (``__transaction_state``)."""
    _request(
        client,
        "create_topics",
        7,
        {
            "topics": [
                {
                    "name": TOPIC,
                    "num_partitions": 1,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [],
                }
            ],
            "timeout": 10000,
            "validate_only": False,
        },
    )
    deadline = time.monotonic() + 90
    while True:
        found = _request(client, "find_coordinator", 4, {"key_type": 1, "coordinator_keys": ["w"]})
        init = _request(
            client,
            "init_producer_id",
            5,
            {"transactional_id": "warm-up", "transaction_timeout": TIMEOUT_MS,
             "producer_id": -1, "producer_epoch": -1},
        )  # fmt: skip
        if found["coordinators"][0]["error_code"] == "none" and init["error_code"] == "none":
            return
        assert time.monotonic() < deadline, f"transactions never ready: {found} {init}"
        time.sleep(0.3)


def run_row(
    row: Row,
    connect: Callable[[], WireClient],
    restart: Callable[[bool], None] | None,
    prefix: str,
) -> list[str]:
    """Run ``row``; returns what went differently from the table (empty: as the table says).
    ``restart(kill)`` restarts the broker (None: Restart steps are skipped)."""
    producer = Producer(f"{prefix}-{row.name}")
    client = connect()
    problems: list[str] = []

    def check(what: str, got: Any, want: Any) -> None:
        if got != want:
            problems.append(f"step {index} ({what}): got {got!r}, want {want!r}")

    try:
        for index, step in enumerate(row.steps):
            if isinstance(step, Init):
                fields = {
                    "transactional_id": producer.transactional_id,
                    "transaction_timeout": step.timeout_ms,
                    "producer_id": -1,
                    "producer_epoch": -1,
                }
                if step.expected is not None:
                    fields["producer_id"] = producer.producer_id + step.expected_pid_offset
                    fields["producer_epoch"] = producer.epoch + step.expected
                deadline = time.monotonic() + WAIT_S
                while True:
                    answer = _request(client, "init_producer_id", 5, fields)
                    if not step.retry_until_none or answer["error_code"] == "none":
                        break
                    assert time.monotonic() < deadline, f"InitProducerId never NONE: {answer}"
                    time.sleep(0.1)
                check("InitProducerId error", answer["error_code"], step.error)
                if answer["error_code"] == "none":
                    if step.answer_epoch is not None and producer.epoch >= 0:
                        check(
                            "InitProducerId epoch",
                            answer["producer_epoch"] - producer.epoch,
                            step.answer_epoch,
                        )
                    producer.producer_id = answer["producer_id"]
                    producer.epoch = answer["producer_epoch"]
            elif isinstance(step, Add):
                answer = _request(
                    client,
                    "add_partitions_to_txn",
                    3,
                    {
                        "v3_and_below_transactional_id": producer.transactional_id,
                        "v3_and_below_producer_id": producer.producer_id + step.pid_offset,
                        "v3_and_below_producer_epoch": producer.epoch + step.epoch,
                        "v3_and_below_topics": [{"name": TOPIC, "partitions": [0]}],
                    },
                )
                error = answer["results_by_topic_v3_and_below"][0]["results_by_partition"][0][
                    "partition_error_code"
                ]
                check("AddPartitionsToTxn error", error, step.error)
            elif isinstance(step, AddOffsets):
                answer = _request(
                    client,
                    "add_offsets_to_txn",
                    3,
                    {
                        "transactional_id": producer.transactional_id,
                        "producer_id": producer.producer_id,
                        "producer_epoch": producer.epoch,
                        "group_id": f"{producer.transactional_id}-group",
                    },
                )
                check("AddOffsetsToTxn error", answer["error_code"], step.error)
            elif isinstance(step, End):
                answer = _request(
                    client,
                    "end_txn",
                    step.version,
                    {
                        "transactional_id": producer.transactional_id,
                        "producer_id": producer.producer_id + step.pid_offset,
                        "producer_epoch": producer.epoch + step.epoch,
                        "committed": step.commit,
                    },
                )
                check("EndTxn error", answer["error_code"], step.error)
                if step.version >= 5 and answer["error_code"] == "none":
                    if step.answer_epoch is not None:
                        check(
                            "EndTxn epoch", answer["producer_epoch"] - producer.epoch,
                            step.answer_epoch,
                        )  # fmt: skip
                    check("EndTxn producer id", answer["producer_id"], producer.producer_id)
                    producer.epoch = answer["producer_epoch"]
            elif isinstance(step, WaitState):
                deadline = time.monotonic() + WAIT_S
                while (state := describe(client, producer.transactional_id))[
                    "transaction_state"
                ] != step.state:
                    if time.monotonic() > deadline:
                        problems.append(f"step {index}: never {step.state}: {state}")
                        return problems
                    time.sleep(0.1)
            elif isinstance(step, WaitGone):
                deadline = time.monotonic() + WAIT_S
                while (state := describe(client, producer.transactional_id))[
                    "error_code"
                ] != "transactional_id_not_found":
                    if time.monotonic() > deadline:
                        problems.append(f"step {index}: never expired: {state}")
                        return problems
                    time.sleep(0.1)
            elif isinstance(step, Describe):
                state = describe(client, producer.transactional_id)
                check("state", state["transaction_state"], step.state)
                check("coordinator epoch", state["producer_epoch"] - producer.epoch, step.epoch)
            elif isinstance(step, Producers):
                answer = _request(
                    client,
                    "describe_producers",
                    0,
                    {"topics": [{"name": TOPIC, "partition_indexes": [0]}]},
                )
                entries = answer["topics"][0]["partitions"][0]["active_producers"]
                mine = [e for e in entries if e["producer_id"] == producer.producer_id]
                check(
                    "DescribeProducers epoch",
                    mine[0]["producer_epoch"] - producer.epoch if mine else None,
                    step.epoch,
                )
            elif isinstance(step, Restart):
                if restart is None:
                    continue
                before = describe(client, producer.transactional_id)
                client.close()
                restart(step.kill)
                client = connect()
                deadline = time.monotonic() + WAIT_S
                # (a SIGKILL may lose the Complete record, written without a wait of its own:
                # the start completes the Prepare* record it finds again)
                while (after := describe(client, producer.transactional_id))[
                    "error_code"
                ] == "coordinator_load_in_progress" or after["transaction_state"].startswith(
                    "Prepare"
                ):
                    assert time.monotonic() < deadline, f"the coordinator never loaded: {after}"
                    time.sleep(0.1)
                if before["transaction_state"].startswith("Prepare"):
                    # markers in flight at the restart: the start completes the transaction
                    state = before["transaction_state"].replace("Prepare", "Complete")
                    before = {**before, "transaction_state": state, "topics": []}
                check("DescribeTransactions across the restart", after, before)
    finally:
        client.close()
    return problems


def params(rows: Iterable[Row]) -> list[Any]:
    """``rows`` as pytest parameters named by the rows."""
    return [pytest.param(row, id=row.name) for row in rows]


def assert_row(
    row: Row, bootstrap: str, restart: Callable[[bool], None] | None, prefix: str
) -> None:
    """Run ``row`` against the broker at ``bootstrap``; fail with every difference."""
    problems = run_row(row, lambda: WireClient(bootstrap, timeout=30.0), restart, prefix)
    assert not problems, f"{row.name} ({row.why}):\n" + "\n".join(problems)
