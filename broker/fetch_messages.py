"""Fetch's read: Kafka's ``ReplicaManager.fetchMessages`` and ``readFromLog``.

The Fetch handler (``broker/handlers/fetch.py``, Kafka's KafkaApis.handleFetchRequest) lists the
partitions a request names (``FetchPartitionData``, one per partition) and calls
``fetch_messages``, which gives back data: what to send for each partition (its error, HW, last
stable offset, log start offset, the aborted transactions of a read_committed read, and the
record data, as bytes read or as the segment files' regions for ``sendfile``), or a
``DelayedFetch`` (``broker/delayed_fetch.py``) when the answer must wait. The handler encodes
the answer from the data; Produce reads the same way (handler -> ``append_records.py`` -> log).

``read_from_log`` finds, for every partition, the HW, log start offset and the file regions of
the batches to send (``PartitionLog.read``; ``PartitionLog.read_for_fetch`` up to the last stable
offset with the aborted transactions under isolation level 1, READ_COMMITTED); no record byte is
read there, except the CRC check of bytes read for the first time since start-up: on the event
loop (``on_loop``) at most ``BLOCKING_READ_BYTES`` of them, else the read reports ``deferred``
and the fetch repeats it in a worker thread. ``read_records`` then reads the record data of
each partition (``os.pread``), except one partition's ``SENDFILE_MIN_BYTES`` or more, which stay
file regions (``broker/sendfile.py`` sends them); a read of ``BLOCKING_READ_BYTES`` or more
belongs in a worker thread.

Threading: event loop, except ``read_from_log(on_loop=False)`` and ``read_records(blocking_ok=
True)``, which ``DelayedFetch`` runs in a worker thread.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar

from tidelog.broker.sendfile import BLOCKING_READ_BYTES, SENDFILE_MIN_BYTES
from tidelog.protocol.errors import ErrorCode, error_code_for
from tidelog.storage.errors import StorageError
from tidelog.storage.lazy_crc import CheckDeferred

if TYPE_CHECKING:
    import asyncio

    from tidelog.broker.delayed_fetch import DelayedFetch
    from tidelog.broker.purgatory import HighWatermarkWaiters
    from tidelog.broker.topics import Topics
    from tidelog.storage import PartitionLog, ReadInfo
    from tidelog.storage.info import FileRegion
    from tidelog.storage.transaction_index import AbortedTxn

__all__ = (
    "FetchParams",
    "FetchPartitionData",
    "ReplicaView",
    "answer_now",
    "fetch_messages",
    "read_from_log",
    "read_partition",
    "read_records",
)

T = TypeVar("T")


class ReplicaView(Protocol):
    """What ``fetch_messages`` and ``DelayedFetch`` use of the broker (the part of Kafka's
    ReplicaManager a fetch reads: the logs, the HW waiters of the purgatory, worker threads)."""

    @property
    def topics(self) -> Topics: ...
    @property
    def partitions(self) -> HighWatermarkWaiters: ...
    @property
    def stopping(self) -> bool: ...
    async def run_blocking(self, fn: Callable[..., T], *args: Any) -> T: ...
    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]: ...


class FetchParams(NamedTuple):
    """Kafka's FetchParams: the request's limits (``max_bytes`` already capped to
    ``fetch.max.bytes`` and the client's quota)."""

    max_bytes: int
    min_bytes: int
    max_wait_s: float


@dataclass(slots=True)
class FetchPartitionData:
    """One requested partition and what to send for it (Kafka's FetchPartitionData)."""

    topic: str | None
    topic_id: Any
    partition: int
    fetch_offset: int
    max_bytes: int
    #: isolation level 1 (READ_COMMITTED): data up to the last stable offset only
    read_committed: bool = False
    #: Not authorized (READ on the topic): answered TOPIC_AUTHORIZATION_FAILED, never waited on.
    denied: bool = False
    error: ErrorCode = ErrorCode.none
    high_watermark: int = -1
    log_start_offset: int = -1
    last_stable_offset: int = -1
    #: ``(producer_id, first_offset)`` of the aborted transactions in range (read_committed)
    aborted: tuple[tuple[int, int], ...] = ()
    #: The batches the read found (file regions, not read yet); None: no data.
    read: ReadInfo | None = None
    #: The record data read into memory (``read_records``)...
    records: bytes = b""
    #: ... or the file regions to send as they are (``sendfile``: one partition, much data).
    file_regions: tuple[FileRegion, ...] = ()
    #: The log the last read looked at (a woken long poll skips it when its HW has not moved).
    log: PartitionLog | None = None

    @property
    def size(self) -> int:
        """Bytes of record data found (Kafka's BytesOutPerSec counts these)."""
        return 0 if self.read is None else self.read.size_in_bytes


def read_partition(
    partition_log: PartitionLog,
    fetch_offset: int,
    max_bytes: int,
    *,
    read_committed: bool,
    min_one_message: bool = True,
    verify_limit: int | None = None,
    last_stable_offset: int | None = None,
) -> tuple[ReadInfo, tuple[AbortedTxn, ...]]:
    """One partition's batches from ``fetch_offset`` (up to the HW; read_committed: the LSO)
    and, under read_committed, the aborted transactions overlapping them. Fetch and ShareFetch
    (``share/reader.py``) read through it."""
    if not read_committed:
        info = partition_log.read(
            fetch_offset,
            max_bytes,
            upper_bound=partition_log.high_watermark,
            min_one_message=min_one_message,
            verify_limit=verify_limit,
        )
        return info, ()
    fetched = partition_log.read_for_fetch(
        fetch_offset,
        max_bytes,
        read_committed=True,
        min_one_message=min_one_message,
        verify_limit=verify_limit,
        last_stable_offset=last_stable_offset,
    )
    return fetched.read, fetched.aborted_transactions or ()


def read_from_log(
    topics: Topics,
    partitions: list[FetchPartitionData],
    max_bytes: int,
    *,
    on_loop: bool = True,
    moved_only: bool = False,
) -> tuple[int, bool, bool]:
    """Look every partition up and find the batches to send (file regions: no data read yet);
    returns (bytes available, any error, deferred: a partition's first read of old bytes
    belongs in a worker thread - repeat the read there with ``on_loop=False``).

    ``moved_only`` (a long poll woken by a HW notify): a partition the last read found caught
    up is kept as it was while its log is the same and its HW has not moved (every wake is a
    HW move, a deletion or a config change, each seen here), so a wake re-reads the partitions
    that moved, not all of them."""
    total = 0
    errors = False
    verify_limit = BLOCKING_READ_BYTES if on_loop else None
    for w in partitions:
        if moved_only:
            kept = w.log
            if (
                kept is not None
                and w.read is None
                and w.error is ErrorCode.none
                and kept.high_watermark == w.high_watermark
                and topics.get_log(kept.topic, kept.partition) is kept
            ):
                continue
        w.read = None
        w.error = ErrorCode.none
        if w.topic is None:
            w.error = ErrorCode.unknown_topic_id
            errors = True
            continue
        if w.denied:
            w.error = ErrorCode.topic_authorization_failed
            continue
        partition_log = w.log = topics.get_log(w.topic, w.partition)
        if partition_log is None:
            w.error = ErrorCode.unknown_topic_or_partition
            errors = True
            continue
        log_start, hw, lso, log_end = partition_log.fetch_offsets()
        w.log_start_offset = log_start
        w.high_watermark = hw
        w.last_stable_offset = lso
        w.aborted = ()
        if not log_start <= w.fetch_offset <= log_end:
            w.error = ErrorCode.offset_out_of_range
            # As Kafka (ReplicaManager's read result of an OffsetOutOfRangeException): the
            # offsets of an out-of-range answer are unknown (-1), not the log's.
            w.high_watermark = w.log_start_offset = w.last_stable_offset = -1
            errors = True
            continue
        bound = lso if w.read_committed else hw
        if w.fetch_offset >= bound:
            continue  # caught up: empty answer (the common long-poll case)
        limit = min(w.max_bytes, max_bytes - total)
        if limit <= 0 and total > 0:
            continue
        try:
            if w.read_committed:
                info, aborted = read_partition(
                    partition_log,
                    w.fetch_offset,
                    max(limit, 0),
                    read_committed=True,
                    min_one_message=total == 0,
                    verify_limit=verify_limit,
                    last_stable_offset=w.last_stable_offset,
                )
                if aborted:
                    w.aborted = tuple((t.producer_id, t.first_offset) for t in aborted)
            else:
                info = partition_log.read(
                    w.fetch_offset,
                    max(limit, 0),
                    upper_bound=w.high_watermark,
                    min_one_message=total == 0,
                    verify_limit=verify_limit,
                )
        except CheckDeferred:
            return total, errors, True
        except StorageError as exc:
            w.error = error_code_for(exc.error_name)
            errors = True
            continue
        w.high_watermark = info.high_watermark
        w.log_start_offset = info.log_start_offset
        if info.size_in_bytes > 0:
            w.read = info
            total += info.size_in_bytes
    return total, errors, False


def read_records(partitions: list[FetchPartitionData], *, blocking_ok: bool) -> bool:
    """Fill each partition's ``records`` (or ``file_regions``: one partition of
    ``SENDFILE_MIN_BYTES`` or more is sent from the files); False, nothing read, when a read
    of ``BLOCKING_READ_BYTES`` or more belongs in a worker thread and ``blocking_ok`` is false."""
    if len(partitions) == 1:
        w = partitions[0]
        info = w.read
        if info is None:
            w.records, w.file_regions = b"", ()
            return True
        size = info.size_in_bytes
        if size >= SENDFILE_MIN_BYTES:
            w.records, w.file_regions = b"", info.regions
            return True
        if size >= BLOCKING_READ_BYTES and not blocking_ok:
            return False
        w.records, w.file_regions = info.read_bytes(), ()
        return True
    if not blocking_ok:
        for w in partitions:
            if w.read is not None and w.read.size_in_bytes >= BLOCKING_READ_BYTES:
                return False
    for w in partitions:
        w.file_regions = ()
        w.records = b"" if w.read is None else w.read.read_bytes()
    return True


def answer_now(
    errors: bool, total: int, min_bytes: int, remaining_s: float, stopping: bool
) -> bool:
    """Whether a fetch answers now rather than waits: an error, ``min_bytes`` there (any data
    when ``min_bytes`` <= 0), the wait over, or the broker stopping."""
    return (
        errors
        or total >= min_bytes
        or (total > 0 and min_bytes <= 0)
        or remaining_s <= 0
        or stopping
    )


def fetch_messages(
    replica: ReplicaView, params: FetchParams, partitions: list[FetchPartitionData]
) -> list[FetchPartitionData] | DelayedFetch:
    """Read ``partitions`` and give them back filled in (what to send), or a ``DelayedFetch``
    when the answer waits (long poll: ``min_bytes`` not there yet) or needs a worker thread (a
    big read, a first read of old bytes); ``DelayedFetch.start`` gives the future."""
    total, errors, deferred = read_from_log(replica.topics, partitions, params.max_bytes)
    if deferred:  # old bytes read for the first time: CRC-checked in a worker thread
        from tidelog.broker.delayed_fetch import DelayedFetch

        return DelayedFetch(replica, params, partitions, reread=True)
    # partitions of unknown (or unauthorized) topics are answered at once with their error:
    # never waited on
    waits = False
    for w in partitions:
        if w.topic is not None and not w.denied:
            waits = True
            break
    if not waits or answer_now(
        errors, total, params.min_bytes, params.max_wait_s, replica.stopping
    ):
        if read_records(partitions, blocking_ok=False):
            return partitions
        from tidelog.broker.delayed_fetch import DelayedFetch

        return DelayedFetch(replica, params, partitions, reread=False)  # a big read
    from tidelog.broker.delayed_fetch import DelayedFetch

    return DelayedFetch(replica, params, partitions, reread=False, wait=True)
