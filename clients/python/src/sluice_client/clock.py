"""Clocks for the in-memory backend: `ManualClock` moves only when a test advances it, so
every delay, backoff and lease is deterministic; `SystemClock` is wall time."""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    """Now, in seconds since the Unix epoch."""

    def now(self) -> float:
        """The current time."""
        ...

    def real_seconds_until(self, at: float) -> float | None:
        """How long a waiter must block in real time until `at`; None when time does not pass
        by itself (a manual clock: only `advance` brings `at` closer)."""
        ...


class SystemClock:
    """Wall-clock time."""

    def now(self) -> float:
        return time.time()

    def real_seconds_until(self, at: float) -> float | None:
        return max(0.0, at - time.time())


class ManualClock:
    """A clock that stands still until `advance` moves it. Thread-safe.

    Starts at `start` (default 2024-01-01T00:00:00Z, so times read as real dates).
    """

    def __init__(self, start: float = 1_704_067_200.0) -> None:
        self._now = start
        self._lock = threading.Lock()
        self._listeners: list[threading.Condition] = []

    def now(self) -> float:
        with self._lock:
            return self._now

    def real_seconds_until(self, at: float) -> float | None:
        return None

    def advance(self, seconds: float) -> None:
        """Moves time forward and wakes whatever waits on it."""
        if seconds < 0:
            raise ValueError("a clock does not go back")
        with self._lock:
            self._now += seconds
            listeners = list(self._listeners)
        for condition in listeners:
            with condition:
                condition.notify_all()

    def subscribe(self, condition: threading.Condition) -> None:
        """`condition` is notified on every `advance` (the in-memory queue waits on it)."""
        with self._lock:
            self._listeners.append(condition)
