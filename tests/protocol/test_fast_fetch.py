"""protocol.fast.fetch: the one-pass Fetch parser reads what kio reads, for every version,
and a truncated or garbage frame only ever raises FrameDecodeError (or asks for the kio path)."""

from __future__ import annotations

import dataclasses
import struct
import sys
import tracemalloc
import uuid
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.index import load_request_schema

from tests.protocol.lean_helpers import SETTINGS as _SETTINGS
from tests.protocol.lean_helpers import frame as _frame
from tests.protocol.lean_helpers import kio_decode as _kio
from tidelog.protocol.errors import FrameDecodeError
from tidelog.protocol.fast.fetch import parse_fetch_frame

VERSIONS = range(4, 17)


def _without_request_tags(request: Any) -> Any:
    """``request`` without the request-level tagged fields (v12+), which consumers leave out and
    the lean parser hands to the generic path."""
    fields = {f.name: f for f in dataclasses.fields(request)}
    changes: dict[str, Any] = {}
    if "cluster_id" in fields:
        changes["cluster_id"] = None
    if "replica_state" in fields:
        changes["replica_state"] = fields["replica_state"].default
    return dataclasses.replace(request, **changes)


def _same(lean: Any, kio: Any) -> None:
    """Every attribute the lean request offers equals kio's, or the default of a field the
    version lacks."""
    if hasattr(kio, "replica_state"):
        assert lean.replica_id == kio.replica_state.replica_id == -1
    else:
        assert lean.replica_id == kio.replica_id
    assert lean.max_wait == kio.max_wait
    assert type(lean.max_wait) is timedelta
    assert lean.min_bytes == kio.min_bytes
    assert lean.max_bytes == kio.max_bytes
    assert lean.isolation_level == kio.isolation_level
    assert lean.session_id == getattr(kio, "session_id", 0)
    assert lean.session_epoch == getattr(kio, "session_epoch", -1)
    assert lean.rack_id == getattr(kio, "rack_id", "")
    assert len(lean.topics) == len(kio.topics)
    for lt, kt in zip(lean.topics, kio.topics, strict=True):
        assert lt.topic == getattr(kt, "topic", None)
        assert lt.topic_id == getattr(kt, "topic_id", None)
        assert len(lt.partitions) == len(kt.partitions)
        for lp, kp in zip(lt.partitions, kt.partitions, strict=True):
            assert lp.partition == kp.partition
            assert lp.current_leader_epoch == getattr(kp, "current_leader_epoch", -1)
            assert lp.fetch_offset == kp.fetch_offset
            assert lp.last_fetched_epoch == getattr(kp, "last_fetched_epoch", -1)
            assert lp.log_start_offset == getattr(kp, "log_start_offset", -1)
            assert lp.partition_max_bytes == kp.partition_max_bytes
    kio_forgotten = getattr(kio, "forgotten_topics_data", ())
    assert len(lean.forgotten_topics_data) == len(kio_forgotten)
    for lf, kf in zip(lean.forgotten_topics_data, kio_forgotten, strict=True):
        assert lf.topic == getattr(kf, "topic", None)
        assert lf.topic_id == getattr(kf, "topic_id", None)
        assert lf.partitions == tuple(kf.partitions)


def _agrees_with_kio(frame: bytes) -> None:
    """Refused only where the generic path refuses too; else read as kio reads it."""
    try:
        parsed = parse_fetch_frame(frame)
    except FrameDecodeError:
        with pytest.raises(FrameDecodeError):
            _kio(frame)
        return
    if parsed is not None:
        correlation_id, client_id, request = _kio(frame)
        assert parsed[:2] == (correlation_id, client_id)
        _same(parsed[2], request)


