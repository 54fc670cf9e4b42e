"""The machine's own limits, measured in the same run as the brokers.

- disk append: 1 MiB ``os.write`` calls to a new file in the log-dir file system, ``fsync``
  every 64 MiB and at the end (what a log append with periodic flushes costs);
- loopback TCP: one sender and one receiver thread over 127.0.0.1, 1 MiB ``sendall`` /
  ``recv_into`` (the socket calls release the GIL, so the two threads run on both cores).
"""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

MiB = 1 << 20
MB = 1_000_000

__all__ = ("disk_append", "loopback_tcp", "machine_info")


def disk_append(directory: Path, total_mib: int, fsync_every_mib: int = 64) -> dict[str, Any]:
    path = directory / "disk-append.bin"
    block = os.urandom(MiB)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        start = time.perf_counter()
        for i in range(1, total_mib + 1):
            os.write(fd, block)
            if i % fsync_every_mib == 0:
                os.fsync(fd)
        os.fsync(fd)
        seconds = time.perf_counter() - start
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)
    return {"mb_per_s": total_mib * MiB / seconds / MB, "seconds": seconds, "mib": total_mib}


def loopback_tcp(total_mib: int) -> dict[str, Any]:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    received = [0]

    def receive() -> None:
        conn, _ = server.accept()
        buf = bytearray(MiB)
        view = memoryview(buf)
        with conn:
            while True:
                n = conn.recv_into(view)
                if n == 0:
                    break
                received[0] += n

    thread = threading.Thread(target=receive, daemon=True)
    thread.start()
    block = memoryview(os.urandom(MiB))
    with socket.create_connection(("127.0.0.1", port)) as client:
        start = time.perf_counter()
        for _ in range(total_mib):
            client.sendall(block)
        client.shutdown(socket.SHUT_WR)
        thread.join(60)
        seconds = time.perf_counter() - start
    server.close()
    if received[0] != total_mib * MiB:
        raise RuntimeError(f"loopback received {received[0]} of {total_mib * MiB} bytes")
    return {"mb_per_s": total_mib * MiB / seconds / MB, "seconds": seconds, "mib": total_mib}


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _mem_total_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / (1 << 20), 1)
    except OSError:
        pass
    return 0.0


def _kcat_version() -> str:
    try:
        out = subprocess.run(["kcat", "-V"], capture_output=True, text=True, check=False)
    except OSError:
        return "not installed"
    lines = [ln.strip() for ln in out.stdout.splitlines() if ln.strip()]
    return " / ".join(ln for ln in lines if "version" in ln.lower() or "kcat" in ln.lower())[:200]


def machine_info() -> dict[str, Any]:
    try:
        import confluent_kafka

        ck = f"{confluent_kafka.version()[0]} (librdkafka {confluent_kafka.libversion()[0]})"
    except ImportError:
        ck = "not installed"
    return {
        "hostname": platform.node(),
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": _mem_total_gib(),
        "kernel": platform.release(),
        "python": sys.version.split()[0],
        "kcat": _kcat_version(),
        "confluent_kafka": ck,
    }
