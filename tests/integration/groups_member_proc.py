"""A group member in its own process (aiokafka), so a test can SIGKILL it.

Usage: python groups_member_proc.py BOOTSTRAP TOPIC GROUP SESSION_MS
Prints ``ready`` once it joined, then one JSON line [partition, offset, value] per record, each
batch printed only after its offsets were committed, so whatever it printed is committed.
"""

from __future__ import annotations

import asyncio
import json
import sys

from aiokafka import AIOKafkaConsumer
from aiokafka.coordinator.assignors.range import RangePartitionAssignor


async def main(bootstrap: str, topic: str, group: str, session_ms: int) -> None:
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        client_id="aiokafka-member",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=session_ms,
        heartbeat_interval_ms=max(session_ms // 6, 100),
        partition_assignment_strategy=(RangePartitionAssignor,),
    )
    await consumer.start()
    print("ready", flush=True)
    while True:
        batches = await consumer.getmany(timeout_ms=200)
        lines = []
        for tp, records in batches.items():
            lines.extend(json.dumps([tp.partition, r.offset, r.value.decode()]) for r in records)
        if lines:
            await consumer.commit()
            print("\n".join(lines), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
