"""The worker on memory and on sluice, threaded and asyncio: each test runs on all four."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from sluice_client import (
    Backoff,
    Context,
    DeadLetterContext,
    EmptyContext,
    QueueOptions,
    RetryPolicy,
    SluiceQueue,
    SystemClock,
    Task,
    Unsupported,
)

from .conftest import SluiceServer, unique
from .harness import Harness, wait_until

COMBOS = [(b, f) for b in ("memory", "sluice") for f in ("sync", "async")]
IDS = [f"{b}-{f}" for b, f in COMBOS]


@pytest.fixture(params=COMBOS, ids=IDS)
def combo(request: pytest.FixtureRequest) -> tuple[str, str]:
    return request.param  # type: ignore[no-any-return]


def harness(
    combo: tuple[str, str], request: pytest.FixtureRequest, real_time: bool = False, **options: Any
) -> Harness:
    backend, flavor = combo
    clock = SystemClock() if real_time else None
    return Harness(backend, flavor, request, QueueOptions(**options), clock=clock)


@pytest.fixture
def cleanup() -> Iterator[list[Harness]]:
    made: list[Harness] = []
    yield made
    for h in made:
        h.close()


def test_concurrency_is_never_exceeded(
    combo: tuple[str, str], request: pytest.FixtureRequest, cleanup: list[Harness]
) -> None:
    """Twelve events of 50 ms each on three slots: never more than three run at once, and
    three do (the slots really run side by side)."""
    h = harness(combo, request)
    cleanup.append(h)
    for n in range(12):
        h.push({"n": n})
    h.start(lambda ctx: 0.05, concurrency=3, poll_wait=0.2)
    wait_until(lambda: h.status().processed == 12, what="12 processed")
    report = h.stop(5.0)
    assert report.processed == 12
    assert h.peak == 3, f"{h.peak} handlers ran at once"


def test_concurrency_counts_running_handlers(
    combo: tuple[str, str], request: pytest.FixtureRequest, cleanup: list[Harness]
) -> None:
    """While handlers run, the worker's status shows at most `concurrency` in flight."""
    h = harness(combo, request)
    cleanup.append(h)
    for n in range(6):
        h.push({"n": n})
    seen: list[int] = []
    h.start(lambda ctx: 0.3, concurrency=2, poll_wait=0.2)
    wait_until(lambda: h.status().in_flight == 2, what="two in flight")
    for _ in range(10):
        status = h.status()
        seen.append(status.in_flight)
        assert sum(1 for slot in status.slots if slot.event_id) <= 2
    wait_until(lambda: h.status().processed == 6, what="all processed")
    h.stop(5.0)
    assert max(seen) <= 2


def test_retries_follow_the_backoff(
    combo: tuple[str, str], request: pytest.FixtureRequest, cleanup: list[Harness]
) -> None:
    """An event failing twice comes back after 1 s, then 2 s (exponential backoff), and its
    third attempt succeeds. On memory the test moves the clock; on sluice time passes."""
    h = harness(combo, request)
    cleanup.append(h)
    starts: list[tuple[int, float]] = []

    def behavior(ctx: Context[Any]) -> float:
        starts.append((ctx.attempt, ctx.processing_started_at.timestamp()))
        if ctx.attempt < 3:
            raise RuntimeError(f"attempt {ctx.attempt} fails")
        return 0.0

    h.push({"job": 1})
    retry = RetryPolicy(max_attempts=5, backoff=Backoff.exponential(1.0, 10.0, 2.0))
    h.start(behavior, concurrency=1, retry=retry, poll_wait=0.2)
    for delay in (1.0, 2.0):
        wait_until(lambda: h.status().retried >= len(starts), what="the retry")
        if h.memory is not None:
            wait_until(lambda: h.stats().delayed == 1, what="the delayed retry")
            attempts_before = len(starts)
            h.advance(delay - 0.01)
            assert len(starts) == attempts_before, "delivered before its backoff ended"
            h.advance(0.01)
    wait_until(lambda: h.status().processed == 1, timeout=20, what="the third attempt")
    report = h.stop(5.0)
    assert [attempt for attempt, _ in starts] == [1, 2, 3]
    gaps = [starts[1][1] - starts[0][1], starts[2][1] - starts[1][1]]
    assert gaps[0] >= 0.99 and gaps[1] >= 1.99, f"gaps {gaps}"
    assert report.retried == 2
    assert report.processed == 1


