"""An `AsyncTaskQueue` over a blocking `TaskQueue`, each call on a thread of its own pool.

For backends whose library has no asyncio API (boto3) or whose waits block on a lock (the
in-memory queue). The pool is the adapter's own, sized for long polls: the event loop's default
executor has only a few threads, and a worker's idle slots would fill it with waiting receives.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from .base import (
    BackendName,
    CancelResult,
    Capabilities,
    DeadLetter,
    Enqueued,
    NackOutcome,
    NextStep,
    PushItem,
    QueueStats,
    Task,
    TaskQueue,
)

T = TypeVar("T")

THREADS_MAX = 64
"""Blocking calls under way at once; more wait for a thread."""


class ThreadedAsyncQueue:
    """Runs a blocking queue's methods on a thread pool (see the module doc)."""

    def __init__(self, sync: TaskQueue) -> None:
        self.sync = sync
        """The blocking queue underneath."""
        self._pool = ThreadPoolExecutor(
            max_workers=THREADS_MAX, thread_name_prefix=f"sluice-{sync.backend}"
        )

    async def _run(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(function, *args, **kwargs))

    @property
    def name(self) -> str:
        return self.sync.name

    @property
    def backend(self) -> BackendName:
        return self.sync.backend

    @property
    def capabilities(self) -> Capabilities:
        return self.sync.capabilities

    def now(self) -> float:
        return self.sync.now()

    async def ensure(self) -> None:
        await self._run(self.sync.ensure)

    async def open(self) -> None:
        await self._run(self.sync.open)

    async def delete(self) -> None:
        await self._run(self.sync.delete)

    async def push(
        self,
        payload: Any,
        *,
        id: str | None = None,
        key: str | None = None,
        delay: float | None = None,
        priority: int = 0,
        max_attempts: int | None = None,
    ) -> Enqueued:
        return await self._run(
            self.sync.push,
            payload,
            id=id,
            key=key,
            delay=delay,
            priority=priority,
            max_attempts=max_attempts,
        )

    async def push_many(self, items: Sequence[PushItem]) -> list[Enqueued]:
        return await self._run(self.sync.push_many, items)

    async def pop(
        self, *, visibility_timeout: float | None = None, wait: float = 0.0
    ) -> Task | None:
        return await self._run(self.sync.pop, visibility_timeout=visibility_timeout, wait=wait)

    async def receive(
        self, max: int = 1, *, visibility_timeout: float | None = None, wait: float = 0.0
    ) -> list[Task]:
        return await self._run(
            self.sync.receive, max, visibility_timeout=visibility_timeout, wait=wait
        )

    async def ack(self, task: Task, result: Any = None) -> None:
        await self._run(self.sync.ack, task, result)

    async def ack_many(self, tasks: Sequence[Task]) -> list[bool]:
        return await self._run(self.sync.ack_many, tasks)

    async def ack_then(
        self, task: Task, then: Sequence[NextStep], result: Any = None
    ) -> list[Enqueued]:
        return await self._run(self.sync.ack_then, task, then, result)

    async def nack(
        self, task: Task, error: str = "", *, delay: float | None = None, permanent: bool = False
    ) -> NackOutcome:
        return await self._run(self.sync.nack, task, error, delay=delay, permanent=permanent)

    async def extend_visibility(self, task: Task, visibility_timeout: float) -> None:
        await self._run(self.sync.extend_visibility, task, visibility_timeout)

    async def release(self, task: Task, *, unstarted: bool = False) -> None:
        await self._run(functools.partial(self.sync.release, unstarted=unstarted), task)

    async def stats(self) -> QueueStats:
        return await self._run(self.sync.stats)

    async def pause(self) -> None:
        await self._run(self.sync.pause)

    async def resume(self) -> None:
        await self._run(self.sync.resume)

    async def cancel(
        self, *, message_id: str | None = None, id: str | None = None, reason: str | None = None
    ) -> CancelResult:
        return await self._run(self.sync.cancel, message_id=message_id, id=id, reason=reason)

    async def drain(self, timeout: float) -> bool:
        return await self._run(self.sync.drain, timeout)

    async def dead_letters(self, limit: int = 100) -> list[DeadLetter]:
        return await self._run(self.sync.dead_letters, limit)

    async def close(self) -> None:
        await self._run(self.sync.close)
        self._pool.shutdown(wait=False)
