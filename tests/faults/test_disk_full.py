"""A full disk (ENOSPC) on a small tmpfs: produce fails cleanly, reads go on, space comes back.

The broker's log dir is an 8 MiB tmpfs. Once a filler file has taken the rest of it, a produce
is answered KAFKA_STORAGE_ERROR, and nothing partial stays in the segment (every byte of the
file is a whole, acknowledged batch); fetch, Metadata and ApiVersions keep answering; produce
works again as soon as the filler is deleted, at the next offset; a restart finds every
acknowledged batch. Skipped when a tmpfs cannot be mounted (not root, no mount permission).
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.schema.api_versions.v3 import request as av3
from kio.schema.metadata.v12 import request as md12

from tests.support.broker_process import BrokerProcess
from tests.support.fault_wire import (
    KAFKA_STORAGE_ERROR,
    create_topic,
    produce_answer,
    read_partition,
)
from tests.support.kafka_wire import WireClient, make_batch
from tidelog.storage.batch import iter_batches

SETTINGS = {
    "log.segment.bytes": "65536",  # rolls happen while the disk is full too
    "log.index.size.max.bytes": "65536",
    "log.flush.interval.messages": "1",
    "offsets.topic.num.partitions": "1",
    "auto.create.topics.enable": "false",
}
TOPIC = "full"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mount_point)],
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"cannot mount a tmpfs: {exc}")
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], capture_output=True, timeout=30)


def _fill(path: Path) -> int:
    """Write ``path`` until the file system is full; returns the bytes written."""
    written = 0
    chunk = b"\xab" * 65536
    with open(path, "wb", buffering=0) as f:
        while True:
            try:
                written += f.write(chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
                if len(chunk) == 1:
                    return written
                chunk = chunk[: len(chunk) // 2]


def _batch(i: int) -> tuple[bytes, list[bytes]]:
    values = [f"full:{i}:{j}:".encode() + os.urandom(400).hex().encode() for j in range(4)]
    return make_batch(values), values


def _segment_bytes_are_whole_batches(part_dir: Path) -> int:
    """Every segment file parses as whole batches; returns the number of batches."""
    count = 0
    for path in sorted(part_dir.glob("*.log")):
        count += sum(1 for _ in iter_batches(path.read_bytes()))
    return count


def test_disk_full_fails_produce_cleanly_and_recovers(small_disk: Path) -> None:
    (small_disk / "data").mkdir()
    data = small_disk.parent / "data"  # the broker's own log file goes next to it, off the tmpfs
    data.symlink_to(small_disk / "data")
    broker = BrokerProcess(data, SETTINGS)
    broker.start()
    try:
        acked: list[list[bytes]] = []
        with WireClient(broker.bootstrap) as c:
            create_topic(c, TOPIC)
            for i in range(10):
                batch, values = _batch(i)
                answer = produce_answer(c, TOPIC, batch)
                assert answer.error_code == 0 and answer.base_offset == 4 * i
                acked.append(values)
            filler = small_disk / "filler"
            filled = _fill(filler)
            assert filled > 0
            errors = []
            for i in range(len(acked), len(acked) + 60):  # the last pages may still take some
                batch, values = _batch(i)
                answer = produce_answer(c, TOPIC, batch)
                if answer.error_code == 0:
                    assert answer.base_offset == 4 * len(acked)
                    acked.append(values)
                else:
                    errors.append(answer.error_code)
            assert errors and set(errors) == {KAFKA_STORAGE_ERROR}, errors
            # Nothing partial stayed; every acknowledged batch is served; the broker answers.
            part_dir = data / f"{TOPIC}-0"
            assert _segment_bytes_are_whole_batches(part_dir) == len(acked)
            view = read_partition(broker.bootstrap, TOPIC)
            assert view.error == 0 and not view.bad_crc
            assert [list(b.values) for b in view.batches] == acked
            assert view.high_watermark == 4 * len(acked)
            assert (
                c.request(
                    av3.ApiVersionsRequest(client_software_name="t", client_software_version="1")
                ).error_code
                == 0
            )
            topics = c.request(
                md12.MetadataRequest(
                    topics=(md12.MetadataRequestTopic(topic_id=None, name=TOPIC),),
                    allow_auto_topic_creation=False,
                    include_topic_authorized_operations=False,
                )
            ).topics
            assert topics[0].error_code == 0
            assert broker.running
            # Space comes back: produce works again, at the next offset.
            filler.unlink()
            for i in range(len(acked), len(acked) + 5):
                batch, values = _batch(i)
                answer = produce_answer(c, TOPIC, batch)
                assert answer.error_code == 0 and answer.base_offset == 4 * len(acked), answer
                acked.append(values)
        assert broker.stop() == 0, broker.log_text()[-3000:]
        broker.start()
        view = read_partition(broker.bootstrap, TOPIC)
        assert [list(b.values) for b in view.batches] == acked
        assert "KAFKA_STORAGE_ERROR" in broker.log_text()
    finally:
        if broker.running:
            broker.stop()
