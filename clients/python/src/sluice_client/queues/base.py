"""The queue interface every backend implements, in sluice's terms.

`TaskQueue` (blocking) and `AsyncTaskQueue` (asyncio) are what the worker and the conformance
runner use; they mirror the Rust SDK's `Backend` trait (crates/sluice-sdk/src/backend.rs), with
the names the issue asks for: `push` is an enqueue, `pop` a receive of one message under a lease,
`extend_visibility` an extend. An operation a backend cannot do raises `Unsupported`, and its
`capabilities` say so beforehand: nothing is silently skipped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from ..envelope import TaskEnvelope
from ..errors import LeaseLost, SluiceError, Unsupported
from ..retry import Backoff

NackOutcome = Literal["retried", "dead_lettered"]
"""What a nack did: the message will be delivered again, or it went to the dead-letter queue."""

CancelOutcome = Literal["cancelled", "not_found", "already_processing", "already_completed"]
"""What a cancel found."""

BackendName = Literal["sluice", "memory", "sqs", "rabbitmq"]


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do. Each False means the matching operation or option raises
    `Unsupported`."""

    extend: bool
    """`extend_visibility`, and leases of any length (the worker's heartbeat needs it)."""
    pause: bool
    """`pause` / `resume` of deliveries."""
    cancel: bool
    """`cancel` of a message not yet delivered."""
    per_key_order: bool
    """`QueueOptions(per_key=True)`: one message of a key at a time, in order."""
    dedup: bool
    """`push(..., id=...)` deduplicates within a window. Where False, `QueueOptions(dedup=True)`
    and a push with an id are refused (`Unsupported`): an id is never silently ignored."""
    delays: bool
    """`push(..., delay=...)`."""
    in_flight_stats: bool
    """`stats()` counts leased messages (`in_flight`)."""
    ordered: bool
    """`QueueOptions(ordered=True)`: messages come out in the order they went in."""
    drain: bool
    """`drain`: the backend can tell when nothing is ready, delayed or in flight."""
    priority: bool
    """`push(..., priority=...)` other than 0."""
    chaining: bool
    """`ack_then`: an ack enqueues next steps in its own commit (and so the worker's
    `Context.then`). Where False, any next step is refused, never enqueued apart from the ack."""


@dataclass(frozen=True)
class QueueOptions:
    """How a queue is created (by `ensure`, or lazily by the first operation)."""

    max_attempts: int = 5
    """Deliveries before a failure dead-letters (0: retry forever)."""
    per_key: bool = False
    """Messages with the same key are delivered one at a time, in order (sluice `per_key`;
    SQS: a FIFO queue with the key as `MessageGroupId`)."""
    ordered: bool = False
    """Require enqueue order (sluice, memory and RabbitMQ keep it; standard SQS cannot)."""
    dedup: bool = False
    """Require deduplication by idempotency id (sluice and memory always; SQS: a FIFO queue)."""
    visibility_timeout: float | None = None
    """The lease of a receive, in seconds (None: the backend's default, 30 s where leases
    exist)."""
    backoff: Backoff = field(default_factory=Backoff)
    """The delay of a retry when `nack` is given none (sluice applies its own queue backoff)."""


@dataclass(frozen=True)
class PushItem:
    """One task for `push_many`, with its options (as the keyword arguments of `push`)."""

    payload: Any
    id: str | None = None
    key: str | None = None
    delay: float | None = None
    priority: int = 0
    max_attempts: int | None = None


@dataclass(frozen=True)
class NextStep:
    """A task an ack enqueues in its own commit (`ack_then`), and the queue it goes to: the
    options are `push`'s."""

    queue: str
    """The name of the queue it goes to, on the same server."""
    payload: Any
    id: str | None = None
    key: str | None = None
    delay: float | None = None
    priority: int = 0
    max_attempts: int | None = None


@dataclass(frozen=True)
class Enqueued:
    """What a push did."""

    message_id: str
    """The message (the first one, for a duplicate idempotency id). The worker's `event_id`."""
    created: bool
    """False when the idempotency id was seen within the dedup window: nothing was stored."""
    position: int | None
    """Messages the queue held when this one was stored (None where the broker cannot say)."""
    state: str | None = None
    """For a duplicate: where the first message is now (`ready`, `in_flight`, `acked`, ...),
    where the backend can say (sluice); the TypeScript SDK's `state`."""
    result: Any = None
    """For a duplicate whose first message was acked with a result: that result (sluice)."""

    @property
    def event_id(self) -> str:
        """The worker's name for `message_id`."""
        return self.message_id


@dataclass(frozen=True)
class Task:
    """A leased message: its envelope plus the receipt that holds the lease."""

    envelope: TaskEnvelope
    """The task and its bookkeeping (attempt, last error, ...)."""
    receipt: str
    """The lease handle for `ack`, `nack` and `extend_visibility`."""
    lease_expires_at: float | None = None
    """When the lease runs out (seconds since the epoch; None where the broker has no lease)."""

    @property
    def task_id(self) -> str:
        """The message's id."""
        return self.envelope.task_id

    @property
    def payload(self) -> Any:
        """The task itself."""
        return self.envelope.payload

    @property
    def attempt(self) -> int:
        """This delivery's number, from 1."""
        return self.envelope.attempt


