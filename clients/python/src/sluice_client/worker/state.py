"""What the worker hands to handlers and hooks, and what it reports about itself: the types
both workers (threads and asyncio) share, and the counters behind `status()`."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any, Generic, Literal, TypeVar

from ..queues.base import (
    BackendName,
    NextStep,
    PushItem,
    QueueStats,
    Task,
    chaining_unsupported,
)

T = TypeVar("T")


RECEIVE_MAX = 100
"""Events one receive of the fetcher asks for at most (sluice's limit per request)."""
ACK_BATCH_MAX = 1000
"""Receipts one coalesced ack carries at most (sluice's limit per request)."""
WAITING_ACKS_PER_SLOT = 2
"""Successes that may wait for the acker's next request, per slot: past `concurrency` times
this, a slot whose handler succeeded waits before it takes its next event. With one request
under way that holds at most as many, a worker holds at most four times `concurrency` events
done and not yet acked; fewer would cap the batches, and so the rate, when acks are slow
(a disk's fsync)."""
NEXT_STEPS_MAX = 100
"""Next steps one ack carries at most (sluice's limit per request)."""
SETTLE_WAIT_S = 10.0
"""How long a stopping worker waits for the acks already handed to its acker."""
HEARTBEAT_TICK_S = 0.05
"""How often the heartbeat looks for leases due for extension."""


def as_datetime(seconds: float | None) -> datetime:
    """Seconds since the epoch as an aware UTC datetime (the epoch itself when unknown)."""
    return datetime.fromtimestamp(seconds or 0.0, tz=timezone.utc)


def push_items(events: Sequence[Any], encode: Callable[[Any], Any]) -> list[PushItem]:
    """`enqueue_many`'s events as `push_many` takes them: each encoded, an event given as a
    `PushItem` keeping its options (as TypeScript's `envelope`)."""
    return [
        replace(event, payload=encode(event.payload))
        if isinstance(event, PushItem)
        else PushItem(encode(event))
        for event in events
    ]


def error_text(error: BaseException) -> str:
    """The error kept with a failed attempt."""
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


@dataclass(frozen=True)
class Context(Generic[T]):
    """What a handler gets with each event."""

    event: T
    """The decoded event."""
    event_id: str
    """The message's id (sluice's message id; the same through every retry)."""
    attempt: int
    """This delivery's number, from 1."""
    enqueued_at: datetime
    """When the event was enqueued."""
    processing_started_at: datetime
    """When this attempt started (by the backend's clock)."""
    instance_index: int
    """Which of the worker's `concurrency` slots runs it, from 0."""
    processed_count: int
    """Events this worker finished (acked) before this one started."""
    pending_count: int
    """Other events this worker holds right now, exactly: waiting for a slot, running in other
    slots, or waiting for their ack (the Rust and TypeScript SDKs' `pending_count`)."""
    queue_pending_count: int
    """Events waiting in the queue (ready or delayed), every worker's, as last seen (every
    0.5 s)."""
    idempotency_id: str | None
    """The idempotency id it was enqueued with."""
    task: Task
    """The leased task underneath (its envelope, its receipt)."""
    backend: BackendName = "sluice"
    """The backend the event came from."""
    chaining: bool = True
    """Whether that backend can take next steps (`capabilities.chaining`); `then` raises
    `Unsupported` where it cannot."""
    next_steps: list[NextStep] = field(default_factory=list)
    """The next steps `add_next_step` added, in order: the worker acks the event with them."""

    def add_next_step(
        self,
        queue: str,
        payload: Any,
        *,
        id: str | None = None,
        key: str | None = None,
        delay: float | None = None,
        priority: int = 0,
        max_attempts: int | None = None,
    ) -> None:
        """Adds a next step: `payload` goes to the queue named `queue` (on the same server) in
        the same commit as this event's ack, so it is stored exactly when this event is done:
        never lost to a crash between the two, never stored twice because the event ran again.
        Nothing is enqueued when the handler fails. The options are `push`'s; at most 100 steps
        per event; call it while the handler runs. Raises `Unsupported` on a backend without
        `capabilities.chaining` (memory, SQS, RabbitMQ), which fails the attempt."""
        # Refused when called rather than at the ack: the attempt fails with the reason (the
        # retry policy and `on_dead_letter` see it) instead of an ack that cannot be sent.
        if not self.chaining:
            raise chaining_unsupported(self.backend)
        if len(self.next_steps) >= NEXT_STEPS_MAX:
            raise ValueError(f"at most {NEXT_STEPS_MAX} next steps per event")
        self.next_steps.append(NextStep(queue, payload, id, key, delay, priority, max_attempts))


@dataclass(frozen=True)
class DeadLetterContext(Generic[T]):
    """What `on_dead_letter` gets after an event went to the dead-letter queue."""

    event: T
    error: BaseException
    """The last attempt's error."""
    event_id: str
    attempt: int
    """The attempt that failed last."""
    enqueued_at: datetime
    failed_at: datetime
    """When it was dead-lettered (by the backend's clock)."""


@dataclass(frozen=True)
class EmptyContext:
    """What `on_empty` gets when the queue emptied after this worker processed events."""

    processed_count: int


InstanceState = Literal["idle", "processing", "paused"]


@dataclass(frozen=True)
class SlotStatus:
    """One instance (slot) of a worker: `Worker.instance_status(i)`."""

    index: int
    state: InstanceState
    """`processing` while it runs an event (also when paused meanwhile: it finishes that one),
    `paused` when it takes nothing new (`pause(instance=i)`, or the worker paused), else
    `idle`."""
    event_id: str | None
    """The event it runs now."""
    started_at: datetime | None
    processed: int
    """Events it finished."""
    failed: int = 0
    """Attempts of it that failed (retried or dead-lettered)."""
    pending: int = 0
    """Events it holds: the one it runs, until its ack or nack lands (0 or 1, more while acks
    wait)."""


@dataclass(frozen=True)
class WorkerStatus:
    """A worker instance's state (`Worker.status()`)."""

    running: bool
    paused: bool
    """This instance takes no new events (`pause()`); the queue itself is not paused."""
    concurrency: int
    processed: int
    retried: int
    dead_lettered: int
    in_flight: int
    """Events whose handler runs now (at most `concurrency`)."""
    pending: int
    """Events this worker holds, exactly: received and not yet acked, nacked or released."""
    queue_pending: int
    """Events waiting in the queue (ready or delayed), every worker's, as last seen."""
    slots: list[SlotStatus]
    queue: QueueStats | None
    """The queue's numbers now (None when the backend could not be asked)."""


@dataclass(frozen=True)
class WorkerReport:
    """What a finished run did."""

    processed: int
    retried: int
    dead_lettered: int
    released: int
    """Events still running at the end of the shutdown grace, given back to the queue."""


@dataclass
class _Slot:
    event_id: str | None = None
    started_at: float | None = None
    processed: int = 0
    failed: int = 0
    holding: int = 0
    """Events it took and that are not settled yet."""
    paused: bool = False


@dataclass
class Counters:
    """The worker's numbers, under one lock (threads) or one loop (asyncio)."""

    concurrency: int
    processed: int = 0
    retried: int = 0
    dead_lettered: int = 0
    released: int = 0
    pending: int = 0
    in_flight: int = 0
    """Handlers running now."""
    unsettled: int = 0
    """Events received and not yet acked, nacked or released (waiting for a slot, running, or
    waiting for the acker)."""
    empty_armed: bool = False
    """Set after each finished event: the next empty receive checks whether the queue emptied."""
    slots: list[_Slot] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.slots = [_Slot() for _ in range(self.concurrency)]

    def received(self, count: int) -> None:
        """The fetcher leased `count` events."""
        with self.lock:
            self.unsettled += count

    def started(self, index: int, event_id: str, now: float) -> tuple[int, int]:
        """Marks a slot busy; answers the processed count before this event and the other
        events this worker holds."""
        with self.lock:
            self.slots[index].event_id = event_id
            self.slots[index].started_at = now
            self.slots[index].holding += 1
            self.in_flight += 1
            return self.processed, self.unsettled - 1

    def slot(self, index: int) -> _Slot:
        """Slot `index`, or `IndexError` naming the worker's instances."""
        if not 0 <= index < len(self.slots):
            raise IndexError(
                f"no instance {index}: this worker has instances 0 to {len(self.slots) - 1}"
            )
        return self.slots[index]

    def set_paused(self, index: int, paused: bool) -> None:
        with self.lock:
            self.slot(index).paused = paused

    def capacity(self) -> int:
        """Events the slots can hold now: one per slot not paused, and per paused slot that
        still runs one."""
        with self.lock:
            return sum(1 for slot in self.slots if not slot.paused or slot.event_id is not None)

    def holding(self, index: int) -> int:
        with self.lock:
            return self.slot(index).holding

    def slot_free(self, index: int) -> None:
        """The slot's handler is over (its event may still wait for the acker)."""
        with self.lock:
            slot = self.slots[index]
            slot.event_id = None
            slot.started_at = None
            self.in_flight -= 1

    def finished(self, index: int | None, outcome: str) -> None:
        """An event is settled: `outcome` is `processed`, `retried`, `dead_lettered`,
        `released` or `lost`; `index` the slot that ran it (None if none did)."""
        with self.lock:
            self.unsettled -= 1
            self.empty_armed = True
            if index is not None:
                slot = self.slots[index]
                slot.holding = max(0, slot.holding - 1)
                if outcome in ("retried", "dead_lettered"):
                    slot.failed += 1
            if outcome == "processed":
                self.processed += 1
                if index is not None:
                    self.slots[index].processed += 1
            elif outcome == "retried":
                self.retried += 1
            elif outcome == "dead_lettered":
                self.dead_lettered += 1
            elif outcome == "released":
                self.released += 1

    def take_empty_check(self) -> bool:
        """True once after events finished and nothing is in hand: time to look whether the
        queue emptied."""
        with self.lock:
            if self.unsettled or not self.empty_armed:
                return False
            self.empty_armed = False
            return True

    def rearm(self) -> None:
        with self.lock:
            self.empty_armed = True

    def slot_status(self, index: int, worker_paused: bool) -> SlotStatus:
        with self.lock:
            return self._slot_status(index, self.slot(index), worker_paused)

    def _slot_status(self, index: int, slot: _Slot, worker_paused: bool) -> SlotStatus:
        state: InstanceState = (
            "processing"
            if slot.event_id is not None
            else "paused"
            if slot.paused or worker_paused
            else "idle"
        )
        return SlotStatus(
            index=index,
            state=state,
            event_id=slot.event_id,
            started_at=as_datetime(slot.started_at) if slot.started_at else None,
            processed=slot.processed,
            failed=slot.failed,
            pending=slot.holding,
        )

    def status(self, running: bool, paused: bool, queue: QueueStats | None) -> WorkerStatus:
        with self.lock:
            return WorkerStatus(
                running=running,
                paused=paused,
                concurrency=self.concurrency,
                processed=self.processed,
                retried=self.retried,
                dead_lettered=self.dead_lettered,
                in_flight=self.in_flight,
                pending=self.unsettled,
                queue_pending=self.pending,
                slots=[
                    self._slot_status(index, slot, paused) for index, slot in enumerate(self.slots)
                ],
                queue=queue,
            )

    def report(self) -> WorkerReport:
        with self.lock:
            return WorkerReport(self.processed, self.retried, self.dead_lettered, self.released)


def queue_is_empty(stats: QueueStats) -> bool:
    """Nothing ready, delayed or in flight (counts a backend cannot report are taken as 0)."""
    return (stats.ready or 0) + (stats.delayed or 0) + (stats.in_flight or 0) == 0


def pending_of(stats: QueueStats) -> int:
    return (stats.ready or 0) + (stats.delayed or 0)


def identity(value: Any) -> Any:
    return value


def ack_result(value: Any) -> Any:
    """The handler's return value as its ack's result (the TypeScript worker's too): kept with
    the message where the backend can, and answered to a duplicate push. None is no result. A
    value JSON cannot carry is dropped with a warning rather than failing the ack, which would
    run the finished work again."""
    if value is None:
        return None
    try:
        json.dumps(value)
    except (TypeError, ValueError) as error:
        logging.getLogger("sluice_client.worker").warning(
            "the handler's return value is not JSON, so it is not kept: %s", error
        )
        return None
    return value


def record_acks(
    counters: Counters,
    batch: list[tuple[int, Task]],
    acked: list[bool] | BaseException,
) -> None:
    """Counts the answer to one coalesced ack: `ack_many`'s per-task results, or why the
    request failed. A task not acked comes back once its lease runs out."""
    log = logging.getLogger("sluice_client.worker")
    if not isinstance(acked, BaseException) and len(acked) != len(batch):
        acked = ValueError(f"ack_many answered {len(acked)} results for {len(batch)}")
    if isinstance(acked, BaseException):
        for index, task in batch:
            log.warning("ack of %s failed (it will come back): %s", task.task_id, acked)
            counters.finished(index, "lost")
        return
    for (index, task), done in zip(batch, acked, strict=True):
        if done:
            counters.finished(index, "processed")
        else:
            log.warning("ack of %s failed (its lease was lost; it comes back)", task.task_id)
            counters.finished(index, "lost")
