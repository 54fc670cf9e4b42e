"""What a newcomer hit with the tools (issue 26): clear errors, at once, and honest exit codes."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.tools.tools_fixtures import RunTool

TIDELOG = str(Path(sys.executable).with_name("tidelog"))


def _b(broker: Any) -> list[str]:
    return ["--bootstrap-server", broker.bootstrap]


def test_produce_to_a_partition_the_topic_lacks(tidelog: RunTool, module_broker: Any) -> None:
    b = _b(module_broker)
    assert tidelog("topics", *b, "--create", "--topic", "nc-two", "--partitions", "2").code == 0
    r = tidelog("produce", *b, "--topic", "nc-two", "--partition", "7", stdin=b"a\n")
    assert r.code == 1
    assert "topic 'nc-two' has no partition 7 (it has 0, 1)" in r.err
    assert "ValueError" not in r.err and "Unrecognized" not in r.err


def test_consume_a_missing_topic_says_so_at_once(tidelog: RunTool, module_broker: Any) -> None:
    started = time.monotonic()
    r = tidelog("consume", *_b(module_broker), "--topic", "nc-missing", "--from-beginning")
    took = time.monotonic() - started
    assert r.code == 1
    assert "topic 'nc-missing' does not exist" in r.err
    # The old code waited 10 s for the topic to appear; one Metadata round trip is enough.
    assert took < 8, took


def test_consume_help_has_no_placeholder(tidelog: RunTool) -> None:
    r = tidelog("consume", "--help")
    assert r.code == 0
    assert "{part}" not in r.out
    assert "--property key.deserializer=" in r.out.replace("\n", " ").replace("  ", " ")


def _interrupt_after(argv: list[str], seconds: float, typed: bytes = b"") -> tuple[int, bytes]:
    """Run ``tidelog argv`` on a terminal, type ``typed``, press Ctrl-C after ``seconds``."""
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        os.execv(TIDELOG, [TIDELOG, *argv])
    try:
        if typed:
            time.sleep(seconds / 2)
            os.write(fd, typed)
        time.sleep(seconds)
        os.write(fd, b"\x03")
        out = b""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        _, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status), out
    finally:
        os.close(fd)


def test_produce_ctrl_c_exits_130(module_broker: Any) -> None:
    argv = ["produce", *_b(module_broker), "--topic", "nc-ctrl-c"]
    # Interrupted while reading lines (the common case).
    code, out = _interrupt_after(argv, 4.0, typed=b"one line\n")
    assert code == 130, out
    assert b"interrupted" in out and b"Traceback" not in out


def test_produce_help_runs_as_a_command() -> None:
    r = subprocess.run([TIDELOG, "produce", "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "--partition" in r.stdout
