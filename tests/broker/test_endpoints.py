"""Listener parsing: bind and advertised addresses (broker.endpoints.resolve_endpoints)."""

from __future__ import annotations

import pytest

from tidelog.broker.endpoints import Endpoint, resolve_endpoints
from tidelog.config import ConfigError, load_broker_config


def _endpoints(*overrides: str) -> list[Endpoint]:
    return resolve_endpoints(load_broker_config(None, list(overrides), environ={}))


def test_default_is_loopback_9092() -> None:
    assert _endpoints() == [Endpoint("PLAINTEXT", "127.0.0.1", 9092, "127.0.0.1", 9092)]


def test_empty_host_binds_loopback_not_every_interface() -> None:
    # Kafka divergence: Kafka binds every interface for PLAINTEXT://:9092.
    assert _endpoints("listeners=PLAINTEXT://:9093") == [
        Endpoint("PLAINTEXT", "127.0.0.1", 9093, "127.0.0.1", 9093)
    ]


def test_advertised_defaults_to_listeners_and_can_differ() -> None:
    assert _endpoints("listeners=PLAINTEXT://0.0.0.0:9092")[0].advertised_host == "127.0.0.1"
    assert _endpoints(
        "listeners=PLAINTEXT://0.0.0.0:9092",
        "advertised.listeners=PLAINTEXT://broker.example:19092",
    ) == [Endpoint("PLAINTEXT", "0.0.0.0", 9092, "broker.example", 19092)]


def test_bad_listener_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        _endpoints("listeners=PLAINTEXT://localhost")
