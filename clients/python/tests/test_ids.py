"""Issue 33: an idempotency id is never silently ignored. On a queue that deduplicates (every
sluice and memory queue, an SQS queue opened with `dedup`) a repeated id stores nothing new;
where the queue cannot deduplicate (a standard SQS queue, RabbitMQ) a push with an id is
refused with `Unsupported` and nothing of the call is stored; `capabilities.dedup` says which."""

from __future__ import annotations

import asyncio

import pytest

from sluice_client import PushItem, QueueOptions, Unsupported

from .kits import KIT_NAMES, Kit, make_kit


@pytest.mark.parametrize("kit_name", KIT_NAMES)
def test_an_id_deduplicates_or_is_refused(kit_name: str, request: pytest.FixtureRequest) -> None:
    kit = make_kit(kit_name, request)
    asyncio.run(_an_id_deduplicates_or_is_refused(kit))


async def _an_id_deduplicates_or_is_refused(kit: Kit) -> None:
    try:
        queue = kit.open(QueueOptions(), prefix="ids")
        if not queue.capabilities.dedup:
            with pytest.raises(Unsupported) as refused:
                await queue.push_many([PushItem({"n": 1}), PushItem({"n": 2}, id="order-1")])
            assert "idempotency id" in str(refused.value)
            # The whole call was refused: not even the message without an id was stored.
            assert (await queue.stats()).ready in (0, None)
            assert (await queue.push({"n": 3})).created
            return
        first = await queue.push({"n": 1}, id="order-1")
        again = await queue.push({"n": 1}, id="order-1")
        assert first.created
        assert not again.created and again.message_id == first.message_id
    finally:
        await kit.close()


@pytest.mark.parametrize("kit_name", [name for name in KIT_NAMES if "rabbitmq" not in name])
def test_a_dedup_queue_keeps_the_id(kit_name: str, request: pytest.FixtureRequest) -> None:
    kit = make_kit(kit_name, request)
    asyncio.run(_a_dedup_queue_keeps_the_id(kit))


async def _a_dedup_queue_keeps_the_id(kit: Kit) -> None:
    try:
        queue = kit.open(QueueOptions(dedup=True), prefix="idd")
        assert queue.capabilities.dedup
        first = await queue.push({"n": 1}, id="order-1")
        assert first.created
        task = await queue.pop(wait=2.0)
        assert task is not None and task.envelope.idempotency_id == "order-1"
    finally:
        await kit.close()
