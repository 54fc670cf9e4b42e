"""tidelog storage: Kafka's on-disk log format (message format v2), synchronous Python.

Layout of a log dir, of a partition dir and of each file is specified in the docstrings of
``storage.manager`` and ``storage.log_dirs`` (log dir), ``storage.local_log`` and ``storage.log``
(partition), ``storage.segment`` (segment files), ``storage.batch`` (record batches),
``storage.index`` (indexes), ``storage.checkpoint`` and ``storage.metadata``; crash recovery in
``storage.recovery`` and ``storage.segment_recovery``.

Threading: appends to one partition come from one thread (the broker's event loop); flush,
retention, reads and look-ups may run in worker threads concurrently (see ``storage.log``).
This package never imports ``broker``, ``protocol``, ``config`` or ``analytics``.
"""

from typing import TYPE_CHECKING, Any

from . import errors
from .batch import RecordBatchHeader, iter_batches, parse_batch_header, verify_crc
from .config import LogConfig
from .errors import (
    CorruptRecordError,
    InvalidRecordError,
    KafkaStorageError,
    LogDirNotFoundError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
    StorageError,
    UnsupportedMessageFormatError,
)
from .info import AppendInfo, FetchDataInfo, FileRegion, ReadInfo
from .manager import LogManager
from .segment import LogSegment

if TYPE_CHECKING:
    from .log import PartitionLog


def __getattr__(name: str) -> Any:
    """``PartitionLog`` is imported on first use (an empty log dir starts without it)."""
    if name == "PartitionLog":
        from .log import PartitionLog

        return PartitionLog
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "FetchDataInfo",
    "AppendInfo",
    "CorruptRecordError",
    "FileRegion",
    "InvalidRecordError",
    "KafkaStorageError",
    "LogConfig",
    "LogDirNotFoundError",
    "LogManager",
    "LogSegment",
    "MessageTooLargeError",
    "OffsetOutOfRangeError",
    "PartitionLog",
    "ReadInfo",
    "RecordBatchHeader",
    "RecordListTooLargeError",
    "StorageError",
    "UnsupportedMessageFormatError",
    "errors",
    "iter_batches",
    "parse_batch_header",
    "verify_crc",
]
