"""Issue 31: parity with the TypeScript SDK. A duplicate push answers where the first message
is and its ack's result (TypeScript's `state` and `result`), the worker keeps the handler's
return value as that result, and `enqueue_many` takes each event's options (TypeScript's
`envelope`)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from sluice_client import (
    AsyncInMemoryQueue,
    AsyncSluiceQueue,
    AsyncWorker,
    Client,
    Context,
    InMemoryQueue,
    PushItem,
    SluiceQueue,
    Worker,
)

from .conftest import SluiceServer, unique
from .harness import wait_until


def test_a_duplicate_push_answers_the_first_messages_state_and_result(
    sluice_server: SluiceServer,
) -> None:
    name = f"parity-{time.monotonic_ns()}"
    queue = SluiceQueue(name, url=sluice_server.url, create=True)
    first = queue.push({"order": 7}, id="order-7")
    assert (first.created, first.state, first.result) == (True, None, None)
    again = queue.push({"order": 7}, id="order-7")
    assert (again.created, again.message_id, again.state) == (False, first.message_id, "ready")
    task = queue.pop(wait=2.0)
    assert task is not None
    with Client(sluice_server.url) as client:
        client.ack(name, task.receipt, result={"charged": 4250})
    done = queue.push({"order": 7}, id="order-7")
    assert (done.created, done.state, done.result) == (False, "acked", {"charged": 4250})


def test_enqueue_many_takes_each_events_options(sluice_server: SluiceServer) -> None:
    name = f"parity-{time.monotonic_ns()}"
    queue = SluiceQueue(name, url=sluice_server.url, create=True)
    worker: Worker[dict[str, int]] = Worker(queue, lambda ctx: None, concurrency=1)
    answers = worker.enqueue_many(
        [{"n": 1}, PushItem({"n": 2}, id="two"), PushItem({"n": 2}, id="two")]
    )
    assert [a.created for a in answers] == [True, True, False]
    assert answers[2].message_id == answers[1].message_id


def charge(ctx: Context[dict[str, int]]) -> Any:
    """Order 2's handler returns nothing; the others return what they charged, and order 3's
    also a value JSON cannot carry (kept as no result, with a warning, not a failed ack)."""
    order = ctx.event["order"]
    if order == 2:
        return None
    if order == 3:
        return {"at": object()}
    return {"charged": order * 100}


async def charge_async(ctx: Context[dict[str, int]]) -> Any:
    return charge(ctx)


def answers_after_the_worker(queue: Any) -> list[tuple[str | None, Any]]:
    """The state and result a duplicate push of each order gets."""
    return [
        (again.state, again.result)
        for again in (queue.push({"order": n}, id=f"order-{n}") for n in (1, 2, 3, 4))
    ]


EXPECTED = [
    ("acked", {"charged": 100}),
    ("acked", None),
    ("acked", None),
    ("acked", {"charged": 400}),
]


@pytest.mark.parametrize("backend", ["memory", "sluice"])
def test_the_workers_return_value_is_the_ack_result(
    backend: str, request: pytest.FixtureRequest
) -> None:
    name = unique("result")
    if backend == "sluice":
        server: SluiceServer = request.getfixturevalue("sluice_server")
        queue: Any = SluiceQueue(name, url=server.url, create=True)
    else:
        queue = InMemoryQueue(name)
    worker: Worker[dict[str, int]] = Worker(queue, charge, concurrency=2, poll_wait=0.2)
    for n in (1, 2, 3, 4):
        worker.enqueue({"order": n}, id=f"order-{n}")
    worker.start()
    try:
        wait_until(lambda: worker.status().processed == 4, what="4 processed")
    finally:
        report = worker.stop(5.0)
    assert (report.processed, report.retried) == (4, 0), report
    assert answers_after_the_worker(queue) == EXPECTED


@pytest.mark.parametrize("backend", ["memory", "sluice"])
def test_the_async_workers_return_value_is_the_ack_result(
    backend: str, request: pytest.FixtureRequest
) -> None:
    name = unique("result")

    async def run() -> list[tuple[str | None, Any]]:
        if backend == "sluice":
            server: SluiceServer = request.getfixturevalue("sluice_server")
            queue: Any = AsyncSluiceQueue(name, url=server.url, create=True)
        else:
            queue = AsyncInMemoryQueue(name)
        worker: AsyncWorker[dict[str, int]] = AsyncWorker(
            queue, charge_async, concurrency=2, poll_wait=0.2
        )
        for n in (1, 2, 3, 4):
            await worker.enqueue({"order": n}, id=f"order-{n}")
        await worker.start()
        deadline = time.monotonic() + 20
        while (await worker.status()).processed < 4:
            assert time.monotonic() < deadline, "4 processed"
            await asyncio.sleep(0.05)
        report = await worker.stop(5.0)
        assert (report.processed, report.retried) == (4, 0), report
        answers = []
        for n in (1, 2, 3, 4):
            again = await queue.push({"order": n}, id=f"order-{n}")
            answers.append((again.state, again.result))
        return answers

    assert asyncio.run(run()) == EXPECTED
