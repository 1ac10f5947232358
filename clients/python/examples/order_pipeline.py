"""An order pipeline with retries and a dead-letter queue.

Orders are charged by a worker. A payment service that times out now and then is retried with
backoff; a declined card can never succeed, so the handler gives up and the order goes to the
dead-letter queue at once, where the script finds it with its error. Runs against SLUICE_URL
(default http://127.0.0.1:7566) and exits 0 when every order ended where it should.

    python examples/order_pipeline.py
"""

from __future__ import annotations

import os
import sys
import threading

from sluice_client import (
    Backoff,
    Context,
    DeadLetterContext,
    GiveUp,
    QueueOptions,
    RetryPolicy,
    SluiceQueue,
    Worker,
)

DEADLINE_S = 60.0


class PaymentTimeout(Exception):
    """The payment service did not answer in time: worth another attempt."""


def main() -> int:
    queue = SluiceQueue(
        f"orders-{os.urandom(3).hex()}", options=QueueOptions(max_attempts=3), create=True
    )
    orders = [
        {"order": 1, "card": "ok"},
        {"order": 2, "card": "flaky"},
        {"order": 3, "card": "declined"},
        {"order": 4, "card": "ok"},
    ]
    charged: list[int] = []
    parked: list[DeadLetterContext[dict[str, object]]] = []
    emptied = threading.Event()

    def charge(ctx: Context[dict[str, object]]) -> None:
        card = ctx.event["card"]
        if card == "declined":
            raise GiveUp(f"card declined for order {ctx.event['order']}")
        if card == "flaky" and ctx.attempt < 3:
            raise PaymentTimeout(f"payment service timed out (attempt {ctx.attempt})")
        charged.append(int(str(ctx.event["order"])))

    worker: Worker[dict[str, object]] = Worker(
        queue,
        charge,
        concurrency=2,
        retry=RetryPolicy(max_attempts=3, backoff=Backoff.exponential(0.2, 1.0)),
        on_dead_letter=parked.append,
        on_empty=lambda ctx: emptied.set(),
        poll_wait=0.5,
    )
    for order in orders:
        sent = worker.enqueue(order, id=f"order-{order['order']}")
        print(f"order {order['order']}: event {sent.event_id} (created={sent.created})")
    worker.start()
    emptied.wait(DEADLINE_S)
    report = worker.stop()

    letters = queue.dead_letters()
    for letter in letters:
        print(f"dead letter: {letter.payload} after {letter.attempts} attempt(s): {letter.error}")
    print(f"charged {sorted(charged)}; {report.retried} retries; {report.dead_lettered} parked")
    queue.client.delete_queue(queue.name)
    queue.close()

    ok = (
        sorted(charged) == [1, 2, 4]
        and report.retried == 2
        and [letter.payload["order"] for letter in letters] == [3]
        and len(parked) == 1
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
