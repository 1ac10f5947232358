"""The errors of the SDK: what the server refused (`SluiceError`), what a backend cannot do
(`Unsupported`), and a lease that is no longer held (`LeaseLost`), on every backend alike."""

from __future__ import annotations

from typing import Any


class SluiceError(Exception):
    """An error answer of a sluice server, or a request that got no answer.

    `code` is the server's stable code (docs/http-api.md, "Errors"): `queue_not_found`,
    `stale_receipt`, `queue_full`, ... A code this version does not know is kept as sent; sort it
    by `status`. A request that got no answer has `status` 0 and `code` `"unreachable"` (no
    connection, or it broke) or `"timeout"` (none within the client's timeout).
    """

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: Any = None,
        retry_after: float | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(f"{code}: {message} (HTTP {status})" if status else f"{code}: {message}")
        self.status = status
        """HTTP status; 0 when no answer came."""
        self.code = code
        """The server's stable error code."""
        self.message = message
        """What went wrong, for people."""
        self.details = details
        """More, where the server gives it (a refused batch's per-message results, schema
        violations, `queue_full`'s depth)."""
        self.retry_after = retry_after
        """Seconds to wait before trying again, from `Retry-After` (`queue_full`, `overloaded`,
        `disk_full`)."""
        self.request_id = request_id
        """The server's `x-request-id`, to find the request in its log."""


class Unsupported(Exception):
    """The backend cannot do this operation (or keep this option); it never pretends to.

    Each queue's `capabilities` says beforehand what it can do.
    """

    def __init__(self, backend: str, operation: str, reason: str) -> None:
        super().__init__(f"{backend} cannot {operation}: {reason}")
        self.backend = backend
        """The backend's name: `sluice`, `memory`, `sqs`, `rabbitmq`."""
        self.operation = operation
        """What was refused."""
        self.reason = reason
        """Why the broker cannot do it."""


class LeaseLost(Exception):
    """The receipt no longer holds the message: its lease ran out and it went out again, or it
    was acked, nacked or dead-lettered already. (sluice's `stale_receipt`.)"""


class BrokerError(Exception):
    """A broker (SQS, RabbitMQ) refused part of an operation for a reason of its own, such as
    some entries of a batch; the message names them."""
