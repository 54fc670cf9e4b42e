"""The router's single catch-all: a handler that raises costs an error code, or the connection.

A real Broker object (not started) and the real handler modules; only ``handle`` (and the
synchronous ``at_once`` path of Produce and Fetch) is replaced by a function that raises, which
is the situation under test.
"""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import request as f12
from kio.schema.list_offsets.v8 import request as lo8
from kio.schema.metadata.v5 import request as md5
from kio.schema.produce.v9 import request as p9
from kio.serial import entity_reader

from tests.support.kafka_wire import router_frame
from tidelog.broker.app import Broker
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.request_channel import Close
from tidelog.broker.router import Router, discover_handlers
from tidelog.config import load_broker_config


async def _explode(ctx: RequestContext, request: Any) -> Any:
    raise RuntimeError("bug in a handler")


def _explode_at_once(broker: Any, version: int, correlation_id: int, request: Any) -> Any:
    raise RuntimeError("bug in a handler's synchronous path")


def _frame(request: Any, correlation_id: int = 9) -> bytes:
    return router_frame(request, correlation_id)


@pytest.fixture
def router(tmp_path: Path) -> Router:
    cfg = load_broker_config(
        None, [f"log.dirs={tmp_path}", "listeners=PLAINTEXT://127.0.0.1:0"], environ={}
    )
    broker = Broker(cfg)
    specs, modules = discover_handlers()
    broken = {
        k: dataclasses.replace(
            s, handle=_explode, at_once=_explode_at_once if s.at_once is not None else None
        )
        for k, s in specs.items()
    }
    return Router(broker, broken, modules)


def _answer(router: Router, request: Any) -> Any:
    outcome = router.dispatch(_frame(request), "127.0.0.1", 1)
    result = asyncio.run(outcome) if asyncio.iscoroutine(outcome) else outcome
    if isinstance(result, Close):
        return result
    data = result if isinstance(result, bytes) else b"".join(bytes(c) for c in result)
    api_key, version = type(request).__api_key__, type(request).__version__
    schema = load_response_schema(api_key, version)
    offset = 8 + (1 if schema.__header_schema__.__version__ == 1 else 0)
    assert int.from_bytes(data[4:8], "big") == 9  # correlation id
    return entity_reader(schema)(data, offset)[0]


def test_top_level_error_field(router: Router) -> None:
    request = f12.FetchRequest(
        max_wait=timedelta(0),
        min_bytes=1,
        topics=(
            f12.FetchTopic(
                topic="t",
                partitions=(
                    f12.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1),
                ),
            ),
        ),
        forgotten_topics_data=(),
    )
    assert _answer(router, request).error_code == ErrorCode.unknown_server_error


def test_per_partition_errors_for_produce(router: Router) -> None:
    request = p9.ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout=timedelta(seconds=1),
        topic_data=(
            p9.TopicProduceData(
                name="t",
                partition_data=(
                    p9.PartitionProduceData(index=0, records=b""),
                    p9.PartitionProduceData(index=1, records=b""),
                ),
            ),
        ),
    )
    answer = _answer(router, request)
    parts = answer.responses[0].partition_responses
    assert [(p.index, p.error_code) for p in parts] == [
        (0, ErrorCode.unknown_server_error),
        (1, ErrorCode.unknown_server_error),
    ]


def test_per_topic_errors_for_old_metadata(router: Router) -> None:
    request = md5.MetadataRequest(
        topics=(md5.MetadataRequestTopic(name="a"),), allow_auto_topic_creation=False
    )
    answer = _answer(router, request)
    assert [(t.name, t.error_code) for t in answer.topics] == [
        ("a", ErrorCode.unknown_server_error)
    ]


def test_per_partition_errors_for_list_offsets(router: Router) -> None:
    request = lo8.ListOffsetsRequest(
        replica_id=-1,
        isolation_level=0,
        topics=(
            lo8.ListOffsetsTopic(
                name="t", partitions=(lo8.ListOffsetsPartition(partition_index=3, timestamp=-1),)
            ),
        ),
    )
    part = _answer(router, request).topics[0].partitions[0]
    assert (part.partition_index, part.error_code) == (3, ErrorCode.unknown_server_error)


def test_no_error_shape_closes_the_connection(tmp_path: Path) -> None:
    cfg = load_broker_config(
        None, [f"log.dirs={tmp_path}", "listeners=PLAINTEXT://127.0.0.1:0"], environ={}
    )
    broker = Broker(cfg)
    specs, _ = discover_handlers()
    spec = dataclasses.replace(specs[2], handle=_explode)
    router = Router(broker, {2: spec}, {})  # ListOffsets without its error_response shaper
    request = lo8.ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=())
    assert isinstance(_answer(router, request), Close)


def test_registry_claims_known_versions_and_looks_like_kafka() -> None:
    from kafka.protocol.broker_version_data import infer_broker_version_from_api_versions

    specs, modules = discover_handlers()
    assert all(isinstance(s, HandlerSpec) for s in specs.values())
    for key, (lo, hi) in {
        0: (3, 12),
        1: (4, 16),
        2: (1, 8),
        3: (0, 13),
        18: (0, 4),
        19: (2, 7),
    }.items():
        assert (specs[key].min_version, specs[key].max_version) == (lo, hi)
        assert modules[key].SPEC is specs[key]
    guess = infer_broker_version_from_api_versions(
        {k: (s.min_version, s.max_version) for k, s in specs.items()}
    )
    assert guess >= (2, 1), "kafka-python enables zstd only for brokers it guesses >= 2.1"
    # librdkafka: message format v2 needs Produce >= 3 and Fetch >= 4; zstd Produce 7, Fetch 10
    assert specs[0].max_version >= 7 and specs[1].max_version >= 10
