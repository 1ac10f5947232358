"""`AsyncRabbitMQQueue`: the queue interface over RabbitMQ with aio-pika, for asyncio.

The same topology and rules as `RabbitMQQueue` (`_rabbit_plan`): publisher confirms, a failed
task acked only once its retry or dead letter is confirmed, attempts counted in the envelope.
One channel per queue object; an `asyncio.Lock` keeps its operations in order.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import aio_pika
import aiormq.exceptions
from aio_pika.abc import AbstractChannel, AbstractIncomingMessage, AbstractRobustConnection

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
    ack_each_async,
    missing_queue,
    refuse_next_steps,
)


class AsyncRabbitMQQueue:
    """One RabbitMQ queue for asyncio; the arguments are `RabbitMQQueue`'s."""

    def __init__(
        self,
        name: str,
        *,
        url: str | None = None,
        options: QueueOptions | None = None,
        consumer_timeout: float = plan.CONSUMER_TIMEOUT_S,
        create: bool = False,
    ) -> None:
        self.options = options or QueueOptions()
        self.create = create
        """Declare the queue and its dead-letter queue when missing (else `queue_not_found`)."""
        plan.check_options(self.options, consumer_timeout)
        self._name = name
        self.url = url or os.environ.get("RABBITMQ_URL") or plan.DEFAULT_URL
        """The broker."""
        self.consumer_timeout = consumer_timeout
        self._lock = asyncio.Lock()
        self._connection: AbstractRobustConnection | None = None
        self._channel: AbstractChannel | None = None
        self._generation = 0
        self._held: dict[str, tuple[Task, AbstractIncomingMessage, float | None]] = {}
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

    async def _open(self) -> AbstractChannel:
        if self._channel is not None and not self._channel.is_closed:
            return self._channel
        if self._connection is None or self._connection.is_closed:
            self._connection = await aio_pika.connect_robust(self.url)
        self._channel = await self._connection.channel(publisher_confirms=True)
        # Deliveries of an earlier channel went back to the queue with it.
        self._generation += 1
        self._held.clear()
        self._declared = False
        return self._channel

    async def _ready(self, declare: bool = False) -> AbstractChannel:
        channel = await self._open()
        if self._declared:
            return channel
        if declare or self.create:
            await channel.declare_queue(self._name, durable=True)
            await channel.declare_queue(plan.dead_letter_queue(self._name), durable=True)
        else:
            # A passive declare of a missing queue closes the channel with 404.
            try:
                await channel.declare_queue(self._name, passive=True)
                await channel.declare_queue(plan.dead_letter_queue(self._name), passive=True)
            except aiormq.exceptions.ChannelNotFoundEntity as error:
                self._channel = None
                raise missing_queue(self._name) from error
        self._declared = True
        return channel

    async def ensure(self) -> None:
        async with self._lock:
            self._declared = False
            await self._ready(declare=True)

    async def open(self) -> None:
        async with self._lock:
            await self._ready()

    async def close(self) -> None:
        async with self._lock:
            if self._connection is not None:
                await self._connection.close()
            self._connection = None
            self._channel = None
            self._held.clear()

    async def _publish(self, routing_key: str, body: str, expiration_ms: int | None) -> None:
        channel = await self._ready()
        message = aio_pika.Message(
            body.encode(),
            delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
            content_type="application/json",
            expiration=timedelta(milliseconds=expiration_ms) if expiration_ms is not None else None,
        )
        await channel.default_exchange.publish(message, routing_key=routing_key, mandatory=True)

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
        items = [PushItem(payload, id, key, delay, priority, max_attempts)]
        return (await self.push_many(items))[0]

    async def push_many(self, items: Sequence[PushItem]) -> list[Enqueued]:
        envelopes = [plan.envelope_for_push(item) for item in items]
        async with self._lock:
            for envelope in envelopes:
                await self._publish(self._name, envelope.to_json(), None)
        return [Enqueued(envelope.task_id, created=True, position=None) for envelope in envelopes]

    async def pop(
        self, *, visibility_timeout: float | None = None, wait: float = 0.0
    ) -> Task | None:
        tasks = await self.receive(1, visibility_timeout=visibility_timeout, wait=wait)
        return tasks[0] if tasks else None

    async def receive(
        self, max: int = 1, *, visibility_timeout: float | None = None, wait: float = 0.0
    ) -> list[Task]:
        plan.check_lease(visibility_timeout, self.consumer_timeout)
        lease = visibility_timeout or self.options.visibility_timeout
        deadline = time.monotonic() + (wait if wait > 0 else 0.0)
        while True:
            async with self._lock:
                tasks = await self._get(max, lease)
            if tasks or time.monotonic() >= deadline:
                return tasks
            await asyncio.sleep(min(plan.POLL_S, abs(deadline - time.monotonic())))

    async def _get(self, max: int, lease: float | None) -> list[Task]:
        channel = await self._ready()
        await self._expire()
        queue = await channel.get_queue(self._name, ensure=False)
        tasks: list[Task] = []
        while len(tasks) < max:
            message = await queue.get(no_ack=False, fail=False)
            if message is None:
                break
            receipt = f"{self._generation}.{message.delivery_tag}"
            task = plan.delivered(
                message.body, message.redelivered or False, receipt, lease, self.options
            )
            self._held[receipt] = (task, message, plan.lease_deadline(lease))
            tasks.append(task)
        return tasks

    async def _expire(self) -> None:
        """Gives back every delivery whose lease ran out, as a failed attempt."""
        for task, _, deadline in list(self._held.values()):
            if plan.expired(deadline):
                await self._fail(task, plan.LEASE_EXPIRED, 0.0, False)

    def _message(self, task: Task) -> AbstractIncomingMessage:
        held = self._held.get(task.receipt)
        if held is None:
            raise LeaseLost(
                f"task {task.task_id}: not held by this channel (acked already, or its channel "
                "closed and the broker took the message back)"
            )
        return held[1]

    async def ack(self, task: Task, result: Any = None) -> None:
        async with self._lock:
            message = self._message(task)
            await message.ack()
            del self._held[task.receipt]

    async def ack_then(
        self, task: Task, then: Sequence[NextStep], result: Any = None
    ) -> list[Enqueued]:
        refuse_next_steps("rabbitmq", then)
        await self.ack(task, result)
        return []

    async def ack_many(self, tasks: Sequence[Task]) -> list[bool]:
        return await ack_each_async(self, tasks)

    async def nack(
        self, task: Task, error: str = "", *, delay: float | None = None, permanent: bool = False
    ) -> NackOutcome:
        async with self._lock:
            return await self._fail(task, error, delay, permanent)

    async def _fail(
        self, task: Task, error: str, delay: float | None, permanent: bool
    ) -> NackOutcome:
        step = plan.after_failure(self._name, task, error, delay, permanent, self.options)
        message = self._message(task)
        if step.expiration_ms is not None:
            channel = await self._ready()
            await channel.declare_queue(
                step.routing_key,
                durable=True,
                arguments=plan.retry_queue_arguments(self._name, step.expiration_ms),
            )
        await self._publish(step.routing_key, step.envelope.to_json(), step.expiration_ms)
        await message.ack()
        del self._held[task.receipt]
        return "dead_lettered" if step.dead else "retried"

    async def release(self, task: Task, *, unstarted: bool = False) -> None:
        async with self._lock:
            message = self._message(task)
            await message.nack(requeue=True)
            del self._held[task.receipt]

    async def extend_visibility(self, task: Task, visibility_timeout: float) -> None:
        raise plan.unsupported(
            "extend a lease", "AMQP has no per-message lease: a delivery is out until acked"
        )

    async def stats(self) -> QueueStats:
        async with self._lock:
            channel = await self._ready()
            await self._expire()
            main = await _count(channel, self._name)
            dead = await _count(channel, plan.dead_letter_queue(self._name))
        return QueueStats(ready=main, delayed=None, in_flight=None, dead_lettered=dead, paused=None)

    async def pause(self) -> None:
        raise plan.unsupported("pause", "RabbitMQ has no pause of a queue")

    async def resume(self) -> None:
        raise plan.unsupported("resume", "RabbitMQ has no pause of a queue")

    async def cancel(
        self, *, message_id: str | None = None, id: str | None = None, reason: str | None = None
    ) -> CancelResult:
        raise plan.unsupported("cancel", "RabbitMQ cannot remove one message from a queue")

    async def drain(self, timeout: float) -> bool:
        raise plan.unsupported(
            "drain",
            "RabbitMQ does not count messages delivered to other consumers and not yet acked",
        )

    async def dead_letters(self, limit: int = 100) -> list[DeadLetter]:
        letters: list[DeadLetter] = []
        async with self._lock:
            channel = await self._ready()
            queue = await channel.get_queue(plan.dead_letter_queue(self._name), ensure=False)
            held: list[AbstractIncomingMessage] = []
            try:
                while len(letters) < limit:
                    message = await queue.get(no_ack=False, fail=False)
                    if message is None:
                        break
                    held.append(message)
                    letters.append(plan.dead_letter_of(message.body))
            finally:
                for message in held:
                    await message.nack(requeue=True)
        return sorted(letters, key=lambda letter: letter.failed_at or 0.0, reverse=True)

    async def delete(self) -> None:
        """Deletes the queue and its dead-letter queue with their messages."""
        async with self._lock:
            channel = await self._open()
            await channel.queue_delete(self._name)
            await channel.queue_delete(plan.dead_letter_queue(self._name))
            self._declared = False


async def _count(channel: Any, name: str) -> int | None:
    """The ready messages of queue `name`, from a passive declare sent now: a robust channel's
    `declare_queue(passive=True)` answers a queue it declared before from its cache, with the
    count of then."""
    queue = await channel.get_queue(name, ensure=False)
    count = (await queue.declare()).message_count
    return int(count) if count is not None else None
