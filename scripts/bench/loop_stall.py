"""Loop stall: one-record produce latency while 32 MiB compressed batches arrive for a
compacted topic on another connection (issue 20, "The event loop never blocks").

    .venv/bin/python scripts/bench/loop_stall.py [--seconds 10] [--codec zstd] [--json]

A ``tidelog serve`` process (fresh log dir, ``message.max.bytes`` raised to 40 MiB) gets two
topics: ``stall-compacted`` (``cleanup.policy=compact``) and ``stall-probe`` (defaults). One
connection streams Produce v7 requests of one batch of about 32 MiB, compressed (zstd by
default; the records are random bytes, so the compressed batch stays about as large as its
records, which is what the broker's 32 MiB decompression limit allows), every record keyed, one
request in flight, acks=1. Another connection sends one-record (100 B) Produce v7 requests to
``stall-probe`` with acks=1, one in flight, a millisecond apart, and times each answer.

The probe runs twice: alone (the floor of this machine) and while the stream runs. Figures:
p50/p99/p99.9/max of the probe's answers in ms, the big batches acknowledged per second, the
broker's CPU seconds and the 1-minute load average. A blocked event loop shows as a p99 near
the time one big batch costs the loop (decompression and the key scan of 32k records: 50+ ms).

``measure`` is also what ``tests/broker/test_loop_stall.py`` runs (shorter).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
COMPACTED = "stall-compacted"
PROBE = "stall-probe"
#: The broker inflates at most 32 MiB of records per batch (storage.record_scan); stay under it.
BIG_RECORDS_BYTES = 31 * 1024 * 1024
MAX_MESSAGE_BYTES = 40 * 1024 * 1024
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
TARGET_P99_MS = 5.0
#: ``flush.messages`` of a probe topic whose acknowledgements do not wait for an fsync.
PAGE_CACHE = 9223372036854775807


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def build_batch(records_bytes: int, codec: str, value_size: int = 1000) -> bytes:
    """One keyed record batch of about ``records_bytes`` of random values, compressed."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=CODECS[codec],
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=records_bytes * 2,
    )
    count = max(1, records_bytes // (value_size + 20))
    blob = os.urandom(value_size * count)  # random: the compressed batch stays as large
    now = int(time.time() * 1000)
    for i in range(count):
        value = blob[i * value_size : (i + 1) * value_size]
        builder.append(i, timestamp=now, key=b"k%08d" % i, value=value, headers=[])
    return bytes(builder.build())


def _string(s: str) -> bytes:
    raw = s.encode()
    return struct.pack(">h", len(raw)) + raw


def produce_frame(topic: str, records: bytes, correlation_id: int, acks: int = 1) -> bytes:
    """A Produce v7 request of one batch for partition 0 (v7: non-flexible)."""
    body = (
        struct.pack(">hhi", 0, 7, correlation_id)
        + _string("loop-stall")
        + struct.pack(">h", -1)  # transactional id: null
        + struct.pack(">hi", acks, 30_000)
        + struct.pack(">i", 1)
        + _string(topic)
        + struct.pack(">ii", 1, 0)
        + struct.pack(">i", len(records))
        + records
    )
    return struct.pack(">i", len(body)) + body


def _read_exact(sock: socket.socket, n: int) -> bytes:
    parts = []
    while n:
        chunk = sock.recv(min(n, 1 << 20))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        parts.append(chunk)
        n -= len(chunk)
    return b"".join(parts)


def produce_error(sock: socket.socket) -> int:
    """Read one Produce v7 answer (one topic, one partition); its error code."""
    (size,) = struct.unpack(">i", _read_exact(sock, 4))
    frame = _read_exact(sock, size)
    (name_len,) = struct.unpack_from(">h", frame, 8)  # correlation id, topic count
    (error,) = struct.unpack_from(">h", frame, 10 + name_len + 8)  # partition count, index
    return int(error)


def connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


class Stream:
    """Sends the big batch again and again on one connection, one request in flight, from a
    process of its own (forked: the probe's timing never waits for this client's GIL)."""

    def __init__(self, port: int, batch: bytes) -> None:
        ctx = multiprocessing.get_context("fork")
        self.stop_at = ctx.Event()
        self._acked = ctx.Value("q", 0)
        self._error = ctx.Value("i", 0)
        self._failure = ctx.Queue()
        self._process = ctx.Process(
            target=self._run, args=(port, produce_frame(COMPACTED, batch, 1)), daemon=True
        )
        self.failure: str | None = None
        self.errors: list[int] = []

    @property
    def acked(self) -> int:
        return int(self._acked.value)

    def start(self) -> None:
        self._process.start()

    def join(self, timeout: float) -> None:
        self._process.join(timeout)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()
        if self._error.value:
            self.errors.append(int(self._error.value))
        if not self._failure.empty():
            self.failure = self._failure.get()

    def _run(self, port: int, frame: bytes) -> None:
        try:
            with connect(port) as sock:
                while not self.stop_at.is_set():
                    sock.sendall(frame)
                    error = produce_error(sock)
                    if error:
                        self._error.value = error
                        return
                    with self._acked.get_lock():
                        self._acked.value += 1
        except BaseException as exc:  # reported by the parent
            self._failure.put(repr(exc))


def probe(port: int, seconds: float, gap_s: float = 0.001) -> list[float]:
    """One-record produces for ``seconds``: each answer's latency in ms."""
    record = build_batch(100, "zstd", value_size=100)  # one keyed 100 B record (zstd)
    sock = connect(port)
    out: list[float] = []
    try:
        sock.sendall(produce_frame(PROBE, record, 0))  # warm-up: topic look-up, first segment
        produce_error(sock)
        end = time.perf_counter() + seconds
        cid = 1
        while time.perf_counter() < end:
            frame = produce_frame(PROBE, record, cid)
            started = time.perf_counter()
            sock.sendall(frame)
            error = produce_error(sock)
            out.append((time.perf_counter() - started) * 1000)
            if error:
                raise RuntimeError(f"probe produce failed with error code {error}")
            cid += 1
            time.sleep(gap_s)
    finally:
        sock.close()
    return out


def summary(latencies_ms: list[float]) -> dict[str, float]:
    ordered = sorted(latencies_ms)

    def pct(p: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(len(ordered) * p))], 3)

    return {
        "count": len(ordered),
        "p50_ms": round(statistics.median(ordered), 3),
        "p99_ms": pct(0.99),
        "p999_ms": pct(0.999),
        "max_ms": round(ordered[-1], 3),
    }


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _start_broker(log_dir: Path, port: int) -> tuple[subprocess.Popen[bytes], Path]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    log_path = log_dir.parent / "broker.log"
    args = [
        sys.executable,
        "-m",
        "tidelog",
        "serve",
        "--override",
        f"listeners=PLAINTEXT://127.0.0.1:{port}",
        "--override",
        f"log.dirs={log_dir}",
        "--override",
        f"message.max.bytes={MAX_MESSAGE_BYTES}",
    ]
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(args, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if "tidelog listening on" in log_path.read_text(errors="replace"):
            return proc, log_path
        if proc.poll() is not None:
            raise RuntimeError("broker exited:\n" + log_path.read_text(errors="replace"))
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError("broker did not listen in 60 s")


def _create_topics(port: int, durable_probe: bool) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}", request_timeout_ms=30_000)
    try:
        admin.create_topics(
            [
                NewTopic(
                    COMPACTED,
                    1,
                    1,
                    topic_configs={
                        "cleanup.policy": "compact",
                        "max.message.bytes": str(MAX_MESSAGE_BYTES),
                    },
                ),
                NewTopic(
                    PROBE,
                    1,
                    1,
                    topic_configs={} if durable_probe else {"flush.messages": str(PAGE_CACHE)},
                ),
            ]
        )
    finally:
        admin.close()


