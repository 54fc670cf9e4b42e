"""Driving a live broker with hostile input: one connection per input, a canary, an RSS watch.

``FuzzTarget.send(data, framed=...)`` sends one input on a fresh-or-reused connection and
classifies what the broker did:

- framed inputs (the size prefix matches the bytes) are followed, on the same connection, by an
  ApiVersions request: answers come in request order, so the broker must either answer that
  follow-up or close the connection within ``ANSWER_TIMEOUT_S``;
- raw inputs (any bytes, any size prefix) are followed by a half-close (EOF): the broker must
  close the connection within ``ANSWER_TIMEOUT_S`` (a frame it is still waiting for the rest of
  is dropped at EOF; complete frames are answered first).

Either way a silence is only excused when the input holds a request that is allowed to wait
(a Fetch long poll, a JoinGroup/SyncGroup held for a rebalance, an acks=-1 Produce): the
frames are decoded with the broker's own codec to tell. Meanwhile ``Canary`` keeps a separate
connection answering ApiVersions and Metadata, and ``RssWatch`` samples the broker's resident
memory from ``/proc/<pid>/status``.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kio.schema.api_versions.v0 import request as av0
from kio.schema.api_versions.v3 import request as av3
from kio.schema.metadata.v1 import request as md1

from tests.support.kafka_wire import encode_request, read_frame
from tidelog.protocol import codec

__all__ = ("ANSWER_TIMEOUT_S", "Canary", "FuzzTarget", "RssWatch", "Verdict")

ANSWER_TIMEOUT_S = 5.0
FOLLOW_UP_ID = 0x7FFF_0F0F
#: APIs whose answer may legitimately wait: Produce (acks=-1), Fetch (long poll),
#: JoinGroup and SyncGroup (held for the rebalance).
WAITING_APIS = {0, 1, 11, 14}
_FOLLOW_UP = encode_request(av0.ApiVersionsRequest(), FOLLOW_UP_ID)


@dataclass
class Verdict:
    outcome: str  # "answered", "closed", "excused", "silent"
    note: str = ""


@dataclass
class FuzzTarget:
    """A broker under fuzzing (host, port), and what every input made it do."""

    bootstrap: str
    outcomes: Counter[str] = field(default_factory=Counter)
    silent: list[str] = field(default_factory=list)
    apis_tried: Counter[tuple[int, int]] = field(default_factory=Counter)
    _sock: socket.socket | None = None

    @property
    def tried(self) -> int:
        return sum(self.outcomes.values())

    def _connect(self) -> socket.socket:
        if self._sock is None:
            host, port = self.bootstrap.rsplit(":", 1)
            self._sock = socket.create_connection((host, int(port)), timeout=ANSWER_TIMEOUT_S)
            self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return self._sock

    def _drop(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def close(self) -> None:
        self._drop()

    def send(self, data: bytes, *, framed: bool, label: str = "") -> Verdict:
        """Send one input; see the module docstring for what counts as the broker's answer."""
        verdict = self._send_framed(data) if framed else self._send_raw(data)
        if verdict.outcome == "silent" and _may_wait(data):
            verdict = Verdict("excused", "a request that may wait")
            self._drop()
        self.outcomes[verdict.outcome] += 1
        if verdict.outcome == "silent":
            self.silent.append(f"{label}: {verdict.note}: {data[:200].hex()}")
        return verdict

    def _send_framed(self, data: bytes) -> Verdict:
        try:
            sock = self._connect()
            sock.sendall(data + _FOLLOW_UP)
        except OSError:
            self._drop()  # closed while we wrote: that is an answer too
            return Verdict("closed")
        buffer = b""
        deadline = time.monotonic() + ANSWER_TIMEOUT_S
        while True:
            # Answers come in order; the follow-up's is the last one we wait for.
            while len(buffer) >= 8:
                (size,) = struct.unpack_from(">i", buffer, 0)
                if len(buffer) < 4 + size:
                    break
                (correlation,) = struct.unpack_from(">i", buffer, 4)
                buffer = buffer[4 + size :]
                if correlation == FOLLOW_UP_ID:
                    return Verdict("answered")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._drop()
                return Verdict("silent", "no answer to the follow-up and no close")
            try:
                sock.settimeout(remaining)
                chunk = sock.recv(1 << 16)
            except TimeoutError:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                self._drop()
                return Verdict("closed")
            buffer += chunk

    def _send_raw(self, data: bytes) -> Verdict:
        self._drop()
        sock = self._connect()
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            self._drop()
            return Verdict("closed")
        deadline = time.monotonic() + ANSWER_TIMEOUT_S
        try:
            while time.monotonic() < deadline:
                sock.settimeout(max(deadline - time.monotonic(), 0.01))
                try:
                    if not sock.recv(1 << 16):
                        return Verdict("closed")
                except TimeoutError:
                    continue
                except OSError:
                    return Verdict("closed")
            return Verdict("silent", "the connection stayed open after EOF")
        finally:
            self._drop()


