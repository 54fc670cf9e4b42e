"""The typed replay's decoders (tidelog.analytics.schemas) without Spark's executors: schemas
looked up by id over the registry's REST API and offline from the log dir's ``_schemas``, the
evolved (latest) schema, logical types, Protobuf, and records that do not decode."""

from __future__ import annotations

import datetime as dt
import decimal

import pytest

from tests.schema_registry.conftest import Registry
from tests.schema_registry.typed_data import produce

pytestmark = pytest.mark.integration
pytest.importorskip("pyspark")
pytest.importorskip("fastavro")

from tidelog.analytics.logdir import LogDir  # noqa: E402
from tidelog.analytics.plan import OffsetRange  # noqa: E402
from tidelog.analytics.schemas import (  # noqa: E402
    DecodeError,
    SchemaCatalog,
    TopicDecoder,
    parse_decode_option,
)


def _values(log_dir: str, topic: str) -> list[bytes | None]:
    backend = LogDir(log_dir)
    tp = (topic, 0)
    start, end = backend.earliest([tp])[tp], backend.latest([tp])[tp]
    out: list[bytes | None] = []
    for cols in backend.read(OffsetRange(topic, 0, start, end)):
        out += cols.values
    return out


def _decode_all(catalog: SchemaCatalog, log_dir: str, topic: str) -> list[object]:
    decoder = TopicDecoder.for_topic(catalog, topic, "decoded")
    assert decoder.value is not None and decoder.key is None
    out: list[object] = []
    for raw in _values(log_dir, topic):
        assert raw is not None
        try:
            out.append(decoder.value.decode(raw))
        except DecodeError as exc:
            out.append(str(exc))
    return out


def test_decoders_online_and_offline(registry: Registry) -> None:
    produce(registry.broker.bootstrap, registry.url)
    online = SchemaCatalog.from_url(registry.url)
    assert registry.broker.stop() == 0  # the files are complete and checkpointed
    log_dir = str(registry.broker.log_dir)
    offline = SchemaCatalog.from_log_dir(log_dir)
    assert sorted(offline.state.by_id) == sorted(online.state.by_id) == [1, 2, 3]
    for catalog in (online, offline):
        payments = _decode_all(catalog, log_dir, "payments")
        epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
        # v1 records read with v2 (the evolved schema): v2's defaults fill the new fields
        assert payments[0] == (
            {"id": "a0", "cents": 0, "note": None, "tags": {}, "items": [], "at": epoch,
             "day": dt.date(1970, 1, 1), "amount": decimal.Decimal("0.00")},
            1,
        )  # fmt: skip
        value, schema_id = payments[3]  # type: ignore[misc]
        assert schema_id == 2 and value["tags"] == {"x": 1} and value["items"] == [{"sku": "s1"}]
        assert value["at"] == dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
        assert value["amount"] == decimal.Decimal("12.34")
        assert payments[4] == "schema id 99 is not in the registry"
        assert "magic byte" in str(payments[5])
        orders = _decode_all(catalog, log_dir, "orders")
        assert orders == [
            ({"id": "o0", "cents": 100, "skus": ["a"]}, 3),
            ({"id": "o1", "cents": 101, "skus": ["a", "b"]}, 3),
        ]
    spark_type = TopicDecoder.for_topic(offline, "payments", "both").value
    assert spark_type is not None
    assert spark_type.spark_type.simpleString() == (
        "struct<id:string,cents:bigint,note:string,tags:map<string,int>,"
        "items:array<struct<sku:string>>,at:timestamp,day:date,amount:decimal(9,2)>"
    )


def test_decode_option() -> None:
    assert parse_decode_option("orders=decoded, *=both") == {"orders": "decoded", "*": "both"}
    with pytest.raises(ValueError, match="TOPIC=MODE"):
        parse_decode_option("orders=typed")
