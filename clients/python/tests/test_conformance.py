"""The conformance runner: every scenario of conformance/scenarios.json on every backend.

Follows conformance/README.md: a fresh queue per scenario with the scenario's options; steps in
order, each failure naming the scenario, the step and what was seen; a backend listed under a
scenario's `exceptions` must refuse the scenario's distinctive operation with `Unsupported` (and
say so in its capabilities), or the scenario is skipped with the reason, except when `CI` is set:
there an exception without a refusal check fails, so no exempted scenario goes unchecked; a
step's `unchecked` backends run it without checking; `advance` moves the memory backend's clock
and sleeps elsewhere. Blocking backends run through the threaded adapter, so "sluice" and
"rabbitmq" test the blocking queues and "sluice-async" and "rabbitmq-async" the asyncio ones.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from sluice_client import AsyncTaskQueue, QueueOptions, Task, Unsupported

from .conftest import missing, repo_root
from .kits import KIT_NAMES, Kit, make_kit

SCENARIOS: list[dict[str, Any]] = json.loads(
    (repo_root() / "conformance" / "scenarios.json").read_text()
)["scenarios"]


def options_of(scenario: dict[str, Any]) -> QueueOptions:
    queue = scenario.get("queue", {})
    return QueueOptions(
        max_attempts=queue.get("max_attempts", 5),
        per_key=queue.get("per_key", False),
        ordered=queue.get("ordered", False),
        dedup=queue.get("dedup", False),
    )


@pytest.mark.parametrize("kit_name", KIT_NAMES)
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s["name"] for s in SCENARIOS])
def test_scenario(scenario: dict[str, Any], kit_name: str, request: pytest.FixtureRequest) -> None:
    kit = make_kit(kit_name, request)
    reason = kit.for_backend(scenario.get("exceptions"))

    async def run() -> None:
        try:
            if reason is None:
                await Runner(scenario, kit).run()
            else:
                await check_refusal(scenario, kit, reason)
        finally:
            await kit.close()

    asyncio.run(run())


# Exceptions: the distinctive operation of each scenario, and the capability that says so.


async def _open_with(kit: Kit, **options: Any) -> None:
    queue = kit.open(QueueOptions(**options))
    await queue.ensure()


async def _extend(kit: Kit) -> None:
    queue = kit.open(QueueOptions())
    await queue.push({"n": 1})
    task = await queue.pop(wait=2.0)
    assert task is not None, "no task to extend"
    try:
        await queue.extend_visibility(task, 5.0)
    finally:
        await queue.ack(task)


async def _on_fresh(kit: Kit, operation: Callable[[AsyncTaskQueue], Awaitable[Any]]) -> None:
    queue = kit.open(QueueOptions())
    await queue.ensure()
    await operation(queue)


Refusal = Callable[[Kit], Awaitable[None]]

DISTINCTIVE: dict[str, tuple[str, list[Refusal]]] = {
    "receive_in_enqueue_order": ("ordered", [lambda kit: _open_with(kit, ordered=True)]),
    "visibility_expiry_redelivers": ("extend", [_extend]),
    "idempotent_enqueue": ("dedup", [lambda kit: _open_with(kit, dedup=True)]),
    "per_key_order": ("per_key_order", [lambda kit: _open_with(kit, per_key=True)]),
    "pause_and_resume": (
        "pause",
        [
            lambda kit: _on_fresh(kit, lambda queue: queue.pause()),
            lambda kit: _on_fresh(kit, lambda queue: queue.resume()),
        ],
    ),
    "drain": ("drain", [lambda kit: _on_fresh(kit, lambda queue: queue.drain(0.3))]),
    "cancel": (
        "cancel",
        [
            lambda kit: _on_fresh(kit, lambda queue: queue.cancel(id="two")),
            lambda kit: _on_fresh(kit, lambda queue: queue.cancel(message_id="x")),
        ],
    ),
    "delayed_enqueue": (
        "delays",
        [lambda kit: _on_fresh(kit, lambda queue: queue.push({"n": 1}, delay=1.0))],
    ),
}


async def check_refusal(scenario: dict[str, Any], kit: Kit, reason: str) -> None:
    name = scenario["name"]
    known = DISTINCTIVE.get(name)
    if known is None:
        # Skipped here, failed under CI: an exception nobody checks would let a backend claim
        # any scenario away.
        missing(f"{name} on {kit.backend}: {reason} (no refusal check for this scenario)")
    capability, operations = known
    probe = kit.make("probe-capabilities", QueueOptions())
    assert getattr(probe.capabilities, capability) is False, (
        f"{name}: {kit.backend} is excepted ({reason}) but claims {capability}"
    )
    await probe.close()
    for index, operation in enumerate(operations):
        with pytest.raises(Unsupported):
            await operation(kit)
        print(f"{name} on {kit.name}: refusal {index} raised Unsupported ({reason})")


# The runner proper.


@dataclass
class Runner:
    scenario: dict[str, Any]
    kit: Kit
    queue: AsyncTaskQueue = field(init=False)
    deliveries: dict[str, Task] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)

    async def run(self) -> None:
        self.queue = self.kit.open(options_of(self.scenario), prefix="conf")
        await self.queue.ensure()
        for index, written in enumerate(self.scenario["steps"]):
            # Where the backend does this step its own way (rule 6), its own step runs instead.
            step: dict[str, Any] = self.kit.for_backend(written.get("on")) or written
            refused_as = self.kit.for_backend(step.get("refused"))
            if refused_as is not None:
                # Refused as unsupported (conformance/README.md, rule 5); the rest of the
                # scenario depended on this step.
                assert step["op"] == "enqueue", "only an enqueue step can be refused"
                with pytest.raises(Unsupported) as refused:
                    await self.queue.push(step["body"], id=step.get("id"))
                # Python names the operation in words ("deduplicate" for `dedup`).
                assert refused.value.operation.startswith(refused_as), refused.value
                return
            checked = self.kit.for_backend(step.get("unchecked")) is None
            try:
                await self.step(step, checked)
            except AssertionError as error:
                raise AssertionError(
                    f"scenario {self.scenario['name']} on {self.kit.name}, step {index} "
                    f"({step['op']}): {error}"
                ) from error

    async def step(self, step: dict[str, Any], checked: bool) -> None:
        op = step["op"]
        expect = step.get("expect")
        handler = getattr(self, f"op_{op}")
        await handler(step, expect if checked else None)

    async def op_enqueue(self, step: dict[str, Any], expect: Any) -> None:
        delay = step["delay_ms"] / 1000 if "delay_ms" in step else None
        result = await self.queue.push(
            step["body"], id=step.get("id"), key=step.get("key"), delay=delay
        )
        if "as" in step:
            self.messages[step["as"]] = result.message_id
        if expect:
            if "created" in expect:
                assert result.created == expect["created"], f"created {result.created}"
            if "position" in expect:
                assert result.position == expect["position"], f"position {result.position}"
            if "same_message_as" in expect:
                first = self.messages[expect["same_message_as"]]
                assert result.message_id == first, f"{result.message_id} is not {first}"

    async def op_enqueue_many(self, step: dict[str, Any], expect: Any) -> None:
        from sluice_client import PushItem

        results = await self.queue.push_many([PushItem(body) for body in step["bodies"]])
        assert len(results) == len(step["bodies"])

    async def op_receive(self, step: dict[str, Any], expect: Any) -> None:
        wait = step.get("wait_ms", 0) / 1000
        lease = step["lease_ms"] / 1000 if "lease_ms" in step else None
        names: list[str] = step.get("as", [])
        wanted = max(
            [len(names)]
            + [len(value) for value in (expect or {}).values() if isinstance(value, list)]
        )
        deadline = time.monotonic() + wait
        tasks = await self.queue.receive(step["max"], visibility_timeout=lease, wait=wait)
        # A long poll may answer with the first message: keep receiving until all are there.
        while wait > 0 and len(tasks) < wanted and time.monotonic() < deadline:
            remaining = max(deadline - time.monotonic(), 0.0)
            tasks += await self.queue.receive(
                step["max"] - len(tasks), visibility_timeout=lease, wait=remaining
            )
        for name, task in zip(names, tasks, strict=False):
            self.deliveries[name] = task
        if not expect:
            return
        seen = [task.payload for task in tasks]
        if "bodies" in expect:
            assert seen == expect["bodies"], f"bodies {seen}"
        if "bodies_any_order" in expect:
            assert _sorted(seen) == _sorted(expect["bodies_any_order"]), f"bodies {seen}"
        if "attempts" in expect:
            attempts = [task.attempt for task in tasks]
            assert attempts == expect["attempts"], f"attempts {attempts}"
        if "last_errors" in expect:
            errors = [task.envelope.last_error for task in tasks]
            assert errors == expect["last_errors"], f"last errors {errors}"
        if "ids" in expect:
            ids = [task.envelope.idempotency_id for task in tasks]
            assert ids == expect["ids"], f"ids {ids}"
        if "keys_any_order" in expect:
            keys = sorted(task.envelope.key or "" for task in tasks)
            assert keys == sorted(expect["keys_any_order"]), f"keys {keys}"

    async def op_ack(self, step: dict[str, Any], expect: Any) -> None:
        await self.queue.ack(self.deliveries[step["ref"]])

    async def op_nack(self, step: dict[str, Any], expect: Any) -> None:
        delay = step["delay_ms"] / 1000 if "delay_ms" in step else None
        outcome = await self.queue.nack(
            self.deliveries[step["ref"]],
            step.get("error", ""),
            delay=delay,
            permanent=step.get("permanent", False),
        )
        if expect:
            assert outcome == expect["outcome"], f"outcome {outcome}"

    async def op_extend(self, step: dict[str, Any], expect: Any) -> None:
        await self.queue.extend_visibility(self.deliveries[step["ref"]], step["lease_ms"] / 1000)

    async def op_release(self, step: dict[str, Any], expect: Any) -> None:
        await self.queue.release(self.deliveries[step["ref"]])

    async def op_advance(self, step: dict[str, Any], expect: Any) -> None:
        await self.kit.advance(self.queue, step["ms"] / 1000)

    async def op_stats(self, step: dict[str, Any], expect: Any) -> None:
        stats = await self.queue.stats()
        for key, wanted in (expect or {}).items():
            value = getattr(stats, key)
            # A number the backend cannot report (None) is not checked.
            if value is not None:
                assert value == wanted, f"{key} {value}, expected {wanted} ({stats})"

    async def op_pause(self, step: dict[str, Any], expect: Any) -> None:
        await self.queue.pause()

    async def op_resume(self, step: dict[str, Any], expect: Any) -> None:
        await self.queue.resume()

    async def op_drain(self, step: dict[str, Any], expect: Any) -> None:
        drained = await self.queue.drain(step["timeout_ms"] / 1000)
        if expect is not None:
            assert drained == expect, f"drained {drained}"

    async def op_cancel(self, step: dict[str, Any], expect: Any) -> None:
        if "message" in step:
            result = await self.queue.cancel(message_id=self.messages[step["message"]])
        else:
            result = await self.queue.cancel(id=step["id"])
        if expect is not None:
            assert result.outcome == expect, f"outcome {result.outcome}"

    async def op_none(self, step: dict[str, Any], expect: Any) -> None:
        """Does nothing (`why` says why), for a backend whose `on` drops a step."""

    async def op_dead_letters(self, step: dict[str, Any], expect: Any) -> None:
        letters = await self.queue.dead_letters()
        seen = [
            {"body": letter.payload, "error": letter.error, "attempts": letter.attempts}
            for letter in letters
        ]
        if expect is not None:
            assert seen == expect, f"dead letters {seen}"


def _sorted(values: list[Any]) -> list[str]:
    return sorted(json.dumps(value, sort_keys=True) for value in values)
