"""Every route of the native API as a `Call`: method, path, body and how to read the answer.

`Client` and `AsyncClient` differ only in how they send a call, so each route is written down
once, here, and both clients are one line per method. Nothing here does IO.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar
from urllib.parse import quote

from . import models as m
from ._codec import UNSET, Unset, decode, drop_none, encode, format_datetime
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


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request and the reader of its answer."""

    method: str
    path: str
    parse: Callable[[Any], T]
    body: Any = UNSET
    params: dict[str, str] | None = None
    wait_s: float = 0.0
    """How long the server may hold the request on purpose (a long poll, a drain): added to
    the client's read timeout."""
    text: bool = False
    """The answer is text, not JSON."""


def _q(name: str) -> str:
    return quote(name, safe="")


def _queue(name: str, *rest: str) -> str:
    return "/".join(["/v1/queues", _q(name), *rest])


def _reader(cls: type[T]) -> Callable[[Any], T]:
    return lambda data: decode(cls, data)


def _params(**values: str | int | datetime | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in values.items():
        if value is None:
            continue
        out[key] = format_datetime(value) if isinstance(value, datetime) else str(value)
    return out


# Health and self-description.


def health() -> Call[m.HealthOut]:
    return Call("GET", "/healthz", _reader(m.HealthOut))


def ready() -> Call[m.HealthOut]:
    return Call("GET", "/readyz", _reader(m.HealthOut))


def openapi() -> Call[dict[str, Any]]:
    return Call("GET", "/v1/openapi.json", lambda data: dict(data))


def metrics() -> Call[str]:
    return Call("GET", "/metrics", str, text=True)


# Queues.


def list_queues() -> Call[list[m.QueueOut]]:
    return Call("GET", "/v1/queues", lambda data: decode(m.QueueListOut, data).queues)


def put_queue(name: str, spec: QueueSpec | None) -> Call[m.QueuePutOut]:
    return Call("PUT", _queue(name), _reader(m.QueuePutOut), body=encode(spec or QueueSpec()))


def get_queue(name: str) -> Call[m.QueueOut]:
    return Call("GET", _queue(name), _reader(m.QueueOut))


def delete_queue(name: str, dead_letters: str | None = None) -> Call[m.QueueDeleteOut]:
    return Call(
        "DELETE",
        _queue(name),
        _reader(m.QueueDeleteOut),
        params=_params(dead_letters=dead_letters),
    )


def queue_stats(name: str) -> Call[m.QueueStatsOut]:
    return Call("GET", _queue(name, "stats"), _reader(m.QueueStatsOut))


def pause_queue(name: str) -> Call[m.QueueOut]:
    return Call("POST", _queue(name, "pause"), _reader(m.QueueOut), body={})


def resume_queue(name: str) -> Call[m.QueueOut]:
    return Call("POST", _queue(name, "resume"), _reader(m.QueueOut), body={})


def pause_push(name: str) -> Call[m.QueueOut]:
    return Call("POST", _queue(name, "push", "pause"), _reader(m.QueueOut), body={})


def resume_push(name: str) -> Call[m.QueueOut]:
    return Call("POST", _queue(name, "push", "resume"), _reader(m.QueueOut), body={})


def purge(name: str) -> Call[m.PurgeOut]:
    return Call("POST", _queue(name, "purge"), _reader(m.PurgeOut), body={})


def drain(name: str, timeout_ms: int | None) -> Call[m.DrainOut]:
    wait = (timeout_ms if timeout_ms is not None else 30_000) / 1000
    body = drop_none({"timeout_ms": timeout_ms})
    return Call("POST", _queue(name, "drain"), _reader(m.DrainOut), body=body, wait_s=wait)


def browse(
    name: str,
    state: str | None,
    limit: int | None,
    cursor: str | None,
    preview_bytes: int | None,
    message_id: str | None,
    id: str | None,
    key: str | None,
    since: datetime | None,
    until: datetime | None,
) -> Call[m.BrowseOut]:
    params = _params(
        state=state,
        limit=limit,
        cursor=cursor,
        preview_bytes=preview_bytes,
        message_id=message_id,
        id=id,
        key=key,
        since=since,
        until=until,
    )
    return Call("GET", _queue(name, "browse"), _reader(m.BrowseOut), params=params)


def history(since_ms: int | None) -> Call[m.HistoryOut]:
    return Call("GET", "/v1/history", _reader(m.HistoryOut), params=_params(since_ms=since_ms))


def queue_history(name: str, since_ms: int | None) -> Call[m.QueueHistoryOnlyOut]:
    params = _params(since_ms=since_ms)
    return Call("GET", _queue(name, "history"), _reader(m.QueueHistoryOnlyOut), params=params)


# Messages.


def enqueue(name: str, message: MessageIn) -> Call[m.EnqueueOut]:
    return Call("POST", _queue(name, "messages"), _reader(m.EnqueueOut), body=encode(message))


def enqueue_batch(name: str, messages: Sequence[MessageIn]) -> Call[list[m.EnqueueOut]]:
    body = {"messages": [encode(message) for message in messages]}
    return Call(
        "POST",
        _queue(name, "messages"),
        lambda data: decode(m.EnqueueBatchOut, data).results,
        body=body,
    )


def get_message(name: str, message_id: str) -> Call[m.MessageStatusOut]:
    return Call("GET", _queue(name, "messages", _q(message_id)), _reader(m.MessageStatusOut))


def find_message(name: str, idempotency_id: str) -> Call[m.MessageStatusOut]:
    return Call(
        "GET",
        _queue(name, "messages"),
        _reader(m.MessageStatusOut),
        params={"id": idempotency_id},
    )


def message_body(name: str, message_id: str) -> Call[m.MessageBodyOut]:
    path = _queue(name, "messages", _q(message_id), "body")
    return Call("GET", path, _reader(m.MessageBodyOut))


def message_deliveries(name: str, message_id: str) -> Call[m.DeliveriesOut]:
    path = _queue(name, "messages", _q(message_id), "deliveries")
    return Call("GET", path, _reader(m.DeliveriesOut))


def receive(
    name: str, max: int, wait_ms: int, visibility_timeout_ms: int | None
) -> Call[list[m.ReceivedMessage]]:
    body = drop_none(
        {"max": max, "wait_ms": wait_ms, "visibility_timeout_ms": visibility_timeout_ms}
    )
    return Call(
        "POST",
        _queue(name, "receive"),
        lambda data: decode(m.ReceiveOut, data).messages,
        body=body,
        wait_s=wait_ms / 1000,
    )


def ack(name: str, receipts: Sequence[str], result: Any | Unset) -> Call[m.AckOut]:
    body: dict[str, Any] = {"receipts": list(receipts)}
    if not isinstance(result, Unset):
        body["result"] = result
    return Call("POST", _queue(name, "ack"), _reader(m.AckOut), body=body)


def ack_then(
    name: str, receipt: str, result: Any | Unset, then: Sequence[NextStepIn]
) -> Call[m.AckOut]:
    # Next steps go with a single receipt only (the server refuses them with `receipts`).
    body: dict[str, Any] = {"receipt": receipt, "then": [encode(step) for step in then]}
    if not isinstance(result, Unset):
        body["result"] = result
    return Call("POST", _queue(name, "ack"), _reader(m.AckOut), body=body)


def nack(
    name: str, receipt: str, error: str | None, delay_ms: int | None, permanent: bool
) -> Call[m.NackOut]:
    body = drop_none(
        {"receipt": receipt, "error": error, "delay_ms": delay_ms, "permanent": permanent or None}
    )
    return Call("POST", _queue(name, "nack"), _reader(m.NackOut), body=body)


def extend(
    name: str, receipt: str, visibility_timeout_ms: int, unstarted: bool = False
) -> Call[m.ExtendOut]:
    body: dict[str, Any] = {"receipt": receipt, "visibility_timeout_ms": visibility_timeout_ms}
    if unstarted:
        body["unstarted"] = True
    return Call("POST", _queue(name, "extend"), _reader(m.ExtendOut), body=body)


def cancel(
    name: str, message_id: str | None, idempotency_id: str | None, reason: str | None
) -> Call[m.CancelOut]:
    if (message_id is None) == (idempotency_id is None):
        raise ValueError("cancel needs exactly one of message_id and id")
    body = drop_none({"message_id": message_id, "id": idempotency_id, "reason": reason})
    return Call("POST", _queue(name, "cancel"), _reader(m.CancelOut), body=body)


# Dead letters.


def list_dead_letters(
    name: str,
    limit: int | None,
    cursor: str | None,
    error: str | None,
    since: datetime | None,
    until: datetime | None,
) -> Call[m.DeadLetterListOut]:
    params = _params(limit=limit, cursor=cursor, error=error, since=since, until=until)
    return Call("GET", _queue(name, "dlq"), _reader(m.DeadLetterListOut), params=params)


def get_dead_letter(name: str, message_id: str) -> Call[m.DeadLetterEntryOut]:
    return Call("GET", _queue(name, "dlq", _q(message_id)), _reader(m.DeadLetterEntryOut))


def replay_dead_letter(name: str, message_id: str, target_queue: str | None) -> Call[m.ReplayOut]:
    body = drop_none({"target_queue": target_queue})
    path = _queue(name, "dlq", _q(message_id), "replay")
    return Call("POST", path, _reader(m.ReplayOut), body=body)


def replay_dead_letters(
    name: str,
    ids: Sequence[str] | None,
    error: str | None,
    since: datetime | None,
    until: datetime | None,
    limit: int | None,
    dry_run: bool,
    target_queue: str | None,
) -> Call[m.ReplayOut]:
    body = drop_none(
        {
            "ids": list(ids) if ids is not None else None,
            "error": error,
            "since": format_datetime(since) if since else None,
            "until": format_datetime(until) if until else None,
            "limit": limit,
            "dry_run": dry_run or None,
            "target_queue": target_queue,
        }
    )
    return Call("POST", _queue(name, "dlq", "replay"), _reader(m.ReplayOut), body=body)


def delete_dead_letter(name: str, message_id: str) -> Call[m.DeadLetterDeleteOut]:
    return Call("DELETE", _queue(name, "dlq", _q(message_id)), _reader(m.DeadLetterDeleteOut))


def purge_dead_letters(name: str) -> Call[m.DeadLetterDeleteOut]:
    return Call("DELETE", _queue(name, "dlq"), _reader(m.DeadLetterDeleteOut))


# Webhooks.


def list_webhooks() -> Call[list[m.WebhookOut]]:
    return Call("GET", "/v1/webhooks", lambda data: decode(m.WebhookListOut, data).webhooks)


def get_webhook(name: str) -> Call[m.WebhookOut]:
    return Call("GET", f"/v1/webhooks/{_q(name)}", _reader(m.WebhookOut))


def put_webhook(name: str, spec: WebhookSpec) -> Call[m.WebhookPutOut]:
    body = _drop_null_fields(encode(spec))
    return Call("PUT", f"/v1/webhooks/{_q(name)}", _reader(m.WebhookPutOut), body=body)


def delete_webhook(name: str) -> Call[m.WebhookDeleteOut]:
    return Call("DELETE", f"/v1/webhooks/{_q(name)}", _reader(m.WebhookDeleteOut))


# Schedules.


def _schedule(name: str, *rest: str) -> str:
    return "/".join(["/v1/schedules", _q(name), *rest])


def list_schedules() -> Call[list[m.ScheduleOut]]:
    return Call("GET", "/v1/schedules", lambda data: decode(m.ScheduleListOut, data).schedules)


def get_schedule(name: str) -> Call[m.ScheduleOut]:
    return Call("GET", _schedule(name), _reader(m.ScheduleOut))


def put_schedule(name: str, spec: ScheduleSpec) -> Call[m.SchedulePutOut]:
    # None means "not given" in a schedule spec and its message; the body's JSON stays as is.
    body = drop_none(encode(spec))
    body["message"] = drop_none(body["message"])
    return Call("PUT", _schedule(name), _reader(m.SchedulePutOut), body=body)


def pause_schedule(name: str) -> Call[m.ScheduleOut]:
    return Call("POST", _schedule(name, "pause"), _reader(m.ScheduleOut), body={})


def resume_schedule(name: str) -> Call[m.ScheduleOut]:
    return Call("POST", _schedule(name, "resume"), _reader(m.ScheduleOut), body={})


def delete_schedule(name: str) -> Call[m.ScheduleDeleteOut]:
    return Call("DELETE", _schedule(name), _reader(m.ScheduleDeleteOut))


# Topics.


def _topic(name: str, *rest: str) -> str:
    return "/".join(["/v1/topics", _q(name), *rest])


def list_topics() -> Call[list[m.TopicOut]]:
    return Call("GET", "/v1/topics", lambda data: decode(m.TopicListOut, data).topics)


def get_topic(name: str) -> Call[m.TopicOut]:
    return Call("GET", _topic(name), _reader(m.TopicOut))


def put_topic(name: str, spec: TopicSpec) -> Call[m.TopicPutOut]:
    # A subscription without a filter takes every message: leave `filter` out rather than null.
    body = {"subscriptions": [drop_none(encode(sub)) for sub in spec.subscriptions]}
    return Call("PUT", _topic(name), _reader(m.TopicPutOut), body=body)


def delete_topic(name: str) -> Call[m.TopicDeleteOut]:
    return Call("DELETE", _topic(name), _reader(m.TopicDeleteOut))


def publish(name: str, message: MessageIn) -> Call[m.TopicPublishOut]:
    return Call("POST", _topic(name, "messages"), _reader(m.TopicPublishOut), body=encode(message))


# Alerts.


def _alert(name: str) -> str:
    return f"/v1/alerts/{_q(name)}"


def list_alerts() -> Call[list[m.AlertOut]]:
    return Call("GET", "/v1/alerts", lambda data: decode(m.AlertListOut, data).alerts)


def get_alert(name: str) -> Call[m.AlertOut]:
    return Call("GET", _alert(name), _reader(m.AlertOut))


def put_alert(name: str, spec: AlertSpec) -> Call[m.AlertPutOut]:
    # None means "not given" in an alert spec and its destination: leave those fields out.
    body = _drop_null_fields(encode(spec))
    return Call("PUT", _alert(name), _reader(m.AlertPutOut), body=body)


def delete_alert(name: str) -> Call[m.AlertDeleteOut]:
    return Call("DELETE", _alert(name), _reader(m.AlertDeleteOut))


def _drop_null_fields(value: Any) -> Any:
    """Webhook and alert specs use None for "not given": leave those fields out, at every depth."""
    if isinstance(value, dict):
        return {key: _drop_null_fields(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_drop_null_fields(item) for item in value]
    return value
