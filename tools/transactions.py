"""``tidelog transactions``: list, describe, describe-producers, find-hanging, abort
(kafka-transactions.sh).

Talks the Kafka protocol to the broker with kio requests over one socket (kafka-python's admin
client has no transaction APIs): ListTransactions, DescribeTransactions, DescribeProducers,
Metadata and WriteTxnMarkers. Columns are kafka-transactions.sh's.

- ``find-hanging``: partitions (``--topic`` [``--partition``], or every topic) whose producers
  have a transaction open longer than ``--max-transaction-timeout`` minutes (15, Kafka's
  ``transaction.max.timeout.ms``) that the coordinator does not know as Ongoing with that
  partition: such a transaction would hold the last stable offset forever.
- ``abort``: writes an ABORT marker for the transaction open at ``--start-offset`` of the
  partition (or for ``--producer-id``/``--producer-epoch``/``--coordinator-epoch``).
"""

from __future__ import annotations

import argparse
import io
import socket
import struct
import time
from collections.abc import Callable
from typing import Any

from tidelog.protocol.describe_transactions import (
    TransactionStateEntry,
    read_describe_transactions_v0,
)
from tidelog.tools._common import (
    EXIT_OK,
    SubParsers,
    ToolError,
    add_bootstrap,
    add_tool_parser,
    format_table,
    parse_bootstrap,
)

__all__ = ["add_parser", "run"]

EXAMPLES = """\
  tidelog transactions --bootstrap-server 127.0.0.1:9092 list
  tidelog transactions --bootstrap-server 127.0.0.1:9092 describe --transactional-id etl-1
  tidelog transactions --bootstrap-server 127.0.0.1:9092 describe-producers --topic orders \\
      --partition 0
  tidelog transactions --bootstrap-server 127.0.0.1:9092 find-hanging --broker-id 1
  tidelog transactions --bootstrap-server 127.0.0.1:9092 abort --topic orders --partition 0 \\
      --start-offset 42
"""

METADATA, DESCRIBE_PRODUCERS, DESCRIBE_TXNS, LIST_TXNS, WRITE_MARKERS = 3, 61, 65, 66, 27


def add_parser(subparsers: SubParsers) -> None:
    p = add_tool_parser(
        subparsers,
        "transactions",
        help="list, describe, find hanging and abort transactions (like kafka-transactions.sh)",
        description="Inspect and abort transactions over the Kafka protocol.",
        examples=EXAMPLES,
        run=run,
    )
    add_bootstrap(p)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("list", help="every transactional id the coordinator knows")
    d = sub.add_parser("describe", help="one transactional id's state")
    d.add_argument("--transactional-id", required=True)
    dp = sub.add_parser("describe-producers", help="active producers of a partition")
    dp.add_argument("--topic", required=True)
    dp.add_argument("--partition", type=int, required=True)
    fh = sub.add_parser("find-hanging", help="open transactions the coordinator forgot")
    fh.add_argument("--broker-id", type=int, help="every partition of this broker")
    fh.add_argument("--topic")
    fh.add_argument("--partition", type=int)
    fh.add_argument("--max-transaction-timeout", type=int, default=15, metavar="MINUTES")
    ab = sub.add_parser("abort", help="write an ABORT marker for a hanging transaction")
    ab.add_argument("--topic", required=True)
    ab.add_argument("--partition", type=int, required=True)
    ab.add_argument("--start-offset", type=int)
    ab.add_argument("--producer-id", type=int)
    ab.add_argument("--producer-epoch", type=int)
    ab.add_argument("--coordinator-epoch", type=int)


