"""What `SluiceQueue` and `AsyncSluiceQueue` share: options to a `QueueSpec`, server answers to
tasks, stats and dead letters, and server errors to the interface's errors. No IO."""

from __future__ import annotations

import base64
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .. import models as m
from .._codec import UNSET
from ..envelope import TaskEnvelope
from ..errors import LeaseLost, SluiceError
from ..specs import MessageIn, NextStepIn, QueueSpec
from .base import (
    CancelOutcome,
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
)

MAX_ATTEMPTS_HEADER = "sluice-max-attempts"
"""A task's own attempt limit rides in this message header (the queue's applies otherwise)."""
RECEIVE_MAX = 100
"""Messages per receive request (the server's limit)."""
WAIT_MAX_S = 20.0
"""Longest long poll of one receive request (the server's limit)."""
ACK_RECEIPTS_MAX = 1000
"""Receipts per ack request (the server's limit)."""
DRAIN_MAX_S = 900.0
"""Longest wait of one drain request (the server's limit)."""

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
    chaining=True,
)


def queue_spec(options: QueueOptions | None) -> QueueSpec:
    """The settings `ensure` applies: only those the options name, so an existing queue keeps
    the rest (its default order already is enqueue order)."""
    if options is None:
        return QueueSpec()
    return QueueSpec(
        max_attempts=options.max_attempts,
        ordering="per_key" if options.per_key else UNSET,
        visibility_timeout_ms=ms(options.visibility_timeout)
        if options.visibility_timeout
        else UNSET,
    )


def message_in(item: PushItem) -> MessageIn:
    headers = (
        {MAX_ATTEMPTS_HEADER: str(item.max_attempts)} if item.max_attempts is not None else None
    )
    return MessageIn(
        body=item.payload,
        id=item.id if item.id is not None else UNSET,
        key=item.key if item.key is not None else UNSET,
        priority=item.priority if item.priority else UNSET,
        delay_ms=ms(item.delay) if item.delay else UNSET,
        headers=headers if headers else UNSET,
    )


def result_in(result: Any) -> Any:
    """An ack's result as the ack sends it: None is no result."""
    return UNSET if result is None else result


def next_step_in(step: NextStep) -> NextStepIn:
    """A next step as the ack sends it: the message of a push, and its queue."""
    message = message_in(
        PushItem(step.payload, step.id, step.key, step.delay, step.priority, step.max_attempts)
    )
    return NextStepIn(
        queue=step.queue,
        body=message.body,
        id=message.id,
        key=message.key,
        priority=message.priority,
        delay_ms=message.delay_ms,
        headers=message.headers,
    )


def enqueued(answer: m.EnqueueOut) -> Enqueued:
    return Enqueued(
        message_id=answer.message_id,
        created=answer.created,
        position=answer.position if answer.created else None,
        state=answer.state,
        result=answer.result,
    )


def task(message: m.ReceivedMessage, queue_max_attempts: int | None, lease_s: float | None) -> Task:
    own = message.headers.get(MAX_ATTEMPTS_HEADER)
    payload: Any = message.body
    if message.body_base64 is not None:
        payload = base64.b64decode(message.body_base64)
    lease_expires_at = message.lease_expires_at.timestamp()
    envelope = TaskEnvelope(
        task_id=message.message_id,
        payload=payload,
        attempt=message.attempts,
        max_attempts=int(own) if own is not None else queue_max_attempts,
        visibility_timeout=lease_s,
        enqueued_at=message.enqueued_at.timestamp(),
        last_error=message.last_error,
        idempotency_id=message.id,
        key=message.key,
    )
    return Task(envelope=envelope, receipt=message.receipt, lease_expires_at=lease_expires_at)


def own_limit_reached(task: Task) -> bool:
    """A task pushed with its own `max_attempts` dead-letters by it, whatever the queue's."""
    own = task.envelope.max_attempts
    return own is not None and own > 0 and task.attempt >= own


def nack_outcome(answer: m.NackOut) -> NackOutcome:
    return "dead_lettered" if answer.state == "dead" else "retried"


def cancel_result(answer: m.CancelOut) -> CancelResult:
    outcomes: dict[str, CancelOutcome] = {
        "cancelled": "cancelled",
        "not_found": "not_found",
        "already_processing": "already_processing",
        "already_completed": "already_completed",
    }
    outcome = outcomes.get(answer.outcome)
    if outcome is None:
        raise ValueError(f"unknown cancel outcome from the server: {answer.outcome!r}")
    return CancelResult(outcome, answer.state)


def stats(answer: m.QueueStatsOut) -> QueueStats:
    return QueueStats(
        ready=answer.ready,
        delayed=answer.delayed,
        in_flight=answer.in_flight,
        dead_lettered=answer.dead_lettered,
        paused=answer.paused,
        processed=answer.counters.acked,
    )


def dead_letter(entry: m.DeadLetterEntryOut) -> DeadLetter:
    payload: Any = entry.body
    if entry.body_base64 is not None:
        payload = base64.b64decode(entry.body_base64)
    return DeadLetter(
        task_id=entry.message_id,
        payload=payload,
        error=entry.last_error,
        attempts=entry.attempts,
        failed_at=entry.last_seen_at.timestamp(),
        idempotency_id=entry.id,
        key=entry.key,
    )


def acked_of(error: SluiceError, count: int) -> list[bool]:
    """Per receipt, whether a multi-receipt ack the server refused as `stale_receipt` acked it
    (the server acks the current receipts all the same and says which in `details.results`).
    Any other error is raised again."""
    results = error.details.get("results") if isinstance(error.details, dict) else None
    if error.code != "stale_receipt" or not isinstance(results, list) or len(results) != count:
        raise error
    return [isinstance(result, dict) and result.get("acked") is True for result in results]


@contextmanager
def lease_errors(task: Task) -> Iterator[None]:
    """`stale_receipt` is `LeaseLost`, as on every backend."""
    try:
        yield
    except SluiceError as error:
        if error.code == "stale_receipt":
            raise LeaseLost(f"task {task.task_id}: {error.message}") from error
        raise


def ms(seconds: float) -> int:
    """Seconds as whole milliseconds, rounded up (a lease or delay is never cut short)."""
    return max(0, math.ceil(seconds * 1000))
