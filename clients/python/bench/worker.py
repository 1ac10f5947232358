"""Worker throughput end to end: 1 KiB bodies, an empty handler, the worker's default settings.

Enqueues `--messages` messages (in batches of 1000, not timed), then runs a `Worker` (threads)
or an `AsyncWorker` with `--concurrency` slots (default 16; the worker has no default, this is
the SDK's own example figure) until every message is acked, and prints messages per second from
the worker's start to the moment it sees the queue empty (`on_empty`). Bounded in count
(`--messages`, at most 1,000,000) and in time (`--timeout` seconds, default 120: the run stops
there and reports what it did). Runs
against SLUICE_URL (default http://127.0.0.1:7566); the queue is deleted afterwards.

    python bench/worker.py --messages 20000 --flavor sync
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import threading
import time
from typing import Any

from sluice_client import (
    AsyncSluiceQueue,
    AsyncWorker,
    Client,
    Context,
    PushItem,
    SluiceQueue,
    Worker,
)

BODY = {"data": "x" * 1000}
"""About 1 KiB of JSON."""
MESSAGES_MAX = 1_000_000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--flavor", choices=["sync", "async"], default="sync")
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args()
    count = min(max(args.messages, 1), MESSAGES_MAX)
    name = f"bench-py-{os.urandom(3).hex()}"
    client = Client()
    client.put_queue(name)
    started = time.monotonic()
    for start in range(0, count, 1000):
        batch = [PushItem(BODY) for _ in range(min(1000, count - start))]
        SluiceQueue(name, client=client).push_many(batch)
    enqueue_s = time.monotonic() - started
    try:
        if args.flavor == "sync":
            processed, elapsed = run_sync(name, client, count, args.concurrency, args.timeout)
        else:
            processed, elapsed = asyncio.run(run_async(name, count, args.concurrency, args.timeout))
    finally:
        client.delete_queue(name)
        client.close()
    result = {
        "flavor": args.flavor,
        "messages": count,
        "processed": processed,
        "concurrency": args.concurrency,
        "seconds": round(elapsed, 3),
        "messages_per_s": round(processed / elapsed, 1) if elapsed > 0 else None,
        "enqueue_per_s": round(count / enqueue_s, 1),
    }
    print(json.dumps(result))
    return 0 if processed == count else 1


def empty(ctx: Context[Any]) -> None:
    """The empty handler."""


async def empty_async(ctx: Context[Any]) -> None:
    """The empty handler."""


def run_sync(
    name: str, client: Client, count: int, concurrency: int, timeout: float
) -> tuple[int, float]:
    emptied = threading.Event()
    worker: Worker[Any] = Worker(
        SluiceQueue(name, client=client),
        empty,
        concurrency=concurrency,
        on_empty=lambda ctx: emptied.set(),
    )
    started = time.monotonic()
    worker.start()
    emptied.wait(timeout)
    elapsed = time.monotonic() - started
    return worker.stop(5.0).processed, elapsed


async def run_async(name: str, count: int, concurrency: int, timeout: float) -> tuple[int, float]:
    queue = AsyncSluiceQueue(name)
    emptied = asyncio.Event()
    worker: AsyncWorker[Any] = AsyncWorker(
        queue, empty_async, concurrency=concurrency, on_empty=lambda ctx: emptied.set()
    )
    started = time.monotonic()
    await worker.start()
    with contextlib.suppress(TimeoutError, asyncio.TimeoutError):
        await asyncio.wait_for(emptied.wait(), timeout)
    elapsed = time.monotonic() - started
    report = await worker.stop(5.0)
    await queue.close()
    return report.processed, elapsed


if __name__ == "__main__":
    sys.exit(main())
