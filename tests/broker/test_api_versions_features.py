"""ApiVersions' features follow the handlers, as its API list does: a feature that needs an API
is listed (and finalized) only while that API is served."""

from __future__ import annotations

from tidelog.broker.api_table import API_TABLE
from tidelog.broker.handlers.api_versions import features


def test_features_of_a_full_broker() -> None:
    served = frozenset(entry.api_key for entry in API_TABLE)
    got = {f.name: f.max_level for f in features(served)}
    assert got == {
        "group.version": 1,
        "share.version": 1,
        "streams.version": 1,
        "transaction.version": 2,
    }


def test_a_feature_whose_api_is_not_served_is_not_listed() -> None:
    keys = {entry.name: entry.api_key for entry in API_TABLE}
    served = frozenset(keys.values()) - {keys["ShareGroupHeartbeat"]}
    assert "share.version" not in {f.name for f in features(served)}
    assert [f.name for f in features(frozenset())] == ["transaction.version"]
