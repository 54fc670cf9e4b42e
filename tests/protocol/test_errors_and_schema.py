"""protocol.errors (names -> codes) and protocol.schema (per-version builders)."""

from __future__ import annotations

import inspect

import pytest
from kio.index import load_response_schema
from kio.schema.errors import ErrorCode

from tidelog.protocol.errors import error_code_for, error_name
from tidelog.protocol.schema import build, field_names, response_types, top_level_error_response
from tidelog.storage import errors as storage_errors


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("CORRUPT_MESSAGE", 2),
        ("corrupt_message", 2),
        ("UNKNOWN_TOPIC_OR_PARTITION", 3),
        ("OFFSET_OUT_OF_RANGE", 1),
        ("MESSAGE_TOO_LARGE", 10),
        ("RECORD_LIST_TOO_LARGE", 18),
        ("INVALID_RECORD", 87),
        ("KAFKA_STORAGE_ERROR", 56),
        ("INVALID_TOPIC_EXCEPTION", 17),
        ("TOPIC_ALREADY_EXISTS", 36),
        ("INVALID_CONFIG", 40),
        ("UNKNOWN_SERVER_ERROR", -1),
        ("NO_SUCH_ERROR_NAME", -1),
    ],
)
def test_error_code_for(name: str, code: int) -> None:
    assert int(error_code_for(name)) == code


def test_every_storage_error_name_is_a_kafka_error() -> None:
    for _, cls in inspect.getmembers(storage_errors, inspect.isclass):
        if (
            issubclass(cls, storage_errors.StorageError)
            and cls.error_name != "UNKNOWN_SERVER_ERROR"
        ):
            assert error_code_for(cls.error_name) != ErrorCode.unknown_server_error, cls


def test_error_name() -> None:
    assert error_name(3) == "UNKNOWN_TOPIC_OR_PARTITION"
    assert error_name(12345) == "UNKNOWN_ERROR_CODE_12345"


def test_build_drops_fields_a_version_lacks() -> None:
    v3 = response_types(0, 3).PartitionProduceResponse
    v8 = response_types(0, 8).PartitionProduceResponse
    common = {
        "index": 1,
        "error_code": ErrorCode.none,
        "base_offset": 5,
        "log_append_time": None,
        "log_start_offset": 2,
        "record_errors": (),
        "error_message": None,
    }
    assert "log_start_offset" not in field_names(v3)
    assert build(v3, **common).base_offset == 5
    assert build(v8, **common).log_start_offset == 2


def test_top_level_error_response() -> None:
    fetch = top_level_error_response(load_response_schema(1, 12), -1)
    assert fetch.error_code == ErrorCode.unknown_server_error and fetch.responses == ()
    assert top_level_error_response(load_response_schema(0, 9), -1) is None  # Produce: none
