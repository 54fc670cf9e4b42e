"""One ``tidelog serve`` subprocess on a free 127.0.0.1 port, for the benches that need a plain
broker of their own (``sink.py``, ``share_groups.py``); the side-by-side suite uses
``servers.py``."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def start_broker(
    log_dir: Path, overrides: Sequence[str] = (), timeout_s: float = 60.0
) -> tuple[subprocess.Popen[bytes], str]:
    """Start the broker on ``log_dir`` (``overrides``: extra ``KEY=VALUE`` settings) and wait
    until its port accepts; returns the process and its bootstrap address."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "tidelog", "serve",
           "--override", f"log.dirs={log_dir}",
           "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
           "--log-level", "WARNING"]  # fmt: skip
    for setting in overrides:
        cmd += ["--override", setting]
    proc = subprocess.Popen(cmd, cwd=ROOT)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("broker did not start")
