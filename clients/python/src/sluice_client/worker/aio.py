"""`AsyncWorker`: the worker for asyncio, over any `AsyncTaskQueue`.

The same rules as `Worker` (threads), in tasks: one fetcher task leases as many events as slots
are free and hands them to `concurrency` slot tasks; one heartbeat task extends the lease of
every event whose coroutine handler runs; successes go to one acker task, which coalesces them
into `ack_many` requests (sent at once when none is under way), except those with next
steps (`ctx.add_next_step`), acked alone with them (`ack_then`); failures follow the
`RetryPolicy`; shutdown (SIGTERM or SIGINT in `run()`, or `stop()`) stops the fetcher,
gives running handlers `shutdown_grace` seconds, then cancels them and gives their events
back, and sends the acks under way.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import signal
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, TypeVar, cast

from ..errors import LeaseLost, SluiceError
from ..queues.base import (
    AsyncTaskQueue,
    CancelResult,
    Enqueued,
    NextStep,
    PushItem,
    QueueStats,
    Task,
)
from .policy import RetryPolicy
from .state import (
    ACK_BATCH_MAX,
    HEARTBEAT_TICK_S,
    RECEIVE_MAX,
    SETTLE_WAIT_S,
    WAITING_ACKS_PER_SLOT,
    Context,
    Counters,
    DeadLetterContext,
    EmptyContext,
    SlotStatus,
    WorkerReport,
    WorkerStatus,
    ack_result,
    as_datetime,
    error_text,
    identity,
    pending_of,
    push_items,
    queue_is_empty,
    record_acks,
)

T = TypeVar("T")
log = logging.getLogger("sluice_client.worker")

PENDING_EVERY_S = 0.5
ERROR_PAUSE_S = 1.0

Hook = Callable[[Any], object]
"""A hook: a function or a coroutine function of its context."""


class AsyncWorker(Generic[T]):
    """Runs the coroutine `handler` over the events of `queue`, at most `concurrency` at once.
    The options are `Worker`'s; hooks may be functions or coroutine functions."""

    def __init__(
        self,
        queue: AsyncTaskQueue,
        handler: Callable[[Context[T]], Awaitable[object]],
        *,
        concurrency: int,
        retry: RetryPolicy | None = None,
        decode: Callable[[Any], T] = identity,
        encode: Callable[[T], Any] = identity,
        on_dead_letter: Callable[[DeadLetterContext[T]], object] | None = None,
        on_empty: Callable[[EmptyContext], object] | None = None,
        lease: float | None = None,
        poll_wait: float = 1.0,
        shutdown_grace: float = 30.0,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.queue = queue
        self.handler = handler
        self.concurrency = concurrency
        self.retry = retry or RetryPolicy()
        self.decode = decode
        self.encode = encode
        self.on_dead_letter = on_dead_letter
        self.on_empty = on_empty
        self.lease = lease
        self.poll_wait = poll_wait
        self.shutdown_grace = shutdown_grace
        self._counters = Counters(concurrency)
        self._stop = asyncio.Event()
        self._resumed = asyncio.Event()
        self._resumed.set()
        self._slot_resumed = [asyncio.Event() for _ in range(concurrency)]
        """Per instance: set unless `pause(instance=i)`."""
        for event in self._slot_resumed:
            event.set()
        self._slots: list[asyncio.Task[None]] = []
        self._fetcher: asyncio.Task[None] | None = None
        self._background: list[asyncio.Task[None]] = []
        self._holding: dict[str, tuple[int, Task]] = {}
        self._released: set[str] = set()
        self._report: WorkerReport | None = None
        self._handoff: asyncio.Queue[Task | None] = asyncio.Queue()
        """Leased events on their way to an idle slot; None tells a slot to end."""
        self._held = 0
        """Events leased and not yet finished by a handler."""
        self._room = asyncio.Event()
        """Set when a slot frees up (or the worker stops)."""
        self._heartbeats: dict[str, tuple[Task, float, float]] = {}
        """Per receipt: the task, its lease, and when it is due for extension."""
        self._acker = _AsyncAcker(queue, self._counters, WAITING_ACKS_PER_SLOT * concurrency)

    async def enqueue(
        self,
        event: T,
        *,
        id: str | None = None,
        key: str | None = None,
        delay: float | None = None,
        priority: int = 0,
    ) -> Enqueued:
        """Enqueues one event; `event_id`, `position`, `created` in the answer."""
        return await self.queue.push(
            self.encode(event), id=id, key=key, delay=delay, priority=priority
        )

    async def enqueue_many(self, events: Sequence[T | PushItem]) -> list[Enqueued]:
        """Enqueues many events in order; one answer each. An event given as a `PushItem`
        carries its options (`id`, `key`, `delay`, `priority`), as TypeScript's `envelope`."""
        return await self.queue.push_many(push_items(events, self.encode))

    async def cancel(self, event_id: str, reason: str | None = None) -> CancelResult:
        """Cancels an event not yet delivered (see `Worker.cancel`)."""
        result = await self.queue.cancel(message_id=event_id, reason=reason)
        log.info("cancel %s: %s (%s)", event_id, result.outcome, reason)
        return result

    async def status(self) -> WorkerStatus:
        """This instance's state, and the queue's numbers."""
        try:
            stats: QueueStats | None = await self.queue.stats()
        except Exception as error:
            log.warning("stats failed: %s", error)
            stats = None
        running = bool(self._slots) and self._report is None
        return self._counters.status(running, not self._resumed.is_set(), stats)

    def instance_status(self, index: int) -> SlotStatus:
        """What instance (slot) `index` does now (see `Worker.instance_status`)."""
        return self._counters.slot_status(index, not self._resumed.is_set())

    def pause(self, instance: int | None = None) -> None:
        """This worker starts no handler until `resume()`; or, with `instance`, only that slot
        takes nothing new (see `Worker.pause`)."""
        if instance is None:
            self._resumed.clear()
            return
        self._counters.set_paused(instance, True)
        self._slot_resumed[instance].clear()
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return  # Not running: nothing was received.
        for task in self._excess():
            self._background.append(asyncio.create_task(self._give_back(task)))

    def resume(self, instance: int | None = None) -> None:
        if instance is None:
            self._resumed.set()
            return
        self._counters.set_paused(instance, False)
        self._slot_resumed[instance].set()
        self._room.set()

    def _excess(self) -> list[Task]:
        """Events waiting for a slot that no slot will take now (some were paused)."""
        taken: list[Task] = []
        while self._held > self._counters.capacity() and not self._handoff.empty():
            task = self._handoff.get_nowait()
            if task is None:
                self._handoff.put_nowait(None)
                break
            self._held -= 1
            self._counters.finished(None, "given_back")
            taken.append(task)
        return taken

    async def drain(self, timeout: float, instance: int | None = None) -> bool:
        """Waits up to `timeout` seconds until the queue is empty and this worker holds
        nothing; True if so. With `instance`: pauses that slot and waits until its event is
        done and settled (it stays paused until `resume(instance=...)`)."""
        deadline = time.monotonic() + timeout
        if instance is not None:
            self.pause(instance)
            while self._counters.holding(instance):
                if time.monotonic() >= deadline:
                    return False
                await asyncio.sleep(0.01)
            return True
        if not await self.queue.drain(timeout):
            return False
        while self._counters.unsettled:
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.01)
        return True

    async def run(self) -> WorkerReport:
        """Runs until SIGTERM or SIGINT or `stop()`; answers what the run did."""
        loop = asyncio.get_running_loop()
        installed: list[signal.Signals] = []
        for number in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(number, self._stop.set)
                installed.append(number)
        try:
            await self.start()
            await self._stop.wait()
            return await self.stop()
        finally:
            for number in installed:
                loop.remove_signal_handler(number)

    async def start(self) -> None:
        """Starts the fetcher, the slots and the acker and returns; `stop()` ends them."""
        if self._slots:
            raise RuntimeError("the worker is running already")
        await self.queue.open()
        self._acker.start()
        self._fetcher = asyncio.create_task(self._fetch(), name="sluice-fetcher")
        self._slots = [
            asyncio.create_task(self._slot(index), name=f"sluice-slot-{index}")
            for index in range(self.concurrency)
        ]
        self._background = [
            asyncio.create_task(self._heartbeat(), name="sluice-heartbeat"),
            asyncio.create_task(self._watch_pending(), name="sluice-pending"),
        ]

    async def stop(self, grace: float | None = None) -> WorkerReport:
        """Stops leasing, gives running handlers `grace` seconds (default `shutdown_grace`),
        cancels and gives back what still runs, sends the acks under way, and answers what the
        run did."""
        if self._report is not None:
            return self._report
        self._stop.set()
        self._resumed.set()
        for event in self._slot_resumed:
            event.set()
        self._room.set()
        if self._fetcher is not None:
            _, late = await asyncio.wait(
                [self._fetcher, *self._slots],
                timeout=self.shutdown_grace if grace is None else grace,
            )
            leftovers = list(self._holding.values())
            self._released.update(task.receipt for _, task in leftovers)
            for slot in late:
                slot.cancel()
            await asyncio.gather(*late, return_exceptions=True)
            for index, task in leftovers:
                await self._release(index, task)
            while not self._handoff.empty():
                # Leased, but no slot took it within the grace (every slot was busy).
                unstarted = self._handoff.get_nowait()
                if unstarted is not None:
                    await self._release(None, unstarted)
            await self._acker.close(SETTLE_WAIT_S)
        for background in self._background:
            background.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        self._report = self._counters.report()
        return self._report

    async def _release(self, index: int | None, task: Task) -> None:
        self._counters.finished(index, "released")
        await self._give_back(task, unstarted=index is None)

    async def _give_back(self, task: Task, unstarted: bool = True) -> None:
        """Gives `task` back; `unstarted` (the default: a message no handler ran) is not
        counted as a delivery where the backend can."""
        try:
            await self.queue.release(task, unstarted=unstarted)
        except Exception as error:
            log.warning("release of %s failed (its lease will run out): %s", task.task_id, error)

    async def _fetch(self) -> None:
        """Leases as many events as slots are free, in one receive, and hands them over."""
        try:
            while not self._stop.is_set():
                await self._resumed.wait()
                while self._held >= self._counters.capacity() and not self._stop.is_set():
                    self._room.clear()
                    await self._room.wait()
                if self._stop.is_set() or not self._resumed.is_set():
                    continue
                free = self._counters.capacity() - self._held
                try:
                    tasks = await self.queue.receive(
                        min(free, RECEIVE_MAX), visibility_timeout=self.lease, wait=self.poll_wait
                    )
                except Exception as error:
                    log.warning("receive failed; again in %s s: %s", ERROR_PAUSE_S, error)
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(self._stop.wait(), ERROR_PAUSE_S)
                    continue
                if not tasks:
                    await self._maybe_empty()
                    continue
                if not self._resumed.is_set():
                    # Paused while this receive was under way: nothing more runs. What it
                    # brought goes back at once as a release (not a failure), for a consumer
                    # that is not paused.
                    for task in tasks:
                        await self._give_back(task)
                    continue
                # Instances paused while it was under way: what they cannot take goes back.
                room = max(0, self._counters.capacity() - self._held)
                for task in tasks[room:]:
                    await self._give_back(task)
                tasks = tasks[:room]
                self._counters.received(len(tasks))
                self._held += len(tasks)
                for task in tasks:
                    self._handoff.put_nowait(task)
        finally:
            for _ in range(self.concurrency):
                self._handoff.put_nowait(None)

    async def _slot(self, index: int) -> None:
        while True:
            await self._slot_resumed[index].wait()
            task = await self._handoff.get()
            if task is None:
                return
            if not self._slot_resumed[index].is_set():
                # Paused while it waited: the event is another instance's.
                self._handoff.put_nowait(task)
                continue
            try:
                if not self._resumed.is_set():
                    # Leased by a receive that was waiting when `pause()` came: held, its
                    # lease kept, until `resume()` (or shutdown).
                    self._watch_lease(task)
                    try:
                        await self._resumed.wait()
                    finally:
                        self._heartbeats.pop(task.receipt, None)
                await self._process(index, task)
            finally:
                self._held -= 1
                self._room.set()

    async def _process(self, index: int, task: Task) -> None:
        envelope = task.envelope
        processed, others = self._counters.started(index, task.task_id, self.queue.now())
        try:
            event = self.decode(envelope.payload)
        except Exception as error:
            self._counters.slot_free(index)
            await self._settle_failure(index, task, None, error, undecodable=True)
            return
        ctx = Context(
            event=event,
            event_id=task.task_id,
            attempt=task.attempt,
            enqueued_at=as_datetime(envelope.enqueued_at),
            processing_started_at=as_datetime(self.queue.now()),
            instance_index=index,
            processed_count=processed,
            pending_count=others,
            queue_pending_count=self._counters.pending,
            idempotency_id=envelope.idempotency_id,
            task=task,
            backend=self.queue.backend,
            chaining=self.queue.capabilities.chaining,
        )
        self._holding[task.receipt] = (index, task)
        self._watch_lease(task)
        failure: BaseException | None = None
        result: Any = None
        try:
            result = ack_result(await self.handler(ctx))
        except Exception as error:
            failure = error
        finally:
            self._heartbeats.pop(task.receipt, None)
            self._holding.pop(task.receipt, None)
            self._counters.slot_free(index)
        if task.receipt in self._released:
            return
        if failure is None and (ctx.next_steps or result is not None):
            # Shielded: the ack and its next steps land even if the slot is cancelled.
            await asyncio.shield(self._ack_then(index, task, ctx.next_steps, result))
        elif failure is None:
            await self._acker.submit(index, task)
        else:
            # Shielded: a nack under way lands even if the slot is cancelled.
            await asyncio.shield(self._settle_failure(index, task, event, failure))

    async def _ack_then(self, index: int, task: Task, then: list[NextStep], result: Any) -> None:
        """Acks with next steps or a result, alone (the acker's batches carry receipts only),
        so the steps are stored in the ack's own commit. A failure is counted as the acker
        counts one."""
        acked: list[bool] | BaseException
        try:
            await self.queue.ack_then(task, then, result)
        except LeaseLost:
            acked = [False]
        except Exception as error:
            acked = error
        else:
            acked = [True]
        record_acks(self._counters, [(index, task)], acked)

    async def _settle_failure(
        self,
        index: int,
        task: Task,
        event: T | None,
        error: BaseException,
        undecodable: bool = False,
    ) -> None:
        if undecodable:
            text = f"cannot decode the event: {error_text(error)}"
            delay, dead = 0.0, True
        else:
            decision = self.retry.decide(task.attempt, error)
            text, delay, dead = error_text(error), decision.delay, decision.dead_letter
        try:
            outcome = await self._nack(task, text, delay, dead)
        except Exception as nack_error:
            log.warning("nack of %s failed (its lease will run out): %s", task.task_id, nack_error)
            self._counters.finished(index, "lost")
            return
        self._counters.finished(index, outcome)
        if outcome == "dead_lettered" and self.on_dead_letter is not None and not undecodable:
            hook_ctx = DeadLetterContext(
                event=cast(T, event),
                error=error,
                event_id=task.task_id,
                attempt=task.attempt,
                enqueued_at=as_datetime(task.envelope.enqueued_at),
                failed_at=as_datetime(self.queue.now()),
            )
            await _call_hook(self.on_dead_letter, hook_ctx, "on_dead_letter")

    async def _nack(self, task: Task, text: str, delay: float, permanent: bool) -> str:
        try:
            return await self.queue.nack(task, text, delay=delay, permanent=permanent)
        except SluiceError as error:
            if not (permanent and error.code == "invalid_field"):
                raise
            log.warning("cannot dead-letter %s (no dead-letter queue); retrying", task.task_id)
            return await self.queue.nack(task, text, delay=delay)

    async def _maybe_empty(self) -> None:
        if self.on_empty is None or not self._counters.take_empty_check():
            return
        try:
            stats = await self.queue.stats()
        except Exception:
            self._counters.rearm()
            return
        if not queue_is_empty(stats):
            self._counters.rearm()
            return
        await _call_hook(self.on_empty, EmptyContext(self._counters.processed), "on_empty")

    def _watch_lease(self, task: Task) -> None:
        lease = task.envelope.visibility_timeout
        if not self.queue.capabilities.extend or not lease:
            return
        self._heartbeats[task.receipt] = (task, lease, time.monotonic() + lease / 3)

    async def _heartbeat(self) -> None:
        """Extends every running event's lease each third of it: one task for all of them, so
        a short handler costs a dictionary entry, not a task and a timer."""
        while True:
            await asyncio.sleep(HEARTBEAT_TICK_S)
            now = time.monotonic()
            due = [entry for entry in self._heartbeats.items() if entry[1][2] <= now]
            if due:
                await asyncio.gather(
                    *(self._extend(receipt, task, lease) for receipt, (task, lease, _) in due)
                )

    async def _extend(self, receipt: str, task: Task, lease: float) -> None:
        try:
            await self.queue.extend_visibility(task, lease)
        except Exception as error:
            log.warning("lease extension of %s failed: %s", task.task_id, error)
            self._heartbeats.pop(receipt, None)
            return
        if receipt in self._heartbeats:
            self._heartbeats[receipt] = (task, lease, time.monotonic() + lease / 3)

    async def _watch_pending(self) -> None:
        while not self._stop.is_set():
            try:
                self._counters.pending = pending_of(await self.queue.stats())
            except Exception as error:
                log.debug("stats failed: %s", error)
            await asyncio.sleep(PENDING_EVERY_S)


