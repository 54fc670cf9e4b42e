"""``tidelog configs`` for client quotas, with kafka-configs.sh's flags: entity types, names and
defaults in command-line order, the ``--user``/``--client`` shorthands, Kafka's refusals, and
what Kafka prints (``--describe``: doubles as Java writes them)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.tools.tools_fixtures import RunTool
from tidelog.tools.configs import java_double


def _b(broker: Any) -> list[str]:
    return ["configs", "--bootstrap-server", broker.bootstrap]


def test_alter_describe_delete_with_entity_flags(tidelog: RunTool, module_broker: Any) -> None:
    b = _b(module_broker)
    r = tidelog(*b, "--alter", "--user", "tq-alice", "--client", "tq-app",
                "--add-config", "producer_byte_rate=1024,request_percentage=12.5")  # fmt: skip
    assert (r.code, r.out) == (0, "Completed updating config for client tq-app.\n"), r.err
    r = tidelog(*b, "--alter", "--client-defaults", "--add-config", "consumer_byte_rate=20000000")
    assert r.out == "Completed updating default config for clients in the cluster.\n", r.err
    r = tidelog(*b, "--describe", "--entity-type", "users", "--entity-name", "tq-alice",
                "--entity-type", "clients", "--entity-name", "tq-app")  # fmt: skip
    assert r.lines == [
        "Quota configs for user-principal 'tq-alice', client-id 'tq-app' are "
        "producer_byte_rate=1024.0, request_percentage=12.5"
    ]
    r = tidelog(*b, "--describe", "--entity-type", "clients", "--entity-default")
    assert r.lines == ["Quota configs for the default client-id are consumer_byte_rate=2.0E7"]
    r = tidelog(*b, "--alter", "--entity-type", "clients", "--entity-default",
                "--delete-config", "consumer_byte_rate")  # fmt: skip
    assert r.code == 0, r.err
    r = tidelog(*b, "--alter", "--entity-type", "clients", "--entity-default",
                "--delete-config", "consumer_byte_rate")  # fmt: skip
    assert (r.code, r.err.strip()) == (1, "tidelog configs: Invalid config(s): consumer_byte_rate")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--alter", "--entity-type", "users", "--entity-type", "users", "--entity-name", "a",
          "--entity-name", "b", "--add-config", "producer_byte_rate=1"],
         "Duplicate entity type(s) specified: users"),
        (["--alter", "--entity-type", "users", "--entity-type", "ips", "--entity-name", "a",
          "--entity-name", "1.2.3.4", "--add-config", "producer_byte_rate=1"],
         "Only 'users' and 'clients' entity types may be specified together"),
        (["--alter", "--entity-type", "clients", "--add-config", "producer_byte_rate=1"],
         "An entity-name or default entity must be specified with --alter of users, clients, "
         "brokers or ips"),
        (["--alter", "--entity-type", "clients", "--entity-name", "c", "--add-config",
          "SCRAM-SHA-256=[password=x]"],
         "Only quota configs can be added for 'clients'. Unexpected config names: SCRAM-SHA-256"),
        (["--alter", "--entity-type", "users", "--entity-name", "u", "--add-config",
          "producer_byte_rate=1,SCRAM-SHA-256=[password=x]"],
         "Cannot alter both quota and SCRAM credential configs simultaneously for 'users'."),
        (["--alter", "--entity-type", "users", "--entity-name", "u", "--add-config",
          "producer_byte_rate=fast"],
         "Cannot parse quota configuration value for producer_byte_rate: fast"),
        (["--describe", "--entity-type", "users", "--user", "u"],
         "--entity-{type,name,default} should not be used in conjunction with specific entity "
         "flags"),
    ],
)  # fmt: skip
def test_kafkas_refusals(
    tidelog: RunTool, module_broker: Any, argv: list[str], message: str
) -> None:
    r = tidelog(*_b(module_broker), *argv)
    assert (r.code, r.err.strip()) == (2, f"tidelog configs: {message}")


@pytest.mark.parametrize(
    ("value", "shown"),
    [(1024.0, "1024.0"), (12.5, "12.5"), (2e7, "2.0E7"), (10485760.0, "1.048576E7"),
     (0.0001, "1.0E-4"), (1e-3, "0.001")],
)  # fmt: skip
def test_doubles_print_as_java_does(value: float, shown: str) -> None:
    assert java_double(value) == shown
