"""Fuzzing a live broker: it never crashes or hangs, its memory stays bounded.

One broker for the module. Every input goes through ``FuzzTarget`` (see ``fuzz_harness``): the
broker must answer it or close that connection within 5 s (requests allowed to wait excepted),
while a canary connection keeps answering ApiVersions and Metadata and the broker's RSS stays
under ``RSS_LIMIT_MIB`` above where it started. Inputs:

- every advertised (api_key, version): requests Hypothesis builds from kio's schema classes,
  sent as they are or damaged (bit flips, truncation, length/count fields set to extremes,
  bytes inserted, deleted, repeated, a lying size prefix);
- raw bytes behind any size prefix; unknown API keys and versions;
- Produce with record batches that are valid or damaged in every header field, then the log is
  read back: every stored batch is intact and offsets are contiguous;
- bad topic names, requests naming thousands of topics, oversized batches and frames,
  a compressed batch that inflates to 256 MiB.

``CHAOS_FUZZ_SCALE`` multiplies the example counts (``scripts/chaos --fuzz`` sets it); the
default keeps the module well under 90 s.
"""

from __future__ import annotations

import gzip
import os
import struct
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.api_versions.v3 import request as av3
from kio.schema.create_topics.v7 import request as ct7
from kio.schema.fetch.v12 import request as f12
from kio.schema.list_offsets.v8 import request as lo8
from kio.schema.metadata.v12 import request as md12
from kio.schema.produce.v9 import request as p9

from tests.fuzz.fuzz_harness import Canary, FuzzTarget, RssWatch
from tests.fuzz.fuzz_inputs import framed, mutated, raw_frames, record_sets, register, requests
from tests.support.broker_process import BrokerProcess
from tests.support.fault_wire import read_partition
from tests.support.kafka_wire import WireClient, encode_request, make_batch
from tidelog.broker.router import discover_handlers

SCALE = float(os.environ.get("CHAOS_FUZZ_SCALE", "1"))
RSS_LIMIT_MIB = 400
TOPIC = "fuzz"
COMPACTED = "fuzz-compacted"
SETTINGS = {
    "auto.create.topics.enable": "false",
    "group.initial.rebalance.delay.ms": "0",
    "num.partitions": "1",
    "offsets.topic.num.partitions": "2",
    "socket.request.max.bytes": str(8 << 20),
}


def fuzz_settings(examples: int) -> settings:
    """``examples`` times ``CHAOS_FUZZ_SCALE``; no deadline (a broker answers in its time)."""
    return settings(
        max_examples=max(1, int(examples * SCALE)),
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )


register()


@dataclass
class FuzzEnv:
    broker: BrokerProcess
    target: FuzzTarget
    canary: Canary
    rss: RssWatch
    apis: list[tuple[int, int]]

    def assert_healthy(self) -> None:
        assert self.broker.running, "the broker died:\n" + self.broker.log_text()[-5000:]
        assert not self.rss.gone, "the broker process is gone"
        assert not self.canary.failures, self.canary.failures
        assert self.canary.is_alive(), "the canary stopped"
        growth_mib = (self.rss.peak_kib - self.rss.start_kib) / 1024
        assert growth_mib < RSS_LIMIT_MIB, f"RSS grew by {growth_mib:.0f} MiB"
        assert not self.target.silent, self.target.silent[:5]


def _advertised(bootstrap: str) -> list[tuple[int, int]]:
    with WireClient(bootstrap) as c:
        answer = c.request(
            av3.ApiVersionsRequest(client_software_name="fuzz", client_software_version="1")
        )
    return [
        (int(k.api_key), v)
        for k in answer.api_keys
        for v in range(int(k.min_version), int(k.max_version) + 1)
    ]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FuzzEnv]:
    data = tmp_path_factory.mktemp("fuzz") / "data"
    data.mkdir()
    broker = BrokerProcess(data, SETTINGS)
    broker.start()
    assert broker.proc is not None
    with WireClient(broker.bootstrap) as c:
        for name, configs in ((TOPIC, ()), (COMPACTED, (("cleanup.policy", "compact"),))):
            c.request(_create_request([name], configs=configs))
    canary = Canary(broker.bootstrap)
    rss = RssWatch(broker.proc.pid)
    canary.start()
    rss.start()
    fuzz = FuzzEnv(broker, FuzzTarget(broker.bootstrap), canary, rss, _advertised(broker.bootstrap))
    yield fuzz
    try:
        # Whatever tests ran (-k, random order, one xdist worker's share), the broker is healthy
        # and its logs intact at the end; each test checked this for itself too.
        fuzz.assert_healthy()
        assert_stored_batches_intact(fuzz)
    finally:
        fuzz.target.close()
        canary.stop()
        rss.stop()
        print(
            f"\nfuzz: {fuzz.target.tried} inputs tried {dict(fuzz.target.outcomes)}, "
            f"{len(fuzz.target.apis_tried)} of {len(fuzz.apis)} API versions, canary answered "
            f"{canary.answered} (slowest {canary.slowest_s * 1000:.0f} ms), RSS "
            f"{rss.start_kib // 1024} -> peak {rss.peak_kib // 1024} MiB"
        )
        if broker.running:
            assert broker.stop() == 0, broker.log_text()[-5000:]


