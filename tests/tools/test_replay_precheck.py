"""``tidelog replay`` finds a missing extra, log dir or broker before Spark starts."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tests.support.net import free_port

ROOT = Path(__file__).resolve().parents[2]


def _replay(*args: str, python_prelude: str = "") -> tuple[subprocess.CompletedProcess[str], float]:
    code = (
        f"{python_prelude}\nimport sys\nfrom tidelog.cli import main\n"
        f"sys.exit(main(['replay', *{list(args)!r}]))"
    )
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    return result, time.monotonic() - started


def _refused_address() -> str:
    return f"127.0.0.1:{free_port()}"


def test_missing_log_dir_is_one_line_before_spark(tmp_path: Path) -> None:
    r, seconds = _replay("--log-dir", str(tmp_path / "nope"), "--topics", "t", "--output",
                         str(tmp_path / "out"))  # fmt: skip
    assert r.returncode == 1
    assert r.stderr.strip() == f"replay: --log-dir {tmp_path / 'nope'} does not exist"
    assert seconds < 20 and not (tmp_path / "out").exists()


def test_unreachable_broker_is_one_line_before_spark(tmp_path: Path) -> None:
    address = _refused_address()
    r, seconds = _replay("--bootstrap-server", address, "--topics", "t", "--output",
                         str(tmp_path / "out"))  # fmt: skip
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1 and "connection refused" in r.stderr, r.stderr
    assert address in r.stderr and seconds < 20


def test_without_pyspark_it_says_how_to_install_the_extra(tmp_path: Path) -> None:
    r, _ = _replay("--log-dir", str(tmp_path), "--topics", "t", "--output",
                   str(tmp_path / "out"),
                   python_prelude="import sys; sys.modules['pyspark'] = None")  # fmt: skip
    assert r.returncode == 1
    assert "pyspark" in r.stderr and "pip install 'tidelog[spark]'" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_command_config_becomes_kafka_source_options(tmp_path: Path) -> None:
    from tidelog.analytics.options import parse_options
    from tidelog.tools.replay import kafka_options

    cfg = tmp_path / "client.properties"
    cfg.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nrequest.timeout.ms=9000\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="u" password="p";\n'
    )
    opts = kafka_options(str(cfg))
    assert opts["kafka.sasl.plain.username"] == "u"
    parsed = parse_options({"kafka.bootstrap.servers": "h:1", "subscribe": "t", **opts})
    assert dict(parsed.kafka_config) == {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.plain.username": "u",
        "sasl.plain.password": "p",
        "request.timeout.ms": "9000",
    }
    bad = tmp_path / "bad.properties"
    bad.write_text("no.such.setting=1\n")
    r, seconds = _replay("--bootstrap-server", "127.0.0.1:1", "--topics", "t", "--output",
                         str(tmp_path / "out"), "--command-config", str(bad))  # fmt: skip
    assert r.returncode == 2 and "no.such.setting" in r.stderr and seconds < 20
