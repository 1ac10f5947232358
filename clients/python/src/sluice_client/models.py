"""The server's answers, as frozen dataclasses (docs/http-api.md; `GET /v1/openapi.json`).

Field names are the JSON names; times are aware `datetime`s in UTC; durations keep the API's
`_ms` integers. Fields a newer server adds are ignored, so these types only grow.
A test checks every field here against the server's OpenAPI document, both ways.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ._codec import decode
from .specs import AlertSpec, PushSpec, ScheduleSpec, TopicSpec, WebhookSpec

JsonValue = Any
"""Any JSON value: the body of a message, a result, a schema."""


@dataclass(frozen=True)
class AckOut:
    """Answer to ack (200 when every receipt was acked)."""

    acked: int
    """How many were acked."""
    results: list[AckResult]
    """Per receipt, in order."""
    then: list[EnqueueOut] | None = None
    """The next steps the ack enqueued, in the order given (a duplicate of an idempotency key
    answers with its first message, as an enqueue does). Only when the ack had `then`.
    """


@dataclass(frozen=True)
class AckResult:
    """The result for one receipt."""

    acked: bool
    """True when acked."""
    receipt: str
    """The receipt."""
    error: ErrorDetail | None = None


@dataclass(frozen=True)
class AlertDeleteOut:
    """Answer to `DELETE /v1/alerts/{name}`."""

    deleted: bool
    """Always true."""


@dataclass(frozen=True)
class AlertEventOut:
    """One notification of an alert: the JSON body of each message in the alert's queue
    (`sluice.alerts.<name>`), as a webhook or a command destination receives it (a Slack
    destination gets its `text`). Read one with `AlertEventOut.from_body(message.body)`.

    No route answers it, so the server's OpenAPI document does not list it; it follows the
    server's `AlertEventOut`.
    """

    alert: str
    """The alert's name."""
    queue: str
    """The queue it is about."""
    status: str
    """`firing`, or `resolved` once a threshold is no longer passed (dead letters always fire)."""
    text: str
    """A one-paragraph summary for people."""
    timestamp: datetime
    """When the notification was made."""
    type: str
    """`dead_letters`, `depth` or `oldest_ready_age`."""
    count: int | None = None
    """Dead letters: how many were dead-lettered in `[since, until)` and are still in the
    dead-letter queue."""
    count_capped: bool = False
    """Dead letters: true when there were more than could be counted (`count` is a floor)."""
    dashboard_url: str | None = None
    """The dashboard page to look at, when the server knows its address."""
    dead_letter_queue: str | None = None
    """Dead letters: the queue they are in."""
    sample: list[AlertSampleOut] = field(default_factory=list)
    """Dead letters: the newest ones' errors."""
    since: datetime | None = None
    """Dead letters: the start of the span counted."""
    threshold: int | None = None
    """Thresholds: the threshold."""
    until: datetime | None = None
    """Dead letters: the end of the span counted."""
    value: int | None = None
    """Thresholds: the value now (messages, or ms)."""

    @classmethod
    def from_body(cls, body: JsonValue) -> AlertEventOut:
        """Reads a notification from the JSON body of a message of an alert's queue (or of a
        webhook request an alert made)."""
        return decode(cls, body)


@dataclass(frozen=True)
class AlertListOut:
    """Answer to `GET /v1/alerts`."""

    alerts: list[AlertOut]
    """Every alert, by name."""


@dataclass(frozen=True)
class AlertOut:
    """An alert, its definition and what it did."""

    name: str
    """Its name."""
    queue: str
    """The queue its notifications go through (`sluice.alerts.<name>`): retried with backoff and
    dead-lettered there like any message."""
    sent: AlertSentOut
    """Notifications made."""
    spec: AlertSpec
    """The definition (a Slack URL hidden from tokens that are not admins)."""
    delivery: QueueStatsOut | None = None
    """The delivery queue's stats: notifications waiting, failing, delivered, dead-lettered."""
    firing: list[str] = field(default_factory=list)
    """Queues whose depth or oldest-ready age is over a threshold now."""
    last_sent_at: datetime | None = None
    """When the last notification was made."""


@dataclass(frozen=True)
class AlertPutOut:
    """Answer to `PUT /v1/alerts/{name}`."""

    alert: AlertOut
    """The alert as it is now."""
    created: bool
    """False when an existing alert was replaced."""


