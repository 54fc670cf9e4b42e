"""Two brokers driven in lock step for the restart-at-every-step differential suite
(``test_restart_differential.py``): tidelog and Apache Kafka 4.4, each behind a ``Side`` that
sends one wire request at a time (kio, ``tests/support/kafka_wire.py``), keeps the ids that
broker picked (member ids, producer ids and epochs, sequences) and restarts its broker with
SIGTERM or SIGKILL on the same port and log dir.

``observe`` is what clients can see of one example's groups, transactions and topic after a
step: OffsetFetch, DescribeGroups, ConsumerGroupDescribe, ShareGroupDescribe,
DescribeShareGroupOffsets, ListGroups, DescribeTransactions, ListTransactions and the records a
read_committed consumer gets, as plain data with what legitimately differs (ids, hosts, times,
leader epochs) replaced by markers (``tests/support/differential.normalise``).
"""

from __future__ import annotations

import base64
import signal
import struct
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.support.differential import build, errors, normalise, plain, request_class
from tests.support.kafka_wire import WireClient

__all__ = ("Names", "Side", "compare", "observe")

# Errors a client retries (the coordinator is loading after a restart, a marker is being
# written): the step is sent again until it answers something else.
RETRIABLE = frozenset(
    {
        "coordinator_load_in_progress",
        "coordinator_not_available",
        "not_coordinator",
        "concurrent_transactions",
        "not_leader_or_follower",
        "leader_not_available",
        "request_timed_out",
        "network_exception",
        "unknown_topic_or_partition",
    }
)
RETRY_FOR_S = 90.0

# Fields each broker picks for itself, beyond differential.NORMALISED.
EXTRA_MARKERS = {
    "leader_epoch": "<leader-epoch>",
    "leader_id": "<node>",
    "node_id": "<node>",
    "host": "<host>",
    "client_host": "<host>",
    "coordinator_epoch": "<coordinator-epoch>",
    "heartbeat_interval": "<interval>",
    "throttle_time": "<throttle>",
    "assignor_name": "<assignor>",
}


@dataclass(frozen=True, slots=True)
class Names:
    """One example's names: its topic, groups and transactional ids (unique per example, so
    examples share the two brokers)."""

    prefix: str

    @property
    def topic(self) -> str:
        return f"{self.prefix}-topic"

    @property
    def classic(self) -> str:
        return f"{self.prefix}-classic"

    @property
    def consumer(self) -> str:
        return f"{self.prefix}-consumer"

    @property
    def share(self) -> str:
        return f"{self.prefix}-share"

    @property
    def txn(self) -> str:
        return f"{self.prefix}-txn"

    @property
    def txn_timeout(self) -> str:
        return f"{self.prefix}-txn-timeout"

    def groups(self) -> list[str]:
        return [self.classic, self.consumer, self.share]

    def txns(self) -> list[str]:
        return [self.txn, self.txn_timeout]


@dataclass
class Producer:
    """A transactional producer as the broker answered it."""

    producer_id: int
    epoch: int
    sequences: dict[int, int] = field(default_factory=dict)


@dataclass
class Member:
    member_id: str
    epoch: int
    owned: list[dict[str, Any]] = field(default_factory=list)


class Side:
    """One broker of the pair and the ids it gave this example's clients."""

    def __init__(self, name: str, bootstrap: str, restart: Callable[[signal.Signals], None]):
        self.name = name
        self.bootstrap = bootstrap
        self._restart = restart
        self.client: WireClient | None = None
        self.reset()

    def reset(self) -> None:
        """Forget the previous example's clients."""
        self.classic: Member | None = None
        self.classic_instance: str | None = None
        self.consumers: list[Member] = []
        self.share: Member | None = None
        self.producer: Producer | None = None
        self.epochs: dict[str, set[int]] = {}

    def connection(self) -> WireClient:
        if self.client is None:
            self.client = WireClient(self.bootstrap, timeout=60.0)
        return self.client

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None

    def raw(self, api: str, version: int, fields: dict[str, Any]) -> Any:
        """One request (reconnecting while the broker is away); kio's response."""
        request = build(request_class(api, version), fields)
        deadline = time.monotonic() + RETRY_FOR_S
        while True:
            try:
                return self.connection().request(request)
            except (ConnectionError, OSError):
                self.close()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def call(self, api: str, version: int, fields: dict[str, Any], retry: bool = True) -> Any:
        """One request as plain data, sent again while it answers a retriable error."""
        deadline = time.monotonic() + RETRY_FOR_S
        while True:
            answer = plain(self.raw(api, version, fields))
            if not retry or not (set(errors(answer)) & RETRIABLE):
                return answer
            if time.monotonic() > deadline:
                return answer
            time.sleep(0.2)

    def restart(self, sig: signal.Signals) -> None:
        self.close()
        self._restart(sig)


