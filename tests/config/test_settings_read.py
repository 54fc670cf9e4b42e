"""Every defined setting is read by the code, refused at start-up, or documented as accepted for
compatibility only (issue 15, "honest configuration")."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidelog.config import ConfigError, load_broker_config
from tidelog.config.definitions import (
    BROKER_CONFIG_LIST,
    COMPATIBILITY_ONLY,
    NOT_IMPLEMENTED,
    TOPIC_CONFIG_LIST,
)

ROOT = Path(__file__).resolve().parents[2]
#: Where settings are read: every source module but the definitions and the reference writer.
SOURCE_DIRS = ("broker", "storage", "analytics", "config", "protocol")
NOT_READERS = {"definitions.py", "reference.py"}


def _source() -> str:
    return "\n".join(
        path.read_text(encoding="utf-8")
        for folder in SOURCE_DIRS
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path.name not in NOT_READERS
    )


def test_every_defined_setting_is_read() -> None:
    """A setting counts as read when its quoted name appears in the code (``get_int("x")``,
    a mapping of topic configs), or when it is the broker synonym of a topic setting that is
    read (topic settings fall back to their synonyms in ``config.topic``)."""
    source = _source()
    read_topic = {c.name for c in TOPIC_CONFIG_LIST if f'"{c.name}"' in source}
    synonyms = {s for c in TOPIC_CONFIG_LIST if c.name in read_topic for s in c.synonyms}
    excused = COMPATIBILITY_ONLY | set(NOT_IMPLEMENTED)
    unread = [
        c.name
        for c in BROKER_CONFIG_LIST
        if f'"{c.name}"' not in source and c.name not in synonyms and c.name not in excused
    ]
    unread += [c.name for c in TOPIC_CONFIG_LIST if c.name not in read_topic | excused]
    assert unread == [], (
        f"settings defined but never read: {unread}. Implement them, refuse them at start-up "
        "(config.definitions.NOT_IMPLEMENTED) or, for settings that mean nothing on one node, "
        "list them in COMPATIBILITY_ONLY and say so in their doc."
    )


def test_excused_settings_say_so_in_their_doc() -> None:
    docs = {c.name: c.doc for c in (*BROKER_CONFIG_LIST, *TOPIC_CONFIG_LIST)}
    for name in COMPATIBILITY_ONLY:
        assert "not read" in docs[name], name
    for name in NOT_IMPLEMENTED:
        assert "Not implemented" in docs[name], name


@pytest.mark.parametrize("name", sorted(NOT_IMPLEMENTED))
def test_unimplemented_settings_are_refused_at_start_up(name: str) -> None:
    with pytest.raises(ConfigError, match="is not implemented"):
        load_broker_config(overrides=[f"{name}=12345"], environ={})
    default = next(c.default for c in BROKER_CONFIG_LIST if c.name == name)
    load_broker_config(overrides=[f"{name}={default}"], environ={})  # the default is harmless


#: Words in a setting's description that say the code does nothing with it.
_SAYS_IGNORED = ("not implemented", "not read", "refuses to start", "no transactions")


def test_descriptions_of_read_settings_do_not_say_they_are_ignored() -> None:
    """Issue 26: a description must match what the code does. A setting the code reads (not
    refused at start-up, not compatibility-only) must not be described as "not implemented" or
    "not read"; and a refused or compatibility-only one must be (the other way round is
    test_excused_settings_say_so_in_their_doc)."""
    source = _source()
    excused = COMPATIBILITY_ONLY | set(NOT_IMPLEMENTED)
    wrong = [
        f"{c.name}: {c.doc}"
        for c in (*BROKER_CONFIG_LIST, *TOPIC_CONFIG_LIST)
        if c.name not in excused
        and f'"{c.name}"' in source
        and any(words in c.doc.lower() for words in _SAYS_IGNORED)
    ]
    assert wrong == [], "descriptions of settings the code reads say otherwise:\n" + "\n".join(
        wrong
    )


def test_transactional_id_expiration_is_accepted() -> None:
    """The coordinator expires idle transactional ids (broker/txn/state_manager.py), so any value
    loads (its description once said the broker refused to start with one)."""
    config = load_broker_config(overrides=["transactional.id.expiration.ms=60000"], environ={})
    assert config.get_int("transactional.id.expiration.ms") == 60000
