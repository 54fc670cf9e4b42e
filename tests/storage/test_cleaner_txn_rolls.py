"""The cleaner over aborted transactions that span segment rolls (issue 26's review).

The cleaner finds the aborted transactions of the range it cleans through the partition log's
one look-up (``PartitionLog.aborted_transactions``). A transaction whose records start in the
first segment and whose ABORT marker (so its ``.txnindex`` entry) lies several segments later
must still be dropped everywhere, and none of its values may shadow a committed one.
"""

from __future__ import annotations

from pathlib import Path

from tests.storage.storage_helpers import FakeClock
from tests.storage.test_cleaner import batch, everything, make
from tidelog.storage.record_codec import iter_records


def test_aborted_transaction_spanning_rolls_is_cleaned_away(
    tmp_path: Path, clock: FakeClock
) -> None:
    manager, log, cleaner = make(tmp_path, clock)
    aborting = {"producer_id": 5, "producer_epoch": 0, "is_transactional": True}
    committing = {"producer_id": 6, "producer_epoch": 0, "is_transactional": True}
    log.append(batch((b"k", b"first"), (b"j", b"j0")))
    for i in range(12):
        log.append(batch((b"k", b"aborted-%d" % i), base_sequence=i, **aborting))
        if i == 6:
            log.append(batch((b"k", b"committed"), base_sequence=0, **committing))
            log.append_end_txn_marker(
                producer_id=6, producer_epoch=0, coordinator_epoch=0, commit=True
            )
    log.append_end_txn_marker(producer_id=5, producer_epoch=0, coordinator_epoch=0, commit=False)
    log.roll()
    log.append(batch((b"x", b"1")))
    log.roll()
    segments = log.segments()
    (entry,) = [t for s in segments for t in s.txn_index.entries]
    holding_marker = max(i for i, s in enumerate(segments) if s.base_offset <= entry.last_offset)
    assert entry.first_offset == 2 and holding_marker >= 3  # began three rolls earlier
    assert cleaner.clean_log(log) is not None
    values = [(r.key, r.value) for r in iter_records(everything(log))]
    assert not [v for k, v in values if v is not None and v.startswith(b"aborted")]
    assert [v for k, v in values if k == b"k"] == [b"committed"]
    assert (b"j", b"j0") in values and (b"x", b"1") in values
    manager.shutdown()
