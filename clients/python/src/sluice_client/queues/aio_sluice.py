"""`AsyncSluiceQueue`: the queue interface over a sluice server's native HTTP API, for asyncio
(the twin of `SluiceQueue`, on `AsyncClient`).

Everything is the server's: leases, backoff, dead-lettering, per-key order, dedup, pause. The
message body is the payload itself (no envelope), so producers and consumers in other languages
see plain JSON; a task's own `max_attempts` rides in a header and is enforced at nack time.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from ..aio_client import AsyncClient
from ..errors import SluiceError
from . import _sluice_map as mapping
from .base import (
    BackendName,
    CancelResult,
    Capabilities,
    DeadLetter,
    Enqueued,
    NackOutcome,
    NextStep,
    PushItem,
    QueueOptions,
    QueueStats,
    Task,
    check_exactly_one,
    missing_queue,
)
from .sluice import max_wait


class AsyncSluiceQueue:
    """One queue of a sluice server, for one event loop.

    `client` defaults to an `AsyncClient(url, token=token)` (so `SLUICE_URL` and `SLUICE_TOKEN`
    apply). The queue must exist, unless `create=True`, which creates it when missing with
    `options` (the server's defaults without them); an existing queue's settings change only by
    `ensure()`.
    """

    def __init__(
        self,
        name: str,
        *,
        client: AsyncClient | None = None,
        url: str | None = None,
        token: str | None = None,
        options: QueueOptions | None = None,
        create: bool = False,
    ) -> None:
        self._name = name
        self.create = create
        """Create the queue when it does not exist (else a missing queue is `queue_not_found`)."""
        self._owns_client = client is None
        self.client = client or AsyncClient(url, token=token)
        """The HTTP client underneath, for everything the interface does not cover."""
        self.options = options
        self._max_attempts: int | None = None
        self._lease_s: float | None = None
        self._ensured = False

    @property
    def name(self) -> str:
        return self._name

    @property
    def backend(self) -> BackendName:
        return "sluice"

    @property
    def capabilities(self) -> Capabilities:
        return mapping.CAPABILITIES

    def now(self) -> float:
        return time.time()

    async def ensure(self) -> None:
        answer = await self.client.put_queue(self._name, mapping.queue_spec(self.options))
        self._max_attempts = answer.queue.config.max_attempts
        self._lease_s = answer.queue.config.visibility_timeout_ms / 1000
        self._ensured = True

    async def open(self) -> None:
        if self._ensured:
            return
        try:
            queue = await self.client.get_queue(self._name)
        except SluiceError as error:
            if error.code != "queue_not_found":
                raise
            if not self.create:
                raise missing_queue(self._name) from error
            await self.ensure()
            return
        self._max_attempts = queue.config.max_attempts
        self._lease_s = queue.config.visibility_timeout_ms / 1000
        self._ensured = True

    async def delete(self) -> None:
        """Deletes the queue and, as the server does by default, its dead-letter queue."""
        try:
            await self.client.delete_queue(self._name)
        except SluiceError as error:
            if error.code != "queue_not_found":
                raise
        self._ensured = False

    async def _ready(self) -> None:
        if not self._ensured:
            await self.open()

    async def close(self) -> None:
        if self._owns_client:
            await self.client.aclose()

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
        await self._ready()
        item = PushItem(payload, id, key, delay, priority, max_attempts)
        answer = await self.client.enqueue_message(self._name, mapping.message_in(item))
        return mapping.enqueued(answer)

    async def push_many(self, items: Sequence[PushItem]) -> list[Enqueued]:
        await self._ready()
        results: list[Enqueued] = []
        for start in range(0, len(items), 1000):
            batch = [mapping.message_in(item) for item in items[start : start + 1000]]
            answers = await self.client.enqueue_batch(self._name, batch)
            results.extend(mapping.enqueued(answer) for answer in answers)
        return results

    async def pop(
        self, *, visibility_timeout: float | None = None, wait: float = 0.0
    ) -> Task | None:
        tasks = await self.receive(1, visibility_timeout=visibility_timeout, wait=wait)
        return tasks[0] if tasks else None

    async def receive(
        self, max: int = 1, *, visibility_timeout: float | None = None, wait: float = 0.0
    ) -> list[Task]:
        await self._ready()
        lease_ms = mapping.ms(visibility_timeout) if visibility_timeout is not None else None
        deadline = time.monotonic() + max_wait(wait)
        while True:
            # Long polls longer than the server's limit are several requests.
            remaining = min(deadline - time.monotonic(), mapping.WAIT_MAX_S)
            messages = await self.client.receive(
                self._name,
                min(max, mapping.RECEIVE_MAX),
                wait_ms=mapping.ms(remaining) if remaining > 0 else 0,
                visibility_timeout_ms=lease_ms,
            )
            if messages or time.monotonic() >= deadline:
                lease_s = visibility_timeout if visibility_timeout is not None else self._lease_s
                return [mapping.task(m, self._max_attempts, lease_s) for m in messages]

    async def ack(self, task: Task, result: Any = None) -> None:
        with mapping.lease_errors(task):
            await self.client.ack(self._name, task.receipt, result=mapping.result_in(result))

    async def ack_then(
        self, task: Task, then: Sequence[NextStep], result: Any = None
    ) -> list[Enqueued]:
        if not then:
            await self.ack(task, result)
            return []
        steps = [mapping.next_step_in(step) for step in then]
        with mapping.lease_errors(task):
            answer = await self.client.ack(
                self._name, task.receipt, result=mapping.result_in(result), then=steps
            )
        return [mapping.enqueued(step) for step in answer.then or []]

    async def ack_many(self, tasks: Sequence[Task]) -> list[bool]:
        acked: list[bool] = []
        for start in range(0, len(tasks), mapping.ACK_RECEIPTS_MAX):
            receipts = [task.receipt for task in tasks[start : start + mapping.ACK_RECEIPTS_MAX]]
            try:
                await self.client.ack_many(self._name, receipts)
            except SluiceError as error:
                acked.extend(mapping.acked_of(error, len(receipts)))
            else:
                acked.extend([True] * len(receipts))
        return acked

    async def nack(
        self, task: Task, error: str = "", *, delay: float | None = None, permanent: bool = False
    ) -> NackOutcome:
        permanent = permanent or mapping.own_limit_reached(task)
        with mapping.lease_errors(task):
            answer = await self.client.nack(
                self._name,
                task.receipt,
                error=error,
                delay_ms=mapping.ms(delay) if delay is not None else None,
                permanent=permanent,
            )
        return mapping.nack_outcome(answer)

    async def extend_visibility(self, task: Task, visibility_timeout: float) -> None:
        with mapping.lease_errors(task):
            await self.client.extend(self._name, task.receipt, mapping.ms(visibility_timeout))

    async def release(self, task: Task, *, unstarted: bool = False) -> None:
        with mapping.lease_errors(task):
            # An extend to 0 is the server's release: no failure counted, never dead-lettered.
            await self.client.extend(self._name, task.receipt, 0, unstarted=unstarted)

    async def stats(self) -> QueueStats:
        await self._ready()
        return mapping.stats(await self.client.queue_stats(self._name))

    async def pause(self) -> None:
        await self._ready()
        await self.client.pause_queue(self._name)

    async def resume(self) -> None:
        await self._ready()
        await self.client.resume_queue(self._name)

    async def cancel(
        self, *, message_id: str | None = None, id: str | None = None, reason: str | None = None
    ) -> CancelResult:
        check_exactly_one(message_id, id)
        await self._ready()
        answer = await self.client.cancel(self._name, message_id=message_id, id=id, reason=reason)
        return mapping.cancel_result(answer)

    async def drain(self, timeout: float) -> bool:
        await self._ready()
        deadline = time.monotonic() + max(timeout, 0.0)
        while True:
            remaining = min(max(deadline - time.monotonic(), 0.0), mapping.DRAIN_MAX_S)
            answer = await self.client.drain(self._name, mapping.ms(remaining))
            if answer.drained or time.monotonic() >= deadline:
                return answer.drained

    async def dead_letters(self, limit: int = 100) -> list[DeadLetter]:
        await self._ready()
        page = await self.client.list_dead_letters(self._name, limit=max(1, min(limit, 1000)))
        # The list carries no bodies: each entry is read whole, at most `limit` of them.
        return [
            mapping.dead_letter(await self.client.get_dead_letter(self._name, entry.message_id))
            for entry in page.entries[:limit]
        ]
