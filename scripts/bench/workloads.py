"""The workloads. Each returns a dict of figures for one run against one server.

kcat runs as its own process; the Python clients (confluent-kafka, the raw latency client) run
in a child process of this file (``python workloads.py ROLE JSON``, one JSON line out), so the
suite's own threads never share a GIL with a timed loop. Every loop is bounded by a count and
a time limit.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PYTHON = sys.executable
MB = 1_000_000

__all__ = (
    "KCAT_PRODUCE_SETTINGS",
    "create_topic",
    "ck_consume",
    "ck_produce",
    "ck_sync_produce",
    "e2e_latency",
    "histogram",
    "end_offset",
    "kcat_consume",
    "kcat_produce",
    "make_message_file",
    "percentile",
    "sync_latency",
)

#: What a user tuning kcat for throughput passes (librdkafka 2.0.2's defaults, made explicit).
KCAT_PRODUCE_SETTINGS: dict[str, str] = {"linger.ms": "5", "batch.num.messages": "10000"}


def percentile(sorted_values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile of an ascending sequence."""
    if not sorted_values:
        return float("nan")
    rank = max(int(-(-p * len(sorted_values) // 100)), 1)  # ceil(p/100 * n)
    return float(sorted_values[min(rank, len(sorted_values)) - 1])


#: Histogram bucket upper bounds (ms) of the latency distributions the bench prints.
HISTOGRAM_MS: tuple[float, ...] = (
    0.05,
    0.075,
    0.1,
    0.125,
    0.15,
    0.2,
    0.3,
    0.5,
    1.0,
    2.0,
    5.0,
    10.0,
    float("inf"),
)


def histogram(sorted_ms: Sequence[float]) -> list[tuple[float, int]]:
    """(upper bound in ms, count of samples above the previous bound and up to it)."""
    out: list[tuple[float, int]] = []
    i = 0
    n = len(sorted_ms)
    for bound in HISTOGRAM_MS:
        start = i
        while i < n and sorted_ms[i] <= bound:
            i += 1
        out.append((bound, i - start))
    return out


def distribution(sorted_ms: Sequence[float]) -> dict[str, Any]:
    """p50/p90/p99/p99.9/max (ms) and a histogram of an ascending list of latencies in ms."""
    return {
        "count": len(sorted_ms),
        "p50_ms": percentile(sorted_ms, 50),
        "p90_ms": percentile(sorted_ms, 90),
        "p99_ms": percentile(sorted_ms, 99),
        "p999_ms": percentile(sorted_ms, 99.9),
        "max_ms": float(sorted_ms[-1]) if sorted_ms else float("nan"),
        "histogram_ms": histogram(sorted_ms),
    }


def make_message_file(path: Path, count: int, size: int) -> None:
    """``count`` lines of ``size`` bytes (plus a newline each) for ``kcat -P -l``."""
    if path.exists() and path.stat().st_size == count * (size + 1):
        return
    tail = b"x" * (size - 8) + b"\n"
    with open(path, "wb") as f:
        step = 100_000
        for start in range(0, count, step):
            f.write(
                b"".join(
                    b"%08d" % (i % 100_000_000) + tail
                    for i in range(start, min(start + step, count))
                )
            )


# --------------------------------------------------------------------------- admin


def create_topic(
    bootstrap: str, name: str, configs: dict[str, str] | None = None, partitions: int = 1
) -> None:
    """``partitions`` partitions (default one), replication factor 1; raises if the broker
    refuses."""
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=configs or {})],
        operation_timeout=30,
        request_timeout=30,
    )
    futures[name].result(timeout=60)
    # Wait until the topic is in the metadata (brokers may create asynchronously).
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        md = admin.list_topics(topic=name, timeout=10)
        topic = md.topics.get(name)
        if topic is not None and topic.error is None and topic.partitions:
            return
        time.sleep(0.1)
    raise RuntimeError(f"topic {name} did not appear in the metadata")