def measure(
    seconds: float = 10.0,
    codec: str = "zstd",
    work: Path | None = None,
    *,
    durable_probe: bool = False,
    alone_seconds: float = 3.0,
) -> dict[str, Any]:
    """Start a broker, probe alone, then probe under the stream; the figures (see the module)."""
    own = work is None
    workdir = Path(tempfile.mkdtemp(prefix="tidelog-loop-stall-")) if work is None else work
    port = free_port()
    proc, log_path = _start_broker(workdir / "data", port)
    try:
        _create_topics(port, durable_probe)
        batch = build_batch(BIG_RECORDS_BYTES, codec)
        alone = summary(probe(port, alone_seconds))
        cpu_before = _cpu_s(proc.pid)
        stream = Stream(port, batch)
        stream.start()
        time.sleep(0.5)  # the first batches are on their way
        started = time.perf_counter()
        loaded = probe(port, seconds)
        elapsed = time.perf_counter() - started
        stream.stop_at.set()
        stream.join(60)
        if stream.failure is not None:
            raise RuntimeError(f"the stream failed: {stream.failure}")
        if stream.errors:
            raise RuntimeError(f"the stream's produce failed with error code {stream.errors[0]}")
        return {
            "codec": codec,
            "probe_acks_after_fsync": durable_probe,
            "batch_bytes": len(batch),
            "seconds": round(elapsed, 2),
            "alone": alone,
            "under_stream": summary(loaded),
            "big_batches_acked": stream.acked,
            "big_mb_per_s": round(stream.acked * len(batch) / elapsed / 1e6, 1),
            "broker_cpu_s": round(_cpu_s(proc.pid) - cpu_before, 2),
            "loadavg_1m": round(os.getloadavg()[0], 2),
            "target_p99_ms": TARGET_P99_MS,
        }
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if own:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(log_path.read_text(errors="replace")[-2000:], file=sys.stderr)