@dataclass(frozen=True)
class AlertSampleOut:
    """One dead letter quoted in a notification (`AlertEventOut.sample`)."""

    attempts: int
    """Attempts it had."""
    dead_lettered_at: datetime
    """When it was dead-lettered."""
    message_id: str
    """The dead letter's id."""
    error: str | None = None
    """The error of its last attempt."""


@dataclass(frozen=True)
class AlertSentOut:
    """What an alert has sent, per kind, since it was defined."""

    dead_letters: int
    """Dead-letter notifications."""
    dead_letters_counted: int
    """Dead letters those notifications counted."""
    depth: int
    """Depth notifications (firing and resolved)."""
    oldest_ready_age: int
    """Oldest-ready-age notifications (firing and resolved)."""


@dataclass(frozen=True)
class BackoffOut:
    """Backoff as the API shows it."""

    factor: float
    """Growth per attempt."""
    initial_ms: int
    """First delay in ms."""
    jitter: bool
    """Equal jitter on or off."""
    max_ms: int
    """Largest delay in ms."""


@dataclass(frozen=True)
class BrowseCountsOut:
    """How many messages a queue holds in each browsable state."""

    delayed: int
    """Waiting for a delay or backoff to end."""
    in_flight: int
    """Leased to consumers."""
    ready: int
    """Claimable now."""
    waiting: int
    """Visible but behind the active message of their lane (ordered queues)."""


@dataclass(frozen=True)
class BrowseOut:
    """`GET /v1/queues/{queue}/browse`: a page of one state's messages in dispatch order."""

    counts: BrowseCountsOut
    """Sizes of every live state now (kept acked messages are not counted)."""
    messages: list[BrowsedMessageOut]
    """In order: ready by priority then enqueue order, waiting oldest first, delayed by visible
    time, in flight by lease deadline, acked newest ack first.
    """
    queue: str
    """The queue."""
    state: str
    """`ready`, `waiting`, `delayed`, `in_flight` or `acked`."""
    next_cursor: str | None = None
    """Pass as `cursor` for the next page; absent at the end."""


@dataclass(frozen=True)
class BrowsedMessageOut:
    """One message of `GET /v1/queues/{queue}/browse`."""

    attempts: int
    """Deliveries so far."""
    enqueued_at: datetime
    """RFC 3339."""
    message_id: str
    """Server id."""
    priority: int
    """Priority."""
    queue: str
    """The queue it is in now (its DLQ once dead)."""
    state: str
    """`ready`, `delayed`, `in_flight`, `acked`, `dead`, `expired`, `cancelled`, `purged`,
    `replayed` or `deleted`.
    """
    visible_at: datetime
    """RFC 3339."""
    age_ms: int
    """How long since it was enqueued, ms."""
    acked_at: datetime | None = None
    """RFC 3339, once acked."""
    dead_letter: DeadLetterOut | None = None
    failures: list[FailureOut] = field(default_factory=list)
    """Failed attempts, oldest first: nacks, leases that ran out, the move to the DLQ."""
    finished_at: datetime | None = None
    """RFC 3339, once in a final state."""
    first_received_at: datetime | None = None
    """RFC 3339."""
    id: str | None = None
    """Idempotency key."""
    kept_until: datetime | None = None
    """RFC 3339: until when an acked message keeps its body (its queue's `keep_acked_ms`);
    absent once the body is gone.
    """
    key: str | None = None
    """Ordering key."""
    last_error: str | None = None
    """Error of the last failed attempt."""
    lease_expires_at: datetime | None = None
    """RFC 3339, while in flight."""
    replayed_as: str | None = None
    """For a replayed dead letter: the new message's id."""
    result: JsonValue = None
    """The result its consumer acked it with."""
    body_bytes: int | None = None
    """Body size in bytes, when known without a read from disk."""
    body_preview: str | None = None
    """The start of the body (with `preview_bytes`): its JSON text as stored, bytes as base64,
    ending in `…` when cut.
    """
    lease_age_ms: int | None = None
    """How long it has been leased, ms (in flight only)."""
    leased_at: datetime | None = None
    """RFC 3339: when its current lease began (in flight only)."""


