"""Topics asked for by id: Kafka decides by whether the id is non-zero, never by the name."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from tests.support.router_broker import AdminHarness

METADATA, DELETE_TOPICS = 3, 20
ZERO = uuid.UUID(int=0)


@pytest.fixture
def h(tmp_path: Path) -> Iterator[AdminHarness]:
    harness = AdminHarness(tmp_path / "data", ("auto.create.topics.enable=true",))
    harness.create_topic("alpha", 2)
    harness.create_topic("beta", 1)
    yield harness
    harness.close()


def metadata(h: AdminHarness, entries: list[tuple[str | None, uuid.UUID]], version: int) -> Any:
    t = h.types(METADATA, version)
    request = t.MetadataRequest(
        topics=tuple(t.MetadataRequestTopic(name=n, topic_id=i) for n, i in entries),
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )
    return h.call(METADATA, version, request)


def topic_id(h: AdminHarness, name: str) -> uuid.UUID:
    info = h.broker.topics.get(name)
    assert info is not None
    return info.topic_id


@pytest.mark.parametrize("version", [12, 13])
def test_empty_name_with_a_topic_id_is_looked_up_by_id(h: AdminHarness, version: int) -> None:
    """The Java Admin's describeTopics(TopicCollection.ofTopicIds(...)) sends name ""."""
    alpha = topic_id(h, "alpha")
    (topic,) = metadata(h, [("", alpha)], version).topics
    assert topic.error_code == ErrorCode.none
    assert (topic.name, topic.topic_id) == ("alpha", alpha)
    assert [p.partition_index for p in topic.partitions] == [0, 1]


def test_request_by_id_ignores_names_and_zero_ids(h: AdminHarness) -> None:
    alpha, beta, unknown = topic_id(h, "alpha"), topic_id(h, "beta"), uuid.uuid4()
    answer = metadata(
        h, [(None, beta), ("", unknown), ("ignored", alpha), ("never-made", ZERO)], 12
    )
    got = [(t.name, t.topic_id, t.error_code) for t in answer.topics]
    assert got == [
        ("beta", beta, ErrorCode.none),
        (None, unknown, ErrorCode.unknown_topic_id),
        ("alpha", alpha, ErrorCode.none),
    ]
    # a name next to non-zero ids is not auto-created
    assert h.broker.topics.get("never-made") is None


def test_names_with_zero_ids_still_work_and_empty_name_is_invalid(h: AdminHarness) -> None:
    answer = metadata(h, [("beta", ZERO), ("", ZERO)], 12)
    beta, empty = answer.topics
    assert (beta.name, beta.topic_id, beta.error_code) == ("beta", topic_id(h, "beta"), 0)
    assert (empty.name, empty.error_code) == ("", ErrorCode.invalid_topic_exception)


def test_topic_ids_before_v12_are_an_invalid_request(h: AdminHarness) -> None:
    answer = metadata(h, [("", topic_id(h, "alpha"))], 11)
    assert [t.error_code for t in answer.topics] == [ErrorCode.invalid_request]


def test_delete_topics_tells_ids_from_names_by_a_null_name(h: AdminHarness) -> None:
    """DeleteTopics v6 as Kafka's ControllerApis: a non-null name beside a non-zero id (even
    "") is 'both'; a null name with a non-zero id deletes by id."""
    t = h.types(DELETE_TOPICS, 6)
    beta = topic_id(h, "beta")
    request = t.DeleteTopicsRequest(
        topics=(
            t.DeleteTopicState(name="", topic_id=topic_id(h, "alpha")),
            t.DeleteTopicState(name=None, topic_id=beta),
        ),
        timeout=timedelta(seconds=5),
    )
    both, by_id = h.call(DELETE_TOPICS, 6, request).responses
    assert both.error_code == ErrorCode.invalid_request
    assert both.error_message == "You may not specify both topic name and topic id."
    assert (by_id.name, by_id.topic_id, by_id.error_code) == ("beta", beta, ErrorCode.none)
    assert h.broker.topics.get("alpha") is not None and h.broker.topics.get("beta") is None
