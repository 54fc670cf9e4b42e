"""Kafka 4.4's ``__consumer_offsets`` records of streams groups (KIP-1071), byte for byte.

From Kafka 4.4's generated ``org.apache.kafka.coordinator.group.generated.StreamsGroup*``
schemas. Keys: int16 key version, then int16-length strings; values: int16 value version 0,
then the flexible encoding (compact strings and arrays, an empty tagged-field section after
each struct; tidelog writes no tagged field and skips those it reads). A null value is a
tombstone.

====  ==========================================  ==========================================
key   key fields                                  value (version 0) fields
====  ==========================================  ==========================================
17    StreamsGroupMetadataKey: group              Epoch i32, MetadataHash i64 (written 0)
19    StreamsGroupMemberMetadataKey: group,       InstanceId str?, RackId str?, ClientId,
      member                                      ClientHost, RebalanceTimeoutMs i32,
                                                  TopologyEpoch i32, ProcessId, UserEndpoint?
                                                  (Host, Port u16), ClientTags[] (Key, Value)
20    StreamsGroupTargetAssignmentMetadataKey     AssignmentEpoch i32
21    StreamsGroupTargetAssignmentMemberKey:      ActiveTasks[], StandbyTasks[], WarmupTasks[]
      group, member                               (SubtopologyId, Partitions []i32)
22    StreamsGroupCurrentMemberAssignmentKey:     MemberEpoch, PreviousMemberEpoch i32, State
      group, member                               i8, Active/Standby/WarmupTasks[], and the
                                                  three ...PendingRevocation[]
23    StreamsGroupTopologyKey: group              Epoch i32, Subtopologies[]
====  ==========================================  ==========================================
"""

from __future__ import annotations

from tidelog.broker.group.consumer import records as consumer_records
from tidelog.broker.group.consumer.records import ConsumerKey, value_reader
from tidelog.broker.group.streams.assignor import TaskAssignment, Tasks
from tidelog.broker.group.streams.model import (
    STABLE,
    UNRELEASED_TASKS,
    UNREVOKED_TASKS,
    StreamsMember,
    TaskSet,
)
from tidelog.broker.group.streams.topology import Subtopology, TopicInfo, Topology
from tidelog.protocol.internal_topics.consumer_offsets import RecordReader, RecordWriter

__all__ = [
    "STREAMS_KEY_VERSIONS",
    "StreamsKey",
    "decode_key",
    "encode_key",
]

METADATA_KEY = 17
MEMBER_METADATA_KEY = 19
TARGET_ASSIGNMENT_METADATA_KEY = 20
TARGET_ASSIGNMENT_MEMBER_KEY = 21
CURRENT_MEMBER_ASSIGNMENT_KEY = 22
TOPOLOGY_KEY = 23
#: 18 (StreamsGroupPartitionMetadataKey, before Kafka 4.1) is read and ignored.
STREAMS_KEY_VERSIONS = frozenset({17, 18, 19, 20, 21, 22, 23})
#: Kafka's streams MemberState bytes.
_STATES = {STABLE: 1, UNREVOKED_TASKS: 2, UNRELEASED_TASKS: 3}
_STATE_NAMES = {v: k for k, v in _STATES.items()}


#: A streams-group key: its version (17-23), group and member (19, 21, 22 only).
StreamsKey = ConsumerKey


def encode_key(key: StreamsKey) -> bytes:
    return consumer_records.encode_key(key)


def decode_key(data: bytes) -> StreamsKey:
    return consumer_records.decode_key(data, STREAMS_KEY_VERSIONS)


def _value() -> RecordWriter:
    w = RecordWriter(flexible=True)
    w.i16(0)
    return w


def _tasks(w: RecordWriter, tasks: Tasks) -> None:
    items = [(s, ps) for s, ps in sorted(tasks.items()) if ps]
    w.array_len(len(items))
    for s, ps in items:
        w.string(s)
        w.array_len(len(ps))
        for p in sorted(ps):
            w.i32(p)
        w.no_tags()


def _read_tasks(r: RecordReader) -> dict[str, frozenset[int]]:
    out: dict[str, frozenset[int]] = {}
    for _ in range(r.array_len()):
        s = r.string()
        out[s] = frozenset(r.i32() for _ in range(r.array_len()))
        r.tags()
    return out


# ------------------------------------------------------------------ values


def encode_metadata_value(epoch: int) -> bytes:
    w = _value()
    w.i32(epoch)
    w.i64(0)
    w.no_tags()
    return bytes(w.buf)


def decode_epoch(data: bytes) -> int:
    r = value_reader(data)
    return r.i32()  # the rest (metadata hash, tags) is not needed


def encode_assignment_epoch_value(epoch: int) -> bytes:
    w = _value()
    w.i32(epoch)
    w.no_tags()
    return bytes(w.buf)


def encode_member_metadata_value(m: StreamsMember) -> bytes:
    w = _value()
    w.string(m.instance_id)
    w.string(m.rack_id)
    w.string(m.client_id)
    w.string(m.client_host)
    w.i32(m.rebalance_timeout_ms)
    w.i32(m.topology_epoch)
    w.string(m.process_id)
    if m.user_endpoint is None:
        w.i8(-1)  # a null struct
    else:
        w.i8(1)
        host, port = m.user_endpoint
        w.string(host)
        w.buf += port.to_bytes(2, "big")
        w.no_tags()
    w.array_len(len(m.client_tags))
    for k, v in m.client_tags:
        w.string(k)
        w.string(v)
        w.no_tags()
    w.no_tags()
    return bytes(w.buf)


