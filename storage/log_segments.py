"""The ordered segments of one partition log (Kafka's ``LogSegments``).

``LocalLog`` (``storage.local_log``) owns one ``LogSegments``; each ``LogSegment`` owns its
``.log``, ``.index`` and ``.timeindex`` files. The segments are kept sorted by base offset, their
offset ranges do not overlap, and the last one is the active segment (the only one appended to).
Every change of the list goes through the methods here: a roll adds a segment (``add``),
retention removes the oldest (``remove_first``), truncation removes the newest (``remove_last``)
or starts over (``clear`` + ``add``), and the cleaner's swap replaces a run of sealed segments
with one (``replace``, via ``PartitionLog.replace_segments``). Base offsets are kept beside the
segments for the binary search of reads (``floor_index``).

Threading: not locked itself; it is changed only under the owning ``PartitionLog``'s lock.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from typing import overload

from .segment import LogSegment

__all__ = ["LogSegments"]


class LogSegments(Sequence[LogSegment]):
    """Segments in base-offset order; ``segments[-1]`` / ``active`` is the active segment."""

    __slots__ = ("_bases", "_segments")

    def __init__(self, segments: Iterable[LogSegment] = ()) -> None:
        self._segments: list[LogSegment] = list(segments)
        self._bases: list[int] = [s.base_offset for s in self._segments]

    @overload
    def __getitem__(self, index: int) -> LogSegment: ...

    @overload
    def __getitem__(self, index: slice) -> list[LogSegment]: ...

    def __getitem__(self, index: int | slice) -> LogSegment | list[LogSegment]:
        return self._segments[index]

    def __len__(self) -> int:
        return len(self._segments)

    def __iter__(self) -> Iterator[LogSegment]:
        return iter(self._segments)

    def __repr__(self) -> str:
        return f"LogSegments(base_offsets={self._bases})"

    @property
    def active(self) -> LogSegment:
        """The last segment, the one appends go to (Kafka's activeSegment)."""
        return self._segments[-1]

    def values(self) -> list[LogSegment]:
        """A copy of the segment list."""
        return list(self._segments)

    def base_offsets(self) -> list[int]:
        """A copy of the segments' base offsets, in order."""
        return list(self._bases)

    def floor_index(self, offset: int) -> int:
        """Index of the segment that holds ``offset``: the last whose base offset is <= it
        (0 when ``offset`` is below every base offset)."""
        return max(bisect_right(self._bases, offset) - 1, 0)

    def from_offset(self, offset: int) -> list[LogSegment]:
        """The segment holding ``offset`` and every later one (Kafka's floorSegment on)."""
        return self._segments[self.floor_index(offset) :]

    def add(self, segment: LogSegment) -> None:
        """Append ``segment`` as the new active segment (a roll)."""
        if self._bases and segment.base_offset <= self._bases[-1]:
            raise ValueError(
                f"segment base offset {segment.base_offset} is not above the active segment's "
                f"{self._bases[-1]}"
            )
        self._segments.append(segment)
        self._bases.append(segment.base_offset)

    def remove_first(self, count: int) -> list[LogSegment]:
        """Remove and return the ``count`` oldest segments (retention)."""
        removed = self._segments[:count]
        del self._segments[:count]
        del self._bases[:count]
        return removed

    def remove_last(self) -> LogSegment:
        """Remove and return the newest segment (truncation)."""
        self._bases.pop()
        return self._segments.pop()

    def clear(self) -> list[LogSegment]:
        """Remove and return every segment (a full truncation adds a new one after)."""
        removed = self._segments
        self._segments = []
        self._bases = []
        return removed

    def find_run(self, old: Sequence[LogSegment], sizes: Sequence[int]) -> int | None:
        """Index of ``old[0]`` if ``old`` is still a run of sealed segments here, each the same
        object with the same size as when the cleaner read it; None otherwise."""
        segments = self._segments
        try:
            first = next(i for i, s in enumerate(segments) if s is old[0])
        except StopIteration:
            return None
        end = first + len(old)
        if end >= len(segments):  # would include the active segment
            return None
        for segment, expected, size in zip(segments[first:end], old, sizes, strict=True):
            if segment is not expected or segment.size != size:
                return None
        return first

    def replace(self, first: int, count: int, segment: LogSegment) -> None:
        """Put ``segment`` in place of the ``count`` segments from index ``first`` (the
        cleaner's swap; the caller checked the run with ``find_run``)."""
        self._segments[first : first + count] = [segment]
        self._bases[first : first + count] = [segment.base_offset]