@pytest.mark.parametrize("version", VERSIONS)
def test_equals_kio_decode(version: int) -> None:
    """Any request kio writes reads as kio reads it (with trailing bytes, from a memoryview
    slice); a truncation of it raises FrameDecodeError; one damaged byte is read as kio reads
    it, or refused as kio refuses it."""
    cls = load_request_schema(1, version)

    @_SETTINGS
    @given(
        st.from_type(cls),
        st.integers(-(2**31), 2**31 - 1),
        st.none() | st.text(max_size=20),
        st.binary(max_size=8),
        st.data(),
    )
    def check(
        request: Any,
        correlation_id: int,
        client_id: str | None,
        trailing: bytes,
        data: st.DataObject,
    ) -> None:
        whole = _frame(_without_request_tags(request), correlation_id, client_id)
        frame = whole + trailing
        parsed = parse_fetch_frame(frame)
        assert parsed is not None
        kio_correlation, kio_client, kio_request = _kio(frame)
        assert parsed[0] == kio_correlation == correlation_id
        assert parsed[1] == kio_client
        _same(parsed[2], kio_request)
        # the router hands it a read-only memoryview slice
        again = parse_fetch_frame(memoryview(b"\x00" + frame)[1:])
        assert again == parsed
        for cut in data.draw(st.lists(st.integers(0, len(whole) - 1), min_size=1, max_size=4)):
            with pytest.raises(FrameDecodeError):
                parse_fetch_frame(whole[:cut])
        damaged = bytearray(whole)
        at = data.draw(st.integers(8, len(whole) - 1))
        damaged[at] = data.draw(st.integers(0, 255))
        _agrees_with_kio(bytes(damaged))

    check()


def _one_partition_shape(request: Any, fetch_offset: int) -> Any:
    """``request`` reshaped to what consumers send most: one topic with one partition, no
    forgotten topics, an empty rack id, no tagged fields (the parser's two-unpack path)."""
    module = sys.modules[type(request).__module__]
    topic = request.topics[0] if request.topics else None
    if topic is not None and topic.partitions:
        partition = dataclasses.replace(topic.partitions[0], fetch_offset=fetch_offset)
    else:
        partition = module.FetchPartition(
            partition=0, fetch_offset=fetch_offset, partition_max_bytes=1 << 20
        )
    if topic is None:
        key = {"topic_id": uuid.uuid4()} if type(request).__version__ >= 13 else {"topic": "t"}
        topic = module.FetchTopic(partitions=(), **key)
    changes: dict[str, Any] = {"topics": (dataclasses.replace(topic, partitions=(partition,)),)}
    names = {f.name for f in dataclasses.fields(request)}
    if "forgotten_topics_data" in names:
        changes["forgotten_topics_data"] = ()
    if "rack_id" in names:
        changes["rack_id"] = ""
    return dataclasses.replace(_without_request_tags(request), **changes)


@pytest.mark.parametrize("version", VERSIONS)
def test_one_partition_requests_equal_kio_decode(version: int) -> None:
    """The common shape, with trailing bytes, every truncation and one damaged byte: read as
    kio reads it, or refused as kio refuses it."""
    cls = load_request_schema(1, version)

    @_SETTINGS
    @given(st.from_type(cls), st.integers(-(2**63), 2**63 - 1), st.binary(max_size=8), st.data())
    def check(request: Any, fetch_offset: int, trailing: bytes, data: st.DataObject) -> None:
        frame = _frame(_one_partition_shape(request, fetch_offset), 5, "rdkafka") + trailing
        parsed = parse_fetch_frame(frame)
        assert parsed is not None
        _same(parsed[2], _kio(frame)[2])
        assert parse_fetch_frame(memoryview(b"\x00" + frame)[1:]) == parsed
        for cut in range(len(frame) - len(trailing)):  # every truncation (small frames)
            with pytest.raises(FrameDecodeError):
                parse_fetch_frame(frame[:cut])
        damaged = bytearray(frame)
        at = data.draw(st.integers(8, len(frame) - 1))
        damaged[at] = data.draw(st.integers(0, 255))
        _agrees_with_kio(bytes(damaged))

    check()


