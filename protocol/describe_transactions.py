"""DescribeTransactions v0's answer, read by hand: kio reads ``transaction_start_time_ms`` as a
datetime and refuses the -1 that Kafka (and tidelog) send for an id whose transaction has not
started. The one reader of it: ``tidelog transactions describe`` (tools/transactions.py) and the
tests' wire client (tests/support/kafka_wire.py).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

__all__ = ["TransactionStateEntry", "read_describe_transactions_v0"]


@dataclass(frozen=True, slots=True)
class TransactionStateEntry:
    error_code: int
    transactional_id: str
    transaction_state: str
    transaction_timeout_ms: int
    transaction_start_ms: int
    producer_id: int
    producer_epoch: int
    topics: dict[str, list[int]]


def read_describe_transactions_v0(frame: bytes, offset: int) -> list[TransactionStateEntry]:
    """The entries of a DescribeTransactions v0 answer whose body starts at ``offset`` of
    ``frame`` (after the response header)."""
    pos = offset + 4  # throttle time

    def uvarint() -> int:
        nonlocal pos
        shift = value = 0
        while True:
            byte = frame[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7

    def string() -> str:
        nonlocal pos
        n = uvarint() - 1
        text = frame[pos : pos + max(n, 0)].decode()
        pos += max(n, 0)
        return text

    def fixed(fmt: str) -> int:
        nonlocal pos
        (value,) = struct.unpack_from(fmt, frame, pos)
        pos += struct.calcsize(fmt)
        return int(value)

    def skip_tags() -> None:
        nonlocal pos
        for _ in range(uvarint()):
            uvarint()
            pos += uvarint()

    states = []
    for _ in range(uvarint() - 1):
        error = fixed(">h")
        txn_id = string()
        state = string()
        timeout = fixed(">i")
        start = fixed(">q")
        producer_id = fixed(">q")
        epoch = fixed(">h")
        topics: dict[str, list[int]] = {}
        for _ in range(uvarint() - 1):
            topic = string()
            topics[topic] = [fixed(">i") for _ in range(uvarint() - 1)]
            skip_tags()
        skip_tags()
        states.append(
            TransactionStateEntry(error, txn_id, state, timeout, start, producer_id, epoch, topics)
        )
    return states
