"""`SluiceQueue`: the queue interface over a sluice server's native HTTP API.

Everything is the server's: leases, backoff, dead-lettering, per-key order, dedup, pause. The
message body is the payload itself (no envelope), so producers and consumers in other languages
see plain JSON; a task's own `max_attempts` rides in a header and is enforced at nack time.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from ..client import Client
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


class SluiceQueue:
    """One queue of a sluice server, blocking and thread-safe.

    `client` defaults to a `Client(url, token=token)` (so `SLUICE_URL` and `SLUICE_TOKEN`
    apply). The queue must exist, unless `create=True`, which creates it when missing with
    `options` (the server's defaults without them); an existing queue's settings change only by
    `ensure()`.
    """

    def __init__(
        self,
        name: str,
        *,
        client: Client | None = None,
        url: str | None = None,
        token: str | None = None,
        options: QueueOptions | None = None,
        create: bool = False,
    ) -> None:
        self._name = name
        self.create = create
        """Create the queue when it does not exist (else a missing queue is `queue_not_found`)."""
        self._owns_client = client is None
        self.client = client or Client(url, token=token)
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

    def ensure(self) -> None:
        answer = self.client.put_queue(self._name, mapping.queue_spec(self.options))
        self._max_attempts = answer.queue.config.max_attempts
        self._lease_s = answer.queue.config.visibility_timeout_ms / 1000
        self._ensured = True

    def open(self) -> None:
        if self._ensured:
            return
        try:
            queue = self.client.get_queue(self._name)
        except SluiceError as error:
            if error.code != "queue_not_found":
                raise
            if not self.create:
                raise missing_queue(self._name) from error
            self.ensure()
            return
        self._max_attempts = queue.config.max_attempts
        self._lease_s = queue.config.visibility_timeout_ms / 1000
        self._ensured = True

    def delete(self) -> None:
        """Deletes the queue and, as the server does by default, its dead-letter queue."""
        try:
            self.client.delete_queue(self._name)
        except SluiceError as error:
            if error.code != "queue_not_found":
                raise
        self._ensured = False

    def _ready(self) -> None:
        if not self._ensured:
            self.open()

    def close(self) -> None:
        if self._owns_client:
            self.client.close()

    def push(
        self,
        payload: Any,
        *,
        id: str | None = None,
        key: str | None = None,
        delay: float | None = None,
        priority: int = 0,
        max_attempts: int | None = None,
    ) -> Enqueued:
        self._ready()
        item = PushItem(payload, id, key, delay, priority, max_attempts)
        answer = self.client.enqueue_message(self._name, mapping.message_in(item))
        return mapping.enqueued(answer)

    def push_many(self, items: Sequence[PushItem]) -> list[Enqueued]:
        self._ready()
        results: list[Enqueued] = []
        for start in range(0, len(items), 1000):
            batch = [mapping.message_in(item) for item in items[start : start + 1000]]
            answers = self.client.enqueue_batch(self._name, batch)
            results.extend(mapping.enqueued(answer) for answer in answers)
        return results

    def pop(self, *, visibility_timeout: float | None = None, wait: float = 0.0) -> Task | None:
        tasks = self.receive(1, visibility_timeout=visibility_timeout, wait=wait)
        return tasks[0] if tasks else None

    def receive(
        self, max: int = 1, *, visibility_timeout: float | None = None, wait: float = 0.0
    ) -> list[Task]:
        self._ready()
        lease_ms = mapping.ms(visibility_timeout) if visibility_timeout is not None else None
        deadline = time.monotonic() + max_wait(wait)
        while True:
            # Long polls longer than the server's limit are several requests.
            remaining = min(deadline - time.monotonic(), mapping.WAIT_MAX_S)
            messages = self.client.receive(
                self._name,
                min(max, mapping.RECEIVE_MAX),
                wait_ms=mapping.ms(remaining) if remaining > 0 else 0,
                visibility_timeout_ms=lease_ms,
            )
            if messages or time.monotonic() >= deadline:
                lease_s = visibility_timeout if visibility_timeout is not None else self._lease_s
                return [mapping.task(m, self._max_attempts, lease_s) for m in messages]

    def ack(self, task: Task, result: Any = None) -> None:
        with mapping.lease_errors(task):
            self.client.ack(self._name, task.receipt, result=mapping.result_in(result))

    def ack_then(self, task: Task, then: Sequence[NextStep], result: Any = None) -> list[Enqueued]:
        if not then:
            self.ack(task, result)
            return []
        steps = [mapping.next_step_in(step) for step in then]
        with mapping.lease_errors(task):
            answer = self.client.ack(
                self._name, task.receipt, result=mapping.result_in(result), then=steps
            )
        return [mapping.enqueued(step) for step in answer.then or []]

    def ack_many(self, tasks: Sequence[Task]) -> list[bool]:
        acked: list[bool] = []
        for start in range(0, len(tasks), mapping.ACK_RECEIPTS_MAX):
            receipts = [task.receipt for task in tasks[start : start + mapping.ACK_RECEIPTS_MAX]]
            try:
                self.client.ack_many(self._name, receipts)
            except SluiceError as error:
                acked.extend(mapping.acked_of(error, len(receipts)))
            else:
                acked.extend([True] * len(receipts))
        return acked

    def nack(
        self, task: Task, error: str = "", *, delay: float | None = None, permanent: bool = False
    ) -> NackOutcome:
        permanent = permanent or mapping.own_limit_reached(task)
        with mapping.lease_errors(task):
            answer = self.client.nack(
                self._name,
                task.receipt,
                error=error,
                delay_ms=mapping.ms(delay) if delay is not None else None,
                permanent=permanent,
            )
        return mapping.nack_outcome(answer)

    def extend_visibility(self, task: Task, visibility_timeout: float) -> None:
        with mapping.lease_errors(task):
            self.client.extend(self._name, task.receipt, mapping.ms(visibility_timeout))

    def release(self, task: Task, *, unstarted: bool = False) -> None:
        with mapping.lease_errors(task):
            # An extend to 0 is the server's release: no failure counted, never dead-lettered.
            self.client.extend(self._name, task.receipt, 0, unstarted=unstarted)

    def stats(self) -> QueueStats:
        self._ready()
        return mapping.stats(self.client.queue_stats(self._name))

    def pause(self) -> None:
        self._ready()
        self.client.pause_queue(self._name)

    def resume(self) -> None:
        self._ready()
        self.client.resume_queue(self._name)

    def cancel(
        self, *, message_id: str | None = None, id: str | None = None, reason: str | None = None
    ) -> CancelResult:
        check_exactly_one(message_id, id)
        self._ready()
        answer = self.client.cancel(self._name, message_id=message_id, id=id, reason=reason)
        return mapping.cancel_result(answer)

    def drain(self, timeout: float) -> bool:
        self._ready()
        deadline = time.monotonic() + max(timeout, 0.0)
        while True:
            remaining = min(max(deadline - time.monotonic(), 0.0), mapping.DRAIN_MAX_S)
            answer = self.client.drain(self._name, mapping.ms(remaining))
            if answer.drained or time.monotonic() >= deadline:
                return answer.drained

    def dead_letters(self, limit: int = 100) -> list[DeadLetter]:
        self._ready()
        page = self.client.list_dead_letters(self._name, limit=max(1, min(limit, 1000)))
        # The list carries no bodies: each entry is read whole, at most `limit` of them.
        return [
            mapping.dead_letter(self.client.get_dead_letter(self._name, entry.message_id))
            for entry in page.entries[:limit]
        ]


def max_wait(wait: float) -> float:
    """Waits are not negative."""
    return max(wait, 0.0)
