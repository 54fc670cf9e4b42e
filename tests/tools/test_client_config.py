"""Kafka client properties -> kafka-python keyword arguments (tools/_client_config.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidelog.tools._client_config import (
    ClientConfigError,
    client_settings,
    read_properties,
)

PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def test_sasl_plain_from_jaas(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text(
        "security.protocol=sasl_plaintext\n"
        "sasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
        '    username="alice" password="al\\\\"ice-secret";\n'
    )
    kw = client_settings(read_properties(path), "admin").kwargs
    assert kw == {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "alice",
        "sasl_plain_password": 'al"ice-secret',
    }


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_scram_from_jaas(mechanism: str) -> None:
    props = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": mechanism,
        "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
        "username=bob password=pw;",
    }
    kw = client_settings(props, "consumer").kwargs
    assert kw["sasl_mechanism"] == mechanism
    assert (kw["sasl_plain_username"], kw["sasl_plain_password"]) == ("bob", "pw")


def test_mechanism_and_module_must_agree() -> None:
    props = {
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="u" password="secret-value";',
    }
    with pytest.raises(ClientConfigError) as err:
        client_settings(props, "admin")
    assert "PlainLoginModule" in str(err.value)
    assert "secret-value" not in str(err.value)


def test_unsupported_login_module_is_named_without_the_secret() -> None:
    props = {
        "sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required "
        'useKeyTab=true principal="kafka@EXAMPLE" password="hush";'
    }
    with pytest.raises(ClientConfigError) as err:
        client_settings(props, "admin")
    assert "Krb5LoginModule" in str(err.value) and "hush" not in str(err.value)


def test_pem_stores_and_host_name_check(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text(PEM)
    me = tmp_path / "me.pem"
    me.write_text(PEM + "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n")
    props = {
        "security.protocol": "SSL",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(me),
        "ssl.key.password": "kp",
        "ssl.endpoint.identification.algorithm": "",
    }
    kw = client_settings(props, "producer").kwargs
    assert kw["ssl_cafile"] == str(ca)
    assert kw["ssl_certfile"] == kw["ssl_keyfile"] == str(me)
    assert kw["ssl_password"] == "kp"
    assert kw["ssl_check_hostname"] is False
    assert client_settings({"ssl.endpoint.identification.algorithm": "https"}, "admin").kwargs == {
        "ssl_check_hostname": True
    }


def test_jks_store_asks_for_pem(tmp_path: Path) -> None:
    store = tmp_path / "truststore.jks"
    store.write_bytes(b"\xfe\xed\xfe\xed binary")
    for props in (
        {"ssl.truststore.location": str(store), "ssl.truststore.type": "JKS"},
        {"ssl.truststore.location": str(store)},
    ):
        with pytest.raises(ClientConfigError) as err:
            client_settings(props, "admin")
        assert "PEM" in str(err.value)


def test_any_client_setting_is_typed_and_java_only_ones_are_ignored() -> None:
    props = {
        "request.timeout.ms": "20000",
        "client.id": "me",
        "enable.auto.commit": "false",
        "max.poll.records": "7",
        "key.deserializer": "org.apache.kafka.common.serialization.StringDeserializer",
        "partition.assignment.strategy": "org.apache.kafka.clients.consumer.RoundRobinAssignor",
    }
    settings = client_settings(props, "consumer")
    kw = settings.kwargs
    assert kw["request_timeout_ms"] == 20000
    assert kw["client_id"] == "me"
    assert kw["enable_auto_commit"] is False
    assert kw["max_poll_records"] == 7
    assert kw["partition_assignment_strategy"][0].__name__ == "RoundRobinPartitionAssignor"
    assert settings.ignored == ("key.deserializer",)
    producer = client_settings({"acks": "-1", "linger.ms": "5", "batch.size": "1000"}, "producer")
    assert producer.kwargs == {"acks": "all", "linger_ms": 5, "batch_size": 1000}


def test_unknown_or_badly_typed_properties_are_named() -> None:
    with pytest.raises(ClientConfigError) as err:
        client_settings({"linger.ms": "5"}, "consumer")
    assert "linger.ms" in str(err.value)
    with pytest.raises(ClientConfigError) as err:
        client_settings({"request.timeout.ms": "soon"}, "admin")
    assert "request.timeout.ms" in str(err.value)
    with pytest.raises(ClientConfigError) as err:
        client_settings({"ssl.truststore.certificates": PEM}, "admin")
    assert "ssl.truststore.location" in str(err.value)


def test_unreadable_properties_file() -> None:
    with pytest.raises(ClientConfigError) as err:
        read_properties("/nonexistent/client.properties")
    assert "/nonexistent/client.properties" in str(err.value)
