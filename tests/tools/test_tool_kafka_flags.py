"""Kafka's tool habits and one-line errors, against a real broker (issue 14)."""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.net import free_port as _free_port
from tests.tools.tools_fixtures import RunTool

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ("topics", "produce", "consume", "groups", "get-offsets", "dump-log", "probe", "replay",
         "config-reference")  # fmt: skip


def _b(broker: Any) -> list[str]:
    return ["--bootstrap-server", broker.bootstrap]


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "tidelog", *args]


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")


@pytest.mark.parametrize("tool", TOOLS)
def test_every_tool_has_version(tidelog: RunTool, tool: str) -> None:
    r = tidelog(tool, "--version")
    assert r.code == 0 and r.out.startswith("tidelog "), (r.out, r.err)


def test_broker_error_is_one_line_in_kafkas_words(tidelog: RunTool, module_broker: Any) -> None:
    r = tidelog("topics", *_b(module_broker), "--create", "--topic", "kf-rf",
                "--replication-factor", "3")  # fmt: skip
    assert r.code == 1
    assert r.err.count("\n") == 1, r.err
    assert r.err.startswith("Error while executing topic command : ")
    assert "replication factor of 3" in r.err and "Request" not in r.err


def test_refused_connection_is_reported_at_once(tidelog: RunTool) -> None:
    port = _free_port()
    started = time.monotonic()
    r = tidelog("topics", "--bootstrap-server", f"127.0.0.1:{port}", "--list")
    assert time.monotonic() - started < 5
    assert r.code == 1 and "connection refused" in r.err, r.err
    started = time.monotonic()
    r = tidelog("consume", "--bootstrap-server", f"127.0.0.1:{port}", "--topic", "t")
    assert time.monotonic() - started < 5
    assert r.code == 1 and "connection refused" in r.err, r.err


def test_delete_of_a_pattern_refuses_internal_topics(tidelog: RunTool, module_broker: Any) -> None:
    b = _b(module_broker)
    for name in ("kfdel-a", "kfdel-b"):
        assert tidelog("topics", *b, "--create", "--topic", name).code == 0
    # Make sure __consumer_offsets exists: the first group lookup (FindCoordinator) creates it.
    tidelog("groups", *b, "--describe", "--group", "kfdel-group")
    r = tidelog("topics", *b, "--delete", "--topic", "(kfdel-.*|__consumer_offsets)")
    assert r.code == 1
    assert "__consumer_offsets is a kafka internal topic" in r.err, r.err
    left = tidelog("topics", *b, "--list").lines
    assert "kfdel-a" not in left and "kfdel-b" not in left
    assert "__consumer_offsets" in left


def test_describe_filters(tidelog: RunTool, module_broker: Any) -> None:
    b = _b(module_broker)
    assert tidelog("topics", *b, "--create", "--topic", "kfd-plain").code == 0
    assert tidelog("topics", *b, "--create", "--topic", "kfd-set", "--config",
                   "retention.ms=1000").code == 0  # fmt: skip
    r = tidelog("topics", *b, "--describe", "--topic", "kfd-.*", "--topics-with-overrides")
    assert r.code == 0, r.err
    assert len(r.lines) == 1 and r.lines[0].startswith("Topic: kfd-set\t")
    assert "retention.ms=1000" in r.lines[0]
    r = tidelog("topics", *b, "--describe", "--under-replicated-partitions")
    assert r.code == 0 and r.out == "", (r.out, r.err)


def test_command_config_is_used_by_every_client(
    tidelog: RunTool, module_broker: Any, tmp_path: Path
) -> None:
    b = _b(module_broker)
    cfg = tmp_path / "client.properties"
    cfg.write_text("security.protocol=PLAINTEXT\nrequest.timeout.ms=15000\nclient.id=kf-cc\n")
    assert tidelog("topics", *b, "--command-config", str(cfg), "--create", "--topic",
                   "kf-cc").code == 0  # fmt: skip
    assert tidelog("produce", *b, "--command-config", str(cfg), "--topic", "kf-cc",
                   stdin=b"x\n").code == 0  # fmt: skip
    c = tidelog("consume", *b, "--command-config", str(cfg), "--topic", "kf-cc",
                "--from-beginning", "--max-messages", "1", "--timeout-ms", "10000")  # fmt: skip
    assert c.code == 0 and c.lines == ["x"], c.err
    assert tidelog("get-offsets", *b, "--command-config", str(cfg), "--topic",
                   "kf-cc").lines == ["kf-cc:0:1"]  # fmt: skip
    bad = tmp_path / "bad.properties"
    bad.write_text("request.timeout.mss=1\n")
    r = tidelog("topics", *b, "--command-config", str(bad), "--list")
    assert r.code == 2 and "request.timeout.mss" in r.err
    sasl = tmp_path / "sasl.properties"
    sasl.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config="
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" '
        'password="very-secret";\n'
    )
    # The settings reach kafka-python: it now speaks SASL, which this broker does not serve.
    r = tidelog("topics", *b, "--command-config", str(sasl), "--list", "--timeout-ms", "3000")
    assert r.code != 0 and "very-secret" not in r.err + r.out


