"""Shared fixtures: a REAL tidelog broker in a subprocess.

The broker is started exactly as ``tidelog serve`` is (``python -m broker.cli serve``) on a free
127.0.0.1 port with a temporary log dir, and the fixture waits for its "tidelog listening on"
line. Tear-down sends SIGTERM and checks that the broker exits 0 (graceful shutdown).

Usage::

    def test_something(broker):                 # a fresh broker per test
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap)

    def test_settings(broker_factory):
        b = broker_factory({"num.partitions": "3", "log.flush.interval.messages": "1"})
        ...
        b.restart()                              # same port and log dir, SIGTERM + start
        b.restart({"auto.create.topics.enable": "false"})  # ... with changed overrides
        b.kill()                                 # SIGKILL (crash tests); then b.start()

    def test_shared(module_broker):              # one broker for the whole test module

``BrokerProcess.log_text()`` returns what the broker logged (stderr), for assertions and for
failure messages.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

from tests.support.net import free_port

ROOT = Path(__file__).resolve().parent.parent
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
    ) -> None:
        self.host = "127.0.0.1"
        self.port = port or free_port()
        self.log_dir = log_dir
        self.overrides: dict[str, str] = dict(overrides or {})
        self.config_path = config_path
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self._log_paths: list[Path] = []

    @property
    def bootstrap(self) -> str:
        """``host:port`` for a client's bootstrap servers."""
        return f"{self.host}:{self.port}"

    def command(self) -> list[str]:
        args = [sys.executable, "-m", "tidelog.broker.cli", "serve"]
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
        deadline = time.monotonic() + START_TIMEOUT_S
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


BrokerFactory = Callable[..., BrokerProcess]


def _factory(base: Path) -> tuple[BrokerFactory, list[BrokerProcess]]:
    started: list[BrokerProcess] = []

    def start(
        overrides: Mapping[str, str] | None = None, *, config_path: Path | None = None
    ) -> BrokerProcess:
        log_dir = base / f"broker{len(started)}" / "data"
        log_dir.mkdir(parents=True)
        b = BrokerProcess(log_dir, overrides, config_path=config_path)
        started.append(b)
        return b.start()

    return start, started


def _stop_all(started: list[BrokerProcess]) -> None:
    failures = []
    for b in started:
        if b.running:
            code = b.stop()
            if code != 0:
                failures.append(f"broker {b.bootstrap} exited {code}:\n{b.log_text()[-5000:]}")
    assert not failures, "\n".join(failures)


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[BrokerFactory]:
    """``broker_factory(overrides=None, *, config_path=None) -> BrokerProcess`` (started).

    ``overrides`` are ``--override`` settings; ``config_path`` a YAML file for ``--config``
    (the listener and log dir are always set by the fixture).

    Every broker started is stopped with SIGTERM at tear-down and must exit 0.
    """
    start, started = _factory(tmp_path)
    yield start
    _stop_all(started)


@pytest.fixture
def broker(broker_factory: BrokerFactory) -> BrokerProcess:
    """A fresh broker on built-in defaults (plus listener and log dir)."""
    return broker_factory()


@pytest.fixture(scope="module")
def module_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker shared by the tests of a module (use distinct topic names)."""
    start, started = _factory(tmp_path_factory.mktemp("module_broker"))
    yield start()
    _stop_all(started)
