"""The JVM artifact sets of ``tests/jvm/<set>/pom.xml``, as fetched by ``scripts/jvm-deps``.

``jvm_set_classpath("kafka")`` is the classpath of the set (its jars, plus its compiled classes
when it has sources), or a ``pytest.skip`` with one line saying what is missing.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

__all__ = ("jvm_cache", "jvm_set_classpath")

ROOT = Path(__file__).resolve().parents[2]


def jvm_cache() -> Path:
    """``$TIDELOG_JVM_CACHE`` (default ``.cache/jvm`` in the repository)."""
    return Path(os.environ.get("TIDELOG_JVM_CACHE") or ROOT / ".cache" / "jvm")


def jvm_set_classpath(set_name: str) -> str:
    """The classpath of ``tests/jvm/<set_name>``; skips the test when Java or its jars are
    missing."""
    if shutil.which("java") is None:
        pytest.skip("Java is missing (apt-get install openjdk-17-jdk-headless)")
    out = jvm_cache() / set_name
    jars = sorted((out / "lib").glob("*.jar"))
    if not jars:
        pytest.skip(f"no jars for tests/jvm/{set_name} in {out}/lib: run scripts/jvm-deps")
    parts = [str(j) for j in jars]
    if (out / "classes").is_dir():
        parts.insert(0, str(out / "classes"))
    return os.pathsep.join(parts)