def render(result: dict[str, Any]) -> str:
    a, u = result["alone"], result["under_stream"]
    verdict = "met" if u["p99_ms"] <= result["target_p99_ms"] else "NOT met"
    probe_acks = "after fsync" if result["probe_acks_after_fsync"] else "from the page cache"
    return (
        f"loop-stall ({result['codec']}, {result['batch_bytes'] / 2**20:.1f} MiB batches to a "
        f"compacted topic, probe acks {probe_acks}, load average {result['loadavg_1m']}):\n"
        f"  one-record produce alone:        p50 {a['p50_ms']} ms, p99 {a['p99_ms']} ms, "
        f"p99.9 {a['p999_ms']} ms, max {a['max_ms']} ms ({a['count']} requests)\n"
        f"  ... while the big batches arrive: p50 {u['p50_ms']} ms, p99 {u['p99_ms']} ms, "
        f"p99.9 {u['p999_ms']} ms, max {u['max_ms']} ms ({u['count']} requests)\n"
        f"  big batches acknowledged: {result['big_batches_acked']} "
        f"({result['big_mb_per_s']} MB/s), broker CPU {result['broker_cpu_s']} s\n"
        f"  {verdict}: p99 <= {result['target_p99_ms']} ms under the stream"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--seconds", type=float, default=10.0, help="probe time under the stream")
    p.add_argument("--codec", choices=sorted(CODECS), default="zstd")
    p.add_argument(
        "--durable-probe",
        action="store_true",
        help="the probe topic keeps the default flush.messages=1 (its acks wait for an fsync, "
        "which queues in the disk behind the big batches' fsyncs); by default its acks come "
        "from the page cache, which measures the event loop alone",
    )
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--keep", type=Path, default=None, help="work in this directory, keep it")
    args = p.parse_args(argv)
    result = measure(args.seconds, args.codec, args.keep, durable_probe=args.durable_probe)
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
