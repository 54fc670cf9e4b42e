"""The partition look-up and region scan shared by the Fetch handler and its long poll.

``scan`` finds, for every requested partition, the HW, log start offset and the file regions
of the batches to send (``PartitionLog.read``); no record byte is read here, except the CRC
check of bytes read for the first time since start-up: on the event loop (``on_loop``) at most
``BLOCKING_READ_BYTES`` of them, else the scan reports ``deferred`` and the fetch repeats it in
a worker thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from kio.static.constants import uuid_zero

from tidelog.broker.handlers.base import BrokerView
from tidelog.broker.sendfile import BLOCKING_READ_BYTES, SENDFILE_MIN_BYTES, FileAnswer
from tidelog.broker.topics import Topics
from tidelog.protocol.errors import ErrorCode, error_code_for
from tidelog.protocol.fast.answers import (
    encode_fetch_one,
    frame_answer,
    frame_chunks,
    frame_head,
)
from tidelog.storage import ReadInfo
from tidelog.storage.errors import StorageError
from tidelog.storage.lazy_crc import CheckDeferred

if TYPE_CHECKING:
    from tidelog.broker.handlers.fetch import Request as _KioFetchRequest
    from tidelog.protocol.fast.fetch import LeanFetchRequest

    #: A Fetch request as kio reads it or as the router's lean parser does
    #: (``protocol/fast/fetch.py``: the common requests, read in one pass).
    FetchRequest: TypeAlias = _KioFetchRequest | LeanFetchRequest

# BLOCKING_READ_BYTES (broker/sendfile.py): reads at least this large go to a worker thread
# instead of pread on the event loop; so does a scan that would CRC-check more than this many
# bytes no one checked since start-up (old segments on first read: ``storage.lazy_crc``).
__all__ = ("BLOCKING_READ_BYTES", "Wanted", "answer_one", "answer_now", "scan")


@dataclass(slots=True)
class Wanted:
    """One requested partition and what a pass over the logs found for it."""

    topic: str | None
    topic_id: Any
    partition: int
    fetch_offset: int
    max_bytes: int
    error: ErrorCode = ErrorCode.none
    high_watermark: int = -1
    log_start_offset: int = -1
    read: ReadInfo | None = None
    #: Not authorized (READ on the topic): answered TOPIC_AUTHORIZATION_FAILED, never waited on.
    denied: bool = False
    #: isolation level 1 (READ_COMMITTED): data up to the last stable offset only
    read_committed: bool = False
    last_stable_offset: int = -1
    aborted: tuple[tuple[int, int], ...] = ()


def requested(topics: Topics, version: int, request: FetchRequest) -> list[Wanted]:
    by_id = version >= 13
    committed = int(getattr(request, "isolation_level", 0)) == 1
    wanted: list[Wanted] = []
    for t in request.topics:
        # the topics are named by id from v13 (the lean parser's topics carry both fields)
        if by_id:
            topic_id = getattr(t, "topic_id", None)
            info = topics.by_id(topic_id)
            name = info.name if info is not None else None
        else:
            name, topic_id = getattr(t, "topic", None), uuid_zero
        for p in t.partitions:
            wanted.append(
                Wanted(
                    topic=name,
                    topic_id=topic_id,
                    partition=int(p.partition),
                    fetch_offset=int(p.fetch_offset),
                    max_bytes=int(p.partition_max_bytes),
                    read_committed=committed,
                )
            )
    return wanted


def scan(
    topics: Topics, wanted: list[Wanted], max_bytes: int, *, on_loop: bool = True
) -> tuple[int, bool, bool]:
    """Look every partition up and find the batches to send (file regions: no data read yet);
    returns (bytes available, any error, deferred: a partition's first read of old bytes
    belongs in a worker thread - repeat the scan there with ``on_loop=False``)."""
    total = 0
    errors = False
    verify_limit = BLOCKING_READ_BYTES if on_loop else None
    for w in wanted:
        w.read = None
        w.error = ErrorCode.none
        if w.topic is None:
            w.error = ErrorCode.unknown_topic_id
            errors = True
            continue
        if w.denied:
            w.error = ErrorCode.topic_authorization_failed
            continue
        partition_log = topics.get_log(w.topic, w.partition)
        if partition_log is None:
            w.error = ErrorCode.unknown_topic_or_partition
            errors = True
            continue
        w.high_watermark = partition_log.high_watermark
        w.log_start_offset = partition_log.log_start_offset
        w.last_stable_offset = partition_log.last_stable_offset
        w.aborted = ()
        if not w.log_start_offset <= w.fetch_offset <= partition_log.log_end_offset:
            w.error = ErrorCode.offset_out_of_range
            # As Kafka (ReplicaManager's read result of an OffsetOutOfRangeException): the
            # offsets of an out-of-range answer are unknown (-1), not the log's.
            w.high_watermark = w.log_start_offset = w.last_stable_offset = -1
            errors = True
            continue
        bound = w.last_stable_offset if w.read_committed else w.high_watermark
        if w.fetch_offset >= bound:
            continue  # caught up: empty answer (the common long-poll case)
        limit = min(w.max_bytes, max_bytes - total)
        if limit <= 0 and total > 0:
            continue
        try:
            if w.read_committed:
                fetched = partition_log.read_for_fetch(
                    w.fetch_offset,
                    max(limit, 0),
                    read_committed=True,
                    min_one_message=total == 0,
                    verify_limit=verify_limit,
                    last_stable_offset=w.last_stable_offset,
                )
                info = fetched.read
                w.aborted = tuple(
                    (t.producer_id, t.first_offset) for t in fetched.aborted_transactions or ()
                )
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


def count_bytes_out(metrics: Any, wanted: list[Wanted]) -> None:
    """Per-topic bytes out (Kafka's BytesOutPerSec) of an answer built from ``wanted``."""
    for w in wanted:
        if w.read is not None and w.topic is not None:
            metrics.topic_out(w.topic, w.read.size_in_bytes)


def answer_one(
    version: int, correlation_id: int, w: Wanted, *, blocking_ok: bool
) -> bytes | list[bytes | memoryview] | FileAnswer | None:
    """The framed answer for ``w`` as scanned; None when its read belongs in a worker thread
    and ``blocking_ok`` is false. Record data of ``SENDFILE_MIN_BYTES`` or more is not read:
    the answer names the file regions (``FileAnswer``) and the connection sends them."""
    info = w.read
    size = 0 if info is None else info.size_in_bytes
    flexible_header = version >= 12
    if info is not None and size >= SENDFILE_MIN_BYTES:
        head, tail = _encode_one(version, w, size)
        first = frame_head(correlation_id, flexible_header, head, size + len(tail))
        return FileAnswer(first, info.regions, tail)
    if info is None or size == 0:
        records = b""
    elif size >= BLOCKING_READ_BYTES and not blocking_ok:
        return None
    else:
        records = info.read_bytes()
    head, tail = _encode_one(version, w, len(records))
    if not records:
        return frame_answer(correlation_id, flexible_header, head + tail)
    return frame_chunks(correlation_id, flexible_header, head, records, tail)


def _encode_one(version: int, w: Wanted, records_size: int) -> tuple[bytes, bytes]:
    return encode_fetch_one(
        version,
        w.topic_id if version >= 13 else (w.topic or ""),
        w.partition,
        int(w.error),
        w.high_watermark,
        w.log_start_offset,
        records_size,
        w.last_stable_offset if w.last_stable_offset >= 0 else None,
        w.aborted,
    )


def answer_max_bytes(broker: BrokerView, request: FetchRequest) -> int:
    """The request's ``max_bytes``, never above ``fetch.max.bytes`` (as Kafka: the answer is
    read into memory, so one fetch of a huge max_bytes must not read a whole log)."""
    limit = int(broker.config.get_int("fetch.max.bytes"))
    return max(min(int(request.max_bytes), limit), 0)


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