@dataclass(frozen=True)
class QueueStats:
    """A queue's numbers; None where the backend cannot report one."""

    ready: int | None
    """Visible, waiting for a consumer."""
    delayed: int | None
    """Waiting for a delay or backoff."""
    in_flight: int | None
    """Leased."""
    dead_lettered: int | None
    """In the dead-letter queue."""
    paused: bool | None
    """Deliveries paused."""
    processed: int | None = None
    """Acked since the backend started counting."""


@dataclass(frozen=True)
class CancelResult:
    """What `cancel` found."""

    outcome: CancelOutcome
    state: str | None = None
    """The message's state now (`cancelled`, `in_flight`, `acked`, `dead`, ...), when found."""


@dataclass(frozen=True)
class DeadLetter:
    """One message in the dead-letter queue."""

    task_id: str
    payload: Any
    error: str | None
    """The last attempt's error."""
    attempts: int
    """Deliveries made before it was dead-lettered."""
    failed_at: float | None = None
    """When it was dead-lettered (seconds since the epoch)."""
    idempotency_id: str | None = None
    key: str | None = None


@runtime_checkable
class TaskQueue(Protocol):
    """One queue on some backend, blocking. Every method may raise `Unsupported`; a receipt
    that no longer holds its message raises `LeaseLost`."""

    @property
    def name(self) -> str:
        """The queue's name on the backend."""
        ...

    @property
    def backend(self) -> BackendName:
        """Which backend this is."""
        ...

    @property
    def capabilities(self) -> Capabilities:
        """What it can do."""
        ...

    def ensure(self) -> None:
        """Creates the queue and its dead-letter queue, or (sluice) updates the existing queue's
        settings to the options: the explicit call that changes a queue."""
        ...

    def open(self) -> None:
        """What every operation does first, once: checks that the queue exists, or with
        `create=True` creates it when missing (an existing queue's settings are left alone).
        Raises `SluiceError` `queue_not_found` for a missing queue without `create`."""
        ...

    def delete(self) -> None:
        """Deletes the queue and its dead-letter queue with their messages (a queue already
        gone is no error): the same rule on every backend and in the TypeScript SDK."""
        ...

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
        """Enqueues one task: `id` an idempotency id, `key` an ordering key, `delay` seconds of
        invisibility, `priority` higher first, `max_attempts` this task's own limit."""
        ...

    def push_many(self, items: Sequence[PushItem]) -> list[Enqueued]:
        """Enqueues many tasks; one result each, in order."""
        ...

    def pop(self, *, visibility_timeout: float | None = None, wait: float = 0.0) -> Task | None:
        """Leases one task for `visibility_timeout` seconds (default: the queue's), waiting up
        to `wait` seconds for one; None when none came."""
        ...

    def receive(
        self, max: int = 1, *, visibility_timeout: float | None = None, wait: float = 0.0
    ) -> list[Task]:
        """Leases up to `max` tasks, waiting up to `wait` seconds for the first."""
        ...

    def ack(self, task: Task, result: Any = None) -> None:
        """The task is done. `result` (any JSON; None: no result) is kept with it where the
        backend can (sluice, memory) and answered to a later push with the same id; SQS and
        RabbitMQ have nowhere to keep it and drop it. The worker passes the handler's return
        value."""
        ...

    def ack_many(self, tasks: Sequence[Task]) -> list[bool]:
        """Acks every task, in as few requests as the backend allows; answers per task, in
        order, whether it was acked (False: its lease was lost, as `ack` raising `LeaseLost`).
        Any other failure raises; some may have been acked before it, as with `ack` calls."""
        ...

    def ack_then(self, task: Task, then: Sequence[NextStep], result: Any = None) -> list[Enqueued]:
        """The task is done (with `result`, as `ack`), and `then` is enqueued in the same
        commit as the ack: both happen or neither. One result per next step, in order. Without
        `capabilities.chaining` any next step raises `Unsupported` before anything is done
        (with none, it acks)."""
        ...

    def nack(
        self, task: Task, error: str = "", *, delay: float | None = None, permanent: bool = False
    ) -> NackOutcome:
        """The attempt failed: retry after `delay` seconds (default: the queue's backoff), or
        dead-letter it when its attempts are used up or `permanent`."""
        ...

    def extend_visibility(self, task: Task, visibility_timeout: float) -> None:
        """The lease now ends `visibility_timeout` seconds from now (sluice's extend)."""
        ...

    def release(self, task: Task, *, unstarted: bool = False) -> None:
        """Gives the task back without a failure (the worker does this with what still runs
        when its shutdown grace ends): ready again at once, with no error and no backoff, and
        never dead-lettered by the release. The delivery still counts in its attempts (sluice:
        an extend to 0; SQS: `ChangeMessageVisibility` to 0; RabbitMQ: a requeue), unless
        `unstarted`: it was never handed to a handler (the worker paused or stopped before),
        and the backend does not count such a delivery where it can (sluice, memory, and
        RabbitMQ, which counts attempts itself; SQS counts every receive)."""
        ...

    def stats(self) -> QueueStats:
        """The queue's numbers."""
        ...

    def pause(self) -> None:
        """Stops deliveries; pushes are still stored."""
        ...

    def resume(self) -> None:
        """Starts deliveries again."""
        ...

    def cancel(
        self, *, message_id: str | None = None, id: str | None = None, reason: str | None = None
    ) -> CancelResult:
        """Removes a task not yet delivered, by message id or idempotency id."""
        ...

    def drain(self, timeout: float) -> bool:
        """Waits up to `timeout` seconds until nothing is ready, delayed or in flight; True when
        the queue emptied."""
        ...

    def dead_letters(self, limit: int = 100) -> list[DeadLetter]:
        """The queue's dead letters, newest first, at most `limit`."""
        ...

    def now(self) -> float:
        """Now by the backend's clock (seconds since the epoch)."""
        ...

    def close(self) -> None:
        """Releases connections."""
        ...