def test_an_error_not_retryable_dead_letters_at_once(
    combo: tuple[str, str], request: pytest.FixtureRequest, cleanup: list[Harness]
) -> None:
    h = harness(combo, request)
    cleanup.append(h)
    hooks: list[DeadLetterContext[Any]] = []

    def behavior(ctx: Context[Any]) -> float:
        raise ValueError(f"bad order {ctx.event['order']}")

    pushed = h.push({"order": 7})
    retry = RetryPolicy(max_attempts=5, is_retryable=lambda e: not isinstance(e, ValueError))
    h.start(behavior, concurrency=2, retry=retry, on_dead_letter=hooks.append, poll_wait=0.2)
    wait_until(lambda: len(hooks) == 1, what="on_dead_letter")
    report = h.stop(5.0)
    hook = hooks[0]
    assert hook.event == {"order": 7}
    assert hook.event_id == pushed.event_id
    assert hook.attempt == 1
    assert isinstance(hook.error, ValueError)
    assert hook.failed_at >= hook.enqueued_at
    assert report.dead_lettered == 1 and report.retried == 0
    letters = h.dead_letters()
    assert [(letter.payload, letter.attempts) for letter in letters] == [({"order": 7}, 1)]
    assert letters[0].error == "ValueError: bad order 7"


def test_a_heartbeat_keeps_a_slow_handlers_lease(
    combo: tuple[str, str], request: pytest.FixtureRequest, cleanup: list[Harness]
) -> None:
    """A 1 s lease and a 2.5 s handler: the heartbeat extends the lease, so the event is
    delivered once and acked (no second attempt, nothing retried). Real time on both."""
    h = harness(combo, request, real_time=True)
    cleanup.append(h)
    attempts: list[int] = []

    def behavior(ctx: Context[Any]) -> float:
        attempts.append(ctx.attempt)
        return 2.5

    h.push({"slow": True})
    h.start(behavior, concurrency=2, lease=1.0, poll_wait=0.2)
    wait_until(lambda: h.status().processed == 1, what="the slow event")
    report = h.stop(5.0)
    assert attempts == [1]
    assert report.processed == 1 and report.retried == 0
    stats = h.stats()
    assert (stats.ready, stats.in_flight) == (0, 0)


def test_graceful_shutdown_loses_nothing(
    combo: tuple[str, str], request: pytest.FixtureRequest, cleanup: list[Harness]
) -> None:
    """Stopping while handlers run: they finish and are acked, the rest stays in the queue."""
    h = harness(combo, request)
    cleanup.append(h)
    for n in range(6):
        h.push({"n": n})
    h.start(lambda ctx: 0.4, concurrency=2, poll_wait=0.2)
    wait_until(lambda: h.status().in_flight == 2, what="two handlers running")
    report = h.stop(10.0)
    stats = h.stats()
    assert report.released == 0
    assert report.processed >= 2
    assert stats.in_flight == 0
    assert report.processed + (stats.ready or 0) == 6, f"{report} {stats}"


def test_shutdown_gives_back_what_outlives_the_grace(
    combo: tuple[str, str], request: pytest.FixtureRequest, cleanup: list[Harness]
) -> None:
    h = harness(combo, request)
    cleanup.append(h)
    h.push({"n": 1})
    h.start(lambda ctx: 3.0, concurrency=1, poll_wait=0.2)
    wait_until(lambda: h.status().in_flight == 1, what="the handler running")
    report = h.stop(0.2)
    assert report.released == 1
    stats = h.stats()
    assert (stats.ready, stats.in_flight) == (1, 0)


