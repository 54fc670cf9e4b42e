"""A transaction whose Ongoing record a crash lost is aborted at the next start (issue 41).

Produce v12 (transaction version 2) appends the records as soon as the Ongoing record naming
their partition is appended, and both are fsynced side by side. A power cut may then keep the
records (the kernel writes pages back on its own) and lose the Ongoing record: the partition
holds an open transaction that ``__transaction_state`` does not know, which nothing would ever
end (its last stable offset would never move). The start finds it and aborts it (an ABORT
marker, logged at WARNING with the producer id and partition: Kafka's KIP-664 abort, done by
the coordinator), then fences the producer's epoch so that a retry of the lost batch is refused
rather than taken for a duplicate of the aborted one.

The power cut is simulated: SIGKILL, then the ``__transaction_state`` segment cut back to its
size before the Ongoing record (what a lost page cache leaves), then a start.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_transactions_tv2 import (
    create,
    end_txn_v5,
    init,
    last_stable_offset,
    produce_v12,
    read_committed,
    wait_lso,
)
from tests.support.kafka_wire import WireClient
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.internal_topics.consumer_offsets import partition_for

pytestmark = pytest.mark.integration

TXN_ID, TOPIC = "hang", "h"
#: transaction.state.log.num.partitions' default.
STATE_PARTITIONS = 50


def _state_segment(log_dir: Path) -> Path:
    directory = log_dir / f"__transaction_state-{partition_for(TXN_ID, STATE_PARTITIONS)}"
    (segment,) = sorted(directory.glob("*.log"))
    return segment


def _loaded(c: WireClient, call: Any) -> Any:
    """``call()`` until the restarted coordinator has loaded."""
    deadline = time.monotonic() + 20
    answer = call()
    while answer == ErrorCode.coordinator_load_in_progress and time.monotonic() < deadline:
        time.sleep(0.05)
        answer = call()
    return answer


def test_lost_ongoing_record_aborts_the_records_at_start(broker_factory: Any) -> None:
    broker = broker_factory()
    with WireClient(broker.bootstrap) as c:
        create(c, TOPIC)
        pid, epoch = init(c, TXN_ID)  # its Empty record is durable
        segment = _state_segment(Path(broker.log_dir))
        before_ongoing = segment.stat().st_size
        assert produce_v12(c, TXN_ID, TOPIC, pid, epoch, 0, [b"lost"]) == ErrorCode.none
        assert last_stable_offset(c, TOPIC) == 0  # open
    broker.kill()
    assert segment.stat().st_size > before_ongoing  # the Ongoing record
    os.truncate(segment, before_ongoing)  # a power cut that lost it, kept the records

    broker.start()
    with WireClient(broker.bootstrap) as c:
        # The retry of the lost batch (same epoch and sequence) is refused, not answered as
        # a duplicate of records that were aborted.
        retried = _loaded(c, lambda: produce_v12(c, TXN_ID, TOPIC, pid, epoch, 0, [b"lost"]))
        assert retried in (ErrorCode.invalid_producer_epoch, ErrorCode.producer_fenced)
        assert wait_lso(c, TOPIC, 2) == 2  # the record, the ABORT marker
        assert end_txn_v5(c, TXN_ID, pid, epoch, True)[0] == ErrorCode.producer_fenced
    log = broker.log_text()
    hanging = f"aborting the hanging transaction of producer id {pid} (epoch {epoch}) in {TOPIC}-0"
    assert hanging in log
    assert "WARNING" in log
    assert read_committed(broker.bootstrap, TOPIC, 1, 0) == []

    # A new instance goes on; its transaction commits and survives a restart.
    with WireClient(broker.bootstrap) as c:
        pid2, epoch2 = init(c, TXN_ID)
        assert (pid2, epoch2) != (pid, epoch)
        assert produce_v12(c, TXN_ID, TOPIC, pid2, epoch2, 0, [b"kept"]) == ErrorCode.none
        assert end_txn_v5(c, TXN_ID, pid2, epoch2, True)[0] == ErrorCode.none
        assert wait_lso(c, TOPIC, 4) == 4
    broker.stop()
    broker.start()
    assert read_committed(broker.bootstrap, TOPIC, 1, 1) == [b"kept"]
