"""The cleaner's offset map: key -> offset of its latest record in the dirty part of a log.

Kafka's SkimpyOffsetMap stores the MD5 of each key in a fixed buffer
(``log.cleaner.dedupe.buffer.size`` split between the cleaner threads) and is "full" at 90% of its
slots; tidelog's is full once its budget is used up, checked before each batch (so one batch
may overshoot it). ``latest_offset`` is the last offset the map covers: records above it were
not mapped and are kept whatever their key (the next cleaning pass starts there).

Kafka divergence: the map is a dict of whole keys, so two keys can never collide (an MD5
collision in Kafka would drop a live record). Its budget counts each entry as the key's length
plus ``ENTRY_OVERHEAD`` bytes (a CPython dict slot, the bytes object and the int), so it holds
fewer entries than Kafka's map of the same nominal size.

Threading: used by one cleaner thread at a time.
"""

from __future__ import annotations

from .records import map_keys

__all__ = ["ENTRY_OVERHEAD", "OffsetMap"]

ENTRY_OVERHEAD = 120
LOAD_FACTOR = 0.9


class OffsetMap:
    """Key bytes -> latest offset, bounded by a byte budget."""

    __slots__ = ("_budget", "_entries", "_used", "latest_offset")

    def __init__(self, budget_bytes: int) -> None:
        if budget_bytes < ENTRY_OVERHEAD:
            raise ValueError(f"offset map budget must be >= {ENTRY_OVERHEAD} bytes")
        self._budget = int(budget_bytes * LOAD_FACTOR)
        self._entries: dict[bytes, int] = {}
        self._used = 0
        self.latest_offset = -1

    def clear(self) -> None:
        self._entries = {}
        self._used = 0
        self.latest_offset = -1

    def __len__(self) -> int:
        return len(self._entries)

    def put_batch(self, data: bytes, count: int, base_offset: int, start: int) -> None:
        """Map every keyed record of a batch's records section at or above ``start``.

        The budget is charged for the keys the batch added, at the batch's mean key length.
        """
        before = len(self._entries)
        put, key_bytes = map_keys(data, count, base_offset, start, self._entries)
        added = len(self._entries) - before
        if added > 0:
            self._used += added * ENTRY_OVERHEAD + key_bytes * added // put

    @property
    def full(self) -> bool:
        return self._used >= self._budget

    def put(self, key: bytes, offset: int) -> None:
        entries = self._entries
        if key not in entries:
            self._used += len(key) + ENTRY_OVERHEAD
        entries[key] = offset

    def get(self, key: bytes) -> int:
        """The mapped offset, or -1 when the key is not in the map."""
        return self._entries.get(key, -1)

    def update_latest_offset(self, offset: int) -> None:
        if offset > self.latest_offset:
            self.latest_offset = offset

    @property
    def entries(self) -> dict[bytes, int]:
        """The underlying dict (read-only use: the cleaner's hot loop looks keys up directly)."""
        return self._entries