def test_a_release_at_the_end_of_the_grace_is_not_a_failure(
    combo: tuple[str, str], request: pytest.FixtureRequest, cleanup: list[Harness]
) -> None:
    """Issue 31: an event still running when the grace ends is given back without a failure:
    on its last attempt it is not dead-lettered, and it comes back with no error. (It was a
    nack before: the last attempt went to the dead-letter queue.)"""
    h = harness(combo, request, max_attempts=1)
    cleanup.append(h)
    h.push({"n": 1})
    h.start(lambda ctx: 3.0, concurrency=1, poll_wait=0.2)
    wait_until(lambda: h.status().in_flight == 1, what="the handler running")
    report = h.stop(0.2)
    assert (report.released, report.dead_lettered, report.retried) == (1, 0, 0)
    stats = h.stats()
    assert (stats.ready, stats.in_flight, stats.dead_lettered) == (1, 0, 0)
    assert h.dead_letters() == []
    again = h._q("pop", wait=2.0)
    assert again is not None
    assert again.envelope.last_error is None


def test_on_empty_runs_once_the_queue_emptied(
    combo: tuple[str, str], request: pytest.FixtureRequest, cleanup: list[Harness]
) -> None:
    h = harness(combo, request)
    cleanup.append(h)
    empties: list[EmptyContext] = []
    for n in range(3):
        h.push({"n": n})
    h.start(lambda ctx: 0.0, concurrency=2, on_empty=empties.append, poll_wait=0.2)
    wait_until(lambda: len(empties) >= 1, what="on_empty")
    h.stop(5.0)
    assert empties[0].processed_count == 3


def test_next_steps_are_stored_with_the_ack_and_not_from_a_failed_attempt(
    combo: tuple[str, str], request: pytest.FixtureRequest, cleanup: list[Harness]
) -> None:
    """Both attempts add a next step; the first fails, so only the second's is stored, with the
    event's ack, and it is delivered from its queue. (Memory cannot chain: the next test.)"""
    if combo[0] != "sluice":
        pytest.skip("only sluice enqueues next steps in the ack's commit")
    h = harness(combo, request)
    cleanup.append(h)
    server: SluiceServer = request.getfixturevalue("sluice_server")
    target = SluiceQueue(unique("next"), url=server.url)
    try:
        target.ensure()

        def behavior(ctx: Context[Any]) -> float:
            # The id differs per attempt, so dedup cannot hide a step stored by the failed one.
            payload = {"order": ctx.event["order"], "attempt": ctx.attempt}
            ctx.add_next_step(target.name, payload, id=f"ship-{ctx.attempt}", key="k")
            if ctx.attempt == 1:
                raise RuntimeError("flaky")
            return 0.0

        h.push({"order": 7})
        h.start(behavior, concurrency=2, retry=RetryPolicy(delay=0.01), poll_wait=0.2)
        wait_until(lambda: h.status().processed == 1, what="the event acked")
        report = h.stop(5.0)
        assert (report.processed, report.retried) == (1, 1)
        task = target.pop(wait=2.0)
        assert task is not None
        assert task.payload == {"order": 7, "attempt": 2}
        assert (task.envelope.idempotency_id, task.envelope.key) == ("ship-2", "k")
        target.ack(task)
        assert target.stats().ready == 0
    finally:
        target.close()


def test_a_backend_without_chaining_refuses_next_steps(
    combo: tuple[str, str], request: pytest.FixtureRequest, cleanup: list[Harness]
) -> None:
    """On memory `ctx.add_next_step` raises `Unsupported`: the attempt fails with it (here
    dead-lettered) rather than the step being enqueued apart from the ack."""
    if combo[0] == "sluice":
        pytest.skip("sluice can chain")
    h = harness(combo, request)
    cleanup.append(h)
    hooks: list[DeadLetterContext[Any]] = []

    def behavior(ctx: Context[Any]) -> float:
        ctx.add_next_step("elsewhere", {"n": 1})
        return 0.0

    h.push({"n": 1})
    retry = RetryPolicy(max_attempts=1)
    h.start(behavior, concurrency=1, retry=retry, on_dead_letter=hooks.append, poll_wait=0.2)
    wait_until(lambda: len(hooks) == 1, what="the refused attempt dead-lettered")
    report = h.stop(5.0)
    assert isinstance(hooks[0].error, Unsupported)
    assert hooks[0].error.backend == "memory"
    assert report.processed == 0 and report.dead_lettered == 1
    error = h.dead_letters()[0].error
    assert error is not None and error.startswith("Unsupported: memory cannot ack with next steps")