@pytest.mark.parametrize("version", VERSIONS)
def test_garbage_raises_only_frame_decode_error(version: int) -> None:
    flexible = version >= 12

    @_SETTINGS
    @given(st.none() | st.text(max_size=5), st.binary(max_size=120))
    def check(client_id: str | None, body: bytes) -> None:
        raw = b"" if client_id is None else client_id.encode()
        header = struct.pack(">hhih", 1, version, 1, len(raw) if client_id is not None else -1)
        _agrees_with_kio(header + raw + (b"\x00" if flexible else b"") + body)

    check()


def _header(version: int) -> bytes:
    return struct.pack(">hhih", 1, version, 1, -1) + (b"\x00" if version >= 12 else b"")


_BIG = 2**31 - 1
_HUGE_COMPACT = b"\xff\xff\xff\xff\x07"  # uvarint 2**31 - 1, i.e. 2**31 - 2 elements


@pytest.mark.parametrize(
    ("version", "body"),
    [
        # topics
        (4, struct.pack(">iiiibi", -1, 500, 1, 1000, 0, _BIG)),
        (11, struct.pack(">iiiibiii", -1, 500, 1, 1000, 0, 0, -1, _BIG)),
        (12, struct.pack(">iiiibii", -1, 500, 1, 1000, 0, 0, -1) + _HUGE_COMPACT),
        (16, struct.pack(">iiibii", 500, 1, 1000, 0, 0, -1) + _HUGE_COMPACT),
        # one topic's partitions
        (4, struct.pack(">iiiibih1si", -1, 500, 1, 1000, 0, 1, 1, b"t", _BIG)),
        (
            16,
            struct.pack(">iiibii", 500, 1, 1000, 0, 0, -1) + b"\x02" + b"\x01" * 16 + _HUGE_COMPACT,
        ),
        # forgotten topics, and one forgotten topic's partitions
        (7, struct.pack(">iiiibiiii", -1, 500, 1, 1000, 0, 0, -1, 0, _BIG)),
        (7, struct.pack(">iiiibiiiih1si", -1, 500, 1, 1000, 0, 0, -1, 0, 1, 1, b"t", _BIG)),
        (16, struct.pack(">iiibiiB", 500, 1, 1000, 0, 0, -1, 1) + _HUGE_COMPACT),
        (
            16,
            struct.pack(">iiibiiBB", 500, 1, 1000, 0, 0, -1, 1, 2) + b"\x01" * 16 + _HUGE_COMPACT,
        ),
        # the rack id: a string of 2 GB
        (12, struct.pack(">iiiibiiBB", -1, 500, 1, 1000, 0, 0, -1, 1, 1) + _HUGE_COMPACT),
    ],
)
def test_impossible_counts_raise_without_allocating(version: int, body: bytes) -> None:
    frame = _header(version) + body + b"\x00" * 40
    tracemalloc.start()
    try:
        with pytest.raises(FrameDecodeError):
            parse_fetch_frame(frame)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024
    with pytest.raises(FrameDecodeError):
        _kio(frame)


@pytest.mark.parametrize(
    ("version", "body"),
    [
        (4, struct.pack(">iiiibih", -1, 500, 1, 1000, 0, 1, -1)),  # null topic name
        (4, struct.pack(">iiiibi", -1, 500, 1, 1000, 0, -1)),  # null topics
        (11, struct.pack(">iiiibiiiih", -1, 500, 1, 1000, 0, 0, -1, 0, 0, -1)),  # null rack id
        (12, struct.pack(">iiiibiiBB", -1, 500, 1, 1000, 0, 0, -1, 2, 0)),  # null topic name
        (12, struct.pack(">iiiibiiB", -1, 500, 1, 1000, 0, 0, -1, 0)),  # null topics
        (16, struct.pack(">iiibiiBBB", 500, 1, 1000, 0, 0, -1, 1, 1, 0)),  # null rack id
        (16, struct.pack(">iiibiiBB", 500, 1, 1000, 0, 0, -1, 1, 0)),  # null forgotten topics
    ],
)
def test_nulls_where_kio_says_non_nullable(version: int, body: bytes) -> None:
    frame = _header(version) + body + b"\x00" * 8
    with pytest.raises(FrameDecodeError):
        parse_fetch_frame(frame)
    with pytest.raises(FrameDecodeError):
        _kio(frame)


