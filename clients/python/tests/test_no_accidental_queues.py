"""Issue 31: SDK queues created themselves on first use, so a typo (`ordres`) made a new empty
queue, and a starting worker overwrote the settings of the queue it was given. Now a missing
queue is `queue_not_found` on every backend with a server or broker, nothing is created unless
asked (`create=True`, or `ensure()`), and opening an existing queue never changes it."""

from __future__ import annotations

import asyncio
import time

import pytest

from sluice_client import (
    AsyncRabbitMQQueue,
    AsyncSluiceQueue,
    Client,
    InMemoryQueue,
    QueueOptions,
    RabbitMQQueue,
    SluiceError,
    SluiceQueue,
    SQSQueue,
    Worker,
)

from .conftest import SluiceServer
from .kits import sqs_client


def unique(prefix: str) -> str:
    return f"{prefix}-{time.monotonic_ns()}"


def test_a_missing_sluice_queue_is_not_found_and_not_created(sluice_server: SluiceServer) -> None:
    name = unique("ordres")
    queue = SluiceQueue(name, url=sluice_server.url)
    with pytest.raises(SluiceError) as refused:
        queue.push({"n": 1})
    assert refused.value.code == "queue_not_found"
    assert name in str(refused.value) and "create=True" in str(refused.value)
    with pytest.raises(SluiceError):
        Worker(queue, lambda ctx: None, concurrency=1).start()
    with pytest.raises(SluiceError):
        asyncio.run(AsyncSluiceQueue(name, url=sluice_server.url).push({"n": 1}))
    with Client(sluice_server.url) as client:
        assert name not in [q.name for q in client.list_queues()]


def test_opening_an_existing_queue_leaves_its_settings(sluice_server: SluiceServer) -> None:
    name = unique("orders")
    made = SluiceQueue(
        name, url=sluice_server.url, options=QueueOptions(max_attempts=3), create=True
    )
    made.push({"n": 1})
    other = SluiceQueue(
        name, url=sluice_server.url, options=QueueOptions(max_attempts=9), create=True
    )
    other.push({"n": 2})
    worker: Worker[object] = Worker(other, lambda ctx: None, concurrency=1)
    worker.start()
    worker.stop()
    with Client(sluice_server.url) as client:
        assert client.get_queue(name).config.max_attempts == 3
    # ensure() is the explicit change.
    other.ensure()
    with Client(sluice_server.url) as client:
        assert client.get_queue(name).config.max_attempts == 9


def test_a_missing_sqs_queue_is_not_found_and_not_created(sluice_server: SluiceServer) -> None:
    name = unique("ordres")
    queue = SQSQueue(name, client=sqs_client(sluice_server.url))
    with pytest.raises(SluiceError) as refused:
        queue.push({"n": 1})
    assert refused.value.code == "queue_not_found"
    with Client(sluice_server.url) as client:
        assert name not in [q.name for q in client.list_queues()]
    SQSQueue(name, client=sqs_client(sluice_server.url), create=True).push({"n": 1})
    queue.push({"n": 2})


def test_a_missing_rabbitmq_queue_is_not_found_and_not_declared(rabbitmq: str) -> None:
    name = unique("ordres")
    queue = RabbitMQQueue(name, url=rabbitmq)
    try:
        with pytest.raises(SluiceError) as refused:
            queue.push({"n": 1})
        assert refused.value.code == "queue_not_found"
        with pytest.raises(SluiceError):
            queue.push({"n": 1})
        made = RabbitMQQueue(name, url=rabbitmq, create=True)
        made.push({"n": 1})
        queue.push({"n": 2})
        assert made.stats().ready == 2
        made.delete()
        made.close()
    finally:
        queue.close()

    async def on_asyncio() -> None:
        aio = AsyncRabbitMQQueue(unique("ordres"), url=rabbitmq)
        try:
            with pytest.raises(SluiceError) as refused:
                await aio.push({"n": 1})
            assert refused.value.code == "queue_not_found"
        finally:
            await aio.close()

    asyncio.run(on_asyncio())


def test_delete_takes_the_dead_letter_queue_on_every_backend(sluice_server: SluiceServer) -> None:
    """Issue 31: Python queues had no delete, and deleting a queue elsewhere left its
    dead-letter queue behind."""
    name = unique("gone")
    queue = SluiceQueue(name, url=sluice_server.url, create=True)
    queue.push({"n": 1})
    queue.delete()
    queue.delete()  # already gone: no error
    with Client(sluice_server.url) as client:
        names = [q.name for q in client.list_queues()]
    assert name not in names and f"{name}.dlq" not in names

    sqs = SQSQueue(unique("gone"), client=sqs_client(sluice_server.url), create=True)
    sqs.push({"n": 1})
    sqs.delete()
    with Client(sluice_server.url) as client:
        names = [q.name for q in client.list_queues()]
    assert sqs.name not in names and sqs.dead_letter_queue not in names

    memory = InMemoryQueue("gone")
    memory.push({"n": 1})
    memory.delete()
    assert memory.stats().ready == 0