@dataclass(frozen=True)
class CancelOut:
    """Answer to cancel."""

    outcome: str
    """`cancelled`, `not_found`, `already_processing` or `already_completed`."""
    message_id: str | None = None
    """The message, when found."""
    state: str | None = None
    """Its state now (`cancelled`, `in_flight`, `acked`, `dead`, ...), when found."""


@dataclass(frozen=True)
class CountersOut:
    """Counters since the server started."""

    acked: int
    """Acks."""
    cancelled: int
    """Cancelled before delivery."""
    dead_lettered: int
    """Moved to the dead-letter queue."""
    delivered: int
    """Deliveries."""
    enqueued: int
    """Accepted messages (duplicates not counted)."""
    expired: int
    """Removed or dead-lettered by retention."""
    lease_expired: int
    """Leases that ran out."""
    nacked: int
    """Nacks."""
    purged: int
    """Removed by purges."""
    rejected: int
    """Refused at `max_depth`."""
    deduplicated: int = 0
    """Not stored: their idempotency key (given as `id`, or made from the content on a
    `dedup: "content"` queue) was seen within the dedup window. Idempotency hits, counted
    on every path (HTTP, gRPC, SQS, webhooks).
    """


@dataclass(frozen=True)
class DeadLetterDeleteOut:
    """Answer to deleting dead letters."""

    deleted: int
    """Entries deleted."""


@dataclass(frozen=True)
class DeadLetterEntryOut:
    """One dead letter."""

    attempts: int
    """Attempts made in the source queue."""
    enqueued_at: datetime
    """RFC 3339: first enqueued."""
    first_seen_at: datetime
    """RFC 3339: first delivery in the source queue."""
    last_seen_at: datetime
    """RFC 3339: when it was dead-lettered."""
    message_id: str
    """Its id (the id it had in the source queue)."""
    priority: int
    """Priority."""
    queue: str
    """The dead-letter queue holding it."""
    source_queue: str
    """The queue it failed in."""
    state: str
    """`dead`, `in_flight` (someone consumes the DLQ), `replayed` or `deleted`."""
    body: JsonValue = None
    """JSON body (`GET .../dlq/{message_id}` only)."""
    body_base64: str | None = None
    """Byte body in base64 (`GET .../dlq/{message_id}` only)."""
    body_bytes: int | None = None
    """Body size in bytes, when known."""
    headers: dict[str, str] | None = None
    """Headers (`GET .../dlq/{message_id}` only)."""
    id: str | None = None
    """Idempotency key."""
    key: str | None = None
    """Ordering key."""
    last_error: str | None = None
    """Error of the last attempt."""
    replayed_as: str | None = None
    """The new message a replay created."""
    replayed_at: datetime | None = None
    """RFC 3339, once replayed."""


@dataclass(frozen=True)
class DeadLetterListOut:
    """`GET /v1/queues/{queue}/dlq`."""

    dead_letter_queue: str
    """The dead-letter queue."""
    entries: list[DeadLetterEntryOut]
    """Newest first."""
    next_cursor: str | None = None
    """Pass as `cursor` for the next page; absent at the end."""


@dataclass(frozen=True)
class DeadLetterOut:
    """Dead-letter metadata."""

    attempts: int
    """Attempts made there."""
    first_seen_at: datetime
    """RFC 3339."""
    last_seen_at: datetime
    """RFC 3339."""
    source_queue: str
    """The queue it failed in."""
    last_error: str | None = None
    """Error of the last attempt."""


@dataclass(frozen=True)
class DeliveriesOut:
    """`GET /v1/queues/{queue}/messages/{message_id}/deliveries`: a message's push delivery log."""

    deliveries: list[DeliveryOut]
    """Its last push attempts, oldest first (at most `[push] delivery_log_attempts`)."""
    message_id: str
    """Server id."""
    queue: str
    """The queue it is in now (its dead-letter queue once dead)."""
    state: str
    """Its state (see `MessageStatusOut.state`)."""


