"""A transactional id's metadata, the states of Kafka's TransactionCoordinator and its tables.

States (ids as stored in ``__transaction_state``, Kafka's TransactionState)::

    Empty(0) -> Ongoing(1)            AddPartitionsToTxn / AddOffsetsToTxn (or TV2's implicit add)
    Ongoing -> PrepareCommit(2) / PrepareAbort(3)    EndTxn (or the broker's timeout abort)
    Empty / Complete* -> PrepareAbort transaction version 2: EndTxn(abort) with nothing open
    PrepareCommit -> CompleteCommit(4), PrepareAbort -> CompleteAbort(5)   markers written
    Complete* / Empty -> Empty        InitProducerId (epoch bump)
    Complete* -> Ongoing              the next transaction
    Ongoing -> PrepareEpochFence(7) -> PrepareAbort   InitProducerId of a newer instance, or
                                                      a timed-out transaction (never written)
    Empty / Complete* -> Dead(6)      transactional.id.expiration.ms (a tombstone)

Every change of a transactional id's metadata is a *transit* (Kafka's TxnTransitMetadata): the
value of the ``__transaction_state`` record the change writes (``TxnLogValue``), prepared from
the current metadata by ``prepare_transition`` (which checks ``VALID_PREVIOUS_STATES``, Kafka's
validPreviousStates, and sets ``pending``), and applied by ``apply`` once the record is
durable. Loading ``__transaction_state`` at start applies the same records with the same
function: live state and loaded state cannot disagree (only ``last_producer_epoch``, which
Kafka's record does not hold either, is lost at a restart).

What EndTxn does in each state is data too: ``END_TXN`` (transaction version 2, EndTxn v5+) and
``END_TXN_TV1`` (older clients), Kafka 4.4's TransactionCoordinator.endTransaction as a table.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from tidelog.broker.txn import TRANSACTION_VERSION, TRANSACTION_VERSION_FEATURE
from tidelog.protocol.internal_topics.transaction_state import TxnLogValue

__all__ = [
    "END_TXN",
    "END_TXN_TV1",
    "MAX_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "TRANSACTION_VERSION",
    "TRANSACTION_VERSION_FEATURE",
    "VALID_PREVIOUS_STATES",
    "EndTxnAction",
    "EpochMatch",
    "IllegalTransition",
    "TransactionMetadata",
    "TxnState",
    "TxnTransit",
    "end_txn_outcome",
    "is_epoch_exhausted",
]


MAX_EPOCH = 32767
NO_PRODUCER_EPOCH = -1
NO_PRODUCER_ID = -1


class TxnState(enum.IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name Kafka's tools print (``CompleteCommit``)."""
        return "".join(part.capitalize() for part in self.name.split("_"))


_S = TxnState

