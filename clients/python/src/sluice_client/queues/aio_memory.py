"""`AsyncInMemoryQueue`: the in-memory queue for asyncio code and tests.

The same queue as `InMemoryQueue` (the `sync` attribute), with its blocking waits on threads;
`advance` moves its clock from the event loop without waiting.
"""

from __future__ import annotations

from ..clock import Clock
from ._threaded import ThreadedAsyncQueue
from .base import QueueOptions
from .memory import InMemoryQueue


class AsyncInMemoryQueue(ThreadedAsyncQueue):
    """An in-memory queue with coroutine methods; see `InMemoryQueue`."""

    def __init__(
        self,
        name: str = "memory",
        *,
        options: QueueOptions | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.memory = InMemoryQueue(name, options=options, clock=clock)
        """The queue underneath (its `clock`, its blocking methods)."""
        super().__init__(self.memory)

    def advance(self, seconds: float) -> None:
        """Moves a `ManualClock` forward; waiting receives wake up."""
        self.memory.advance(seconds)
