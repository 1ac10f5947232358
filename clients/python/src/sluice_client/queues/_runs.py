"""`GroupRuns`: a FIFO receive hands several messages of one group at once (AWS does, and
sluice's SQS API as AWS), but a queue gives out one message of a key at a time (the
conformance scenario `per_key_order`): the next waits until the previous is acked. So the later
messages of a run wait here, still leased, and go out one by one as their group frees up. A
message that comes back (a retry, a release) sends the rest of its run back too, behind it.
Thread-safe."""

from __future__ import annotations

import threading
from collections.abc import Iterable

from .base import Task


class GroupRuns:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._out: dict[str, str] = {}
        """Per group given out: the receipt of its message out now."""
        self._group_of: dict[str, str] = {}
        """Per receipt out: its group."""
        self._waiting: dict[str, list[Task]] = {}
        """Per group: the later messages of its run, in order."""

    def take(self, received: Iterable[tuple[str | None, Task]]) -> list[Task]:
        """Of `received` (in SQS's order), those to give out now; the rest wait."""
        out: list[Task] = []
        with self._lock:
            for group, task in received:
                if group is None:
                    out.append(task)
                elif group in self._out or group in self._waiting:
                    self._waiting.setdefault(group, []).append(task)
                else:
                    self._give_out(group, task)
                    out.append(task)
        return out

    def ready(self, limit: int) -> list[Task]:
        """Up to `limit` waiting messages whose group is free, given out now."""
        out: list[Task] = []
        with self._lock:
            for group in list(self._waiting):
                if len(out) >= limit:
                    break
                if group in self._out:
                    continue
                run = self._waiting[group]
                task = run.pop(0)
                if not run:
                    del self._waiting[group]
                self._give_out(group, task)
                out.append(task)
        return out

    def done(self, receipt: str) -> None:
        """The message out under `receipt` is done (acked, dead-lettered): its group is free."""
        with self._lock:
            self._done(receipt)

    def back_off(self, receipt: str) -> list[Task]:
        """The message out under `receipt` comes back: the rest of its run must go back too;
        answers them, for the caller to give back."""
        with self._lock:
            group = self._done(receipt)
            return self._waiting.pop(group, []) if group is not None else []

    def take_all(self) -> list[Task]:
        """Every waiting message (the queue closes)."""
        with self._lock:
            every = [task for run in self._waiting.values() for task in run]
            self._waiting.clear()
            return every

    def _done(self, receipt: str) -> str | None:
        group = self._group_of.pop(receipt, None)
        if group is not None and self._out.get(group) == receipt:
            del self._out[group]
        return group

    def _give_out(self, group: str, task: Task) -> None:
        self._out[group] = task.receipt
        self._group_of[task.receipt] = group
