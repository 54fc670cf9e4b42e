"""tidelog's StreamsGroup* records (``broker/group/streams/records.py``) are Kafka 4.4's bytes:
Kafka's own generated classes (``org.apache.kafka.coordinator.group.generated``, from the
tests/jvm/kafka set) read each value tidelog writes to the last byte and write it back the same."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.jvm import java_bin, jvm_set_classpath
from tidelog.broker.group.streams import records as rec
from tidelog.broker.group.streams.assignor import TaskAssignment
from tidelog.broker.group.streams.model import StreamsMember, TaskSet
from tidelog.broker.group.streams.topology import Subtopology, TopicInfo, Topology

CHECK = """
import java.nio.ByteBuffer;
import java.nio.file.*;
import org.apache.kafka.common.protocol.*;
public class Check {
  public static void main(String[] a) throws Exception {
    for (String line : Files.readAllLines(Path.of(a[0]))) {
      String[] p = line.split(" ");
      byte[] b = java.util.HexFormat.of().parseHex(p[1]);
      ByteBuffer buf = ByteBuffer.wrap(b);
      short v = buf.getShort();
      Class<?> c = Class.forName("org.apache.kafka.coordinator.group.generated." + p[0]);
      ApiMessage m = (ApiMessage) c.getConstructor(
          org.apache.kafka.common.protocol.Readable.class, short.class)
          .newInstance(new ByteBufferAccessor(buf), v);
      ByteBuffer out = MessageUtil.toVersionPrefixedByteBuffer((short) 0, m);
      byte[] ob = new byte[out.remaining()];
      out.get(ob);
      System.out.println(p[0] + " " + java.util.Arrays.equals(ob, b) + " " + buf.remaining());
    }
  }
}
"""


CHANGELOG = TopicInfo("cl", 0, 0, (("cleanup.policy", "compact"),))
TOPOLOGY = Topology(0, (
    Subtopology("0", ("in",), (), ("rep",), (), (CHANGELOG,), (((0,), (), (1,)),)),
    Subtopology("1", (), (), (), (TopicInfo("rep", 4, 0, ()),), ()),
))  # fmt: skip


def _values() -> list[tuple[str, bytes]]:
    member = StreamsMember(
        "m1", member_epoch=3, previous_member_epoch=2, state="UNREVOKED_TASKS", rack_id="r",
        client_id="c", client_host="/127.0.0.1", rebalance_timeout_ms=300000, topology_epoch=0,
        process_id="p", user_endpoint=("h", 8080), client_tags=(("k", "v"),),
        assigned=TaskSet({"0": frozenset({0, 1})}, {"1": frozenset({2})}, {}),
        revoking=TaskSet({"0": frozenset({3})}),
    )  # fmt: skip
    target = TaskAssignment({"0": frozenset({1})}, {}, {"1": frozenset({0})})
    return [
        ("StreamsGroupMetadataValue", rec.encode_metadata_value(5)),
        ("StreamsGroupMemberMetadataValue", rec.encode_member_metadata_value(member)),
        ("StreamsGroupMemberMetadataValue", rec.encode_member_metadata_value(StreamsMember("m2"))),
        ("StreamsGroupTargetAssignmentMetadataValue", rec.encode_assignment_epoch_value(5)),
        ("StreamsGroupTargetAssignmentMemberValue", rec.encode_target_member_value(target)),
        ("StreamsGroupCurrentMemberAssignmentValue", rec.encode_current_assignment_value(member)),
        ("StreamsGroupTopologyValue", rec.encode_topology_value(TOPOLOGY)),
    ]


def test_streams_group_values_are_kafka_bytes(tmp_path: Path) -> None:
    cp = jvm_set_classpath("kafka")
    java = java_bin()
    javac = shutil.which("javac") if java is None else str(Path(java).with_name("javac"))
    if javac is None or not Path(javac).exists():
        pytest.skip("javac is missing (apt-get install openjdk-17-jdk-headless)")
    values = _values()
    (tmp_path / "Check.java").write_text(CHECK)
    (tmp_path / "values.txt").write_text("".join(f"{n} {v.hex()}\n" for n, v in values))
    subprocess.run([javac, "-cp", cp, "-d", str(tmp_path), str(tmp_path / "Check.java")],
                   check=True, timeout=120)  # fmt: skip
    out = subprocess.run(
        [str(java), "-cp", f"{cp}:{tmp_path}", "Check", str(tmp_path / "values.txt")],
        check=True, capture_output=True, text=True, timeout=120,
    ).stdout.split("\n")  # fmt: skip
    assert [line for line in out if line] == [f"{n} true 0" for n, _ in values]
    # And tidelog reads back what it wrote.
    assert rec.decode_topology_value(values[-1][1]) == TOPOLOGY
    assert rec.decode_member_metadata_value("m1", values[1][1]).user_endpoint == ("h", 8080)