def end_offset(bootstrap: str, topic: str, expect: int | None = None, wait_s: float = 5.0) -> int:
    """The partition's high watermark; with ``expect``, re-asked for up to ``wait_s`` until it
    gets there (a broker may move its HW a little after the produce answers)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "tidelog-bench-watermarks"})
    try:
        deadline = time.monotonic() + wait_s
        while True:
            _, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
            if expect is None or high >= expect or time.monotonic() > deadline:
                return int(high)
            time.sleep(0.1)
    finally:
        c.close()


# --------------------------------------------------------------------------- kcat


def _kcat_x(settings: dict[str, str]) -> list[str]:
    out: list[str] = []
    for key, value in settings.items():
        out += ["-X", f"{key}={value}"]
    return out


def kcat_produce(
    bootstrap: str,
    topic: str,
    message_file: Path,
    count: int,
    size: int,
    *,
    acks: str = "1",
    settings: dict[str, str] | None = None,
    time_limit: float = 300.0,
) -> dict[str, Any]:
    """``kcat -P -l``; wall time from spawn to exit (kcat flushes every message first)."""
    x = {"acks": acks, **(settings or KCAT_PRODUCE_SETTINGS)}
    argv = ["kcat", "-b", bootstrap, "-P", "-t", topic, "-p", "0", "-l", str(message_file)]
    argv += _kcat_x(x)
    before = end_offset(bootstrap, topic)
    start = time.perf_counter()
    proc = _run(argv, time_limit)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"kcat exited {proc.returncode}: {proc.stderr.decode()[-800:]}")
    written = end_offset(bootstrap, topic, before + count) - before
    if written != count:
        raise RuntimeError(
            f"kcat produced {written} of {count} messages: {proc.stderr.decode()[-800:]}"
        )
    return {
        "seconds": seconds,
        "msgs_per_s": count / seconds,
        "mb_per_s": count * size / seconds / MB,
        "command": " ".join(argv),
    }


def kcat_consume(
    bootstrap: str,
    topic: str,
    count: int,
    *,
    time_limit: float = 120.0,
    debug: str | None = None,
) -> dict[str, Any]:
    """``kcat -C -e`` from the beginning to the end of the partition; prints offsets only.
    ``debug``: librdkafka's ``debug`` contexts (e.g. ``fetch,msg``), whose lines come back as
    ``debug_lines`` (``-q`` would silence them, so it is left out then)."""
    argv = ["kcat", "-b", bootstrap, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e"]
    # fetch.wait.max.ms: -e ends on an empty fetch at the end of the partition, which a broker
    # holds for fetch.wait.max.ms (500 ms by default) - a constant that is not throughput.
    argv += ["-X", "fetch.wait.max.ms=10"]
    argv += ["-X", f"debug={debug}"] if debug else ["-q"]
    argv += ["-f", "%o\\n"]
    start = time.perf_counter()
    proc = _run(argv, time_limit)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"kcat exited {proc.returncode}: {proc.stderr.decode()[-800:]}")
    lines = proc.stdout.count(b"\n")
    if lines != count:
        raise RuntimeError(f"kcat consumed {lines} of {count} messages")
    figures: dict[str, Any] = {
        "seconds": seconds,
        "msgs_per_s": count / seconds,
        "command": " ".join(argv),
    }
    if debug:
        figures["debug_lines"] = proc.stderr.decode(errors="replace").splitlines()
    return figures


# --------------------------------------------------------------------------- child processes

#: Set (by the suite) when the server under test died or was killed: running clients stop
#: instead of retrying a dead broker until their time limit.
ABORT = threading.Event()


def _run(argv: list[str], time_limit: float) -> subprocess.CompletedProcess[bytes]:
    """``subprocess.run(argv, capture_output=True)`` that also ends at ``ABORT``."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdout=out, stderr=err)
        deadline = time.monotonic() + time_limit
        while True:
            try:
                proc.wait(0.2)
                break
            except subprocess.TimeoutExpired:
                if ABORT.is_set() or time.monotonic() > deadline:
                    proc.kill()
                    proc.wait()
                    why = "the server died" if ABORT.is_set() else f"{time_limit:.0f} s passed"
                    raise RuntimeError(f"{Path(argv[0]).name} stopped: {why}") from None
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(argv, proc.returncode, out.read(), err.read())


def _child(role: str, args: dict[str, Any], time_limit: float) -> dict[str, Any]:
    proc = _run([PYTHON, str(HERE / "workloads.py"), role, json.dumps(args)], time_limit)
    if proc.returncode != 0:
        raise RuntimeError(f"{role} exited {proc.returncode}: {proc.stderr.decode()[-1500:]}")
    result: dict[str, Any] = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    return result


def ck_produce(
    bootstrap: str,
    topic: str,
    count: int,
    size: int,
    *,
    acks: str,
    linger_ms: float,
    time_limit: float = 300.0,
) -> dict[str, Any]:
    """confluent-kafka from one Python process: produce() as fast as it returns, then flush."""
    args = {
        "bootstrap": bootstrap,
        "topic": topic,
        "count": count,
        "size": size,
        "acks": acks,
        "linger_ms": linger_ms,
        "time_limit": time_limit,
    }
    before = end_offset(bootstrap, topic)
    result = _child("ck-produce", args, time_limit + 30)
    written = end_offset(bootstrap, topic, before + count) - before
    if written != count:
        # Every message was acknowledged (flush() left none), yet the log holds fewer: the
        # suite reports the rate with this count next to it (an error for tidelog).
        result["acked_not_in_log"] = count - written
    result["mb_per_s"] = count * size / result["seconds"] / MB
    return result


