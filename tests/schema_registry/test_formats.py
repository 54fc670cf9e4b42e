"""The shared formats without a broker: the wire framing, the ``_schemas`` keys byte for byte
as Confluent's registry writes them, replay of soft and hard deletes, and Protobuf text that
round-trips through a descriptor."""

from __future__ import annotations

import pytest

from tidelog.schema.formats import InvalidSchemaError, parse_schema
from tidelog.schema.records import (
    ConfigValue,
    DeleteSubjectValue,
    RegistryKey,
    SchemaValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from tidelog.schema.state import RegistryState
from tidelog.schema.wire import FrameError, encode_frame, parse_frame


@pytest.mark.parametrize("indexes", [(), (0,), (1, 2), (0, 3, 70)])
def test_frames_round_trip(indexes: tuple[int, ...]) -> None:
    framed = encode_frame(258, b"payload", indexes)
    assert framed[:5] == b"\x00\x00\x00\x01\x02"
    frame = parse_frame(framed, protobuf=bool(indexes))
    assert (frame.schema_id, framed[frame.offset :]) == (258, b"payload")
    assert frame.message_indexes == indexes


@pytest.mark.parametrize(
    ("data", "protobuf"),
    [
        (b"\x00\x00\x01", False),
        (b"\x01\x00\x00\x00\x01x", False),
        (b"\x00\x00\x00\x00\x01\x80", True),
    ],
)
def test_bad_frames(data: bytes, protobuf: bool) -> None:
    with pytest.raises(FrameError):
        parse_frame(data, protobuf=protobuf)


def test_keys_are_confluents_bytes() -> None:
    assert encode_key(RegistryKey.schema("t-value", 3)) == (
        b'{"keytype":"SCHEMA","subject":"t-value","version":3,"magic":1}'
    )
    assert encode_key(RegistryKey.config(None)) == b'{"keytype":"CONFIG","subject":null,"magic":0}'
    assert encode_key(RegistryKey("NOOP")) == b'{"keytype":"NOOP","magic":0}'
    # a value written by Confluent's registry (schemaType absent for Avro) reads back
    key = decode_key(b'{"magic":1,"keytype":"SCHEMA","subject":"s","version":1}')
    value = decode_value(
        key, b'{"subject":"s","version":1,"id":7,"schema":"\\"int\\"","deleted":false}'
    )
    assert value == SchemaValue("s", 1, 7, '"int"')
    assert decode_value(key, encode_value(value)) == value


def test_replay_soft_and_hard_deletes() -> None:
    state = RegistryState()
    for version in (1, 2):
        state.replay(RegistryKey.schema("s", version), SchemaValue("s", version, version, '"int"'))
    state.replay(RegistryKey.config("s"), ConfigValue("full"))
    state.replay(RegistryKey.delete_subject("s"), DeleteSubjectValue("s", 2))
    assert state.versions("s") == [] and len(state.versions("s", deleted=True)) == 2
    assert state.configs == {"s": "FULL"}
    state.replay(RegistryKey.schema("s", 1), None)
    assert [v.version for v in state.versions("s", deleted=True)] == [2]
    assert sorted(state.by_id) == [2] and state.max_id == 2


def test_protobuf_text_round_trips() -> None:
    text = """
        syntax = "proto3";
        package shop;
        import "google/protobuf/timestamp.proto";
        message Order {
          string id = 1;
          map<string, int64> counts = 2;
          optional int32 priority = 3;
          oneof pay { string card = 4; string iban = 5; }
          repeated Line lines = 6;
          google.protobuf.Timestamp at = 7;
          message Line { string sku = 1; Kind kind = 2; }
          enum Kind { UNKNOWN = 0; BOOK = 1; }
          reserved 9, 11 to 13;
          reserved "old";
        }
    """
    first = parse_schema("PROTOBUF", text)
    again = parse_schema("PROTOBUF", first.canonical)
    assert again.canonical == first.canonical
    assert "map<string, int64> counts = 2;" in first.canonical
    assert "optional int32 priority = 3;" in first.canonical
    with pytest.raises(InvalidSchemaError, match="Nope"):
        parse_schema("PROTOBUF", 'syntax = "proto3"; message A { Nope x = 1; }')
