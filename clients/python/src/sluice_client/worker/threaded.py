"""`Worker`: runs a handler over a queue's events on `concurrency` threads.

One fetcher thread leases events for the slots: each receive asks for as many as slots are free
(received events not yet finished by a handler count as busy), so nothing waits on a lease that
no slot can start, and it waits for a slot to free up when none is. Each slot thread decodes an
event and runs the handler while the worker's one heartbeat thread extends its lease (where the
backend can). A success goes to the acker thread, which acks in batches: an ack is sent at once
when none is under way, and the successes that arrive meanwhile go together in the next one
(`ack_many`). On failure the slot asks the `RetryPolicy` whether to retry after a delay or
dead-letter it (`on_dead_letter` then runs). A payload that does not decode is dead-lettered at
once. On shutdown (SIGTERM or SIGINT in `run()`, or `stop()`), the fetcher stops leasing, the
events it already leased are run, and running handlers get `shutdown_grace` seconds; an event
whose handler is still running after it is given back to the queue (a nack with no delay), and
its late result is dropped; the acks already handed to the acker are sent. The same rules as the
Rust SDK's worker (crates/sluice-sdk/src/worker.rs), in threads. A success whose handler added
next steps (`ctx.add_next_step`) is acked alone, with them, from its slot (`ack_then`).
"""

from __future__ import annotations

import functools
import logging
import signal
import threading
import time
from collections.abc import Callable, Sequence
from queue import Empty, SimpleQueue
from types import FrameType
from typing import Any, Generic, TypeVar

from ..errors import LeaseLost, SluiceError
from ..queues.base import CancelResult, Enqueued, NextStep, PushItem, QueueStats, Task, TaskQueue
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
"""How often the worker refreshes `pending_count`."""
ERROR_PAUSE_S = 1.0
"""How long the fetcher waits after a receive failed (the backend is down, say)."""


