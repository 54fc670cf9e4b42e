"""A transactional id's metadata and the states of Kafka's TransactionCoordinator.

States (ids as stored in ``__transaction_state``, Kafka's TransactionState)::

    Empty(0) -> Ongoing(1)            AddPartitionsToTxn / AddOffsetsToTxn
    Ongoing -> PrepareCommit(2) / PrepareAbort(3)    EndTxn (or the broker's timeout abort)
    PrepareCommit -> CompleteCommit(4), PrepareAbort -> CompleteAbort(5)   markers written
    Complete* / Empty -> Empty        InitProducerId (epoch bump)
    Complete* -> Ongoing              the next transaction
    Ongoing -> PrepareEpochFence(7) -> PrepareAbort   InitProducerId of a newer instance, or
                                                      a timed-out transaction (in memory only)
    Empty / Complete* -> Dead(6)      transactional.id.expiration.ms (a tombstone)

``pending`` marks a transition whose record is being written (Kafka's pendingState): other
requests for the id answer CONCURRENT_TRANSACTIONS meanwhile.

Transaction version 2 (KIP-890 part 2, ``client_txn_version`` 2): PrepareCommit/PrepareAbort
carry the producer epoch bumped by one (the markers are written with it, fencing every batch of
the old epoch), and the producer continues with the bumped epoch.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

__all__ = [
    "TRANSACTION_VERSION",
    "TRANSACTION_VERSION_FEATURE",
    "TransactionMetadata",
    "TxnState",
    "VALID_PREVIOUS_STATES",
    "is_epoch_exhausted",
]

#: The feature ApiVersions finalizes (Kafka's TransactionVersion) and the level served: 2 =
#: KIP-890 part 2 (epoch bump per transaction, implicit adds by Produce v12 / TxnOffsetCommit
#: v5). Clients of level 0/1 (every client before Kafka 4's Java client) keep working as before.
TRANSACTION_VERSION_FEATURE = "transaction.version"
TRANSACTION_VERSION = 2

MAX_EPOCH = 32767
NO_PRODUCER_EPOCH = -1


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


VALID_PREVIOUS_STATES: dict[TxnState, frozenset[TxnState]] = {
    TxnState.EMPTY: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.ONGOING: frozenset(
        {TxnState.ONGOING, TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}
    ),
    TxnState.PREPARE_COMMIT: frozenset({TxnState.ONGOING}),
    TxnState.PREPARE_ABORT: frozenset({TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE}),
    TxnState.COMPLETE_COMMIT: frozenset({TxnState.PREPARE_COMMIT}),
    TxnState.COMPLETE_ABORT: frozenset({TxnState.PREPARE_ABORT}),
    TxnState.DEAD: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.PREPARE_EPOCH_FENCE: frozenset({TxnState.ONGOING}),
}


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka keeps one epoch in reserve for the coordinator's own bump (fencing)."""
    return epoch >= MAX_EPOCH - 1


@dataclass(slots=True)
class TransactionMetadata:
    """Mutable, owned by the coordinator (the event loop)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    txn_timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    txn_start_ms: int = -1
    txn_last_update_ms: int = -1
    previous_producer_id: int = -1
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    pending: TxnState | None = None
    #: Kafka's clientTransactionVersion: 2 once a client of transaction version 2 (Produce
    #: v12, TxnOffsetCommit v5, EndTxn v5) drove the transaction, else 0.
    client_txn_version: int = 0
    #: The producer id a transaction version 2 commit/abort moves to when the epoch is
    #: exhausted (Kafka's nextProducerId), -1 otherwise.
    next_producer_id: int = -1

    @property
    def bumps_epoch(self) -> bool:
        """Transaction version 2: every EndTxn bumps the epoch (KIP-890 part 2)."""
        return self.client_txn_version >= 2

    def end_txn_producer_error(self, producer_id: int, producer_epoch: int) -> ErrorCode | None:
        """EndTxn's producer check (Kafka's endTransaction): INVALID_PRODUCER_ID_MAPPING or
        PRODUCER_FENCED, None when the producer may end (or retry).

        Version 1: the epoch must be the current one. Version 2: the same while Ongoing or
        Empty; in Prepare*/Complete* the epoch bump has happened, so only the epoch before it
        (a retry) or, after a move to a new producer id, the last epoch of the previous id."""
        bumped = self.bumps_epoch and self.producer_epoch == producer_epoch + 1
        overflowed = (
            self.bumps_epoch
            and self.previous_producer_id == producer_id
            and is_epoch_exhausted(producer_epoch)
            and self.producer_epoch == 0
        )
        state = self.state
        if not self.bumps_epoch or state in (TxnState.ONGOING, TxnState.EMPTY, TxnState.DEAD):
            valid_epoch = producer_epoch == self.producer_epoch
        elif state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            valid_epoch = bumped
        else:  # Complete*: only the retry of the EndTxn that bumped the epoch
            valid_epoch = bumped or overflowed
        if self.producer_id != producer_id and not overflowed:
            return ErrorCode.invalid_producer_id_mapping
        if not valid_epoch:
            return ErrorCode.producer_fenced
        return None

    def can_transition(self, target: TxnState) -> bool:
        return self.state in VALID_PREVIOUS_STATES[target]

    def by_topic(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for topic, partition in sorted(self.partitions):
            out.setdefault(topic, []).append(partition)
        return out