def _create_request(
    names: list[str],
    *,
    partitions: int = 1,
    configs: tuple[tuple[str, str], ...] = (),
    validate_only: bool = False,
) -> ct7.CreateTopicsRequest:
    return ct7.CreateTopicsRequest(
        topics=tuple(
            ct7.CreatableTopic(
                name=name,
                num_partitions=partitions,
                replication_factor=-1,
                assignments=(),
                configs=tuple(ct7.CreatableTopicConfig(name=k, value=v) for k, v in configs),
            )
            for name in names
        ),
        timeout=timedelta(seconds=10),
        validate_only=validate_only,
    )


# --------------------------------------------------------------------------- every API version


def _advertised_by_handlers() -> list[tuple[int, int]]:
    """Every (api_key, version) ApiVersions lists, from the handler registry (no broker)."""
    specs, _ = discover_handlers()
    pairs = []
    for key, spec in sorted(specs.items()):
        low = (
            spec.min_version if spec.advertised_min_version is None else spec.advertised_min_version
        )
        pairs.extend((key, v) for v in range(low, spec.max_version + 1))
    return pairs


ADVERTISED = _advertised_by_handlers()


def test_the_broker_advertises_what_the_handlers_implement(env: FuzzEnv) -> None:
    assert sorted(env.apis) == ADVERTISED  # what the broker lists is what the sweep below covers


@pytest.mark.parametrize("api", ADVERTISED, ids=lambda a: f"key{a[0]}-v{a[1]}")
def test_every_api_version(env: FuzzEnv, api: tuple[int, int]) -> None:
    """Requests built from the schema, as they are or damaged; this version was tried and the
    broker stayed healthy (each test checks its own verdict: ``-k``, random order and xdist
    work)."""
    api_key, version = api
    tried = 0

    @fuzz_settings(8)
    @given(data=st.data())
    def fuzz(data: st.DataObject) -> None:
        nonlocal tried
        frame = data.draw(requests(api_key, version), label="request")
        tried += 1
        env.target.apis_tried[api] += 1
        if data.draw(st.booleans(), label="damage"):
            payload, is_framed = data.draw(mutated(frame), label="mutation")
        else:
            payload, is_framed = frame, True
        env.target.send(payload, framed=is_framed, label=f"api {api_key} v{version}")
        env.assert_healthy()

    fuzz()
    assert tried > 0, f"no request of api {api_key} v{version} was sent"


# --------------------------------------------------------------------------- frames


@fuzz_settings(300)
@given(payload=raw_frames())
def test_raw_frames(env: FuzzEnv, payload: bytes) -> None:
    env.target.send(payload, framed=False, label="raw")
    env.assert_healthy()


@fuzz_settings(300)
@given(
    api_key=st.integers(-(2**15), 2**15 - 1) | st.integers(-2, 80),
    version=st.integers(-(2**15), 2**15 - 1) | st.integers(-2, 40),
    correlation=st.integers(-(2**31), 2**31 - 1),
    body=st.binary(max_size=200),
)
def test_any_api_key_and_version(
    env: FuzzEnv, api_key: int, version: int, correlation: int, body: bytes
) -> None:
    verdict = env.target.send(
        framed(struct.pack(">hhi", api_key, version, correlation) + body),
        framed=True,
        label=f"key {api_key} v{version}",
    )
    assert verdict.outcome in ("answered", "closed", "excused")
    env.assert_healthy()


# --------------------------------------------------------------------------- record batches


def _produce(version: int, topic: str, records: bytes | None, acks: int) -> bytes:
    from kio.index import load_request_schema

    cls = load_request_schema(0, version)
    module = sys.modules[cls.__module__]
    request = cls(
        transactional_id=None,
        acks=acks,
        timeout=timedelta(seconds=5),
        topic_data=(
            module.TopicProduceData(
                name=topic, partition_data=(module.PartitionProduceData(index=0, records=records),)
            ),
        ),
    )
    return encode_request(request, 7)


