"""docs/configuration.md's reference is the one generated from the definitions."""

from pathlib import Path

import pytest

from tidelog.cli import main
from tidelog.config import BROKER_CONFIGS, TOPIC_CONFIGS

PAGE = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_docs_reference_is_in_sync() -> None:
    assert main(["config-reference", "--check", str(PAGE)]) == 0, (
        "docs/configuration.md's reference is stale: run "
        "`tidelog config-reference --write docs/configuration.md`"
    )
    text = PAGE.read_text()
    for name in list(BROKER_CONFIGS) + list(TOPIC_CONFIGS):
        assert f"| `{name}` |" in text


def test_stale_reference_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stale = tmp_path / "configuration.md"
    stale.write_text(
        PAGE.read_text().replace("| `num.partitions` | int | 1 |", "| `num.partitions` | int | 7 |")
    )
    assert main(["config-reference", "--check", str(stale)]) == 1
    assert "stale" in capsys.readouterr().out
    assert main(["config-reference", "--write", str(stale)]) == 0
    assert main(["config-reference", "--check", str(stale)]) == 0
