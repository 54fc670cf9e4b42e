"""Authorization with real clients: ACLs made with confluent-kafka's and kafka-python's admin
clients and the ``tidelog acls`` tool, then calls allowed and refused as Kafka would."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import pytest

from tests.security.secure_broker import (
    PLAIN_JAAS,
    STANDARD_AUTHORIZER,
    start,
    wait_for_log,
)
from tests.support.net import free_port

TIDELOG = [sys.executable, "-m", "tidelog"]


def _sasl(port: int, user: str) -> dict[str, str]:
    return {
        "bootstrap.servers": f"127.0.0.1:{port}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": f"{user}-secret",
    }


def _kp(port: int, user: str) -> dict[str, Any]:
    return {
        "bootstrap_servers": f"127.0.0.1:{port}",
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": user,
        "sasl_plain_password": f"{user}-secret",
    }


@pytest.fixture
def acl_broker(broker_factory: Any) -> tuple[Any, int, int]:
    sasl_port, plain_port = free_port(), free_port()
    settings = {
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": "User:admin;User:ANONYMOUS",
        "auto.create.topics.enable": "false",
        "metrics.port": str(free_port()),
    }
    broker = start(broker_factory, {"SASL_PLAINTEXT": sasl_port, "PLAINTEXT": plain_port}, settings)
    return broker, sasl_port, plain_port


def _produce(port: int, user: str, topic: str) -> int:
    """The error code of one produce (0 when it was written)."""
    from confluent_kafka import Producer

    outcome: list[int] = []
    p = Producer({**_sasl(port, user), "message.timeout.ms": 8000, "enable.idempotence": False})
    p.produce(topic, b"x", on_delivery=lambda err, _m: outcome.append(err.code() if err else 0))
    p.flush(15)
    return outcome[0] if outcome else -1


def _consume_error(port: int, user: str, topic: str, group: str) -> str | None:
    """The name of the error a kafka-python consumer gets, or None when it reads a record."""
    from kafka import KafkaConsumer
    from kafka.errors import KafkaError

    consumer = KafkaConsumer(
        group_id=group, auto_offset_reset="earliest", consumer_timeout_ms=6000, **_kp(port, user)
    )
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            records = consumer.poll(timeout_ms=500)
            if any(records.values()):
                return None
        return "timeout"
    except KafkaError as exc:
        return type(exc).__name__
    finally:
        consumer.close()


def test_acls_allow_and_refuse_as_kafka(acl_broker: tuple[Any, int, int]) -> None:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )
    from kafka.admin import (
        ACL,
        ACLOperation,
        ACLPermissionType,
        KafkaAdminClient,
        ResourcePattern,
    )
    from kafka.admin import ACLResourcePatternType as KPattern
    from kafka.admin import ResourceType as KType

    broker, port, _ = acl_broker
    admin = AdminClient(_sasl(port, "admin"))
    for future in admin.create_topics(
        [NewTopic(t, 1, 1) for t in ("orders", "orders-eu", "secret", "public")]
    ).values():
        future.result(20)

    def allow(rtype: Any, name: str, pattern: Any, user: str, op: Any, deny: bool = False) -> Any:
        permission = AclPermissionType.DENY if deny else AclPermissionType.ALLOW
        return AclBinding(rtype, name, pattern, f"User:{user}", "*", op, permission)

    literal, prefixed = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
    created = admin.create_acls(
        [
            allow(ResourceType.TOPIC, "orders", literal, "alice", AclOperation.WRITE),
            allow(ResourceType.TOPIC, "orders", prefixed, "alice", AclOperation.READ),
            allow(ResourceType.GROUP, "alice-", prefixed, "alice", AclOperation.READ),
        ]
    )
    for future in created.values():
        future.result(20)
    # kafka-python's admin client: bob may read every topic but orders (DENY wins).
    kadmin = KafkaAdminClient(**_kp(port, "admin"))
    result = kadmin.create_acls(
        [
            ACL(
                "User:bob",
                "*",
                ACLOperation.READ,
                ACLPermissionType.ALLOW,
                ResourcePattern(KType.TOPIC, "*", KPattern.LITERAL),
            ),
            ACL(
                "User:bob",
                "*",
                ACLOperation.READ,
                ACLPermissionType.DENY,
                ResourcePattern(KType.TOPIC, "orders", KPattern.LITERAL),
            ),
            ACL(
                "User:bob",
                "*",
                ACLOperation.ALL,
                ACLPermissionType.ALLOW,
                ResourcePattern(KType.GROUP, "*", KPattern.LITERAL),
            ),
        ]
    )
    assert not result["failed"], result
    kadmin.close()

    # Metadata lists only what alice may DESCRIBE (WRITE and READ imply it).
    alice_admin = AdminClient(_sasl(port, "alice"))
    assert set(alice_admin.list_topics(timeout=20).topics) == {"orders", "orders-eu"}
    # Produce: WRITE on orders only.
    assert _produce(port, "alice", "orders") == 0
    assert _produce(port, "alice", "secret") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert _produce(port, "bob", "public") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # Consume: READ on the topic and on the group.
    assert _consume_error(port, "alice", "orders", "alice-readers") is None
    assert _consume_error(port, "alice", "orders", "others") == "GroupAuthorizationFailedError"
    assert _consume_error(port, "bob", "orders", "bobs") == "TopicAuthorizationFailedError"
    # Admin calls need the cluster (or the topic) permissions.
    with pytest.raises(KafkaException) as info:
        alice_admin.create_topics([NewTopic("new-one", 1, 1)])["new-one"].result(20)
    assert info.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as info:
        alice_admin.delete_topics(["orders"])["orders"].result(20)
    assert info.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    from kafka.admin import ACLFilter, ResourcePatternFilter
    from kafka.errors import ClusterAuthorizationFailedError

    alice_kadmin = KafkaAdminClient(**_kp(port, "alice"))
    any_acl = ACLFilter(
        None,
        None,
        ACLOperation.ANY,
        ACLPermissionType.ANY,
        ResourcePatternFilter(KType.ANY, None, KPattern.ANY),
    )
    with pytest.raises(ClusterAuthorizationFailedError):
        alice_kadmin.describe_acls(any_acl)
    alice_kadmin.close()

    # DescribeAcls and DeleteAcls with filters.
    everything_of_alice = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        "User:alice",
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    listed = admin.describe_acls(everything_of_alice).result(20)
    assert len(listed) == 3
    match_orders = AclBindingFilter(
        ResourceType.TOPIC,
        "orders-eu",
        ResourcePatternType.MATCH,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    assert {
        (b.name, b.resource_pattern_type) for b in admin.describe_acls(match_orders).result(20)
    } == {
        ("orders", ResourcePatternType.PREFIXED),
        ("*", ResourcePatternType.LITERAL),
    }
    write_filter = AclBindingFilter(
        ResourceType.TOPIC,
        "orders",
        ResourcePatternType.LITERAL,
        "User:alice",
        None,
        AclOperation.WRITE,
        AclPermissionType.ALLOW,
    )
    deleted = admin.delete_acls([write_filter])[write_filter].result(20)
    assert len(deleted) == 1
    assert _produce(port, "alice", "orders") == KafkaError.TOPIC_AUTHORIZATION_FAILED

    # ACLs are durable: after a restart alice still reads orders, still cannot write it.
    broker.restart()
    assert _consume_error(port, "alice", "orders", "alice-again") is None
    assert _produce(port, "alice", "orders") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    log = wait_for_log(broker, "Principal = User:bob is Denied operation = READ")
    assert "on resource = TOPIC:orders" in log
    # Denials are counted on the metrics endpoint.
    import re
    import urllib.request

    metrics_port = broker.overrides["metrics.port"]
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    found = re.search(r"^tidelog_authorization_denials_total (\S+)$", text, re.M)
    assert found is not None and float(found.group(1)) > 0


def test_acls_tool_like_kafka_acls(acl_broker: tuple[Any, int, int]) -> None:
    from confluent_kafka import KafkaError

    _, port, plain_port = acl_broker
    bootstrap = f"127.0.0.1:{plain_port}"  # ANONYMOUS on the loopback listener is a super user

    def tool(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*TIDELOG, "acls", "--bootstrap-server", bootstrap, *args],
            capture_output=True,
            text=True,
            timeout=60,
        )

    subprocess.run(
        [*TIDELOG, "topics", "--bootstrap-server", bootstrap, "--create", "--topic", "tool-t"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    added = tool("--add", "--allow-principal", "User:alice", "--producer", "--topic", "tool-t")
    assert added.returncode == 0, added.stderr
    assert added.stdout.count("Added ACL") == 3
    assert _produce(port, "alice", "tool-t") == 0
    listed = tool("--list", "--topic", "tool-t")
    assert "principal=User:alice" in listed.stdout and "operation=WRITE" in listed.stdout
    prefixed = tool(
        "--add",
        "--deny-principal",
        "User:alice",
        "--operation",
        "Write",
        "--topic",
        "tool-",
        "--resource-pattern-type",
        "prefixed",
    )
    assert prefixed.returncode == 0, prefixed.stderr
    assert _produce(port, "alice", "tool-t") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    removed = tool(
        "--remove",
        "--deny-principal",
        "User:alice",
        "--operation",
        "Write",
        "--topic",
        "tool-",
        "--resource-pattern-type",
        "prefixed",
    )
    assert removed.returncode == 0 and "Removed 1 ACL(s)." in removed.stdout
    assert _produce(port, "alice", "tool-t") == 0
    bad = tool("--add", "--allow-principal", "alice", "--operation", "Read", "--topic", "x")
    assert bad.returncode == 2 and "User:alice" in bad.stderr


def test_transactions_need_write_on_their_transactional_id(
    acl_broker: tuple[Any, int, int],
) -> None:
    """Kafka's checks for transactions: InitProducerId, AddPartitionsToTxn and EndTxn need WRITE
    on the TRANSACTIONAL_ID; without it the producer fails with
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED and nothing is written."""
    from confluent_kafka import KafkaError, KafkaException, Producer
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )

    _, port, _ = acl_broker
    admin = AdminClient(_sasl(port, "admin"))
    for future in admin.create_topics([NewTopic("ledger", 1, 1)]).values():
        future.result(20)
    literal = ResourcePatternType.LITERAL
    grants = [
        AclBinding(
            ResourceType.TOPIC, "ledger", literal, "User:alice", "*", op, AclPermissionType.ALLOW
        )
        for op in (AclOperation.WRITE, AclOperation.READ)
    ]
    for future in admin.create_acls(grants).values():
        future.result(20)

    def transactional(txn_id: str) -> Any:
        return Producer(
            {**_sasl(port, "alice"), "transactional.id": txn_id, "transaction.timeout.ms": 10000}
        )

    refused = transactional("alice-txn")
    with pytest.raises(KafkaException) as exc:
        refused.init_transactions(20)
    assert exc.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED

    txn_acl = AclBinding(
        ResourceType.TRANSACTIONAL_ID,
        "alice-",
        ResourcePatternType.PREFIXED,
        "User:alice",
        "*",
        AclOperation.WRITE,
        AclPermissionType.ALLOW,
    )
    for future in admin.create_acls([txn_acl]).values():
        future.result(20)
    allowed = transactional("alice-txn")
    allowed.init_transactions(20)
    allowed.begin_transaction()
    allowed.produce("ledger", b"entry")
    allowed.commit_transaction(20)
    other = transactional("bob-txn")  # alice's prefix does not cover it
    with pytest.raises(KafkaException) as exc:
        other.init_transactions(20)
    assert exc.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_tools_with_a_sasl_plain_command_config(
    acl_broker: tuple[Any, int, int], tmp_path: Any
) -> None:
    """``--command-config`` with SASL_PLAINTEXT/PLAIN: ``acls --list`` and ``topics --list``
    over the SASL listener, as the super user and as a user with no ACLs."""
    _, port, plain_port = acl_broker
    plain = f"127.0.0.1:{plain_port}"
    subprocess.run([*TIDELOG, "topics", "--bootstrap-server", plain, "--create", "--topic",
                    "cc-t"], check=True, capture_output=True, timeout=60)  # fmt: skip
    subprocess.run([*TIDELOG, "acls", "--bootstrap-server", plain, "--add", "--allow-principal",
                    "User:bob", "--operation", "Read", "--topic", "cc-t"],
                   check=True, capture_output=True, timeout=60)  # fmt: skip

    def tool(user: str, password: str, *args: str) -> subprocess.CompletedProcess[str]:
        cfg = tmp_path / f"{user}-{password}.properties"
        cfg.write_text(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
            "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="{user}" password="{password}";\n'
        )
        return subprocess.run(
            [*TIDELOG, args[0], "--bootstrap-server", f"127.0.0.1:{port}",
             "--command-config", str(cfg), *args[1:]],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    topics = tool("admin", "admin-secret", "topics", "--list")
    assert topics.returncode == 0, topics.stderr
    assert "cc-t" in topics.stdout.split()
    acls = tool("admin", "admin-secret", "acls", "--list")
    assert acls.returncode == 0, acls.stderr
    assert "principal=User:bob" in acls.stdout and "operation=READ" in acls.stdout
    # bob may read cc-t, so he sees it; alice has no ACL and sees no topic, and may not list ACLs.
    assert "cc-t" in tool("bob", "bob-secret", "topics", "--list").stdout.split()
    hidden = tool("alice", "alice-secret", "topics", "--list")
    assert hidden.returncode == 0, hidden.stderr
    assert "cc-t" not in hidden.stdout.split()
    refused = tool("alice", "alice-secret", "acls", "--list")
    assert refused.returncode != 0
    assert "Traceback" not in refused.stderr and "AUTHORIZATION" in refused.stderr.upper()
    wrong = tool("admin", "guess-42", "topics", "--list")
    assert wrong.returncode != 0 and "Traceback" not in wrong.stderr
    # (kafka-python retries a refused login until its bootstrap timeout: the tool says so)
    assert "guess-42" not in wrong.stderr, wrong.stderr
    assert "sasl.jaas.config in --command-config" in wrong.stderr, wrong.stderr