class Worker(Generic[T]):
    """Runs `handler` over the events of `queue` with at most `concurrency` at once.

    - `concurrency` (required): handlers running at once; pick what the work can take.
    - `retry`: `RetryPolicy` (`max_attempts`, `delay` or `backoff`, `is_retryable`).
    - `decode` / `encode`: payload to event and back (default: the JSON value itself).
    - `on_dead_letter(ctx)`, `on_empty(ctx)`: hooks (exceptions in them are logged).
    - `lease`: seconds each event is leased for (default: the queue's); renewed every third
      of it while the handler runs, where the backend can extend.
    - `poll_wait`: how long the fetcher waits in one receive (default 1 s; it also bounds how
      long `stop()` waits for the fetcher).
    - `shutdown_grace`: seconds running handlers get after shutdown starts (default 30).
    """

    def __init__(
        self,
        queue: TaskQueue,
        handler: Callable[[Context[T]], object],
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
        self._stop = threading.Event()
        self._resumed = threading.Event()
        self._resumed.set()
        self._threads: list[threading.Thread] = []
        self._released: set[str] = set()
        self._holding: dict[str, tuple[int, Task]] = {}
        self._hold_lock = threading.Lock()
        self._heartbeats: dict[str, tuple[Task, float, float]] = {}
        self._finished = threading.Event()
        self._report: WorkerReport | None = None
        self._handoff: SimpleQueue[Task | None] = SimpleQueue()
        """Leased events on their way to an idle slot; None tells a slot to end."""
        self._room = threading.Condition()
        self._held = 0
        """Events leased and not yet finished by a handler (under `_room`)."""
        self._acker = _Acker(queue, self._counters, WAITING_ACKS_PER_SLOT * concurrency)

    # Producing and operating, through the worker.

    def enqueue(
        self,
        event: T,
        *,
        id: str | None = None,
        key: str | None = None,
        delay: float | None = None,
        priority: int = 0,
    ) -> Enqueued:
        """Enqueues one event; `event_id`, `position`, `created` in the answer."""
        return self.queue.push(self.encode(event), id=id, key=key, delay=delay, priority=priority)

    def enqueue_many(self, events: Sequence[T | PushItem]) -> list[Enqueued]:
        """Enqueues many events in order; one answer each. An event given as a `PushItem`
        carries its options (`id`, `key`, `delay`, `priority`), as TypeScript's `envelope`."""
        return self.queue.push_many(push_items(events, self.encode))

    def cancel(self, event_id: str, reason: str | None = None) -> CancelResult:
        """Cancels an event not yet delivered; `reason` is kept as its last error where the
        backend keeps one (sluice, memory)."""
        result = self.queue.cancel(message_id=event_id, reason=reason)
        log.info("cancel %s: %s (%s)", event_id, result.outcome, reason)
        return result

    def status(self) -> WorkerStatus:
        """This instance's state, and the queue's numbers."""
        try:
            stats: QueueStats | None = self.queue.stats()
        except Exception as error:
            log.warning("stats failed: %s", error)
            stats = None
        running = bool(self._threads) and not self._finished.is_set()
        return self._counters.status(running, not self._resumed.is_set(), stats)

    def instance_status(self, index: int) -> SlotStatus:
        """What instance (slot) `index`, `0..concurrency-1`, does now: its state (`idle`,
        `processing`, `paused`), the event it runs, its processed and failed counts and what it
        holds. `IndexError` for an index the worker does not have."""
        return self._counters.slot_status(index, not self._resumed.is_set())

    def pause(self, instance: int | None = None) -> None:
        """This worker starts no handler until `resume()`; running handlers finish (an event
        the fetcher was already receiving is released, not run). With `instance`, only that
        slot takes nothing new once its event is done; the others go on, and the worker
        receives only for them (events waiting for a slot that none will take go back)."""
        if instance is None:
            self._resumed.clear()
            return
        self._counters.set_paused(instance, True)
        for task in self._excess():
            self._give_back(task)

    def resume(self, instance: int | None = None) -> None:
        if instance is None:
            self._resumed.set()
            return
        self._counters.set_paused(instance, False)
        with self._room:
            self._room.notify_all()

    def _excess(self) -> list[Task]:
        """Events waiting for a slot that no slot will take now (some were paused)."""
        taken: list[Task] = []
        with self._room:
            while self._held > self._counters.capacity():
                try:
                    task = self._handoff.get_nowait()
                except Empty:
                    break
                if task is None:
                    self._handoff.put(None)
                    break
                self._held -= 1
                self._counters.finished(None, "given_back")
                taken.append(task)
        return taken

    def drain(self, timeout: float, instance: int | None = None) -> bool:
        """Waits up to `timeout` seconds until the queue holds nothing ready, delayed or in
        flight and this worker holds nothing; True if so. (`Unsupported` on backends that
        cannot tell, such as RabbitMQ.) With `instance`: pauses that slot and waits until its
        event is done and settled (it stays paused until `resume(instance=...)`)."""
        deadline = time.monotonic() + timeout
        if instance is not None:
            self.pause(instance)
            while self._counters.holding(instance):
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.01)
            return True
        if not self.queue.drain(timeout):
            return False
        while self._counters.unsettled:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        return True

    # Running.

    def run(self) -> WorkerReport:
        """Runs until SIGTERM or SIGINT (handled while `run` runs, from the main thread) or
        `stop()`; answers what the run did."""
        restore: list[tuple[int, Any]] = []
        if threading.current_thread() is threading.main_thread():
            for number in (signal.SIGTERM, signal.SIGINT):
                restore.append((number, signal.signal(number, self._on_signal)))
        try:
            self.start()
            while not self._stop.wait(0.2):
                pass
            return self.stop()
        finally:
            for signal_number, previous in restore:
                signal.signal(signal_number, previous)

    def _on_signal(self, number: int, frame: FrameType | None) -> None:
        log.info("signal %s: shutting down", number)
        self._stop.set()

    def start(self) -> None:
        """Starts the fetcher, the slots and the acker and returns; `stop()` ends them."""
        if self._threads:
            raise RuntimeError("the worker is running already")
        self.queue.open()
        self._acker.start()
        targets: list[tuple[str, Callable[[], None]]] = [("sluice-fetcher", self._fetch)]
        targets.extend(
            (f"sluice-slot-{index}", functools.partial(self._slot, index))
            for index in range(self.concurrency)
        )
        targets.append(("sluice-heartbeat", self._heartbeat))
        targets.append(("sluice-pending", self._watch_pending))
        for name, target in targets:
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self, grace: float | None = None) -> WorkerReport:
        """Stops leasing, gives running handlers `grace` seconds (default `shutdown_grace`),
        gives back what still runs, sends the acks under way, and answers what the run did."""
        if self._report is not None:
            return self._report
        self._stop.set()
        self._resumed.set()
        with self._room:
            self._room.notify_all()
        deadline = time.monotonic() + (self.shutdown_grace if grace is None else grace)
        for thread in self._threads:
            thread.join(max(deadline - time.monotonic(), 0.0))
        with self._hold_lock:
            leftovers = list(self._holding.values())
            self._released.update(task.receipt for _, task in leftovers)
        for index, task in leftovers:
            self._release(index, task)
        for task in self._take_unstarted():
            self._release(None, task)
        self._acker.close(SETTLE_WAIT_S)
        self._finished.set()
        self._report = self._counters.report()
        return self._report

    def _take_unstarted(self) -> list[Task]:
        """Events leased that no slot took within the grace (every slot was busy)."""
        unstarted: list[Task] = []
        while True:
            try:
                task = self._handoff.get_nowait()
            except Empty:
                break
            if task is not None:
                unstarted.append(task)
        # A slot still busy ends when its handler is over.
        for _ in range(self.concurrency):
            self._handoff.put(None)
        return unstarted

    def _release(self, index: int | None, task: Task) -> None:
        self._counters.finished(index, "released")
        self._give_back(task, unstarted=index is None)

    def _give_back(self, task: Task, unstarted: bool = True) -> None:
        """Gives `task` back; `unstarted` (the default: a message no handler ran) is not
        counted as a delivery where the backend can."""
        try:
            self.queue.release(task, unstarted=unstarted)
        except Exception as error:
            log.warning("release of %s failed (its lease will run out): %s", task.task_id, error)

    # The fetcher.

    def _fetch(self) -> None:
        try:
            while not self._stop.is_set():
                if not self._resumed.wait(0.2):
                    continue
                free = self._wait_for_room()
                if free == 0 or not self._resumed.is_set():
                    continue
                try:
                    tasks = self.queue.receive(
                        min(free, RECEIVE_MAX), visibility_timeout=self.lease, wait=self.poll_wait
                    )
                except Exception as error:
                    log.warning("receive failed; again in %s s: %s", ERROR_PAUSE_S, error)
                    self._stop.wait(ERROR_PAUSE_S)
                    continue
                if not tasks:
                    self._maybe_empty()
                    continue
                if self._finished.is_set():
                    # Received after `stop()` gave up on this thread: nobody will run them.
                    for task in tasks:
                        self._give_back(task)
                    return
                if not self._resumed.is_set():
                    # Paused while this receive was under way: nothing more runs. What it
                    # brought goes back at once as a release (not a failure), for a consumer
                    # that is not paused.
                    for task in tasks:
                        self._give_back(task)
                    continue
                # Instances paused while it was under way: what they cannot take goes back.
                room = max(0, self._counters.capacity() - self._held)
                for task in tasks[room:]:
                    self._give_back(task)
                tasks = tasks[:room]
                self._counters.received(len(tasks))
                with self._room:
                    self._held += len(tasks)
                for task in tasks:
                    self._handoff.put(task)
        finally:
            for _ in range(self.concurrency):
                self._handoff.put(None)

    def _wait_for_room(self) -> int:
        """Waits until a slot is free (or the worker stops); answers how many are (0: stop)."""
        with self._room:
            while self._held >= self._counters.capacity() and not self._stop.is_set():
                self._room.wait(0.2)
            return 0 if self._stop.is_set() else max(0, self._counters.capacity() - self._held)

    # The slots.

    def _slot(self, index: int) -> None:
        while True:
            while self._counters.slot(index).paused and not self._stop.wait(0.05):
                pass
            task = self._handoff.get()
            if task is None:
                return
            if self._counters.slot(index).paused:
                # Paused while it waited: the event is another instance's.
                self._handoff.put(task)
                continue
            try:
                if not self._resumed.is_set():
                    self._hold_while_paused(task)
                self._process(index, task)
            finally:
                with self._room:
                    self._held -= 1
                    self._room.notify()

    def _hold_while_paused(self, task: Task) -> None:
        """An event leased by a receive that was waiting when `pause()` came: it runs only after
        `resume()` (or at shutdown), its lease kept meanwhile where the backend can."""
        self._watch_lease(task)
        while not self._resumed.wait(0.2):
            pass
        self._heartbeats.pop(task.receipt, None)

    def _process(self, index: int, task: Task) -> None:
        envelope = task.envelope
        processed, others = self._counters.started(index, task.task_id, self.queue.now())
        try:
            event = self.decode(envelope.payload)
        except Exception as error:
            self._counters.slot_free(index)
            self._nack_undecodable(index, task, error)
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
        with self._hold_lock:
            self._holding[task.receipt] = (index, task)
        self._watch_lease(task)
        failure: BaseException | None = None
        result: Any = None
        try:
            result = ack_result(self.handler(ctx))
        except Exception as error:
            failure = error
        finally:
            self._heartbeats.pop(task.receipt, None)
            with self._hold_lock:
                self._holding.pop(task.receipt, None)
                released = task.receipt in self._released
            self._counters.slot_free(index)
        if released:
            # Given back at the end of the shutdown grace; this late result has no lease.
            return
        if failure is None and (ctx.next_steps or result is not None):
            self._ack_then(index, task, ctx.next_steps, result)
        elif failure is None:
            self._acker.submit(index, task)
        else:
            self._fail(index, task, event, failure)

    def _ack_then(self, index: int, task: Task, then: list[NextStep], result: Any) -> None:
        """Acks with next steps or a result, alone and from the slot (the acker's batches carry
        receipts only), so the steps are stored in the ack's own commit. A failure is counted as
        the acker counts one."""
        acked: list[bool] | BaseException
        try:
            self.queue.ack_then(task, then, result)
        except LeaseLost:
            acked = [False]
        except Exception as error:
            acked = error
        else:
            acked = [True]
        record_acks(self._counters, [(index, task)], acked)

    def _fail(self, index: int, task: Task, event: T, error: BaseException) -> None:
        decision = self.retry.decide(task.attempt, error)
        text = error_text(error)
        try:
            outcome = self._nack(task, text, decision.delay, decision.dead_letter)
        except Exception as nack_error:
            log.warning("nack of %s failed (its lease will run out): %s", task.task_id, nack_error)
            self._counters.finished(index, "lost")
            return
        self._counters.finished(index, outcome)
        if outcome == "dead_lettered" and self.on_dead_letter is not None:
            hook_ctx = DeadLetterContext(
                event=event,
                error=error,
                event_id=task.task_id,
                attempt=task.attempt,
                enqueued_at=as_datetime(task.envelope.enqueued_at),
                failed_at=as_datetime(self.queue.now()),
            )
            try:
                self.on_dead_letter(hook_ctx)
            except Exception as hook_error:
                log.exception("on_dead_letter failed: %s", hook_error)

    def _nack(self, task: Task, text: str, delay: float, permanent: bool) -> str:
        try:
            return self.queue.nack(task, text, delay=delay, permanent=permanent)
        except SluiceError as error:
            if not (permanent and error.code == "invalid_field"):
                raise
            # A queue without a dead-letter queue keeps every message: retry instead.
            log.warning("cannot dead-letter %s (no dead-letter queue); retrying", task.task_id)
            return self.queue.nack(task, text, delay=delay)

    def _nack_undecodable(self, index: int, task: Task, error: Exception) -> None:
        try:
            self._nack(task, f"cannot decode the event: {error_text(error)}", 0.0, True)
            self._counters.finished(index, "dead_lettered")
        except Exception as nack_error:
            log.warning("nack of undecodable %s failed: %s", task.task_id, nack_error)
            self._counters.finished(index, "lost")

    def _maybe_empty(self) -> None:
        if self.on_empty is None or not self._counters.take_empty_check():
            return
        try:
            stats = self.queue.stats()
        except Exception:
            self._counters.rearm()
            return
        if not queue_is_empty(stats):
            # Not empty yet (another worker is busy): look again at the next empty receive.
            self._counters.rearm()
            return
        try:
            self.on_empty(EmptyContext(self._counters.processed))
        except Exception as error:
            log.exception("on_empty failed: %s", error)

    # Background threads.

    def _watch_lease(self, task: Task) -> None:
        lease = task.envelope.visibility_timeout
        if not self.queue.capabilities.extend or not lease:
            return
        self._heartbeats[task.receipt] = (task, lease, time.monotonic() + lease / 3)

    def _heartbeat(self) -> None:
        """Extends every running event's lease each third of it: one thread for all of them,
        so a short handler costs a dictionary entry, not a timer."""
        while not self._finished.is_set():
            if self._stop.is_set() and not self._heartbeats:
                return
            time.sleep(HEARTBEAT_TICK_S)
            now = time.monotonic()
            for receipt, (task, lease, due) in list(self._heartbeats.items()):
                if due > now:
                    continue
                try:
                    self.queue.extend_visibility(task, lease)
                except Exception as error:
                    log.warning("lease extension of %s failed: %s", task.task_id, error)
                    self._heartbeats.pop(receipt, None)
                    continue
                if receipt in self._heartbeats:
                    self._heartbeats[receipt] = (task, lease, now + lease / 3)

    def _watch_pending(self) -> None:
        while not self._stop.is_set():
            try:
                self._counters.pending = pending_of(self.queue.stats())
            except Exception as error:
                log.debug("stats failed: %s", error)
            self._stop.wait(PENDING_EVERY_S)


