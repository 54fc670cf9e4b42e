"""Log compaction: ``cleanup.policy=compact`` keeps at least the latest record of every key.

What compaction guarantees (as Kafka): for a partition whose ``cleanup.policy`` contains
``compact``, a consumer reading from the log start sees, for every key, at least the last
record written with that key; offsets never change (a compacted log has gaps, and a batch may
hold fewer records than its ``last_offset_delta + 1`` says, or none); a key whose latest record is
a tombstone (null value) disappears entirely once the tombstone's delete horizon passed
(``delete.retention.ms`` after the first cleaning pass that kept it). Records younger than
``min.compaction.lag.ms`` and the active segment are never cleaned; a log is cleaned once its
dirty share exceeds ``min.cleanable.dirty.ratio`` or a dirty record is older than
``max.compaction.lag.ms``.

Files (in a partition directory; ``N`` = a base offset in 20 digits, see ``storage.segment``):

    N.log.cleaned, N.index.cleaned, N.timeindex.cleaned
        a cleaned segment being written (only while a pass runs);
    N.log.swap, N.index.swap, N.timeindex.swap
        a finished, fsynced cleaned segment about to replace the segments it covers;
    N.log.deleted, ...
        replaced segments, removed after ``file.delete.delay.ms`` (as retention's);

and in each log dir ``cleaner-offset-checkpoint`` (``manager``): the first dirty offset of every
compacted partition, in Kafka's offset-checkpoint text format.

Byte layout: a cleaned segment is an ordinary segment - v2 batches back to back with offset and
time indexes. A rewritten batch keeps the source batch's base offset, last offset delta,
partition leader epoch, producer id, producer epoch, base sequence, attributes (codec,
timestamp type, transactional, control) and the kept records' offset deltas; it may carry
attribute bit 6 ("delete horizon") with ``base_timestamp`` = the horizon (KIP-534). A batch
that kept nothing is either dropped or, when it holds an active producer's last sequence or is
the last batch of its group, kept as a 61-byte empty batch (``records_count`` 0). See
``batch_filter`` for the rules, ``cleaner`` for a pass, ``segment_writer`` and ``swap`` for the
crash-safe ``.cleaned`` -> ``.swap`` -> live protocol and what recovery makes of each crash
state (always the old segments or the new one, never a mix), ``manager`` for scheduling and
``log_cleaner`` for the threads.

Produce path: ``require_record_keys`` (``records``) refuses records without a key on a
compacted log with INVALID_RECORD - the one place a produce request's records are decoded
(keys only, compacted topics only), as Kafka's LogValidator does.

Tombstone rule: Kafka's KIP-534 delete horizon (not the older "last modified time of the clean
segments" rule): the horizon is set in the batch on the first pass that keeps the tombstone and
checked on later passes against the pass's clock.

Threading: see ``log_cleaner``. This package never imports ``broker``, ``protocol``,
``config`` or ``analytics``; it uses ``PartitionLog``'s lock and segment list for swaps.
"""

from .cleaner import (
    Cleaner,
    CleanerStats,
    CleaningAbortedError,
    CleanResult,
    LogToClean,
    group_segments_by_size,
)
from .config import CleanerConfig, CompactionConfig, compaction_config_from
from .log_cleaner import LogCleaner
from .manager import CLEANER_OFFSET_CHECKPOINT, LogCleanerManager, cleanable_offsets
from .offset_map import OffsetMap
from .records import require_record_keys

__all__ = [
    "CLEANER_OFFSET_CHECKPOINT",
    "CleanResult",
    "Cleaner",
    "CleanerConfig",
    "CleanerStats",
    "CleaningAbortedError",
    "CompactionConfig",
    "LogCleaner",
    "LogCleanerManager",
    "LogToClean",
    "OffsetMap",
    "cleanable_offsets",
    "compaction_config_from",
    "group_segments_by_size",
    "require_record_keys",
]