def test_record_batches(env: FuzzEnv) -> None:
    """Produce valid and damaged batches, then read the logs back: whatever was accepted is
    whole (see ``assert_stored_batches_intact``)."""

    @fuzz_settings(600)
    @given(
        records=record_sets(),
        version=st.integers(3, 10),
        acks=st.sampled_from((-1, 1, 0)),
        compacted=st.booleans(),
    )
    def fuzz(records: bytes | None, version: int, acks: int, compacted: bool) -> None:
        topic = COMPACTED if compacted else TOPIC
        env.target.send(
            _produce(version, topic, records, acks), framed=True, label=f"produce v{version}"
        )

    fuzz()
    assert_stored_batches_intact(env)
    env.assert_healthy()


def assert_stored_batches_intact(env: FuzzEnv) -> None:
    """Whatever was accepted is whole: CRCs right, headers consistent, offsets contiguous.

    Records are not decoded here: the broker does not walk records on produce (see
    ``test_records_of_an_accepted_batch_decode``). Fuzzed DeleteRecords may have moved the log
    start: the read starts there. Holds at any moment, whichever tests ran before: the module's
    fixture checks it once more at teardown.
    """
    for topic in (TOPIC, COMPACTED):
        view = read_partition(env.broker.bootstrap, topic, decode=False)
        if view.error == 1:  # OFFSET_OUT_OF_RANGE: the log starts later now
            start = view.log_start_offset
            view = read_partition(env.broker.bootstrap, topic, start, decode=False)
        assert view.error == 0 and not view.bad_crc, view
        offsets = [b.base_offset for b in view.batches]
        assert offsets == sorted(offsets)
        if topic == TOPIC and view.batches:
            first = view.batches[0]
            assert (
                first.base_offset <= view.log_start_offset < first.base_offset + len(first.values)
            )
            expected = first.base_offset
            for batch in view.batches:
                assert batch.base_offset == expected
                expected += len(batch.values)
            assert expected == view.high_watermark


# --------------------------------------------------------------------------- names and sizes

BAD_NAMES = [
    "",
    ".",
    "..",
    "a" * 250,
    "a" * 300,
    "bad/name",
    "bad\x00name",
    "ü-topic",
    " ",
    "__consumer_offsets",
    "a" * 32000,
]


def test_bad_topic_names(env: FuzzEnv) -> None:
    for name in BAD_NAMES:
        for request in (
            _create_request([name]),
            md12.MetadataRequest(
                topics=(md12.MetadataRequestTopic(topic_id=None, name=name),),
                allow_auto_topic_creation=True,
                include_topic_authorized_operations=False,
            ),
        ):
            env.target.send(encode_request(request, 1), framed=True, label=f"name {name[:20]!r}")
        env.target.send(
            _produce(9, name, make_batch([b"x"]), -1), framed=True, label="produce bad name"
        )
    with WireClient(env.broker.bootstrap) as c:
        for name in BAD_NAMES[:-2]:
            answer = c.request(_create_request([name])).topics[0]
            assert answer.error_code != 0, name
    env.assert_healthy()


def _names(n: int, prefix: str) -> list[str]:
    return [f"{prefix}-{i:05d}" for i in range(n)]


def test_requests_naming_thousands_of_topics(env: FuzzEnv) -> None:
    target = env.target
    names = _names(5000, "many")
    requests_sent = [
        md12.MetadataRequest(
            topics=tuple(md12.MetadataRequestTopic(topic_id=None, name=n) for n in names),
            allow_auto_topic_creation=True,
            include_topic_authorized_operations=False,
        ),
        _create_request(names, validate_only=True),
        f12.FetchRequest(
            max_wait=timedelta(0),
            min_bytes=1,
            max_bytes=1 << 20,
            session_id=0,
            topics=tuple(
                f12.FetchTopic(
                    topic=n,
                    partitions=(
                        f12.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1024),
                    ),
                )
                for n in names
            ),
            forgotten_topics_data=(),
        ),
        p9.ProduceRequest(
            transactional_id=None,
            acks=1,
            timeout=timedelta(seconds=5),
            topic_data=tuple(
                p9.TopicProduceData(
                    name=n,
                    partition_data=(p9.PartitionProduceData(index=0, records=make_batch([b"x"])),),
                )
                for n in names[:2000]
            ),
        ),
        lo8.ListOffsetsRequest(
            replica_id=-1,
            isolation_level=0,
            topics=tuple(
                lo8.ListOffsetsTopic(
                    name=n, partitions=(lo8.ListOffsetsPartition(partition_index=0, timestamp=-1),)
                )
                for n in names
            ),
        ),
    ]
    for request in requests_sent:
        verdict = target.send(encode_request(request, 3), framed=True, label=type(request).__name__)
        assert verdict.outcome == "answered", (type(request).__name__, verdict)
    # 1000 real topics in one request: all created while the canary keeps answering.
    with WireClient(env.broker.bootstrap, timeout=60) as c:
        created = c.request(_create_request(_names(1000, "real"))).topics
        assert all(t.error_code == 0 for t in created)
    env.assert_healthy()