def ck_consume(
    bootstrap: str, topic: str, count: int, *, time_limit: float = 120.0
) -> dict[str, Any]:
    args = {"bootstrap": bootstrap, "topic": topic, "count": count, "time_limit": time_limit}
    return _child("ck-consume", args, time_limit + 30)


def sync_latency(
    bootstrap: str, topic: str, count: int, *, acks: int = 1, time_limit: float = 60.0
) -> dict[str, Any]:
    args = {
        "bootstrap": bootstrap,
        "topic": topic,
        "count": count,
        "acks": acks,
        "time_limit": time_limit,
    }
    return _child("sync-latency", args, time_limit + 30)


def ck_sync_produce(
    bootstrap: str,
    topic: str,
    count: int,
    *,
    size: int = 100,
    acks: str = "all",
    warmup: int = 1000,
    time_limit: float = 120.0,
) -> dict[str, Any]:
    """confluent-kafka, one record in flight: ``produce()`` then ``flush()``, timed per record
    (what an application calling ``produce(...); flush()`` per record waits for)."""
    args = {
        "bootstrap": bootstrap,
        "topic": topic,
        "count": count,
        "size": size,
        "acks": acks,
        "warmup": warmup,
        "time_limit": time_limit,
    }
    return _child("ck-sync-produce", args, time_limit + 30)


def e2e_latency(
    bootstrap: str, topic: str, rate: int, seconds: float, *, warmup_s: float = 1.0
) -> dict[str, Any]:
    """A paced producer process and a consumer process; latency = consumer receipt - produce()
    call, both read from CLOCK_MONOTONIC (one clock for every process on the machine)."""
    count = int(rate * seconds)
    limit = seconds + 60
    consumer = subprocess.Popen(
        [
            PYTHON,
            str(HERE / "workloads.py"),
            "e2e-consumer",
            json.dumps(
                {"bootstrap": bootstrap, "topic": topic, "count": count, "time_limit": limit}
            ),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert consumer.stdout is not None
        ready = consumer.stdout.readline().decode().strip()
        if ready != "ready":
            raise RuntimeError(f"e2e consumer did not start: {ready!r}")
        produced = _child(
            "e2e-producer",
            {"bootstrap": bootstrap, "topic": topic, "count": count, "rate": rate},
            limit,
        )
        out, err = consumer.communicate(timeout=limit)
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait()
    if consumer.returncode != 0:
        raise RuntimeError(f"e2e consumer exited {consumer.returncode}: {err.decode()[-1500:]}")
    lat_us: list[float] = json.loads(out.decode().strip().splitlines()[-1])["latencies_us"]
    warmup = int(rate * warmup_s)
    measured = sorted(lat_us[warmup:])
    if len(lat_us) != count:
        raise RuntimeError(f"e2e consumer got {len(lat_us)} of {count} messages")
    return {
        **distribution([us / 1000 for us in measured]),
        "achieved_rate": produced["achieved_rate"],
    }


# --------------------------------------------------------------------------- roles (children)


def _role_ck_produce(a: dict[str, Any]) -> dict[str, Any]:
    from confluent_kafka import Producer

    config = {
        "bootstrap.servers": a["bootstrap"],
        "acks": a["acks"],
        "linger.ms": a["linger_ms"],
    }
    p = Producer(config)
    p.list_topics(a["topic"], timeout=30)  # connect and learn the leader before the clock
    value = b"v" * a["size"]
    produce, poll = p.produce, p.poll
    topic = a["topic"]
    deadline = time.monotonic() + a["time_limit"]
    start = time.perf_counter()
    i = 0
    count = a["count"]
    while i < count:
        try:
            produce(topic, value, partition=0)
            i += 1
        except BufferError:
            poll(0.0005)
            if time.monotonic() > deadline:
                raise TimeoutError(f"produced {i} of {count} in the time limit") from None
    left = p.flush(max(deadline - time.monotonic(), 1))
    seconds = time.perf_counter() - start
    if left:
        raise TimeoutError(f"{left} messages still queued at the time limit")
    return {"seconds": seconds, "msgs_per_s": count / seconds, "client_settings": config}


def _role_ck_consume(a: dict[str, Any]) -> dict[str, Any]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": a["bootstrap"],
            "group.id": "tidelog-bench",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        }
    )
    c.assign([TopicPartition(a["topic"], 0, 0)])
    count = a["count"]
    got = 0
    deadline = time.monotonic() + a["time_limit"]
    start = time.perf_counter()
    while got < count and time.monotonic() < deadline:
        for m in c.consume(min(10_000, count - got), 1.0):
            if m.error() is None:
                got += 1
    seconds = time.perf_counter() - start
    c.close()
    if got < count:
        raise TimeoutError(f"consumed {got} of {count} in the time limit")
    return {"seconds": seconds, "msgs_per_s": count / seconds}