class _Acker:
    """Acks the events whose handler succeeded, coalesced without timers: when no ack request
    is under way the next one goes at once, and what arrives while one is under way goes
    together in the one after it (up to `ACK_BATCH_MAX`). At most `limit` successes wait for
    the next request; past that, `submit` waits. Counts each event's outcome exactly."""

    def __init__(self, queue: TaskQueue, counters: Counters, limit: int) -> None:
        self._queue = queue
        self._counters = counters
        self._limit = limit
        lock = threading.Lock()
        self._has_work = threading.Condition(lock)
        self._has_room = threading.Condition(lock)
        self._waiting: list[tuple[int, Task]] = []
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="sluice-acker", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def submit(self, index: int, task: Task) -> None:
        """Hands over a success of slot `index`; waits while `limit` successes wait."""
        with self._has_room:
            while len(self._waiting) >= self._limit and not self._closing:
                self._has_room.wait()
            if not self._closing:
                self._waiting.append((index, task))
                self._has_work.notify()
                return
        # A handler that ended after the worker stopped, within the grace: acked here.
        self._send([(index, task)])

    def close(self, timeout: float) -> None:
        """Sends what waits, then ends; bounded by `timeout` seconds."""
        with self._has_work:
            self._closing = True
            self._has_work.notify()
            self._has_room.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout)
        if self._thread.is_alive():
            log.warning("some acks did not finish before the worker stopped")

    def _run(self) -> None:
        while True:
            with self._has_work:
                while not self._waiting and not self._closing:
                    self._has_work.wait()
                if not self._waiting:
                    return
                batch = self._waiting[:ACK_BATCH_MAX]
                del self._waiting[:ACK_BATCH_MAX]
                self._has_room.notify_all()
            self._send(batch)

    def _send(self, batch: list[tuple[int, Task]]) -> None:
        try:
            acked: list[bool] | BaseException = self._queue.ack_many([task for _, task in batch])
        except Exception as error:
            acked = error
        record_acks(self._counters, batch, acked)
