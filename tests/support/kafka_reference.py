"""Apache Kafka itself (from the jars of ``tests/jvm/kafka``) as a reference broker.

One node in KRaft combined mode (broker and controller in one JVM), its storage formatted first
(``kafka.tools.StorageTool format --standalone``, what ``kafka-storage.sh format`` runs), with
the same listener shape as tidelog's fixture: one ``PLAINTEXT://127.0.0.1:<free port>``
listener (the controller listener is a second port on 127.0.0.1), one log dir, every internal
topic with replication factor 1. The JVM gets a small heap (512 MiB) and a serial collector.

The session fixture ``kafka_broker`` of ``tests/conftest.py`` hands one out.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from tests.support.net import free_port

__all__ = ("JVM_OPTS", "KafkaProcess", "log4j_config", "run_java", "stop_jvm")

# A small heap and a quick start: this machine has 2 cores shared by many test runs.
JVM_OPTS = ("-Xms64m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss1m")
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 60.0
READY = "Kafka Server started"
CLUSTER_ID = "dGlkZWxvZ3JlZmVyZW5jZQ"  # any 16 bytes in URL-safe base64 ("tidelogreference")

LOG4J2 = """\
status = error
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.out.ref = out
logger.started.name = kafka.server.KafkaRaftServer
logger.started.level = info
"""


def log4j_config(directory: Path, level: str = "WARN") -> Path:
    """A log4j2 properties file in ``directory``: ``level`` to stdout, plus the ready line."""
    path = directory / "log4j2.properties"
    path.write_text(LOG4J2.format(level=level))
    return path


def run_java(
    classpath: str,
    main: str,
    *args: str,
    log4j: Path | None = None,
    timeout_s: float = 180.0,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Run a Java ``main`` class to its end (tools: StorageTool, DumpLogSegments, ...)."""
    argv = ["java", *JVM_OPTS, "-cp", classpath]
    if log4j is not None:
        argv.append(f"-Dlog4j2.configurationFile={log4j}")
    result = subprocess.run([*argv, main, *args], capture_output=True, text=True, timeout=timeout_s)
    if check and result.returncode != 0:
        raise RuntimeError(
            f"{main} {' '.join(args)} exited {result.returncode}:\n"
            f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
        )
    return result


def stop_jvm(proc: subprocess.Popen[bytes] | None, timeout: float = STOP_TIMEOUT_S) -> int:
    """SIGTERM ``proc`` (a JVM this module's callers started), SIGKILL after ``timeout``;
    its exit code (0 when it never started)."""
    if proc is None:
        return 0
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return int(proc.returncode)


class KafkaProcess:
    """One Apache Kafka node (KRaft combined mode) in a JVM subprocess."""

    def __init__(
        self, classpath: str, base: Path, overrides: Mapping[str, str] | None = None
    ) -> None:
        self.classpath = classpath
        self.base = base
        self.host = "127.0.0.1"
        self.port = free_port()
        self.controller_port = free_port()
        self.log_dir = base / "data"
        self.overrides = dict(overrides or {})
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = base / "kafka.log"

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def properties(self) -> dict[str, str]:
        return {
            "process.roles": "broker,controller",
            "node.id": "1",
            "listeners": (
                f"PLAINTEXT://{self.host}:{self.port},CONTROLLER://{self.host}:{self.controller_port}"
            ),
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "controller.quorum.bootstrap.servers": f"{self.host}:{self.controller_port}",
            "log.dirs": str(self.log_dir),
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "num.network.threads": "2",
            "num.io.threads": "2",
            "background.threads": "2",
            "log.cleaner.threads": "1",
            # checkpoints written soon, for the tests that read Kafka's log dir
            "replica.high.watermark.checkpoint.interval.ms": "500",
            "log.flush.start.offset.checkpoint.interval.ms": "500",
            **self.overrides,
        }

    def start(self) -> KafkaProcess:
        """Format the storage (first start only), start the JVM and wait for its ready line."""
        self.base.mkdir(parents=True, exist_ok=True)
        config = self.base / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        log4j = log4j_config(self.base)
        log_from = len(self.log_text())  # the ready line of this start, not of an earlier one
        if not (self.log_dir / "meta.properties").exists():
            run_java(
                self.classpath,
                "kafka.tools.StorageTool",
                "format",
                "--standalone",
                "-t",
                CLUSTER_ID,
                "-c",
                str(config),
                log4j=log4j,
            )
        env = dict(os.environ)
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(
                [
                    "java",
                    *JVM_OPTS,
                    f"-Dlog4j2.configurationFile={log4j}",
                    "-Djava.awt.headless=true",
                    "-cp",
                    self.classpath,
                    "kafka.Kafka",
                    str(config),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if READY in self.log_text()[log_from:]:
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"Kafka exited with {self.proc.returncode} before it was ready:\n"
                    + self.log_text()[-8000:]
                )
            time.sleep(0.1)
        self.stop()
        raise RuntimeError("Kafka was not ready in time:\n" + self.log_text()[-8000:])

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM (Kafka's controlled shutdown), SIGKILL after ``timeout``; the exit code."""
        return stop_jvm(self.proc, timeout)

    def kill(self) -> None:
        """SIGKILL: no shutdown work at all (restart tests start it again on the same ports and
        log dir with ``start``)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