def _v16(**changes: Any) -> Any:
    from kio.schema.fetch.v16 import request as f16

    fields: dict[str, Any] = {
        "max_wait": timedelta(milliseconds=500),
        "min_bytes": 1,
        "max_bytes": 52428800,
        "isolation_level": 1,
        "session_id": 0,
        "session_epoch": -1,
        "topics": (
            f16.FetchTopic(
                topic_id=uuid.UUID(int=7),
                partitions=(
                    f16.FetchPartition(partition=0, fetch_offset=5, partition_max_bytes=1 << 20),
                ),
            ),
        ),
        "forgotten_topics_data": (),
        "rack_id": "",
    }
    fields.update(changes)
    return f16.FetchRequest(**fields)


def test_all_zero_topic_id_reads_as_kio_reads_it() -> None:
    from kio.schema.fetch.v16 import request as f16

    zero = uuid.UUID(int=0)
    frame = _frame(
        _v16(
            topics=(f16.FetchTopic(topic_id=zero, partitions=()),),
            forgotten_topics_data=(f16.ForgottenTopic(topic_id=zero, partitions=(1, 2)),),
        ),
        1,
        None,
    )
    parsed = parse_fetch_frame(frame)
    assert parsed is not None
    kio = _kio(frame)[2]
    assert kio.topics[0].topic_id is None and kio.forgotten_topics_data[0].topic_id is None
    assert parsed[2].topics[0].topic_id is None
    assert parsed[2].forgotten_topics_data[0].topic_id is None
    _same(parsed[2], kio)


def test_unusual_frames_take_the_generic_path() -> None:
    from kio.schema.fetch.v16 import request as f16

    plain = _frame(_v16(), 1, "c")
    assert parse_fetch_frame(plain) is not None
    # request header tagged fields
    assert parse_fetch_frame(struct.pack(">hhih", 1, 12, 1, -1) + b"\x01\x00\x00") is None
    # versions outside 4-16, another API
    assert parse_fetch_frame(struct.pack(">hhih", 1, 3, 1, -1) + b"\x00" * 40) is None
    assert parse_fetch_frame(struct.pack(">hhih", 1, 17, 1, -1) + b"\x00" * 40) is None
    assert parse_fetch_frame(struct.pack(">hhih", 0, 9, 1, -1) + b"\x00" * 40) is None
    # request tagged fields: cluster_id, replica_state
    for request in (
        _v16(cluster_id="c"),
        _v16(replica_state=f16.ReplicaState(replica_id=3, replica_epoch=1)),
    ):
        frame = _frame(request, 1, "c")
        assert len(frame) > len(plain)
        assert parse_fetch_frame(frame) is None
        _kio(frame)  # and the generic path reads them
    # partition, topic and forgotten topic tagged fields: an unknown tag 9 of one byte
    tag = b"\x01\x09\x01\x00"
    head = _frame(_v16(topics=()), 1, "c")[:-4]  # up to the topics count
    topic_id = uuid.UUID(int=7).bytes
    partition = struct.pack(">iiqiqi", 0, -1, 0, -1, -1, 1 << 20)
    ends = b"\x01\x01\x00"  # no forgotten topics, rack "", no tags
    for frame in (
        head + b"\x02" + topic_id + b"\x02" + partition + tag + b"\x00" + ends,
        head + b"\x02" + topic_id + b"\x02" + partition + b"\x00" + tag + ends,
        head + b"\x01\x02" + topic_id + b"\x01" + tag + b"\x01\x00",
    ):
        # the generic path then answers as it always did (kio 0.6.5 refuses unknown tags)
        assert parse_fetch_frame(frame) is None
