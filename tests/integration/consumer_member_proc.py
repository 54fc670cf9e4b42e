"""A KIP-848 consumer-group member (confluent-kafka, ``group.protocol=consumer``) in its own
process, so a test can SIGKILL it.

Usage: python consumer_member_proc.py BOOTSTRAP TOPIC GROUP
Prints ``assigned <n>`` whenever its assignment changes, and one JSON line [partition, offset]
per record, printed only after the record's offset was committed.
"""

from __future__ import annotations

import json
import sys

from confluent_kafka import Consumer


def main(bootstrap: str, topic: str, group: str) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    assigned = -1
    while True:
        msg = consumer.poll(0.2)
        n = len(consumer.assignment())
        if n != assigned:
            assigned = n
            print(f"assigned {n}", flush=True)
        if msg is None or msg.error():
            continue
        consumer.commit(message=msg, asynchronous=False)
        print(json.dumps([msg.partition(), msg.offset()]), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
