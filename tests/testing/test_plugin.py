"""The pytest plugin (``tidelog.testing.plugin``), run through ``pytester`` as a user's suite.

Each test writes a small test module, runs pytest on it (in this process: the plugin is active
because tidelog is installed, through its ``pytest11`` entry point) and checks the outcome. The
inner tests talk to real brokers with kafka-python.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition

from tidelog.testing import Broker

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.integration

#: Helpers every inner test module starts with.
HELPERS = """
from kafka import KafkaConsumer, KafkaProducer, TopicPartition


def produce(bootstrap, topic, values):
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for v in values:
        producer.send(topic, v).get(timeout=30)
    producer.close()


def read_all(bootstrap, topic, partitions=(0,)):
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=3000)
    tps = [TopicPartition(topic, p) for p in partitions]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    end = sum(consumer.end_offsets(tps).values())
    out = []
    while len(out) < end:
        batch = consumer.poll(timeout_ms=3000)
        if not batch:
            break
        for records in batch.values():
            out.extend(r.value for r in records)
    consumer.close()
    return out
"""


def run(pytester: pytest.Pytester, body: str, *args: str) -> pytest.RunResult:
    pytester.makepyfile(test_inner=HELPERS + body)
    return pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", *args)


def test_plugin_is_registered_by_its_entry_point(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--fixtures", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(
        ["*tidelog_broker*session*", "*tidelog_broker_factory*", "*tidelog_topic*"]
    )
    helped = pytester.runpytest("--help")
    helped.stdout.fnmatch_lines(
        ["*--tidelog-broker=HOST:PORT*", "*--tidelog-keep*", "*--tidelog-override=KEY=VALUE*"]
    )


def test_session_broker_and_fresh_topics(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
SEEN = {}


def test_first(tidelog_broker, tidelog_topic):
    assert isinstance(tidelog_topic, str) and tidelog_topic.startswith("test_first-")
    assert tidelog_broker.bootstrap_servers.startswith("127.0.0.1:")
    assert tidelog_broker.log_dir.is_dir()
    produce(tidelog_broker.bootstrap_servers, tidelog_topic, [b"a", b"b", b"c"])
    assert read_all(tidelog_broker.bootstrap_servers, tidelog_topic) == [b"a", b"b", b"c"]
    SEEN["broker"], SEEN["topic"] = tidelog_broker, tidelog_topic


def test_second_sees_nothing_of_the_first(tidelog_broker, tidelog_topic):
    assert tidelog_broker is SEEN["broker"]  # one broker for the session
    assert tidelog_topic != SEEN["topic"]
    assert read_all(tidelog_broker.bootstrap_servers, tidelog_topic) == []
    produce(tidelog_broker.bootstrap_servers, tidelog_topic, [b"z"])
    assert read_all(tidelog_broker.bootstrap_servers, tidelog_topic) == [b"z"]
    # the first test's records are still where it left them
    assert read_all(tidelog_broker.bootstrap_servers, SEEN["topic"]) == [b"a", b"b", b"c"]


def test_create_topic_with_settings(tidelog_broker):
    settings = {"cleanup.policy": "compact"}
    name = tidelog_broker.create_topic("made-here", partitions=3, config=settings)
    assert name == "made-here"
    consumer = KafkaConsumer(bootstrap_servers=tidelog_broker.bootstrap_servers)
    assert consumer.partitions_for_topic("made-here") == {0, 1, 2}
    consumer.close()
""",
    )
    result.assert_outcomes(passed=3)


