"""Kafka Connect in distributed mode (tests/jvm/connect) with tidelog as its Kafka: the worker
makes its compacted config, offset and status topics on tidelog, joins its group (the ``connect``
group protocol), and runs a connector posted to its REST API (MirrorMaker 2's heartbeat
connector, writing to tidelog), whose status and config survive in tidelog's topics.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

from tests.support.broker_process import BrokerProcess
from tests.support.jvm import jvm_set_classpath
from tests.support.kafka_reference import JVM_OPTS, log4j_config, stop_jvm
from tests.support.migration import end_offsets
from tests.support.net import free_port

pytestmark = pytest.mark.integration

TOPICS = {"config": "dc-configs", "offset": "dc-offsets", "status": "dc-status"}


def _rest(port: int, path: str, body: dict[str, Any] | None = None) -> Any:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="GET" if body is None else "POST",
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.loads(answer.read() or b"null")


def _until(what: str, check: Any, log: Path, timeout: float = 180.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = check()
        except OSError:
            value = None
        if value:
            return value
        time.sleep(1)
    raise AssertionError(f"timed out waiting for {what}:\n{log.read_text()[-5000:]}")


def test_connect_distributed_on_tidelog(broker_factory: Any, tmp_path: Path) -> None:
    tidelog: BrokerProcess = broker_factory({"group.initial.rebalance.delay.ms": "0"})
    port = free_port()
    settings = {
        "bootstrap.servers": tidelog.bootstrap,
        "group.id": "dc-cluster",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "config.storage.topic": TOPICS["config"],
        "offset.storage.topic": TOPICS["offset"],
        "status.storage.topic": TOPICS["status"],
        "config.storage.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "offset.flush.interval.ms": "1000",
        "listeners": f"http://127.0.0.1:{port}",
        "plugin.discovery": "only_scan",
    }
    worker = tmp_path / "worker.properties"
    worker.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    log = tmp_path / "connect.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                "java",
                *JVM_OPTS,
                f"-Dlog4j2.configurationFile={log4j_config(tmp_path)}",
                "-cp",
                jvm_set_classpath("connect"),
                "org.apache.kafka.connect.cli.ConnectDistributed",
                str(worker),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        # The REST API answers before the worker has made its topics and joined its group; GET
        # /health (KIP-1017) answers 200 "healthy" only once the worker's start-up is complete.
        _until(
            "the worker's start-up (GET /health)",
            lambda: _rest(port, "/health").get("status") == "healthy",
            log,
        )
        assert _rest(port, "/connectors") == []
        admin = AdminClient({"bootstrap.servers": tidelog.bootstrap})
        resources = [ConfigResource(ConfigResource.Type.TOPIC, t) for t in TOPICS.values()]
        for future in admin.describe_configs(resources).values():
            assert future.result(30)["cleanup.policy"].value == "compact"
        _rest(
            port,
            "/connectors",
            {
                "name": "heartbeats",
                "config": {
                    "connector.class": "org.apache.kafka.connect.mirror.MirrorHeartbeatConnector",
                    "source.cluster.alias": "here",
                    "target.cluster.alias": "tidelog",
                    "target.cluster.bootstrap.servers": tidelog.bootstrap,
                    "emit.heartbeats.interval.seconds": "1",
                    "heartbeats.topic.replication.factor": "1",
                    "tasks.max": "1",
                },
            },
        )

        def running() -> bool:
            status = _rest(port, "/connectors/heartbeats/status")
            tasks = status.get("tasks", [])
            return bool(
                status["connector"]["state"] == "RUNNING"
                and tasks
                and all(t["state"] == "RUNNING" for t in tasks)
            )

        _until("the connector to run", running, log)
        _until(
            "heartbeats in tidelog",
            lambda: end_offsets(tidelog.bootstrap, "heartbeats", 1).get(("heartbeats", 0), 0) > 2,
            log,
        )
        # the worker's state is in tidelog's compacted topics
        # (Connect's defaults: 1 config partition, 5 status partitions)
        for topic, partitions in ((TOPICS["config"], 1), (TOPICS["status"], 5)):
            assert sum(end_offsets(tidelog.bootstrap, topic, partitions).values()) > 0
    finally:
        stop_jvm(proc)
