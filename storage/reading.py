"""The loop of ``PartitionLog.read``: whole batches from a snapshot of segments, up to a bound.

Kafka divergence: Kafka reads from one segment per fetch and may end on a partial batch (the
client drops it); tidelog returns whole batches, continuing into later segments while
``max_bytes`` allows.

Damage (a header that does not parse, or a CRC that does not match in bytes nobody checked since
the start-up, see ``storage.lazy_crc``) ends the read before it: the batches before it are
returned; a read that would start on it raises ``CorruptRecordError`` (CORRUPT_MESSAGE), so it is
never served as data and nothing after it is served either.

A caller on the event loop passes ``verify_limit``: a read whose batches hold more unchecked
bytes than that raises ``CheckDeferred`` up front (a walk over the batch headers only), to be
repeated in a worker thread.

Threading: runs in the reader's thread on a snapshot taken under the partition lock.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from .errors import CorruptRecordError
from .info import FileRegion
from .lazy_crc import CheckDeferred

if TYPE_CHECKING:
    from .log import PartitionLog
    from .segment import LogSegment

__all__ = ["collect_regions", "read_from_start"]


def read_from_start(
    partition_log: PartitionLog, max_bytes: int, *, upper_bound: int | None = None
) -> Iterator[tuple[int, bytes]]:
    """``(offset asked for, whole batches)`` from the log start offset to ``upper_bound`` (the
    high watermark of each read when None), ``max_bytes`` a read: how a coordinator loads its
    partition of an internal topic (a worker thread). The first batch may start below the offset
    asked for."""
    offset = partition_log.log_start_offset
    while True:
        info = partition_log.read(offset, max_bytes, upper_bound=upper_bound)
        if info.first_offset is None or info.last_offset is None:
            return
        yield offset, info.read_bytes()
        offset = info.last_offset + 1


def collect_regions(
    snapshot: Sequence[tuple[LogSegment, int]],
    start_offset: int,
    bound: int,
    max_bytes: int,
    min_one_message: bool,
    verify_limit: int | None = None,
) -> tuple[list[FileRegion], int, int | None, int | None]:
    """``(regions, total bytes, first batch's base offset, last offset)`` of a read.

    ``verify_limit``: the most unchecked bytes this call may CRC-check (None: no limit); past it
    ``CheckDeferred`` is raised before any check (``storage.lazy_crc``).
    """
    if verify_limit is not None:
        _within_verify_limit(snapshot, start_offset, bound, max_bytes, verify_limit)
    regions: list[FileRegion] = []
    total = 0
    first_offset: int | None = None
    last_offset: int | None = None
    done = start_offset >= bound
    for segment, end_position in snapshot:
        if done or segment.base_offset >= bound:
            break
        region_start = region_end = 0
        truncations = segment.truncations  # before reading: see LogSegment.read_hint
        try:
            unchecked = segment.unchecked
            checked = -1
            found = False
            for position, base_offset, batch_last, size in segment.iter_spans(
                segment.scan_start(start_offset, end_position), end_position
            ):
                if not found:  # one pass: skip the batches before the one holding the offset
                    if batch_last < start_offset:
                        continue
                    found = True
                    region_start = region_end = position
                if batch_last >= bound:
                    done = True
                    break
                end = position + size
                if position < unchecked.high and end > unchecked.low and end > checked:
                    with segment.log_file.pinned() as fd:
                        checked = unchecked.verify_from(
                            fd, segment.log_path, position, end_position
                        )
                    if checked < end:
                        raise CorruptRecordError(
                            f"batch at position {position} of {segment.log_path} is damaged"
                        )
                if total + size > max_bytes and (total > 0 or not min_one_message):
                    done = True
                    break
                if first_offset is None:
                    first_offset = base_offset
                last_offset = batch_last
                total += size
                region_end = end
        except CorruptRecordError:
            if total == 0:
                raise
            done = True  # damage: serve the batches before it, nothing after
        if region_end > region_start:
            if last_offset is not None:
                segment.read_hint = (truncations, last_offset + 1, region_end)  # next read
            regions.append(
                FileRegion(str(segment.log_path), region_start, region_end - region_start, segment)
            )
    return regions, total, first_offset, last_offset


def _within_verify_limit(
    snapshot: Sequence[tuple[LogSegment, int]],
    start_offset: int,
    bound: int,
    max_bytes: int,
    verify_limit: int,
) -> None:
    """Raise ``CheckDeferred`` when the batches a read would return (up to ``max_bytes``, one
    at least) hold more than ``verify_limit`` unchecked bytes. Headers only: nothing is
    checked here, and damage is left for the read itself to find."""
    unchecked_total = 0
    total = 0
    for segment, end_position in snapshot:
        if segment.base_offset >= bound:
            return
        unchecked = segment.unchecked
        if unchecked.high <= unchecked.low:
            continue  # nothing of this segment is left to check
        try:
            for position, _, batch_last, size in segment.iter_spans(
                segment.scan_start(start_offset, end_position), end_position
            ):
                if batch_last < start_offset:
                    continue
                if batch_last >= bound or (total > 0 and total + size > max_bytes):
                    return
                total += size
                if unchecked.needs_check(position, position + size):
                    unchecked_total += size
                    if unchecked_total > verify_limit:
                        raise CheckDeferred(
                            f"{segment.log_path}: more than {verify_limit} unchecked bytes"
                        )
        except CorruptRecordError:
            return  # the read reports it
