"""sluice-client: the Python SDK of sluice.

- `Client` / `AsyncClient`: the whole native HTTP API, typed (`models`, `specs`).
- One queue interface over interchangeable backends (`push`, `pop`, `extend_visibility`, `ack`,
  `nack` over a `TaskEnvelope`): `SluiceQueue`, `InMemoryQueue`, `SQSQueue`, `RabbitMQQueue`,
  each with an asyncio twin (`AsyncSluiceQueue`, ...).
- `Worker` / `AsyncWorker`: runs a handler over any of those queues with a fixed concurrency,
  retries with backoff, dead-letters, lease heartbeats and graceful shutdown.

Errors: `SluiceError` (what a server said), `Unsupported` (what a backend cannot do),
`LeaseLost` (a receipt that no longer holds its message).
"""

from ._codec import UNSET, Unset
from .aio_client import AsyncClient
from .client import Client
from .errors import LeaseLost, SluiceError, Unsupported
from .specs import (
    BackoffSpec,
    IdempotencySpec,
    MessageIn,
    PushSpec,
    QueueSpec,
    RateLimitSpec,
    SecretRef,
    VerifySpec,
    WebhookSpec,
)

__all__ = [
    "UNSET",
    "AsyncClient",
    "BackoffSpec",
    "Client",
    "IdempotencySpec",
    "LeaseLost",
    "MessageIn",
    "PushSpec",
    "QueueSpec",
    "RateLimitSpec",
    "SecretRef",
    "SluiceError",
    "Unset",
    "Unsupported",
    "VerifySpec",
    "WebhookSpec",
]
