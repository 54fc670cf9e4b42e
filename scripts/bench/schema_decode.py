"""Decode throughput of the typed replay (``tidelog.analytics.schemas``) against a plain loop.

Records of ~20 fields in the Schema Registry wire format, decoded in one process:

- Avro: ``FieldDecoder.decode`` (framing, writer schema by id, resolution to the subject's
  latest schema with fastavro, values made ready for Spark) against a plain
  ``fastavro.schemaless_reader`` loop over the same payloads (writer = reader schema);
- Protobuf: ``FieldDecoder.decode`` (framing and message indexes, parse with the latest
  schema's message class, conversion to a dict of Spark-ready values) against a plain
  ``Message.FromString`` loop, and a plain loop that also reads every field (protobuf's upb
  backend makes field objects only when they are read).

Prints records/s for each and the ratio (ours / plain); the best of ``--repeat`` runs.

    .venv/bin/python scripts/bench/schema_decode.py [--records 50000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tidelog.analytics.schemas import FieldDecoder, SchemaCatalog
from tidelog.schema.records import PROTOBUF, RegistryKey, SchemaValue
from tidelog.schema.state import RegistryState
from tidelog.schema.wire import encode_frame

FIELDS = 20


def avro_schema() -> dict[str, Any]:
    kinds = ["string", "long", "int", "double", "boolean"]
    fields: list[dict[str, Any]] = []
    for i in range(FIELDS - 3):
        fields.append({"name": f"f{i}", "type": kinds[i % len(kinds)]})
    fields.append({"name": "note", "type": ["null", "string"], "default": None})
    fields.append({"name": "tags", "type": {"type": "array", "items": "string"}})
    fields.append({"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}})
    return {"type": "record", "name": "Wide", "fields": fields}


def avro_record(i: int) -> dict[str, Any]:
    import datetime as dt

    values: dict[str, Any] = {}
    samples: list[Any] = [f"text-{i}", i * 1000, i % 1000, i / 7, i % 2 == 0]
    for n in range(FIELDS - 3):
        values[f"f{n}"] = samples[n % len(samples)]
    values["note"] = None if i % 3 else "note"
    values["tags"] = ["a", "b"]
    values["at"] = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    return values


PROTO = (
    'syntax = "proto3";\npackage bench;\nmessage Wide {\n'
    + "".join(
        f"  {['string', 'int64', 'int32', 'double', 'bool'][i % 5]} f{i} = {i + 1};\n"
        for i in range(FIELDS - 1)
    )
    + f"  repeated string tags = {FIELDS};\n}}\n"
)


def rate(fn: Callable[[], int], repeat: int) -> float:
    best = 0.0
    for _ in range(repeat):
        t0 = time.perf_counter()
        n = fn()
        best = max(best, n / (time.perf_counter() - t0))
    return best


def catalog_with(schema: str, schema_type: str) -> SchemaCatalog:
    state = RegistryState()
    value = SchemaValue("bench-value", 1, 1, schema, schema_type)
    state.replay(RegistryKey.schema("bench-value", 1), value)
    return SchemaCatalog(state)


def bench_avro(count: int, repeat: int) -> tuple[float, float]:
    import fastavro

    schema = avro_schema()
    parsed = fastavro.parse_schema(schema)
    payloads = []
    for i in range(count):
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, avro_record(i))
        payloads.append(out.getvalue())
    framed = [encode_frame(1, p) for p in payloads]
    decoder = FieldDecoder(catalog_with(json.dumps(schema), "AVRO"), "bench-value")

    def plain() -> int:
        for p in payloads:
            fastavro.schemaless_reader(io.BytesIO(p), parsed, None)
        return len(payloads)

    def ours() -> int:
        for raw in framed:
            decoder.decode(raw)
        return len(framed)

    return rate(plain, repeat), rate(ours, repeat)


def bench_protobuf(count: int, repeat: int) -> tuple[float, float]:
    from google.protobuf import message_factory

    from tidelog.schema.formats import parse_schema

    pool, _resolved = parse_schema(PROTOBUF, PROTO).parsed
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("bench.Wide"))
    payloads = []
    for i in range(count):
        msg = cls()
        for n in range(FIELDS - 1):
            kind = n % 5
            value: Any = [f"text-{i}", i * 1000, i % 1000, i / 7, i % 2 == 0][kind]
            setattr(msg, f"f{n}", value)
        msg.tags.extend(["a", "b"])
        payloads.append(msg.SerializeToString())
    framed = [encode_frame(1, p, (0,)) for p in payloads]
    decoder = FieldDecoder(catalog_with(PROTO, PROTOBUF), "bench-value")

    def plain() -> int:
        for p in payloads:
            cls.FromString(p)
        return len(payloads)

    names = [f.name for f in cls.DESCRIPTOR.fields]

    def plain_fields() -> int:
        for p in payloads:
            msg = cls.FromString(p)
            for name in names:
                getattr(msg, name)
        return len(payloads)

    def ours() -> int:
        for raw in framed:
            decoder.decode(raw)
        return len(framed)

    global PROTOBUF_FIELDS_RATE
    PROTOBUF_FIELDS_RATE = rate(plain_fields, repeat)
    return rate(plain, repeat), rate(ours, repeat)


#: The plain Protobuf loop that also reads every field (upb builds field objects lazily).
PROTOBUF_FIELDS_RATE = 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"{args.records:,} records of {FIELDS} fields, best of {args.repeat}")
    print(f"{'format':<10}{'plain loop':>16}{'typed replay':>16}{'ratio':>8}")
    for name, bench in (("Avro", bench_avro), ("Protobuf", bench_protobuf)):
        plain, ours = bench(args.records, args.repeat)
        print(f"{name:<10}{plain:>12,.0f} r/s{ours:>12,.0f} r/s{ours / plain:>8.2f}")
    fields = PROTOBUF_FIELDS_RATE
    print(f"{'Protobuf, plain loop reading every field':<42}{fields:>12,.0f} r/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
