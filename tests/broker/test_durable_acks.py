"""Durable acknowledgement, tidelog's default: an answer means the data was fsynced.

A real broker runs in this process on a real (uvloop) event loop in a thread and is spoken to
over TCP. ``os.fsync`` / ``os.fdatasync`` are wrapped so that, once the gate is armed, an fsync
of a chosen partition's segment file waits until the test releases it: the Produce answer
(acks=all and acks=1) and the OffsetCommit answer must not arrive before that.
Nothing of tidelog is mocked; only the OS call is held back.
"""

from __future__ import annotations

import asyncio
import os
import select
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import uvloop
from kio.schema.create_topics.v7 import request as ct7
from kio.schema.errors import ErrorCode
from kio.schema.incremental_alter_configs.v0 import request as iac0
from kio.schema.offset_commit.v8 import request as oc8
from kio.schema.offset_fetch.v8 import request as of8
from kio.schema.produce.v9 import request as p9

from tests.support.fault_wire import create_topic, fetch_once
from tests.support.kafka_wire import WireClient, make_batch
from tidelog.broker.app import Broker
from tidelog.config import load_broker_config

NO_ANSWER_S = 1.0  # how long an answer must stay away while its fsync is held
WAIT_S = 30.0


class FsyncGate:
    """Holds fsyncs of files whose path contains ``needle`` while armed."""

    def __init__(self) -> None:
        self.needle: str | None = None
        self.release_event = threading.Event()
        self.entered = threading.Event()  # a held fsync is waiting
        self.calls: list[str] = []  # paths of matching fsyncs, in order
        self.fail_with: OSError | None = None  # raise this instead of holding
        self._lock = threading.Lock()

    def arm(self, needle: str) -> None:
        self.needle = needle
        self.release_event.clear()
        self.entered.clear()
        self.calls.clear()

    def release(self) -> None:
        self.release_event.set()

    def wrap(self, real: Callable[[int], None]) -> Callable[[int], None]:
        def fsync(fd: int) -> None:
            needle = self.needle
            if needle is not None:
                try:
                    path = os.readlink(f"/proc/self/fd/{fd}")
                except OSError:
                    path = ""
                if needle in path and path.endswith(".log"):
                    with self._lock:
                        self.calls.append(path)
                    if self.fail_with is not None:
                        raise self.fail_with
                    self.entered.set()
                    assert self.release_event.wait(WAIT_S), "fsync held for too long"
            real(fd)

        return fsync


class ThreadBroker:
    """A ``Broker`` on a uvloop loop running in a thread."""

    def __init__(self, log_dir: Path, *overrides: str) -> None:
        self.loop = uvloop.new_event_loop()
        config = load_broker_config(
            overrides=(
                f"log.dirs={log_dir}",
                "listeners=PLAINTEXT://127.0.0.1:0",
                "offsets.topic.num.partitions=1",
                *overrides,
            )
        )
        self.broker = Broker(config)
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.run(self.broker.start())

    def run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(WAIT_S)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.broker.listeners[0].port}"

    def close(self) -> None:
        self.run(self.broker.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(WAIT_S)
        self.loop.close()


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[FsyncGate]:
    g = FsyncGate()
    monkeypatch.setattr(os, "fsync", g.wrap(os.fsync))
    monkeypatch.setattr(os, "fdatasync", g.wrap(os.fdatasync))
    yield g
    g.release()


@pytest.fixture
def broker(tmp_path: Path, gate: FsyncGate) -> Iterator[ThreadBroker]:
    b = ThreadBroker(tmp_path / "data")  # the defaults: nothing about flushing is set
    yield b
    gate.fail_with = None
    gate.needle = None
    gate.release()
    b.close()


def _produce(
    topic: str, acks: int, partitions: tuple[int, ...] = (0,), timeout_ms: int = 20_000
) -> Any:
    return p9.ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout=timedelta(milliseconds=timeout_ms),
        topic_data=(
            p9.TopicProduceData(
                name=topic,
                partition_data=tuple(
                    p9.PartitionProduceData(index=p, records=make_batch([b"v%d" % p]))
                    for p in partitions
                ),
            ),
        ),
    )


