"""The documented example test module for the pytest plugin installs with the line the docs give
(issue 26: it imports aiokafka, which the install line left out)."""

from __future__ import annotations

import ast
import re
from importlib.metadata import packages_distributions, requires
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_BLOCK = re.compile(r"```python\n(.*?)```", re.S)
_INSTALL = re.compile(r"`pip install ([^`]+)`")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _example_and_install_line() -> tuple[str, str]:
    """The first Python block using the plugin's fixtures, and the nearest ``pip install``
    line before it, in README.md or docs/*.md."""
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        if not page.exists():
            continue
        text = page.read_text(encoding="utf-8")
        for block in _BLOCK.finditer(text):
            if "def test_" in block.group(1) and "tidelog_topic" in block.group(1):
                installs = _INSTALL.findall(text[: block.start()])
                assert installs, f"{page.name}: no `pip install ...` before the example"
                return block.group(1), installs[-1]
    raise AssertionError("no example test module for the pytest plugin in the docs")


def test_example_module_installs_with_the_documented_line() -> None:
    code, install = _example_and_install_line()
    imported = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            imported.add(node.module.split(".")[0])
    by_module = packages_distributions()
    tidelog_deps = {
        _canonical(re.split(r"[ ;<>=!~\[]", r, maxsplit=1)[0])
        for r in requires("tidelog") or []
        if "extra ==" not in r
    }
    named = {_canonical(word) for word in install.split()}
    missing = []
    for module in sorted(imported):
        dists = by_module.get(module)
        if not dists:
            continue  # the standard library
        dist = _canonical(dists[0])
        if dist not in tidelog_deps | named | {"tidelog"}:
            missing.append(f"{module} (pip install {dist})")
    assert missing == [], f"the install line `pip install {install}` leaves out: {missing}"
    assert "pytest" in named or "pytest" in tidelog_deps
