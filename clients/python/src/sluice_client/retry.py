"""`Backoff`: how long to wait after a failed attempt. Pure; used by the worker's retry policy
and by the backends that compute a queue's backoff themselves (memory, SQS, RabbitMQ)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Backoff:
    """`initial · factor^(attempt-1)` seconds, at most `max` (a fixed delay when `factor` is 1).

    No jitter: delays are deterministic, so tests on the in-memory backend are too.
    """

    initial: float = 1.0
    """Seconds after the first failure."""
    max: float = 60.0
    """The cap, in seconds."""
    factor: float = 2.0
    """Growth per failure (at least 1)."""

    @classmethod
    def fixed(cls, delay: float) -> Backoff:
        """The same delay after every failure."""
        return cls(initial=delay, max=delay, factor=1.0)

    @classmethod
    def exponential(cls, initial: float = 1.0, max: float = 60.0, factor: float = 2.0) -> Backoff:
        """Growing delays: 1 s, 2 s, 4 s, ... up to 60 s by default (sluice's default)."""
        return cls(initial=initial, max=max, factor=factor)

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt `attempt` (1-based)."""
        exponent = min(max(attempt - 1, 0), 64)
        try:
            grown = self.initial * max(self.factor, 1.0) ** exponent
        except OverflowError:
            return self.max
        return min(grown, self.max)
