"""``dump-log --transaction-log-decoder``: ``__transaction_state`` records as Kafka's JSON.

The bytes are decoded by ``protocol/internal_topics/transaction_state.py`` (the one home of that
format); this module only words them as kafka-dump-log's TransactionLogMessageParser does (Kafka
4.4, checked against its DumpLogSegments by tests/kafkaref/test_kafka_reads_tidelog_files.py)::

    key: {"type":"0","data":{"transactionalId":"tx-1"}}
    payload: {"version":"0","data":{"producerId":0,"producerEpoch":0,
              "transactionTimeoutMs":60000,"transactionStatus":"CompleteCommit",
              "transactionPartitions":[{"topic":"t","partitionIds":[0]}],
              "transactionLastUpdateTimestampMs":...,"transactionStartTimestampMs":...}}

``transactionStatus`` is the TxnState's name (ids: Empty 0, Ongoing 1, PrepareCommit 2,
PrepareAbort 3, CompleteCommit 4, CompleteAbort 5, Dead 6, PrepareEpochFence 7; an unknown id is
printed as its number). A null value (a tombstone) is
``<DELETE>``; a key of another record type is ``Unknown record type N at offset O, skipping.``
and a record that does not parse is ``Error at offset O, skipping. <reason>``, as in Kafka.
Kafka divergence: a version 1 value's ``clientTransactionVersion`` tag is not shown (the codec
does not keep it; tidelog writes version 0).
"""

from __future__ import annotations

import struct
from typing import Any

from tidelog.protocol.internal_topics.transaction_state import (
    TxnSchemaError,
    decode_txn_key,
    decode_txn_value,
)
from tidelog.tools._common import compact_json

__all__ = ["txn_key_value"]

STATE_NAMES = (
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "Dead",
    "PrepareEpochFence",
)


def txn_key_value(offset: int, key: bytes | None, value: bytes | None) -> tuple[str, str | None]:
    """(key text, payload text or None) of one ``__transaction_state`` record."""
    if key is None:
        return f"Error at offset {offset}, skipping. The record has no key", None
    try:
        transactional_id = decode_txn_key(key)
        if transactional_id is None:
            kind = struct.unpack_from(">h", key, 0)[0]
            return f"Unknown record type {kind} at offset {offset}, skipping.", None
        key_text = compact_json({"type": "0", "data": {"transactionalId": transactional_id}})
        if value is None:
            return key_text, "<DELETE>"
        return key_text, compact_json(_valuecompact_json(value))
    except (TxnSchemaError, struct.error) as exc:
        return f"Error at offset {offset}, skipping. {exc}", None


def _valuecompact_json(value: bytes) -> dict[str, Any]:
    v = decode_txn_value(value)
    version = struct.unpack_from(">h", value, 0)[0]
    data: dict[str, Any] = {"producerId": v.producer_id}
    if version >= 1 and v.previous_producer_id != -1:
        data["previousProducerId"] = v.previous_producer_id
    if version >= 1 and v.next_producer_id != -1:
        data["nextProducerId"] = v.next_producer_id
    data["producerEpoch"] = v.producer_epoch
    data["transactionTimeoutMs"] = v.transaction_timeout_ms
    state = int(v.state_id)
    data["transactionStatus"] = STATE_NAMES[state] if 0 <= state < len(STATE_NAMES) else state
    data["transactionPartitions"] = (
        None
        if v.partitions is None
        else [{"topic": t, "partitionIds": list(ids)} for t, ids in v.partitions.items()]
    )
    data["transactionLastUpdateTimestampMs"] = v.last_update_ms
    data["transactionStartTimestampMs"] = v.start_ms
    if version >= 1 and v.client_transaction_version != 0:
        data["clientTransactionVersion"] = v.client_transaction_version
    return {"version": str(version), "data": data}
