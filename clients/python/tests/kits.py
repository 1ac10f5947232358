"""One way to open a fresh queue on every backend, for the conformance runner and the worker
tests: a `Kit` per backend flavour, each giving `AsyncTaskQueue`s (blocking backends run through
the threaded adapter, so one runner exercises both the blocking and the asyncio code)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from sluice_client import (
    AsyncSluiceQueue,
    AsyncTaskQueue,
    InMemoryQueue,
    QueueOptions,
    SluiceQueue,
)
from sluice_client.queues._threaded import ThreadedAsyncQueue

from .conftest import SluiceServer, unique

KIT_NAMES = [
    "sluice",
    "sluice-async",
    "memory",
    "sqs",
    "sqs-moto",
    "rabbitmq",
    "rabbitmq-async",
]
"""Every kit: `sqs` is sluice's SQS-compatible API, `sqs-moto` moto_server (standing in for AWS)."""


@dataclass
class Kit:
    """Opens queues on one backend flavour and cleans up after them."""

    name: str
    backend: str
    """The backend's name in scenarios.json (`sluice`, `memory`, `sqs`, `rabbitmq`)."""
    make: Callable[[str, QueueOptions], AsyncTaskQueue]
    opened: list[AsyncTaskQueue] = field(default_factory=list)

    def for_backend(self, per_backend: dict[str, Any] | None) -> Any:
        """What a scenario's or step's per-backend field says for this backend, or None."""
        return for_backend(per_backend, scenario_names(self.name))

    def open(self, options: QueueOptions, prefix: str = "t") -> AsyncTaskQueue:
        """A fresh queue with a unique name (may raise `Unsupported` for the options)."""
        queue = self.make(unique(prefix), options)
        self.opened.append(queue)
        return queue

    async def advance(self, queue: AsyncTaskQueue, seconds: float) -> None:
        """Lets time pass: the memory backend's clock, real time elsewhere."""
        memory = _memory_of(queue)
        if memory is not None:
            memory.advance(seconds)
        else:
            await asyncio.sleep(seconds)

    async def close(self) -> None:
        for queue in self.opened:
            delete: Callable[[], Awaitable[None]] | None = getattr(queue, "delete", None)
            sync = getattr(queue, "sync", None)
            try:
                if delete is not None:
                    await delete()
                elif sync is not None and hasattr(sync, "delete"):
                    await asyncio.to_thread(sync.delete)
                await queue.close()
            except Exception as error:
                print(f"cleanup of {queue.name} failed: {error}")


def _memory_of(queue: AsyncTaskQueue) -> InMemoryQueue | None:
    sync = getattr(queue, "sync", None)
    return sync if isinstance(sync, InMemoryQueue) else None


def scenario_names(kit_or_backend: str) -> list[str]:
    """A kit's (or Harness backend's) names in scenarios.json, the most specific first: SQS on
    moto is `aws` (SQS without sluice's extensions), and where a scenario says nothing for it,
    what it says for `sqs` holds."""
    if kit_or_backend == "sqs-moto":
        return ["aws", "sqs"]
    return [kit_or_backend.removesuffix("-async")]


def for_backend(per_backend: dict[str, Any] | None, names: list[str]) -> Any:
    """What a per-backend field says for the first of `names` it names, or None."""
    for name in names:
        if per_backend is not None and name in per_backend:
            return per_backend[name]
    return None


def make_kit(name: str, request: pytest.FixtureRequest) -> Kit:
    """The kit `name`; asks for the server or broker it needs (skipping or failing without)."""
    if name == "memory":
        return Kit(
            name, "memory", lambda queue, options: _threaded(InMemoryQueue(queue, options=options))
        )
    if name in ("sluice", "sluice-async"):
        server: SluiceServer = request.getfixturevalue("sluice_server")
        if name == "sluice":
            return Kit(
                name,
                "sluice",
                lambda queue, options: _threaded(
                    SluiceQueue(queue, url=server.url, options=options, create=True)
                ),
            )
        return Kit(
            name,
            "sluice",
            lambda queue, options: AsyncSluiceQueue(
                queue, url=server.url, options=options, create=True
            ),
        )
    if name in ("sqs", "sqs-moto"):
        endpoint: str = (
            request.getfixturevalue("sluice_server").url
            if name == "sqs"
            else request.getfixturevalue("moto_url")
        )
        client = sqs_client(endpoint)
        from sluice_client import SQSQueue

        return Kit(
            name,
            "sqs",
            lambda queue, options: _threaded(
                SQSQueue(queue, client=client, options=options, create=True)
            ),
        )
    if name in ("rabbitmq", "rabbitmq-async"):
        url: str = request.getfixturevalue("rabbitmq")
        from sluice_client import AsyncRabbitMQQueue, RabbitMQQueue

        if name == "rabbitmq":
            return Kit(
                name,
                "rabbitmq",
                lambda queue, options: _threaded(
                    RabbitMQQueue(queue, url=url, options=options, create=True)
                ),
            )
        return Kit(
            name,
            "rabbitmq",
            lambda queue, options: AsyncRabbitMQQueue(queue, url=url, options=options, create=True),
        )
    raise ValueError(f"no kit {name}")


def _threaded(queue: Any) -> AsyncTaskQueue:
    return ThreadedAsyncQueue(queue)


def sqs_client(url: str) -> Any:
    """A boto3 SQS client of the SQS API at `url` (sluice without tokens and moto take any key)."""
    import boto3

    return boto3.client(
        "sqs",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="sluice-tests",
        aws_secret_access_key="sluice-tests",
    )
