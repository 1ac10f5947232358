"""What a client sends: queue settings, messages, next steps, webhook endpoints, schedules,
topics, alerts (docs/http-api.md).

`QueueSpec` updates only the fields it is given: its fields default to `UNSET` (left out of the
request), and `None` sends JSON null, which removes a setting (`schema`, `push`).
The webhook, push, schedule, topic and alert specs are also how the server shows those
definitions back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ._codec import UNSET, Unset


@dataclass(frozen=True)
class BackoffSpec:
    """Retry backoff of a queue; fields not given keep their current or default value."""

    initial_ms: int | Unset = UNSET
    """First delay in ms (default 1000)."""
    max_ms: int | Unset = UNSET
    """Largest delay in ms (default 60000)."""
    factor: float | Unset = UNSET
    """Growth per attempt (default 2)."""
    jitter: bool | Unset = UNSET
    """Equal jitter: a delay in `[d/2, d]` (default true)."""


@dataclass(frozen=True)
class RateLimitSpec:
    """A token bucket for deliveries."""

    per_second: float
    """Sustained deliveries per second; 0 turns the limit off."""
    burst: int | None = None
    """Deliveries allowed at once after a quiet spell (default: one second's worth)."""


@dataclass(frozen=True)
class QueueSpec:
    """Queue settings for `PUT /v1/queues/{queue}`: only the fields given are applied.

    `UNSET` (the default) leaves a field as it is (or at its default, for a new queue); `None`
    removes `schema` and `push`. To remove a limit, give 0 (`max_depth`, `max_in_flight`) or
    `RateLimitSpec(0)` (the server of this writing keeps those when sent null).
    """

    visibility_timeout_ms: int | Unset = UNSET
    """Lease length of a receive, in ms (default 30000)."""
    max_attempts: int | Unset = UNSET
    """Deliveries before dead-lettering (default 5; 0 = retry forever)."""
    backoff: BackoffSpec | Unset | None = UNSET
    """Retry backoff (default 1 s doubling to 60 s, with jitter)."""
    dead_letter_queue: str | Unset = UNSET
    """Dead-letter queue name (default `<name>.dlq`); `""` means none."""
    max_message_bytes: int | Unset = UNSET
    """Largest body in bytes (default 1048576)."""
    ordering: str | Unset = UNSET
    """`unordered` (default), `fifo` or `per_key`."""
    dedup_window_ms: int | Unset = UNSET
    """Idempotency window in ms (default 86400000)."""
    dedup: str | Unset = UNSET
    """`id` (default): only a message's `id` makes it a duplicate. `content`: a message sent
    without an `id` gets one made from its content (SHA-256 of its key and body)."""
    delay_ms: int | Unset = UNSET
    """Delay in ms given to a message enqueued without one (default 0)."""
    max_age_ms: int | Unset = UNSET
    """Retention in ms (default 4 days; 14 days for a dead-letter queue)."""
    on_expire: str | Unset = UNSET
    """`drop` (default) or `dead_letter`: what retention does with an old message."""
    keep_acked_ms: int | Unset = UNSET
    """How long an acked message keeps its body, headers and result, in ms, browsable with
    `browse(queue, "acked", ...)` (default 0: dropped at the ack; at most 7776000000, 90 days)."""
    max_depth: int | Unset | None = UNSET
    """Most messages held (ready + delayed + in flight); 0 = unbounded."""
    max_in_flight: int | Unset | None = UNSET
    """Most leases out at once; 0 = unbounded."""
    rate_limit: RateLimitSpec | Unset | None = UNSET
    """Deliveries per second; `RateLimitSpec(0)` removes the limit."""
    schema: Any | Unset = UNSET
    """A JSON Schema every JSON body must satisfy; None removes it."""
    push: PushSpec | Unset | None = UNSET
    """Push destination (the server calls it with each message); None removes it."""
    tags: dict[str, str] | Unset = UNSET
    """Tags, replacing the queue's tags (at most 50)."""


@dataclass(frozen=True)
class MessageIn:
    """One message to enqueue: `body` (any JSON) or `body_base64` (bytes), not both."""

    body: Any | Unset = UNSET
    """Any JSON value."""
    body_base64: str | Unset = UNSET
    """Bytes, standard base64."""
    id: str | Unset = UNSET
    """Idempotency key: the same key within the dedup window returns the first message."""
    key: str | Unset = UNSET
    """Ordering key for `per_key` queues."""
    priority: int | Unset = UNSET
    """Higher first (default 0)."""
    delay_ms: int | Unset = UNSET
    """Invisible for this long, in ms."""
    not_before: datetime | Unset = UNSET
    """Invisible until this time."""
    headers: dict[str, str] | Unset = UNSET
    """String headers."""


@dataclass(frozen=True)
class NextStepIn:
    """One next step of an ack (`Client.ack(..., then=[...])`): a message and the queue it goes
    to, enqueued in the same commit as the ack. `body` (any JSON) or `body_base64`, not both."""

    queue: str
    """The queue the next step goes to (any queue the caller may produce to)."""
    body: Any | Unset = UNSET
    """Any JSON value."""
    body_base64: str | Unset = UNSET
    """Bytes, standard base64."""
    id: str | Unset = UNSET
    """Idempotency key: the same key within the queue's dedup window returns the first message."""
    key: str | Unset = UNSET
    """Ordering key for `per_key` queues."""
    priority: int | Unset = UNSET
    """Higher first (default 0)."""
    delay_ms: int | Unset = UNSET
    """Invisible for this long, in ms."""
    not_before: datetime | Unset = UNSET
    """Invisible until this time."""
    headers: dict[str, str] | Unset = UNSET
    """String headers."""


@dataclass(frozen=True)
class IdempotencySpec:
    """Where a webhook's idempotency key comes from (default: the scheme's delivery id)."""

    expression: str | None = None
    """A jq expression over the event (see `WebhookSpec`)."""
    header: str | None = None
    """A request header."""


@dataclass(frozen=True)
class PushSpec:
    """A queue's push destination: a dispatcher leases its messages and calls this URL."""

    url: str
    """`http://` or `https://` URL."""
    concurrency: int | None = None
    """Most requests in flight at once (default: the queue's `max_in_flight`, else 16)."""
    headers: dict[str, str] | None = None
    """Extra request headers."""
    method: str | None = None
    """`POST` (default), `PUT` or `PATCH` (see [`PushMethod`])."""
    retry_client_errors: bool | None = None
    """Retry 4xx answers other than 408 and 429 instead of dead-lettering them (default false)."""
    secret_path: bool | None = None
    """The URL's path is a secret (a capability URL such as a chat webhook's): tokens that are not
    admins see it as `(hidden)`, as they always see the user info and the query (default false).
    """
    signing_secret: SecretRef | None = None
    timeout_ms: int | None = None
    """Per request, in ms (default 10000)."""
    transform: str | None = None
    """A jq expression shaping the request body from `{"body", "headers", "message_id", "attempts",
    "enqueued_at", "key", "id"}` (default: the body as stored).
    """


@dataclass(frozen=True)
class SecretRef:
    """Where a secret comes from: an environment variable or a file (its contents, trimmed).
    Secrets themselves never appear in definitions, answers or logs.
    """

    env: str | None = None
    """Name of an environment variable of the server process."""
    file: str | None = None
    """Path of a file readable by the server."""


@dataclass(frozen=True)
class VerifySpec:
    """How an endpoint verifies its sender."""

    scheme: str
    """`standard_webhooks`, `github`, `stripe`, `slack`, `shopify`, `pagerduty`, `twilio`, `hmac`
    (generic), or `none` (no verification: anyone who can reach the URL can enqueue).
    """
    algorithm: str | None = None
    """`hmac` only: `sha1`, `sha256` (default) or `sha512`."""
    encoding: str | None = None
    """`hmac` only: `hex` (default) or `base64`."""
    header: str | None = None
    """`hmac` only: the header carrying the signature."""
    prefix: str | None = None
    """`hmac` only: a prefix before the signature, such as `sha256=`."""
    secrets: list[SecretRef] = field(default_factory=list)
    """One secret, or several while rotating (each is tried)."""
    tolerance_s: int | None = None
    """Largest clock difference accepted for schemes with a timestamp, in seconds (default 300)."""


@dataclass(frozen=True)
class WebhookSpec:
    """A webhook endpoint: `POST /hooks/{name}` verifies, shapes and enqueues into `queue`.
    Expressions are jq programs run on the event `{"body": <JSON body, or form fields as an
    object, or the text>, "headers": {<lowercase name>: <value>}, "query": {...}, "source_ip":
    "...", "received_at": "<RFC 3339>"}`.
    """

    queue: str
    """The queue events go to (it must exist). With `topic`, the queue whose dead-letter queue
    keeps the events that cannot become a message."""
    verify: VerifySpec
    """Signature verification."""
    filter: str | None = None
    """Keep the event only when this expression's first output is neither false nor null (and it
    has one); others are answered `200 {"ignored": true}`.
    """
    idempotency: IdempotencySpec | None = None
    keep_signature_headers: bool = False
    """Keep the sender's signature headers (and their timestamps) with the message, so a consumer
    can check the stored body against them itself (default false: they are dropped, since anyone
    who can read the queue could post the delivery again with them).
    """
    key: str | None = None
    """The message key (for `per_key` queues), from an expression."""
    max_body_bytes: int | None = None
    """Largest request body in bytes (default 1048576)."""
    priority: str | None = None
    """The message priority, from an expression giving an integer."""
    public_url: str | None = None
    """The URL the sender calls, when sluice is behind a proxy (Twilio signs it)."""
    topic: str | None = None
    """Publish each accepted event to this topic (it must exist) instead of storing it in
    `queue`: a copy in each subscribed queue whose filter takes it, in one commit."""
    transform: str | None = None
    """The stored message body is this expression's first output (default: the body)."""


@dataclass(frozen=True)
class ScheduleMessage:
    """The message each run of a schedule enqueues: `body` (any JSON) or `body_base64` (bytes),
    not both."""

    body: Any = None
    """Any JSON value (None: no JSON body)."""
    body_base64: str | None = None
    """Bytes, standard base64."""
    headers: dict[str, str] | None = None
    """String headers; each run adds `sluice-schedule` (the schedule's name) and
    `sluice-scheduled-at` (the run's time, RFC 3339)."""
    key: str | None = None
    """Ordering key for `per_key` queues."""
    priority: int | None = None
    """Higher first (default 0)."""


@dataclass(frozen=True)
class ScheduleSpec:
    """A schedule for `PUT /v1/schedules/{name}`: `cron` or `every_ms`, not both. Each run
    enqueues one message into `queue` with the idempotency key `schedule:<name>:<run time in ms>`,
    so no run is enqueued twice.
    """

    queue: str
    """The queue runs enqueue into (it must exist)."""
    message: ScheduleMessage
    """The message each run enqueues."""
    cron: str | None = None
    """A cron pattern: `min hour day-of-month month day-of-week`, with an optional leading seconds
    field."""
    every_ms: int | None = None
    """A fixed interval in ms (at least 1000): runs at every multiple of it since the Unix epoch."""
    timezone: str | None = None
    """The IANA time zone `cron` is read in (default `UTC`), e.g. `Europe/Berlin`."""
    jitter_ms: int | None = None
    """Each run's message becomes visible up to this long after the run's time (default 0)."""
    paused: bool | None = None
    """A paused schedule makes no runs; those it passes are not missed runs."""
    missed: str | None = None
    """What to do with runs that could not be made on time: `skip` (default), `run_once` or
    `run_all`."""
    missed_max: int | None = None
    """`run_all`: at most this many missed runs are made at once (default 100)."""
    grace_ms: int | None = None
    """How late a run may still be made under `skip`, in ms (default 60000)."""


@dataclass(frozen=True)
class SubscriptionSpec:
    """One subscription of a topic: a queue, and which published messages it takes."""

    queue: str
    """The queue copies go to (it must exist)."""
    filter: str | None = None
    """A jq expression over `{"body": <JSON body, or null for bytes>, "headers": {...}, "key":
    <ordering key or null>, "priority": <n>}`: the queue gets a copy when its first output is
    neither false nor null. None: every message."""


@dataclass(frozen=True)
class TopicSpec:
    """A topic for `PUT /v1/topics/{name}`: a publish stores one copy of the message in each
    subscribed queue whose filter takes it, all in one commit."""

    subscriptions: list[SubscriptionSpec] = field(default_factory=list)
    """Where a published message goes (at most 100; each queue once)."""


@dataclass(frozen=True)
class AlertDestinationSpec:
    """Where an alert's notifications go: at most one of `slack_url`, `webhook_url` and
    `command`. With none, notifications wait in the alert's queue (`sluice.alerts.<name>`) for a
    consumer of its own."""

    slack_url: str | None = None
    """A Slack incoming-webhook URL: each notification is a Slack message. Its path is a secret:
    tokens that are not admins see it hidden."""
    webhook_url: str | None = None
    """A URL each notification is sent to as JSON (a `models.AlertEventOut`)."""
    signing_secret: SecretRef | None = None
    """With `webhook_url`: sign each request with Standard Webhooks headers using this `whsec_`
    secret."""
    headers: dict[str, str] | None = None
    """With `webhook_url`: extra request headers."""
    command: list[str] | None = None
    """A program and its arguments, run with each notification's JSON on its standard input.
    Only the config file may name one: the API refuses it (422 `invalid_field`)."""


@dataclass(frozen=True)
class AlertSpec:
    """An alert for `PUT /v1/alerts/{name}`: operations told when messages are dead-lettered or
    a queue backs up, at most once per queue and kind per window. Notifications are messages in
    the alert's queue, `sluice.alerts.<name>`, pushed to its destination."""

    queues: list[str] | None = None
    """The queues watched: names, or prefixes ending in `*` (default `["*"]`, every queue).
    Dead-letter queues and alerts' own queues are never watched."""
    dead_letters: bool | None = None
    """Notify when messages are dead-lettered (default true)."""
    depth_above: int | None = None
    """Notify while a queue holds more than this many messages (ready, delayed and in flight),
    and once when it is back at or under it."""
    oldest_ready_age_above_ms: int | None = None
    """Notify while a queue's oldest ready message is older than this (ms), and once when it is
    no longer."""
    window_ms: int | None = None
    """At most one notification per queue and kind per window, in ms (default 300000; at least
    1000). Dead letters arriving in between are counted into the next one."""
    sample_size: int | None = None
    """Errors quoted in a dead-letter notification, newest first (default 5; at most 20)."""
    destination: AlertDestinationSpec = field(default_factory=AlertDestinationSpec)
    """Where notifications go (default: nowhere; they wait in the alert's queue)."""
    max_attempts: int | None = None
    """Delivery attempts of one notification before it is dead-lettered in the alert's queue
    (default 10)."""
