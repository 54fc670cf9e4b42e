"""The Go programs of the test suite (``tests/go/<name>``, each its own module with go.mod and
go.sum, dependencies from the Go module proxy), built once into ``.cache/go/<name>``.

``scripts/test`` builds them up front; ``go_program`` builds one when its binary is missing or
older than its sources (so ``pytest tests/go`` alone works too) and skips the test with one line
when Go is not installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

__all__ = ("build_go_program", "go_program")

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ROOT / "tests" / "go"
CACHE = ROOT / ".cache" / "go"


def build_go_program(name: str, go: str = "go") -> Path:
    """``go build`` ``tests/go/<name>`` into ``.cache/go/<name>`` (modules and build cache under
    ``.cache/go`` too, unless GOMODCACHE/GOCACHE are set); the binary's path."""
    source = SOURCES / name
    binary = CACHE / name
    newest = max(p.stat().st_mtime for p in source.iterdir() if p.is_file())
    if binary.exists() and binary.stat().st_mtime >= newest:
        return binary
    CACHE.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.setdefault("GOMODCACHE", str(CACHE / "mod"))
    env.setdefault("GOCACHE", str(CACHE / "build"))
    env.setdefault("GOFLAGS", "-mod=readonly")
    done = subprocess.run(
        [go, "build", "-o", str(binary), "."],
        cwd=source,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"go build tests/go/{name} failed:\n{done.stdout}\n{done.stderr}")
    return binary


def go_program(name: str) -> Path:
    """The built ``tests/go/<name>``, or ``pytest.skip`` with one line when Go is missing."""
    go = shutil.which("go")
    if go is None:
        binary = CACHE / name
        if binary.exists():
            return binary
        pytest.skip(
            f"Go test: go is not installed (apt-get install golang), tests/go/{name} not built"
        )
    return build_go_program(name, go)
