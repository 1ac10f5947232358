"""The task envelope's JSON form, and the pure rules beside it (backoff, retry decisions)."""

from __future__ import annotations

import json

import pytest

from sluice_client import Backoff, GiveUp, RetryAfter, RetryPolicy, TaskEnvelope


def test_an_envelope_round_trips_through_json() -> None:
    envelope = TaskEnvelope(
        task_id="t-1",
        payload={"order": 7, "items": [1, 2]},
        attempt=2,
        max_attempts=5,
        visibility_timeout=30.0,
        next_attempt_ts=1_700_000_010.5,
        enqueued_at=1_700_000_000.0,
        last_error="boom",
        idempotency_id="order-7",
        key="customer-1",
    )
    text = envelope.to_json()
    assert json.loads(text)["v"] == 1
    assert TaskEnvelope.from_json(text) == envelope


def test_a_reader_refuses_what_is_not_an_envelope() -> None:
    with pytest.raises(ValueError, match="version"):
        TaskEnvelope.from_json('{"v": 2, "task_id": "x", "payload": 1}')
    with pytest.raises(ValueError, match="task_id"):
        TaskEnvelope.from_json('{"v": 1, "payload": 1}')
    with pytest.raises(ValueError, match="object"):
        TaskEnvelope.from_json("[1]")


def test_a_plain_body_is_wrapped() -> None:
    assert TaskEnvelope.wrap_body("m-1", '{"n": 1}') == TaskEnvelope("m-1", {"n": 1})
    assert TaskEnvelope.wrap_body("m-2", b"not json").payload == "not json"
    inner = TaskEnvelope("t", [1], attempt=3).to_json()
    assert TaskEnvelope.wrap_body("ignored", inner).attempt == 3


def test_backoff_grows_to_its_cap() -> None:
    backoff = Backoff.exponential(1.0, 10.0, 2.0)
    assert [backoff.delay(n) for n in range(1, 7)] == [1, 2, 4, 8, 10, 10]
    assert backoff.delay(10_000) == 10.0
    assert Backoff.fixed(0.5).delay(9) == 0.5


def test_the_retry_policy_decides() -> None:
    policy = RetryPolicy(max_attempts=3, delay=0.25, is_retryable=lambda e: "fatal" not in str(e))
    retry = policy.decide(2, RuntimeError("timeout"))
    assert (retry.delay, retry.dead_letter) == (0.25, False)
    assert policy.decide(3, RuntimeError("timeout")).dead_letter
    assert policy.decide(1, RuntimeError("fatal: bad input")).dead_letter
    assert policy.decide(1, GiveUp("no")).dead_letter
    later = policy.decide(1, RetryAfter(7.0))
    assert (later.delay, later.dead_letter) == (7.0, False)
