"""The "Kafka concept -> file" table of docs/architecture.md names files that exist."""

from __future__ import annotations

import re
from pathlib import Path

from tests.docs.examples import DOCS, ROOT

PAGE = DOCS / "architecture.md"


def _on_disk(token: str) -> bool:
    # `broker/handlers/<api>.py` names a folder of modules: the folder must hold some.
    if "<" in token:
        folder = ROOT / token.split("<", 1)[0]
        return folder.is_dir() and any(folder.glob("*.py"))
    return (ROOT / token).exists()


def named_files() -> list[str]:
    """Every path the table names; a bare ``name.py`` is in the folder of the path before it."""
    text = PAGE.read_text(encoding="utf-8")
    section = text.split("## Kafka concept -> file", 1)[1]
    paths: list[str] = []
    for line in section.splitlines():
        if not line.startswith("| ") or line.startswith("| Kafka concept") or "---" in line:
            continue
        cell = line.rstrip(" |").rsplit(" | ", 1)[1]
        folder = ""
        for token in re.findall(r"`([^`]+)`", cell):
            if "/" in token:
                paths.append(token)
                folder = token if token.endswith("/") else str(Path(token).parent) + "/"
            elif token.endswith(".py"):
                paths.append(folder + token)
    return paths


def test_every_file_in_the_concept_table_exists() -> None:
    paths = named_files()
    assert len(paths) > 40
    missing = [p for p in paths if not _on_disk(p)]
    assert not missing, f"docs/architecture.md names files that do not exist: {missing}"
