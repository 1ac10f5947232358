"""`ack_many` on every backend: one answer per task, in order, a lost lease as False."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from sluice_client import AsyncTaskQueue, QueueOptions, Task

from .kits import KIT_NAMES, make_kit

RECEIVE_WAIT_S = 2.0


async def receive_all(queue: AsyncTaskQueue, count: int) -> list[Task]:
    """Leases `count` tasks, in as many receives as the backend needs (bounded)."""
    tasks: list[Task] = []
    for _ in range(count * 2):
        if len(tasks) >= count:
            break
        tasks += await queue.receive(count - len(tasks), wait=RECEIVE_WAIT_S)
    assert len(tasks) == count, f"leased {len(tasks)} of {count}"
    return tasks


async def stale(queue: AsyncTaskQueue, task: Task) -> Task:
    """A task whose receipt no longer holds its message. SQS (and sluice's SQS API, as AWS
    does) accepts a second delete of a message, so there the receipt is one it never gave."""
    if queue.backend == "sqs":
        return replace(task, receipt="not-a-receipt-handle")
    await queue.ack(task)
    return task


@pytest.mark.parametrize("kit_name", KIT_NAMES)
def test_ack_many_acks_every_task_beyond_one_request(
    kit_name: str, request: pytest.FixtureRequest
) -> None:
    """25 tasks (more than SQS's batch of 10): every one acked, none comes back."""
    kit = make_kit(kit_name, request)

    async def run() -> None:
        try:
            queue = kit.open(QueueOptions(), prefix="ackmany")
            for n in range(25):
                await queue.push({"n": n})
            tasks = await receive_all(queue, 25)
            assert await queue.ack_many(tasks) == [True] * 25
            assert await queue.receive(10, wait=0.5) == []
            stats = await queue.stats()
            assert (stats.ready, stats.in_flight or 0) == (0, 0)
        finally:
            await kit.close()

    asyncio.run(run())


@pytest.mark.parametrize("kit_name", KIT_NAMES)
def test_ack_many_answers_false_for_a_lost_lease_only(
    kit_name: str, request: pytest.FixtureRequest
) -> None:
    """Three tasks, the middle one's receipt stale: [True, False, True], and the other two
    are acked all the same."""
    kit = make_kit(kit_name, request)

    async def run() -> None:
        try:
            queue = kit.open(QueueOptions(), prefix="ackstale")
            for n in range(3):
                await queue.push({"n": n})
            first, middle, last = await receive_all(queue, 3)
            lost = await stale(queue, middle)
            assert await queue.ack_many([first, lost, last]) == [True, False, True]
            if queue.backend == "sqs":
                # Still leased under its real receipt.
                await queue.ack(middle)
            assert await queue.receive(10, wait=0.5) == []
        finally:
            await kit.close()

    asyncio.run(run())
