"""Client quota configs (AlterClientQuotas / DescribeClientQuotas) with Kafka's validation and
filters, kept across restarts; Kafka's order of precedence and throttle formula.

The end-to-end enforcement on stock clients is in tests/integration/test_client_quotas.py; the
answers are compared with Apache Kafka's in tests/kafkaref (scenarios ``quotas-*``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from tests.support.router_broker import AdminHarness
from tidelog.broker.client_quota_manager import DEFAULT, ClientQuotaManager

DESCRIBE, ALTER = 48, 49
EXACT, DEFAULT_MATCH, SPECIFIED = 0, 1, 2
INVALID_REQUEST = ErrorCode.invalid_request


@pytest.fixture
def h(tmp_path: Path) -> Iterator[AdminHarness]:
    harness = AdminHarness(tmp_path / "data")
    yield harness
    harness.close()


Op = tuple[str, float, bool]


def alter(
    h: AdminHarness,
    entries: list[tuple[list[tuple[str, str | None]], list[Op]]],
    validate_only: bool = False,
) -> list[tuple[int, str | None]]:
    t = h.types(ALTER, 1)
    answer = h.call(
        ALTER,
        1,
        t.AlterClientQuotasRequest(
            entries=tuple(
                t.EntryData(
                    entity=tuple(t.EntityData(entity_type=k, entity_name=n) for k, n in entity),
                    ops=tuple(t.OpData(key=k, value=v, remove=r) for k, v, r in ops),
                )
                for entity, ops in entries
            ),
            validate_only=validate_only,
        ),
    )
    return [(int(e.error_code), e.error_message) for e in answer.entries]


def describe(
    h: AdminHarness, components: list[tuple[str, int, str | None]], strict: bool = False
) -> Any:
    t = h.types(DESCRIBE, 1)
    return h.call(
        DESCRIBE,
        1,
        t.DescribeClientQuotasRequest(
            components=tuple(
                t.ComponentData(entity_type=e, match_type=m, match=n) for e, m, n in components
            ),
            strict=strict,
        ),
    )


def entries(answer: Any) -> list[tuple[tuple[tuple[str, str | None], ...], dict[str, float]]]:
    assert answer.error_code == 0, answer
    return sorted(
        (
            (
                tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)),
                {v.key: v.value for v in entry.values},
            )
            for entry in answer.entries
        ),
        key=repr,
    )


def test_set_describe_remove_and_survive_restart(h: AdminHarness) -> None:
    ok = [(0, None)]
    assert alter(h, [([("user", "alice")], [("producer_byte_rate", 1024, False)])]) == ok
    assert alter(h, [([("client-id", None)], [("consumer_byte_rate", 2048, False)])]) == ok
    assert (
        alter(
            h, [([("user", "alice"), ("client-id", "app")], [("request_percentage", 12.5, False)])]
        )
        == ok
    )
    h.restart()
    everything = entries(describe(h, []))
    assert everything == sorted(
        [
            ((("client-id", None),), {"consumer_byte_rate": 2048.0}),
            ((("client-id", "app"), ("user", "alice")), {"request_percentage": 12.5}),
            ((("user", "alice"),), {"producer_byte_rate": 1024.0}),
        ],
        key=repr,
    )
    # strict: only entities with exactly the filtered types
    assert entries(describe(h, [("user", EXACT, "alice")], strict=True)) == [
        ((("user", "alice"),), {"producer_byte_rate": 1024.0})
    ]
    assert len(entries(describe(h, [("user", EXACT, "alice")]))) == 2
    assert entries(describe(h, [("client-id", DEFAULT_MATCH, None)])) == [
        ((("client-id", None),), {"consumer_byte_rate": 2048.0})
    ]
    assert len(entries(describe(h, [("client-id", SPECIFIED, None)]))) == 2
    # removing the last value removes the entity; removing an absent key is fine
    assert alter(h, [([("user", "alice")], [("producer_byte_rate", 0, True)])]) == ok
    assert alter(h, [([("user", "alice")], [("producer_byte_rate", 0, True)])]) == ok
    h.restart()
    assert entries(describe(h, [("user", EXACT, "alice")], strict=True)) == []


def test_validate_only_changes_nothing(h: AdminHarness) -> None:
    assert alter(h, [([("user", "bob")], [("producer_byte_rate", 10, False)])], True) == [(0, None)]
    assert entries(describe(h, [])) == []


@pytest.mark.parametrize(
    ("entity", "ops", "message"),
    [
        ([], [("producer_byte_rate", 1, False)], "Invalid empty client quota entity"),
        ([("group", "g")], [], "Unhandled client quota entity type: group"),
        ([("user", "")], [], "Empty user not supported"),
        ([("user", "a")], [("no_such_quota", 1, False)], "Invalid configuration key no_such_quota"),
        ([("user", "a")], [("producer_byte_rate", 0, False)], "Quota producer_byte_rate must be greater than 0"),  # noqa: E501
        ([("user", "a")], [("consumer_byte_rate", 1.5, False)], "consumer_byte_rate cannot be a fractional value."),  # noqa: E501
        ([("client-id", "c")], [("connection_creation_rate", 5, False)], "Invalid configuration key connection_creation_rate"),  # noqa: E501
        ([("ip", "1.2.3.4")], [("producer_byte_rate", 5, False)], "Invalid configuration key producer_byte_rate"),  # noqa: E501
        ([("ip", "not an ip")], [], "not an ip is not a valid IP or resolvable host."),
        (
            [("ip", "1.2.3.4"), ("user", "a")],
            [],
            "Invalid quota entity combination, IP entity shouldnot be combined with User or "
            "ClientId",
        ),
        (
            [("user", "a")],
            [("producer_byte_rate", 1, False), ("producer_byte_rate", 2, False)],
            "Ignoring duplicate entity ClientQuotaEntity(entries={user=a})",
        ),
    ],
)  # fmt: skip
def test_invalid_entries_answer_kafkas_errors(
    h: AdminHarness, entity: list[tuple[str, str | None]], ops: list[Op], message: str
) -> None:
    good = ([("user", "ok")], [("request_percentage", 50.0, False)])
    answer = alter(h, [(entity, ops), good])
    assert answer == [(INVALID_REQUEST, message), (0, None)]
    assert entries(describe(h, [])) == [((("user", "ok"),), {"request_percentage": 50.0})]


@pytest.mark.parametrize(
    ("components", "code", "message"),
    [
        ([("", EXACT, "x")], INVALID_REQUEST, "Invalid empty entity type."),
        ([("group", EXACT, "x")], ErrorCode.unsupported_version, "Unsupported entity type group"),
        (
            [("user", EXACT, "a"), ("user", SPECIFIED, None)],
            INVALID_REQUEST,
            "Entity type user cannot appear more than once in the filter.",
        ),
        (
            [("user", EXACT, None)],
            INVALID_REQUEST,
            "Request specified MATCH_TYPE_EXACT, but set match string to null.",
        ),
        (
            [("user", DEFAULT_MATCH, "a")],
            INVALID_REQUEST,
            "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
        ),
        ([("user", 7, None)], INVALID_REQUEST, "Unknown match type 7"),
        (
            [("ip", SPECIFIED, None), ("user", SPECIFIED, None)],
            INVALID_REQUEST,
            "Invalid entity filter component combination. IP filter component should not be "
            "used with user or clientId filter component.",
        ),
    ],
)
def test_bad_filters_fail_the_request(
    h: AdminHarness, components: list[tuple[str, int, str | None]], code: int, message: str
) -> None:
    answer = describe(h, components)
    assert (answer.error_code, answer.error_message, answer.entries) == (code, message, None)


def _manager(quotas: dict[tuple[str | None, str | None], float]) -> ClientQuotaManager:
    m = ClientQuotaManager("Produce", "byte_rate", 11, 1, lambda: 0)
    m.set_quotas(quotas)
    return m


def test_kafkas_order_of_precedence() -> None:
    """The eight levels of ClientQuotaManager, most specific first."""
    levels: list[tuple[tuple[str | None, str | None], float]] = [
        (("alice", "app"), 1),
        (("alice", DEFAULT), 2),
        (("alice", None), 3),
        ((DEFAULT, "app"), 4),
        ((DEFAULT, DEFAULT), 5),
        ((DEFAULT, None), 6),
        ((None, "app"), 7),
        ((None, DEFAULT), 8),
    ]
    for i in range(len(levels)):
        m = _manager(dict(levels[i:]))
        assert m.quota("alice", "app") == levels[i][1], levels[i]
    assert _manager({}).quota("alice", "app") is None
    # a user quota is shared by all of the user's clients (one sensor)
    m = _manager({("alice", None): 100})
    assert m.tags("alice", "a") == m.tags("alice", "b") == ("alice", "")


def test_throttle_time_is_kafkas_formula() -> None:
    """(rate - bound) / bound * window, the window at least quota.window.num - 1 windows."""
    m = _manager({(None, "app"): 100.0})
    # 2000 bytes at t=0: rate = 2000 / 10 s = 200 B/s; (200 - 100) / 100 * 10000 ms
    assert m.record("", "app", 2000, now_ms=0) == 10000
    assert m.record("", "other", 10**9, now_ms=0) == 0  # no quota for that client
