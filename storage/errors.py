"""Errors raised by the storage engine, each carrying the Kafka error name it maps to.

The broker turns ``error_name`` into the wire error code; storage never imports the protocol
layer, so the mapping is by name (upper snake case, exactly as Kafka's ``Errors`` enum spells it).

Threading: these are plain values; nothing here is shared state.
"""

from __future__ import annotations

from typing import ClassVar

__all__ = [
    "CorruptRecordError",
    "InvalidProducerEpochError",
    "InvalidRecordError",
    "InvalidTxnStateError",
    "KafkaStorageError",
    "LogDirNotFoundError",
    "MessageTooLargeError",
    "OffsetOutOfRangeError",
    "OutOfOrderSequenceError",
    "RecordListTooLargeError",
    "StorageError",
    "TransactionCoordinatorFencedError",
    "UnknownTopicOrPartitionError",
    "UnsupportedMessageFormatError",
]


class StorageError(Exception):
    """Base of every storage error; ``error_name`` is the Kafka error it answers with, named
    once per subclass in its class line (``class X(StorageError, error_name="...")``)."""

    error_name: ClassVar[str] = "UNKNOWN_SERVER_ERROR"

    def __init_subclass__(cls, *, error_name: str | None = None, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if error_name is not None:
            cls.error_name = error_name


class CorruptRecordError(StorageError, error_name="CORRUPT_MESSAGE"):
    """Bad CRC, truncated batch, impossible length or unknown magic (CorruptRecordException)."""


class UnsupportedMessageFormatError(
    CorruptRecordError, error_name="UNSUPPORTED_FOR_MESSAGE_FORMAT"
):
    """A batch of message format v0/v1 (magic < 2).

    Kafka divergence: Kafka up-converts old message formats; tidelog stores magic 2 only and
    rejects older batches with this error (a CorruptRecordError subclass, so code that treats all
    malformed input alike keeps working).
    """


class InvalidRecordError(StorageError, error_name="INVALID_RECORD"):
    """A well-formed batch that breaks a rule (record count vs offsets, control batch).

    ``record_errors`` names the refused records when the rule is per record (KIP-467):
    ``(batch index, message)`` pairs, the index counting records from the first batch of the
    append, as Kafka's ``RecordError(batchIndex, message)``.
    """

    def __init__(self, message: str, record_errors: tuple[tuple[int, str], ...] = ()) -> None:
        super().__init__(message)
        self.record_errors = record_errors


class MessageTooLargeError(StorageError, error_name="MESSAGE_TOO_LARGE"):
    """One batch is larger than ``max.message.bytes`` (Kafka's RecordTooLargeException)."""


class RecordListTooLargeError(StorageError, error_name="RECORD_LIST_TOO_LARGE"):
    """The records of one append exceed ``segment.bytes`` (RecordBatchTooLargeException)."""


class OffsetOutOfRangeError(StorageError, error_name="OFFSET_OUT_OF_RANGE"):
    """An offset outside ``[log_start_offset, log_end_offset]`` (fetch) or above the HW."""


class KafkaStorageError(StorageError, error_name="KAFKA_STORAGE_ERROR"):
    """An OSError while writing or flushing (ENOSPC, EIO ...). No partial batch is left behind."""


class LogDirNotFoundError(StorageError, error_name="LOG_DIR_NOT_FOUND"):
    """A configured log dir is missing and cannot be created."""


class OutOfOrderSequenceError(StorageError, error_name="OUT_OF_ORDER_SEQUENCE_NUMBER"):
    """A sequence gap, or a new epoch not starting at 0 (Kafka's OutOfOrderSequenceException)."""


class InvalidProducerEpochError(StorageError, error_name="INVALID_PRODUCER_EPOCH"):
    """An epoch below the producer's current one (Kafka's InvalidProducerEpochException)."""


class UnknownTopicOrPartitionError(StorageError, error_name="UNKNOWN_TOPIC_OR_PARTITION"):
    """No log for that topic-partition."""


class InvalidTxnStateError(StorageError, error_name="INVALID_TXN_STATE"):
    """A non-transactional write while the producer's transaction is open (InvalidTxnState)."""


class TransactionCoordinatorFencedError(StorageError, error_name="TRANSACTION_COORDINATOR_FENCED"):
    """A marker from an older coordinator epoch (TransactionCoordinatorFencedException)."""
