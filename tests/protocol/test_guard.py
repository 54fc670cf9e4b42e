"""protocol.guard: accepts every well-formed request kio writes, rejects impossible lengths
before kio's native reader can try a huge allocation (which would abort the broker)."""

from __future__ import annotations

import io
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema
from kio.schema.index import api_key_map, schema_name_map
from kio.serial import entity_writer
from kio.static.constants import EntityType
from kio.static.primitive import Records

from tidelog.protocol import codec
from tidelog.protocol.errors import FrameDecodeError
from tidelog.protocol.guard import validator_for

st.register_type_strategy(Records, st.binary(max_size=80).map(Records))

DATA_PATH = {0, 1, 2, 3, 18, 19}
ALL = [
    (key, version)
    for key, name in sorted(api_key_map.items())
    for version, entities in sorted(schema_name_map[name].items())
    if EntityType.request in entities
]


def _check(cls: type, examples: int) -> None:
    @settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    @given(st.from_type(cls))
    def round_trip(instance: object) -> None:
        buffer = io.BytesIO()
        entity_writer(cls)(buffer, instance)
        data = buffer.getvalue()
        assert validator_for(cls)(data, 0, len(data)) == len(data)

    round_trip()


@pytest.mark.parametrize(("api_key", "version"), [kv for kv in ALL if kv[0] in DATA_PATH], ids=str)
def test_accepts_every_served_request_shape(api_key: int, version: int) -> None:
    _check(load_request_schema(api_key, version), 5)


def test_accepts_one_example_of_every_other_request() -> None:
    for api_key, version in ALL:
        if api_key not in DATA_PATH:
            _check(load_request_schema(api_key, version), 1)


@pytest.mark.parametrize(
    ("api_key", "version", "body"),
    [
        (3, 9, b"\xff\xff\xff\xff\x0f"),  # compact array of 2**32 - 2 topics
        (3, 0, struct.pack(">i", 100_000_000)),  # legacy array of 10**8 topics
        (0, 9, b"\x00" + b"\xff\xff\xff\x7f" + struct.pack(">i", 1) + b"\xff\xff\xff\xff\x0f"),
        (1, 12, b"\x00" * 16 + b"\xff\xff\xff\xff\x0f"),
        (18, 3, b"\xff\xff\xff\xff\x0f"),  # a string of 4 GB
    ],
)
def test_rejects_impossible_lengths(api_key: int, version: int, body: bytes) -> None:
    header = struct.pack(">hhih", api_key, version, 1, -1)
    if codec.request_header_version(api_key, version) == 2:
        header += b"\x00"
    frame = header + body
    _, offset = codec.decode_request_header(frame)
    with pytest.raises(FrameDecodeError):
        codec.decode_request(frame, api_key, version, offset)