def _may_wait(data: bytes) -> bool:
    """Whether the input holds a complete request of an API that may hold its answer."""
    position = 0
    while position + 4 <= len(data):
        (size,) = struct.unpack_from(">i", data, position)
        if size < 0 or position + 4 + size > len(data):
            return False
        frame = data[position + 4 : position + 4 + size]
        position += 4 + size
        try:
            api_key, _, _ = codec.peek_request_header(frame)
        except Exception:
            continue
        if api_key in WAITING_APIS:
            return True
    return False


class Canary(threading.Thread):
    """A separate connection that must keep answering ApiVersions and Metadata."""

    def __init__(self, bootstrap: str, interval_s: float = 0.1) -> None:
        super().__init__(name="fuzz-canary", daemon=True)
        self.bootstrap = bootstrap
        self.interval_s = interval_s
        self.answered = 0
        self.failures: list[str] = []
        self.slowest_s = 0.0
        self._stop_event = threading.Event()

    def stop(self) -> None:
        self._stop_event.set()
        self.join(30)

    def run(self) -> None:
        host, port = self.bootstrap.rsplit(":", 1)
        requests: list[Any] = [
            av3.ApiVersionsRequest(client_software_name="canary", client_software_version="1"),
            md1.MetadataRequest(topics=None),
        ]
        try:
            sock = socket.create_connection((host, int(port)), timeout=ANSWER_TIMEOUT_S)
        except OSError as exc:
            self.failures.append(f"canary could not connect: {exc!r}")
            return
        with sock:
            correlation = 0
            while not self._stop_event.wait(self.interval_s):
                correlation += 1
                started = time.monotonic()
                try:
                    sock.sendall(encode_request(requests[correlation % 2], correlation))
                    (got,) = struct.unpack_from(">i", read_frame(sock), 0)
                except OSError as exc:
                    self.failures.append(f"canary request {correlation} failed: {exc!r}")
                    return
                if got != correlation:
                    self.failures.append(f"canary got correlation {got}, sent {correlation}")
                    return
                self.answered += 1
                self.slowest_s = max(self.slowest_s, time.monotonic() - started)


def rss_kib(pid: int) -> int:
    """Resident set size of a process in KiB (VmRSS in /proc/<pid>/status)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


class RssWatch(threading.Thread):
    """Samples a process's RSS every ``interval_s``; ``peak_kib`` is the largest seen."""

    def __init__(self, pid: int, interval_s: float = 0.1) -> None:
        super().__init__(name="rss-watch", daemon=True)
        self.pid = pid
        self.interval_s = interval_s
        self.start_kib = rss_kib(pid)
        self.peak_kib = self.start_kib
        self.gone = False
        self._stop_event = threading.Event()

    def stop(self) -> None:
        self._stop_event.set()
        self.join(10)

    def run(self) -> None:
        while not self._stop_event.wait(self.interval_s):
            try:
                self.peak_kib = max(self.peak_kib, rss_kib(self.pid))
            except (OSError, RuntimeError):
                self.gone = True
                return
