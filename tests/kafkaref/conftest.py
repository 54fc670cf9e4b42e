"""Fixtures of the Kafka reference tests: the Spark session of the analytics tests (one per
module) for the file source's test on Kafka's log dir. ``kafka_broker`` is in tests/conftest.py."""

from tests.analytics.conftest import spark  # noqa: F401
