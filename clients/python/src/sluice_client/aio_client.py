"""`AsyncClient`: the whole native HTTP API of a sluice server, typed, for asyncio.

The twin of `Client` (same methods, same arguments, same answers), each method a coroutine.
A test checks that the two keep the same signatures. One client serves many tasks of one event
loop (it holds a pool of keep-alive connections).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Literal, TypeVar

import httpx

from . import _calls as calls
from . import _transport as transport
from . import models as m
from ._codec import UNSET, Unset
from .client import _given
from .specs import (
    AlertSpec,
    MessageIn,
    NextStepIn,
    QueueSpec,
    ScheduleSpec,
    TopicSpec,
    WebhookSpec,
)

T = TypeVar("T")


class AsyncClient:
    """An asyncio client of one sluice server (the twin of `Client`).

    `url` defaults to `SLUICE_URL`, else http://127.0.0.1:7566; `token` to `SLUICE_TOKEN` (sent
    as `Authorization: Bearer`; none when neither is set). `timeout` (seconds, default 30) bounds
    each request beyond the time a long poll or drain is asked to wait. Pass `http` to use your
    own `httpx.AsyncClient` (its base URL and headers are then yours to set). Close it with
    `aclose()` or an `async with` block.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        token: str | None = None,
        timeout: float = transport.DEFAULT_TIMEOUT_S,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self.url = transport.base_url(url)
        """The server's base URL."""
        self._timeout = timeout
        self._http = http or httpx.AsyncClient(
            base_url=self.url,
            headers=transport.auth_headers(token),
            limits=httpx.Limits(max_connections=256, max_keepalive_connections=64),
        )

    async def aclose(self) -> None:
        """Closes the connections."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def _call(self, call: calls.Call[T]) -> T:
        try:
            response = await self._http.request(**transport.request_args(call, self._timeout))
        except httpx.HTTPError as error:
            raise transport.unreachable(error) from error
        return transport.read(call, response)

    # Health and self-description.

    async def health(self) -> m.HealthOut:
        """`GET /healthz`: the process runs."""
        return await self._call(calls.health())

    async def ready(self) -> m.HealthOut:
        """`GET /readyz`: the store takes new messages (`SluiceError` 503 when not)."""
        return await self._call(calls.ready())

    async def openapi(self) -> dict[str, Any]:
        """`GET /v1/openapi.json`: the server's OpenAPI 3.1 document."""
        return await self._call(calls.openapi())

    async def metrics(self) -> str:
        """`GET /metrics`: Prometheus text."""
        return await self._call(calls.metrics())

    # Queues.

    async def list_queues(self) -> list[m.QueueOut]:
        """`GET /v1/queues`: every queue the token may read, by name."""
        return await self._call(calls.list_queues())

    async def put_queue(self, name: str, spec: QueueSpec | None = None) -> m.QueuePutOut:
        """`PUT /v1/queues/{name}`: creates the queue (and its dead-letter queue `<name>.dlq`)
        or updates the fields `spec` gives."""
        return await self._call(calls.put_queue(name, spec))

    async def get_queue(self, name: str) -> m.QueueOut:
        """`GET /v1/queues/{name}`: settings and stats."""
        return await self._call(calls.get_queue(name))

    async def delete_queue(
        self, name: str, *, dead_letters: Literal["delete", "keep"] = "delete"
    ) -> m.QueueDeleteOut:
        """`DELETE /v1/queues/{name}`: the queue and its messages, and its dead-letter queue
        with its dead letters unless `dead_letters="keep"` or another queue uses it too."""
        return await self._call(calls.delete_queue(name, dead_letters))

    async def queue_stats(self, name: str) -> m.QueueStatsOut:
        """`GET /v1/queues/{name}/stats`: depth, counters, rates, latency."""
        return await self._call(calls.queue_stats(name))

    async def pause_queue(self, name: str) -> m.QueueOut:
        """Stops deliveries (enqueues are still stored); kept across restarts."""
        return await self._call(calls.pause_queue(name))

    async def resume_queue(self, name: str) -> m.QueueOut:
        """Starts deliveries again."""
        return await self._call(calls.resume_queue(name))

    async def pause_push(self, name: str) -> m.QueueOut:
        """Stops calling the queue's push destination (admin)."""
        return await self._call(calls.pause_push(name))

    async def resume_push(self, name: str) -> m.QueueOut:
        """Calls the queue's push destination again (admin)."""
        return await self._call(calls.resume_push(name))

    async def purge(self, name: str) -> m.PurgeOut:
        """Removes every ready and delayed message; in-flight ones stay with their consumers."""
        return await self._call(calls.purge(name))

    async def drain(self, name: str, timeout_ms: int | None = None) -> m.DrainOut:
        """Waits until the queue holds no ready, delayed or in-flight message, or `timeout_ms`
        (0..=900000, default 30000); `drained` says which."""
        return await self._call(calls.drain(name, timeout_ms))

    async def browse(
        self,
        name: str,
        state: str | None = None,
        *,
        limit: int | None = None,
        cursor: str | None = None,
        preview_bytes: int | None = None,
        message_id: str | None = None,
        id: str | None = None,
        key: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> m.BrowseOut:
        """One page of a state's messages (`ready`, `waiting`, `delayed`, `in_flight`) in
        dispatch order, or of the acked messages the queue keeps (`acked`, with its
        `keep_acked_ms`), newest ack first. With `acked` only (the server refuses them with
        another state), these search, each one given must hold: `message_id` (the server id),
        `id` (the idempotency key), `key` (the ordering key), acked at or after `since`, acked
        before `until`. Follow `next_cursor` until it is None."""
        return await self._call(
            calls.browse(
                name, state, limit, cursor, preview_bytes, message_id, id, key, since, until
            )
        )

    async def history(self, since_ms: int | None = None) -> m.HistoryOut:
        """The server's samples of every queue (and, for admins, webhook)."""
        return await self._call(calls.history(since_ms))

    async def queue_history(self, name: str, since_ms: int | None = None) -> m.QueueHistoryOnlyOut:
        """The server's samples of one queue."""
        return await self._call(calls.queue_history(name, since_ms))

    # Messages.

    async def enqueue(
        self,
        queue: str,
        body: Any = None,
        *,
        id: str | None = None,
        key: str | None = None,
        priority: int | None = None,
        delay_ms: int | None = None,
        not_before: datetime | None = None,
        headers: dict[str, str] | None = None,
    ) -> m.EnqueueOut:
        """Enqueues one message with a JSON `body`; answers once it is on disk.

        `id` is an idempotency key (a repeat within the dedup window stores nothing and answers
        `created=False` with the first message's id), `key` an ordering key, `priority` higher
        first, `delay_ms` or `not_before` keeps it invisible until then.
        """
        message = MessageIn(
            body=body,
            id=_given(id),
            key=_given(key),
            priority=_given(priority),
            delay_ms=_given(delay_ms),
            not_before=_given(not_before),
            headers=_given(headers),
        )
        return await self._call(calls.enqueue(queue, message))

    async def enqueue_message(self, queue: str, message: MessageIn) -> m.EnqueueOut:
        """Enqueues one message given whole (for a byte body, `body_base64`)."""
        return await self._call(calls.enqueue(queue, message))

    async def enqueue_batch(self, queue: str, messages: Sequence[MessageIn]) -> list[m.EnqueueOut]:
        """Enqueues 1 to 1000 messages in one request, validated whole: one bad message refuses
        the batch. One result per message, in order."""
        return await self._call(calls.enqueue_batch(queue, messages))

    async def get_message(self, queue: str, message_id: str) -> m.MessageStatusOut:
        """Where a message is now, by its id (`message_not_found` once forgotten)."""
        return await self._call(calls.get_message(queue, message_id))

    async def find_message(self, queue: str, idempotency_id: str) -> m.MessageStatusOut:
        """Where a message is now, by its idempotency key (within the dedup window)."""
        return await self._call(calls.find_message(queue, idempotency_id))

    async def message_body(self, queue: str, message_id: str) -> m.MessageBodyOut:
        """A message's body and headers, while it still has them."""
        return await self._call(calls.message_body(queue, message_id))

    async def message_deliveries(self, queue: str, message_id: str) -> m.DeliveriesOut:
        """The push delivery log of a message."""
        return await self._call(calls.message_deliveries(queue, message_id))

    # Delivery.

    async def receive(
        self,
        queue: str,
        max: int = 1,
        *,
        wait_ms: int = 0,
        visibility_timeout_ms: int | None = None,
    ) -> list[m.ReceivedMessage]:
        """Leases up to `max` (1..=100) messages, waiting up to `wait_ms` (0..=20000) for the
        first; each comes with a receipt for ack, nack and extend. The lease lasts
        `visibility_timeout_ms` (default: the queue's)."""
        return await self._call(calls.receive(queue, max, wait_ms, visibility_timeout_ms))

    async def ack(
        self,
        queue: str,
        receipt: str,
        *,
        result: Any | Unset = UNSET,
        then: Sequence[NextStepIn] | None = None,
    ) -> m.AckOut:
        """The message is done. `result` (any JSON, up to 64 KiB) is kept with it and answered
        to a later enqueue with the same idempotency key. A stale receipt raises `SluiceError`
        with code `stale_receipt`.

        `then` (at most 100 next steps) is enqueued in the same commit as the ack: both happen or
        neither. The answer's `then` has each step's `EnqueueOut`, in order. A stale receipt
        enqueues nothing; a step the server refuses (`queue_not_found`, `queue_full`,
        `invalid_field` naming `then[i]`, `forbidden`) refuses the whole ack."""
        if then is not None:
            return await self._call(calls.ack_then(queue, receipt, result, then))
        return await self._call(calls.ack(queue, [receipt], result))

    async def ack_many(self, queue: str, receipts: Sequence[str]) -> m.AckOut:
        """Acks up to 1000 receipts; when some are stale, the current ones are acked all the same
        and `SluiceError` (`stale_receipt`) carries the per-receipt results in `details`."""
        return await self._call(calls.ack(queue, receipts, UNSET))

    async def nack(
        self,
        queue: str,
        receipt: str,
        *,
        error: str | None = None,
        delay_ms: int | None = None,
        permanent: bool = False,
    ) -> m.NackOut:
        """The attempt failed: retried after `delay_ms` (default: the queue's backoff), or
        dead-lettered when the attempts are used up or `permanent`."""
        return await self._call(calls.nack(queue, receipt, error, delay_ms, permanent))

    async def extend(
        self, queue: str, receipt: str, visibility_timeout_ms: int, *, unstarted: bool = False
    ) -> m.ExtendOut:
        """The lease now ends `visibility_timeout_ms` after now; 0 releases the message, and
        with `unstarted` (it was never handed to a handler) its delivery is not counted."""
        return await self._call(calls.extend(queue, receipt, visibility_timeout_ms, unstarted))

    async def cancel(
        self,
        queue: str,
        *,
        message_id: str | None = None,
        id: str | None = None,
        reason: str | None = None,
    ) -> m.CancelOut:
        """Removes a message not yet delivered, named by `message_id` or idempotency `id`
        (exactly one). `reason` is kept as its `last_error`. `outcome` is `cancelled`,
        `not_found`, `already_processing` or `already_completed`."""
        return await self._call(calls.cancel(queue, message_id, id, reason))

    # Dead letters.

    async def list_dead_letters(
        self,
        queue: str,
        *,
        limit: int | None = None,
        cursor: str | None = None,
        error: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> m.DeadLetterListOut:
        """One page of the dead letters that came from `queue`, newest first; `error` is a
        case-insensitive substring of the last error. Follow `next_cursor` until it is None."""
        return await self._call(calls.list_dead_letters(queue, limit, cursor, error, since, until))

    async def get_dead_letter(self, queue: str, message_id: str) -> m.DeadLetterEntryOut:
        """One dead letter with its body and headers."""
        return await self._call(calls.get_dead_letter(queue, message_id))

    async def replay_dead_letter(
        self, queue: str, message_id: str, *, target_queue: str | None = None
    ) -> m.ReplayOut:
        """Puts one dead letter back as a fresh message (into `target_queue` if given)."""
        return await self._call(calls.replay_dead_letter(queue, message_id, target_queue))

    async def replay_dead_letters(
        self,
        queue: str,
        *,
        ids: Sequence[str] | None = None,
        error: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int | None = None,
        dry_run: bool = False,
        target_queue: str | None = None,
    ) -> m.ReplayOut:
        """Replays dead letters by id or by filter, up to `limit` (default 1000) per call; call
        again while `more`. A dry run only counts."""
        return await self._call(
            calls.replay_dead_letters(queue, ids, error, since, until, limit, dry_run, target_queue)
        )

    async def delete_dead_letter(self, queue: str, message_id: str) -> m.DeadLetterDeleteOut:
        """Deletes one dead letter."""
        return await self._call(calls.delete_dead_letter(queue, message_id))

    async def purge_dead_letters(self, queue: str) -> m.DeadLetterDeleteOut:
        """Deletes every dead letter that came from `queue`."""
        return await self._call(calls.purge_dead_letters(queue))

    # Webhooks.

    async def list_webhooks(self) -> list[m.WebhookOut]:
        """Every webhook endpoint, by name."""
        return await self._call(calls.list_webhooks())

    async def get_webhook(self, name: str) -> m.WebhookOut:
        """One webhook endpoint with its stats."""
        return await self._call(calls.get_webhook(name))

    async def put_webhook(self, name: str, spec: WebhookSpec) -> m.WebhookPutOut:
        """Creates or replaces the endpoint `POST /hooks/{name}`."""
        return await self._call(calls.put_webhook(name, spec))

    async def delete_webhook(self, name: str) -> m.WebhookDeleteOut:
        """Deletes a webhook endpoint."""
        return await self._call(calls.delete_webhook(name))

    # Schedules (admin).

    async def list_schedules(self) -> list[m.ScheduleOut]:
        """Every schedule, by name."""
        return await self._call(calls.list_schedules())

    async def get_schedule(self, name: str) -> m.ScheduleOut:
        """One schedule: its definition, its next run and its last."""
        return await self._call(calls.get_schedule(name))

    async def put_schedule(self, name: str, spec: ScheduleSpec) -> m.SchedulePutOut:
        """Defines or replaces a schedule: each run enqueues `spec.message` into `spec.queue`
        (which must exist), every `every_ms` or by `cron`."""
        return await self._call(calls.put_schedule(name, spec))

    async def pause_schedule(self, name: str) -> m.ScheduleOut:
        """No runs until resumed; the runs it passes meanwhile are not missed runs."""
        return await self._call(calls.pause_schedule(name))

    async def resume_schedule(self, name: str) -> m.ScheduleOut:
        """Makes runs again, from the next one due."""
        return await self._call(calls.resume_schedule(name))

    async def delete_schedule(self, name: str) -> m.ScheduleDeleteOut:
        """Deletes a schedule; no run is made after it answers."""
        return await self._call(calls.delete_schedule(name))

    # Topics (admin; publishing needs a token that may produce to every subscribed queue).

    async def list_topics(self) -> list[m.TopicOut]:
        """Every topic, by name, with its counts."""
        return await self._call(calls.list_topics())

    async def get_topic(self, name: str) -> m.TopicOut:
        """One topic: its definition and its counts since the server started."""
        return await self._call(calls.get_topic(name))

    async def put_topic(self, name: str, spec: TopicSpec) -> m.TopicPutOut:
        """Defines or replaces a topic (a replaced topic's counts start again). Each
        subscription's queue must exist; its `filter` is a jq expression over `{body, headers,
        key, priority}` (None: the queue takes every message)."""
        return await self._call(calls.put_topic(name, spec))

    async def delete_topic(self, name: str) -> m.TopicDeleteOut:
        """Deletes a topic; its queues and their messages stay."""
        return await self._call(calls.delete_topic(name))

    async def publish(
        self,
        topic: str,
        body: Any = None,
        *,
        id: str | None = None,
        key: str | None = None,
        priority: int | None = None,
        delay_ms: int | None = None,
        not_before: datetime | None = None,
        headers: dict[str, str] | None = None,
    ) -> m.TopicPublishOut:
        """Publishes one message with a JSON `body` to a topic: one copy in each subscribed queue
        whose filter takes it, all stored in one commit before the answer (or none, on any
        refusal). `copies` lists them in the topic's order (empty when no filter took it).

        `id` is an idempotency key for the whole publish: a repeat stores nothing and answers
        the first copies with `created=False`. The other arguments are those of `enqueue`.
        """
        message = MessageIn(
            body=body,
            id=_given(id),
            key=_given(key),
            priority=_given(priority),
            delay_ms=_given(delay_ms),
            not_before=_given(not_before),
            headers=_given(headers),
        )
        return await self._call(calls.publish(topic, message))

    async def publish_message(self, topic: str, message: MessageIn) -> m.TopicPublishOut:
        """Publishes one message given whole (for a byte body, `body_base64`)."""
        return await self._call(calls.publish(topic, message))

    # Alerts (admin). Notifications are messages in each alert's queue, `sluice.alerts.<name>`
    # (read a body with `models.AlertEventOut.from_body`), pushed to its destination if it has one.

    async def list_alerts(self) -> list[m.AlertOut]:
        """Every alert, by name, with what it sent and its delivery queue's stats."""
        return await self._call(calls.list_alerts())

    async def get_alert(self, name: str) -> m.AlertOut:
        """One alert: its definition, what it sent, and its deliveries."""
        return await self._call(calls.get_alert(name))

    async def put_alert(self, name: str, spec: AlertSpec) -> m.AlertPutOut:
        """Defines or replaces an alert and its queue (`sluice.alerts.<name>`, whose push
        destination is the alert's `destination`: a Slack or webhook URL, or none for a consumer
        of its own). A `destination.command` is refused (422 `invalid_field`): only the config
        file may name one."""
        return await self._call(calls.put_alert(name, spec))

    async def delete_alert(self, name: str) -> m.AlertDeleteOut:
        """Deletes an alert, its progress and its queue (notifications not yet delivered go with
        it)."""
        return await self._call(calls.delete_alert(name))
