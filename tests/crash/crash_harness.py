"""Crash rounds: load a real broker, SIGKILL it at a random moment, restart it, check everything.

One run: a broker with ``log.flush.interval.messages=1``, small segments (rolls every few
hundred records), fast retention on one topic (``retention.bytes`` and a 250 ms check
interval, ``.deleted`` files removed after 500 ms), offset checkpoints as often as the broker
allows, a small compacted ``__consumer_offsets``. Several idempotent producers (acks=all) and a
consumer group run throughout. Each round:

1. let the load run for a random time, then SIGKILL the broker (some rounds also kill the
   restarted broker during its start-up, while it recovers);
2. restart it; the group consumer parks after at most the commit it had in flight, and the
   group's committed offsets must be at least every commit acknowledged before the kill;
3. wait until every send the producers made is resolved, then check the indexes against a
   rebuild, and read every partition back: each acknowledged record at its offset with the
   same key, value and headers, no duplicates, offsets contiguous from the log start, and
   every record the group consumer was handed still there;
4. resume the load.

Used by ``tests/crash/test_crash_consistency.py`` (a few kills) and ``scripts/chaos`` (many).
"""

from __future__ import annotations

import random
import re
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kafka.admin import KafkaAdminClient, NewTopic

from tests.crash.crash_checks import (
    IndexCheck,
    check_indexes,
    committed_offsets,
    compare,
    probe_lookups,
    read_back,
)
from tests.crash.crash_workload import ChaosConsumer, ChaosProducer, Ledger
from tests.support.broker_process import BrokerProcess

__all__ = ("BROKER_SETTINGS", "ChaosReport", "run_chaos")

MAIN_TOPIC = "chaos"
RETAINED_TOPIC = "chaos-retained"
GROUP = "chaos-group"
INDEX_INTERVAL_BYTES = 1024
RETENTION_BYTES = 65536
TOPICS = {MAIN_TOPIC: 3, RETAINED_TOPIC: 2}

BROKER_SETTINGS = {
    "log.flush.interval.messages": "1",
    "log.segment.bytes": "32768",
    "log.index.interval.bytes": str(INDEX_INTERVAL_BYTES),
    "log.retention.check.interval.ms": "250",
    "log.segment.delete.delay.ms": "500",
    "log.flush.offset.checkpoint.interval.ms": "100",
    "offsets.topic.num.partitions": "3",
    "offsets.topic.segment.bytes": "65536",
    "group.initial.rebalance.delay.ms": "0",
    "auto.create.topics.enable": "false",
}
RETAINED_CONFIGS = {"retention.bytes": str(RETENTION_BYTES), "segment.bytes": "16384"}
QUIET_TIMEOUT_S = 150.0
_ERROR_LINE = re.compile(r"^\S+ \S+ (ERROR|CRITICAL) |^Traceback", re.MULTILINE)


@dataclass
class ChaosReport:
    rounds: int = 0
    kills: int = 0
    kills_during_startup: int = 0
    acked: int = 0  # distinct acknowledged records at the last check
    acked_checks: int = 0  # acknowledged records checked, summed over rounds
    retained_away: int = 0
    lost: int = 0
    changed: int = 0
    duplicates: int = 0
    consumed_gone: int = 0
    conflicts: int = 0
    sends_failed: dict[str, int] = field(default_factory=dict)
    commits_checked: int = 0
    commits_regressed: int = 0
    commit_errors: dict[str, int] = field(default_factory=dict)
    segments_checked: int = 0
    recovery_time_entries: int = 0
    lookups: int = 0
    segments_cut: int = 0
    retention_deletions: int = 0
    #: What the kills interrupted, seen in the files a kill left (see ``_crash_state``).
    interrupted: dict[str, int] = field(default_factory=dict)
    broker_errors: int = 0
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not (
            self.lost
            or self.changed
            or self.duplicates
            or self.consumed_gone
            or self.conflicts
            or self.sends_failed
            or self.commits_regressed
            or self.problems
        )

    def summary(self) -> str:
        return (
            f"rounds={self.rounds} kills={self.kills} "
            f"(during start-up {self.kills_during_startup}) acknowledged={self.acked} "
            f"acknowledged-checks={self.acked_checks} lost={self.lost} "
            f"duplicated={self.duplicates} changed={self.changed} "
            f"consumed-then-gone={self.consumed_gone} conflicts={self.conflicts} "
            f"sends-failed={sum(self.sends_failed.values())} "
            f"commits-checked={self.commits_checked} commits-regressed={self.commits_regressed} "
            f"segments-checked={self.segments_checked} "
            f"recovery-time-entries={self.recovery_time_entries} lookups={self.lookups} "
            f"tails-cut={self.segments_cut} "
            f"retention-deletions={self.retention_deletions} "
            f"retained-away={self.retained_away} broker-errors={self.broker_errors} "
            f"interrupted={self.interrupted} commit-errors={self.commit_errors} "
            f"problems={len(self.problems)} seconds={self.seconds:.0f}"
        )


