"""`TaskEnvelope`: a task and its delivery bookkeeping as one JSON document.

Brokers that keep no metadata with a message (SQS, RabbitMQ) carry the envelope as the message
body, so a task's attempts, its last error and when it is due travel with it through retries and
into the dead-letter queue. On sluice the server keeps that metadata, so the body is the payload
alone and `pop` fills the envelope from what the server says. A plain dataclass: no validation
library, no magic; `to_json`/`from_json` are the whole wire format.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

ENVELOPE_VERSION = 1
"""The `v` field of the JSON form; a reader refuses versions it does not know."""


@dataclass(frozen=True)
class TaskEnvelope:
    """A task as the queue interface hands it out and as SQS and RabbitMQ carry it.

    Times are seconds since the Unix epoch (floats), by the backend's clock.
    """

    task_id: str
    """The message's id on its backend (sluice's message id, SQS's first `MessageId`, ...):
    the same through every retry and in the dead-letter queue."""
    payload: Any
    """The task itself: any JSON value."""
    attempt: int = 0
    """Deliveries so far: 0 in a stored envelope never delivered, 1 on the first delivery."""
    max_attempts: int | None = None
    """Deliveries before a failure dead-letters (None: the queue's setting; 0: no limit)."""
    visibility_timeout: float | None = None
    """The lease of this delivery, in seconds (None where the broker has no lease)."""
    next_attempt_ts: float | None = None
    """When this attempt became (or the next one becomes) due, after a delay or backoff."""
    enqueued_at: float | None = None
    """When the task was first enqueued."""
    last_error: str | None = None
    """The error of the previous failed attempt."""
    idempotency_id: str | None = None
    """The idempotency id it was enqueued with (sluice's `id`)."""
    key: str | None = None
    """Its ordering key."""
    failed_at: float | None = None
    """When it was dead-lettered (dead letters only)."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON object form, with the format version `v`."""
        return {"v": ENVELOPE_VERSION, **dataclasses.asdict(self)}

    def to_json(self) -> str:
        """The JSON text form."""
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskEnvelope:
        """Reads the object form; `ValueError` when it is not an envelope this version reads."""
        if data.get("v") != ENVELOPE_VERSION:
            raise ValueError(
                f"not a task envelope of version {ENVELOPE_VERSION}: v={data.get('v')!r}"
            )
        if not isinstance(data.get("task_id"), str) or "payload" not in data:
            raise ValueError("a task envelope needs a string task_id and a payload")
        known = {field.name for field in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in known})

    @classmethod
    def from_json(cls, text: str | bytes) -> TaskEnvelope:
        """Reads the JSON text form; `ValueError` when it is not an envelope."""
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("a task envelope is a JSON object")
        return cls.from_dict(data)

    @classmethod
    def wrap_body(cls, task_id: str, text: str | bytes) -> TaskEnvelope:
        """The envelope of a message body: the body itself when it is an envelope, else a new
        envelope around it (a message another producer sent without one)."""
        try:
            return cls.from_json(text)
        except ValueError:
            pass
        try:
            payload: Any = json.loads(text)
        except ValueError:
            payload = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
        return cls(task_id=task_id, payload=payload)
