"""The registry's state, changed only by replaying ``_schemas`` records.

``RegistryState.replay(key, value)`` is the one mutation path: the broker's registry calls it
for every record it reads back from the topic (at start and after each of its own writes), and
an offline reader (analytics) calls it for the records of a log dir. The rules follow
Confluent's ``KafkaStoreMessageHandler``: a SCHEMA value adds or replaces a version (``deleted``
marks a soft delete), a SCHEMA tombstone removes it (hard delete), DELETE_SUBJECT soft-deletes
every version up to its ``version``, CLEAR_SUBJECT removes every version, CONFIG and MODE set
(or, as tombstones, clear) a subject's or the global setting.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from tidelog.schema.records import (
    ConfigValue,
    DeleteSubjectValue,
    ModeValue,
    RegistryKey,
    SchemaValue,
    Value,
)

__all__ = ("RegistryState",)


@dataclass
class RegistryState:
    #: subject -> version -> value (soft-deleted versions included, ``deleted`` set).
    subjects: dict[str, dict[int, SchemaValue]] = field(default_factory=dict)
    #: schema id -> the first value seen with it (a schema keeps its id in every subject).
    by_id: dict[int, SchemaValue] = field(default_factory=dict)
    #: subject (None: global) -> compatibility level / mode.
    configs: dict[str | None, str] = field(default_factory=dict)
    modes: dict[str | None, str] = field(default_factory=dict)
    max_id: int = 0
    records: int = 0

    def replay(self, key: RegistryKey, value: Value) -> None:
        self.records += 1
        kind = key.keytype
        if kind == "SCHEMA":
            assert key.subject is not None and key.version is not None
            if value is None:
                self._remove(key.subject, key.version)
            elif isinstance(value, SchemaValue):
                self._put(value)
        elif kind == "CONFIG":
            if isinstance(value, ConfigValue):
                self.configs[key.subject] = value.compatibility_level.upper()
            else:
                self.configs.pop(key.subject, None)
        elif kind == "MODE":
            if isinstance(value, ModeValue):
                self.modes[key.subject] = value.mode.upper()
            else:
                self.modes.pop(key.subject, None)
        elif kind == "DELETE_SUBJECT" and isinstance(value, DeleteSubjectValue):
            versions = self.subjects.get(value.subject, {})
            for version, schema in list(versions.items()):
                if version <= value.version and not schema.deleted:
                    versions[version] = replace(schema, deleted=True)
        elif kind == "CLEAR_SUBJECT" and isinstance(value, DeleteSubjectValue):
            for version in list(self.subjects.get(value.subject, {})):
                self._remove(value.subject, version)

    def _put(self, value: SchemaValue) -> None:
        self.subjects.setdefault(value.subject, {})[value.version] = value
        known = self.by_id.get(value.id)
        if known is None or (known.subject, known.version) == (value.subject, value.version):
            self.by_id[value.id] = value
        self.max_id = max(self.max_id, value.id)

    def _remove(self, subject: str, version: int) -> None:
        versions = self.subjects.get(subject)
        if versions is None:
            return
        gone = versions.pop(version, None)
        if not versions:
            del self.subjects[subject]
        if gone is None:
            return
        known = self.by_id.get(gone.id)
        if known is not None and (known.subject, known.version) == (subject, version):
            other = self.uses_of_id(gone.id)
            if other:
                self.by_id[gone.id] = other[0]
            else:
                del self.by_id[gone.id]

    # -- queries -------------------------------------------------------------------------------
    def versions(self, subject: str, *, deleted: bool = False) -> list[SchemaValue]:
        found = self.subjects.get(subject, {})
        return [found[v] for v in sorted(found) if deleted or not found[v].deleted]

    def uses_of_id(self, schema_id: int, *, deleted: bool = True) -> list[SchemaValue]:
        return [
            value
            for subject in sorted(self.subjects)
            for value in self.versions(subject, deleted=deleted)
            if value.id == schema_id
        ]

    def referenced_by(self, subject: str, version: int) -> list[int]:
        """Ids of live schemas that reference ``subject`` ``version``."""
        ids = set()
        for name in self.subjects:
            for value in self.versions(name):
                for ref in value.references:
                    if (ref.subject, ref.version) == (subject, version):
                        ids.add(value.id)
        return sorted(ids)