def decode_member_metadata_value(member_id: str, data: bytes) -> StreamsMember:
    r = value_reader(data)
    instance_id = r.nullable_string()
    rack_id = r.nullable_string()
    client_id = r.string()
    client_host = r.string()
    rebalance_timeout_ms = r.i32()
    topology_epoch = r.i32()
    process_id = r.string()
    endpoint = None
    if r.i8() >= 0:
        host = r.string()
        port = (r.i8() & 0xFF) << 8 | (r.i8() & 0xFF)
        r.tags()
        endpoint = (host, port)
    tags = []
    for _ in range(r.array_len()):
        tags.append((r.string(), r.string()))
        r.tags()
    r.tags()
    return StreamsMember(
        member_id=member_id,
        instance_id=instance_id,
        rack_id=rack_id,
        client_id=client_id,
        client_host=client_host,
        rebalance_timeout_ms=rebalance_timeout_ms,
        topology_epoch=topology_epoch,
        process_id=process_id,
        user_endpoint=endpoint,
        client_tags=tuple(tags),
    )


def encode_target_member_value(t: TaskAssignment) -> bytes:
    w = _value()
    _tasks(w, t.active)
    _tasks(w, t.standby)
    _tasks(w, t.warmup)
    w.no_tags()
    return bytes(w.buf)


def decode_target_member_value(data: bytes) -> TaskAssignment:
    r = value_reader(data)
    active = _read_tasks(r)
    standby = _read_tasks(r)
    warmup = _read_tasks(r)
    r.tags()
    return TaskAssignment(active=active, standby=standby, warmup=warmup)


def encode_current_assignment_value(m: StreamsMember) -> bytes:
    w = _value()
    w.i32(m.member_epoch)
    w.i32(m.previous_member_epoch)
    w.i8(_STATES[m.state])
    for tasks in (m.assigned.active, m.assigned.standby, m.assigned.warmup):
        _tasks(w, tasks)
    for tasks in (m.revoking.active, m.revoking.standby, m.revoking.warmup):
        _tasks(w, tasks)
    w.no_tags()
    return bytes(w.buf)


def decode_current_assignment_value(
    data: bytes,
) -> tuple[int, int, str, TaskSet, TaskSet]:
    r = value_reader(data)
    epoch = r.i32()
    previous = r.i32()
    state = _STATE_NAMES.get(r.i8(), STABLE)
    assigned = TaskSet(active=_read_tasks(r), standby=_read_tasks(r), warmup=_read_tasks(r))
    revoking = TaskSet(active=_read_tasks(r), standby=_read_tasks(r), warmup=_read_tasks(r))
    r.tags()
    return epoch, previous, state, assigned, revoking


def _topic_infos(w: RecordWriter, infos: tuple[TopicInfo, ...]) -> None:
    w.array_len(len(infos))
    for t in infos:
        w.string(t.name)
        w.i32(t.partitions)
        w.i16(t.replication_factor)
        w.array_len(len(t.configs))
        for k, v in t.configs:
            w.string(k)
            w.string(v)
            w.no_tags()
        w.no_tags()


def _read_topic_infos(r: RecordReader) -> tuple[TopicInfo, ...]:
    out = []
    for _ in range(r.array_len()):
        name = r.string()
        partitions = r.i32()
        rf = r.i16()
        configs = []
        for _ in range(r.array_len()):
            configs.append((r.string(), r.string()))
            r.tags()
        r.tags()
        out.append(TopicInfo(name, partitions, rf, tuple(configs)))
    return tuple(out)


def _strings(w: RecordWriter, items: tuple[str, ...]) -> None:
    w.array_len(len(items))
    for s in items:
        w.string(s)


def _i16s(w: RecordWriter, items: tuple[int, ...]) -> None:
    w.array_len(len(items))
    for i in items:
        w.i16(i)


def encode_topology_value(t: Topology) -> bytes:
    w = _value()
    w.i32(t.epoch)
    w.array_len(len(t.subtopologies))
    for s in t.subtopologies:
        w.string(s.subtopology_id)
        _strings(w, s.source_topics)
        _strings(w, s.source_topic_regex)
        _topic_infos(w, s.state_changelog_topics)
        _strings(w, s.repartition_sink_topics)
        _topic_infos(w, s.repartition_source_topics)
        w.array_len(len(s.copartition_groups))
        for src, regex, rep in s.copartition_groups:
            _i16s(w, src)
            _i16s(w, regex)
            _i16s(w, rep)
            w.no_tags()
        w.no_tags()
    w.no_tags()
    return bytes(w.buf)


def decode_topology_value(data: bytes) -> Topology:
    r = value_reader(data)
    epoch = r.i32()
    subs = []
    for _ in range(r.array_len()):
        sid = r.string()
        sources = tuple(r.string() for _ in range(r.array_len()))
        regex = tuple(r.string() for _ in range(r.array_len()))
        changelogs = _read_topic_infos(r)
        sinks = tuple(r.string() for _ in range(r.array_len()))
        rep_sources = _read_topic_infos(r)
        groups = []
        for _ in range(r.array_len()):
            a = tuple(r.i16() for _ in range(r.array_len()))
            b = tuple(r.i16() for _ in range(r.array_len()))
            c = tuple(r.i16() for _ in range(r.array_len()))
            r.tags()
            groups.append((a, b, c))
        r.tags()
        subs.append(
            Subtopology(
                subtopology_id=sid,
                source_topics=sources,
                source_topic_regex=regex,
                repartition_sink_topics=sinks,
                repartition_source_topics=rep_sources,
                state_changelog_topics=changelogs,
                copartition_groups=tuple(groups),
            )
        )
    r.tags()
    return Topology(epoch=epoch, subtopologies=tuple(subs))