@dataclass(frozen=True)
class DeliveryOut:
    """One push delivery attempt: the request as sent (secrets hidden) and the answer."""

    at: datetime
    """RFC 3339: when the request was sent."""
    attempt: int
    """The attempt's number (in the queue it was delivered from)."""
    latency_ms: int
    """From sending the request to reading the excerpt, in ms."""
    method: str
    """HTTP method."""
    request_headers: dict[str, str]
    """Request headers; values of the destination's configured headers are `(hidden)`."""
    response_headers: dict[str, str]
    """The answer's headers (repeated names joined with `, `)."""
    url: str
    """The destination URL, with user info and query (and a `secret_path`) shown as `(hidden)`."""
    body_excerpt: str | None = None
    """The first bytes of the answer's body (`[push] delivery_log_body_bytes`), as text."""
    body_truncated: bool = False
    """True when the body was longer than the excerpt."""
    error: str | None = None
    """Why the attempt failed, when it did."""
    response_headers_truncated: bool = False
    """True when headers were left out past `[push] delivery_log_header_bytes`."""
    status: int | None = None
    """The answer's HTTP status; absent when none came (connection error, timeout)."""


@dataclass(frozen=True)
class DrainOut:
    """Answer to drain."""

    delayed: int
    """Left when it returned."""
    drained: bool
    """True when the queue held no ready, delayed or in-flight message."""
    in_flight: int
    """Left when it returned."""
    ready: int
    """Left when it returned."""
    waited_ms: int
    """How long the call waited, ms."""


@dataclass(frozen=True)
class EnqueueBatchOut:
    """Answer to a batch enqueue: one result per message, in order."""

    results: list[EnqueueOut]
    """Per message."""


@dataclass(frozen=True)
class EnqueueOut:
    """The result for one enqueued message."""

    created: bool
    """False for a duplicate idempotency key within the window."""
    message_id: str
    """Server id (the original's for a duplicate)."""
    position: int | None = None
    """For a new message: how many messages the queue held when it was stored (ahead of it, give or
    take priorities and delays).
    """
    result: JsonValue = None
    """For a duplicate whose first message was acked with a result: that result."""
    state: str | None = None
    """For a duplicate: where the first message is now (`ready`, `in_flight`, `acked`, ...)."""


@dataclass(frozen=True)
class ErrorDetail:
    """A stable code and a human message. The code is a string here, not an [`ErrorCode`], because
    clients read this type too and must not fail on a code from a newer server; it is private so
    that the only way to make one is [`ErrorDetail::new`], from an [`ErrorCode`]. The OpenAPI
    document describes it as a string for the same reason: a generated client with a closed enum
    would break on a new code.
    """

    code: str
    """Stable machine code, e.g. `queue_not_found`, `stale_receipt`, `invalid_field`."""
    message: str
    """What to fix."""
    details: dict[str, JsonValue] | None = None
    """Per-item results where a batch was partly refused."""


@dataclass(frozen=True)
class ExtendOut:
    """Answer to extend."""

    lease_expires_at: datetime
    """RFC 3339."""


@dataclass(frozen=True)
class FailureOut:
    """One failed attempt of a message."""

    at: datetime
    """RFC 3339."""
    attempt: int
    """The attempt's number."""
    dead_lettered: bool = False
    """True when it sent the message to the dead-letter queue."""
    error: str | None = None
    """Its error."""


@dataclass(frozen=True)
class HealthOut:
    """Health answer."""

    status: str
    """`ok`, or why not."""


@dataclass(frozen=True)
class HistoryOut:
    """Answer to `GET /v1/history`."""

    interval_ms: int
    """Time between samples, ms."""
    now_ms: int
    """The server's clock now, ms since the Unix epoch (a client lines its clock up with it)."""
    queues: list[QueueHistoryOut]
    """Every queue the caller may read that has a history, by name."""
    webhooks: list[WebhookHistoryOut]
    """Every webhook endpoint with a history, by name (admin tokens only: empty for others)."""
    window_ms: int
    """How far back points are kept, ms."""


@dataclass(frozen=True)
class LatencyOut:
    """Enqueue-to-ack latency percentiles."""

    p50: int
    """Median, ms."""
    p95: int
    """95th percentile, ms."""
    p99: int
    """99th percentile, ms."""
    samples: int
    """Acks measured."""


@dataclass(frozen=True)
class MessageBodyOut:
    """`GET /v1/queues/{queue}/messages/{message_id}/body`: a message with its body and headers."""

    available: bool
    """False once the body was dropped (acked, expired, cancelled, purged, deleted)."""
    message_id: str
    """Server id."""
    queue: str
    """The queue it is in now."""
    state: str
    """Its state (see `MessageStatusOut.state`)."""
    body: JsonValue = None
    """JSON body."""
    body_base64: str | None = None
    """Byte body in base64."""
    body_bytes: int | None = None
    """Body size in bytes."""
    headers: dict[str, str] | None = None
    """Headers."""


