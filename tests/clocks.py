"""A monotonic clock a test moves on, for the `clock` parameters of ``App``, ``KopfSupervisor`` and ``Api``.

It reads the real ``time.monotonic()`` (or stands still at `start`, ``frozen=True``) plus how far the test
has advanced it: what a real run would have slept through passes at once, and nothing waits for it.
"""

from __future__ import annotations

import time


class MovingClock:
    def __init__(self, *, frozen: bool = False, start: float = 0.0) -> None:
        self._frozen = frozen
        self._start = start
        self.offset = 0.0

    def __call__(self) -> float:
        return (self._start if self._frozen else time.monotonic()) + self.offset

    def advance(self, seconds: float) -> None:
        """Move on by `seconds` (never back: a moment already past leaves the clock where it is)."""
        self.offset += max(seconds, 0.0)
