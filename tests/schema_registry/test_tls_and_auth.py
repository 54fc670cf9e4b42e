"""The registry over ``https://`` with the broker's key store, and HTTP basic authentication
against the broker's SASL PLAIN users (confluent-kafka's client with ``basic.auth.user.info``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import requests

from tests.security.certs import make_certs, ssl_settings
from tests.security.secure_broker import PLAIN_JAAS
from tests.support.net import free_port

pytestmark = pytest.mark.integration

AVRO = '{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}'


def test_https_listener(broker_factory: Any, tmp_path: Path) -> None:
    certs = make_certs(tmp_path / "certs")
    port = free_port()
    broker_factory(
        {**ssl_settings(certs), "schema.registry.listeners": f"https://127.0.0.1:{port}"}
    )
    url = f"https://127.0.0.1:{port}"
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(url + "/subjects", timeout=30)  # not trusted without the CA
    ok = requests.post(
        url + "/subjects/tls-value/versions",
        json={"schema": AVRO},
        verify=str(certs.ca),
        timeout=30,
    )
    assert ok.status_code == 200 and ok.json() == {"id": 1}
    from confluent_kafka.schema_registry import SchemaRegistryClient

    client = SchemaRegistryClient({"url": url, "ssl.ca.location": str(certs.ca)})
    assert client.get_subjects() == ["tls-value"]


def test_basic_auth_with_plain_users(broker_factory: Any) -> None:
    kafka_port, sasl_port, port = free_port(), free_port(), free_port()
    broker_factory(
        {
            "listeners": f"PLAINTEXT://127.0.0.1:{kafka_port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
            "schema.registry.listeners": f"http://127.0.0.1:{port}",
        }
    )
    url = f"http://127.0.0.1:{port}"
    anonymous = requests.get(url + "/subjects", timeout=30)
    assert anonymous.status_code == 401 and anonymous.json()["error_code"] == 401
    wrong = requests.get(url + "/subjects", auth=("alice", "nope"), timeout=30)
    assert wrong.status_code == 401
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    client = SchemaRegistryClient({"url": url, "basic.auth.user.info": "alice:alice-secret"})
    assert client.register_schema("auth-value", Schema(AVRO, "AVRO")) == 1
    assert requests.get(url + "/subjects", auth=("admin", "admin-secret"), timeout=30).json() == [
        "auth-value"
    ]
