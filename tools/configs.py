"""``tidelog configs``: client quotas and users' SCRAM credentials, with kafka-configs.sh's
options (``--entity-type users|clients|ips``).

Quotas: ``--alter --add-config producer_byte_rate=1048576,consumer_byte_rate=2097152`` (and
``request_percentage``, ``controller_mutation_rate``; ``connection_creation_rate`` for ips),
``--delete-config KEY,...``, for ``--entity-name NAME`` or ``--entity-default``; a user and a
client id together by giving both types (``--entity-type users --entity-name alice
--entity-type clients --entity-name app``), or with ``--user``, ``--client``,
``--user-defaults``, ``--client-defaults``, ``--ip``, ``--ip-defaults`` (AlterClientQuotas).
``--describe`` lists the matching quota entities (DescribeClientQuotas, "containsOnly" as
kafka-configs.sh asks) and, for users, their SCRAM credentials.

SCRAM: ``--alter --add-config 'SCRAM-SHA-256=[iterations=8192,password=...]'`` salts and hashes
the password here (PBKDF2) and sends only the salted password (AlterUserScramCredentials);
``--delete-config SCRAM-SHA-512`` removes one. Topic configs are set with ``tidelog topics
--alter --config``.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

from tidelog.tools._common import (
    EXIT_OK,
    SubParsers,
    ToolError,
    add_admin_options,
    add_timeout_ms,
    add_tool_parser,
    admin_session,
    check_reachable,
    client_errors,
    client_kwargs,
    close_quietly,
    parse_bootstrap,
)
from tidelog.tools._scram_spec import MECHANISMS, parse_scram_specs, split_top

__all__ = ["add_parser", "run"]

EXAMPLES = """\
  tidelog configs --bootstrap-server 127.0.0.1:9092 --alter --entity-type users \\
      --entity-name alice --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'
  tidelog configs --bootstrap-server 127.0.0.1:9092 --describe --entity-type users
  tidelog configs --bootstrap-server 127.0.0.1:9092 --alter --entity-type users \\
      --entity-name alice --delete-config SCRAM-SHA-512
  tidelog configs --bootstrap-server 127.0.0.1:9092 --alter --entity-type clients \\
      --entity-name app --add-config producer_byte_rate=1048576,consumer_byte_rate=2097152
  tidelog configs --bootstrap-server 127.0.0.1:9092 --alter --entity-type users \\
      --entity-default --add-config request_percentage=50
  tidelog configs --bootstrap-server 127.0.0.1:9092 --describe --entity-type clients
"""

#: kafka-configs.sh's entity types -> ClientQuotaEntity types.
ENTITY_TYPES = {"users": "user", "clients": "client-id", "ips": "ip"}
USER_CLIENT_QUOTAS = (
    "producer_byte_rate",
    "consumer_byte_rate",
    "request_percentage",
    "controller_mutation_rate",
)
IP_QUOTAS = ("connection_creation_rate",)
#: DescribeClientQuotas match types.
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


class _Append(argparse.Action):
    """Append ``(flag, value)`` to one shared list, so entity types, names and defaults keep
    their command-line order as kafka-configs.sh pairs them."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        items = list(getattr(namespace, self.dest) or [])
        items.append((option_string, "" if values is None or values == [] else values))
        setattr(namespace, self.dest, items)


