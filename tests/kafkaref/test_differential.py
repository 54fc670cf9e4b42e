"""Same requests, same answers: every row of ``scenarios.py`` goes to tidelog and to Apache Kafka
over the wire, and the two answers must be equal field by field once ``normalise`` has replaced
what each broker picks for itself. Rows of ``DIVERGENCES`` are known differences (listed in
docs/kafka-differences.md): they must still differ (strict xfail), so a fix shows up.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.kafkaref.scenarios import SCENARIOS, T
from tests.support.broker_process import BrokerProcess
from tests.support.differential import build, errors, normalise, plain, request_class, resolve
from tests.support.kafka_reference import KafkaProcess
from tests.support.kafka_wire import WireClient

pytestmark = pytest.mark.integration

# Scenario name -> why tidelog answers differently (a row of docs/kafka-differences.md).
DIVERGENCES: dict[str, str] = {
    "metadata-auto-create": (
        "tidelog creates the topic before it answers; Kafka asks its controller and answers "
        "UNKNOWN_TOPIC_OR_PARTITION (or LEADER_NOT_AVAILABLE) until the topic is there"
    ),
    "cg-txn-join": (
        "the first ConsumerGroupHeartbeat of a new consumer group: tidelog answers member epoch "
        "1, Kafka 4.4 answers 2 (its group epoch moves twice on the group's first join)"
    ),
}

# Known differences inside answers that otherwise match (rows of docs/kafka-differences.md):
# topic configs Kafka has and tidelog does not implement (dropped from Kafka's answers) ...
KAFKA_ONLY_CONFIGS = frozenset(
    {
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.zstd.level",
        "errors.deadletterqueue.group.enable",
        "follower.replication.throttled.replicas",
        "leader.replication.throttled.replicas",
        "local.retention.bytes",
        "local.retention.ms",
        "max.decompressed.message.bytes",
        "message.timestamp.after.max.ms",
        "message.timestamp.before.max.ms",
        "remote.copy.lag.bytes",
        "remote.copy.lag.ms",
        "remote.log.copy.disable",
        "remote.log.delete.on.disable",
        "remote.storage.enable",
    }
)
# ... and (config, field) pairs whose values differ by design.
CONFIG_FIELD_MASKS = frozenset(
    {
        ("flush.messages", "value"),  # tidelog's default is 1 (durable acks), Kafka's Long.MAX
        ("min.insync.replicas", "config_source"),  # Kafka 4's format stores a cluster default
    }
)


def mask(value: Any) -> Any:
    """``value`` (normalised) without the known differences above; a null
    ``aborted_transactions`` (Kafka, read_uncommitted) reads as the empty list (tidelog)."""
    if isinstance(value, dict):
        out = {k: mask(v) for k, v in value.items()}
        for config, field in CONFIG_FIELD_MASKS:
            if out.get("name") == config and field in out:
                out[field] = "<differs>"
        if "aborted_transactions" in out and out["aborted_transactions"] is None:
            out["aborted_transactions"] = []
        return out
    if isinstance(value, list):
        return [
            mask(v)
            for v in value
            if not (isinstance(v, dict) and v.get("name") in KAFKA_ONLY_CONFIGS)
        ]
    return value


class Side:
    """One broker of the pair: a connection and the plain answers so far."""

    def __init__(self, bootstrap: str) -> None:
        self.client = WireClient(bootstrap, timeout=30.0)
        self.answers: dict[str, Any] = {}

    def send(self, name: str, api: str, version: int, fields: dict[str, Any]) -> Any:
        request = build(request_class(api, version), resolve(fields, self.answers))
        answer = plain(self.client.request(request))
        self.answers[name] = answer
        return answer


def _create_topics(side: Side) -> None:
    side.send(
        "setup",
        "create_topics",
        7,
        {
            "topics": [
                {
                    "name": T,
                    "num_partitions": 3,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [],
                },
                {
                    "name": "dt-compact",
                    "num_partitions": 1,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [{"name": "cleanup.policy", "value": "compact"}],
                },
            ],
            "timeout": 10000,
            "validate_only": False,
        },
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        meta = side.send(
            "setup-metadata",
            "metadata",
            12,
            {
                "topics": [{"name": n, "topic_id": None} for n in (T, "dt-compact")],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            },
        )
        leaders = [p["leader_id"] for t in meta["topics"] for p in t["partitions"]]
        if len(leaders) == 4 and all(leader >= 0 for leader in leaders):
            break
        time.sleep(0.2)
    else:
        raise AssertionError(f"topics not ready: {meta}")
    _warm_up(side)


# What a client retries until it works: Kafka makes __consumer_offsets, __transaction_state and
# its producer id blocks on first use and answers COORDINATOR_NOT_AVAILABLE (or
# COORDINATOR_LOAD_IN_PROGRESS) meanwhile. tidelog answers at once.
WARM_UP = [
    ("find_coordinator", 4, {"key_type": 0, "coordinator_keys": ["dg-warm"]}),
    ("find_coordinator", 4, {"key_type": 1, "coordinator_keys": ["dtx-warm"]}),
    (
        "init_producer_id",
        4,
        {
            "transactional_id": None,
            "transaction_timeout": -1,
            "producer_id": -1,
            "producer_epoch": -1,
        },
    ),
]


def _warm_up(side: Side) -> None:
    for api, version, fields in WARM_UP:
        deadline = time.monotonic() + 60
        while set(errors(side.send("warm-up", api, version, fields))) != {"none"}:
            assert time.monotonic() < deadline, f"{api} never ready: {side.answers['warm-up']}"
            time.sleep(0.3)


@pytest.fixture(scope="module")
def pair(
    kafka_broker: KafkaProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Side, Side]]:
    log_dir = tmp_path_factory.mktemp("differential") / "data"
    log_dir.mkdir()
    tidelog = BrokerProcess(log_dir, {"group.initial.rebalance.delay.ms": "0"}).start()
    sides = (Side(tidelog.bootstrap), Side(kafka_broker.bootstrap))
    for side in sides:
        _create_topics(side)
    yield sides
    for side in sides:
        side.client.close()
    assert tidelog.stop() == 0, tidelog.log_text()[-3000:]


def _params() -> list[Any]:
    out = []
    for name, api, version, fields in SCENARIOS:
        marks = []
        if name in DIVERGENCES:
            marks.append(pytest.mark.xfail(reason=DIVERGENCES[name], strict=True))
        out.append(pytest.param(name, api, version, fields, id=name, marks=marks))
    return out


@pytest.mark.parametrize(("name", "api", "version", "fields"), _params())
def test_same_answer(
    pair: tuple[Side, Side], name: str, api: str, version: int, fields: dict[str, Any]
) -> None:
    tidelog, kafka = pair
    ours = mask(normalise(tidelog.send(name, api, version, fields)))
    theirs = mask(normalise(kafka.send(name, api, version, fields)))
    assert ours == theirs, f"{name}: tidelog (left) and Kafka (right) differ"


def test_scenario_names_are_unique() -> None:
    names = [s[0] for s in SCENARIOS]
    assert len(names) == len(set(names))
    assert set(DIVERGENCES) <= set(names)


def test_docs_list_every_divergence() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "kafka-differences.md").read_text()
    missing = [name for name in DIVERGENCES if f"`{name}`" not in doc]
    assert not missing, f"docs/kafka-differences.md lacks rows for {missing}"


def test_api_versions_within_kafka(pair: tuple[Side, Side]) -> None:
    """Every API tidelog advertises, Kafka 4 serves too, over a range that covers tidelog's
    (so a client's guess of the broker's release from the ranges holds)."""
    fields: dict[str, Any] = {"client_software_name": "t", "client_software_version": "1"}
    ranges = [
        {
            k["api_key"]: (k["min_version"], k["max_version"])
            for k in side.send("av", "api_versions", 3, fields)["api_keys"]
        }
        for side in pair
    ]
    ours, kafka = ranges
    outside = {
        key: (span, kafka.get(key))
        for key, span in ours.items()
        if key not in API_VERSION_DIVERGENCES and (key not in kafka or span[1] > kafka[key][1])
    }
    assert not outside, f"tidelog advertises beyond Kafka 4: {outside}"


# API key -> why tidelog's ApiVersions range for it goes beyond Kafka's (docs row).
API_VERSION_DIVERGENCES: dict[int, str] = {}


# Feature -> (tidelog's finalized level, None when it does not list the feature; why): where
# tidelog's ApiVersions features differ from a fresh Kafka 4.4 node's (docs row).
FEATURE_DIVERGENCES: dict[str, tuple[int | None, str]] = {
    "share.version": (1, "level 2 is share-group dead-letter queues (KIP-1191), not served"),
    "eligible.leader.replicas.version": (None, "one node has no replicas to elect from"),
    "metadata.version": (None, "no KRaft metadata log"),
    "kraft.version": (None, "no KRaft quorum"),
}


def _features(answer: dict[str, Any]) -> tuple[dict[str, tuple[int, int]], dict[str, int]]:
    supported = {
        f["name"]: (f["min_version"], f["max_version"]) for f in answer["supported_features"]
    }
    finalized = {}
    for f in answer["finalized_features"]:
        assert f["min_version_level"] == f["max_version_level"], f
        finalized[f["name"]] = f["max_version_level"]
    return supported, finalized


def test_features_as_kafka(pair: tuple[Side, Side]) -> None:
    """ApiVersions v4's features (what Admin.describeFeatures shows and clients act on): every
    feature Kafka 4.4 finalizes, at Kafka's level, but for FEATURE_DIVERGENCES."""
    fields: dict[str, Any] = {"client_software_name": "t", "client_software_version": "1"}
    ours, kafka = (side.send("features", "api_versions", 4, fields) for side in pair)
    ours_supported, ours_finalized = _features(ours)
    kafka_supported, kafka_finalized = _features(kafka)
    want = dict(kafka_finalized)
    for name, (level, _) in FEATURE_DIVERGENCES.items():
        assert name in kafka_finalized, f"Kafka no longer finalizes {name}: drop its row"
        if level is None:
            del want[name]
        else:
            want[name] = level
    assert ours_finalized == want
    # supported: 0 up to the finalized level, inside Kafka's range
    assert ours_supported == {name: (0, level) for name, level in want.items()}
    for name, (low, high) in ours_supported.items():
        assert kafka_supported[name][0] <= low and high <= kafka_supported[name][1], name
    assert ours["finalized_features_epoch"] >= 0 and kafka["finalized_features_epoch"] >= 0
    doc = (Path(__file__).resolve().parents[2] / "docs" / "kafka-differences.md").read_text()
    assert all(f"`{name}`" in doc for name in FEATURE_DIVERGENCES)