def _high_watermark(c: WireClient, topic: str) -> int:
    return int(fetch_once(c, topic, 0).high_watermark)


def _answered_within(c: WireClient, seconds: float) -> bool:
    readable, _, _ = select.select([c.sock], [], [], seconds)
    return bool(readable)


def _held_then_answered(gate: FsyncGate, c: WireClient) -> Any:
    """The request just sent is unanswered while its fsync is held, and answered after."""
    assert gate.entered.wait(WAIT_S), "no fsync of the partition started"
    assert not _answered_within(c, NO_ANSWER_S), "answered before the fsync returned"
    gate.release()
    _, answer = c.receive()
    return answer


@pytest.mark.parametrize("acks", [-1, 1])
def test_produce_answer_waits_for_the_fsync(
    broker: ThreadBroker, gate: FsyncGate, acks: int
) -> None:
    with WireClient(broker.bootstrap) as c, WireClient(broker.bootstrap) as reader:
        create_topic(c, "durable")
        gate.arm("durable-0")
        c.send(_produce("durable", acks))
        assert gate.entered.wait(WAIT_S)
        # While the fsync is held, consumers do not see the record either.
        assert _high_watermark(reader, "durable") == 0
        answer = _held_then_answered(gate, c)
        part = answer.responses[0].partition_responses[0]
        assert part.error_code == ErrorCode.none and part.base_offset == 0
        assert _high_watermark(reader, "durable") == 1


def test_multi_partition_acks_1_waits_for_every_fsync(
    broker: ThreadBroker, gate: FsyncGate
) -> None:
    """Two partitions in one request take the general path (not the one-partition one)."""
    with WireClient(broker.bootstrap) as c:
        create_topic(c, "two", partitions=2)
        gate.arm("two-1")
        c.send(_produce("two", 1, partitions=(0, 1)))
        answer = _held_then_answered(gate, c)
        parts = answer.responses[0].partition_responses
        assert [(p.index, p.error_code, p.base_offset) for p in parts] == [
            (0, ErrorCode.none, 0),
            (1, ErrorCode.none, 0),
        ]


def test_one_fsync_covers_every_waiting_request(broker: ThreadBroker, gate: FsyncGate) -> None:
    """Group commit: requests appended while an fsync runs share the next one."""
    with WireClient(broker.bootstrap) as c:
        create_topic(c, "group")
        gate.arm("group-0")
        first = c.send(_produce("group", -1))
        assert gate.entered.wait(WAIT_S)
        later = [c.send(_produce("group", -1)) for _ in range(30)]
        assert not _answered_within(c, NO_ANSWER_S)
        gate.release()
        seen = []
        for _ in range(31):
            cid, answer = c.receive()
            part = answer.responses[0].partition_responses[0]
            assert part.error_code == ErrorCode.none
            seen.append((cid, part.base_offset))
        assert seen == [(cid, i) for i, cid in enumerate([first, *later])]
        # The held fsync covered the first request; the other 30 shared what followed.
        assert len(gate.calls) <= 3, gate.calls