def add_parser(subparsers: SubParsers) -> None:
    p = add_tool_parser(
        subparsers,
        "configs",
        help="set or list client quotas and users' SCRAM credentials (like kafka-configs.sh)",
        description="Manage client quotas (users, client ids, IPs) and SCRAM credentials with "
        "kafka-configs.sh's options. Passwords are salted and hashed before they leave this "
        "process.",
        examples=EXAMPLES,
        run=run,
    )
    add_admin_options(
        p,
        (
            ("--alter", "add or delete quotas or credentials"),
            ("--describe", "list quotas and credentials"),
        ),
    )
    entity = p.add_argument_group("entities (kafka-configs.sh's)")
    entity.add_argument(
        "--entity-type",
        dest="entity_types",
        action="append",
        choices=tuple(ENTITY_TYPES),
        default=[],
        help="users, clients or ips; users and clients may be given together",
    )
    entity.add_argument(
        "--entity-name",
        dest="entity_names",
        action=_Append,
        metavar="NAME",
        help="the user principal name, client id or IP (all of the type for --describe)",
    )
    entity.add_argument(
        "--entity-default",
        dest="entity_names",
        action=_Append,
        nargs=0,
        help="the default entity of the type (<default>)",
    )
    for flag, meta, what in (
        ("--client", "CLIENT_ID", "the client id"),
        ("--user", "USER", "the user principal name"),
        ("--ip", "IP", "the IP address"),
    ):
        entity.add_argument(flag, dest="entity_flags", action=_Append, metavar=meta, help=what)
    for flag, what in (
        ("--client-defaults", "the default client id"),
        ("--user-defaults", "the default user"),
        ("--ip-defaults", "the default IP"),
    ):
        entity.add_argument(flag, dest="entity_flags", action=_Append, nargs=0, help=what)
    p.add_argument(
        "--add-config",
        metavar="SPEC",
        help="quotas: producer_byte_rate=N,consumer_byte_rate=N,request_percentage=P; "
        "SCRAM: SCRAM-SHA-256=[iterations=N,password=P]",
    )
    p.add_argument(
        "--delete-config",
        metavar="NAMES",
        help="quota keys or SCRAM mechanisms: producer_byte_rate,SCRAM-SHA-512",
    )
    add_timeout_ms(p)


