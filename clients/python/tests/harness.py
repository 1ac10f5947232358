"""One face for the threaded `Worker` and the `AsyncWorker` in tests: the async flavour runs its
event loop on a thread of its own, so a test body drives both the same way. A handler is a
`Behavior`: given the context it answers how long the work takes (seconds) or raises."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest

from sluice_client import (
    AsyncInMemoryQueue,
    AsyncSluiceQueue,
    AsyncWorker,
    Clock,
    Context,
    InMemoryQueue,
    QueueOptions,
    QueueStats,
    SluiceQueue,
    Worker,
    WorkerReport,
    WorkerStatus,
)
from sluice_client.queues.base import DeadLetter, Enqueued

from .conftest import SluiceServer, unique

T = TypeVar("T")
Behavior = Callable[[Context[Any]], float]
CALL_TIMEOUT_S = 60.0


class Harness:
    """A queue on `backend` (`memory`, `sluice`, `sqs`, `sqs-moto` or `rabbitmq`) and a worker
    of `flavor` (`sync`/`async`)."""

    def __init__(
        self,
        backend: str,
        flavor: str,
        request: pytest.FixtureRequest,
        options: QueueOptions | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.backend = backend
        self.flavor = flavor
        self.options = options or QueueOptions()
        name = unique("worker")
        self.loop: asyncio.AbstractEventLoop | None = None
        self.sync_queue: Any
        self.async_queue: Any = None
        if flavor == "async":
            self.loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
            self._thread.start()
        if backend == "memory":
            if flavor == "async":
                self.async_queue = AsyncInMemoryQueue(name, options=self.options, clock=clock)
                self.memory: InMemoryQueue | None = self.async_queue.memory
            else:
                self.memory = InMemoryQueue(name, options=self.options, clock=clock)
                self.sync_queue = self.memory
        elif backend == "sluice":
            server: SluiceServer = request.getfixturevalue("sluice_server")
            self.memory = None
            if flavor == "async":
                self.async_queue = AsyncSluiceQueue(
                    name, url=server.url, options=self.options, create=True
                )
            else:
                self.sync_queue = SluiceQueue(
                    name, url=server.url, options=self.options, create=True
                )
        elif backend in ("sqs", "sqs-moto"):
            from sluice_client import AsyncSQSQueue, SQSQueue

            from .kits import sqs_client

            self.memory = None
            url: str = (
                request.getfixturevalue("sluice_server").url
                if backend == "sqs"
                else request.getfixturevalue("moto_url")
            )
            kind = AsyncSQSQueue if flavor == "async" else SQSQueue
            made = kind(name, client=sqs_client(url), options=self.options, create=True)
            if flavor == "async":
                self.async_queue = made
            else:
                self.sync_queue = made
        elif backend == "rabbitmq":
            from sluice_client import AsyncRabbitMQQueue, RabbitMQQueue

            self.memory = None
            broker: str = request.getfixturevalue("rabbitmq")
            if flavor == "async":
                self.async_queue = AsyncRabbitMQQueue(
                    name, url=broker, options=self.options, create=True
                )
            else:
                self.sync_queue = RabbitMQQueue(name, url=broker, options=self.options, create=True)
        else:
            raise ValueError(f"no backend {backend}")
        self.worker: Any = None
        self._lock = threading.Lock()
        self.running = 0
        self.peak = 0
        """The most handlers that ran at once (measured around the work itself)."""

    def call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        assert self.loop is not None
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(CALL_TIMEOUT_S)

    def _q(self, method: str, *args: Any, **kwargs: Any) -> Any:
        if self.flavor == "async":
            return self.call(getattr(self.async_queue, method)(*args, **kwargs))
        return getattr(self.sync_queue, method)(*args, **kwargs)

    def push(self, payload: Any, **options: Any) -> Enqueued:
        result: Enqueued = self._q("push", payload, **options)
        return result

    def stats(self) -> QueueStats:
        result: QueueStats = self._q("stats")
        return result

    def dead_letters(self) -> list[DeadLetter]:
        result: list[DeadLetter] = self._q("dead_letters")
        return result

    def advance(self, seconds: float) -> None:
        """Moves the memory backend's manual clock; on sluice time passes by itself."""
        if self.memory is not None:
            self.memory.advance(seconds)

    def start_handlers(
        self,
        handler: Callable[[Context[Any]], Any],
        async_handler: Callable[[Context[Any]], Coroutine[Any, Any, Any]],
        **options: Any,
    ) -> None:
        """Starts a worker running `handler` (sync flavour) or `async_handler` (async)."""
        if self.flavor == "sync":
            self.worker = Worker(self.sync_queue, handler, **options)
            self.worker.start()
            return

        async def start() -> Any:
            worker = AsyncWorker(self.async_queue, async_handler, **options)
            await worker.start()
            return worker

        self.worker = self.call(start())

    def start(self, behavior: Behavior, **options: Any) -> None:
        if self.flavor == "sync":

            def handler(ctx: Context[Any]) -> None:
                self._enter()
                try:
                    time.sleep(behavior(ctx))
                finally:
                    self._leave()

            self.worker = Worker(self.sync_queue, handler, **options)
            self.worker.start()
        else:

            async def async_handler(ctx: Context[Any]) -> None:
                self._enter()
                try:
                    await asyncio.sleep(behavior(ctx))
                finally:
                    self._leave()

            async def start() -> Any:
                worker = AsyncWorker(self.async_queue, async_handler, **options)
                await worker.start()
                return worker

            self.worker = self.call(start())

    def _enter(self) -> None:
        with self._lock:
            self.running += 1
            self.peak = max(self.peak, self.running)

    def _leave(self) -> None:
        with self._lock:
            self.running -= 1

    def stop(self, grace: float | None = None) -> WorkerReport:
        if self.flavor == "sync":
            report: WorkerReport = self.worker.stop(grace)
            return report
        return self.call(self.worker.stop(grace))  # type: ignore[no-any-return]

    def status(self) -> WorkerStatus:
        if self.flavor == "sync":
            status: WorkerStatus = self.worker.status()
            return status
        return self.call(self.worker.status())  # type: ignore[no-any-return]

    def worker_call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """A method of the worker; for the async flavour called on its event loop (and awaited
        where it is a coroutine), since the worker's state belongs to that loop."""
        if self.flavor == "sync":
            return getattr(self.worker, method)(*args, **kwargs)

        async def on_loop() -> Any:
            result = getattr(self.worker, method)(*args, **kwargs)
            return await result if asyncio.iscoroutine(result) else result

        return self.call(on_loop())

    def close(self) -> None:
        if self.worker is not None:
            self.stop(0.0)
        delete = getattr(
            self.async_queue if self.flavor == "async" else self.sync_queue, "delete", None
        )
        if delete is not None and self.memory is None:
            try:
                deleted = delete()
                if asyncio.iscoroutine(deleted):
                    self.call(deleted)
            except Exception as error:
                print(f"cleanup: deleting the queue failed: {error}")
        if self.flavor == "async":
            self.call(self.async_queue.close())
            assert self.loop is not None
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(5)
        else:
            self.sync_queue.close()


def wait_until(condition: Callable[[], bool], timeout: float = 15.0, what: str = "") -> None:
    """Polls `condition` until it holds, at most `timeout` seconds (then fails)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what or condition}")
        time.sleep(0.01)
