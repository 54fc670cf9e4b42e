"""protocol.codec: header versions, request decoding, response framing, malformed input."""

from __future__ import annotations

import io
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema, load_response_schema
from kio.schema.api_versions.v3.response import ApiVersion, ApiVersionsResponse
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v4.request import MetadataRequest as MetadataV4
from kio.schema.metadata.v4.request import MetadataRequestTopic as MetadataTopicV4
from kio.schema.metadata.v12.request import MetadataRequest as MetadataV12
from kio.schema.metadata.v12.request import MetadataRequestTopic as MetadataTopicV12
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.serial import entity_reader, entity_writer

from tidelog.protocol import codec
from tidelog.protocol.errors import FrameDecodeError


def _request_frame(
    request: object, correlation_id: int = 42, client_id: str | None = "c1"
) -> bytes:
    header_cls = type(request).__header_schema__  # type: ignore[attr-defined]
    buffer = io.BytesIO()
    entity_writer(header_cls)(
        buffer,
        header_cls(
            request_api_key=type(request).__api_key__,  # type: ignore[attr-defined]
            request_api_version=type(request).__version__,  # type: ignore[attr-defined]
            correlation_id=correlation_id,
            client_id=client_id,
        ),
    )
    entity_writer(type(request))(buffer, request)
    return buffer.getvalue()


SAMPLES = [
    MetadataV4(topics=(MetadataTopicV4(name="a"),), allow_auto_topic_creation=False),
    MetadataV12(
        topics=(MetadataTopicV12(topic_id=None, name="b"),),  # type: ignore[arg-type]
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    ),
    ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout=__import__("datetime").timedelta(seconds=3),
        topic_data=(
            TopicProduceData(
                name="t",
                partition_data=(PartitionProduceData(index=0, records=b"\x00" * 70),),
            ),
        ),
    ),
]


@pytest.mark.parametrize(
    ("api_key", "version", "request_header", "response_header"),
    [
        (18, 0, 1, 0),
        (18, 3, 2, 0),  # ApiVersions answers with header v0 even when flexible
        (18, 4, 2, 0),
        (3, 8, 1, 0),
        (3, 9, 2, 1),
        (0, 8, 1, 0),
        (0, 9, 2, 1),
        (1, 11, 1, 0),
        (1, 12, 2, 1),
        (2, 5, 1, 0),
        (2, 6, 2, 1),
        (19, 4, 1, 0),
        (19, 5, 2, 1),
    ],
)
def test_header_versions_follow_flexible_versions(
    api_key: int, version: int, request_header: int, response_header: int
) -> None:
    assert codec.request_header_version(api_key, version) == request_header
    assert codec.response_header_version(api_key, version) == response_header


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda r: f"{type(r).__module__}")
def test_sample_round_trip(sample: object) -> None:
    frame = _request_frame(sample)
    header, offset = codec.decode_request_header(frame)
    assert header.api_key == type(sample).__api_key__  # type: ignore[attr-defined]
    assert header.api_version == type(sample).__version__  # type: ignore[attr-defined]
    assert header.correlation_id == 42
    assert header.client_id == "c1"
    decoded = codec.decode_request(frame, header.api_key, header.api_version, offset)
    assert decoded == sample
    # memoryviews of bytes (what the server hands over) decode the same
    assert codec.decode_request(memoryview(frame), header.api_key, header.api_version, offset) == (
        sample
    )


def test_null_client_id() -> None:
    frame = _request_frame(SAMPLES[1], client_id=None)
    header, _ = codec.decode_request_header(frame)
    assert header.client_id is None


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda r: f"{type(r).__module__}")
def test_every_truncation_raises_frame_decode_error(sample: object) -> None:
    frame = _request_frame(sample)
    for cut in range(len(frame)):
        prefix = frame[:cut]
        try:
            header, offset = codec.decode_request_header(prefix)
            codec.decode_request(prefix, header.api_key, header.api_version, offset)
        except FrameDecodeError:
            continue
        # A few prefixes can be complete requests by accident (e.g. an empty topic array);
        # only a clean decode or FrameDecodeError is allowed.


@settings(max_examples=400, deadline=None)
@given(
    api_key=st.sampled_from([0, 1, 2, 3, 18, 19, 7, 999, -1]),
    version=st.integers(min_value=-2, max_value=20),
    tail=st.binary(max_size=200),
)
def test_random_frames_only_raise_frame_decode_error(
    api_key: int, version: int, tail: bytes
) -> None:
    frame = struct.pack(">hhi", api_key, version, 1) + tail
    try:
        header, offset = codec.decode_request_header(frame)
        codec.decode_request(frame, header.api_key, header.api_version, offset)
    except FrameDecodeError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_arbitrary_bytes_only_raise_frame_decode_error(data: bytes) -> None:
    try:
        header, offset = codec.decode_request_header(data)
        codec.decode_request(data, header.api_key, header.api_version, offset)
    except FrameDecodeError:
        pass


def test_peek_needs_eight_bytes() -> None:
    with pytest.raises(FrameDecodeError):
        codec.peek_request_header(b"\x00\x12\x00\x03\x00\x00\x00")
    assert codec.peek_request_header(b"\x00\x12\x00\x03\x00\x00\x00\x07") == (18, 3, 7)


def test_unknown_version_is_a_decode_error() -> None:
    frame = struct.pack(">hhih", 3, 77, 1, -1)
    with pytest.raises(FrameDecodeError):
        codec.decode_request_header(frame)
    with pytest.raises(FrameDecodeError):
        codec.decode_request(frame, 3, 77, 10)


def test_encode_response_frames_header_and_body() -> None:
    response = ApiVersionsResponse(
        error_code=ErrorCode.none,
        api_keys=(ApiVersion(api_key=18, min_version=0, max_version=4),),
        throttle_time=__import__("datetime").timedelta(0),
    )
    data = codec.encode_response(18, 3, 99, response)
    (size, cid) = struct.unpack_from(">ii", data, 0)
    assert size == len(data) - 4 and cid == 99
    # header v0: the body starts right after the correlation id
    body, _ = entity_reader(load_response_schema(18, 3))(data, 8)
    assert body == response
    assert data[-1] == 0  # no tagged fields emitted for default features


def test_flexible_response_header_has_empty_tag_section() -> None:
    schema = load_response_schema(3, 13)
    from tidelog.protocol.schema import top_level_error_response

    response = top_level_error_response(schema, 0)
    data = codec.encode_response(3, 13, 5, response)
    assert struct.unpack_from(">ii", data, 0)[1] == 5
    assert data[8] == 0  # header v1 tagged-field count
    assert entity_reader(schema)(data, 9)[0] == response


def test_api_versions_fallback_is_v0_shaped() -> None:
    data = codec.encode_api_versions_fallback(11, 0, 4)
    assert struct.unpack(">iihihhh", data) == (
        len(data) - 4,
        11,
        int(ErrorCode.unsupported_version),
        1,
        18,
        0,
        4,
    )


def test_schema_lookups_are_cached() -> None:
    assert codec.request_schema(3, 12) is codec.request_schema(3, 12)
    assert codec.request_schema(3, 12) is load_request_schema(3, 12)
    assert codec.request_schema.cache_info().hits > 0  # type: ignore[attr-defined]
