"""A webhook processor at a fixed pace.

Senders post events to sluice's webhook endpoint `/hooks/<name>`; sluice verifies and stores
them in a queue whose rate limit (a token bucket on the server) sets the pace: here 20
deliveries a second, however many workers ask. A `Worker` with four slots handles them and the
script reports the pace it saw. Runs against SLUICE_URL (default http://127.0.0.1:7566) and
exits 0 once every event was handled (1 if that takes longer than a minute).

    python examples/webhook_processor.py
"""

from __future__ import annotations

import os
import sys
import threading
import time

import httpx

from sluice_client import (
    Client,
    Context,
    QueueSpec,
    RateLimitSpec,
    SluiceQueue,
    VerifySpec,
    WebhookSpec,
    Worker,
)

EVENTS = 40
PER_SECOND = 20.0
DEADLINE_S = 60.0


def main() -> int:
    suffix = os.urandom(3).hex()
    queue_name, hook_name = f"webhooks-{suffix}", f"shop-{suffix}"
    client = Client()
    # The pace is the queue's: at most 20 deliveries a second, a burst of one.
    client.put_queue(queue_name, QueueSpec(rate_limit=RateLimitSpec(PER_SECOND, burst=1)))
    # `none` takes any sender; a real endpoint verifies a signature (github, stripe, ...).
    client.put_webhook(hook_name, WebhookSpec(queue=queue_name, verify=VerifySpec(scheme="none")))

    # The senders' side: each delivery answered 202 once it is on disk.
    with httpx.Client(base_url=client.url) as senders:
        for n in range(EVENTS):
            answer = senders.post(f"/hooks/{hook_name}", json={"event": "order.paid", "n": n})
            answer.raise_for_status()

    handled: list[float] = []
    emptied = threading.Event()

    def handle(ctx: Context[dict[str, object]]) -> None:
        handled.append(time.monotonic())

    worker: Worker[dict[str, object]] = Worker(
        SluiceQueue(queue_name, client=client),
        handle,
        concurrency=4,
        on_empty=lambda ctx: emptied.set(),
        poll_wait=0.5,
    )
    worker.start()
    emptied.wait(DEADLINE_S)
    report = worker.stop()
    client.delete_webhook(hook_name)
    client.delete_queue(queue_name)
    client.close()

    if report.processed != EVENTS:
        print(f"handled {report.processed} of {EVENTS} events", file=sys.stderr)
        return 1
    span = handled[-1] - handled[0]
    pace = (len(handled) - 1) / span if span > 0 else float("inf")
    print(f"handled {report.processed} webhook events at {pace:.1f}/s (limit {PER_SECOND:.0f}/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