@runtime_checkable
class AsyncTaskQueue(Protocol):
    """The asyncio twin of `TaskQueue`: the same methods, as coroutines."""

    @property
    def name(self) -> str: ...

    @property
    def backend(self) -> BackendName: ...

    @property
    def capabilities(self) -> Capabilities: ...

    async def ensure(self) -> None: ...

    async def open(self) -> None: ...

    async def delete(self) -> None: ...

    async def push(
        self,
        payload: Any,
        *,
        id: str | None = None,
        key: str | None = None,
        delay: float | None = None,
        priority: int = 0,
        max_attempts: int | None = None,
    ) -> Enqueued: ...

    async def push_many(self, items: Sequence[PushItem]) -> list[Enqueued]: ...

    async def pop(
        self, *, visibility_timeout: float | None = None, wait: float = 0.0
    ) -> Task | None: ...

    async def receive(
        self, max: int = 1, *, visibility_timeout: float | None = None, wait: float = 0.0
    ) -> list[Task]: ...

    async def ack(self, task: Task, result: Any = None) -> None: ...

    async def ack_many(self, tasks: Sequence[Task]) -> list[bool]: ...

    async def ack_then(
        self, task: Task, then: Sequence[NextStep], result: Any = None
    ) -> list[Enqueued]: ...

    async def nack(
        self, task: Task, error: str = "", *, delay: float | None = None, permanent: bool = False
    ) -> NackOutcome: ...

    async def extend_visibility(self, task: Task, visibility_timeout: float) -> None: ...

    async def release(self, task: Task, *, unstarted: bool = False) -> None: ...

    async def stats(self) -> QueueStats: ...

    async def pause(self) -> None: ...

    async def resume(self) -> None: ...

    async def cancel(
        self, *, message_id: str | None = None, id: str | None = None, reason: str | None = None
    ) -> CancelResult: ...

    async def drain(self, timeout: float) -> bool: ...

    async def dead_letters(self, limit: int = 100) -> list[DeadLetter]: ...

    def now(self) -> float: ...

    async def close(self) -> None: ...


def ack_each(queue: TaskQueue, tasks: Sequence[Task]) -> list[bool]:
    """`ack_many` on a backend without a batch ack: one `ack` per task."""
    acked: list[bool] = []
    for task in tasks:
        try:
            queue.ack(task)
        except LeaseLost:
            acked.append(False)
        else:
            acked.append(True)
    return acked


async def ack_each_async(queue: AsyncTaskQueue, tasks: Sequence[Task]) -> list[bool]:
    """`ack_each` for asyncio."""
    acked: list[bool] = []
    for task in tasks:
        try:
            await queue.ack(task)
        except LeaseLost:
            acked.append(False)
        else:
            acked.append(True)
    return acked


def chaining_unsupported(backend: str) -> Unsupported:
    """What a backend without `capabilities.chaining` raises for a next step."""
    return Unsupported(
        backend, "ack with next steps", "only sluice enqueues them in the ack's own commit"
    )


def refuse_next_steps(backend: str, then: Sequence[NextStep]) -> None:
    """`ack_then` on a backend without chaining: any next step is refused before the ack, since
    enqueuing it apart from the ack could lose it (a crash in between) or store it twice (the
    task runs again)."""
    if then:
        raise chaining_unsupported(backend)


def should_dead_letter(attempt: int, max_attempts: int, permanent: bool) -> bool:
    """A failed attempt dead-letters when it is permanent or the last one allowed
    (`max_attempts` 0: never by count)."""
    return permanent or (max_attempts > 0 and attempt >= max_attempts)


def check_exactly_one(message_id: str | None, id: str | None) -> None:
    """`cancel` names a message by exactly one of its ids."""
    if (message_id is None) == (id is None):
        raise ValueError("name the message by exactly one of message_id and id")


def missing_queue(name: str) -> SluiceError:
    """The error of an operation on a queue that does not exist, opened without `create`: no
    queue appears by accident (a typo in a name is an error, not a new empty queue)."""
    return SluiceError(
        404,
        "queue_not_found",
        f"queue {name!r} does not exist: create it (sluice queue create {name}, or "
        "queue.ensure()), or pass create=True",
    )
