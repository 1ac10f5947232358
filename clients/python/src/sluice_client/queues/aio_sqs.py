"""`AsyncSQSQueue`: the SQS backend for asyncio. boto3 has no asyncio API, so each call runs on
a thread of the queue's own pool (see `_threaded`); the queue underneath is `SQSQueue`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._threaded import ThreadedAsyncQueue
from .base import QueueOptions
from .sqs import SQSQueue

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient


class AsyncSQSQueue(ThreadedAsyncQueue):
    """An SQS queue with coroutine methods; the arguments are `SQSQueue`'s."""

    def __init__(
        self,
        name: str,
        *,
        client: SQSClient | None = None,
        endpoint_url: str | None = None,
        region: str | None = None,
        options: QueueOptions | None = None,
        create: bool = False,
    ) -> None:
        self.sqs = SQSQueue(
            name,
            client=client,
            endpoint_url=endpoint_url,
            region=region,
            options=options,
            create=create,
        )
        """The blocking queue underneath."""
        super().__init__(self.sqs)
