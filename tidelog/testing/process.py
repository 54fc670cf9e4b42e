"""``Broker``: a tidelog broker in a subprocess (``tidelog serve``), for tests and scripts.

    from tidelog.testing import Broker

    with Broker(overrides={"num.partitions": 3}) as broker:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
        ...
        broker.kill()       # SIGKILL: no shutdown work at all (crash tests)
        broker.restart()    # same port and log dir; recovery runs as after a crash

The broker listens on 127.0.0.1 (a free port on the first start, the same port after that) and
writes everything it logs to ``log_file``; ``log_text()`` returns it. ``log_dir=None`` means a
temporary directory, removed by ``close()`` (the end of the ``with`` block) unless ``keep=True``.
A crash of the calling process cannot take the broker down, and the broker holds no pipe to it.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Self

from tidelog.testing._common import LocalBroker

__all__ = ("Broker", "BrokerStartError")

#: The line ``tidelog serve`` logs once it listens (broker.app.Broker.listening_line).
_LISTENING = re.compile(rb"tidelog listening on (\S+?):(\d+) ")
_POLL_S = 0.002


class BrokerStartError(RuntimeError):
    """The broker exited or did not listen in time; the message holds its log."""


def _package_root() -> str:
    """The directory holding the ``tidelog`` package this process imported."""
    import tidelog

    return str(Path(tidelog.__file__).resolve().parent.parent)


class Broker(LocalBroker):
    """One ``tidelog serve`` subprocess; survives restarts on the same port and log dir."""

    def __init__(
        self,
        log_dir: str | os.PathLike[str] | None = None,
        overrides: Mapping[str, object] | None = None,
        *,
        port: int = 0,
        keep: bool = False,
        start_timeout_s: float = 30.0,
        stop_timeout_s: float = 30.0,
        log_level: str = "INFO",
    ) -> None:
        super().__init__(
            log_dir,
            overrides,
            port=port,
            keep=keep,
            start_timeout_s=start_timeout_s,
            stop_timeout_s=stop_timeout_s,
        )
        self.log_level = log_level
        self.proc: subprocess.Popen[bytes] | None = None
        self.exit_codes: list[int] = []

    # ------------------------------------------------------------------ the interface

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def command(self) -> list[str]:
        args = [sys.executable, "-m", "tidelog", "serve", "--log-level", self.log_level]
        for item in self.settings():
            args += ["--override", item]
        return args

    def start(self) -> Self:
        """Start the broker and wait until it listens (``BrokerStartError`` if it cannot)."""
        self._check_startable()
        self.starts += 1
        self.log_dir.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        root = _package_root()
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        with open(self.log_file, "ab") as out:
            out.write(f"---- tidelog start {self.starts}: {' '.join(self.command())}\n".encode())
            out.flush()
            offset = out.tell()
            self.proc = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self.work_dir,  # ``-m`` looks in the cwd first: never a stray ./tidelog
                start_new_session=True,  # Ctrl-C in a terminal goes to pytest, not the broker
            )
        self._wait_listening(offset)
        return self

    def stop(self, timeout_s: float | None = None) -> int | None:
        """Graceful stop (SIGTERM): flush, checkpoint, exit. Returns the exit code (0 after a
        clean stop), or None if the broker was not running."""
        self._admin.close()  # first: the broker going away is no error of its client
        return self._signal(signal.SIGTERM, self.stop_timeout_s if timeout_s is None else timeout_s)

    def kill(self) -> None:
        """SIGKILL: the broker does no shutdown work at all, as in a crash or power cut of
        the process (what reached the page cache stays; unflushed policy is not applied)."""
        self._admin.close()
        self._signal(signal.SIGKILL, self.stop_timeout_s)

    def __repr__(self) -> str:
        return f"<tidelog.testing.Broker {self._state()}>"

    # ------------------------------------------------------------------ internals

    def _wait_listening(self, offset: int) -> None:
        proc = self.proc
        assert proc is not None
        deadline = time.monotonic() + self.start_timeout_s
        with open(self.log_file, "rb") as f:
            f.seek(offset)
            seen = b""
            while True:
                seen += f.read()
                match = _LISTENING.search(seen)
                if match:
                    self.port = int(match.group(2))
                    return
                if proc.poll() is not None:
                    self.exit_codes.append(int(proc.returncode))
                    raise BrokerStartError(
                        f"tidelog exited with {proc.returncode} before listening:\n"
                        + self.log_text()[-20_000:]
                    )
                if time.monotonic() > deadline:
                    self._signal(signal.SIGKILL, 10.0)
                    raise BrokerStartError(
                        f"tidelog did not listen within {self.start_timeout_s}s:\n"
                        + self.log_text()[-20_000:]
                    )
                time.sleep(_POLL_S)

    def _signal(self, sig: int, timeout_s: float) -> int | None:
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                self.exit_codes.append(int(proc.returncode))
                raise RuntimeError(
                    f"tidelog did not stop within {timeout_s}s of signal {sig}; killed it:\n"
                    + self.log_text()[-20_000:]
                ) from None
            self.exit_codes.append(int(proc.returncode))
        return int(proc.returncode)