def _role_ck_sync_produce(a: dict[str, Any]) -> dict[str, Any]:
    from confluent_kafka import Producer

    config = {"bootstrap.servers": a["bootstrap"], "acks": a["acks"], "linger.ms": 0}
    p = Producer(config)
    p.list_topics(a["topic"], timeout=30)
    failed: list[str] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(str(err))

    value = b"s" * a["size"]
    topic = a["topic"]
    produce, flush = p.produce, p.flush
    clock = time.perf_counter_ns
    for _ in range(a["warmup"]):  # connection, page cache, code paths
        produce(topic, value, partition=0, on_delivery=delivered)
        flush(10)
    samples: list[int] = []
    count = a["count"]
    deadline = time.monotonic() + a["time_limit"]
    while len(samples) < count and time.monotonic() < deadline:
        started = clock()
        produce(topic, value, partition=0, on_delivery=delivered)
        flush(10)
        samples.append(clock() - started)
    if failed:
        raise RuntimeError(f"{len(failed)} deliveries failed, first: {failed[0]}")
    if len(samples) < count:
        raise TimeoutError(f"{len(samples)} of {count} records in the time limit")
    samples.sort()
    return {**distribution([s / 1e6 for s in samples]), "client_settings": config}


def _role_sync_latency(a: dict[str, Any]) -> dict[str, Any]:
    from rawkafka import ProduceLatencyClient

    host, port = a["bootstrap"].rsplit(":", 1)
    client = ProduceLatencyClient(host, int(port), a["topic"], acks=a["acks"])
    deadline = time.monotonic() + a["time_limit"]
    for _ in range(min(1000, a["count"])):  # warm-up: connection, page cache, code paths
        client.produce_once()
    samples: list[int] = []
    while len(samples) < a["count"] and time.monotonic() < deadline:
        samples.append(client.produce_once())
    client.close()
    samples.sort()
    return {
        "count": len(samples),
        "p50_ms": percentile(samples, 50) / 1e6,
        "p99_ms": percentile(samples, 99) / 1e6,
        "p999_ms": percentile(samples, 99.9) / 1e6,
        "max_ms": samples[-1] / 1e6,
    }


_STAMP = struct.Struct(">q")


def _role_e2e_producer(a: dict[str, Any]) -> dict[str, Any]:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": a["bootstrap"], "acks": "1", "linger.ms": 0})
    p.list_topics(a["topic"], timeout=30)
    pad = b"p" * (100 - _STAMP.size)
    rate, count, topic = a["rate"], a["count"], a["topic"]
    start = time.monotonic()
    i = 0
    while i < count:
        due = min(int((time.monotonic() - start) * rate) + 1, count)
        while i < due:
            p.produce(topic, _STAMP.pack(time.monotonic_ns()) + pad, partition=0)
            i += 1
        p.poll(0)
        next_at = start + i / rate
        delay = next_at - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    p.flush(30)
    return {"achieved_rate": count / (time.monotonic() - start)}


def _role_e2e_consumer(a: dict[str, Any]) -> None:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": a["bootstrap"],
            "group.id": "tidelog-bench-e2e",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    c.assign([TopicPartition(a["topic"], 0, 0)])
    c.consume(1, 1.0)  # first fetch round trip before the producer starts
    print("ready", flush=True)
    lat: list[float] = []
    count = a["count"]
    deadline = time.monotonic() + a["time_limit"]
    unpack = _STAMP.unpack_from
    poll = c.poll
    # poll() returns as soon as one message is there (consume(n) waits for n or its timeout).
    while len(lat) < count and time.monotonic() < deadline:
        m = poll(0.2)
        now = time.monotonic_ns()
        if m is not None and m.error() is None:
            value = m.value()
            assert value is not None
            lat.append((now - unpack(value)[0]) / 1000)
    c.close()
    print(json.dumps({"latencies_us": lat}), flush=True)


def _main(argv: list[str]) -> int:
    role, args = argv[1], json.loads(argv[2])
    if role == "e2e-consumer":
        _role_e2e_consumer(args)
        return 0
    roles = {
        "ck-produce": _role_ck_produce,
        "ck-consume": _role_ck_consume,
        "sync-latency": _role_sync_latency,
        "ck-sync-produce": _role_ck_sync_produce,
        "e2e-producer": _role_e2e_producer,
    }
    print(json.dumps(roles[role](args)), flush=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(_main(sys.argv))