def test_consume_missing_topic_same_with_and_without_group(
    tidelog: RunTool, module_broker: Any
) -> None:
    b = _b(module_broker)
    plain = tidelog("consume", *b, "--topic", "kf-missing", "--timeout-ms", "1500")
    grouped = tidelog("consume", *b, "--topic", "kf-missing", "--group", "kf-mg",
                      "--timeout-ms", "1500")  # fmt: skip
    assert plain.code == grouped.code == 1
    assert plain.err == grouped.err
    assert "topic 'kf-missing' does not exist" in plain.err
    assert "kf-missing" not in tidelog("topics", *b, "--list").lines


def test_consume_include_deserializers_and_epoch(
    tidelog: RunTool, module_broker: Any, tmp_path: Path
) -> None:
    from kafka import KafkaProducer

    b = _b(module_broker)
    for name in ("kfi-one", "kfi-two", "kfx-other"):
        assert tidelog("topics", *b, "--create", "--topic", name).code == 0
    producer = KafkaProducer(bootstrap_servers=module_broker.bootstrap)
    producer.send("kfi-one", key=struct.pack(">q", 42), value=b"\x00ab")
    producer.send("kfi-two", key=struct.pack(">q", -7), value=b"cd")
    producer.send("kfx-other", key=struct.pack(">q", 1), value=b"no")
    producer.flush()
    producer.close()
    r = tidelog(
        "consume", *b, "--include", "kfi-.*", "--from-beginning", "--max-messages", "2",
        "--timeout-ms", "10000", "--property", "print.key=true", "--property", "print.epoch=true",
        "--key-deserializer", "org.apache.kafka.common.serialization.LongDeserializer",
        "--property", "value.deserializer=org.apache.kafka.common.serialization.BytesDeserializer",
    )  # fmt: skip
    assert r.code == 0, r.err
    assert sorted(r.lines) == ["LeaderEpoch:0\t-7\tcd", "LeaderEpoch:0\t42\t\\x00ab"]
    fmt = tmp_path / "formatter.properties"
    fmt.write_text("print.key=true\nkey.deserializer=LongDeserializer\nkey.separator=|\n")
    r = tidelog("consume", *b, "--topic", "kfi-two", "--from-beginning", "--max-messages", "1",
                "--formatter-config", str(fmt), "--timeout-ms", "10000")  # fmt: skip
    assert r.lines == ["-7|cd"], r.err
    clash = tidelog("consume", *b, "--topic", "kfi-two", "--group", "a", "--consumer-property",
                    "group.id=b")  # fmt: skip
    assert clash.code == 2 and "do not match" in clash.err
    bad = tidelog("consume", *b, "--topic", "kfi-two", "--from-beginning", "--max-messages",
                  "1", "--value-deserializer", "LongDeserializer",
                  "--timeout-ms", "10000")  # fmt: skip
    assert bad.code == 1 and "long deserializer" in bad.err


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_consume_config_file_and_signal_count(
    tidelog: RunTool, module_broker: Any, tmp_path: Path, sig: int
) -> None:
    b = _b(module_broker)
    topic, group = f"kf-sig-{sig}", f"kf-sig-group-{sig}"
    assert tidelog("produce", *b, "--topic", topic, stdin=b"1\n2\n3\n").code == 0
    cfg = tmp_path / "consumer.properties"
    cfg.write_text(f"group.id={group}\nauto.offset.reset=earliest\n")
    proc = subprocess.Popen(
        _cli("consume", *b, "--topic", topic, "--consumer.config", str(cfg)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
    )
    assert proc.stdout is not None
    lines = [proc.stdout.readline() for _ in range(3)]
    assert lines == [b"1\n", b"2\n", b"3\n"]
    proc.send_signal(sig)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + sig  # 143 on SIGTERM, 130 on Ctrl-C
    assert "Processed a total of 3 messages" in err.decode(), err
    # group.id from --consumer.config: a group member that commits, as Kafka's consumer does
    described = tidelog("groups", *b, "--describe", "--group", group)
    rows = [line.split() for line in described.lines if line.startswith(f"{group} ")]
    assert rows and rows[0][:4] == [group, topic, "0", "3"], described.out


def test_produce_flags(tidelog: RunTool, module_broker: Any, tmp_path: Path) -> None:
    b = _b(module_broker)
    cfg = tmp_path / "producer.properties"
    cfg.write_text("linger.ms=0\nacks=1\n")
    r = tidelog("produce", *b, "--topic", "kf-prod", "--producer.config", str(cfg), "--sync",
                "--request-required-acks", "1", "--reader-property", "parse.key=true",
                "--producer-property", "batch.size=1000", stdin=b"k1\tv1\nk2\tv2\n")  # fmt: skip
    assert r.code == 0, r.err
    c = tidelog("consume", *b, "--topic", "kf-prod", "--from-beginning", "--max-messages", "2",
                "--property", "print.key=true", "--timeout-ms", "10000")  # fmt: skip
    assert c.lines == ["k1\tv1", "k2\tv2"], c.err
    bad = tidelog("produce", *b, "--topic", "kf-prod", "--producer-property", "nope.ms=1",
                  stdin=b"x\n")  # fmt: skip
    assert bad.code == 2 and "nope.ms" in bad.err


def test_get_offsets_sorted_by_partition_number(tidelog: RunTool, module_broker: Any) -> None:
    b = _b(module_broker)
    assert tidelog("topics", *b, "--create", "--topic", "kf-go", "--partitions", "12").code == 0
    r = tidelog("get-offsets", *b, "--topic", "kf-go")
    assert r.lines == [f"kf-go:{p}:0" for p in range(12)]


def test_groups_kafka_views_and_resets(
    tidelog: RunTool, module_broker: Any, tmp_path: Path
) -> None:
    b = _b(module_broker)
    assert tidelog("produce", *b, "--topic", "kf-grp", stdin=b"a\nb\nc\n").code == 0
    c = tidelog("consume", *b, "--topic", "kf-grp", "--group", "kf-g", "--from-beginning",
                "--max-messages", "3", "--timeout-ms", "20000")  # fmt: skip
    assert c.code == 0, c.err

    listed = tidelog("groups", *b, "--list", "--state")
    assert listed.lines[0].split() == ["GROUP", "STATE"]
    assert ["kf-g", "Empty"] in [line.split() for line in listed.lines]
    only_stable = tidelog("groups", *b, "--list", "--state", "Stable")
    assert "kf-g" not in only_stable.out

    members = tidelog("groups", *b, "--describe", "--group", "kf-g", "--members", "--verbose")
    assert members.code == 0 and "has no active members" in members.out
    offsets = tidelog("groups", *b, "--describe", "--group", "kf-g", "--offsets")
    row = [line.split() for line in offsets.lines if line.startswith("kf-g ")]
    assert row and row[0][:6] == ["kf-g", "kf-grp", "0", "3", "3", "0"]

    # --by-duration: an hour ago is before every record -> offset 0; exported as CSV.
    exported = tidelog("groups", *b, "--reset-offsets", "--group", "kf-g", "--topic", "kf-grp",
                       "--by-duration", "PT1H", "--export", "--dry-run")  # fmt: skip
    assert exported.code == 0 and exported.lines == ["kf-grp,0,0"], exported.err
    plan = tmp_path / "plan.csv"
    plan.write_text("kf-grp,0,1\n")
    done = tidelog("groups", *b, "--reset-offsets", "--group", "kf-g", "--from-file",
                   str(plan), "--execute")  # fmt: skip
    assert done.code == 0 and done.lines[-1].split() == ["kf-g", "kf-grp", "0", "1"], done.err
    offsets = tidelog("groups", *b, "--describe", "--group", "kf-g")
    assert [line.split()[:6] for line in offsets.lines if line.startswith("kf-g ")] == [
        ["kf-g", "kf-grp", "0", "1", "3", "2"]
    ]
    assert tidelog("groups", *b, "--reset-offsets", "--group", "kf-g", "--topic", "kf-grp",
                   "--by-duration", "an hour").code == 2  # fmt: skip

    deleted = tidelog("groups", *b, "--delete-offsets", "--group", "kf-g", "--topic", "kf-grp")
    assert deleted.code == 0, deleted.err
    assert "Request succeed for deleting offsets with topic kf-grp group kf-g" in deleted.out
    assert ["kf-grp", "0", "Successful"] in [line.split() for line in deleted.lines]
    offsets = tidelog("groups", *b, "--describe", "--group", "kf-g")
    assert not [line for line in offsets.lines if line.startswith("kf-g ")]


def test_members_verbose_shows_the_assignment(tidelog: RunTool, module_broker: Any) -> None:
    from kafka import KafkaConsumer

    b = _b(module_broker)
    assert tidelog("topics", *b, "--create", "--topic", "kf-mem", "--partitions", "2").code == 0
    consumer = KafkaConsumer("kf-mem", bootstrap_servers=module_broker.bootstrap,
                             group_id="kf-mem-g", client_id="kf-mem-client")  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(timeout_ms=200)
        r = tidelog("groups", *b, "--describe", "--group", "kf-mem-g", "--members", "--verbose")
        assert r.code == 0, r.err
        header = next(line for line in r.lines if line.startswith("GROUP"))
        assert header.split()[-1] == "ASSIGNMENT"
        row = next(line for line in r.lines if line.startswith("kf-mem-g "))
        assert "kf-mem-client" in row and row.endswith("kf-mem(0,1)")
        state = tidelog("groups", *b, "--describe", "--group", "kf-mem-g", "--state")
        assert "Stable" in state.out
    finally:
        consumer.close()


def test_dump_log_offsets_decoder_and_active_segment_note(
    tidelog: RunTool, module_broker: Any
) -> None:
    b = _b(module_broker)
    lines = b"".join(b"%04d" % i + b"x" * 200 + b"\n" for i in range(100))
    assert tidelog("produce", *b, "--topic", "kf-dump", "--sync", stdin=lines).code == 0
    c = tidelog("consume", *b, "--topic", "kf-dump", "--group", "kf-dump-g", "--from-beginning",
                "--max-messages", "1", "--timeout-ms", "20000")  # fmt: skip
    assert c.code == 0, c.err
    logs = sorted(module_broker.log_dir.glob("__consumer_offsets-*/*.log"))
    found = []
    for log in logs:
        r = tidelog("dump-log", "--files", str(log), "--offsets-decoder")
        found += [line for line in r.lines if '"group":"kf-dump-g"' in line]
    assert any(
        'key: {"type":"1","data":{"group":"kf-dump-g","topic":"kf-dump","partition":0}}' in line
        and '"offset":1,' in line
        for line in found
    ), found
    assert any('key: {"type":"2","data":{"group":"kf-dump-g"}}' in line for line in found)

    index = next(module_broker.log_dir.glob("kf-dump-0/*.index"))
    r = tidelog("dump-log", "--files", str(index))
    assert "belongs to the active segment" in r.err
    # A rolled segment (or any index whose entries are all on disk) gets no note.
    other = next(module_broker.log_dir.glob("kf-grp-0/*.index"), None)
    if other is not None:
        assert "active segment" not in tidelog("dump-log", "--files", str(other)).err


def test_dump_log_transaction_log_decoder(tidelog: RunTool, module_broker: Any) -> None:
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": module_broker.bootstrap, "transactional.id": "kf-dump-txn"}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("kf-txn-topic", b"v", partition=0)
    producer.commit_transaction(30)
    logs = sorted(module_broker.log_dir.glob("__transaction_state-*/*.log"))
    assert logs
    found = []
    for log in logs:
        r = tidelog("dump-log", "--files", str(log), "--transaction-log-decoder")
        assert r.code == 0, r.err
        found += [line for line in r.lines if "kf-dump-txn" in line]
    key = 'key: {"type":"0","data":{"transactionalId":"kf-dump-txn"}} payload: '
    assert all(key in line for line in found), found
    states = [json.loads(line.split(key, 1)[1])["data"] for line in found]
    # Empty after InitProducerId, Ongoing with the partition, PrepareCommit, CompleteCommit.
    statuses = [s["transactionStatus"] for s in states]
    assert statuses == ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit"], statuses
    assert any(
        s["transactionStatus"] == "Ongoing"
        and s["transactionPartitions"] == [{"topic": "kf-txn-topic", "partitionIds": [0]}]
        for s in states
    ), states
    assert states[0]["transactionPartitions"] is None or states[0]["transactionPartitions"] == []
    assert {s["producerId"] for s in states} == {states[0]["producerId"]}
    assert all(s["transactionTimeoutMs"] > 0 for s in states)
