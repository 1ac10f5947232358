"""The in-memory backend's own rules, beyond the conformance scenarios: leases on its clock,
per-key lanes, priorities, waits woken by pushes."""

from __future__ import annotations

import threading

import pytest

from sluice_client import InMemoryQueue, LeaseLost, QueueOptions


def test_a_lease_runs_out_on_the_clock_and_counts_as_an_attempt() -> None:
    queue = InMemoryQueue(options=QueueOptions(max_attempts=2))
    queue.push({"n": 1})
    first = queue.pop(visibility_timeout=10)
    assert first is not None
    queue.advance(9.9)
    assert queue.pop() is None
    queue.advance(0.1)
    second = queue.pop(visibility_timeout=10)
    assert second is not None
    assert (second.attempt, second.envelope.last_error) == (2, "visibility timeout expired")
    with pytest.raises(LeaseLost):
        queue.ack(first)
    queue.advance(10)
    stats = queue.stats()
    assert (stats.ready, stats.in_flight, stats.dead_lettered) == (0, 0, 1)
    assert queue.dead_letters()[0].error == "visibility timeout expired"


def test_an_ack_after_the_lease_ran_out_still_counts_until_redelivery() -> None:
    queue = InMemoryQueue()
    queue.push(1)
    task = queue.pop(visibility_timeout=1)
    assert task is not None
    queue.advance(2)
    queue.ack(task)
    assert queue.stats().processed == 1


def test_priorities_and_per_key_lanes() -> None:
    queue = InMemoryQueue(options=QueueOptions(per_key=True))
    queue.push("a1", key="a")
    queue.push("a2", key="a")
    queue.push("urgent", priority=9)
    tasks = queue.receive(10)
    assert [task.payload for task in tasks] == ["urgent", "a1"]
    assert queue.receive(10) == []
    queue.ack(tasks[1])
    assert [task.payload for task in queue.receive(10)] == ["a2"]


def test_a_waiting_receive_wakes_on_a_push() -> None:
    queue = InMemoryQueue()
    got: list[object] = []
    waiter = threading.Thread(target=lambda: got.append(queue.pop(wait=10)))
    waiter.start()
    queue.push({"late": True})
    waiter.join(5)
    assert not waiter.is_alive()
    task = got[0]
    assert task is not None and getattr(task, "payload", None) == {"late": True}


def test_a_task_keeps_its_own_attempt_limit() -> None:
    queue = InMemoryQueue(options=QueueOptions(max_attempts=10))
    queue.push("once", max_attempts=1)
    task = queue.pop()
    assert task is not None
    assert queue.nack(task, "no") == "dead_lettered"


def test_a_nacked_receipt_settles_nothing_more() -> None:
    """As on sluice: after a nack, an ack or extend with the same receipt is a lost lease."""
    queue = InMemoryQueue()
    queue.push({"n": 1})
    task = queue.pop()
    assert task is not None
    queue.nack(task, "again later", delay=60)
    with pytest.raises(LeaseLost):
        queue.ack(task)
    with pytest.raises(LeaseLost):
        queue.extend_visibility(task, 10)
    stats = queue.stats()
    assert (stats.ready, stats.delayed, stats.in_flight) == (0, 1, 0)
