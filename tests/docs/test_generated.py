"""The generated pages (configuration reference, one page per tool) match the code."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from tests.docs.examples import DOCS, ROOT


def _docs_gen() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_gen", ROOT / "scripts" / "docs_gen.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_pages_are_current() -> None:
    stale: list[Path] = _docs_gen().stale()
    assert not stale, (
        "stale generated docs: "
        + ", ".join(str(p.relative_to(ROOT)) for p in stale)
        + "; run: python scripts/docs_gen.py"
    )


def test_every_command_has_a_page_and_every_setting_is_listed() -> None:
    from tidelog.cli import build_parser
    from tidelog.config import BROKER_CONFIGS, TOPIC_CONFIGS

    parser = build_parser()
    commands = {
        name
        for action in parser._subparsers._group_actions  # type: ignore[union-attr]
        for name in getattr(action, "choices", {})
    }
    assert {"serve", "topics", "consume", "dump-log"} <= commands
    for name in commands:
        assert (DOCS / "tools" / f"{name}.md").exists(), name
    text = (DOCS / "configuration.md").read_text()
    for name in list(BROKER_CONFIGS) + list(TOPIC_CONFIGS):
        assert f"| `{name}` |" in text, name
