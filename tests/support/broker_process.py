"""A REAL tidelog broker in a subprocess, started exactly as ``tidelog serve`` is
(``python -m tidelog serve``) on a free 127.0.0.1 port with a given log dir.

The fixtures of ``tests/conftest.py`` (``broker``, ``broker_factory``, ``module_broker``) hand
these out; crash, fault, fuzz and load helpers (and ``scripts/chaos``) start them directly.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from tests.support.net import free_port

__all__ = ("LISTENING", "BrokerProcess", "serve_to_the_end")

ROOT = Path(__file__).resolve().parents[2]
LISTENING = "tidelog listening on"
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0


class BrokerProcess:
    """One broker subprocess; survives restarts on the same port and log dir."""

    def __init__(
        self,
        log_dir: Path,
        overrides: Mapping[str, str] | None = None,
        port: int | None = None,
        config_path: Path | None = None,
        start_timeout_s: float = START_TIMEOUT_S,
    ) -> None:
        self.host = "127.0.0.1"
        self.port = port or free_port()
        self.log_dir = log_dir
        self.overrides: dict[str, str] = dict(overrides or {})
        self.config_path = config_path
        self.start_timeout_s = start_timeout_s
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self._log_paths: list[Path] = []

    @property
    def bootstrap(self) -> str:
        """``host:port`` for a client's bootstrap servers."""
        return f"{self.host}:{self.port}"

    def command(self) -> list[str]:
        args = [sys.executable, "-m", "tidelog", "serve"]
        if self.config_path is not None:
            args += ["--config", str(self.config_path)]
        settings = {
            "listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "log.dirs": str(self.log_dir),
            **self.overrides,
        }
        for key, value in settings.items():
            args += ["--override", f"{key}={value}"]
        return args

    def start(self) -> BrokerProcess:
        """Start the broker and wait until it listens."""
        assert self.proc is None or self.proc.poll() is not None, "broker already running"
        self.starts += 1
        log_path = self.log_dir.parent / f"broker-{self.port}-{self.starts}.log"
        self._log_paths.append(log_path)
        env = dict(os.environ)
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        env["PYTHONUNBUFFERED"] = "1"
        with open(log_path, "wb") as out:
            self.proc = subprocess.Popen(
                self.command(), cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=env
            )
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if LISTENING in log_path.read_text(errors="replace"):
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"broker exited with {self.proc.returncode} before listening:\n"
                    + self.log_text()
                )
            time.sleep(0.05)
        self.proc.kill()
        raise RuntimeError("broker did not listen in time:\n" + self.log_text())

    def stop(self, sig: int = signal.SIGTERM, timeout: float = STOP_TIMEOUT_S) -> int:
        """Send ``sig`` and wait; returns the exit code (SIGKILLs and fails on a hang)."""
        proc = self.proc
        assert proc is not None
        if proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                raise AssertionError(
                    f"broker did not stop within {timeout}s of signal {sig}:\n" + self.log_text()
                ) from None
        return int(proc.returncode)

    def kill(self) -> None:
        """SIGKILL: no shutdown work at all (crash tests)."""
        self.stop(signal.SIGKILL)

    def restart(self, overrides: Mapping[str, str] | None = None) -> BrokerProcess:
        """Graceful stop (must exit 0), then start again on the same port and log dir."""
        if self.running:
            code = self.stop()
            assert code == 0, f"broker exited {code} on SIGTERM:\n{self.log_text()}"
        if overrides is not None:
            self.overrides.update(overrides)
        return self.start()

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_text(self) -> str:
        """Everything the broker logged, over all its starts."""
        return "".join(p.read_text(errors="replace") for p in self._log_paths if p.exists())


def serve_to_the_end(
    log_dirs: str | Path,
    *overrides: str,
    port: int | None = None,
    prefix: tuple[str, ...] = (),
    timeout_s: float = 60.0,
) -> subprocess.CompletedProcess[str]:
    """Run ``tidelog serve`` (log dirs, a free 127.0.0.1 port, ``overrides`` as ``key=value``)
    until it exits, for tests of a start-up that must be refused; ``prefix`` runs it under
    another command (``setpriv ...``)."""
    argv = [
        *prefix,
        sys.executable,
        "-m",
        "tidelog",
        "serve",
        "--override",
        f"log.dirs={log_dirs}",
        "--override",
        f"listeners=PLAINTEXT://127.0.0.1:{port or free_port()}",
        *(arg for override in overrides for arg in ("--override", override)),
    ]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout_s
    )
