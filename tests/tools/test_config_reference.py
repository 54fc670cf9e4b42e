"""The README's configuration reference is the one generated from the definitions."""

from pathlib import Path

import pytest

from tidelog.broker.cli import main
from tidelog.config import BROKER_CONFIGS, TOPIC_CONFIGS

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_reference_is_in_sync() -> None:
    assert main(["config-reference", "--check", str(README)]) == 0, (
        "README.md's configuration reference is stale: run "
        "`tidelog config-reference --write README.md`"
    )
    text = README.read_text()
    for name in list(BROKER_CONFIGS) + list(TOPIC_CONFIGS):
        assert f"| `{name}` |" in text


def test_stale_reference_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stale = tmp_path / "README.md"
    stale.write_text(
        README.read_text().replace(
            "| `num.partitions` | int | 1 |", "| `num.partitions` | int | 7 |"
        )
    )
    assert main(["config-reference", "--check", str(stale)]) == 1
    assert "stale" in capsys.readouterr().out
    assert main(["config-reference", "--write", str(stale)]) == 0
    assert main(["config-reference", "--check", str(stale)]) == 0
