"""`ack_then` on every backend: sluice stores the next steps in the ack's commit; the others
refuse any next step with `Unsupported` before they ack, so the task is still leased."""

from __future__ import annotations

import asyncio

import pytest

from sluice_client import LeaseLost, NextStep, QueueOptions, Unsupported

from .kits import KIT_NAMES, make_kit


@pytest.mark.parametrize("kit_name", KIT_NAMES)
def test_ack_then_chains_where_the_backend_can_and_refuses_elsewhere(
    kit_name: str, request: pytest.FixtureRequest
) -> None:
    kit = make_kit(kit_name, request)

    async def run() -> None:
        try:
            queue = kit.open(QueueOptions(), prefix="chain")
            target = kit.open(QueueOptions(), prefix="chain-next")
            await target.ensure()
            await queue.push({"order": 1})
            task = await queue.pop(wait=5.0)
            assert task is not None
            step = NextStep(target.name, {"ship": 1}, id="ship-1", key="k")
            if not queue.capabilities.chaining:
                with pytest.raises(Unsupported):
                    await queue.ack_then(task, [step])
                # Refused before the ack: the task is still leased, and acks as ever.
                await queue.ack(task)
                assert (await target.stats()).ready == 0
                return
            enqueued = await queue.ack_then(task, [step])
            assert [result.created for result in enqueued] == [True]
            shipped = await target.pop(wait=5.0)
            assert shipped is not None
            assert (shipped.task_id, shipped.payload) == (enqueued[0].message_id, {"ship": 1})
            assert (shipped.envelope.idempotency_id, shipped.envelope.key) == ("ship-1", "k")
            # A lease already settled stores nothing.
            with pytest.raises(LeaseLost):
                await queue.ack_then(task, [NextStep(target.name, {"ship": 2})])
            await target.ack(shipped)
            stats = await target.stats()
            assert (stats.ready, stats.in_flight) == (0, 0)
        finally:
            await kit.close()

    asyncio.run(run())


@pytest.mark.parametrize("kit_name", KIT_NAMES)
def test_ack_then_without_next_steps_is_an_ack(
    kit_name: str, request: pytest.FixtureRequest
) -> None:
    kit = make_kit(kit_name, request)

    async def run() -> None:
        try:
            queue = kit.open(QueueOptions(), prefix="chain")
            await queue.push({"order": 1})
            task = await queue.pop(wait=5.0)
            assert task is not None
            assert await queue.ack_then(task, []) == []
            stats = await queue.stats()
            assert stats.ready == 0 and stats.in_flight in (0, None)
        finally:
            await kit.close()

    asyncio.run(run())
