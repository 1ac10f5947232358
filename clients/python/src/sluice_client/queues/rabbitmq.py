"""`RabbitMQQueue`: the queue interface over RabbitMQ with pika (blocking).

The topology (main queue, delayed retry queues with per-message TTL that dead-letter back
through the default exchange, dead-letter queue) is described in `_rabbit_plan`. Publishes wait
for the broker's confirm, and a failed task is acked only after its retry or dead letter is
confirmed, so a crash in between delivers it twice rather than never.

pika's connections are not thread-safe: one lock serializes every use of the channel, and
waits poll outside it. A lost connection is opened again on the next call; receipts of the old
one raise `LeaseLost` (the broker has put those messages back).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import pika
import pika.exceptions

from ..errors import LeaseLost
from . import _rabbit_plan as plan
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
    missing_queue,
    refuse_next_steps,
)

PERSISTENT = 2


class RabbitMQQueue:
    """One RabbitMQ queue (see the module doc). Thread-safe.

    `url` defaults to `RABBITMQ_URL`, else amqp://guest:guest@127.0.0.1:5672/%2F.
    `consumer_timeout` (seconds) is the broker's `consumer_timeout`: longer leases are refused,
    since the broker takes an unacked message back after it.
    """

    def __init__(
        self,
        name: str,
        *,
        url: str | None = None,
        options: QueueOptions | None = None,
        consumer_timeout: float = plan.CONSUMER_TIMEOUT_S,
        create: bool = False,
    ) -> None:
        import os

        self.options = options or QueueOptions()
        self.create = create
        """Declare the queue and its dead-letter queue when missing (else `queue_not_found`)."""
        plan.check_options(self.options, consumer_timeout)
        self._name = name
        self.url = url or os.environ.get("RABBITMQ_URL") or plan.DEFAULT_URL
        """The broker."""
        self.consumer_timeout = consumer_timeout
        self._lock = threading.RLock()
        self._connection: pika.BlockingConnection | None = None
        self._channel: Any = None
        self._generation = 0
        self._held: dict[str, tuple[Task, float | None]] = {}
        self._declared = False

    @property
    def name(self) -> str:
        return self._name

    @property
    def backend(self) -> BackendName:
        return "rabbitmq"

    @property
    def capabilities(self) -> Capabilities:
        return plan.CAPABILITIES

    def now(self) -> float:
        return time.time()

    def ensure(self) -> None:
        with self._lock:
            channel = self._open()
            channel.queue_declare(queue=self._name, durable=True)
            channel.queue_declare(queue=plan.dead_letter_queue(self._name), durable=True)
            self._declared = True

    def close(self) -> None:
        with self._lock:
            if self._connection is not None and self._connection.is_open:
                self._connection.close()
            self._connection = None
            self._channel = None
            self._held.clear()

    def _open(self) -> Any:
        if self._channel is not None and self._channel.is_open:
            return self._channel
        if self._connection is None or not self._connection.is_open:
            self._connection = pika.BlockingConnection(pika.URLParameters(self.url))
        channel = self._connection.channel()
        channel.confirm_delivery()
        self._channel = channel
        # Deliveries of an earlier channel went back to the queue with it.
        self._generation += 1
        self._held.clear()
        self._declared = False
        return channel

    def open(self) -> None:
        with self._lock:
            channel = self._open()
            if self._declared:
                return
            if self.create:
                self.ensure()
                return
            # A passive declare of a missing queue closes the channel with 404.
            try:
                channel.queue_declare(queue=self._name, passive=True)
                channel.queue_declare(queue=plan.dead_letter_queue(self._name), passive=True)
            except pika.exceptions.ChannelClosedByBroker as error:
                self._channel = None
                if error.reply_code == 404:
                    raise missing_queue(self._name) from error
                raise
            self._declared = True

    def _ready(self) -> Any:
        channel = self._open()
        if not self._declared:
            self.open()
            channel = self._channel
        return channel

    def _publish(self, routing_key: str, envelope_json: str, expiration_ms: int | None) -> None:
        channel = self._ready()
        properties = pika.BasicProperties(
            delivery_mode=PERSISTENT,
            content_type="application/json",
            expiration=str(expiration_ms) if expiration_ms is not None else None,
        )
        channel.basic_publish(
            exchange="",
            routing_key=routing_key,
            body=envelope_json.encode(),
            properties=properties,
            mandatory=True,
        )

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
        return self.push_many([PushItem(payload, id, key, delay, priority, max_attempts)])[0]

    def push_many(self, items: Sequence[PushItem]) -> list[Enqueued]:
        envelopes = [plan.envelope_for_push(item) for item in items]
        with self._lock:
            for envelope in envelopes:
                self._publish(self._name, envelope.to_json(), None)
        # AMQP does not say where a message is in its queue.
        return [Enqueued(envelope.task_id, created=True, position=None) for envelope in envelopes]

    # Consuming.

    def pop(self, *, visibility_timeout: float | None = None, wait: float = 0.0) -> Task | None:
        tasks = self.receive(1, visibility_timeout=visibility_timeout, wait=wait)
        return tasks[0] if tasks else None

    def receive(
        self, max: int = 1, *, visibility_timeout: float | None = None, wait: float = 0.0
    ) -> list[Task]:
        plan.check_lease(visibility_timeout, self.consumer_timeout)
        lease = visibility_timeout or self.options.visibility_timeout
        deadline = time.monotonic() + (wait if wait > 0 else 0.0)
        while True:
            with self._lock:
                tasks = self._get(max, lease)
                if not tasks and self._connection is not None:
                    # Heartbeats and confirms are only serviced while pika is called.
                    self._connection.process_data_events(0)
            if tasks or time.monotonic() >= deadline:
                return tasks
            time.sleep(min(plan.POLL_S, abs(deadline - time.monotonic())))

    def _get(self, max: int, lease: float | None) -> list[Task]:
        channel = self._ready()
        self._expire()
        tasks: list[Task] = []
        while len(tasks) < max:
            method, _, body = channel.basic_get(queue=self._name, auto_ack=False)
            if method is None:
                break
            receipt = f"{self._generation}.{method.delivery_tag}"
            task = plan.delivered(body, method.redelivered, receipt, lease, self.options)
            self._held[receipt] = (task, plan.lease_deadline(lease))
            tasks.append(task)
        return tasks

    def _expire(self) -> None:
        """Gives back every delivery whose lease ran out, as a failed attempt."""
        for task, deadline in list(self._held.values()):
            if plan.expired(deadline):
                self._fail(task, plan.LEASE_EXPIRED, 0.0, False)

    def _settle(self, task: Task) -> int:
        """The delivery tag of a receipt this channel still holds (else `LeaseLost`)."""
        if task.receipt not in self._held:
            raise LeaseLost(
                f"task {task.task_id}: not held by this channel (acked already, or its channel "
                "closed and the broker took the message back)"
            )
        return int(task.receipt.split(".", 1)[1])

    def ack(self, task: Task, result: Any = None) -> None:
        with self._lock:
            tag = self._settle(task)
            self._channel.basic_ack(delivery_tag=tag)
            del self._held[task.receipt]

    def ack_then(self, task: Task, then: Sequence[NextStep], result: Any = None) -> list[Enqueued]:
        refuse_next_steps("rabbitmq", then)
        self.ack(task, result)
        return []

    def ack_many(self, tasks: Sequence[Task]) -> list[bool]:
        return ack_each(self, tasks)

    def nack(
        self, task: Task, error: str = "", *, delay: float | None = None, permanent: bool = False
    ) -> NackOutcome:
        with self._lock:
            return self._fail(task, error, delay, permanent)

    def _fail(self, task: Task, error: str, delay: float | None, permanent: bool) -> NackOutcome:
        step = plan.after_failure(self._name, task, error, delay, permanent, self.options)
        tag = self._settle(task)
        if step.expiration_ms is not None:
            self._channel.queue_declare(
                queue=step.routing_key,
                durable=True,
                arguments=plan.retry_queue_arguments(self._name, step.expiration_ms),
            )
        self._publish(step.routing_key, step.envelope.to_json(), step.expiration_ms)
        self._channel.basic_ack(delivery_tag=tag)
        del self._held[task.receipt]
        return "dead_lettered" if step.dead else "retried"

    def release(self, task: Task, *, unstarted: bool = False) -> None:
        with self._lock:
            tag = self._settle(task)
            self._channel.basic_nack(delivery_tag=tag, requeue=True)
            del self._held[task.receipt]

    def extend_visibility(self, task: Task, visibility_timeout: float) -> None:
        raise plan.unsupported(
            "extend a lease", "AMQP has no per-message lease: a delivery is out until acked"
        )

    # Operating.

    def stats(self) -> QueueStats:
        with self._lock:
            channel = self._ready()
            self._expire()
            main = channel.queue_declare(queue=self._name, passive=True)
            dead = channel.queue_declare(queue=plan.dead_letter_queue(self._name), passive=True)
        # AMQP counts only ready messages; those out with consumers and those waiting in retry
        # queues are not reported.
        return QueueStats(
            ready=main.method.message_count,
            delayed=None,
            in_flight=None,
            dead_lettered=dead.method.message_count,
            paused=None,
        )

    def pause(self) -> None:
        raise plan.unsupported("pause", "RabbitMQ has no pause of a queue")

    def resume(self) -> None:
        raise plan.unsupported("resume", "RabbitMQ has no pause of a queue")

    def cancel(
        self, *, message_id: str | None = None, id: str | None = None, reason: str | None = None
    ) -> CancelResult:
        raise plan.unsupported("cancel", "RabbitMQ cannot remove one message from a queue")

    def drain(self, timeout: float) -> bool:
        raise plan.unsupported(
            "drain",
            "RabbitMQ does not count messages delivered to other consumers and not yet acked",
        )

    def dead_letters(self, limit: int = 100) -> list[DeadLetter]:
        """Reads the dead-letter queue with `basic.get` and puts every entry back (requeued to
        where it was)."""
        letters: list[DeadLetter] = []
        with self._lock:
            channel = self._ready()
            tags: list[int] = []
            try:
                while len(letters) < limit:
                    method, _, body = channel.basic_get(
                        queue=plan.dead_letter_queue(self._name), auto_ack=False
                    )
                    if method is None:
                        break
                    tags.append(method.delivery_tag)
                    letters.append(plan.dead_letter_of(body))
            finally:
                for tag in tags:
                    channel.basic_nack(delivery_tag=tag, requeue=True)
        return sorted(letters, key=lambda letter: letter.failed_at or 0.0, reverse=True)

    def delete(self) -> None:
        """Deletes the queue and its dead-letter queue with their messages (retry queues delete
        themselves once idle)."""
        with self._lock:
            channel = self._open()
            channel.queue_delete(queue=self._name)
            channel.queue_delete(queue=plan.dead_letter_queue(self._name))
            self._declared = False
