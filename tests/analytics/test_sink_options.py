"""Sink options and columns, checked as Spark's Kafka sink checks them; the key partitioner
against librdkafka's Java-compatible one (no Spark session, no broker)."""

from __future__ import annotations

import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from tidelog.analytics.options import OptionError, parse_sink_options
from tidelog.analytics.partitioner import partition_for_key
from tidelog.analytics.sink import check_schema

BOOT = {"kafka.bootstrap.servers": "127.0.0.1:9092"}
HEADERS = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)


def _schema(**cols: object) -> StructType:
    return StructType([StructField(n, t) for n, t in cols.items()])  # type: ignore[arg-type]


def test_producer_settings_use_kafkas_names() -> None:
    o = parse_sink_options(
        {**BOOT, "topic": " out ", "kafka.acks": "all", "kafka.linger.ms": "25",
         "kafka.compression.type": "lz4", "kafka.batch.size": "65536",
         "kafka.enable.idempotence": "true", "kafka.buffer.memory": "1000",
         "checkpointLocation": "/tmp/x", "includeHeaders": "true"}
    )  # fmt: skip
    cfg = o.producer_kwargs()
    assert o.topic == "out"
    assert cfg["acks"] == -1 and cfg["linger_ms"] == 25 and cfg["batch_size"] == 65536
    assert cfg["compression_type"] == "lz4" and cfg["enable_idempotence"] is True
    assert cfg["bootstrap_servers"] == ["127.0.0.1:9092"]
    assert "buffer_memory" not in cfg  # a Java-only setting: accepted, unused
    assert (
        parse_sink_options({**BOOT, "kafka.compression.type": "none"}).producer_kwargs()[
            "compression_type"
        ]
        is None
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"topic": "t"}, "Option 'kafka.bootstrap.servers' must be specified"),
        ({**BOOT, "kafka.key.serializer": "x"}, "Kafka option 'key.serializer' is not supported"),
        ({**BOOT, "kafka.value.serializer": "x"}, "'value.serializer' is not supported"),
        ({**BOOT, "kafka.linger.ms": "soon"}, "kafka.linger.ms='soon': use a whole number"),
        ({**BOOT, "kafka.acks": "2"}, "kafka.acks='2': use all, -1, 0 or 1"),
        ({**BOOT, "kafka.no.such.setting": "1"}, "kafka.no.such.setting: not a Kafka producer"),
        ({**BOOT, "subscribe": "t"}, "unknown option 'subscribe' for writing"),
        ({**BOOT, "exactlyOnce": "maybe"}, "exactlyOnce='maybe': use true or false"),
        ({**BOOT, "exactlyOnce": "true", "kafka.acks": "1"}, "needs kafka.enable.idempotence"),
        ({**BOOT, "kafka.transactional.id": "x"}, "with exactlyOnce=true only"),
    ],
)
def test_bad_options_name_the_fix(options: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError, match=message.replace("(", r"\(").replace(".", r"\.")):
        parse_sink_options(options)


def test_columns_checked_with_sparks_messages() -> None:
    ok = check_schema(_schema(key=StringType(), value=BinaryType(), headers=HEADERS,
                              partition=IntegerType(), topic=StringType()), None)  # fmt: skip
    assert ok.columns == ("topic", "key", "value", "headers", "partition")
    cases = [
        (_schema(key=BinaryType()), "t", "Required attribute 'value' not found"),
        (
            _schema(value=StringType()),
            None,
            "topic option required when no 'topic' attribute "
            "is present. Use the topic option for setting a topic.",
        ),
        (
            _schema(value=IntegerType()),
            "t",
            "value attribute unsupported type int. value must be a(n) string or binary",
        ),
        (
            _schema(value=StringType(), key=LongType()),
            "t",
            "key attribute unsupported type bigint. key must be a(n) string or binary",
        ),
        (
            _schema(value=StringType(), topic=BinaryType()),
            None,
            "topic attribute unsupported type binary. topic must be a(n) string",
        ),
        (
            _schema(value=StringType(), partition=LongType()),
            "t",
            "partition attribute unsupported type bigint. partition must be a(n) int",
        ),
        (
            _schema(value=StringType(), headers=StringType()),
            "t",
            "headers attribute unsupported "
            "type string. headers must be a(n) array<struct<key:string,value:binary>>",
        ),
        (
            _schema(value=StringType(), timestamp=LongType()),
            "t",
            "timestamp attribute "
            "unsupported type bigint. timestamp must be a(n) double or timestamp",
        ),
    ]
    for schema, topic, message in cases:
        with pytest.raises(OptionError) as e:
            check_schema(schema, topic)
        assert str(e.value) == message
    # the option wins: a topic column of any type is then not read
    assert check_schema(_schema(value=StringType(), topic=DoubleType()), "t").topic_option == "t"


def test_partition_for_key_is_kafkas_rule() -> None:
    """Kafka's Utils.murmur2 vectors (UtilsTest.testMurmur2), and toPositive(h) % n."""
    from kafka.partitioner import murmur2

    vectors = {
        b"21": -973932308,
        b"foobar": -790332482,
        b"a-little-bit-long-string": -985981536,
        b"a-little-bit-longer-string": -1486304829,
        b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
        b"abc": 479470107,
    }
    for key, java in vectors.items():
        assert (murmur2(key) & 0xFFFFFFFF) == (java & 0xFFFFFFFF)
        for n in (1, 3, 7, 12):
            assert partition_for_key(key, n) == (java & 0x7FFFFFFF) % n
    with pytest.raises(ValueError, match="at least one partition"):
        partition_for_key(b"k", 0)


def test_reader_types_kafka_settings_like_the_sink() -> None:
    """One conversion for both ways: booleans are booleans, numbers numbers."""
    from tidelog.analytics.wire import _client_config

    cfg = _client_config("a:1,b:2", {"request.timeout.ms": "5000", "ssl.check.hostname": "false",
                                     "isolation.level": "read_committed"})  # fmt: skip
    assert cfg["bootstrap_servers"] == ["a:1", "b:2"]
    assert cfg["request_timeout_ms"] == 5000 and cfg["ssl_check_hostname"] is False
    assert cfg["isolation_level"] == "read_committed"
