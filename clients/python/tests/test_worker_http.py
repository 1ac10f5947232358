"""The worker's requests on the wire: counted by an httpx event hook on the client it uses."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import pytest

from sluice_client import (
    AsyncClient,
    AsyncSluiceQueue,
    AsyncWorker,
    Client,
    Context,
    PushItem,
    SluiceQueue,
    Worker,
)

from .conftest import SluiceServer, unique

EVENTS = 100
SLOTS = 16
DONE_TIMEOUT_S = 30.0


class Wire:
    """The receive requests, and the receipts of each ack request, of one queue."""

    def __init__(self, queue: str) -> None:
        self.queue = queue
        self.receives = 0
        self.acks: list[list[str]] = []

    def see(self, request: httpx.Request) -> None:
        if request.url.path == f"/v1/queues/{self.queue}/receive":
            self.receives += 1
        elif request.url.path == f"/v1/queues/{self.queue}/ack":
            self.acks.append(json.loads(request.content)["receipts"])


@pytest.mark.parametrize("flavor", ["sync", "async"])
def test_the_worker_batches_receives_and_coalesces_acks_on_the_wire(
    flavor: str, sluice_server: SluiceServer
) -> None:
    """100 events on 16 slots with an empty handler: every receipt is acked exactly once, in
    far fewer ack requests than events, and the receives lease several events each (a worker
    whose slots each receive and ack one event would send 100 of both)."""
    name = unique("wire")
    wire = Wire(name)
    if flavor == "sync":
        processed = run_sync(name, wire, sluice_server.url)
    else:
        processed = asyncio.run(run_async(name, wire, sluice_server.url))
    receipts = [receipt for ack in wire.acks for receipt in ack]
    assert processed == EVENTS
    assert len(receipts) == len(set(receipts)) == EVENTS
    assert len(wire.acks) <= EVENTS // 2, [len(ack) for ack in wire.acks]
    assert wire.receives < EVENTS - SLOTS, wire.receives


def run_sync(name: str, wire: Wire, url: str) -> int:
    http = httpx.Client(base_url=url, event_hooks={"request": [wire.see]})
    queue = SluiceQueue(name, client=Client(url, http=http), create=True)
    queue.push_many([PushItem({"n": n}) for n in range(EVENTS)])

    def handler(ctx: Context[Any]) -> None:
        pass

    worker: Worker[Any] = Worker(queue, handler, concurrency=SLOTS, poll_wait=0.2)
    worker.start()
    deadline = time.monotonic() + DONE_TIMEOUT_S
    while worker.status().processed < EVENTS and time.monotonic() < deadline:
        time.sleep(0.01)
    report = worker.stop(5.0)
    http.close()
    return report.processed


async def run_async(name: str, wire: Wire, url: str) -> int:
    async def see(request: httpx.Request) -> None:
        wire.see(request)

    http = httpx.AsyncClient(base_url=url, event_hooks={"request": [see]})
    queue = AsyncSluiceQueue(name, client=AsyncClient(url, http=http), create=True)
    await queue.push_many([PushItem({"n": n}) for n in range(EVENTS)])

    async def handler(ctx: Context[Any]) -> None:
        pass

    worker: AsyncWorker[Any] = AsyncWorker(queue, handler, concurrency=SLOTS, poll_wait=0.2)
    await worker.start()
    deadline = time.monotonic() + DONE_TIMEOUT_S
    while time.monotonic() < deadline:
        if (await worker.status()).processed >= EVENTS:
            break
        await asyncio.sleep(0.01)
    report = await worker.stop(5.0)
    await http.aclose()
    return report.processed