def _entities(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """kafka-configs.sh's entityTypes and entityNames ("" for a default)."""
    flags = list(args.entity_flags or [])
    if flags and (args.entity_types or args.entity_names):
        raise ToolError(
            "--entity-{type,name,default} should not be used in conjunction with specific "
            "entity flags",
            2,
        )
    types = list(args.entity_types)
    names = [str(value) for _, value in (args.entity_names or [])]
    order = ["--client", "--user", "--ip", "--client-defaults", "--user-defaults", "--ip-defaults"]
    for flag, value in sorted(flags, key=lambda f: order.index(f[0])):
        types.append({"client": "clients", "user": "users", "ip": "ips"}[flag[2:].split("-")[0]])
        names.append(str(value))
    if not types:
        raise ToolError("At least one entity type must be specified", 2)
    duplicates = sorted({t for t in types if types.count(t) > 1})
    if duplicates:
        raise ToolError(f"Duplicate entity type(s) specified: {','.join(duplicates)}", 2)
    if len(types) > 1 and set(types) != {"users", "clients"}:
        raise ToolError("Only 'users' and 'clients' entity types may be specified together", 2)
    if len(names) > len(types):
        raise ToolError("More entity names specified than entity types", 2)
    return types, names


def _split_configs(text: str | None) -> list[tuple[str, str]]:
    pairs = []
    for part in split_top(text or ""):
        key, eq, value = part.partition("=")
        if not eq:
            raise ToolError(f"--add-config takes key=value pairs, not {part!r}", 2)
        pairs.append((key.strip(), value.strip()))
    return pairs


def java_double(value: float) -> str:
    """A double as Java's Double.toString writes it (what kafka-configs.sh prints)."""
    if value == int(value) and abs(value) < 1e7:
        return f"{int(value)}.0"
    if 1e-3 <= abs(value) < 1e7:
        return repr(value)
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    shown = "".join(map(str, digits))
    power = len(shown) - 1 + int(exponent)
    mantissa = shown[0] + "." + (shown[1:] or "0")
    return f"{'-' if sign else ''}{mantissa}E{power}"


def run(args: argparse.Namespace) -> int:
    types, names = _entities(args)
    adds = _split_configs(args.add_config) if args.alter else []
    deletes = [n.strip() for n in (args.delete_config or "").split(",") if n.strip()]
    if args.describe and (adds or deletes):
        raise ToolError("--add-config and --delete-config go with --alter", 2)
    quota_keys = IP_QUOTAS if types == ["ips"] else USER_CLIENT_QUOTAS
    if args.alter:
        if not names:
            raise ToolError(
                "An entity-name or default entity must be specified with --alter of users, "
                "clients, brokers or ips",
                2,
            )
        if not (adds or deletes):
            raise ToolError("--alter needs --add-config or --delete-config", 2)
        scram_adds = [(k, v) for k, v in adds if k.upper() in MECHANISMS]
        scram_deletes = [n for n in deletes if n.upper() in MECHANISMS]
        unknown = [k for k, _ in adds if (k, _) not in scram_adds and k not in quota_keys]
        unknown += [n for n in deletes if n not in scram_deletes and n not in quota_keys]
        if types != ["users"] and (scram_adds or scram_deletes):
            unknown += [k for k, _ in scram_adds] + scram_deletes
        if unknown:
            kind = (
                "Only quota and SCRAM credential configs"
                if types == ["users"]
                else ("Only quota configs")
            )
            raise ToolError(
                f"{kind} can be added for '{types[0]}'. Unexpected config names: "
                + ",".join(unknown),
                2,
            )
        quota_change = len(scram_adds) + len(scram_deletes) < len(adds) + len(deletes)
        if (scram_adds or scram_deletes) and quota_change:
            raise ToolError(
                "Cannot alter both quota and SCRAM credential configs simultaneously for 'users'.",
                2,
            )
        if scram_adds or scram_deletes:
            if "" in names:
                raise ToolError(
                    "The use of --entity-default or --user-defaults is not allowed with User "
                    "SCRAM Credentials.",
                    2,
                )
            return _alter_scram(args, names[0], scram_adds, scram_deletes)
        return _alter_quotas(args, types, names, adds, deletes)
    return _describe(args, types, names)


# -- quotas ------------------------------------------------------------------------------------


@contextmanager
def _quota_client(args: argparse.Namespace) -> Iterator[Any]:
    """A kafka-python network client (the admin client's settings) to send DescribeClientQuotas
    and AlterClientQuotas, which kafka-python's admin client has no method for."""
    from kafka.net.compat import KafkaNetClient

    with client_errors(args.bootstrap_server):
        kwargs: dict[str, Any] = {
            "client_id": "tidelog-tools",
            "request_timeout_ms": args.timeout_ms,
        }
        kwargs.update(client_kwargs(args, "admin"))
        kwargs["bootstrap_servers"] = parse_bootstrap(args.bootstrap_server)
        check_reachable(kwargs["bootstrap_servers"], min(5.0, args.timeout_ms / 1000))
        client = KafkaNetClient(**kwargs)
        try:
            client.check_version(timeout_ms=args.timeout_ms)
            yield client
        finally:
            close_quietly(client)


def _send(client: Any, request: Any, timeout_ms: int) -> Any:
    node = client.least_loaded_node()
    if node is None:
        raise ToolError("no broker reachable", 1)
    return client.send_and_receive(node, request, timeout_ms=timeout_ms)


def _components(types: Sequence[str], names: Sequence[str]) -> list[tuple[str, int, str | None]]:
    out: list[tuple[str, int, str | None]] = []
    for i, entity_type in enumerate(types):
        quota_type = ENTITY_TYPES[entity_type]
        if i >= len(names):
            out.append((quota_type, MATCH_SPECIFIED, None))
        elif names[i] == "":
            out.append((quota_type, MATCH_DEFAULT, None))
        else:
            out.append((quota_type, MATCH_EXACT, names[i]))
    return out


def _describe_quotas(
    client: Any, args: argparse.Namespace, types: Sequence[str], names: Sequence[str]
) -> list[tuple[dict[str, str | None], list[tuple[str, float]]]]:
    from kafka.protocol.admin import DescribeClientQuotasRequest

    request = DescribeClientQuotasRequest(
        components=[
            DescribeClientQuotasRequest.ComponentData(entity_type=t, match_type=m, match=n)
            for t, m, n in _components(types, names)
        ],
        strict=True,
    )
    response = _send(client, request, args.timeout_ms)
    if response.error_code:
        raise ToolError(f"Error describing client quotas: {response.error_message}", 1)
    return [
        (
            {e.entity_type: e.entity_name for e in entry.entity},
            [(v.key, float(v.value)) for v in entry.values],
        )
        for entry in response.entries or []
    ]


def _alter_quotas(
    args: argparse.Namespace,
    types: Sequence[str],
    names: Sequence[str],
    adds: Sequence[tuple[str, str]],
    deletes: Sequence[str],
) -> int:
    from kafka.protocol.admin import AlterClientQuotasRequest

    if len(types) != len(names):
        raise ToolError("Exactly one entity name must be specified for every entity type", 2)
    ops = []
    for key, raw in adds:
        try:
            value = float(raw)
        except ValueError:
            raise ToolError(f"Cannot parse quota configuration value for {key}: {raw}", 2) from None
        ops.append(AlterClientQuotasRequest.EntryData.OpData(key=key, value=value, remove=False))
    with _quota_client(args) as client:
        current = _describe_quotas(client, args, types, names)
        old = dict(current[0][1]) if current else {}
        invalid = [k for k in deletes if k not in old]
        if invalid:
            raise ToolError(f"Invalid config(s): {','.join(invalid)}", 1)
        for key in deletes:
            ops.append(AlterClientQuotasRequest.EntryData.OpData(key=key, value=0.0, remove=True))
        entity = [
            AlterClientQuotasRequest.EntryData.EntityData(
                entity_type=ENTITY_TYPES[t], entity_name=n or None
            )
            for t, n in zip(types, names, strict=True)
        ]
        request = AlterClientQuotasRequest(
            entries=[AlterClientQuotasRequest.EntryData(entity=entity, ops=ops)],
            validate_only=False,
        )
        response = _send(client, request, args.timeout_ms)
    failed = [e for e in response.entries if e.error_code]
    for entry in failed:
        raise ToolError(f"Error altering client quotas: {entry.error_message}", 1)
    if names[0]:
        print(f"Completed updating config for {types[0][:-1]} {names[0]}.")
    else:
        print(f"Completed updating default config for {types[0]} in the cluster.")
    return EXIT_OK


def _describe(args: argparse.Namespace, types: Sequence[str], names: Sequence[str]) -> int:
    with _quota_client(args) as client:
        found = _describe_quotas(client, args, types, names)
    labels = {"user": "user-principal", "client-id": "client-id", "ip": "ip"}
    for entity, values in found:
        parts = [
            f"{labels[t]} '{entity[t]}'" if entity[t] is not None else f"the default {labels[t]}"
            for t in ("user", "client-id", "ip")
            if t in entity
        ]
        shown = ", ".join(f"{k}={java_double(v)}" for k, v in values)
        print(f"Quota configs for {', '.join(parts)} are {shown}")
    if "users" in types and "clients" not in types and "" not in names:
        _describe_scram(args, names[0] if names else None)
    return EXIT_OK


# -- SCRAM -------------------------------------------------------------------------------------


def _alter_scram(
    args: argparse.Namespace, user: str, adds: Sequence[tuple[str, str]], deletes: Sequence[str]
) -> int:
    from kafka.admin import UserScramCredentialDeletion, UserScramCredentialUpsertion

    alterations: list[Any] = []
    spec_text = ",".join(f"{k}={v}" for k, v in adds)
    for spec in parse_scram_specs(spec_text) if spec_text else []:
        alterations.append(
            UserScramCredentialUpsertion(
                user, spec.mechanism, spec.password, iterations=spec.iterations
            )
        )
    for name in deletes:
        alterations.append(UserScramCredentialDeletion(user, name.upper()))
    with admin_session(args, args.timeout_ms) as admin:
        results = admin.alter_user_scram_credentials(alterations)
    failed = {u: e for u, e in results.items() if e}
    for name, error in failed.items():
        print(f"Error altering SCRAM credentials of {name!r}: {error}")
    if failed:
        raise ToolError("the credentials were not changed")
    print(f"Completed updating config for user {user}.")
    return EXIT_OK


def _describe_scram(args: argparse.Namespace, user: str | None) -> None:
    with admin_session(args, args.timeout_ms) as admin:
        described = admin.describe_user_scram_credentials([user] if user else None)
    for name, info in sorted(described.items()):
        if info["error"]:
            print(f"SCRAM credentials of user-principal '{name}': {info['error']}")
            continue
        mechanisms = ",".join(
            f"{ci['mechanism'].name.replace('_', '-')}=iterations={ci['iterations']}"
            for ci in info["credential_infos"]
        )
        print(f"SCRAM credential configs for user-principal '{name}' are {mechanisms}")