@dataclass(frozen=True)
class MessageStatusOut:
    """Where a message is now."""

    attempts: int
    """Deliveries so far."""
    enqueued_at: datetime
    """RFC 3339."""
    message_id: str
    """Server id."""
    priority: int
    """Priority."""
    queue: str
    """The queue it is in now (its DLQ once dead)."""
    state: str
    """`ready`, `delayed`, `in_flight`, `acked`, `dead`, `expired`, `cancelled`, `purged`,
    `replayed` or `deleted`.
    """
    visible_at: datetime
    """RFC 3339."""
    acked_at: datetime | None = None
    """RFC 3339, once acked."""
    dead_letter: DeadLetterOut | None = None
    failures: list[FailureOut] = field(default_factory=list)
    """Failed attempts, oldest first: nacks, leases that ran out, the move to the DLQ."""
    finished_at: datetime | None = None
    """RFC 3339, once in a final state."""
    first_received_at: datetime | None = None
    """RFC 3339."""
    id: str | None = None
    """Idempotency key."""
    kept_until: datetime | None = None
    """RFC 3339: until when an acked message keeps its body (its queue's `keep_acked_ms`);
    absent once the body is gone.
    """
    key: str | None = None
    """Ordering key."""
    last_error: str | None = None
    """Error of the last failed attempt."""
    lease_expires_at: datetime | None = None
    """RFC 3339, while in flight."""
    replayed_as: str | None = None
    """For a replayed dead letter: the new message's id."""
    result: JsonValue = None
    """The result its consumer acked it with."""


@dataclass(frozen=True)
class NackOut:
    """Answer to nack."""

    state: str
    """`delayed`, `ready` or `dead`."""
    dead_letter_queue: str | None = None
    """The dead-letter queue it went to."""
    visible_at: datetime | None = None
    """When it is visible again (RFC 3339), for a retry."""


@dataclass(frozen=True)
class PurgeOut:
    """Answer to purge."""

    in_flight: int
    """Messages left because they are in flight."""
    purged: int
    """Messages removed."""


@dataclass(frozen=True)
class PushPointOut:
    """Push deliveries of one interval."""

    delivered_per_s: float
    """Requests answered 2xx, per second."""
    failed_per_s: float
    """Failed requests (retried or final), per second."""


@dataclass(frozen=True)
class PushStatsOut:
    """What a push destination did since the server started."""

    delivered: int
    """Requests answered 2xx (acked)."""
    failed_permanently: int
    """Failures that sent the message to the dead-letter queue: a permanent answer, or the last
    attempt.
    """
    in_flight: int
    """Requests in flight now."""
    retried: int
    """Failed attempts that will be retried."""
    enabled: bool = False
    """False when the server runs with push delivery off (`--no-push`, `[push] enabled = false`)."""
    last_error: str | None = None
    """The last failure."""
    last_status: int | None = None
    """Status of the last answer."""
    latency_ms: LatencyOut | None = None
    paused: bool = False
    """True while an operator paused this queue's push delivery (`POST
    /v1/queues/{queue}/push/pause`; kept across restarts).
    """


@dataclass(frozen=True)
class QueueConfigOut:
    """A queue's settings as the API shows them."""

    backoff: BackoffOut
    """Retry backoff."""
    dedup: str
    """`id` or `content`: what makes two messages the same one."""
    dedup_window_ms: int
    """Idempotency window in ms."""
    delay_ms: int
    """Delay in ms given to a message enqueued without one."""
    max_age_ms: int
    """Retention in ms."""
    max_attempts: int
    """Deliveries before dead-lettering (0 = forever)."""
    max_message_bytes: int
    """Largest body in bytes."""
    on_expire: str
    """`drop` or `dead_letter`."""
    ordering: str
    """`unordered`, `fifo` or `per_key`."""
    protocol_attributes: dict[str, str]
    """Settings a protocol keeps for the queue (`sqs.<Attribute>`), shown as stored."""
    tags: dict[str, str]
    """Tags."""
    visibility_timeout_ms: int
    """Lease length in ms."""
    dead_letter_queue: str | None = None
    """Dead-letter queue, if any."""
    keep_acked_ms: int = 0
    """How long an acked message keeps its body, in ms; 0 = not kept."""
    max_depth: int | None = None
    """Most messages held; null = unbounded."""
    max_in_flight: int | None = None
    """Most leases out at once; null = unbounded."""
    push: PushSpec | None = None
    rate_limit: RateLimitOut | None = None
    schema: JsonValue = None
    """JSON Schema for bodies; null = none."""


