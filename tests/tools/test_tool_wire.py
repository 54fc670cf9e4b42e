"""The wire tools against a real tidelog broker (one broker for the module; distinct topics)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.tools.tools_fixtures import RunTool

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def _b(broker: Any) -> list[str]:
    return ["--bootstrap-server", broker.bootstrap]


def test_topics_lifecycle(tidelog: RunTool, module_broker: Any) -> None:
    b = _b(module_broker)
    r = tidelog(
        "topics",
        *b,
        "--create",
        "--topic",
        "tl-orders",
        "--partitions",
        "3",
        "--config",
        "retention.ms=86400000",
        "--config",
        "cleanup.policy=compact",
    )
    assert (r.code, r.out) == (0, "Created topic tl-orders.\n"), r.err
    again = tidelog("topics", *b, "--create", "--topic", "tl-orders")
    assert again.code == 1 and "already exists" in again.err and "--if-not-exists" in again.err
    assert tidelog("topics", *b, "--create", "--topic", "tl-orders", "--if-not-exists").code == 0
    assert "tl-orders" in tidelog("topics", *b, "--list").lines

    d = tidelog("topics", *b, "--describe", "--topic", "tl-orders")
    assert d.code == 0, d.err
    head = d.lines[0].split("\t")
    assert head[0] == "Topic: tl-orders" and head[1].startswith("TopicId: ")
    assert head[2:4] == ["PartitionCount: 3", "ReplicationFactor: 1"]
    assert head[4] == "Configs: cleanup.policy=compact,retention.ms=86400000"
    assert d.lines[1].split("\t") == [
        "",
        "Topic: tl-orders",
        "Partition: 0",
        "Leader: 1",
        "Replicas: 1",
        "Isr: 1",
        "LogStartOffset: 0",
        "HighWatermark: 0",
    ]
    assert len(d.lines) == 4

    r = tidelog(
        "topics",
        *b,
        "--alter",
        "--topic",
        "tl-orders",
        "--partitions",
        "4",
        "--config",
        "retention.ms=1000",
    )
    assert r.code == 0, r.err
    d = tidelog("topics", *b, "--describe", "--topic", "tl-ord.*")
    assert "PartitionCount: 4" in d.lines[0] and "retention.ms=1000" in d.lines[0]
    r = tidelog("topics", *b, "--alter", "--topic", "tl-orders", "--delete-config", "retention.ms")
    assert r.code == 0, r.err
    d = tidelog("topics", *b, "--describe", "--topic", "tl-orders")
    assert d.lines[0].endswith("Configs: cleanup.policy=compact")

    assert tidelog("topics", *b, "--delete", "--topic", "tl-orders").code == 0
    assert "tl-orders" not in tidelog("topics", *b, "--list").lines
    gone = tidelog("topics", *b, "--describe", "--topic", "tl-orders")
    assert gone.code == 1 and "does not exist" in gone.err
    assert tidelog("topics", *b, "--delete", "--topic", "tl-orders", "--if-exists").code == 0


def test_topics_usage_errors(tidelog: RunTool, module_broker: Any) -> None:
    b = _b(module_broker)
    assert tidelog("topics", *b, "--create").code == 2
    assert tidelog("topics", *b, "--list", "--describe").code == 2
    assert tidelog("topics", *b, "--alter", "--topic", "x").code == 2
    assert tidelog("topics", *b, "--create", "--topic", "x", "--config", "novalue").code == 2


def test_produce_keys_then_consume_them_back(tidelog: RunTool, module_broker: Any) -> None:
    b = _b(module_broker)
    assert tidelog("topics", *b, "--create", "--topic", "tl-keys", "--partitions", "1").code == 0
    r = tidelog(
        "produce",
        *b,
        "--topic",
        "tl-keys",
        "--property",
        "parse.key=true",
        "--property",
        "key.separator=:",
        stdin=b"k1:hello\nk2:world\r\nk3:a:b\n",
    )
    assert r.code == 0, r.err
    c = tidelog(
        "consume",
        *b,
        "--topic",
        "tl-keys",
        "--from-beginning",
        "--max-messages",
        "3",
        "--property",
        "print.key=true",
        "--property",
        "print.offset=true",
    )
    assert c.code == 0, c.err
    assert c.lines == ["Offset:0\tk1\thello", "Offset:1\tk2\tworld", "Offset:2\tk3\ta:b"]
    assert "Processed a total of 3 messages" in c.err

    t = tidelog(
        "consume",
        *b,
        "--topic",
        "tl-keys",
        "--partition",
        "0",
        "--offset",
        "1",
        "--max-messages",
        "1",
        "--property",
        "print.timestamp=true",
        "--property",
        "print.partition=true",
        "--property",
        "key.separator=|",
    )
    assert t.code == 0, t.err
    assert re.fullmatch(r"CreateTime:\d{13}\|Partition:0\|world", t.lines[0])

    short = tidelog(
        "consume",
        *b,
        "--topic",
        "tl-keys",
        "--from-beginning",
        "--max-messages",
        "5",
        "--timeout-ms",
        "1500",
    )
    assert short.code == 1 and "3 of 5 messages" in short.err
    assert short.lines == ["hello", "world", "a:b"]
    drained = tidelog("consume", *b, "--topic", "tl-keys", "--timeout-ms", "500")
    assert drained.code == 0 and drained.out == ""  # latest: nothing new, a clean end

    bad = tidelog(
        "produce",
        *b,
        "--topic",
        "tl-keys",
        "--property",
        "parse.key=true",
        stdin=b"no separator here\n",
    )
    assert bad.code == 1 and "No key separator found on line number 1" in bad.err


def test_headers_acks_and_nulls(tidelog: RunTool, module_broker: Any) -> None:
    b = _b(module_broker)
    r = tidelog(
        "produce",
        *b,
        "--topic",
        "tl-headers",
        "--acks",
        "1",
        "--property",
        "parse.headers=true",
        "--property",
        "parse.key=true",
        "--property",
        "null.marker=NULL",
        stdin=b"h1:a,h2:b\tkey\tvalue\n\tNULL\tv2\n",
    )
    assert r.code == 0, r.err
    assert tidelog("produce", *b, "--topic", "tl-headers", "--acks", "0", stdin=b"fire\n").code == 0
    c = tidelog(
        "consume",
        *b,
        "--topic",
        "tl-headers",
        "--from-beginning",
        "--max-messages",
        "3",
        "--property",
        "print.headers=true",
        "--property",
        "print.key=true",
    )
    assert c.code == 0, c.err
    assert c.lines == ["h1:a,h2:b\tkey\tvalue", "NO_HEADERS\tnull\tv2", "NO_HEADERS\tnull\tfire"]


def test_compression_and_dump_log_on_broker_files(
    tidelog: RunTool, module_broker: Any, tmp_path: Path
) -> None:
    b = _b(module_broker)
    lines = b"".join(b"record number %04d of a compressible payload\n" % i for i in range(200))
    for codec in ("gzip", "lz4", "zstd"):
        r = tidelog(
            "produce", *b, "--topic", f"tl-{codec}", "--compression-codec", codec, stdin=lines
        )
        assert r.code == 0, r.err
        c = tidelog(
            "consume", *b, "--topic", f"tl-{codec}", "--from-beginning", "--max-messages", "200"
        )
        assert c.code == 0 and len(c.lines) == 200 and c.lines[-1].startswith("record number 0199")
        part = module_broker.log_dir / f"tl-{codec}-0"
        d = tidelog("dump-log", "--files", str(part / "00000000000000000000.log"))
        assert d.code == 0, d.err
        assert f"compresscodec: {codec}" in d.out and "isvalid: true" in d.out
        assert "isvalid: false" not in d.out
        deep = tidelog(
            "dump-log", "--files", str(part / "00000000000000000000.log"), "--print-data-log"
        )
        assert "| offset: 199 " in deep.out and "payload: record number 0199" in deep.out
        idx = tidelog(
            "dump-log",
            "--verify-index-only",
            "--files",
            str(part / "00000000000000000000.index"),
            str(part / "00000000000000000000.timeindex"),
        )
        assert idx.code == 0, idx.err
        sane = tidelog(
            "dump-log",
            "--index-sanity-check",
            "--files",
            str(part / "00000000000000000000.index"),
            str(part / "00000000000000000000.timeindex"),
        )
        assert sane.code == 0, sane.err
        assert sane.out.count("passed sanity check.") + sane.out.count("is empty.") == 2


def test_get_offsets(tidelog: RunTool, module_broker: Any) -> None:
    b = _b(module_broker)
    assert tidelog("topics", *b, "--create", "--topic", "tl-offs", "--partitions", "2").code == 0
    r = tidelog("produce", *b, "--topic", "tl-offs", "--partition", "1", stdin=b"a\nb\nc\n")
    assert r.code == 0, r.err
    latest = tidelog("get-offsets", *b, "--topic", "tl-offs", "--time", "-1")
    assert latest.lines == ["tl-offs:0:0", "tl-offs:1:3"], latest.err
    assert tidelog("get-offsets", *b, "--topic", "tl-offs").lines == latest.lines
    earliest = tidelog("get-offsets", *b, "--topic", "tl-offs", "--time", "-2")
    assert earliest.lines == ["tl-offs:0:0", "tl-offs:1:0"]
    one = tidelog("get-offsets", *b, "--topic", "tl-offs", "--partitions", "1", "--time", "0")
    assert one.lines == ["tl-offs:1:0"]  # partition 0 has no record at or after ts 0: left out
    future = tidelog("get-offsets", *b, "--topic", "tl-offs", "--time", "99999999999999")
    assert future.code == 0 and future.lines == []
    rules = tidelog("get-offsets", *b, "--topic-partitions", "tl-off.*:1-")
    assert rules.lines == ["tl-offs:1:3"]
    none = tidelog("get-offsets", *b, "--topic", "tl-nothing-matches")
    assert none.code == 1 and "Could not match any topic-partitions" in none.err
    assert tidelog("get-offsets", *b, "--time", "yesterday").code == 2


def _serves_groups(broker: Any) -> bool:
    from tidelog.tools.probe import probe

    keys = {k for k, _, _ in probe(broker.bootstrap, 5).ranges}
    return {10, 11, 14, 15, 16, 8, 9, 42} <= keys


def test_groups(tidelog: RunTool, module_broker: Any) -> None:
    b = _b(module_broker)
    if not _serves_groups(module_broker):
        r = tidelog("groups", *b, "--list")
        assert r.code == 1 and "does not serve consumer groups" in r.err
        pytest.skip("the broker does not advertise the consumer-group APIs yet")
    assert tidelog("produce", *b, "--topic", "tl-grp", stdin=b"1\n2\n3\n4\n").code == 0
    c = tidelog(
        "consume",
        *b,
        "--topic",
        "tl-grp",
        "--group",
        "tl-g",
        "--from-beginning",
        "--max-messages",
        "4",
        "--consumer-property",
        "auto.commit.interval.ms=100",
    )
    assert c.code == 0 and c.lines == ["1", "2", "3", "4"], c.err
    assert "tl-g" in tidelog("groups", *b, "--list").lines

    d = tidelog("groups", *b, "--describe", "--group", "tl-g")
    assert d.code == 0, d.err
    header = next(i for i, line in enumerate(d.lines) if line.startswith("GROUP"))
    assert d.lines[header].split() == [
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    ]
    assert d.lines[header + 1].split()[:6] == ["tl-g", "tl-grp", "0", "4", "4", "0"]

    dry = tidelog(
        "groups",
        *b,
        "--reset-offsets",
        "--group",
        "tl-g",
        "--topic",
        "tl-grp",
        "--to-offset",
        "1",
        "--dry-run",
    )
    assert dry.code == 0 and dry.lines[-1].split() == ["tl-g", "tl-grp", "0", "1"], dry.err
    ex = tidelog(
        "groups",
        *b,
        "--reset-offsets",
        "--group",
        "tl-g",
        "--topic",
        "tl-grp",
        "--to-earliest",
        "--execute",
    )
    assert ex.code == 0, ex.err
    d = tidelog("groups", *b, "--describe", "--group", "tl-g")
    assert d.lines[-1].split()[:6] == ["tl-g", "tl-grp", "0", "0", "4", "4"]

    assert tidelog("groups", *b, "--describe", "--group", "tl-none").code == 1
    deleted = tidelog("groups", *b, "--delete", "--group", "tl-g")
    assert deleted.code == 0 and "was successful" in deleted.out, deleted.err
    assert "tl-g" not in tidelog("groups", *b, "--list").lines
    assert tidelog("groups", *b, "--reset-offsets", "--group", "x", "--to-earliest").code == 2


def test_probe_through_the_entry_point(module_broker: Any) -> None:
    """As HEALTHCHECK runs it: a new process, judged by its exit status."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "tidelog", "probe", "--bootstrap-server"]
    ok = subprocess.run([*cmd, module_broker.bootstrap], env=env, capture_output=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    assert b"answers ApiVersions" in ok.stdout


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_kcat_and_tidelog_interoperate(tidelog: RunTool, module_broker: Any) -> None:
    b = _b(module_broker)
    assert tidelog("topics", *b, "--create", "--topic", "tl-kcat").code == 0
    subprocess.run(
        ["kcat", "-P", "-b", module_broker.bootstrap, "-t", "tl-kcat", "-K:", "-p", "0"],
        input=b"a:from kcat\nb:again\n",
        check=True,
        timeout=60,
    )
    c = tidelog(
        "consume",
        *b,
        "--topic",
        "tl-kcat",
        "--from-beginning",
        "--max-messages",
        "2",
        "--property",
        "print.key=true",
    )
    assert c.lines == ["a\tfrom kcat", "b\tagain"], c.err
    assert tidelog("produce", *b, "--topic", "tl-kcat", stdin=b"from tidelog\n").code == 0
    out = subprocess.run(
        [
            "kcat",
            "-C",
            "-b",
            module_broker.bootstrap,
            "-t",
            "tl-kcat",
            "-o",
            "2",
            "-c",
            "1",
            "-e",
            "-f",
            "%o %s\n",
        ],
        capture_output=True,
        check=True,
        timeout=60,
    )
    assert out.stdout == b"2 from tidelog\n"