#: The states each state may be entered from (Kafka's TransactionState.validPreviousStates).
#: ``prepare_transition`` refuses any other transition (a bug, never a client's doing: the
#: request handlers decide from the tables below first).
VALID_PREVIOUS_STATES: dict[TxnState, frozenset[TxnState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    # Transaction version 2 also aborts from Empty and Complete* (a client unsure of the state
    # may always abort).
    _S.PREPARE_ABORT: frozenset(
        {_S.ONGOING, _S.PREPARE_EPOCH_FENCE, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}
    ),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}


class EpochMatch(enum.Enum):
    """How an EndTxn's producer epoch relates to the coordinator's."""

    #: The coordinator's epoch.
    CURRENT = "current"
    #: The epoch before the coordinator's: a transaction version 2 client retrying the EndTxn
    #: that bumped it (or, after the epoch ran out, the last epoch of the previous producer id).
    RETRY = "retry"
    #: Anything else.
    OTHER = "other"


class EndTxnAction(enum.Enum):
    """What an accepted EndTxn does."""

    #: Write PrepareCommit/PrepareAbort (transaction version 2: with the epoch bumped by one),
    #: then the markers, then CompleteCommit/CompleteAbort.
    PREPARE = "prepare"
    #: Nothing to write: a retry of an EndTxn already done; NONE with the current id and epoch.
    DONE = "done"


EndTxnOutcome = EndTxnAction | ErrorCode
_P, _D = EndTxnAction.PREPARE, EndTxnAction.DONE
_FENCED = ErrorCode.producer_fenced
_ITS = ErrorCode.invalid_txn_state
_CONCURRENT = ErrorCode.concurrent_transactions

#: Transaction version 2 (EndTxn v5+): (state, commit) -> outcome for an epoch that is
#: (CURRENT, RETRY, OTHER). Kafka 4.4's TransactionCoordinator.endTransaction: in Empty and
#: Ongoing only the current epoch is the producer's; in Prepare* the bump is written, so only
#: the epoch before it (a retry) is; in Complete* both (the retry of the EndTxn that completed,
#: or the next EndTxn of the producer, which may abort even with nothing open).
END_TXN: dict[tuple[TxnState, bool], tuple[EndTxnOutcome, EndTxnOutcome, EndTxnOutcome]] = {
    (_S.EMPTY, True): (_ITS, _FENCED, _FENCED),
    (_S.EMPTY, False): (_P, _FENCED, _FENCED),
    (_S.ONGOING, True): (_P, _FENCED, _FENCED),
    (_S.ONGOING, False): (_P, _FENCED, _FENCED),
    (_S.PREPARE_COMMIT, True): (_FENCED, _CONCURRENT, _FENCED),
    (_S.PREPARE_COMMIT, False): (_FENCED, _ITS, _FENCED),
    (_S.PREPARE_ABORT, True): (_FENCED, _ITS, _FENCED),
    (_S.PREPARE_ABORT, False): (_FENCED, _CONCURRENT, _FENCED),
    (_S.COMPLETE_COMMIT, True): (_ITS, _D, _FENCED),
    (_S.COMPLETE_COMMIT, False): (_P, _ITS, _FENCED),
    (_S.COMPLETE_ABORT, True): (_ITS, _ITS, _FENCED),
    (_S.COMPLETE_ABORT, False): (_P, _D, _FENCED),
}

#: Transaction version 0/1 (EndTxn v0-v4): the epoch never moves, so only the current one is
#: the producer's; a retry of a completed EndTxn comes with it.
END_TXN_TV1: dict[tuple[TxnState, bool], tuple[EndTxnOutcome, EndTxnOutcome, EndTxnOutcome]] = {
    (_S.EMPTY, True): (_ITS, _FENCED, _FENCED),
    (_S.EMPTY, False): (_ITS, _FENCED, _FENCED),
    (_S.ONGOING, True): (_P, _FENCED, _FENCED),
    (_S.ONGOING, False): (_P, _FENCED, _FENCED),
    (_S.PREPARE_COMMIT, True): (_CONCURRENT, _FENCED, _FENCED),
    (_S.PREPARE_COMMIT, False): (_ITS, _FENCED, _FENCED),
    (_S.PREPARE_ABORT, True): (_ITS, _FENCED, _FENCED),
    (_S.PREPARE_ABORT, False): (_CONCURRENT, _FENCED, _FENCED),
    (_S.COMPLETE_COMMIT, True): (_D, _FENCED, _FENCED),
    (_S.COMPLETE_COMMIT, False): (_ITS, _FENCED, _FENCED),
    (_S.COMPLETE_ABORT, True): (_ITS, _FENCED, _FENCED),
    (_S.COMPLETE_ABORT, False): (_D, _FENCED, _FENCED),
}

_MATCH_INDEX = {EpochMatch.CURRENT: 0, EpochMatch.RETRY: 1, EpochMatch.OTHER: 2}


def end_txn_outcome(
    state: TxnState, commit: bool, match: EpochMatch, *, bumps_epoch: bool
) -> EndTxnOutcome:
    """The table's answer. Dead and PrepareEpochFence are never a stored state a request sees
    (Dead ids are removed, PrepareEpochFence is only ever pending): Kafka fails the request
    there; tidelog answers INVALID_TXN_STATE."""
    table = END_TXN if bumps_epoch else END_TXN_TV1
    row = table.get((state, commit))
    return ErrorCode.invalid_txn_state if row is None else row[_MATCH_INDEX[match]]


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka keeps one epoch in reserve for the coordinator's own bump (fencing)."""
    return epoch >= MAX_EPOCH - 1


class IllegalTransition(RuntimeError):
    """A transition ``VALID_PREVIOUS_STATES`` does not allow (a coordinator bug)."""


@dataclass(frozen=True, slots=True)
class TxnTransit:
    """A prepared change (Kafka's TxnTransitMetadata): the record it writes, and the last epoch,
    which lives in memory only (Kafka's record has no field for it)."""

    value: TxnLogValue
    last_producer_epoch: int = NO_PRODUCER_EPOCH

    @property
    def state(self) -> TxnState:
        return TxnState(self.value.state_id)


@dataclass(slots=True)
class TransactionMetadata:
    """Mutable, owned by the coordinator (the event loop); changed only by ``apply``."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    txn_timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    txn_start_ms: int = -1
    txn_last_update_ms: int = -1
    #: The producer id before the last transition (Kafka's prevProducerId): differs from
    #: ``producer_id`` right after the id moved to a new producer id (epoch exhausted).
    previous_producer_id: int = -1
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    pending: TxnState | None = None
    #: Kafka's clientTransactionVersion: 2 once a client of transaction version 2 (Produce
    #: v12, TxnOffsetCommit v5, EndTxn v5) drove the transaction, else 0.
    client_txn_version: int = 0
    #: The producer id a transaction version 2 commit/abort moves to when the epoch is
    #: exhausted (Kafka's nextProducerId), -1 otherwise.
    next_producer_id: int = NO_PRODUCER_ID

    @property
    def bumps_epoch(self) -> bool:
        """Transaction version 2: every EndTxn bumps the epoch (KIP-890 part 2)."""
        return self.client_txn_version >= 2

    def epoch_match(self, producer_id: int, producer_epoch: int) -> EpochMatch:
        """Which column of the EndTxn table ``producer_epoch`` is (Kafka's retryOnEpochBump /
        retryOnOverflow)."""
        if producer_id == self.producer_id and producer_epoch == self.producer_epoch:
            return EpochMatch.CURRENT
        if producer_id == self.producer_id and producer_epoch + 1 == self.producer_epoch:
            return EpochMatch.RETRY
        if self.retry_on_overflow(producer_id, producer_epoch):
            return EpochMatch.RETRY
        return EpochMatch.OTHER

    def retry_on_overflow(self, producer_id: int, producer_epoch: int) -> bool:
        """The retry of an EndTxn that ran out of epochs and moved the id to a new producer id."""
        return (
            self.previous_producer_id == producer_id
            and producer_epoch == MAX_EPOCH - 1
            and self.producer_epoch == 0
        )

    # -- transitions -----------------------------------------------------------------------
    def prepare_transition(
        self,
        state: TxnState,
        now: int,
        *,
        producer_id: int | None = None,
        producer_epoch: int | None = None,
        last_producer_epoch: int | None = None,
        next_producer_id: int | None = None,
        txn_timeout_ms: int | None = None,
        partitions: set[tuple[str, int]] | None = None,
        start_ms: int | None = None,
        client_txn_version: int | None = None,
    ) -> TxnTransit:
        """The record of a change to ``state`` (fields not given keep their values); marks
        the change pending. Raises ``IllegalTransition`` for a transition Kafka forbids."""
        if self.pending is not None:
            raise IllegalTransition(
                f"{self.transactional_id}: {state.kafka_name} while "
                f"{self.pending.kafka_name} is pending"
            )
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise IllegalTransition(
                f"{self.transactional_id}: {self.state.kafka_name} -> {state.kafka_name}"
            )
        chosen = self.partitions if partitions is None else partitions
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(chosen):
            by_topic.setdefault(topic, []).append(partition)
        value = TxnLogValue(
            self.producer_id if producer_id is None else producer_id,
            self.producer_epoch if producer_epoch is None else producer_epoch,
            self.txn_timeout_ms if txn_timeout_ms is None else txn_timeout_ms,
            int(state),
            None if state is TxnState.EMPTY else by_topic,
            now,
            self.txn_start_ms if start_ms is None else start_ms,
            self.producer_id,  # Kafka: the previous producer id is the one before this change
            self.next_producer_id if next_producer_id is None else next_producer_id,
            self.client_txn_version if client_txn_version is None else client_txn_version,
        )
        self.pending = state
        return TxnTransit(
            value, self.last_producer_epoch if last_producer_epoch is None else last_producer_epoch
        )

    def apply(self, value: TxnLogValue, last_producer_epoch: int = NO_PRODUCER_EPOCH) -> None:
        """Make the metadata what ``value`` (a durable ``__transaction_state`` record) says:
        the one way it changes, live (after the write) and at load (replaying the log)."""
        state = TxnState(value.state_id) if 0 <= value.state_id <= 7 else TxnState.DEAD
        self.producer_id = value.producer_id
        self.producer_epoch = value.producer_epoch
        self.txn_timeout_ms = value.transaction_timeout_ms
        self.state = state
        self.partitions = (
            set()
            if state is TxnState.EMPTY
            else {(t, p) for t, ps in (value.partitions or {}).items() for p in ps}
        )
        self.txn_last_update_ms = value.last_update_ms
        self.txn_start_ms = value.start_ms
        self.previous_producer_id = value.previous_producer_id
        self.next_producer_id = value.next_producer_id
        self.client_txn_version = value.client_transaction_version
        self.last_producer_epoch = last_producer_epoch
        self.pending = None

    def complete_transition(self, transit: TxnTransit) -> None:
        """Apply a prepared change once its record is durable."""
        self.apply(transit.value, transit.last_producer_epoch)

    def remove(self) -> None:
        """The id's tombstone is durable: whoever still holds this object sees Dead."""
        self.state = TxnState.DEAD
        self.pending = None

    def abandon_transition(self) -> None:
        """The record of the pending change was not written: nothing changes."""
        self.pending = None

    def by_topic(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for topic, partition in sorted(self.partitions):
            out.setdefault(topic, []).append(partition)
        return out

    @classmethod
    def from_record(cls, transactional_id: str, value: TxnLogValue) -> TransactionMetadata:
        """The metadata a loaded record describes."""
        md = cls(transactional_id, value.producer_id, value.producer_epoch, 0)
        md.apply(value)
        return md
