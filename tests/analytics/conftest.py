"""Fixtures of the analytics tests: the shared real broker, made to checkpoint its high
watermark every second (the file path reads only below the checkpointed HW), and one
SparkSession per module (with Spark's Kafka connector on its classpath when fetched)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest


@dataclass(frozen=True)
class Broker:
    bootstrap: str
    log_dir: Path


@pytest.fixture(scope="module")
def replay_broker(module_broker: Any) -> Broker:
    """The shared module broker (tests/conftest.py), restarted to checkpoint its HW every
    second, so the file path sees what was produced within a second or two."""
    module_broker.restart({"log.flush.offset.checkpoint.interval.ms": "1000"})
    return Broker(module_broker.bootstrap, Path(module_broker.log_dir))


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import tidelog.analytics as analytics
    from tests.support.jvm import spark_connector_jars

    builder = (
        SparkSession.builder.master("local[2]")
        .appName("tidelog-analytics-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
    )
    # Spark's own Kafka connector (scripts/jvm-deps), for format("kafka") next to
    # format("tidelog"): only the first session of a process puts jars on the driver's
    # classpath, so every module's session asks for them.
    jars = spark_connector_jars()
    if jars:
        builder = builder.config("spark.jars", jars)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    analytics.register(session)
    yield session
    session.stop()


@pytest.fixture(scope="module")
def kafka_spark(spark: Any) -> Any:
    """The module's session with Spark's Kafka connector (`format("kafka")`) loadable on the
    driver, else a one-line skip."""
    from tests.support.jvm import spark_connector_jars

    if not spark_connector_jars():
        pytest.skip("JVM test: Spark's Kafka connector is not fetched (run scripts/jvm-deps)")
    try:
        loader = spark._jvm.java.lang.Thread.currentThread().getContextClassLoader()
        loader.loadClass("org.apache.spark.sql.kafka010.KafkaSourceProvider")
    except Exception:
        pytest.skip("JVM test: this process's Spark JVM started without the Kafka connector jars")
    return spark