def client_member_id() -> str:
    """A member id as Kafka 4 clients make them (a UUID in URL-safe base64)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def _sorted(value: Any) -> Any:
    """Lists of dicts in a stable order (each broker keeps members, groups and partitions in its
    own maps' order); applied after normalise, so ids do not decide the order."""
    if isinstance(value, dict):
        return {k: _sorted(v) for k, v in value.items()}
    if isinstance(value, list):
        items = [_sorted(v) for v in value]
        if items and all(isinstance(i, dict | int | str) for i in items):
            return sorted(items, key=repr)
        return items
    return value


# Epochs of consumer and share groups (KIP-848) count rebalances, and the brokers bump them at
# different points (Kafka 4.4 bumps a new group once more when it first sees its topics'
# metadata): they are compared by rank among the values each broker gave in this example, so a
# reset to an old epoch (state lost at a restart) or a step backwards still shows.
GROUP_EPOCH_KEYS = frozenset({"member_epoch", "group_epoch", "assignment_epoch", "epoch"})


def _is_epoch(key: str, value: Any) -> bool:
    return key in GROUP_EPOCH_KEYS and isinstance(value, int) and value > 0


def _collect_epochs(value: Any, into: dict[str, set[int]], group: str = "") -> None:
    """Group epochs by group (the nearest enclosing ``group_id``)."""
    if isinstance(value, dict):
        group = str(value.get("group_id", group))
        for k, v in value.items():
            if _is_epoch(k, v):
                into.setdefault(group, set()).add(v)
            else:
                _collect_epochs(v, into, group)
    elif isinstance(value, list):
        for v in value:
            _collect_epochs(v, into, group)


def _rank_epochs(value: Any, seen: dict[str, set[int]], group: str = "") -> Any:
    if isinstance(value, dict):
        group = str(value.get("group_id", group))
        ranks = sorted(seen.get(group, ()))
        return {
            k: f"epoch#{ranks.index(v)}" if _is_epoch(k, v) else _rank_epochs(v, seen, group)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_rank_epochs(v, seen, group) for v in value]
    return value


def canonical(value: Any, side: Side | None = None) -> Any:
    """``value`` with ids, hosts and times as markers, lists in a stable order and (given the
    side) group epochs as ranks (GROUP_EPOCH_KEYS)."""
    value = normalise(value, EXTRA_MARKERS)
    if side is not None:
        _collect_epochs(value, side.epochs)
        value = _rank_epochs(value, side.epochs)
    return _sorted(value)


# DescribeTransactions v0, read by hand: kio reads transaction_start_time_ms as a datetime and
# cannot read the -1 both brokers send for a transaction that has not started.
def describe_transactions(side: Side, ids: list[str]) -> Any:
    from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest

    from tests.support.kafka_wire import encode_request

    request = DescribeTransactionsRequest(transactional_ids=tuple(ids))  # type: ignore[arg-type]
    deadline = time.monotonic() + RETRY_FOR_S
    while True:
        try:
            client = side.connection()
            client.send_raw(encode_request(request, 999_999))
            frame = client.receive_frame()
            break
        except (ConnectionError, OSError):
            side.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    return _read_describe_transactions(frame)


class _Reader:
    def __init__(self, data: bytes, offset: int) -> None:
        self.data = data
        self.offset = offset

    def take(self, fmt: str) -> Any:
        (value,) = struct.unpack_from(fmt, self.data, self.offset)
        self.offset += struct.calcsize(fmt)
        return value

    def varint(self) -> int:
        shift = result = 0
        while True:
            byte = self.data[self.offset]
            self.offset += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7

    def string(self) -> str | None:
        n = self.varint() - 1
        if n < 0:
            return None
        text = self.data[self.offset : self.offset + n].decode()
        self.offset += n
        return text

    def tags(self) -> None:
        for _ in range(self.varint()):
            self.varint()
            self.offset += self.varint()


def _read_describe_transactions(frame: bytes) -> dict[str, Any]:
    r = _Reader(frame, 4)  # correlation id
    r.tags()  # response header v1
    r.take(">i")  # throttle
    states = []
    for _ in range(r.varint() - 1):
        state: dict[str, Any] = {
            "error_code": r.take(">h"),
            "transactional_id": r.string(),
            "transaction_state": r.string(),
            "transaction_timeout_ms": r.take(">i"),
            "transaction_start_time_ms": r.take(">q"),
            "producer_id": r.take(">q"),
            "producer_epoch": r.take(">h"),
        }
        topics = []
        for _ in range(r.varint() - 1):
            topic = r.string()
            partitions = [r.take(">i") for _ in range(r.varint() - 1)]
            r.tags()
            if topic and topic.startswith("__"):
                # __consumer_offsets has 50 partitions in Kafka, fewer in tidelog
                # (offsets.topic.num.partitions): which one a group hashes to differs
                partitions = [-1]
            topics.append({"topic": topic, "partitions": sorted(partitions)})
        r.tags()
        state["topics"] = topics
        if state["transaction_start_time_ms"] != -1:
            state["transaction_start_time_ms"] = "<time>"
        states.append(state)
    return {"transaction_states": states}


def read_committed_records(side: Side, topic: str, partitions: int) -> list[dict[str, Any]]:
    """What a read_committed consumer gets from offset 0 of each partition: offsets, keys and
    values of committed data (aborted batches dropped as clients drop them: KIP-98's
    aborted-transactions list and the abort markers), and each partition's stable end."""
    from kafka.record.default_records import DefaultRecordBatch
    from kafka.record.memory_records import MemoryRecords

    out = []
    for partition in range(partitions):
        fields = {
            "replica_id": -1,
            "max_wait": 0,
            "min_bytes": 1,
            "max_bytes": 1 << 22,
            "isolation_level": 1,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": topic,
                    "partitions": [
                        {
                            "partition": partition,
                            "current_leader_epoch": -1,
                            "fetch_offset": 0,
                            "last_fetched_epoch": -1,
                            "log_start_offset": -1,
                            "partition_max_bytes": 1 << 22,
                        }
                    ],
                }
            ],
            "forgotten_topics_data": [],
            "rack_id": "",
        }
        deadline = time.monotonic() + RETRY_FOR_S
        while True:
            answer = side.raw("fetch", 12, fields)
            data = answer.responses[0].partitions[0]
            error = data.error_code.name
            if error not in RETRIABLE or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        # KIP-98's consumer: an aborted transaction's batches are dropped from its first offset
        # to its abort marker (a producer can have several in one answer)
        pending = sorted(
            (int(a.first_offset), int(a.producer_id)) for a in data.aborted_transactions or ()
        )
        aborting: set[int] = set()
        records: list[tuple[int, str, str]] = []
        batches = MemoryRecords(bytes(data.records or b""))
        while True:
            batch = batches.next_batch()
            if batch is None:
                break
            assert isinstance(batch, DefaultRecordBatch)
            while pending and pending[0][0] <= batch.last_offset:
                aborting.add(pending.pop(0)[1])
            pid = batch.producer_id
            if batch.is_control_batch:
                for record in batch:
                    if record.key is not None and struct.unpack(">hh", record.key)[1] == 0:
                        aborting.discard(pid)
                continue
            if batch.is_transactional and pid in aborting:
                continue
            for record in batch:
                key = (record.key or b"").decode()
                records.append((record.offset, key, (record.value or b"").decode()))
        out.append(
            {
                "partition": partition,
                "error_code": error,
                "high_watermark": int(data.high_watermark),
                "last_stable_offset": int(data.last_stable_offset),
                "records": records,
            }
        )
    return out


