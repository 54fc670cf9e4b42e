"""Exactly-once writes: one Kafka transaction per sink task, committed by the Spark driver.

A task writes its rows inside a transaction of its own transactional id and flushes, but does
not commit: it hands the driver a `TxnHandle` (transactional id, producer id, epoch) in its
WriterCommitMessage. When every task has succeeded, Spark calls the writer's commit on the driver,
which ends each transaction with EndTxn(commit) at the transaction coordinator; on failure it
ends them with EndTxn(abort). (Flink's Kafka sink resumes transactions the same way.)

Replays: a streaming task also commits, inside its transaction, the micro-batch id as the offset
of a consumer group named after its transactional id (TxnOffsetCommit). That offset becomes
visible exactly when the transaction commits, so a task of a replayed micro-batch reads it first
and writes nothing when its batch id is already committed. `init_transactions` fences an older
attempt of the same task (same transactional id) and aborts what it left open.

A replayed micro-batch is planned from the offsets Spark logged for it, so task i of the replay
gets the rows task i had (the source's ranges and Spark's shuffle partitions are deterministic).

Ids: `<prefix>-<spark partition id>`; the prefix is `kafka.transactional.id` when set, else
`tidelog-<query id>` for a streaming query (stable across restarts from its checkpoint) or
`tidelog-<random>` for one batch write.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


class TransactionsUnsupported(RuntimeError):
    """The broker did not start a transactional producer."""


@dataclass(frozen=True, slots=True)
class TxnHandle:
    """An open transaction a task leaves for the driver to end."""

    transactional_id: str
    producer_id: int
    producer_epoch: int


def transactional_id(prefix: str, partition_id: int) -> str:
    return f"{prefix}-{partition_id}"


def _admin_config(producer_cfg: dict[str, Any]) -> dict[str, Any]:
    """The connection settings of a producer config, for an admin client."""
    from kafka.admin import KafkaAdminClient

    keep = set(KafkaAdminClient.DEFAULT_CONFIG) - {"client_id"}
    cfg = {k: v for k, v in producer_cfg.items() if k in keep}
    cfg["client_id"] = "tidelog-sink-admin"
    return cfg


def handle_of(producer: Any) -> TxnHandle:
    """The open transaction of a kafka-python transactional producer.

    kafka-python has no public accessor for the producer id and epoch; they live on its
    transaction manager (the same object its own EndTxn handler reads them from)."""
    tm = producer._transaction_manager
    pe = tm.producer_id_and_epoch
    return TxnHandle(str(tm.transactional_id), int(pe.producer_id), int(pe.epoch))


def batch_marker(topic: str, batch_id: int, query_id: str | None) -> dict[Any, Any]:
    """The offsets a task commits in its transaction: the batch id, on partition 0 of a topic
    it writes (any existing partition works; the group is the task's own)."""
    from kafka import OffsetAndMetadata, TopicPartition

    meta = json.dumps({"batch": batch_id, "query": query_id}, separators=(",", ":"))
    return {TopicPartition(topic, 0): OffsetAndMetadata(batch_id, meta, -1)}


def last_committed_batch(producer_cfg: dict[str, Any], group: str) -> int | None:
    """The highest micro-batch id committed by transactional id `group`, or None."""
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(**_admin_config(producer_cfg))
    try:
        got = admin.list_group_offsets(group).get(group, {})
    finally:
        admin.close()
    batches = [int(om.offset) for om in got.values() if om is not None and om.offset >= 0]
    return max(batches) if batches else None


async def _end_all(admin: Any, handles: list[TxnHandle], committed: bool) -> None:
    import kafka.errors as errors
    from kafka.protocol.metadata import CoordinatorType
    from kafka.protocol.producer.transaction import EndTxnRequest

    ids = [h.transactional_id for h in handles]
    coordinators = await admin._find_coordinator_ids(ids, key_type=CoordinatorType.TRANSACTION)
    for h in handles:
        request = EndTxnRequest(
            transactional_id=h.transactional_id,
            producer_id=h.producer_id,
            producer_epoch=h.producer_epoch,
            committed=committed,
            max_version=3,
        )
        response = await admin._manager.send(request, node_id=coordinators[h.transactional_id])
        error = errors.for_code(response.error_code)
        if error is not errors.NoError:
            raise error(
                f"EndTxn({'commit' if committed else 'abort'}) of {h.transactional_id} "
                f"(producer {h.producer_id}, epoch {h.producer_epoch})"
            )


def end_transactions(producer_cfg: dict[str, Any], handles: list[TxnHandle], commit: bool) -> None:
    """Commit (or abort) the transactions tasks left open, from the driver.

    Uses kafka-python's admin client to find each transactional id's coordinator and send
    EndTxn (its admin client does the same for DescribeTransactions)."""
    if not handles:
        return
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(**_admin_config(producer_cfg))
    try:
        admin._manager.run(_end_all, admin, handles, commit)
    finally:
        admin.close()


def check_transactions(
    producer_cfg: dict[str, Any], timeout_ms: int = 10_000, prefix: str | None = None
) -> None:
    """Raise `TransactionsUnsupported` unless InitProducerId with a transactional id succeeds
    (the id `<prefix>-probe`, so prefix ACLs that allow the writers allow the probe)."""
    from kafka import KafkaProducer

    cfg = dict(producer_cfg)
    cfg.update(
        transactional_id=f"{prefix or 'tidelog-sink'}-probe",
        enable_idempotence=True,
        max_block_ms=timeout_ms,
        bootstrap_timeout_ms=min(int(cfg.get("bootstrap_timeout_ms", timeout_ms)), timeout_ms),
    )
    try:
        producer = KafkaProducer(**cfg)
    except Exception as e:
        raise TransactionsUnsupported(f"cannot reach the broker: {e!r}") from e
    try:
        producer.init_transactions()
    except Exception as e:
        raise TransactionsUnsupported(
            f"the broker does not support transactions (InitProducerId with a transactional "
            f"id failed: {e!r})"
        ) from e
    finally:
        producer.close(timeout=2)