@dataclass(frozen=True)
class QueueDeleteOut:
    """`DELETE /v1/queues/{queue}`."""

    deleted: bool
    """Always true."""
    messages_removed: int
    """Messages removed with it."""
    dead_letter_queue: str | None = None
    """Its dead-letter queue, when it was deleted with it (None: kept, or none)."""
    dead_letters_removed: int = 0
    """Dead letters removed with that queue."""


@dataclass(frozen=True)
class QueueHistoryOnlyOut:
    """Answer to `GET /v1/queues/{queue}/history`."""

    interval_ms: int
    """Time between samples, ms."""
    now_ms: int
    """The server's clock now, ms since the Unix epoch."""
    points: list[QueuePointOut]
    """Its samples, oldest first (empty before the first sample, or past `[dashboard]
    history_queues_max`).
    """
    queue: str
    """The queue."""
    window_ms: int
    """How far back points are kept, ms."""


@dataclass(frozen=True)
class QueueHistoryOut:
    """One queue's points, oldest first."""

    name: str
    """The queue."""
    points: list[QueuePointOut]
    """Its samples, oldest first."""


@dataclass(frozen=True)
class QueueListOut:
    """`GET /v1/queues`."""

    queues: list[QueueOut]
    """Every queue, by name."""


@dataclass(frozen=True)
class QueueOut:
    """A queue, its settings and its stats."""

    config: QueueConfigOut
    """Settings."""
    name: str
    """Name."""
    stats: QueueStatsOut
    """Depth and counters."""


@dataclass(frozen=True)
class QueuePointOut:
    """One sample of a queue."""

    acked_per_s: float
    """Acks per second over the interval."""
    at_ms: int
    """When it was taken, ms since the Unix epoch (server clock)."""
    delayed: int
    """Waiting for a delay or backoff to end."""
    enqueued_per_s: float
    """Messages enqueued per second over the interval that ends here."""
    failed_per_s: float
    """Failed attempts (nacks, leases that ran out) per second over the interval."""
    in_flight: int
    """Leased to consumers."""
    ready: int
    """Claimable messages (including those waiting behind their lane)."""
    dead_lettered: int | None = None
    """Messages in its dead-letter queue (absent without one)."""
    push: PushPointOut | None = None


@dataclass(frozen=True)
class QueuePutOut:
    """Answer to `PUT /v1/queues/{queue}`."""

    created: bool
    """False when an existing queue was updated."""
    queue: QueueOut
    """The queue as it is now."""


@dataclass(frozen=True)
class QueueStatsOut:
    """Depth and counters of a queue."""

    counters: CountersOut
    """Since the server started."""
    delayed: int
    """Waiting for a delay or backoff to end."""
    in_flight: int
    """Leased to consumers."""
    last_1m: ThroughputOut
    """Over the last 60 seconds."""
    last_5m: ThroughputOut
    """Over the last 300 seconds."""
    paused: bool
    """True while deliveries are paused."""
    ready: int
    """Visible, waiting for a consumer."""
    dead_lettered: int | None = None
    """Messages in this queue's dead-letter queue."""
    latency_ms: LatencyOut | None = None
    oldest_ready_age_ms: int | None = None
    """Age of the oldest ready message in ms."""
    push: PushStatsOut | None = None
    stuck: list[str] = field(default_factory=list)
    """Why the queue is stuck, in this order: `dead_letters`, `paused`, `depth`, `age` (over
    the server's `[dashboard] stuck_depth` or `stuck_age_ms`); empty when it is not."""


@dataclass(frozen=True)
class RateLimitOut:
    """Rate limit as the API shows it."""

    burst: int
    """Deliveries allowed at once."""
    per_second: float
    """Sustained deliveries per second."""