class _AsyncAcker:
    """`Worker`'s acker for asyncio: coalesces the successes into `ack_many` requests, one
    under way at a time, without timers; at most `limit` successes wait for the next one."""

    def __init__(self, queue: AsyncTaskQueue, counters: Counters, limit: int) -> None:
        self._queue = queue
        self._counters = counters
        self._limit = limit
        self._waiting: list[tuple[int, Task]] = []
        self._has_work = asyncio.Event()
        self._has_room = asyncio.Event()
        self._closing = False
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="sluice-acker")

    async def submit(self, index: int, task: Task) -> None:
        """Hands over a success of slot `index`; waits while `limit` successes wait."""
        while len(self._waiting) >= self._limit and not self._closing:
            self._has_room.clear()
            try:
                await self._has_room.wait()
            except asyncio.CancelledError:
                # The slot is cancelled at the end of the grace: its ack still goes.
                self._add(index, task)
                raise
        if self._closing:
            # A handler that ended after the worker stopped, within the grace: acked here.
            await self._send([(index, task)])
        else:
            self._add(index, task)

    def _add(self, index: int, task: Task) -> None:
        self._waiting.append((index, task))
        self._has_work.set()

    async def close(self, timeout: float) -> None:
        """Sends what waits, then ends; bounded by `timeout` seconds."""
        self._closing = True
        self._has_work.set()
        self._has_room.set()
        if self._task is None:
            return
        done, _ = await asyncio.wait([self._task], timeout=timeout)
        if not done:
            log.warning("some acks did not finish before the worker stopped")
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            while not self._waiting:
                if self._closing:
                    return
                self._has_work.clear()
                await self._has_work.wait()
            batch = self._waiting[:ACK_BATCH_MAX]
            del self._waiting[:ACK_BATCH_MAX]
            self._has_room.set()
            await self._send(batch)

    async def _send(self, batch: list[tuple[int, Task]]) -> None:
        try:
            acked: list[bool] | BaseException = await self._queue.ack_many(
                [task for _, task in batch]
            )
        except Exception as error:
            acked = error
        record_acks(self._counters, batch, acked)


async def _call_hook(hook: Hook, ctx: object, name: str) -> None:
    try:
        result = hook(ctx)
        if inspect.isawaitable(result):
            await result
    except Exception as error:
        log.exception("%s failed: %s", name, error)
