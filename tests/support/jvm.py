"""The JVM test artifacts that ``scripts/jvm-deps`` fetched (``tests/jvm/<set>/pom.xml``) into
``$JVM_DEPS_CACHE`` (default ``.cache/jvm``): a set's classpath, or a one-line skip."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

__all__ = (
    "java_bin",
    "jvm_cache",
    "jvm_set_classpath",
    "spark_avro_fetched",
    "spark_connector_jars",
)

ROOT = Path(__file__).resolve().parents[2]


def jvm_cache() -> Path:
    return Path(os.environ.get("JVM_DEPS_CACHE") or ROOT / ".cache" / "jvm")


def java_bin() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    return shutil.which("java")


def _set_entries(set_name: str) -> list[Path] | None:
    out = jvm_cache() / set_name
    if not (out / ".stamp").exists():
        return None
    entries = [out / "classes"] if (out / "classes").is_dir() else []
    return entries + sorted((out / "lib").glob("*.jar"))


def jvm_set_classpath(set_name: str) -> str:
    """The classpath of ``tests/jvm/<set_name>`` (its classes, then its jars), or ``pytest.skip``
    with one line when java or the fetched set is missing."""
    if java_bin() is None:
        pytest.skip("JVM test: java is not installed (apt-get install openjdk-17-jdk-headless)")
    entries = _set_entries(set_name)
    if entries is None:
        where = f"tests/jvm/{set_name} is not in {jvm_cache()}"
        pytest.skip(f"JVM test: {where} (run scripts/jvm-deps)")
    return os.pathsep.join(str(p) for p in entries)


def spark_connector_jars() -> str:
    """Spark's Kafka connector jars and its Avro functions' (``from_avro``) for ``spark.jars``
    (comma-separated; "" when neither is fetched), without the jars pyspark already ships (same
    artifact name)."""
    entries = [e for name in ("spark-kafka", "spark-avro") for e in _set_entries(name) or []]
    if not entries:
        return ""
    import pyspark

    shipped = {_artifact(p.name) for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    seen: set[str] = set()
    out = []
    for path in entries:
        artifact = _artifact(path.name)
        if artifact not in shipped and artifact not in seen:
            seen.add(artifact)
            out.append(str(path))
    return ",".join(out)


def spark_avro_fetched() -> bool:
    """Whether ``tests/jvm/spark-avro`` (``org.apache.spark:spark-avro_2.13``) was fetched."""
    return bool(_set_entries("spark-avro"))


def _artifact(jar_name: str) -> str:
    """``kafka-clients-3.9.2.jar`` -> ``kafka-clients``."""
    parts = jar_name.removesuffix(".jar").split("-")
    while parts and parts[-1][:1].isdigit():
        parts.pop()
    return "-".join(parts)