def test_pause_resume_enqueue_cancel_and_status(
    combo: tuple[str, str], request: pytest.FixtureRequest, cleanup: list[Harness]
) -> None:
    h = harness(combo, request)
    cleanup.append(h)
    contexts: list[Context[Any]] = []

    def behavior(ctx: Context[Any]) -> float:
        contexts.append(ctx)
        return 0.0

    h.start(behavior, concurrency=2, poll_wait=0.2)
    h.worker_call("pause")
    first = h.worker_call("enqueue", {"n": 1}, id="first")
    again = h.worker_call("enqueue", {"n": 1}, id="first")
    later = h.worker_call("enqueue", {"n": 2}, delay=60.0)
    assert (first.created, first.position) == (True, 0)
    assert (again.created, again.event_id) == (False, first.event_id)
    many = h.worker_call("enqueue_many", [{"n": 3}, {"n": 4}])
    assert [result.created for result in many] == [True, True]
    status = h.status()
    assert status.paused and status.processed == 0 and status.concurrency == 2
    cancelled = h.worker_call("cancel", later.event_id, "not needed")
    assert cancelled.outcome == "cancelled"
    h.worker_call("resume")
    wait_until(lambda: h.status().processed == 3, what="three processed after resume")
    assert h.worker_call("drain", 5.0) is True
    h.stop(5.0)
    assert sorted(ctx.event["n"] for ctx in contexts) == [1, 3, 4]
    one = next(ctx for ctx in contexts if ctx.event["n"] == 1)
    # A receive under way at the pause may have brought it and given it back: unstarted, that
    # delivery is not counted.
    assert one.event_id == first.event_id and one.attempt == 1
    assert one.idempotency_id == "first"
    assert 0 <= one.instance_index < 2
    assert sorted(ctx.processed_count for ctx in contexts)[0] == 0


def test_a_pause_releases_what_a_receive_under_way_brings(
    combo: tuple[str, str], request: pytest.FixtureRequest, cleanup: list[Harness]
) -> None:
    """Issue 33: `pause()` takes effect at once. A message that a receive already waiting when
    the pause came brings is given back to the queue (ready for other consumers), not run and
    not held by the paused worker."""
    h = harness(combo, request, real_time=True)
    cleanup.append(h)
    ran: list[Context[Any]] = []

    def behavior(ctx: Context[Any]) -> float:
        ran.append(ctx)
        return 0.0

    h.start(behavior, concurrency=1, poll_wait=1.0)
    time.sleep(0.3)  # the worker's receive is waiting now (a long poll of 1 s)
    h.worker_call("pause")
    h.push({"n": 1})
    wait_until(
        lambda: h.stats().ready == 1 and h.stats().in_flight == 0,
        what="the message back in the queue, not held by the paused worker",
    )
    time.sleep(1.2)  # a whole poll later, still nothing ran
    assert ran == [] and h.status().processed == 0
    h.worker_call("resume")
    wait_until(lambda: h.status().processed == 1, what="the message processed after resume")
    # Given back unstarted: the delivery the pause gave back was not counted.
    assert ran[0].attempt == 1


def test_per_instance_pause_resume_drain_and_status(
    combo: tuple[str, str], request: pytest.FixtureRequest, cleanup: list[Harness]
) -> None:
    """Issue 33: per-instance control. A paused instance takes nothing new while the others go
    on; `drain(instance=i)` waits for its event and leaves it paused; `instance_status` and the
    worker's `pending` count exactly what this worker holds."""
    h = harness(combo, request, real_time=True)
    cleanup.append(h)
    ran: list[Context[Any]] = []

    def behavior(ctx: Context[Any]) -> float:
        ran.append(ctx)
        return 0.5

    h.start(behavior, concurrency=2, poll_wait=0.2)
    with pytest.raises(IndexError):
        h.worker_call("instance_status", 2)
    h.worker_call("pause", instance=1)
    assert h.worker_call("instance_status", 1).state == "paused"
    h.push({"n": 1})
    h.push({"n": 2})
    wait_until(lambda: len(ran) == 1, what="the first event running")
    running = h.worker_call("instance_status", 0)
    assert (running.state, running.pending) == ("processing", 1)
    assert h.status().pending == 1, "one at a time: instance 1 is paused"
    wait_until(lambda: len(ran) == 2, what="the second event, on instance 0 too")
    assert h.worker_call("drain", 5.0, instance=0) is True
    assert h.worker_call("instance_status", 0).state == "paused"
    assert h.status().processed == 2
    h.push({"n": 3})
    time.sleep(0.6)
    assert len(ran) == 2, "both instances are paused"
    h.worker_call("resume", instance=1)
    wait_until(lambda: h.status().processed == 3, what="the third event after resume")
    assert [ctx.instance_index for ctx in ran] == [0, 0, 1]
    # The others this worker held when each started: at most the previous one, if its ack
    # had not landed yet.
    assert ran[0].pending_count == 0
    assert all(ctx.pending_count <= 1 for ctx in ran)
    assert h.worker_call("instance_status", 1).processed == 1
    assert h.status().pending == 0


