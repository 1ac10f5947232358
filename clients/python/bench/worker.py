"""Worker throughput end to end: the workload of every SDK's worker benchmark
(crates/sluice-sdk/examples/bench_worker.rs, clients/typescript/bench/worker.ts).

A fresh queue; a producer enqueues `--messages` (default 20,000) JSON bodies of 1 KiB in batches
of 100 while a `Worker` (threads, `--flavor sync`) or an `AsyncWorker` (`--flavor async`) with
`--concurrency` slots (default 16) and an empty handler runs at its default settings, both over
one client. The clock runs from the first enqueue until the worker has acked every message.
Prints one JSON line. Bounded in count (`--messages`, at most 1,000,000) and in time
(`--timeout` seconds, default 300: the run stops there and reports what it did). Runs against
SLUICE_URL (default http://127.0.0.1:7566); the queue is deleted afterwards.

    python bench/worker.py --flavor sync
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

PAD = "x" * 1000
"""With the message number, about 1 KiB of JSON per body."""
BATCH = 100
MESSAGES_MAX = 1_000_000
ACKED_POLL_S = 0.005


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--flavor", choices=["sync", "async"], default="sync")
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args()
    count = min(max(args.messages, 1), MESSAGES_MAX)
    name = f"bench-py-{os.urandom(3).hex()}"
    admin = Client()
    admin.put_queue(name)
    try:
        if args.flavor == "sync":
            processed, elapsed = run_sync(name, count, args.concurrency, args.timeout)
        else:
            processed, elapsed = asyncio.run(run_async(name, count, args.concurrency, args.timeout))
    finally:
        admin.delete_queue(name)
        admin.close()
    result = {
        "sdk": "python",
        "flavor": args.flavor,
        "messages": count,
        "processed": processed,
        "concurrency": args.concurrency,
        "seconds": round(elapsed, 3),
        "per_second": round(processed / elapsed, 1) if elapsed > 0 else None,
    }
    print(json.dumps(result))
    return 0 if processed == count else 1


def batches(count: int) -> list[list[PushItem]]:
    return [
        [PushItem({"n": n, "pad": PAD}) for n in range(start, min(start + BATCH, count))]
        for start in range(0, count, BATCH)
    ]


def run_sync(name: str, count: int, concurrency: int, timeout: float) -> tuple[int, float]:
    queue = SluiceQueue(name, create=True)
    work = batches(count)
    handled = 0
    lock = threading.Lock()
    all_handled = threading.Event()

    def handler(ctx: Context[Any]) -> None:
        nonlocal handled
        with lock:
            handled += 1
            if handled == count:
                all_handled.set()

    def produce() -> None:
        for batch in work:
            queue.push_many(batch)

    worker: Worker[Any] = Worker(queue, handler, concurrency=concurrency)
    started = time.monotonic()
    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    worker.start()
    deadline = started + timeout
    all_handled.wait(timeout)
    # The handler runs before its ack: the clock stops at the ack of the last one.
    while worker.status().processed < count and time.monotonic() < deadline:
        time.sleep(ACKED_POLL_S)
    elapsed = time.monotonic() - started
    report = worker.stop(5.0)
    producer.join(max(deadline - time.monotonic(), 0.0))
    queue.close()
    return report.processed, elapsed


async def run_async(name: str, count: int, concurrency: int, timeout: float) -> tuple[int, float]:
    queue = AsyncSluiceQueue(name, create=True)
    work = batches(count)
    handled = 0
    all_handled = asyncio.Event()

    async def handler(ctx: Context[Any]) -> None:
        nonlocal handled
        handled += 1
        if handled == count:
            all_handled.set()

    async def produce() -> None:
        for batch in work:
            await queue.push_many(batch)

    worker: AsyncWorker[Any] = AsyncWorker(queue, handler, concurrency=concurrency)
    started = time.monotonic()
    producer = asyncio.create_task(produce())
    await worker.start()
    deadline = started + timeout
    with contextlib.suppress(TimeoutError, asyncio.TimeoutError):
        await asyncio.wait_for(all_handled.wait(), timeout)
    while time.monotonic() < deadline:
        if (await worker.status()).processed >= count:
            break
        await asyncio.sleep(ACKED_POLL_S)
    elapsed = time.monotonic() - started
    report = await worker.stop(5.0)
    producer.cancel()
    await asyncio.gather(producer, return_exceptions=True)
    await queue.close()
    return report.processed, elapsed


if __name__ == "__main__":
    sys.exit(main())