def _kill_during_startup(broker: BrokerProcess, delay: float) -> bool:
    """Start the broker and SIGKILL it ``delay`` s later; True if it was killed while alive."""
    outcome: list[BaseException] = []

    def start() -> None:
        try:
            broker.start()
        except RuntimeError as exc:  # exited (killed) before listening
            outcome.append(exc)

    thread = threading.Thread(target=start, daemon=True)
    thread.start()
    time.sleep(delay)
    killed = False
    while thread.is_alive() and broker.proc is None:
        time.sleep(0.01)
    proc = broker.proc
    if proc is not None and proc.poll() is None:
        proc.kill()
        killed = True
    thread.join(60)
    if proc is not None:
        proc.wait(30)
    return killed


def _crash_state(log_dir: Path) -> list[str]:
    """What a kill interrupted, from the files it left: a checkpoint or snapshot being written
    (a ``.tmp`` file), a roll (a new, still empty segment), a retention's deletion (a
    ``.deleted`` segment awaiting removal)."""
    found = set()
    for path in log_dir.rglob("*"):
        if path.name.endswith(".tmp"):
            found.add("file-write" if path.parent == log_dir else "snapshot-write")
        elif path.name.endswith(".deleted"):
            found.add("retention-delete")
    for part in log_dir.iterdir():
        logs = sorted(part.glob("*.log")) if part.is_dir() else []
        if len(logs) > 1 and logs[-1].stat().st_size == 0:
            found.add("roll")
    return sorted(found)


def _create_topics(bootstrap: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="chaos-admin")
    try:
        admin.create_topics(
            [
                NewTopic(MAIN_TOPIC, TOPICS[MAIN_TOPIC], 1),
                NewTopic(RETAINED_TOPIC, TOPICS[RETAINED_TOPIC], 1, topic_configs=RETAINED_CONFIGS),
            ]
        )
    finally:
        admin.close()


def _retained_bytes(log_dir: Path, topic: str, partition: int) -> int:
    return sum(p.stat().st_size for p in (log_dir / f"{topic}-{partition}").glob("*.log"))


def run_chaos(
    kills: int,
    *,
    seed: int | None = None,
    work_dir: Path | None = None,
    producers: int = 3,
    rate: float = 400.0,
    run_s: tuple[float, float] = (0.3, 1.5),
    startup_kill_chance: float = 0.15,
    say: Callable[[str], None] = print,
) -> ChaosReport:
    """Run rounds until ``kills`` SIGKILLs were survived; returns the figures."""
    seed = random.randrange(2**32) if seed is None else seed
    rng = random.Random(seed)
    say(f"chaos: seed {seed}, {kills} kills, {producers} idempotent producers at {rate:.0f}/s")
    report = ChaosReport()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tidelog-chaos-", dir=work_dir) as tmp:
        log_dir = Path(tmp) / "data"
        log_dir.mkdir()
        broker = BrokerProcess(log_dir, BROKER_SETTINGS)
        broker.start()
        ledger = Ledger()
        indexes = IndexCheck()
        workers: list[ChaosProducer | ChaosConsumer] = []
        try:
            _create_topics(broker.bootstrap)
            partitions = [(t, p) for t, n in TOPICS.items() for p in range(n)]
            for i in range(producers):
                workers.append(
                    ChaosProducer(
                        i, broker.bootstrap, TOPICS, ledger, rate=rate, seed=rng.randrange(2**32)
                    )
                )
            consumer = ChaosConsumer(broker.bootstrap, MAIN_TOPIC, GROUP, ledger)
            workers.append(consumer)
            for w in workers:
                w.start()
            # The first kill waits for the group's first acknowledged commit (join takes ~1 s).
            deadline = time.monotonic() + 30
            while not ledger.commits_acked and time.monotonic() < deadline:
                time.sleep(0.1)
            if not ledger.commits_acked:
                report.problems.append(f"no offset commit acknowledged in 30 s: {consumer.error!r}")
            log_seen = 0
            while report.kills < kills and report.ok:
                report.rounds += 1
                time.sleep(rng.uniform(*run_s))
                broker.kill()
                report.kills += 1
                consumer.request_pause()
                with ledger.lock:
                    commits_at_kill = dict(ledger.commits_acked)
                time.sleep(rng.uniform(0.0, 0.3))
                for what in _crash_state(log_dir):
                    report.interrupted[what] = report.interrupted.get(what, 0) + 1
                # The crash state: segments that are not the last must have complete indexes
                # (the last one is rebuilt by recovery in any case).
                check_indexes(
                    log_dir, TOPICS, INDEX_INTERVAL_BYTES, include_active=False, into=indexes
                )
                startup_kill = report.kills < kills and rng.random() < startup_kill_chance
                if startup_kill and _kill_during_startup(broker, rng.uniform(0.3, 2.5)):
                    report.kills += 1
                    report.kills_during_startup += 1
                broker.start()
                _check_round(
                    broker, ledger, consumer, workers, commits_at_kill, partitions, report, rng
                )
                check_indexes(
                    log_dir, TOPICS, INDEX_INTERVAL_BYTES, include_active=False, into=indexes
                )
                _take_index_figures(report, indexes)
                text = broker.log_text()
                new_text, log_seen = text[log_seen:], len(text)
                report.broker_errors += len(_ERROR_LINE.findall(new_text))
                report.segments_cut += new_text.count("recovered segment")
                report.retention_deletions += len(re.findall(r"deleted \d+ segment", new_text))
                say(f"chaos: round {report.rounds}: {report.summary()}")
                if not report.ok:
                    break
                for w in workers:
                    w.resume()
        finally:
            for w in workers:
                w.resume()
                w.stop()
            for w in workers:
                if w.error is not None and not any(w.name in p for p in report.problems):
                    report.problems.append(f"{w.name} died: {w.error!r}\n{w.error_trace}")
            if broker.running:
                code = broker.stop()
                if code != 0:
                    report.problems.append(f"broker exited {code} on SIGTERM")
                else:  # after a clean shutdown every segment's indexes are on disk
                    check_indexes(
                        log_dir, TOPICS, INDEX_INTERVAL_BYTES, include_active=True, into=indexes
                    )
                _take_index_figures(report, indexes)
            report.seconds = time.monotonic() - started
            if not report.ok or report.broker_errors:
                say(broker.log_text()[-20000:])
    return report


