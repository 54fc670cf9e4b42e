"""``tidelog share-groups`` and ``dump-log --share-group-state-decoder`` against a real broker."""

from __future__ import annotations

import json
from typing import Any

from tests.broker.share.share_support import (
    SHARE_OVERRIDES,
    create_topic,
    produce,
    set_group_configs,
)
from tests.broker.share.test_share_wire import _join, heartbeat, share_ack, share_fetch
from tests.support.kafka_wire import WireClient
from tests.tools.tools_fixtures import RunTool


def test_share_groups_tool_and_state_decoder(broker_factory: Any, tidelog: RunTool) -> None:
    broker = broker_factory(SHARE_OVERRIDES)
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "tool-t")
    set_group_configs(bootstrap, "tool-g", {"share.auto.offset.reset": "earliest"})
    produce(bootstrap, "tool-t", [b"v"] * 10)
    with WireClient(bootstrap) as wire:
        _, topic_id = _join(wire, "tool-g", "member-1", "tool-t")
        share_fetch(wire, "tool-g", "member-1", 0, topic_id)
        share_ack(wire, "tool-g", "member-1", 1, topic_id, 0, 5, 1)

        listed = tidelog("share-groups", "--bootstrap-server", bootstrap, "--list")
        assert (listed.code, listed.out.split()) == (0, ["tool-g"])
        offsets = tidelog("share-groups", "--bootstrap-server", bootstrap, "--describe",
                          "--group", "tool-g")  # fmt: skip
        assert offsets.code == 0, offsets.err
        lines = offsets.out.strip().splitlines()
        assert lines[0].split() == ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"]
        assert lines[1].split() == ["tool-g", "tool-t", "0", "6", "4"]
        members = tidelog("share-groups", "--bootstrap-server", bootstrap, "--describe",
                          "--group", "tool-g", "--members")  # fmt: skip
        assert "member-1" in members.out and "tool-t:0" in members.out
        state = tidelog("share-groups", "--bootstrap-server", bootstrap, "--describe",
                        "--group", "tool-g", "--state")  # fmt: skip
        assert state.out.strip().splitlines()[1].split()[-2:] == ["Stable", "1"]
        # a group with a member refuses the reset
        busy = tidelog("share-groups", "--bootstrap-server", bootstrap, "--reset-offsets",
                       "--group", "tool-g", "--topic", "tool-t", "--to-earliest",
                       "--execute")  # fmt: skip
        assert busy.code != 0 and "not empty" in (busy.err + busy.out)
        heartbeat(wire, "tool-g", "member-1", -1, None)
    reset = tidelog("share-groups", "--bootstrap-server", bootstrap, "--reset-offsets",
                    "--group", "tool-g", "--topic", "tool-t", "--to-offset", "2",
                    "--execute")  # fmt: skip
    assert reset.code == 0, reset.err
    assert reset.out.strip().splitlines()[-1].split() == ["tool-g", "tool-t", "0", "2"]
    offsets = tidelog(
        "share-groups", "--bootstrap-server", bootstrap, "--describe", "--group", "tool-g"
    )
    assert offsets.out.strip().splitlines()[1].split() == ["tool-g", "tool-t", "0", "2", "8"]
    gone = tidelog("share-groups", "--bootstrap-server", bootstrap, "--delete-offsets",
                   "--group", "tool-g", "--topic", "tool-t")  # fmt: skip
    assert gone.code == 0 and "Successful" in gone.out
    deleted = tidelog(
        "share-groups", "--bootstrap-server", bootstrap, "--delete", "--group", "tool-g"
    )
    assert deleted.code == 0, deleted.err
    assert tidelog("share-groups", "--bootstrap-server", bootstrap, "--list").out.split() == []

    broker.stop()
    segments = sorted(broker.log_dir.glob("__share_group_state-*/*.log"))
    records = []
    for seg in segments:
        dumped = tidelog("dump-log", "--share-group-state-decoder", "--files", str(seg))
        assert dumped.code == 0, dumped.err
        records += [line for line in dumped.out.splitlines() if " key: " in line]
    assert records, "no __share_group_state records"
    payloads = [
        json.loads(line.split(" payload: ", 1)[1]) for line in records if " payload: {" in line
    ]
    starts = [p["data"]["startOffset"] for p in payloads]
    assert 6 in starts and 2 in starts
    first = json.loads(records[0].split(" key: ", 1)[1].split(" payload: ")[0])
    assert first["type"] == "0" and first["data"]["groupId"] == "tool-g"
    assert any(line.endswith("payload: <DELETE>") for line in records)