def test_factory_brokers_have_their_own_settings_and_stop(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    pids = tmp_path / "pids"
    result = run(
        pytester,
        f"""
import pathlib


def test_two_brokers(tidelog_broker_factory):
    three = tidelog_broker_factory({{"num.partitions": 3}})
    plain = tidelog_broker_factory()
    assert three.bootstrap_servers != plain.bootstrap_servers
    assert three.log_dir != plain.log_dir
    produce(three.bootstrap_servers, "auto", [b"x"])  # auto-created with num.partitions
    produce(plain.bootstrap_servers, "auto", [b"y"])
    c3 = KafkaConsumer(bootstrap_servers=three.bootstrap_servers)
    c1 = KafkaConsumer(bootstrap_servers=plain.bootstrap_servers)
    assert c3.partitions_for_topic("auto") == {{0, 1, 2}}
    assert c1.partitions_for_topic("auto") == {{0}}
    c3.close()
    c1.close()
    pathlib.Path({str(pids)!r}).write_text(f"{{three.pid}} {{plain.pid}}")
""",
    )
    result.assert_outcomes(passed=1)
    for pid in pids.read_text().split():
        with pytest.raises(ProcessLookupError):
            os.kill(int(pid), 0)  # stopped (and reaped) at the end of the test


def test_kill_and_restart_keep_acknowledged_records(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
def test_crash(tidelog_broker_factory):
    broker = tidelog_broker_factory()
    broker.create_topic("durable", partitions=2)
    values = [b"v%d" % i for i in range(50)]
    produce(broker.bootstrap_servers, "durable", values)  # acks=all, each acknowledged
    port = broker.bootstrap_servers
    broker.kill()  # SIGKILL: no shutdown work at all
    assert not broker.running
    broker.restart()
    assert broker.bootstrap_servers == port  # same port, same log dir
    assert sorted(read_all(broker.bootstrap_servers, "durable", (0, 1))) == sorted(values)
    assert "unclean" in broker.log_text()  # the restart recovered the log dir
    broker.restart()  # a graceful stop in between this time
    assert sorted(read_all(broker.bootstrap_servers, "durable", (0, 1))) == sorted(values)
""",
    )
    result.assert_outcomes(passed=1)


def test_tidelog_broker_option_uses_an_existing_broker(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    with Broker() as other:
        result = run(
            pytester,
            f"""
def test_on_the_given_broker(tidelog_broker, tidelog_topic):
    assert tidelog_broker.bootstrap_servers == {other.bootstrap_servers!r}
    assert tidelog_broker.log_dir is None  # not ours: no files, no restart
    produce(tidelog_broker.bootstrap_servers, tidelog_topic, [b"hello"])
    assert read_all(tidelog_broker.bootstrap_servers, tidelog_topic) == [b"hello"]
    with open({str(tmp_path / "topic")!r}, "w") as f:
        f.write(tidelog_topic)


def test_cannot_stop_it(tidelog_broker):
    import pytest
    with pytest.raises(RuntimeError, match="--tidelog-broker"):
        tidelog_broker.kill()
""",
            f"--tidelog-broker={other.bootstrap_servers}",
        )
        result.assert_outcomes(passed=2)
        topic = (tmp_path / "topic").read_text()
        # the per-test topic is deleted from a broker the plugin does not own (issue 26), and
        # the broker still runs: nobody stopped it
        assert topic not in _topics(other.bootstrap_servers)
        assert other.running
        assert other.starts == 1
        # --tidelog-keep keeps it, with the record the test wrote
        kept = run(
            pytester,
            f"""
def test_keeps_its_topic(tidelog_broker, tidelog_topic):
    produce(tidelog_broker.bootstrap_servers, tidelog_topic, [b"kept"])
    with open({str(tmp_path / "kept")!r}, "w") as f:
        f.write(tidelog_topic)
""",
            f"--tidelog-broker={other.bootstrap_servers}",
            "--tidelog-keep",
        )
        kept.assert_outcomes(passed=1)
        topic = (tmp_path / "kept").read_text()
        consumer = KafkaConsumer(bootstrap_servers=other.bootstrap_servers)
        tp = TopicPartition(topic, 0)
        assert consumer.end_offsets([tp]) == {tp: 1}
        consumer.close()


def test_topic_that_cannot_be_deleted_is_a_warning(pytester: pytest.Pytester) -> None:
    """A --tidelog-broker broker that refuses DeleteTopics: the test passes, with a warning."""
    with Broker(overrides={"delete.topic.enable": "false"}) as other:
        result = run(
            pytester,
            """
def test_uses_a_topic(tidelog_topic):
    assert tidelog_topic
""",
            f"--tidelog-broker={other.bootstrap_servers}",
        )
        result.assert_outcomes(passed=1, warnings=1)
        result.stdout.fnmatch_lines(["*tidelog: could not delete topic 'test_uses_a_topic-*"])


def _topics(bootstrap: str) -> set[str]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        return set(consumer.topics())
    finally:
        consumer.close()


def test_failing_test_report_has_no_admin_client_errors(pytester: pytest.Pytester) -> None:
    """Issue 26: the plugin's admin client (create_topic) is closed before its broker stops,
    so a failing test's report ends with the failure, not kafka-python's disconnection
    errors from teardown."""
    result = run(
        pytester,
        """
def test_fails(tidelog_broker_factory):
    broker = tidelog_broker_factory()
    broker.create_topic("made-here")
    assert False, "the code under test is wrong"
""",
    )
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "the code under test is wrong" in out
    assert "Captured log teardown" not in out
    assert "KafkaConnectionError" not in out and "kafka.net" not in out


def test_broker_log_is_attached_to_a_failing_test(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
def test_passes(tidelog_topic):
    assert tidelog_topic


def test_fails_on_the_session_broker(tidelog_broker, tidelog_topic):
    produce(tidelog_broker.bootstrap_servers, tidelog_topic, [b"x"])
    assert False, "the code under test is wrong"


def test_fails_on_a_factory_broker(tidelog_broker_factory):
    broker = tidelog_broker_factory({"log.retention.ms": 123456})
    assert broker.bootstrap_servers == "nowhere"
""",
    )
    result.assert_outcomes(passed=1, failed=2)
    out = result.stdout.str()
    session_section = out.index("tidelog broker 127.0.0.1:")
    assert "session broker, during this test" in out
    factory_section = out.index("tidelog broker", session_section + 1)
    assert "tidelog listening on" in out[factory_section:]
    assert "log.retention.ms=123456" in out[factory_section:]  # the factory broker's command
    # the passing test has no section
    assert out.count("session broker, during this test") == 1


def test_override_and_keep_options(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
def test_settings_reach_the_broker(tidelog_broker):
    produce(tidelog_broker.bootstrap_servers, "auto-two", [b"x"])
    consumer = KafkaConsumer(bootstrap_servers=tidelog_broker.bootstrap_servers)
    assert consumer.partitions_for_topic("auto-two") == {0, 1}
    consumer.close()


def test_factory_gets_them_too(tidelog_broker_factory):
    broker = tidelog_broker_factory({"default.replication.factor": 1})
    produce(broker.bootstrap_servers, "auto-two", [b"y"])
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers)
    assert consumer.partitions_for_topic("auto-two") == {0, 1}
    consumer.close()
""",
        "--tidelog-override",
        "num.partitions=2",
        "--tidelog-keep",
    )
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    assert "tidelog: log dirs kept (--tidelog-keep)" in out
    kept = [
        Path(line.split(" (log: ")[0])
        for line in out.splitlines()
        if line.startswith("/") and "(log: " in line
    ]
    assert len(kept) == 2
    try:
        for log_dir in kept:
            assert (log_dir / "auto-two-1").is_dir()  # the data is still there
            assert (log_dir.parent / "broker.log").is_file()
    finally:
        for log_dir in kept:
            shutil.rmtree(log_dir.parent, ignore_errors=True)


def test_bad_override_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
def test_x(tidelog_broker):
    pass
""",
        "--tidelog-override",
        "no-equals-sign",
    )
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*--tidelog-override wants KEY=VALUE*"])
