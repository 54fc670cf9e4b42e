"""``dump-log --offsets-decoder``: ``__consumer_offsets`` keys and values as Kafka's JSON.

The bytes are decoded by ``protocol/internal_topics/consumer_offsets.py`` (the one home of that
format); this module
only words them as kafka-dump-log's OffsetsMessageParser does::

    key: {"type":"1","data":{"group":"g","topic":"t","partition":0}}
    payload: {"version":"3","data":{"offset":5,"leaderEpoch":-1,"metadata":"",...}}

A null value (a tombstone) is ``<DELETE>``. Kafka divergence: a group member's subscription and
assignment are shown as base64 of their bytes (Kafka decodes the consumer protocol's).
"""

from __future__ import annotations

import base64
import struct
from typing import Any

from tidelog.protocol.internal_topics.consumer_offsets import (
    GroupMetadataKey,
    OffsetCommitKey,
    SchemaError,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
)
from tidelog.tools._common import compact_json

__all__ = ["offsets_key_value"]


def _version(data: bytes) -> int:
    return int(struct.unpack_from(">h", data, 0)[0]) if len(data) >= 2 else -1


def offsets_key_value(key: bytes | None, value: bytes | None) -> tuple[str, str]:
    """(key text, payload text) of one ``__consumer_offsets`` record."""
    if key is None:
        return "NO KEY", "" if value is None else "NOT DECODED (no key)"
    try:
        decoded = decode_key(key)
    except (SchemaError, struct.error, UnicodeDecodeError) as exc:
        return f"unknown key ({exc})", "NOT DECODED"
    key_version = _version(key)
    if isinstance(decoded, OffsetCommitKey):
        data = {"group": decoded.group, "topic": decoded.topic, "partition": decoded.partition}
        key_text = compact_json({"type": str(key_version), "data": data})
    else:
        assert isinstance(decoded, GroupMetadataKey)
        key_text = compact_json({"type": str(key_version), "data": {"group": decoded.group}})
    if value is None:
        return key_text, "<DELETE>"
    version = _version(value)
    try:
        if isinstance(decoded, OffsetCommitKey):
            return key_text, compact_json(
                {"version": str(version), "data": _offset_value(value, version)}
            )
        return key_text, compact_json(
            {"version": str(version), "data": _group_value(value, version)}
        )
    except (SchemaError, struct.error, UnicodeDecodeError, IndexError) as exc:
        return key_text, f"NOT DECODED ({exc})"


def _offset_value(value: bytes, version: int) -> dict[str, Any]:
    v = decode_offset_commit_value(value)
    out: dict[str, Any] = {"offset": v.offset}
    if version >= 3:
        out["leaderEpoch"] = v.leader_epoch
    out["metadata"] = v.metadata
    out["commitTimestamp"] = v.commit_timestamp
    if version == 1:
        out["expireTimestamp"] = v.expire_timestamp
    return out


def _group_value(value: bytes, version: int) -> dict[str, Any]:
    g = decode_group_metadata_value(value)
    out: dict[str, Any] = {
        "protocolType": g.protocol_type,
        "generation": g.generation,
        "protocol": g.protocol,
        "leader": g.leader,
    }
    if version >= 2:
        out["currentStateTimestamp"] = g.current_state_timestamp
    members = []
    for m in g.members:
        member: dict[str, Any] = {"memberId": m.member_id}
        if version >= 3:
            member["groupInstanceId"] = m.group_instance_id
        member.update(clientId=m.client_id, clientHost=m.client_host)
        if version >= 1:
            member["rebalanceTimeout"] = m.rebalance_timeout
        member["sessionTimeout"] = m.session_timeout
        member["subscription"] = base64.b64encode(m.subscription).decode()
        member["assignment"] = base64.b64encode(m.assignment).decode()
        members.append(member)
    out["members"] = members
    return out
