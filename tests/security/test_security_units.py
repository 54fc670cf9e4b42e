"""The pure parts of broker/security: principal mapping, the authorizer's rules, the SCRAM
exchange (against a client written from RFC 5802), JAAS parsing, cipher names."""

from __future__ import annotations

import base64
import hashlib
import hmac
from pathlib import Path

import pytest

from tidelog.broker.security.acls import (
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from tidelog.broker.security.authorizer import Authorizer
from tidelog.broker.security.jaas import parse_jaas
from tidelog.broker.security.principal import SslPrincipalMapper, dn_of_peercert
from tidelog.broker.security.scram import (
    ScramCredentialStore,
    ScramError,
    ScramServer,
    credential_from_password,
)
from tidelog.broker.security.tls import iana_to_openssl

TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY


def test_dn_and_mapping_rules() -> None:
    cert = {
        "subject": (
            (("countryName", "US"),),
            (("organizationName", "Acme, Inc"),),
            (("commonName", "alice"),),
        )
    }
    dn = dn_of_peercert(cert)
    assert dn == "CN=alice,O=Acme\\, Inc,C=US"
    assert SslPrincipalMapper("DEFAULT").name(dn) == dn
    rules = SslPrincipalMapper("RULE:^CN=(.*?),O=(.*?),C=(.*)$/$1@$3/L, DEFAULT")
    assert rules.name(dn) == "alice@us"
    assert rules.name("OU=x") == "OU=x"  # falls through to DEFAULT
    with pytest.raises(LookupError):
        SslPrincipalMapper("RULE:^CN=(.*)$/$1/U").name("OU=nobody")
    with pytest.raises(ValueError):
        SslPrincipalMapper("RULE:^CN=(.*$/$1/")


def _acl(
    rtype: ResourceType,
    name: str,
    pattern: PatternType,
    who: str,
    op: Operation,
    perm: Permission = ALLOW,
    host: str = "*",
) -> AclBinding:
    return AclBinding(rtype, pattern, name, f"User:{who}", host, op, perm)


def test_authorizer_rules(tmp_path: Path) -> None:
    path = tmp_path / "__acls.json"
    authz = Authorizer(path, super_users=["User:root"])
    assert authz.create(
        [
            _acl(TOPIC, "orders", LIT, "alice", Operation.WRITE),
            _acl(TOPIC, "logs-", PRE, "alice", Operation.READ),
            _acl(TOPIC, "*", LIT, "*", Operation.DESCRIBE),
            _acl(TOPIC, "logs-secret", LIT, "alice", Operation.ALL, DENY),
            _acl(GROUP, "g", LIT, "bob", Operation.READ, host="10.0.0.1"),
            _acl(TOPIC, "*", PRE, "x", Operation.READ),  # invalid: '*' prefix
        ]
    ) == [None, None, None, None, None, "a PREFIXED pattern cannot be '*'"]

    def ok(who: str, op: Operation, rtype: ResourceType, name: str, host: str = "1.2.3.4") -> bool:
        return authz.authorize(f"User:{who}", host, op, rtype, name)

    assert ok("alice", Operation.WRITE, TOPIC, "orders")
    assert not ok("alice", Operation.READ, TOPIC, "orders")
    assert ok("alice", Operation.DESCRIBE, TOPIC, "orders")  # WRITE implies DESCRIBE
    assert ok("alice", Operation.READ, TOPIC, "logs-app")  # prefix
    assert not ok("alice", Operation.READ, TOPIC, "logs-secret")  # DENY wins
    assert not ok("alice", Operation.DESCRIBE, TOPIC, "logs-secret")  # DENY ALL covers it
    assert ok("carol", Operation.DESCRIBE, TOPIC, "anything")  # User:* on '*'
    assert not ok("carol", Operation.READ, TOPIC, "anything")
    assert ok("bob", Operation.READ, GROUP, "g", host="10.0.0.1")
    assert not ok("bob", Operation.READ, GROUP, "g", host="10.0.0.2")
    assert not ok("bob", Operation.READ, GROUP, "no-acl")  # no ACL: denied by default
    assert ok("root", Operation.ALTER, ResourceType.CLUSTER, "kafka-cluster")
    assert authz.authorize_any("User:alice", "h", Operation.WRITE, TOPIC)
    assert not authz.authorize_any("User:bob", "h", Operation.WRITE, TOPIC)

    match = AclFilter(TOPIC, "logs-app", PatternType.MATCH)
    assert {b.resource_name for b in authz.describe(match)} == {"logs-", "*"}
    removed = authz.delete([AclFilter(principal="User:alice", permission=DENY)])
    assert [b.resource_name for b in removed[0]] == ["logs-secret"]
    authz.save(*authz.snapshot())
    again = Authorizer(path, allow_if_no_acl=True)
    assert len(again) == 4
    assert again.authorize("User:bob", "h", Operation.READ, GROUP, "no-acl")
    assert again.authorize("User:alice", "h", Operation.READ, TOPIC, "logs-secret")


def test_authorizer_with_many_acls() -> None:
    authz = Authorizer(None)
    authz.create(
        _acl(TOPIC, f"team{i:05d}-", PRE if i % 2 else LIT, f"u{i}", Operation.READ)
        for i in range(10_000)
    )
    assert authz.authorize("User:u1", "h", Operation.READ, TOPIC, "team00001-orders")
    assert not authz.authorize("User:u2", "h", Operation.READ, TOPIC, "team00001-orders")
    assert authz.authorize("User:u2", "h", Operation.READ, TOPIC, "team00002-")


def _client_exchange(server: ScramServer, user: str, password: str, mechanism: str) -> bytes:
    """RFC 5802 client side, independent of the server's code."""
    name = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
    client_first_bare = f"n={user},r=fyko+d2lbbFgONRv9qkxdawL"
    server_first = server.step(("n,," + client_first_bare).encode()).decode()
    attrs = dict(kv.split("=", 1) for kv in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(
        name, password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"])
    )
    client_key = hmac.new(salted, b"Client Key", name).digest()
    stored_key = hashlib.new(name, client_key).digest()
    without_proof = f"c=biws,r={attrs['r']}"
    auth_message = f"{client_first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(stored_key, auth_message, name).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    final = server.step(f"{without_proof},p={base64.b64encode(proof).decode()}".encode())
    server_key = hmac.new(salted, b"Server Key", name).digest()
    expected = hmac.new(server_key, auth_message, name).digest()
    assert final == b"v=" + base64.b64encode(expected)
    return final


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_exchange(tmp_path: Path, mechanism: str) -> None:
    store = ScramCredentialStore(tmp_path / "creds.json")
    store.put("alice", mechanism, credential_from_password(mechanism, "pencil", 4096))
    store.save()
    assert b"pencil" not in (tmp_path / "creds.json").read_bytes()
    store = ScramCredentialStore(tmp_path / "creds.json")
    server = ScramServer(mechanism, store)
    _client_exchange(server, "alice", "pencil", mechanism)
    assert server.complete and server.user == "alice"
    with pytest.raises(ScramError, match="invalid credentials"):
        _client_exchange(ScramServer(mechanism, store), "alice", "wrong", mechanism)
    with pytest.raises(ScramError, match="Invalid user credentials"):
        _client_exchange(ScramServer(mechanism, store), "bob", "pencil", mechanism)
    with pytest.raises(ScramError):
        ScramServer(mechanism, store).step(b"\xff\xfe garbage")
    with pytest.raises(ScramError, match="channel binding"):
        ScramServer(mechanism, store).step(b"p=tls-unique,,n=alice,r=abc")


def test_jaas_and_cipher_names() -> None:
    entries = parse_jaas(
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="a\\"b" user_admin="a\\"b" user_alice=alice-secret;'
    )
    assert entries[0].plain_users() == {"admin": 'a"b', "alice": "alice-secret"}
    for bad in ("", "Module required", "Module maybe;", "Module required key;"):
        with pytest.raises(ValueError):
            parse_jaas(bad)
    assert iana_to_openssl("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256") == "ECDHE-RSA-AES128-GCM-SHA256"
    assert iana_to_openssl("ECDHE-RSA-AES256-GCM-SHA384") == "ECDHE-RSA-AES256-GCM-SHA384"