def test_offset_commit_answer_waits_for_the_fsync(broker: ThreadBroker, gate: FsyncGate) -> None:
    with WireClient(broker.bootstrap) as c:
        create_topic(c, "events")
        gate.arm("__consumer_offsets-0")
        c.send(
            oc8.OffsetCommitRequest(
                group_id="g",
                generation_id_or_member_epoch=-1,
                member_id="",
                group_instance_id=None,
                topics=(
                    oc8.OffsetCommitRequestTopic(
                        name="events",
                        partitions=(
                            oc8.OffsetCommitRequestPartition(
                                partition_index=0,
                                committed_offset=42,
                                committed_leader_epoch=-1,
                                committed_metadata="",
                            ),
                        ),
                    ),
                ),
            )
        )
        answer = _held_then_answered(gate, c)
        assert answer.topics[0].partitions[0].error_code == ErrorCode.none
        fetched = c.request(
            of8.OffsetFetchRequest(
                groups=(
                    of8.OffsetFetchRequestGroup(
                        group_id="g",
                        topics=(
                            of8.OffsetFetchRequestTopics(name="events", partition_indexes=(0,)),
                        ),
                    ),
                ),
                require_stable=False,
            )
        )
        assert fetched.groups[0].topics[0].partitions[0].committed_offset == 42


def test_plain_topic_answers_without_waiting(broker: ThreadBroker, gate: FsyncGate) -> None:
    """A user who opts out (flush.messages > 1) gets page-cache acknowledgements."""
    with WireClient(broker.bootstrap) as c:
        answer = c.request(
            ct7.CreateTopicsRequest(
                topics=(
                    ct7.CreatableTopic(
                        name="plain",
                        num_partitions=1,
                        replication_factor=-1,
                        assignments=(),
                        configs=(
                            ct7.CreatableTopicConfig(
                                name="flush.messages", value="9223372036854775807"
                            ),
                        ),
                    ),
                ),
                timeout=timedelta(seconds=5),
                validate_only=False,
            )
        )
        assert answer.topics[0].error_code == ErrorCode.none
        gate.arm("plain-0")
        for acks in (-1, 1):
            got = c.request(_produce("plain", acks))
            assert got.responses[0].partition_responses[0].error_code == ErrorCode.none
        assert gate.calls == []  # nothing was fsynced for these answers


def test_held_answer_times_out(broker: ThreadBroker, gate: FsyncGate) -> None:
    """An fsync slower than the request timeout: REQUEST_TIMED_OUT, never a success."""
    with WireClient(broker.bootstrap) as c:
        create_topic(c, "slow")
        gate.arm("slow-0")
        c.send(_produce("slow", -1, timeout_ms=300))
        assert gate.entered.wait(WAIT_S)
        _, answer = c.receive()  # while the fsync is still held
        assert not gate.release_event.is_set()
        part = answer.responses[0].partition_responses[0]
        assert part.error_code == ErrorCode.request_timed_out


def test_failed_fsync_is_a_storage_error(broker: ThreadBroker, gate: FsyncGate) -> None:
    with WireClient(broker.bootstrap) as c:
        create_topic(c, "broken")
        gate.fail_with = OSError(5, "Input/output error")
        gate.arm("broken-0")
        answer = c.request(_produce("broken", 1))
        part = answer.responses[0].partition_responses[0]
        assert part.error_code == ErrorCode.kafka_storage_error
        assert gate.calls


def test_switching_a_topic_to_page_cache_acks_answers_the_held_ones(
    broker: ThreadBroker, gate: FsyncGate
) -> None:
    with WireClient(broker.bootstrap) as c, WireClient(broker.bootstrap) as admin:
        create_topic(c, "switch")
        gate.arm("switch-0")
        c.send(_produce("switch", -1))
        assert gate.entered.wait(WAIT_S)
        assert not _answered_within(c, NO_ANSWER_S)
        answer = admin.request(
            iac0.IncrementalAlterConfigsRequest(
                resources=(
                    iac0.AlterConfigsResource(
                        resource_type=2,
                        resource_name="switch",
                        configs=(
                            iac0.AlterableConfig(
                                name="flush.messages",
                                config_operation=0,
                                value="9223372036854775807",
                            ),
                        ),
                    ),
                ),
                validate_only=False,
            )
        )
        assert answer.responses[0].error_code == ErrorCode.none
        _, produced = c.receive()  # the fsync is still held
        assert not gate.release_event.is_set()
        assert produced.responses[0].partition_responses[0].error_code == ErrorCode.none
