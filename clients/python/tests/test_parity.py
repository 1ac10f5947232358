"""Issue 31: parity with the TypeScript SDK. A duplicate push answers where the first message
is and its ack's result (TypeScript's `state` and `result`), and `enqueue_many` takes each
event's options (TypeScript's `envelope`)."""

from __future__ import annotations

import time

from sluice_client import Client, PushItem, SluiceQueue, Worker

from .conftest import SluiceServer


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