_PREPARED = ("PrepareCommit", "PrepareAbort")


def _wait_markers_written(side: Side, ids: list[str]) -> None:
    """Until no transaction of ``ids`` is between EndTxn's answer and its markers (Prepare*): on
    both brokers the markers are written after EndTxn is answered, and a client that reads
    offsets with require_stable retries UNSTABLE_OFFSET_COMMIT meanwhile. After RETRY_FOR_S the
    state is compared as it is."""
    deadline = time.monotonic() + RETRY_FOR_S
    while time.monotonic() < deadline:
        states = describe_transactions(side, ids)["transaction_states"]
        if not any(t.get("transaction_state") in _PREPARED for t in states):
            return
        time.sleep(0.05)


def observe(side: Side, names: Names, partitions: int, acknowledged: bool) -> dict[str, Any]:
    """Everything a client can see of this example, canonical (see the module's doc). Until a
    share member has ``acknowledged`` records, share start offsets are not compared: Kafka 4.4
    answers -1 until the first ShareFetch initialises a partition, tidelog the offset at once."""
    _wait_markers_written(side, names.txns())
    mine = set(names.groups())
    seen: dict[str, Any] = {}
    seen["offset_fetch"] = side.call(
        "offset_fetch",
        9,
        {
            "groups": [
                {"group_id": g, "member_id": None, "member_epoch": -1, "topics": None}
                for g in (names.classic, names.consumer)
            ],
            "require_stable": True,
        },
    )["groups"]
    seen["describe_groups"] = side.call(
        "describe_groups",
        5,
        {"groups": names.groups(), "include_authorized_operations": False},
    )["groups"]
    seen["consumer_group_describe"] = side.call(
        "consumer_group_describe",
        0,
        {"group_ids": [names.consumer], "include_authorized_operations": False},
    )["groups"]
    seen["share_group_describe"] = side.call(
        "share_group_describe",
        1,
        {"group_ids": [names.share], "include_authorized_operations": False},
    )["groups"]
    seen["describe_share_group_offsets"] = side.call(
        "describe_share_group_offsets",
        0,
        {
            "groups": [
                {
                    "group_id": names.share,
                    "topics": [{"topic_name": names.topic, "partitions": list(range(partitions))}],
                }
            ]
        },
    )["groups"]
    if not acknowledged:
        for group in seen["describe_share_group_offsets"]:
            for topic in group.get("topics", []):
                for part in topic["partitions"]:
                    part["start_offset"] = -1
    listed = side.call("list_groups", 5, {"states_filter": [], "types_filter": []})
    seen["list_groups"] = {
        "error_code": listed["error_code"],
        "groups": [g for g in listed["groups"] if g["group_id"] in mine],
    }
    seen["describe_transactions"] = describe_transactions(side, names.txns())
    listed = side.call(
        "list_transactions",
        1,
        {"state_filters": [], "producer_id_filters": [], "duration_filter": -1},
    )
    seen["list_transactions"] = {
        "error_code": listed["error_code"],
        "unknown_state_filters": listed["unknown_state_filters"],
        "transaction_states": [
            t for t in listed["transaction_states"] if t["transactional_id"] in names.txns()
        ],
    }
    seen["read_committed"] = read_committed_records(side, names.topic, partitions)
    out = {k: canonical(known_differences(v), side) for k, v in seen.items()}
    for g in out["consumer_group_describe"]:
        if g.get("group_state") == "Empty":
            g["assignment_epoch"] = "x"
    return out


