"""``tidelog streams-groups`` against a real broker: a streams group made by StreamsGroupHeartbeat
(two members, tasks of a two-partition topic), an offset committed by a member."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from kio.schema.offset_commit.v9 import request as commit_v9
from kio.schema.streams_group_heartbeat.v0 import request as hb

from tests.support.kafka_wire import WireClient
from tests.tools.tools_fixtures import RunTool


def _heartbeat(wire: WireClient, member: str, epoch: int, process: str) -> Any:
    topology = hb.Topology(
        epoch=0,
        subtopologies=(
            hb.Subtopology(
                subtopology_id="0", source_topics=("tool-in",), state_changelog_topics=(),
                repartition_source_topics=(), copartition_groups=(),
            ),
        ),
    )  # fmt: skip
    joining = epoch == 0
    wire.send(hb.StreamsGroupHeartbeatRequest(
        group_id="tool-app", member_id=member, member_epoch=epoch, endpoint_information_epoch=0,
        rebalance_timeout=timedelta(seconds=30) if joining else timedelta(milliseconds=-1),
        topology=topology if joining else None, process_id=process if joining else None,
        active_tasks=() if joining else None, standby_tasks=() if joining else None,
        warmup_tasks=() if joining else None, client_tags=None, task_offsets=None,
        task_end_offsets=None,
    ))  # fmt: skip
    return wire.receive()[1]


def test_streams_groups_tool(broker: Any, tidelog: RunTool) -> None:
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    bootstrap = broker.bootstrap
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic("tool-in", 2, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for _ in range(5):
        producer.send("tool-in", b"v", partition=0)
    producer.flush()
    producer.close()
    with WireClient(bootstrap) as wire:
        first = _heartbeat(wire, "m-1", 0, "p-1")
        assert first.error_code == 0, first
        epoch = _heartbeat(wire, "m-1", first.member_epoch, "p-1").member_epoch
        wire.send(commit_v9.OffsetCommitRequest(
            group_id="tool-app", generation_id_or_member_epoch=epoch, member_id="m-1",
            topics=(commit_v9.OffsetCommitRequestTopic(name="tool-in", partitions=(
                commit_v9.OffsetCommitRequestPartition(
                    partition_index=0, committed_offset=3, committed_metadata=""),)),),
        ))  # fmt: skip
        assert wire.receive()[1].topics[0].partitions[0].error_code == 0

        def tool(*args: str) -> Any:
            return tidelog("streams-groups", "--bootstrap-server", bootstrap, *args)

        listed = tool("--list")
        assert (listed.code, listed.out.split()) == (0, ["tool-app"])
        offsets = tool("--describe", "--group", "tool-app")
        assert offsets.code == 0, offsets.err
        lines = offsets.out.strip().splitlines()
        assert lines[0].split() == [
            "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"
        ]  # fmt: skip
        assert lines[1].split() == ["tool-app", "tool-in", "0", "3", "5", "2"]
        members = tool("--describe", "--group", "tool-app", "--members")
        row = members.out.strip().splitlines()[1]
        assert row.split()[:3] == ["tool-app", "m-1", "p-1"] and "ACTIVE:[0_0, 0_1]" in row
        state = tool("--describe", "--group", "tool-app", "--state")
        assert state.out.strip().splitlines()[1].split()[-2:] == ["Stable", "1"]
        busy = tool("--delete", "--group", "tool-app")
        assert busy.code != 0 and "NON_EMPTY_GROUP" in busy.err
        active = tool("--reset-offsets", "--group", "tool-app", "--topic", "tool-in",
                      "--to-earliest", "--execute")  # fmt: skip
        assert active.code != 0 and "inactive" in active.err
        _heartbeat(wire, "m-1", -1, "p-1")
    dry = tool("--reset-offsets", "--group", "tool-app", "--topic", "tool-in:0", "--to-offset",
               "1", "--dry-run")  # fmt: skip
    assert dry.code == 0 and dry.out.strip().splitlines()[-1].split() == [
        "tool-app", "tool-in", "0", "1"
    ]  # fmt: skip
    assert tool("--describe", "--group", "tool-app").out.strip().splitlines()[1].split()[3] == "3"
    reset = tool("--reset-offsets", "--group", "tool-app", "--topic", "tool-in", "--to-latest",
                 "--execute")  # fmt: skip
    assert reset.code == 0, reset.err
    rows = [line.split() for line in tool("--describe", "--group", "tool-app").out.splitlines()]
    assert ["tool-app", "tool-in", "0", "5", "5", "0"] in rows
    assert ["tool-app", "tool-in", "1", "0", "0", "0"] in rows
    deleted = tool("--delete", "--group", "tool-app")
    assert deleted.code == 0, deleted.err
    missing = tool("--describe", "--group", "tool-app")
    assert missing.code != 0 and "does not exist" in missing.err
