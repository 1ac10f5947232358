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

from typing import TYPE_CHECKING

from . import models, specs
from ._codec import UNSET, Unset
from .aio_client import AsyncClient
from .client import Client
from .clock import Clock, ManualClock, SystemClock
from .envelope import TaskEnvelope
from .errors import BrokerError, LeaseLost, SluiceError, Unsupported
from .queues.aio_memory import AsyncInMemoryQueue
from .queues.aio_sluice import AsyncSluiceQueue
from .queues.base import (
    AsyncTaskQueue,
    CancelResult,
    Capabilities,
    DeadLetter,
    Enqueued,
    NextStep,
    PushItem,
    QueueOptions,
    QueueStats,
    Task,
    TaskQueue,
)
from .queues.memory import InMemoryQueue
from .queues.sluice import SluiceQueue
from .retry import Backoff
from .specs import (
    AlertDestinationSpec,
    AlertSpec,
    BackoffSpec,
    IdempotencySpec,
    MessageIn,
    NextStepIn,
    PushSpec,
    QueueSpec,
    RateLimitSpec,
    ScheduleMessage,
    ScheduleSpec,
    SecretRef,
    SubscriptionSpec,
    TopicSpec,
    VerifySpec,
    WebhookSpec,
)
from .worker.aio import AsyncWorker
from .worker.policy import GiveUp, RetryAfter, RetryPolicy
from .worker.state import (
    Context,
    DeadLetterContext,
    EmptyContext,
    SlotStatus,
    WorkerReport,
    WorkerStatus,
)
from .worker.threaded import Worker

if TYPE_CHECKING:
    from .queues.aio_rabbitmq import AsyncRabbitMQQueue
    from .queues.aio_sqs import AsyncSQSQueue
    from .queues.rabbitmq import RabbitMQQueue
    from .queues.sqs import SQSQueue

__all__ = [
    "UNSET",
    "AlertDestinationSpec",
    "AlertSpec",
    "AsyncClient",
    "AsyncInMemoryQueue",
    "AsyncRabbitMQQueue",
    "AsyncSQSQueue",
    "AsyncSluiceQueue",
    "AsyncTaskQueue",
    "AsyncWorker",
    "Backoff",
    "BackoffSpec",
    "BrokerError",
    "CancelResult",
    "Capabilities",
    "Client",
    "Clock",
    "Context",
    "DeadLetter",
    "DeadLetterContext",
    "EmptyContext",
    "Enqueued",
    "GiveUp",
    "IdempotencySpec",
    "InMemoryQueue",
    "LeaseLost",
    "ManualClock",
    "MessageIn",
    "NextStep",
    "NextStepIn",
    "PushItem",
    "PushSpec",
    "QueueOptions",
    "QueueSpec",
    "QueueStats",
    "RabbitMQQueue",
    "RateLimitSpec",
    "RetryAfter",
    "RetryPolicy",
    "SQSQueue",
    "ScheduleMessage",
    "ScheduleSpec",
    "SecretRef",
    "SlotStatus",
    "SluiceError",
    "SluiceQueue",
    "SubscriptionSpec",
    "SystemClock",
    "Task",
    "TaskEnvelope",
    "TaskQueue",
    "TopicSpec",
    "Unset",
    "Unsupported",
    "VerifySpec",
    "WebhookSpec",
    "Worker",
    "WorkerReport",
    "WorkerStatus",
    "models",
    "specs",
]


def __getattr__(name: str) -> object:
    # The SQS and RabbitMQ backends import their extras (boto3, pika, aio-pika) only when
    # asked for, so the base install needs httpx alone.
    lazy = {
        "SQSQueue": ".queues.sqs",
        "AsyncSQSQueue": ".queues.aio_sqs",
        "RabbitMQQueue": ".queues.rabbitmq",
        "AsyncRabbitMQQueue": ".queues.aio_rabbitmq",
    }
    if name in lazy:
        import importlib

        return getattr(importlib.import_module(lazy[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