@dataclass(frozen=True)
class ReceiveOut:
    """Answer to receive."""

    messages: list[ReceivedMessage]
    """Zero or more messages."""


@dataclass(frozen=True)
class ReceivedMessage:
    """One delivered message."""

    attempts: int
    """This delivery's attempt number, from 1."""
    enqueued_at: datetime
    """RFC 3339."""
    first_received_at: datetime
    """RFC 3339."""
    headers: dict[str, str]
    """Headers."""
    lease_expires_at: datetime
    """RFC 3339."""
    message_id: str
    """Server id."""
    priority: int
    """Priority."""
    receipt: str
    """Lease handle for ack, nack and extend."""
    body: JsonValue = None
    """JSON body, when it was enqueued as JSON."""
    body_base64: str | None = None
    """Byte body in base64, when it was enqueued as bytes."""
    dead_letter: DeadLetterOut | None = None
    id: str | None = None
    """Idempotency key."""
    key: str | None = None
    """Ordering key."""
    last_error: str | None = None
    """Error of the previous attempt."""


@dataclass(frozen=True)
class ReplayOut:
    """Answer to replay."""

    dry_run: bool
    """True when nothing was replayed, only counted."""
    matched: int
    """Entries matching (for a dry run: all of them; otherwise those taken by this call)."""
    more: bool
    """True when more matching entries are left (call again)."""
    replayed: int
    """Entries replayed by this call."""
    results: list[ReplayedOut]
    """Per entry."""
    target_queue: str
    """The queue they went to."""


@dataclass(frozen=True)
class ReplayedOut:
    """One replayed entry."""

    dead_letter_id: str
    """The dead letter."""
    message_id: str
    """The new message."""


@dataclass(frozen=True)
class ScheduleDeleteOut:
    """Answer to `DELETE /v1/schedules/{name}`."""

    deleted: bool
    """Always true."""


@dataclass(frozen=True)
class ScheduleListOut:
    """`GET /v1/schedules`."""

    schedules: list[ScheduleOut]
    """Every schedule, by name."""


@dataclass(frozen=True)
class ScheduleOut:
    """A schedule, its definition and where it stands."""

    last_run_at: datetime | None
    """The time of the last run made or passed (skipped by the `missed` policy): runs up to it
    are done. None before the first."""
    name: str
    """Its name."""
    paused: bool
    """True when paused."""
    runs: int
    """Runs made since the schedule was defined."""
    skipped_runs: int
    """Runs not made because of the `missed` policy."""
    spec: ScheduleSpec
    """The definition, as given."""
    last_enqueued_at: datetime | None = None
    """When the last run's message was enqueued."""
    last_error: str | None = None
    """Why the last attempt to make a run failed (the queue is gone or full...); cleared by the
    next run made."""
    last_message_id: str | None = None
    """The last run's message."""
    next_run_at: datetime | None = None
    """When the next run is due; None when paused or when the pattern has no further time."""


@dataclass(frozen=True)
class SchedulePutOut:
    """Answer to `PUT /v1/schedules/{name}`."""

    created: bool
    """False when an existing schedule was replaced."""
    schedule: ScheduleOut
    """The schedule as it is now."""


@dataclass(frozen=True)
class ThroughputOut:
    """Messages through a queue over a recent span."""

    acked: int
    """Messages acked."""
    acked_per_s: float
    """Acked per second."""
    enqueued: int
    """Messages accepted."""
    enqueued_per_s: float
    """Accepted per second."""
    failed: int
    """Failed attempts (nacks and leases that ran out)."""
    failed_per_s: float
    """Failed per second."""


@dataclass(frozen=True)
class TopicCopyOut:
    """One copy a publish stored (or found stored, for a duplicate)."""

    created: bool
    """False for a duplicate of an earlier publish with the same idempotency key."""
    message_id: str
    """The copy's message id in that queue (the first one's, for a duplicate)."""
    queue: str
    """The subscribed queue."""


@dataclass(frozen=True)
class TopicDeleteOut:
    """Answer to `DELETE /v1/topics/{name}`."""

    deleted: bool
    """Always true."""


@dataclass(frozen=True)
class TopicListOut:
    """Answer to `GET /v1/topics`."""

    topics: list[TopicOut]
    """Every topic, by name."""


