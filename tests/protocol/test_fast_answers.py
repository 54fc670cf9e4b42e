"""protocol.fast.answers writes exactly what kio's writers write, for every served version."""

from __future__ import annotations

import io
import uuid
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer
from kio.serial.readers import tz_aware_from_i64
from kio.static.primitive import i64

from tidelog.protocol.fast.answers import (
    FetchPartitionAnswer,
    ProducePartitionAnswer,
    encode_fetch_body,
    encode_fetch_one,
    encode_produce_body,
)
from tidelog.protocol.schema import build, response_types

errors = st.sampled_from([0, 1, 3, 2, 7, 10, 87, -1])
offsets = st.integers(min_value=-1, max_value=2**62)
fetch_partitions = st.lists(
    st.builds(
        FetchPartitionAnswer,
        partition=st.integers(0, 2**31 - 1),
        error_code=errors,
        high_watermark=offsets,
        last_stable_offset=offsets,
        log_start_offset=offsets,
        records=st.binary(max_size=300),
        aborted_transactions=st.lists(st.tuples(st.integers(0, 2**62), offsets), max_size=2).map(
            tuple
        ),
    ),
    max_size=4,
)
names = st.text(alphabet="abcXYZ._-09", min_size=1, max_size=30)


def _kio_bytes(api_key: int, version: int, response: object) -> bytes:
    buffer = io.BytesIO()
    entity_writer(load_response_schema(api_key, version))(buffer, response)
    return buffer.getvalue()


@settings(max_examples=60, deadline=None)
@given(
    version=st.integers(4, 16),
    topics=st.lists(st.tuples(names, fetch_partitions), max_size=3),
    error_code=errors,
    session_id=st.integers(0, 2**31 - 1),
)
def test_fetch_matches_kio(
    version: int,
    topics: list[tuple[str, list[FetchPartitionAnswer]]],
    error_code: int,
    session_id: int,
) -> None:
    if version < 7:
        error_code, session_id = 0, 0
    keyed = [
        (uuid.uuid5(uuid.NAMESPACE_DNS, name) if version >= 13 else name, parts)
        for name, parts in topics
    ]
    types = response_types(1, version)
    response = build(
        types.FetchResponse,
        throttle_time=timedelta(0),
        error_code=ErrorCode(error_code),
        session_id=session_id,
        responses=tuple(
            build(
                types.FetchableTopicResponse,
                topic=key,
                topic_id=key,
                partitions=tuple(
                    build(
                        types.PartitionData,
                        partition_index=p.partition,
                        error_code=ErrorCode(p.error_code),
                        high_watermark=p.high_watermark,
                        last_stable_offset=p.last_stable_offset,
                        log_start_offset=p.log_start_offset,
                        aborted_transactions=tuple(
                            build(
                                types.AbortedTransaction,
                                producer_id=producer_id,
                                first_offset=first_offset,
                            )
                            for producer_id, first_offset in p.aborted_transactions
                        ),
                        preferred_read_replica=-1,
                        records=bytes(p.records),
                    )
                    for p in parts
                ),
            )
            for key, parts in keyed
        ),
    )
    lean = encode_fetch_body(version, keyed, error_code=error_code, session_id=session_id)
    assert b"".join(bytes(c) for c in lean) == _kio_bytes(1, version, response)
    for parts in (p for _, p in keyed):
        for p in parts:
            if p.records:
                assert any(c is p.records for c in lean), "record data must not be copied"


@settings(max_examples=200, deadline=None)
@given(
    version=st.integers(4, 16),
    name=names,
    partition=st.integers(0, 2**31 - 1),
    error_code=errors,
    high_watermark=offsets,
    log_start_offset=offsets,
    records=st.binary(max_size=300) | st.sampled_from([b"r" * 125, b"r" * 126, b"r" * 127]),
)
def test_fetch_one_matches_the_general_encoder(
    version: int,
    name: str,
    partition: int,
    error_code: int,
    high_watermark: int,
    log_start_offset: int,
    records: bytes,
) -> None:
    topic: str | uuid.UUID = uuid.uuid5(uuid.NAMESPACE_DNS, name) if version >= 13 else name
    answer = FetchPartitionAnswer(
        partition, error_code, high_watermark, high_watermark, log_start_offset, records
    )
    general = b"".join(bytes(c) for c in encode_fetch_body(version, [(topic, [answer])]))
    head, tail = encode_fetch_one(
        version, topic, partition, error_code, high_watermark, log_start_offset, len(records)
    )
    assert head + records + tail == general


produce_partitions = st.lists(
    st.builds(
        ProducePartitionAnswer,
        index=st.integers(0, 2**31 - 1),
        error_code=errors,
        base_offset=offsets,
        log_append_time_ms=st.one_of(st.just(-1), st.integers(0, 2**41)),
        log_start_offset=offsets,
        error_message=st.one_of(st.none(), st.text(max_size=40)),
    ),
    max_size=4,
)


@settings(max_examples=60, deadline=None)
@given(
    version=st.integers(3, 10), topics=st.lists(st.tuples(names, produce_partitions), max_size=3)
)
def test_produce_matches_kio(
    version: int, topics: list[tuple[str, list[ProducePartitionAnswer]]]
) -> None:
    types = response_types(0, version)
    response = build(
        types.ProduceResponse,
        responses=tuple(
            types.TopicProduceResponse(
                name=name,
                partition_responses=tuple(
                    build(
                        types.PartitionProduceResponse,
                        index=p.index,
                        error_code=ErrorCode(p.error_code),
                        base_offset=p.base_offset,
                        log_append_time=(
                            tz_aware_from_i64(i64(p.log_append_time_ms))
                            if p.log_append_time_ms >= 0
                            else None
                        ),
                        log_start_offset=p.log_start_offset,
                        record_errors=(),
                        error_message=p.error_message,
                    )
                    for p in parts
                ),
            )
            for name, parts in topics
        ),
        throttle_time=timedelta(0),
    )
    if version < 8:
        topics = [
            (
                n,
                [
                    ProducePartitionAnswer(
                        p.index,
                        p.error_code,
                        p.base_offset,
                        p.log_append_time_ms,
                        p.log_start_offset,
                    )
                    for p in ps
                ],
            )
            for n, ps in topics
        ]
    assert encode_produce_body(version, topics) == _kio_bytes(0, version, response)
