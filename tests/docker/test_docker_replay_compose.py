"""The replay image (Spark + a JRE) on a read-only log dir and over the wire, and compose.yaml.

The replay image is big and slow to build from nothing (pyspark is built from its sdist, the JRE
comes from Debian: about 9 minutes cold, 1.4 GB), so its tests are marked ``slow`` and run with
``./scripts/test -m slow tests/docker``. The compose test runs by default.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaProducer

from tests.docker.podman import ROOT, Container, Podman, port_mode, run_broker, ulimits, unique
from tests.support.net import free_port

pytestmark = [pytest.mark.docker, pytest.mark.timeout(1500)]  # image builds


@pytest.fixture(scope="module")
def filled(podman: Podman, broker_image: str) -> Iterator[tuple[Container, str]]:
    """A broker on a volume holding topic ``orders`` (40 records over 3 partitions)."""
    volume = podman.volume()
    broker = run_broker(podman, broker_image, volume, env={"TIDELOG_NUM_PARTITIONS": "3"},
                        mode=port_mode(podman, broker_image))  # fmt: skip
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    for i in range(40):
        producer.send("orders", key=f"k{i % 7}".encode(), value=f"order-{i}".encode())
    producer.flush(30)
    producer.close()
    yield broker, volume


@pytest.mark.slow
@pytest.mark.parametrize("source", ["read-only log dir", "over the wire"])
def test_replay_writes_its_report_to_the_mounted_output(
    podman: Podman, replay_image: str, filled: tuple[Container, str], tmp_path: Path, source: str
) -> None:
    broker, volume = filled
    out = tmp_path / "out"
    out.mkdir()
    out.chmod(0o777)  # the image runs as uid 1000
    if source == "read-only log dir":  # the broker's volume, while it serves: no broker load
        where = ["--network=none", "-v", f"{volume}:/data:ro"]
        args = ["--log-dir", "/data"]
    else:
        where, args = ["--network=host"], ["--bootstrap-server", broker.bootstrap]
    run = podman("run", "--rm", *ulimits(), *where, "-v", f"{out}:/replay/out", replay_image,
                 *args, "--topics", "orders", "--output", "/replay/out", timeout=600)  # fmt: skip
    assert "replayed 40 records" in run.stdout, run.stdout + run.stderr
    assert (out / "report.html").is_file()
    assert list((out / "records").rglob("*.parquet"))


def _containers_conf(tmp: Path) -> Path:
    """podman-compose runs plain `podman`: this machine's flags go in a containers.conf."""
    limits = ulimits()[1::2]
    conf = tmp / "containers.conf"
    quoted = ", ".join(f'"{x}"' for x in limits)
    conf.write_text(
        f"[containers]\ndefault_ulimits = [{quoted}]\n"
        '[engine]\nruntime = "runc"\ncgroup_manager = "cgroupfs"\n'
    )
    return conf


def test_compose_starts_and_serves(podman: Podman, broker_image: str) -> None:
    compose = shutil.which("podman-compose") or str(Path(sys.executable).parent / "podman-compose")
    if not os.access(compose, os.X_OK):
        pytest.fail("podman-compose is missing: pip install podman-compose (./scripts/test does)")
    port, project = free_port(), unique("tidelog-compose")
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            **os.environ, "CONTAINERS_CONF": str(_containers_conf(Path(tmp))),
            "TIDELOG_IMAGE": broker_image, "TIDELOG_PORT": str(port),
            "TIDELOG_METRICS_HOST_PORT": str(free_port()),
        }  # fmt: skip
        base = [compose, "-p", project, "-f", str(ROOT / "docker" / "compose.yaml")]

        def run(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([*base, *args], env=env, capture_output=True, text=True,
                                  timeout=300)  # fmt: skip

        try:
            up = run("up", "-d", "broker")
            assert up.returncode == 0, up.stdout + up.stderr
            name = f"{project}_broker_1"
            published = podman("port", name, "9092").stdout.strip()
            assert published == f"127.0.0.1:{port}"  # loopback only by default (issue 26)
            Container(podman, name, port, "publish").wait_healthy()
            topic = f"compose-{uuid.uuid4().hex[:6]}"
            bootstrap = f"localhost:{port}"  # what compose.yaml advertises
            subprocess.run(["kcat", "-b", bootstrap, "-t", topic, "-P"], input=b"a\nb\n",
                           check=True, timeout=60)  # fmt: skip
            got = subprocess.run(["kcat", "-b", bootstrap, "-t", topic, "-C", "-e", "-q"],
                                 capture_output=True, check=True, timeout=60)  # fmt: skip
            assert sorted(got.stdout.split()) == [b"a", b"b"]
            parts = subprocess.run(
                ["kcat", "-b", bootstrap, "-L", "-t", topic],
                capture_output=True,
                text=True,
                check=True,
                timeout=60,
            )
            assert "with 3 partitions" in parts.stdout  # compose's TIDELOG_NUM_PARTITIONS
        finally:
            down = run("down", "-v", "-t", "30")
            time.sleep(0.1)
        assert down.returncode == 0, down.stdout + down.stderr