@dataclass(frozen=True)
class TopicOut:
    """A topic, its definition and counts."""

    name: str
    """Its name."""
    spec: TopicSpec
    """The definition."""
    stats: TopicStatsOut
    """Counts since this server started (each node counts its own publishes)."""


@dataclass(frozen=True)
class TopicPublishOut:
    """Answer to `POST /v1/topics/{name}/messages`: every copy, stored in one commit."""

    copies: list[TopicCopyOut]
    """One per subscription that took the message, in the topic's order; empty when no
    subscription's filter took it."""


@dataclass(frozen=True)
class TopicPutOut:
    """Answer to `PUT /v1/topics/{name}`."""

    created: bool
    """False when an existing topic was replaced (its counters start again)."""
    topic: TopicOut
    """The topic as it is now."""


@dataclass(frozen=True)
class TopicStatsOut:
    """A topic's counts since this server started."""

    copies: int
    """Copies stored in subscribed queues."""
    duplicates: int
    """Copies answered as duplicates of an earlier publish with the same idempotency key."""
    filtered: int
    """Copies not made because a subscription's filter dropped the message."""
    published: int
    """Messages published (duplicates included)."""


@dataclass(frozen=True)
class WebhookDeleteOut:
    """Answer to `DELETE /v1/webhooks/{name}`."""

    deleted: bool
    """Always true."""


@dataclass(frozen=True)
class WebhookHistoryOut:
    """One webhook endpoint's points, oldest first."""

    name: str
    """The endpoint."""
    points: list[WebhookPointOut]
    """Its samples, oldest first."""


@dataclass(frozen=True)
class WebhookListOut:
    """`GET /v1/webhooks`."""

    webhooks: list[WebhookOut]
    """Every endpoint, by name."""


@dataclass(frozen=True)
class WebhookOut:
    """A webhook endpoint as the API shows it."""

    name: str
    """Name."""
    path: str
    """Where senders post: `/hooks/{name}`."""
    spec: WebhookSpec
    """Its definition (secret references only)."""
    stats: WebhookStatsOut
    """What it did."""


@dataclass(frozen=True)
class WebhookPointOut:
    """One sample of a webhook endpoint."""

    accepted_per_s: float
    """Requests stored as new messages per second."""
    at_ms: int
    """When it was taken, ms since the Unix epoch (server clock)."""
    failed_per_s: float
    """Requests refused or dead-lettered per second."""
    received_per_s: float
    """Requests received per second over the interval that ends here."""


@dataclass(frozen=True)
class WebhookPutOut:
    """Answer to `PUT /v1/webhooks/{name}`."""

    created: bool
    """False when an existing endpoint was replaced (its counters start again)."""
    webhook: WebhookOut
    """The endpoint as it is now."""


@dataclass(frozen=True)
class WebhookReceiptOut:
    """The answer to a sender."""

    queued: bool
    """True when the event is stored in the endpoint's queue."""
    copies: list[TopicCopyOut] | None = None
    """For an endpoint that publishes to a topic: the copies stored (or found stored, for a
    duplicate), one per subscribed queue whose filter took the event."""
    dead_lettered: bool | None = None
    """Set when the event went straight to the dead-letter queue."""
    duplicate: bool | None = None
    """Set for a duplicate delivery."""
    error: str | None = None
    """Why it was dead-lettered."""
    idempotency_key: str | None = None
    """The idempotency key used."""
    ignored: bool | None = None
    """Set when the filter dropped the event."""
    message_id: str | None = None
    """The stored message (the first one, for a duplicate)."""
    result: JsonValue = None
    """For a duplicate whose first message was acked with a result: that result (the memo)."""
    state: str | None = None
    """For a duplicate: the first message's state now (`ready`, `in_flight`, `acked`, ...)."""


@dataclass(frozen=True)
class WebhookStatsOut:
    """Counts of what an endpoint did since the server started."""

    accepted: int
    """Stored as new messages (202)."""
    dead_lettered: int
    """Stored straight into the dead-letter queue (malformed body, schema violation)."""
    duplicates: int
    """Duplicates of an earlier delivery (200, nothing stored)."""
    ignored: int
    """Dropped by the filter (200)."""
    received: int
    """Requests received."""
    rejected: dict[str, JsonValue]
    """Refused, by reason (`signature_mismatch`, `missing_header`, `too_large`, `queue_full`, ...).
    """
