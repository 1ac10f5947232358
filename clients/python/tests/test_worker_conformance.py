"""The worker scenarios of conformance/scenarios.json (`worker_scenarios`) on every backend.

Follows conformance/README.md ("Worker scenarios"): a fresh queue and a worker whose handler does
what each message's body says (`{"fail": text}` raises `RuntimeError(text)`, `{"hold": name}`
waits for the step `finish` naming it, anything else succeeds). Time is real on every backend
(memory runs on a system clock), and every wait is bounded. The threaded `Worker` runs over the
blocking queues, the `AsyncWorker` over the asyncio ones, so both are held to the same script.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from sluice_client import Context, QueueOptions, RetryPolicy, SystemClock

from .conftest import repo_root
from .harness import Harness
from .kits import for_backend, scenario_names

WORKER_SCENARIOS: list[dict[str, Any]] = json.loads(
    (repo_root() / "conformance" / "scenarios.json").read_text()
)["worker_scenarios"]

COMBOS = [
    ("memory", "sync"),
    ("sluice", "async"),
    ("sqs", "sync"),
    ("sqs-moto", "async"),
    ("rabbitmq", "async"),
]
"""(backend, worker flavour): every backend, each worker at least twice (test_worker.py runs both
workers on memory and sluice; CI's time is bounded)."""

UNTIL_S = 20.0
"""How long an `until` waits, at most."""
RETRY_DELAY_S = 1.0
"""The retry delay of the scenarios' queues (whole seconds, for SQS)."""


def recorded_error(text: str) -> str:
    """The error the worker keeps for a handler that raised `RuntimeError(text)`: Python's
    `Type: message` (the TypeScript SDK keeps an `Error`'s message)."""
    return f"RuntimeError: {text}"


@pytest.mark.parametrize("combo", COMBOS, ids=[f"{b}-{f}" for b, f in COMBOS])
@pytest.mark.parametrize("scenario", WORKER_SCENARIOS, ids=[s["name"] for s in WORKER_SCENARIOS])
def test_worker_scenario(
    scenario: dict[str, Any], combo: tuple[str, str], request: pytest.FixtureRequest
) -> None:
    backend, flavor = combo
    options = QueueOptions(max_attempts=scenario.get("queue", {}).get("max_attempts", 5))
    h = Harness(backend, flavor, request, options, clock=SystemClock())
    runner = WorkerRunner(scenario, h, scenario_names(backend))
    try:
        runner.run()
    finally:
        runner.release_all()
        h.close()


@dataclass
class WorkerRunner:
    scenario: dict[str, Any]
    h: Harness
    names: list[str]
    runs: list[dict[str, Any]] = field(default_factory=list)
    holds: dict[str, threading.Event] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self) -> None:
        for index, written in enumerate(self.scenario["steps"]):
            step: dict[str, Any] = for_backend(written.get("on"), self.names) or written
            try:
                getattr(self, f"op_{step['op']}")(step, step.get("expect"))
            except AssertionError as error:
                raise AssertionError(
                    f"worker scenario {self.scenario['name']} on {self.names[0]} "
                    f"({self.h.flavor}), step {index} ({step['op']}): {error}"
                ) from error

    def release_all(self) -> None:
        with self.lock:
            for hold in self.holds.values():
                hold.set()

    # The handler.

    def _ran(self, ctx: Context[Any]) -> threading.Event | None:
        """Records the run; the event a `hold` waits for, if it holds."""
        body = ctx.event
        with self.lock:
            self.runs.append({"body": body, "attempt": ctx.attempt, "instance": ctx.instance_index})
            if isinstance(body, dict) and isinstance(body.get("hold"), str):
                return self.holds.setdefault(body["hold"], threading.Event())
        if isinstance(body, dict) and isinstance(body.get("fail"), str):
            raise RuntimeError(body["fail"])
        return None

    def _handler(self, ctx: Context[Any]) -> None:
        hold = self._ran(ctx)
        if hold is not None and not hold.wait(UNTIL_S * 2):
            raise RuntimeError("held too long")

    async def _async_handler(self, ctx: Context[Any]) -> None:
        hold = self._ran(ctx)
        deadline = time.monotonic() + UNTIL_S * 2
        while hold is not None and not hold.is_set():
            if time.monotonic() > deadline:
                raise RuntimeError("held too long")
            await asyncio.sleep(0.01)

    # The steps.

    def op_start(self, step: dict[str, Any], expect: Any) -> None:
        self.h.start_handlers(
            self._handler,
            self._async_handler,
            concurrency=step.get("concurrency", 1),
            retry=RetryPolicy(max_attempts=self.h.options.max_attempts, delay=RETRY_DELAY_S),
            poll_wait=0.2,
        )

    def op_enqueue(self, step: dict[str, Any], expect: Any) -> None:
        self.h.push(step["body"])

    def _worker_fields(self) -> dict[str, int]:
        status = self.h.status()
        return {
            "processed": status.processed,
            "retried": status.retried,
            "dead_lettered": status.dead_lettered,
            "pending": status.pending,
        }

    def op_until(self, step: dict[str, Any], expect: Any) -> None:
        held: str | None = step.get("running")
        target: dict[str, int] = step.get("worker", {})

        def came() -> bool:
            if held is not None:
                with self.lock:
                    return held in self.holds
            fields = self._worker_fields()
            return all(fields.get(name, 0) >= n for name, n in target.items())

        deadline = time.monotonic() + UNTIL_S
        while not came():
            assert time.monotonic() < deadline, (
                f"until {held or target}: not within {UNTIL_S} s; seen {self._worker_fields()}"
            )
            time.sleep(0.05)

    def op_finish(self, step: dict[str, Any], expect: Any) -> None:
        with self.lock:
            hold = self.holds.get(step["ref"])
        assert hold is not None, f"no held run {step['ref']}"
        hold.set()

    def op_settle(self, step: dict[str, Any], expect: Any) -> None:
        time.sleep(step.get("ms", 0) / 1000)

    def op_pause(self, step: dict[str, Any], expect: Any) -> None:
        self.h.worker_call("pause", instance=step.get("instance"))

    def op_resume(self, step: dict[str, Any], expect: Any) -> None:
        self.h.worker_call("resume", instance=step.get("instance"))

    def op_drain(self, step: dict[str, Any], expect: Any) -> None:
        drained = self.h.worker_call(
            "drain", step.get("timeout_ms", 0) / 1000, instance=step.get("instance", 0)
        )
        assert drained is expect, f"drained {expect}; seen {drained}"

    def op_instance(self, step: dict[str, Any], expect: Any) -> None:
        status = self.h.worker_call("instance_status", step.get("instance", 0))
        seen = {
            "state": status.state,
            "processed": status.processed,
            "failed": status.failed,
            "pending": status.pending,
        }
        _compare("instance", expect, seen)

    def op_worker(self, step: dict[str, Any], expect: Any) -> None:
        _compare("worker", expect, self._worker_fields())

    def op_runs(self, step: dict[str, Any], expect: Any) -> None:
        any_order = "expect_any_order" in step
        wanted: list[dict[str, Any]] = step["expect_any_order"] if any_order else expect
        # The fields the list's first run names are the ones compared.
        fields = list(wanted[0]) if wanted else []
        with self.lock:
            seen = [{name: run[name] for name in fields} for run in self.runs]
            runs = list(self.runs)
        if any_order:
            key: Callable[[dict[str, Any]], str] = lambda run: json.dumps(run, sort_keys=True)  # noqa: E731
            assert sorted(map(key, seen)) == sorted(map(key, wanted)), (
                f"runs in any order {wanted}; seen {runs}"
            )
        else:
            assert seen == wanted, f"runs {wanted}; seen {runs}"

    def op_dead_letters(self, step: dict[str, Any], expect: Any) -> None:
        seen = [
            {"body": letter.payload, "error": letter.error, "attempts": letter.attempts}
            for letter in self.h.dead_letters()
        ]
        wanted = [
            {**letter, "error": recorded_error(letter["error"])}
            if isinstance(letter.get("error"), str)
            else letter
            for letter in expect
        ]
        assert seen == wanted, f"dead letters {wanted}; seen {seen}"

    def op_stats(self, step: dict[str, Any], expect: Any) -> None:
        stats = self.h.stats()
        seen = {
            "ready": stats.ready,
            "in_flight": stats.in_flight,
            "dead_lettered": stats.dead_lettered,
        }
        for name, wanted in expect.items():
            # A count the backend cannot report (None) is not checked.
            if seen[name] is not None:
                assert seen[name] == wanted, f"{name} = {wanted}; seen {stats}"

    def op_stop(self, step: dict[str, Any], expect: Any) -> None:
        report = self.h.stop()
        self.h.worker = None
        seen = {
            "processed": report.processed,
            "retried": report.retried,
            "dead_lettered": report.dead_lettered,
            "released": report.released,
        }
        _compare("report", expect, seen)

    def op_none(self, step: dict[str, Any], expect: Any) -> None:
        """Does nothing (`why` says why), for a backend whose `on` drops a step."""


def _compare(what: str, expect: dict[str, Any], seen: dict[str, Any]) -> None:
    for name, wanted in expect.items():
        assert seen[name] == wanted, f"{what} {name} = {wanted!r}; seen {seen}"
