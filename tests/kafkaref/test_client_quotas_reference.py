# ruff: noqa: E501  (the table of requests reads best one row a line)
"""AlterClientQuotas and DescribeClientQuotas against Apache Kafka 4: the same sequence of
requests to tidelog and to Kafka, the answers equal field by field, error messages included
(the general differential test masks messages; quota errors are compared word for word).

Each broker orders entities and values by its own maps (Kafka: hash maps), so both answers are
sorted before they are compared. Kafka applies an alteration through its controller and the
metadata log: a describe right after an alter is repeated until Kafka's answer settles (up to
10 s), never compared early.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.broker_process import BrokerProcess
from tests.support.differential import build, plain, request_class
from tests.support.kafka_reference import KafkaProcess
from tests.support.kafka_wire import WireClient

pytestmark = pytest.mark.integration


def _alter(
    entries: list[tuple[list[tuple[str, str | None]], list[Any]]], validate_only: bool = False
) -> dict[str, Any]:
    return {
        "entries": [
            {
                "entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
                "ops": [{"key": k, "value": float(v), "remove": r} for k, v, r in ops],
            }
            for entity, ops in entries
        ],
        "validate_only": validate_only,
    }


def _describe(
    components: list[tuple[str, int, str | None]], strict: bool = False
) -> dict[str, Any]:
    return {
        "components": [{"entity_type": t, "match_type": m, "match": n} for t, m, n in components],
        "strict": strict,
    }


EXACT, DEFAULT, SPECIFIED = 0, 1, 2
U, C = "user", "client-id"

#: (name, api, fields), sent in order to both brokers (v1 of both APIs).
SEQUENCE: list[tuple[str, str, dict[str, Any]]] = [
    ("set-client", "alter", _alter([([(C, "dq-app")], [("producer_byte_rate", 1024, False), ("consumer_byte_rate", 2048, False)])])),
    ("set-user-default", "alter", _alter([([(U, None)], [("request_percentage", 50, False)])])),
    ("set-user-client", "alter", _alter([([(U, "dq-u"), (C, "dq-app")], [("producer_byte_rate", 4096, False)])])),
    ("validate-only", "alter", _alter([([(U, "dq-v")], [("producer_byte_rate", 1, False)])], validate_only=True)),
    ("unknown-key", "alter", _alter([([(U, "dq-x")], [("no_such_quota", 1, False)])])),
    ("fractional", "alter", _alter([([(U, "dq-x")], [("producer_byte_rate", 1.5, False)])])),
    ("not-positive", "alter", _alter([([(U, "dq-x")], [("consumer_byte_rate", 0, False)])])),
    ("empty-entity", "alter", _alter([([], [("producer_byte_rate", 1, False)])])),
    ("empty-name", "alter", _alter([([(U, "")], [("producer_byte_rate", 1, False)])])),
    ("bad-type", "alter", _alter([([("group", "g")], [("producer_byte_rate", 1, False)])])),
    ("ip-with-user", "alter", _alter([([("ip", "10.0.0.1"), (U, "a")], [])])),
    ("ip-wrong-key", "alter", _alter([([("ip", "10.0.0.1")], [("producer_byte_rate", 1, False)])])),
    ("duplicate-key", "alter", _alter([([(U, "dq-x")], [("producer_byte_rate", 1, False), ("producer_byte_rate", 2, False)])])),
    ("describe-client", "describe", _describe([(C, EXACT, "dq-app")])),
    ("describe-client-strict", "describe", _describe([(C, EXACT, "dq-app")], strict=True)),
    ("describe-default-user", "describe", _describe([(U, DEFAULT, None)], strict=True)),
    ("describe-any-user", "describe", _describe([(U, SPECIFIED, None)])),
    ("describe-validated-not-set", "describe", _describe([(U, EXACT, "dq-v")])),
    ("describe-exact-null", "describe", _describe([(U, EXACT, None)])),
    ("describe-default-with-match", "describe", _describe([(U, DEFAULT, "x")])),
    ("describe-twice", "describe", _describe([(U, EXACT, "a"), (U, SPECIFIED, None)])),
    ("describe-unknown-type", "describe", _describe([("group", SPECIFIED, None)])),
    ("describe-ip-and-user", "describe", _describe([("ip", SPECIFIED, None), (U, SPECIFIED, None)])),
    ("remove", "alter", _alter([([(C, "dq-app")], [("consumer_byte_rate", 0, True)])])),
    ("remove-absent", "alter", _alter([([(C, "dq-app")], [("request_percentage", 0, True)])])),
    ("describe-after-remove", "describe", _describe([(C, EXACT, "dq-app")], strict=True)),
    ("cleanup", "alter", _alter([([(U, None)], [("request_percentage", 0, True)]), ([(U, "dq-u"), (C, "dq-app")], [("producer_byte_rate", 0, True)]), ([(C, "dq-app")], [("producer_byte_rate", 0, True)])])),
    ("describe-after-cleanup", "describe", _describe([(C, SPECIFIED, None)])),
]  # fmt: skip


def _sorted(value: Any) -> Any:
    """``value`` without its throttle time, lists of entities, values and entries sorted."""
    if isinstance(value, dict):
        return {
            k: _sorted(v)
            for k, v in value.items()
            if k not in ("throttle_time_ms", "throttle_time")
        }
    if isinstance(value, list):
        return sorted((_sorted(v) for v in value), key=repr)
    return value


class _Side:
    def __init__(self, bootstrap: str) -> None:
        self.client = WireClient(bootstrap, timeout=30.0)

    def send(self, api: str, fields: dict[str, Any]) -> Any:
        module = "alter_client_quotas" if api == "alter" else "describe_client_quotas"
        return _sorted(plain(self.client.request(build(request_class(module, 1), fields))))


@pytest.fixture(scope="module")
def sides(
    kafka_broker: KafkaProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[_Side, _Side]]:
    log_dir: Path = tmp_path_factory.mktemp("quota-reference") / "data"
    log_dir.mkdir()
    tidelog = BrokerProcess(log_dir).start()
    pair = (_Side(tidelog.bootstrap), _Side(kafka_broker.bootstrap))
    yield pair
    for side in pair:
        side.client.close()
    assert tidelog.stop() == 0, tidelog.log_text()[-3000:]


def test_same_answers_as_kafka(sides: tuple[_Side, _Side]) -> None:
    tidelog, kafka = sides
    for name, api, fields in SEQUENCE:
        ours = tidelog.send(api, fields)
        theirs = kafka.send(api, fields)
        deadline = time.monotonic() + 10
        while api == "describe" and ours != theirs and time.monotonic() < deadline:
            time.sleep(0.1)  # Kafka's metadata log still applying the alteration before
            theirs = kafka.send(api, fields)
        assert ours == theirs, f"{name}: tidelog (left) and Kafka (right) differ"
