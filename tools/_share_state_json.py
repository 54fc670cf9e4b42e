"""``dump-log --share-group-state-decoder``: ``__share_group_state`` records as JSON.

The bytes are decoded by ``protocol/internal_topics/share_group_state.py``; this module words
them as kafka-dump-log's share-coordinator parser does::

    key: {"type":"0","data":{"groupId":"g","topicId":"<Kafka Uuid>","partition":0}}
    payload: {"version":"0","data":{"snapshotEpoch":3,"stateEpoch":0,"leaderEpoch":0,
              "startOffset":12,"stateBatches":[{"firstOffset":12,"lastOffset":19,
              "deliveryState":0,"deliveryCount":1}]}}

Type 0 is a ShareSnapshot, 1 a ShareUpdate (no stateEpoch). A tombstone is ``<DELETE>``; a
record that does not parse is ``Error at offset O, skipping. <reason>``.
"""

from __future__ import annotations

import base64
from typing import Any

from tidelog.protocol.internal_topics.share_group_state import (
    SNAPSHOT,
    ShareStateSchemaError,
    decode_key,
    decode_value,
)
from tidelog.tools._common import compact_json

__all__ = ["share_state_key_value"]


def share_state_key_value(
    offset: int, key: bytes | None, value: bytes | None
) -> tuple[str, str | None]:
    if key is None:
        return f"Error at offset {offset}, skipping. The record has no key", None
    try:
        k = decode_key(key)
        topic_id = base64.urlsafe_b64encode(k.topic_id.bytes).decode().rstrip("=")
        key_text = compact_json(
            {
                "type": str(k.record_type),
                "data": {"groupId": k.group_id, "topicId": topic_id, "partition": k.partition},
            }
        )
        if value is None:
            return key_text, "<DELETE>"
        v = decode_value(value, k.record_type)
    except ShareStateSchemaError as exc:
        return f"Error at offset {offset}, skipping. {exc}", None
    data: dict[str, Any] = {"snapshotEpoch": v.snapshot_epoch}
    if k.record_type == SNAPSHOT:
        data["stateEpoch"] = v.state_epoch
    data["leaderEpoch"] = v.leader_epoch
    data["startOffset"] = v.start_offset
    data["stateBatches"] = [
        {
            "firstOffset": b.first_offset,
            "lastOffset": b.last_offset,
            "deliveryState": b.delivery_state,
            "deliveryCount": b.delivery_count,
        }
        for b in v.state_batches
    ]
    return key_text, compact_json({"version": "0", "data": data})
