"""protocol.fast.metadata writes exactly what kio's writer writes for MetadataResponse v0-13,
and kio's reader reads it back to the same answer."""

from __future__ import annotations

import io
import uuid
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from tidelog.protocol.fast import metadata as fast_metadata
from tidelog.protocol.fast.metadata import (
    UNSET_OPERATIONS,
    MetadataBroker,
    MetadataTopic,
    encode_metadata_body,
    partition_array,
)
from tidelog.protocol.schema import build, response_types

API_KEY = 3
SETTINGS = settings(
    max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), database=None
)

errors = st.sampled_from([0, 3, 17, 29, 100, -1])
int32s = st.integers(-(2**31), 2**31 - 1)
node_ids = st.integers(0, 2**31 - 1)
# ASCII and multi-byte text, long enough to need a two-byte length varint (127+ bytes)
names = st.text(alphabet="abcXYZ._-09é€", min_size=1, max_size=30) | st.sampled_from(
    ["t" * 126, "t" * 127, "t" * 200, "ü" * 70]
)
# counts around the one-byte varint limit too (a compact array of n stores n + 1)
partition_counts = st.integers(0, 40) | st.sampled_from([126, 127, 128, 300, 1000])
brokers = st.builds(
    MetadataBroker,
    node_id=node_ids,
    host=names,
    port=st.integers(0, 65535),
    rack=st.none() | names,
)


@st.composite
def topics(draw: st.DrawFn, version: int) -> MetadataTopic:
    error_code = draw(errors)
    # a null name only where the version allows it (v12+: unknown topic ids)
    name = draw(st.none() | names) if version >= 12 else draw(names)
    return MetadataTopic(
        name=name,
        topic_id=draw(st.uuids() | st.just(uuid.UUID(int=0))),
        is_internal=draw(st.booleans()),
        partition_count=0 if error_code else draw(partition_counts),
        leader_id=draw(node_ids),
        leader_epoch=draw(st.integers(0, 2**31 - 1)),
        authorized_operations=draw(int32s),
        error_code=error_code,
    )


@st.composite
def answers(draw: st.DrawFn) -> tuple[int, dict[str, Any]]:
    version = draw(st.integers(0, 13))
    return version, {
        "brokers": draw(st.lists(brokers, min_size=0, max_size=3)),
        "cluster_id": draw(st.none() | names),
        "controller_id": draw(int32s),
        "topics": draw(st.lists(topics(version), max_size=4)),
        "cluster_authorized_operations": draw(int32s),
        "error_code": draw(errors),
    }


def _kio_entity(version: int, fields: dict[str, Any]) -> Any:
    types = response_types(API_KEY, version)
    return build(
        types.MetadataResponse,
        throttle_time=timedelta(0),
        brokers=tuple(
            build(types.MetadataResponseBroker, **b._asdict()) for b in fields["brokers"]
        ),
        cluster_id=fields["cluster_id"],
        controller_id=fields["controller_id"],
        topics=tuple(
            build(
                types.MetadataResponseTopic,
                error_code=ErrorCode(t.error_code),
                name=t.name,
                # kio reads the zero id back as None and writes None as the zero id
                topic_id=t.topic_id if t.topic_id is not None and t.topic_id.int else None,
                is_internal=t.is_internal,
                partitions=tuple(
                    build(
                        types.MetadataResponsePartition,
                        error_code=ErrorCode.none,
                        partition_index=i,
                        leader_id=t.leader_id,
                        leader_epoch=t.leader_epoch,
                        replica_nodes=(t.leader_id,),
                        isr_nodes=(t.leader_id,),
                        offline_replicas=(),
                    )
                    for i in range(t.partition_count)
                ),
                topic_authorized_operations=t.authorized_operations,
            )
            for t in fields["topics"]
        ),
        cluster_authorized_operations=fields["cluster_authorized_operations"],
        error_code=ErrorCode(fields["error_code"]),
    )


def _kio_bytes(version: int, response: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(load_response_schema(API_KEY, version))(buffer, response)
    return buffer.getvalue()


def _encode(version: int, fields: dict[str, Any]) -> list[bytes]:
    return encode_metadata_body(
        version,
        fields["brokers"],
        fields["cluster_id"],
        fields["controller_id"],
        fields["topics"],
        cluster_authorized_operations=fields["cluster_authorized_operations"],
        error_code=fields["error_code"],
    )


@SETTINGS
@given(answer=answers())
def test_metadata_matches_kio_and_reads_back(answer: tuple[int, dict[str, Any]]) -> None:
    version, fields = answer
    expected = _kio_entity(version, fields)
    body = b"".join(_encode(version, fields))
    assert body == _kio_bytes(version, expected)
    decoded, end = entity_reader(load_response_schema(API_KEY, version))(body, 0)
    assert end == len(body)
    assert decoded == expected


@SETTINGS
@given(
    version=st.integers(0, 13),
    count=partition_counts,
    leader_id=node_ids,
    leader_epoch=st.integers(0, 2**31 - 1),
)
def test_topics_with_the_same_count_share_one_partition_array(
    version: int, count: int, leader_id: int, leader_epoch: int
) -> None:
    """A large shared array is one object, never copied into the answer."""
    shared = partition_array(version, count, leader_id, leader_epoch)
    topics = [
        MetadataTopic(f"t{i}", uuid.uuid4(), False, count, leader_id, leader_epoch)
        for i in range(3)
    ]
    chunks = encode_metadata_body(version, [], None, -1, topics)
    if len(shared) >= 4096:
        assert sum(1 for chunk in chunks if chunk is shared) == 3
    else:  # small arrays are copied into the surrounding bytes
        assert all(chunk is not shared for chunk in chunks)


def test_the_array_cache_is_bounded_by_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """Many distinct counts: the oldest arrays are dropped, answers stay right."""
    monkeypatch.setattr(fast_metadata, "ARRAY_CACHE_BYTES", 20_000)
    fast_metadata.clear_partition_arrays()
    try:
        for count in range(100, 160):
            array = partition_array(13, count, 1, 0)
            assert fast_metadata.cached_array_bytes() <= 20_000
            assert partition_array(13, count, 1, 0) is array  # the newest is kept
        expected = partition_array(13, 100, 1, 0)  # dropped long ago: encoded again
        assert expected == fast_metadata._encode_partition_array(9, 100, 1, 0)
    finally:
        fast_metadata.clear_partition_arrays()


def test_full_cluster_answer_of_twenty_thousand_partitions() -> None:
    """20 topics x 1,000 partitions at v13 (confluent-kafka's version): same bytes as kio."""
    topics = [
        MetadataTopic(f"bench-{i}", uuid.uuid4(), False, 1000, 1, 0, UNSET_OPERATIONS)
        for i in range(20)
    ]
    fields: dict[str, Any] = {
        "brokers": [MetadataBroker(1, "127.0.0.1", 9092)],
        "cluster_id": "tidelog",
        "controller_id": 1,
        "topics": topics,
        "cluster_authorized_operations": UNSET_OPERATIONS,
        "error_code": 0,
    }
    body = b"".join(_encode(13, fields))
    assert body == _kio_bytes(13, _kio_entity(13, fields))


def test_unsupported_version_is_refused() -> None:
    try:
        encode_metadata_body(14, [], None, -1, [])
    except ValueError as exc:
        assert "v14" in str(exc)
    else:
        raise AssertionError("v14 must be refused")
