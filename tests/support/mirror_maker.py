"""MirrorMaker 2 (Kafka Connect's ``connect-mirror``, from ``tests/jvm/connect``) between two
brokers on 127.0.0.1, in its dedicated mode (``org.apache.kafka.connect.mirror.MirrorMaker``:
a Connect cluster of its own, its config, offset and status topics on the target).

``MirrorMaker2(classpath, base, clusters, flows)`` copies the topics of each flow (same names:
``IdentityReplicationPolicy``), their configs and the groups' committed offsets (translated
through its offset syncs, one per record: ``offset.lag.max=0``), every second.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support.kafka_reference import JVM_OPTS, log4j_config, stop_jvm

__all__ = ("MirrorMaker2",)

MAIN = "org.apache.kafka.connect.mirror.MirrorMaker"


class MirrorMaker2:
    def __init__(
        self,
        classpath: str,
        base: Path,
        clusters: dict[str, str],
        flows: dict[tuple[str, str], tuple[str, str]],
    ) -> None:
        """``clusters``: alias -> bootstrap; ``flows``: (source, target) -> (topics regex,
        groups regex). Aliases name MM2's internal topics: use new ones for a fresh start."""
        self.classpath = classpath
        self.base = base
        self.settings = {
            "clusters": ", ".join(clusters),
            **{f"{alias}.bootstrap.servers": b for alias, b in clusters.items()},
            "replication.policy.class": (
                "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
            ),
            "sync.topic.configs.enabled": "true",
            "sync.group.offsets.enabled": "true",
            "sync.group.offsets.interval.seconds": "1",
            "emit.checkpoints.interval.seconds": "1",
            "emit.heartbeats.interval.seconds": "1",
            "refresh.topics.interval.seconds": "1",
            "refresh.groups.interval.seconds": "1",
            "sync.topic.configs.interval.seconds": "1",
            "offset.lag.max": "0",
            "tasks.max": "1",
            "replication.factor": "1",
            "checkpoints.topic.replication.factor": "1",
            "heartbeats.topic.replication.factor": "1",
            "offset-syncs.topic.replication.factor": "1",
            "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            "config.storage.replication.factor": "1",
            "offset.flush.interval.ms": "1000",
        }
        for a in clusters:
            for b in clusters:
                if a != b:
                    self.settings[f"{a}->{b}.enabled"] = str((a, b) in flows).lower()
        for (a, b), (topics, groups) in flows.items():
            self.settings[f"{a}->{b}.topics"] = topics
            self.settings[f"{a}->{b}.groups"] = groups
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = base / "mm2.log"

    def start(self) -> MirrorMaker2:
        self.base.mkdir(parents=True, exist_ok=True)
        config = self.base / "mm2.properties"
        config.write_text("".join(f"{k} = {v}\n" for k, v in self.settings.items()))
        log4j = log4j_config(self.base, level="WARN")
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(
                [
                    "java",
                    *JVM_OPTS,
                    f"-Dlog4j2.configurationFile={log4j}",
                    "-cp",
                    self.classpath,
                    MAIN,
                    str(config),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return self

    def stop(self, timeout: float = 60.0) -> None:
        stop_jvm(self.proc, timeout)

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