def _take_index_figures(report: ChaosReport, indexes: IndexCheck) -> None:
    report.segments_checked = indexes.segments
    report.recovery_time_entries = indexes.recovery_time_entries
    report.problems.extend(p for p in indexes.problems if p not in report.problems)


def _check_round(
    broker: BrokerProcess,
    ledger: Ledger,
    consumer: ChaosConsumer,
    workers: list[ChaosProducer | ChaosConsumer],
    commits_at_kill: dict[tuple[str, int], int],
    partitions: list[tuple[str, int]],
    report: ChaosReport,
    rng: random.Random,
) -> None:
    for w in workers:
        if w.error is not None:
            report.problems.append(f"{w.name} died: {w.error!r}\n{w.error_trace}")
            return
    # 1. Commits acknowledged before the kill survived it.
    if not consumer.wait_idle(QUIET_TIMEOUT_S):
        report.problems.append("the group consumer did not park after the restart")
        return
    committed = committed_offsets(broker.bootstrap, GROUP, partitions[: TOPICS[MAIN_TOPIC]])
    with ledger.lock:
        attempted = dict(ledger.commits_attempted)
        report.commit_errors = dict(ledger.commit_errors)
    for tp, offset in commits_at_kill.items():
        report.commits_checked += 1
        if not offset <= committed.get(tp, -1) <= attempted.get(tp, -1):
            report.commits_regressed += 1
            report.problems.append(
                f"{tp}: committed {committed.get(tp)} after the kill, acknowledged {offset} "
                f"before it, attempted at most {attempted.get(tp)}"
            )
    # 2. Every send resolved, then the broker is quiet.
    for w in workers:
        if w is not consumer and not w.pause(QUIET_TIMEOUT_S):
            report.problems.append(f"{w.name} did not settle its sends")
            return
    reads = read_back(broker.bootstrap, partitions)
    lookups, problems = probe_lookups(
        broker.bootstrap, {k: v for k, v in reads.items() if k[0] == MAIN_TOPIC}, rng, 5
    )
    report.lookups += lookups
    report.problems.extend(problems[:10])
    found = compare(ledger, reads, retention_topics=frozenset({RETAINED_TOPIC}))
    for p in range(TOPICS[RETAINED_TOPIC]):
        read = reads[(RETAINED_TOPIC, p)]
        size = _retained_bytes(broker.log_dir, RETAINED_TOPIC, p)
        if read.low > 0 and size < RETENTION_BYTES:
            found.problems.append(
                f"{RETAINED_TOPIC}-{p}: log start {read.low} but only {size} bytes kept "
                f"(retention.bytes {RETENTION_BYTES})"
            )
    with ledger.lock:
        report.acked = len(ledger.acked)
        report.conflicts = len(ledger.conflicts)
        report.sends_failed = dict(ledger.failed)
        report.problems.extend(ledger.conflicts[:5])
    report.acked_checks += found.acked_checked
    report.retained_away = found.retained_away
    report.lost += len(found.lost)
    report.changed += len(found.changed)
    report.duplicates += len(found.duplicates)
    report.consumed_gone += len(found.consumed_gone)
    report.problems.extend(found.problems[:20])
    for name, items in (
        ("lost", found.lost),
        ("changed", found.changed),
        ("duplicated", found.duplicates),
        ("consumed then gone", found.consumed_gone),
    ):
        if items:
            report.problems.append(f"{len(items)} {name}, e.g. {sorted(items)[:5]}")
