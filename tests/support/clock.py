"""The fake clock of the tests: an injected clock (epoch ms) that moves only when told."""

from __future__ import annotations


class FakeClock:
    """Call it for the time in ms; ``advance`` moves it (the ``clock`` fixture of
    ``tests/storage/conftest.py`` hands one out)."""

    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, ms: int) -> None:
        self.now_ms += ms