def test_huge_partition_counts_are_refused(env: FuzzEnv) -> None:
    with WireClient(env.broker.bootstrap, timeout=30) as c:
        for count in (2**31 - 1, 10**6, 100_001):
            started = time.monotonic()
            answer = c.request(_create_request([f"huge-{count}"], partitions=count)).topics[0]
            assert answer.error_code != 0, count
            assert time.monotonic() - started < 5
    env.assert_healthy()


def test_oversized_batches_and_frames(env: FuzzEnv) -> None:
    big = make_batch([os.urandom(600_000), os.urandom(600_000)])  # > max.message.bytes
    with WireClient(env.broker.bootstrap) as c:
        answer = c.request(
            p9.ProduceRequest(
                transactional_id=None,
                acks=-1,
                timeout=timedelta(seconds=5),
                topic_data=(
                    p9.TopicProduceData(
                        name=TOPIC, partition_data=(p9.PartitionProduceData(index=0, records=big),)
                    ),
                ),
            )
        )
        assert answer.responses[0].partition_responses[0].error_code == 10  # MESSAGE_TOO_LARGE
    # A frame over socket.request.max.bytes is refused before it is buffered.
    verdict = env.target.send(
        struct.pack(">i", (8 << 20) + 1) + b"\x00" * 1000, framed=False, label="too big"
    )
    assert verdict.outcome == "closed"
    env.assert_healthy()


def _bomb_batch(inflated: int) -> bytes:
    """A gzip batch claiming one record, whose records inflate to ``inflated`` zero bytes."""
    payload = gzip.compress(b"\x00" * inflated, 9)
    header = struct.pack(">hiqqqhii", 1, 0, 1_700_000_000_000, 1_700_000_000_000, -1, -1, -1, 1)
    body = header + payload
    batch = bytearray(
        struct.pack(">qiib", 0, 4 + 1 + 4 + len(body), -1, 2) + b"\x00\x00\x00\x00" + body
    )
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    return bytes(batch)


def test_decompression_bomb(env: FuzzEnv) -> None:
    """256 MiB of zeros in ~250 KiB: stored on a plain topic (never decoded on append),
    refused on a compacted one (its keys would need the records), and eight timestamp look-ups
    at once over it answer without inflating it whole: the broker decodes at most 32 MiB."""
    bomb = _bomb_batch(256 << 20)
    with WireClient(env.broker.bootstrap) as c:
        for topic, code in ((TOPIC, 0), (COMPACTED, 2)):  # CORRUPT_MESSAGE
            answer = c.request(
                p9.ProduceRequest(
                    transactional_id=None,
                    acks=-1,
                    timeout=timedelta(seconds=5),
                    topic_data=(
                        p9.TopicProduceData(
                            name=topic,
                            partition_data=(p9.PartitionProduceData(index=0, records=bomb),),
                        ),
                    ),
                )
            )
            assert answer.responses[0].partition_responses[0].error_code == code, topic
        lookup = lo8.ListOffsetsRequest(
            replica_id=-1,
            isolation_level=0,
            topics=(
                lo8.ListOffsetsTopic(
                    name=TOPIC,
                    partitions=(
                        lo8.ListOffsetsPartition(partition_index=0, timestamp=1_700_000_000_000),
                    ),
                ),
            ),
        )
        sent = [c.send(lookup) for _ in range(8)]
        for cid in sent:
            got, _ = c.receive()
            assert got == cid
    time.sleep(0.5)  # let the RSS watch see the aftermath
    env.assert_healthy()


@pytest.mark.xfail(
    strict=True,
    reason="storage does not walk records on produce (Kafka's LogValidator does): a batch "
    "whose CRC is right but whose records do not parse is stored, and consumers fail on it",
)
def test_records_of_an_accepted_batch_decode(env: FuzzEnv) -> None:
    batch = bytearray(make_batch([b"a" * 20, b"b" * 20]))
    batch[61:] = b"\xff" * (len(batch) - 61)  # the record area is garbage
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    with WireClient(env.broker.bootstrap) as c:
        answer = c.request(
            p9.ProduceRequest(
                transactional_id=None,
                acks=-1,
                timeout=timedelta(seconds=5),
                topic_data=(
                    p9.TopicProduceData(
                        name=TOPIC,
                        partition_data=(p9.PartitionProduceData(index=0, records=bytes(batch)),),
                    ),
                ),
            )
        )
    assert answer.responses[0].partition_responses[0].error_code == 2  # CORRUPT_MESSAGE
