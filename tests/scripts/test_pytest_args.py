"""``./scripts/test``'s marker rule: a user's ``-m`` never lets the ``slow`` runs in by accident."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "pytest_args.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("tidelog_pytest_args", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


pytest_args = _load().pytest_args


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], ["-m", "not slow"]),
        (["-m", "not spark"], ["-m", "(not spark) and not slow"]),
        (["-m", "not spark", "tests/storage"], ["-m", "(not spark) and not slow", "tests/storage"]),
        (["-mintegration"], ["-m", "(integration) and not slow"]),
        (["-m", "spark or crash"], ["-m", "(spark or crash) and not slow"]),
        (["-m", "slow"], ["-m", "slow"]),
        (["-m", "slow and spark"], ["-m", "slow and spark"]),
        (["-m", "not slow"], ["-m", "not slow"]),
        (["tests/storage", "-q"], ["-m", "not slow", "tests/storage", "-q"]),
        (["-k", "slowly_named"], ["-m", "not slow", "-k", "slowly_named"]),
        (["-m", "slowish"], ["-m", "(slowish) and not slow"]),
        (["-x", "--", "-m"], ["-m", "not slow", "-x", "--", "-m"]),
    ],
)
def test_marker_expressions_leave_slow_out(argv: list[str], expected: list[str]) -> None:
    assert pytest_args(argv) == expected


def test_scripts_test_reads_the_arguments_back_intact() -> None:
    """The NUL-separated hand-over that ``scripts/test`` does with ``mapfile``."""
    shell = 'mapfile -d "" A < <("$PY" "$SCRIPT" "$@"); printf "[%s]\\n" "${A[@]}"'
    out = subprocess.run(
        ["bash", "-c", shell, "_", "-m", "not spark", "tests/x y", "-k", "a and b"],
        env={"PY": sys.executable, "SCRIPT": str(SCRIPT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.splitlines() == [
        "[-m]",
        "[(not spark) and not slow]",
        "[tests/x y]",
        "[-k]",
        "[a and b]",
    ]
    assert "pytest_args.py" in (ROOT / "scripts" / "test").read_text()
