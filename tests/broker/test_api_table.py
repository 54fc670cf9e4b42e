"""``broker/api_table.py`` and the router's handlers on demand.

The table lets the broker answer ApiVersions before it imports its handlers; it must say what
the handlers say. While the broker starts, what a producer sends first (ApiVersions, Metadata,
InitProducerId, Produce) is answered at once and every other request, and a transactional one,
waits for the start to finish (then is answered as usual, or closed if the start failed).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.list_groups.v4.request import ListGroupsRequest
from kio.schema.metadata.v12 import request as md12
from kio.schema.produce.v11 import request as p11
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.static.primitive import i16, i32

from tests.support.kafka_wire import router_frame
from tidelog.broker.api_table import API_TABLE
from tidelog.broker.app import Broker
from tidelog.broker.request_channel import Close
from tidelog.broker.router import Router, discover_handlers
from tidelog.config import load_broker_config


def test_every_handler_has_its_row_and_every_row_its_handler() -> None:
    specs, modules = discover_handlers()
    rows = {e.api_key: e for e in API_TABLE}
    assert len(rows) == len(API_TABLE), "an API key has two rows in broker/api_table.py"
    for key, spec in specs.items():
        module = modules[key].__name__.rsplit(".", 1)[1]
        want = (key, spec.name, module, spec.min_version, spec.max_version)
        want_adv = spec.advertised_min_version
        row = rows.get(key)
        got = None if row is None else (row.api_key, row.name, row.module, row.min_version,
                                        row.max_version)  # fmt: skip
        assert got == want and (row is None or row.advertised_min_version == want_adv), (
            f"broker/api_table.py needs the row ApiEntry({key}, {spec.name!r}, {module!r}, "
            f"{spec.min_version}, {spec.max_version}"
            f"{'' if want_adv is None else f', {want_adv}'}) (it has {row})"
        )
    assert set(rows) == set(specs), f"rows without a handler: {set(rows) - set(specs)}"


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def _metadata() -> md12.MetadataRequest:
    return md12.MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )


def _api_versions() -> ApiVersionsRequest:
    return ApiVersionsRequest(client_software_name="t", client_software_version="1")


def _init_producer_id(transactional_id: str | None) -> InitProducerIdRequest:
    return InitProducerIdRequest(
        transactional_id=transactional_id, transaction_timeout=timedelta(seconds=60)
    )


def _produce(transactional_id: str | None) -> p11.ProduceRequest:
    partition = p11.PartitionProduceData(index=i32(0), records=None)
    return p11.ProduceRequest(
        transactional_id=transactional_id,
        acks=i16(1),
        timeout=timedelta(seconds=30),
        topic_data=(p11.TopicProduceData(name="missing", partition_data=(partition,)),),
    )


def test_a_producers_first_requests_are_answered_during_the_start_others_wait(
    loop: asyncio.AbstractEventLoop, tmp_path: Path
) -> None:
    config = load_broker_config(
        overrides=[f"log.dirs={tmp_path / 'data'}", "listeners=PLAINTEXT://127.0.0.1:0"]
    )
    broker = Broker(config)
    loop.run_until_complete(broker.start())
    try:
        router = Router(broker)  # the broker's kind: handlers from the table, on demand
        assert "tidelog.broker.handlers.metadata" in router.modules()

        async def answer(outcome: object) -> object:
            if asyncio.iscoroutine(outcome):
                return await asyncio.wait_for(outcome, 10)
            return outcome

        async def scenario(outcome_of_start: bool) -> tuple[list[object], object, bool]:
            started: asyncio.Future[bool] = loop.create_future()
            router.hold_until(started)
            assert "tidelog.broker.handlers.metadata" not in router.modules()  # loaded
            # what a producer sends first: answered while ``started`` is still pending
            at_once = [
                await answer(router.dispatch(router_frame(request, n), "127.0.0.1", 1))
                for n, request in enumerate(
                    (_api_versions(), _metadata(), _init_producer_id(None), _produce(None)), 1
                )
            ]
            assert not started.done()
            # the coordinators' APIs, and a transactional request, wait
            held = [
                router.dispatch(router_frame(request, n), "127.0.0.1", 1)
                for n, request in enumerate(
                    (ListGroupsRequest(), _init_producer_id("t"), _produce("t")), 5
                )
            ]
            assert all(asyncio.iscoroutine(h) for h in held)
            tasks = [asyncio.ensure_future(h) for h in held]
            await asyncio.sleep(0.05)
            waited = not any(task.done() for task in tasks)
            started.set_result(outcome_of_start)
            answers = [await task for task in tasks]
            assert all(type(a) is type(answers[0]) for a in answers)
            return at_once, answers[0], waited

        at_once, answer_after, waited = loop.run_until_complete(scenario(True))
        assert all(isinstance(a, bytes) for a in at_once)  # at once, while the start goes on
        assert waited and isinstance(answer_after, bytes)  # after the start, answered as usual
        _, refused, _ = loop.run_until_complete(scenario(False))
        assert isinstance(refused, Close)  # a failed start closes what waited
        # once started, nothing waits
        groups = router.dispatch(router_frame(ListGroupsRequest(), 8), "127.0.0.1", 1)
        assert isinstance(loop.run_until_complete(asyncio.wait_for(groups, 10)), bytes)

        async def handshake_waits(sasl: bool) -> bool:
            """Whether a SaslHandshake waits for the start (a SASL listener's clients send it
            before anything but ApiVersions)."""
            started: asyncio.Future[bool] = loop.create_future()
            router.hold_until(started, sasl=sasl)
            request = SaslHandshakeRequest(mechanism="PLAIN")
            outcome = router.dispatch(router_frame(request, 9), "127.0.0.1", 1)
            task = asyncio.ensure_future(outcome) if asyncio.iscoroutine(outcome) else None
            await asyncio.sleep(0.05)
            waited = task is not None and not task.done()
            started.set_result(True)
            if task is not None:
                await task
            return waited

        assert loop.run_until_complete(handshake_waits(sasl=False))
        assert not loop.run_until_complete(handshake_waits(sasl=True))
    finally:
        loop.run_until_complete(broker.stop())
