"""The worked example of docs/share-groups.md runs as written against a real broker."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.support.broker_process import BrokerProcess

DOC = Path(__file__).resolve().parents[3] / "docs" / "share-groups.md"


def test_docs_page_starts_with_its_title() -> None:
    assert DOC.read_text().splitlines()[0] == "# Share groups"


def test_worked_example_runs(broker: BrokerProcess, tmp_path: Path) -> None:
    (code,) = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    script = tmp_path / "example.py"
    script.write_text(code)
    done = subprocess.run(
        [sys.executable, str(script)],
        env={**os.environ, "BOOTSTRAP": broker.bootstrap},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "job-1" in done.stdout and "job-2" not in done.stdout
