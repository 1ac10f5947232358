"""The worker's retry policy and the intents a handler can raise. Pure: the worker asks for a
`Decision` after each failure and acts on it (as the Rust SDK's worker/retry.rs)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..retry import Backoff


class RetryAfter(Exception):
    """Raised by a handler: retry this event after `delay` seconds (if attempts are left)."""

    def __init__(self, delay: float, reason: str = "retry later") -> None:
        super().__init__(reason)
        self.delay = delay


class GiveUp(Exception):
    """Raised by a handler: this event cannot succeed; dead-letter it now."""


def _always(_: BaseException) -> bool:
    return True


@dataclass(frozen=True)
class RetryPolicy:
    """When and how often a failed event is retried.

    The queue's own `max_attempts` still applies on the backend: an event is dead-lettered
    when either limit is reached, so give the queue at least as many attempts as the policy.
    """

    max_attempts: int = 5
    """Deliveries before a failure dead-letters (at least 1)."""
    delay: float | None = None
    """A fixed delay in seconds between attempts; when None, `backoff` decides."""
    backoff: Backoff = field(default_factory=Backoff)
    """Growing delays (default 1 s doubling to 60 s)."""
    is_retryable: Callable[[BaseException], bool] = _always
    """Errors for which this is False are dead-lettered at once."""

    def decide(self, attempt: int, error: BaseException) -> Decision:
        """What to do after failed attempt `attempt` (1-based) ended with `error`."""
        if isinstance(error, GiveUp):
            return Decision(delay=0.0, dead_letter=True)
        delay = self.delay if self.delay is not None else self.backoff.delay(attempt)
        if isinstance(error, RetryAfter):
            delay = error.delay
        used_up = attempt >= max(self.max_attempts, 1)
        return Decision(delay=delay, dead_letter=used_up or not self.is_retryable(error))


@dataclass(frozen=True)
class Decision:
    """What to do after a failed attempt."""

    delay: float
    """Seconds before the next attempt."""
    dead_letter: bool
    """Give up: the error is not retryable or the attempts are used up."""
