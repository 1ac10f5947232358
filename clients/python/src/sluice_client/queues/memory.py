"""`InMemoryQueue`: the queue interface in this process, on a clock the test controls.

It keeps sluice's rules (docs/semantics.md) so code tested on it behaves the same on a server:
leases that run out count as failed attempts, `max_attempts` dead-letters, per-key lanes deliver
one message of a key at a time, idempotency ids deduplicate, a paused queue delivers nothing.
Time comes from its `Clock`: with the default `ManualClock`, delays, backoffs and leases move
only when the test calls `advance`, so nothing in a test sleeps. Waits (`pop(wait=...)`,
`drain`) block in real time until something changes (a push, an ack, an `advance`) or the wait
is over. Thread-safe: every operation holds one lock.
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..clock import Clock, ManualClock
from ..envelope import TaskEnvelope
from ..errors import LeaseLost
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
    ack_each,
    check_exactly_one,
    refuse_next_steps,
    should_dead_letter,
)

DEFAULT_VISIBILITY_TIMEOUT_S = 30.0
DEDUP_WINDOW_S = 86_400.0
"""How long an idempotency id deduplicates (sluice's default window)."""
FINISHED_KEPT = 10_000
"""Finished messages remembered for `cancel` answers; the oldest are forgotten first."""
DEAD_LETTERS_KEPT = 100_000
"""Dead letters kept; beyond it the oldest are dropped, as retention would."""
LEASE_EXPIRED = "visibility timeout expired"

CAPABILITIES = Capabilities(
    extend=True,
    pause=True,
    cancel=True,
    per_key_order=True,
    dedup=True,
    delays=True,
    in_flight_stats=True,
    ordered=True,
    drain=True,
    priority=True,
    chaining=False,
)


@dataclass
class _Message:
    envelope: TaskEnvelope
    seq: int
    priority: int
    state: str
    """`ready` (visible at `visible_at`), `in_flight`, or a final state."""
    visible_at: float
    lease_expires_at: float = 0.0
    receipt: str | None = None


class InMemoryQueue:
    """A queue in this process (see the module doc). `clock` defaults to a fresh
    `ManualClock`; pass `SystemClock()` to use it with real time."""

    def __init__(
        self,
        name: str = "memory",
        *,
        options: QueueOptions | None = None,
        clock: Clock | None = None,
    ) -> None:
        self._name = name
        self.options = options or QueueOptions()
        self.clock: Clock = clock or ManualClock()
        self._lock = threading.Condition()
        if isinstance(self.clock, ManualClock):
            self.clock.subscribe(self._lock)
        self._seq = itertools.count(1)
        self._receipts = itertools.count(1)
        self._live: dict[str, _Message] = {}
        # Finished tasks' state and ack result, the newest FINISHED_KEPT.
        self._finished: OrderedDict[str, tuple[str, Any]] = OrderedDict()
        self._ids: dict[str, tuple[str, float]] = {}
        self._dead: list[DeadLetter] = []
        self._paused = False
        self._processed = 0

    @property
    def name(self) -> str:
        return self._name

    @property
    def backend(self) -> BackendName:
        return "memory"

    @property
    def capabilities(self) -> Capabilities:
        return CAPABILITIES

    def now(self) -> float:
        return self.clock.now()

    def advance(self, seconds: float) -> None:
        """Moves a `ManualClock` forward (a `TypeError` on any other clock)."""
        if not isinstance(self.clock, ManualClock):
            raise TypeError("only a ManualClock can be advanced")
        self.clock.advance(seconds)

    def ensure(self) -> None:
        """Nothing to create: the queue exists from its construction."""

    def open(self) -> None:
        """Nothing to check: the queue is this object."""

    def delete(self) -> None:
        """Drops every task and dead letter: the object is an empty queue again."""
        with self._lock:
            self._live.clear()
            self._finished.clear()
            self._ids.clear()
            self._dead.clear()

    def close(self) -> None:
        """Nothing to release."""

    # Producing.

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
        item = PushItem(payload, id, key, delay, priority, max_attempts)
        return self.push_many([item])[0]

    def push_many(self, items: Sequence[PushItem]) -> list[Enqueued]:
        with self._lock:
            now = self.clock.now()
            results = [self._push_one(item, now) for item in items]
            self._lock.notify_all()
            return results

    def _push_one(self, item: PushItem, now: float) -> Enqueued:
        if item.id is not None:
            seen = self._ids.get(item.id)
            if seen is not None and now - seen[1] < DEDUP_WINDOW_S:
                state, result = self._state_of(seen[0])
                return Enqueued(
                    message_id=seen[0], created=False, position=None, state=state, result=result
                )
        position = len(self._live)
        task_id = str(uuid.UUID(int=next(self._seq)))
        envelope = TaskEnvelope(
            task_id=task_id,
            payload=item.payload,
            max_attempts=item.max_attempts,
            enqueued_at=now,
            next_attempt_ts=now + item.delay if item.delay else None,
            idempotency_id=item.id,
            key=item.key,
        )
        self._live[task_id] = _Message(
            envelope=envelope,
            seq=next(self._seq),
            priority=item.priority,
            state="ready",
            visible_at=now + (item.delay or 0.0),
        )
        if item.id is not None:
            self._ids[item.id] = (task_id, now)
        return Enqueued(message_id=task_id, created=True, position=position)

    # Consuming.

    def pop(self, *, visibility_timeout: float | None = None, wait: float = 0.0) -> Task | None:
        tasks = self.receive(1, visibility_timeout=visibility_timeout, wait=wait)
        return tasks[0] if tasks else None

    def receive(
        self, max: int = 1, *, visibility_timeout: float | None = None, wait: float = 0.0
    ) -> list[Task]:
        lease = visibility_timeout or self.options.visibility_timeout
        lease = lease or DEFAULT_VISIBILITY_TIMEOUT_S
        deadline = time.monotonic() + max_wait(wait)
        with self._lock:
            while True:
                now = self.clock.now()
                self._expire_leases(now)
                tasks = self._claim(max, lease, now)
                remaining = deadline - time.monotonic()
                if tasks or remaining <= 0:
                    return tasks
                self._lock.wait(self._wake_within(remaining, now))

    def _claim(self, max: int, lease: float, now: float) -> list[Task]:
        if self._paused:
            return []
        tasks: list[Task] = []
        for message in self._claimable(now):
            if len(tasks) >= max:
                break
            message.state = "in_flight"
            message.lease_expires_at = now + lease
            message.receipt = f"{message.envelope.task_id}.{next(self._receipts)}"
            message.envelope = replace(
                message.envelope,
                attempt=message.envelope.attempt + 1,
                visibility_timeout=lease,
                max_attempts=self._max_attempts(message.envelope),
            )
            tasks.append(Task(message.envelope, message.receipt, message.lease_expires_at))
        return tasks

    def _claimable(self, now: float) -> list[_Message]:
        """Visible messages in delivery order: priority, then enqueue order; on a per-key
        queue only the head of each key's lane, and only while no message of it is leased."""
        ordered = sorted(self._live.values(), key=lambda message: (-message.priority, message.seq))
        busy: set[str] = set()
        if self.options.per_key:
            # Every key that has an unfinished message ahead in its lane is held up.
            lanes: dict[str, _Message] = {}
            for message in sorted(self._live.values(), key=lambda message: message.seq):
                key = message.envelope.key
                if key is not None and key not in lanes:
                    lanes[key] = message
            heads = {id(message) for message in lanes.values()}
            busy = {key for key, head in lanes.items() if head.state == "in_flight"}
        out = []
        for message in ordered:
            if message.state != "ready" or message.visible_at > now:
                continue
            key = message.envelope.key
            if (
                self.options.per_key
                and key is not None
                and (key in busy or id(message) not in heads)
            ):
                continue
            out.append(message)
        return out

    def _expire_leases(self, now: float) -> None:
        for message in list(self._live.values()):
            if message.state == "in_flight" and message.lease_expires_at <= now:
                self._fail(message, LEASE_EXPIRED, 0.0, False, now)

    def _wake_within(self, remaining: float, now: float) -> float:
        """How long to block: until the wait is over or, on a real clock, until the next
        delayed message or lease comes due."""
        due = [
            message.visible_at if message.state == "ready" else message.lease_expires_at
            for message in self._live.values()
        ]
        upcoming = [at for at in due if at > now]
        if upcoming:
            real = self.clock.real_seconds_until(min(upcoming))
            if real is not None:
                return min(remaining, real + 0.001)
        return remaining

    def ack(self, task: Task, result: Any = None) -> None:
        with self._lock:
            message = self._holder(task)
            self._finish(message, "acked", result)
            self._processed += 1
            self._lock.notify_all()

    def ack_then(self, task: Task, then: Sequence[NextStep], result: Any = None) -> list[Enqueued]:
        refuse_next_steps("memory", then)
        self.ack(task, result)
        return []

    def ack_many(self, tasks: Sequence[Task]) -> list[bool]:
        return ack_each(self, tasks)

    def nack(
        self, task: Task, error: str = "", *, delay: float | None = None, permanent: bool = False
    ) -> NackOutcome:
        with self._lock:
            message = self._holder(task)
            if delay is None:
                delay = self.options.backoff.delay(message.envelope.attempt)
            outcome = self._fail(message, error, delay, permanent, self.clock.now())
            # A nack ends the lease, as on sluice: its receipt settles nothing more. (A lease
            # that ran out instead keeps its receipt until the message is delivered again.)
            message.receipt = None
            self._lock.notify_all()
            return outcome

    def extend_visibility(self, task: Task, visibility_timeout: float) -> None:
        with self._lock:
            now = self.clock.now()
            self._leased(task, now).lease_expires_at = now + visibility_timeout

    def release(self, task: Task, *, unstarted: bool = False) -> None:
        with self._lock:
            now = self.clock.now()
            message = self._leased(task, now)
            # As sluice's release: ready at once, no error, no failure; the receipt still
            # settles it until it is delivered again. Unstarted, the delivery is not counted.
            if unstarted:
                message.envelope = replace(
                    message.envelope, attempt=max(0, message.envelope.attempt - 1)
                )
            message.state = "ready"
            message.visible_at = now
            self._lock.notify_all()

    def _leased(self, task: Task, now: float) -> _Message:
        """The message `task` holds under a lease still running (else `LeaseLost`)."""
        self._expire_leases(now)
        message = self._live.get(task.task_id)
        if message is None or message.receipt != task.receipt or message.state != "in_flight":
            raise LeaseLost(f"task {task.task_id} is no longer leased with this receipt")
        return message

    def _holder(self, task: Task) -> _Message:
        """The message `task`'s receipt still holds. As on sluice, a lease that ran out still
        settles the message as long as it was not delivered again or dead-lettered."""
        message = self._live.get(task.task_id)
        if message is None or message.receipt != task.receipt:
            raise LeaseLost(f"task {task.task_id} is no longer leased with this receipt")
        return message

    def _fail(
        self, message: _Message, error: str, delay: float, permanent: bool, now: float
    ) -> NackOutcome:
        envelope = message.envelope
        max_attempts = self._max_attempts(envelope) or 0
        if should_dead_letter(envelope.attempt, max_attempts, permanent):
            self._dead.append(
                DeadLetter(
                    task_id=envelope.task_id,
                    payload=envelope.payload,
                    error=error,
                    attempts=envelope.attempt,
                    failed_at=now,
                    idempotency_id=envelope.idempotency_id,
                    key=envelope.key,
                )
            )
            del self._dead[:-DEAD_LETTERS_KEPT]
            self._finish(message, "dead")
            return "dead_lettered"
        message.state = "ready"
        message.visible_at = now + delay
        message.envelope = replace(
            envelope, last_error=error, next_attempt_ts=now + delay if delay else None
        )
        return "retried"

    def _finish(self, message: _Message, state: str, result: Any = None) -> None:
        del self._live[message.envelope.task_id]
        self._finished[message.envelope.task_id] = (state, result)
        while len(self._finished) > FINISHED_KEPT:
            self._finished.popitem(last=False)

    def _state_of(self, message_id: str) -> tuple[str | None, Any]:
        """Where a task is now (`ready`, `delayed`, `in_flight`, or how it finished) and its
        ack result; (None, None) once forgotten."""
        message = self._live.get(message_id)
        if message is not None:
            if message.state == "ready" and message.visible_at > self.clock.now():
                return "delayed", None
            return message.state, None
        return self._finished.get(message_id, (None, None))

    def _max_attempts(self, envelope: TaskEnvelope) -> int:
        if envelope.max_attempts is not None:
            return envelope.max_attempts
        return self.options.max_attempts

    # Operating.

    def stats(self) -> QueueStats:
        with self._lock:
            now = self.clock.now()
            self._expire_leases(now)
            live = list(self._live.values())
            return QueueStats(
                ready=sum(1 for m in live if m.state == "ready" and m.visible_at <= now),
                delayed=sum(1 for m in live if m.state == "ready" and m.visible_at > now),
                in_flight=sum(1 for m in live if m.state == "in_flight"),
                dead_lettered=len(self._dead),
                paused=self._paused,
                processed=self._processed,
            )

    def pause(self) -> None:
        with self._lock:
            self._paused = True

    def resume(self) -> None:
        with self._lock:
            self._paused = False
            self._lock.notify_all()

    def cancel(
        self, *, message_id: str | None = None, id: str | None = None, reason: str | None = None
    ) -> CancelResult:
        check_exactly_one(message_id, id)
        with self._lock:
            self._expire_leases(self.clock.now())
            if id is not None:
                seen = self._ids.get(id)
                message_id = seen[0] if seen else None
            if message_id is None:
                return CancelResult("not_found")
            message = self._live.get(message_id)
            if message is None:
                finished = self._finished.get(message_id)
                if finished is None:
                    return CancelResult("not_found")
                return CancelResult("already_completed", finished[0])
            if message.state == "in_flight":
                return CancelResult("already_processing", "in_flight")
            message.envelope = replace(message.envelope, last_error=reason)
            self._finish(message, "cancelled")
            self._lock.notify_all()
            return CancelResult("cancelled", "cancelled")

    def drain(self, timeout: float) -> bool:
        deadline = time.monotonic() + max(timeout, 0.0)
        with self._lock:
            while True:
                now = self.clock.now()
                self._expire_leases(now)
                if not self._live:
                    return True
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._lock.wait(self._wake_within(remaining, now))

    def dead_letters(self, limit: int = 100) -> list[DeadLetter]:
        with self._lock:
            return list(reversed(self._dead[-limit:])) if limit > 0 else []


def max_wait(wait: float) -> float:
    """A wait of at most 20 s, as sluice's long polls."""
    return min(max(wait, 0.0), 20.0)
