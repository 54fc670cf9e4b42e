"""Reading a share partition's next records from the log (runs in a worker thread).

The same read as Fetch (``broker/fetch_messages.py``'s ``read_partition``: up to the HW, or up
to the LSO with the aborted transactions for read_committed), then a walk over the batch headers
(``storage.batch.unpack_batch_header``): each batch's base and last offset, whether it is a
control batch, and under read_committed whether it belongs to an aborted transaction (such
batches are archived by the share partition and never sent, as Kafka 4.2 does).
"""

from __future__ import annotations

from dataclasses import dataclass

from tidelog.broker.fetch_messages import read_partition
from tidelog.broker.share.partition import Batch
from tidelog.storage import PartitionLog
from tidelog.storage.batch import BATCH_HEADER_SIZE, unpack_batch_header

__all__ = ("LogRead", "read_batches")


@dataclass(frozen=True, slots=True)
class LogRead:
    data: bytes
    #: (batch, position in ``data``, size)
    batches: tuple[tuple[Batch, int, int], ...]
    log_start_offset: int
    high_watermark: int

    def records_of(self, sent: list[Batch]) -> bytes:
        """The bytes of the ``sent`` batches, in order."""
        wanted = {b.base_offset for b in sent}
        return b"".join(
            self.data[pos : pos + size] for b, pos, size in self.batches if b.base_offset in wanted
        )


def read_batches(
    partition_log: PartitionLog, offset: int, max_bytes: int, read_committed: bool
) -> LogRead:
    offset = max(offset, partition_log.log_start_offset)
    info, aborted_txns = read_partition(
        partition_log, offset, max_bytes, read_committed=read_committed
    )
    aborted = tuple((t.producer_id, t.first_offset, t.last_offset) for t in aborted_txns)
    data = info.read_bytes() if info.size_in_bytes > 0 else b""
    batches: list[tuple[Batch, int, int]] = []
    pos = 0
    while pos + BATCH_HEADER_SIZE <= len(data):
        header = unpack_batch_header(data, pos)
        size = header.size_in_bytes
        if pos + size > len(data):
            break
        base = header.base_offset
        # Kafka divergence: Kafka sends control batches and lets the client acknowledge their
        # offsets as gaps; tidelog archives them (and aborted transactional batches under
        # read_committed) itself and leaves them out of the acquired ranges and the records.
        skip = header.is_control
        if not skip and aborted and header.is_transactional:
            producer_id = header.producer_id
            skip = any(pid == producer_id and first <= base <= end for pid, first, end in aborted)
        batches.append((Batch(base, header.last_offset, skip), pos, size))
        pos += size
    return LogRead(data, tuple(batches), info.log_start_offset, info.high_watermark)