# Keys that name an entry of an answer; an entry answered with an error keeps only these and
# its error (clients read nothing else of it; the brokers fill the rest differently: Kafka
# answers an unknown consumer group with epochs 0, tidelog -1; an unknown transactional id
# with a producer id and epoch 0, tidelog -1).
ENTRY_KEYS = ("group_id", "transactional_id", "topic_name", "name", "partition_index")


def known_differences(value: Any) -> Any:
    """``value`` with the differences that are not issue 37's made equal (see ENTRY_KEYS; and
    DescribeShareGroupOffsets of a share group that does not exist: Kafka answers every
    partition with start offset -1, tidelog GROUP_ID_NOT_FOUND, both meaning "no offsets")."""
    if isinstance(value, list):
        return [known_differences(v) for v in value]
    if not isinstance(value, dict):
        return value
    code = value.get("error_code")
    if code == "group_id_not_found" and "group_state" in value:
        # DescribeGroups of a share group: Kafka answers NONE and Dead, tidelog
        # GROUP_ID_NOT_FOUND (both: no classic group of that name)
        return {"group_id": value["group_id"], "error_code": "none", "group_state": "Dead"}
    if code not in (None, "none", 0):
        return {k: v for k, v in value.items() if k in ENTRY_KEYS or k == "error_code"}
    if value.get("group_state") == "Dead" and value.get("members") == []:
        return {"group_id": value["group_id"], "error_code": "none", "group_state": "Dead"}
    if "group_id" in value and "topics" in value and code == "none":
        starts = [p.get("start_offset") for t in value["topics"] for p in t.get("partitions", [])]
        if starts and all(s == -1 for s in starts) and "start_offset" in str(value):
            return {"group_id": value["group_id"], "error_code": "group_id_not_found"}
    return {
        k: None if k in NULL_OR_EMPTY and v == "" else known_differences(v)
        for k, v in value.items()
    }


# Fields one broker leaves null where the other sends "" (ConsumerGroupDescribe's
# subscribed_topic_regex of a member with topic names: Kafka 4.4 "", tidelog null).
NULL_OR_EMPTY = frozenset({"subscribed_topic_regex"})


def compare(what: str, ours: Any, theirs: Any) -> None:
    """Assert tidelog's (``ours``) and Kafka's (``theirs``) canonical answers are equal, naming
    the parts that differ."""
    if ours == theirs:
        return
    if isinstance(ours, dict) and isinstance(theirs, dict):
        parts = sorted(k for k in set(ours) | set(theirs) if ours.get(k) != theirs.get(k))
        lines = [
            f"  {k}:\n    tidelog {ours.get(k)!r}\n    kafka   {theirs.get(k)!r}" for k in parts
        ]
        raise AssertionError(f"{what}: tidelog and Kafka 4.4 differ\n" + "\n".join(lines))
    raise AssertionError(
        f"{what}: tidelog and Kafka 4.4 differ\n  tidelog {ours!r}\n  kafka   {theirs!r}"
    )