class _Client:
    """One connection: a kio request in, its response out."""

    def __init__(self, bootstrap: str, timeout_s: float = 30.0) -> None:
        host, _, port = parse_bootstrap(bootstrap)[0].rpartition(":")
        try:
            self.sock = socket.create_connection((host, int(port)), timeout=timeout_s)
        except OSError as exc:
            raise ToolError(f"cannot connect to {bootstrap}: {exc}") from None
        self.correlation = 0

    def close(self) -> None:
        self.sock.close()

    def call(self, api_key: int, version: int, raw: bool = False, **fields: Any) -> Any:
        from kio.index import load_response_schema
        from kio.serial import entity_reader, entity_writer

        from tidelog.protocol.schema import request_types

        request = request_types(api_key, version)
        cls = next(
            getattr(request, n)
            for n in dir(request)
            if n.endswith("Request") and getattr(getattr(request, n), "__api_key__", None)
        )
        self.correlation += 1
        header_cls = cls.__header_schema__
        buffer = io.BytesIO()
        entity_writer(header_cls)(
            buffer,
            header_cls(
                request_api_key=api_key,
                request_api_version=version,
                correlation_id=self.correlation,
                client_id="tidelog-transactions",
            ),
        )
        entity_writer(cls)(buffer, cls(**fields))
        body = buffer.getvalue()
        self.sock.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", self._read(4))[0]
        frame = self._read(size)
        if raw:
            return frame
        schema = load_response_schema(api_key, version)
        offset = 4 + (1 if schema.__header_schema__.__version__ == 1 else 0)
        response, _ = entity_reader(schema)(frame, offset)
        return response

    def _read(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ToolError("the broker closed the connection")
            out += chunk
        return bytes(out)

    def kio(self, api_key: int, version: int, name: str) -> Any:
        from tidelog.protocol.schema import request_types

        return getattr(request_types(api_key, version), name)


def _error(code: Any) -> str | None:
    value = int(code)
    return None if value == 0 else getattr(code, "name", str(value)).upper()


def run(args: argparse.Namespace) -> int:
    client = _Client(args.bootstrap_server)
    try:
        return _COMMANDS[args.command](client, args)
    finally:
        client.close()


def _list(client: _Client, args: argparse.Namespace) -> int:
    response = client.call(LIST_TXNS, 1, state_filters=(), producer_id_filters=())
    if _error(response.error_code):
        raise ToolError(f"ListTransactions failed: {_error(response.error_code)}")
    rows = [
        (t.transactional_id, 1, t.producer_id, t.transaction_state)
        for t in response.transaction_states
    ]
    print(format_table(("TransactionalId", "Coordinator", "ProducerId", "TransactionState"), rows))
    return EXIT_OK


def _describe_txn(client: _Client, transactional_id: str) -> TransactionStateEntry:
    frame = client.call(DESCRIBE_TXNS, 0, raw=True, transactional_ids=(transactional_id,))
    return read_describe_transactions_v0(frame, 4 + 1)[0]  # correlation id, header tags


def _describe(client: _Client, args: argparse.Namespace) -> int:
    state = _describe_txn(client, args.transactional_id)
    if state.error_code:
        raise ToolError(f"{args.transactional_id}: {_error_name(state.error_code)}")
    start = state.transaction_start_ms
    duration = int(time.time() * 1000) - start if start >= 0 else -1
    partitions = ",".join(f"{t}-{p}" for t, ps in state.topics.items() for p in ps)
    headers = ("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch",
               "TransactionState", "TransactionTimeoutMs", "CurrentTransactionStartTimeMs",
               "TransactionDurationMs", "TopicPartitions")  # fmt: skip
    row = (1, state.transactional_id, state.producer_id, state.producer_epoch,
           state.transaction_state, state.transaction_timeout_ms, start, duration,
           partitions)  # fmt: skip
    print(format_table(headers, [row]))
    return EXIT_OK


def _error_name(code: int) -> str:
    from tidelog.protocol.errors import ErrorCode

    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return str(code)


def _producers(client: _Client, topic: str, partitions: list[int]) -> list[tuple[int, Any]]:
    t = client.kio(DESCRIBE_PRODUCERS, 0, "TopicRequest")
    response = client.call(
        DESCRIBE_PRODUCERS, 0, topics=(t(name=topic, partition_indexes=tuple(partitions)),)
    )
    out: list[tuple[int, Any]] = []
    for part in response.topics[0].partitions:
        if _error(part.error_code):
            raise ToolError(f"{topic}-{part.partition_index}: {_error(part.error_code)}")
        out.extend((int(part.partition_index), p) for p in part.active_producers)
    return out


def _describe_producers(client: _Client, args: argparse.Namespace) -> int:
    rows = [
        (p.producer_id, p.producer_epoch, p.coordinator_epoch, p.last_sequence, p.last_timestamp,
         p.current_txn_start_offset if p.current_txn_start_offset >= 0 else "None")
        for _, p in _producers(client, args.topic, [args.partition])
    ]  # fmt: skip
    headers = ("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
               "LastTimestamp", "CurrentTransactionStartOffset")  # fmt: skip
    print(format_table(headers, rows))
    return EXIT_OK


def _topic_partitions(client: _Client, topic: str | None) -> dict[str, list[int]]:
    t = client.kio(METADATA, 4, "MetadataRequestTopic")
    topics = None if topic is None else (t(name=topic),)
    response = client.call(METADATA, 4, topics=topics, allow_auto_topic_creation=False)
    return {
        m.name: sorted(int(p.partition_index) for p in m.partitions)
        for m in response.topics
        if int(m.error_code) == 0
    }


def _find_hanging(client: _Client, args: argparse.Namespace) -> int:
    if args.broker_id is None and args.topic is None:
        raise ToolError("find-hanging needs --broker-id ID or --topic TOPIC", 2)
    topics = _topic_partitions(client, args.topic)
    if args.topic is not None and args.topic not in topics:
        raise ToolError(f"topic {args.topic} does not exist", 2)
    now = int(time.time() * 1000)
    max_ms = args.max_transaction_timeout * 60_000
    rows = []
    for topic, partitions in sorted(topics.items()):
        if args.partition is not None:
            partitions = [args.partition]
        for partition, p in _producers(client, topic, partitions):
            start = int(p.current_txn_start_offset)
            if start < 0 or now - int(p.last_timestamp) <= max_ms:
                continue
            if _coordinator_has(client, int(p.producer_id), topic, partition):
                continue
            minutes = (now - int(p.last_timestamp)) // 60_000
            rows.append((topic, partition, p.producer_id, p.producer_epoch,
                         p.coordinator_epoch, start, p.last_timestamp, minutes))  # fmt: skip
    headers = ("Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
               "StartOffset", "LastTimestamp", "Duration(min)")  # fmt: skip
    print(format_table(headers, rows))
    return EXIT_OK


def _coordinator_has(client: _Client, producer_id: int, topic: str, partition: int) -> bool:
    listed = client.call(LIST_TXNS, 1, state_filters=(), producer_id_filters=(producer_id,))
    for t in listed.transaction_states:
        state = _describe_txn(client, t.transactional_id)
        if state.transaction_state != "Ongoing" or state.producer_id != producer_id:
            continue
        if partition in state.topics.get(topic, []):
            return True
    return False


def _abort(client: _Client, args: argparse.Namespace) -> int:
    if args.start_offset is not None:
        found = [
            p
            for _, p in _producers(client, args.topic, [args.partition])
            if int(p.current_txn_start_offset) == args.start_offset
        ]
        if not found:
            raise ToolError(
                f"no transaction of {args.topic}-{args.partition} starts at offset "
                f"{args.start_offset} (see describe-producers)"
            )
        producer_id, epoch, coordinator_epoch = (
            int(found[0].producer_id),
            int(found[0].producer_epoch),
            max(int(found[0].coordinator_epoch), 0),
        )
    elif None not in (args.producer_id, args.producer_epoch, args.coordinator_epoch):
        producer_id, epoch, coordinator_epoch = (
            args.producer_id,
            args.producer_epoch,
            args.coordinator_epoch,
        )
    else:
        raise ToolError(
            "abort needs --start-offset N, or --producer-id, --producer-epoch and "
            "--coordinator-epoch",
            2,
        )
    topic_cls = client.kio(WRITE_MARKERS, 1, "WritableTxnMarkerTopic")
    marker_cls = client.kio(WRITE_MARKERS, 1, "WritableTxnMarker")
    response = client.call(
        WRITE_MARKERS,
        1,
        markers=(
            marker_cls(
                producer_id=producer_id,
                producer_epoch=epoch,
                transaction_result=False,
                topics=(topic_cls(name=args.topic, partition_indexes=(args.partition,)),),
                coordinator_epoch=coordinator_epoch,
            ),
        ),
    )
    error = _error(response.markers[0].topics[0].partitions[0].error_code)
    if error:
        raise ToolError(
            f"abort of producer {producer_id} on {args.topic}-{args.partition}: {error}"
        )
    print(f"aborted the transaction of producer {producer_id} on {args.topic}-{args.partition}")
    return EXIT_OK


#: The subcommands (``run`` dispatches on ``args.command``).
_COMMANDS: dict[str, Callable[[_Client, argparse.Namespace], int]] = {
    "list": _list,
    "describe": _describe,
    "describe-producers": _describe_producers,
    "find-hanging": _find_hanging,
    "abort": _abort,
}