class AckGate:
    """Holds the worker's first `ack_many` until `open()`, recording the task ids of each."""

    def __init__(self, h: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[list[str]] = []
        self._gate = threading.Event()
        if h.flavor == "sync":
            sync_original = h.sync_queue.ack_many

            def gated(tasks: Sequence[Task]) -> list[bool]:
                self.calls.append([task.task_id for task in tasks])
                if len(self.calls) == 1:
                    self._gate.wait(GATE_TIMEOUT_S)
                return sync_original(tasks)  # type: ignore[no-any-return]

            monkeypatch.setattr(h.sync_queue, "ack_many", gated)
        else:
            async_original = h.async_queue.ack_many

            async def async_gated(tasks: Sequence[Task]) -> list[bool]:
                self.calls.append([task.task_id for task in tasks])
                if len(self.calls) == 1:
                    await asyncio.to_thread(self._gate.wait, GATE_TIMEOUT_S)
                return await async_original(tasks)  # type: ignore[no-any-return]

            monkeypatch.setattr(h.async_queue, "ack_many", async_gated)

    def open(self) -> None:
        self._gate.set()


GATE_TIMEOUT_S = 10.0


def test_acks_wait_while_one_is_under_way_and_go_together(
    combo: tuple[str, str],
    request: pytest.FixtureRequest,
    cleanup: list[Harness],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Eight events on eight slots: the first finishes at once and its ack is held under way;
    the other seven finish 0.2 s later, wait, and then go together in one second request."""
    h = harness(combo, request)
    cleanup.append(h)
    gate = AckGate(h, monkeypatch)
    ids = [h.push({"n": n}).event_id for n in range(8)]
    handled: list[str] = []

    def behavior(ctx: Context[Any]) -> float:
        handled.append(ctx.event_id)
        return 0.0 if ctx.event_id == ids[0] else 0.2

    h.start(behavior, concurrency=8, poll_wait=0.2)
    wait_until(lambda: len(handled) == 8 and h.status().in_flight == 0, what="8 handled")
    assert gate.calls == [[ids[0]]]
    assert h.status().processed == 0
    gate.open()
    wait_until(lambda: h.status().processed == 8, what="8 acked")
    report = h.stop(5.0)
    assert len(gate.calls) == 2, gate.calls
    assert sorted(gate.calls[1]) == sorted(ids[1:])
    assert report.processed == 8


def test_a_stale_receipt_in_a_coalesced_ack_fails_that_event_only(
    combo: tuple[str, str],
    request: pytest.FixtureRequest,
    cleanup: list[Harness],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Six events; one loses its lease while its handler runs (another consumer acks it with
    the same receipt). Its ack goes with four others behind a first one held under way, and
    fails for it alone: five count as processed and one warning names it."""
    h = harness(combo, request)
    cleanup.append(h)
    gate = AckGate(h, monkeypatch)
    other: Any
    if h.memory is not None:
        other = h.memory
    else:
        server: SluiceServer = request.getfixturevalue("sluice_server")
        name = h.sync_queue.name if h.flavor == "sync" else h.async_queue.name
        other = SluiceQueue(name, url=server.url)
    ids = [h.push({"n": n}).event_id for n in range(6)]
    doomed = ids[3]

    def behavior(ctx: Context[Any]) -> float:
        if ctx.event_id == ids[0]:
            return 0.0
        if ctx.event_id == doomed:
            other.ack(ctx.task)
        return 0.2

    caplog.set_level(logging.WARNING, logger="sluice_client.worker")
    h.start(behavior, concurrency=6, poll_wait=0.2)
    wait_until(lambda: len(gate.calls) == 1 and h.status().in_flight == 0, what="all handled")
    gate.open()
    wait_until(lambda: h.status().processed == 5, what="five acked")
    report = h.stop(5.0)
    assert gate.calls[0] == [ids[0]] and sorted(gate.calls[1]) == sorted(ids[1:]), gate.calls
    assert report.processed == 5
    failed = [r.getMessage() for r in caplog.records if r.getMessage().startswith("ack of")]
    assert len(failed) == 1 and doomed in failed[0], failed
    stats = h.stats()
    assert (stats.ready, stats.delayed, stats.in_flight) == (0, 0, 0)
    if h.memory is None:
        other.close()


def test_the_fetcher_leases_no_more_than_the_free_slots(
    combo: tuple[str, str], request: pytest.FixtureRequest, cleanup: list[Harness]
) -> None:
    """Six events, three slots, handlers of 2 s: while the three run, the queue has exactly
    three leased and three ready (a worker that leased ahead would hold more)."""
    h = harness(combo, request)
    cleanup.append(h)
    for n in range(6):
        h.push({"n": n})
    h.start(lambda ctx: 2.0, concurrency=3, poll_wait=0.2)
    wait_until(lambda: h.status().in_flight == 3, what="three running")
    seen: set[tuple[int | None, int | None]] = set()
    deadline = time.monotonic() + 0.6
    while time.monotonic() < deadline:
        stats = h.stats()
        seen.add((stats.ready, stats.in_flight))
        time.sleep(0.05)
    assert seen == {(3, 3)}, seen
    wait_until(lambda: h.status().processed == 6, what="all processed")
    h.stop(5.0)


def test_stop_sends_the_acks_under_way(
    combo: tuple[str, str],
    request: pytest.FixtureRequest,
    cleanup: list[Harness],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Stopping while acks wait behind one under way: the report counts them all, and the
    queue holds nothing."""
    h = harness(combo, request)
    cleanup.append(h)
    gate = AckGate(h, monkeypatch)
    for n in range(4):
        h.push({"n": n})
    h.start(lambda ctx: 0.0, concurrency=4, poll_wait=0.2)
    wait_until(lambda: len(gate.calls) == 1 and h.status().in_flight == 0, what="all handled")
    opener = threading.Timer(0.3, gate.open)
    opener.start()
    report = h.stop(5.0)
    opener.join()
    assert report.processed == 4 and report.released == 0
    stats = h.stats()
    assert (stats.ready, stats.in_flight) == (0, 0)


def test_successes_waiting_for_the_acker_are_bounded(
    combo: tuple[str, str],
    request: pytest.FixtureRequest,
    cleanup: list[Harness],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One slot (so two successes may wait) and the first ack held under way: the slot
    handles the events of that ack, two more that wait, and one more whose hand-over then
    waits (the slot stays busy, so nothing more is leased); once the ack lands all ten go.

    The first ack takes what waits when the acker wakes: the first success, or on a busy
    machine (the slot handing over the next one first) the first two."""
    h = harness(combo, request)
    cleanup.append(h)
    gate = AckGate(h, monkeypatch)
    for n in range(10):
        h.push({"n": n})
    handled: list[int] = []

    def behavior(ctx: Context[Any]) -> float:
        handled.append(ctx.event["n"])
        return 0.0

    h.start(behavior, concurrency=1, poll_wait=0.2)
    wait_until(lambda: len(gate.calls) == 1, what="the first ack under way")
    expected = len(gate.calls[0]) + 3
    wait_until(lambda: len(handled) >= expected, what=f"{expected} handled")
    time.sleep(0.3)
    assert len(handled) == expected and len(gate.calls) == 1, (handled, gate.calls)
    stats = h.stats()
    assert (stats.ready, stats.in_flight) == (10 - expected, expected), stats
    gate.open()
    wait_until(lambda: h.status().processed == 10, what="all ten acked")
    h.stop(5.0)
