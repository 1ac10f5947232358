"""The RabbitMQ topology and rules both RabbitMQ backends share (pika and aio-pika). No IO.

For a queue `<name>`:
- `<name>`: the main queue (durable, classic), published to through the default exchange;
- `<name>.retry.<ms>`: one durable retry queue per retry delay. A retried message is published
  there with a per-message TTL (`expiration`) of that delay; when it expires the queue
  dead-letters it through its dead-letter exchange (the default exchange, routing key `<name>`)
  back into the main queue. Every message of a retry queue has the same TTL, so the one at the
  head always expires first (RabbitMQ expires messages only at a queue's head). A retry queue
  deletes itself (`x-expires`) a minute after its last use, when it is empty by then;
- `<name>.dlq`: the dead-letter queue.

Leases: AMQP has none (a delivery is out until acked, or until its channel closes). A receive
with a `visibility_timeout` gets a lease kept by the backend object itself: a delivery not
settled by then is given back on the object's next receive (published again as a failed attempt,
`visibility timeout expired`, then acked), as sluice's reaper would; without one the delivery is
held until acked. Leases cannot be extended, and none can outlast the broker's consumer timeout.

RabbitMQ does not deduplicate: a queue asked for with `dedup` is refused, and so is a `push`
with an idempotency id (never silently ignored).

The body is a `TaskEnvelope`, which counts the attempts (AMQP does not, for classic queues): a
delivery is the envelope's attempt + 1, and a message the broker redelivered after a lost
channel counts one more.
"""

from __future__ import annotations

import math
import time
import uuid
from dataclasses import dataclass, replace
from typing import Any

from ..envelope import TaskEnvelope
from ..errors import Unsupported
from .base import Capabilities, DeadLetter, PushItem, QueueOptions, Task, should_dead_letter

DEFAULT_URL = "amqp://guest:guest@127.0.0.1:5672/%2F"
LEASE_EXPIRED = "visibility timeout expired"
CONSUMER_TIMEOUT_S = 1800.0
"""RabbitMQ's default `consumer_timeout`: how long an unacked delivery may stay out."""
RETRY_QUEUE_IDLE_MS = 60_000
"""A retry queue unused for this long after its delay is deleted by the broker."""
POLL_S = 0.02
"""How often a waiting receive looks again (AMQP's `basic.get` does not wait)."""

CAPABILITIES = Capabilities(
    extend=False,
    pause=False,
    cancel=False,
    per_key_order=False,
    dedup=False,
    delays=False,
    in_flight_stats=False,
    ordered=True,
    drain=False,
    priority=False,
    chaining=False,
)


def check_options(options: QueueOptions, consumer_timeout: float) -> None:
    """Refuses what a classic queue cannot keep."""
    if options.per_key:
        raise Unsupported(
            "rabbitmq", "order per key", "a classic RabbitMQ queue has no ordering key"
        )
    if options.dedup:
        raise Unsupported("rabbitmq", "deduplicate", "RabbitMQ does not deduplicate")
    if options.visibility_timeout is not None:
        check_lease(options.visibility_timeout, consumer_timeout)


def check_lease(visibility_timeout: float | None, consumer_timeout: float) -> None:
    """AMQP has no per-message lease: a delivery is out until it is acked or its channel
    closes, which the broker does after `consumer_timeout`. The backend keeps shorter leases
    itself (an expired one is given back on its next call); a longer one cannot be kept."""
    if visibility_timeout is not None and visibility_timeout > consumer_timeout:
        raise Unsupported(
            "rabbitmq",
            f"lease a message for {visibility_timeout} s",
            "the broker takes an unacked message back after its consumer timeout "
            f"({consumer_timeout} s)",
        )


def unsupported(operation: str, reason: str) -> Unsupported:
    return Unsupported("rabbitmq", operation, reason)


def envelope_for_push(item: PushItem) -> TaskEnvelope:
    if item.delay:
        raise unsupported(
            "push with a delay", "delays need a TTL queue per delay; supported for retries only"
        )
    if item.priority:
        raise unsupported("push with a priority", "the queue is not a priority queue")
    if item.id is not None:
        raise unsupported(
            "deduplicate",
            "RabbitMQ does not deduplicate, so an idempotency id would be ignored:"
            " push without `id`",
        )
    return TaskEnvelope(
        task_id=str(uuid.uuid4()),
        payload=item.payload,
        max_attempts=item.max_attempts,
        enqueued_at=time.time(),
        key=item.key,
        idempotency_id=item.id,
    )


def delivered(
    body: bytes, redelivered: bool, receipt: str, lease: float | None, options: QueueOptions
) -> Task:
    """The task of a message `basic.get` handed out."""
    envelope = TaskEnvelope.wrap_body(str(uuid.uuid4()), body)
    attempt = envelope.attempt + 1 + (1 if redelivered else 0)
    envelope = replace(
        envelope,
        attempt=attempt,
        max_attempts=envelope.max_attempts
        if envelope.max_attempts is not None
        else options.max_attempts,
        visibility_timeout=lease,
    )
    return Task(envelope=envelope, receipt=receipt, lease_expires_at=None)


@dataclass(frozen=True)
class Republish:
    """Where a failed task goes: the queue, the envelope it carries, its TTL (retries)."""

    routing_key: str
    envelope: TaskEnvelope
    expiration_ms: int | None
    dead: bool


def lease_deadline(lease: float | None) -> float | None:
    """When a lease of `lease` seconds taken now runs out (monotonic time), if it does."""
    return time.monotonic() + lease if lease is not None else None


def expired(deadline: float | None) -> bool:
    return deadline is not None and deadline <= time.monotonic()


def after_failure(
    name: str, task: Task, error: str, delay: float | None, permanent: bool, options: QueueOptions
) -> Republish:
    envelope = task.envelope
    now = time.time()
    max_attempts = (
        envelope.max_attempts if envelope.max_attempts is not None else options.max_attempts
    )
    if should_dead_letter(task.attempt, max_attempts, permanent):
        dead = replace(envelope, last_error=error, failed_at=now)
        return Republish(dead_letter_queue(name), dead, None, True)
    if delay is None:
        delay = options.backoff.delay(task.attempt)
    delay_ms = max(0, math.ceil(delay * 1000))
    retry = replace(envelope, last_error=error, next_attempt_ts=now + delay if delay_ms else None)
    if delay_ms == 0:
        return Republish(name, retry, None, False)
    return Republish(retry_queue(name, delay_ms), retry, delay_ms, False)


def dead_letter_queue(name: str) -> str:
    return f"{name}.dlq"


def retry_queue(name: str, delay_ms: int) -> str:
    return f"{name}.retry.{delay_ms}"


def retry_queue_arguments(name: str, delay_ms: int) -> dict[str, Any]:
    return {
        "x-dead-letter-exchange": "",
        "x-dead-letter-routing-key": name,
        "x-expires": delay_ms + RETRY_QUEUE_IDLE_MS,
    }


def dead_letter_of(body: bytes) -> DeadLetter:
    """A dead letter as the dead-letter queue holds it (an envelope with its last error)."""
    envelope = TaskEnvelope.wrap_body("", body)
    return DeadLetter(
        task_id=envelope.task_id,
        payload=envelope.payload,
        error=envelope.last_error,
        attempts=envelope.attempt,
        failed_at=envelope.failed_at,
        idempotency_id=envelope.idempotency_id,
        key=envelope.key,
    )
