"""`SQSQueue`: the queue interface over Amazon SQS (or sluice's SQS-compatible API), with boto3.

Layout: the queue `<name>` and its dead-letter queue `<name>-dlq`, tied by a `RedrivePolicy`
whose `maxReceiveCount` is `max_attempts`. A queue with `per_key` or `dedup` is a FIFO queue
(`<name>.fifo`, `<name>-dlq.fifo`): the key is the `MessageGroupId` (a keyless message gets a
group of its own, so it holds up nothing), the idempotency id the `MessageDeduplicationId`.
The body is a `TaskEnvelope`; the attempt is SQS's `ApproximateReceiveCount`. A standard
queue cannot deduplicate (`capabilities.dedup` is False there), so a push with an idempotency
id is refused (`Unsupported`), never ignored: ask for `QueueOptions(dedup=True)` to get a FIFO
queue that deduplicates.

A nack is reported to the server with the visibility change (`x-sluice-failure`, sluice's
extension, docs/sqs.md): sluice takes it as a nack, so it retries the message after the delay
or dead-letters it with its error (when this queue decides it is due), counts it and alerts.
A server that does not know the report (AWS) only changes the visibility: a retry is then that
visibility change (the message keeps its place, group and receive count; SQS keeps no error
with it, so `last_error` is None on SQS), and dead-lettering happens here: the envelope goes to
the dead-letter queue with its error, then the message is deleted, because SQS itself only
redrives on a later receive and would drop the error. The redrive policy still catches
messages whose last lease runs out. SQS has no pause, no cancel, no priorities and keeps no
order outside a FIFO group: those raise `Unsupported`. Counts are SQS's approximate ones.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import math
import time
import urllib.parse
import uuid
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..envelope import TaskEnvelope
from ..errors import BrokerError, LeaseLost, Unsupported
from ._runs import GroupRuns
from .base import (
    BackendName,
    CancelResult,
    Capabilities,
    DeadLetter,
    Enqueued,
    NackOutcome,
    NextStep,
    PushItem,
    QueueOptions,
    QueueStats,
    Task,
    missing_queue,
    refuse_next_steps,
    should_dead_letter,
)

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

DEFAULT_VISIBILITY_TIMEOUT_S = 30
DELAY_MAX_S = 900
"""SQS's longest message delay."""
VISIBILITY_MAX_S = 43_200
"""SQS's longest visibility timeout (12 hours)."""
BATCH_MAX = 10
"""Entries per SQS batch and messages per receive."""
WAIT_MAX_S = 20
"""SQS's longest long poll."""
DRAIN_POLL_S = 0.05
DEAD_LETTER_PEEK_S = 30
"""How long `dead_letters` holds the entries it reads before giving them back."""
_LEASE_ERRORS = {"InvalidParameterValue", "ReceiptHandleIsInvalid", "MessageNotInflight"}
DEAD_LETTER_HOLD_S = 60
"""How long a message is held while it is dead-lettered here (a server that does not nack)."""
_FAILURE_HEADER = "x-sluice-failure"
_PERMANENT_HEADER = "x-sluice-failure-permanent"
_OUTCOME_HEADER = "x-sluice-outcome"
_REPORTING: contextvars.ContextVar[tuple[str, bool] | None] = contextvars.ContextVar(
    "sluice_sqs_failure", default=None
)
"""The failure the `ChangeMessageVisibility` being sent reports: (error, dead-letter now)."""


def _add_failure_headers(request: Any, **_: Any) -> None:
    """botocore's `before-sign` hook: the failure's headers, signed with the request."""
    failure = _REPORTING.get()
    if failure is None:
        return
    error, permanent = failure
    request.headers[_FAILURE_HEADER] = urllib.parse.quote(error, safe="")
    if permanent:
        request.headers[_PERMANENT_HEADER] = "true"


class SQSQueue:
    """One SQS queue (see the module doc). Blocking and thread-safe (boto3 clients are).

    `client` is a boto3 SQS client; without one, a client is made from `endpoint_url` (e.g.
    a sluice server's URL), `region` (default `AWS_REGION`/`AWS_DEFAULT_REGION`, else
    us-east-1) and boto3's usual credentials (any key works on sluice without access control).
    """

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
        self.options = options or QueueOptions()
        self.create = create
        """Create the queue and its dead-letter queue when missing (else `queue_not_found`)."""
        if self.options.ordered:
            raise Unsupported(
                "sqs",
                "keep enqueue order",
                "standard SQS queues do not keep order; a FIFO queue does only within a "
                "message group (QueueOptions(per_key=True))",
            )
        base = name.removesuffix(".fifo")
        self.fifo = self.options.per_key or self.options.dedup or name.endswith(".fifo")
        """A FIFO queue: per-key order and deduplication, but no per-message delays."""
        suffix = ".fifo" if self.fifo else ""
        self._name = base + suffix
        self.dead_letter_queue = f"{base}-dlq{suffix}"
        """The dead-letter queue's name."""
        self.client: SQSClient = client or _make_client(endpoint_url, region)
        """The boto3 client underneath."""
        self.client.meta.events.register(
            "before-sign.sqs.ChangeMessageVisibility",
            _add_failure_headers,
            unique_id="sluice-report-failure",
        )
        self._url: str | None = None
        self._dlq_url: str | None = None
        self._runs = GroupRuns()
        """FIFO: runs of a group received together, given out one at a time."""
        self._capabilities = Capabilities(
            extend=True,
            pause=False,
            cancel=False,
            per_key_order=True,
            dedup=self.fifo,
            delays=not self.fifo,
            in_flight_stats=True,
            ordered=False,
            drain=True,
            priority=False,
            chaining=False,
        )

    @property
    def name(self) -> str:
        return self._name

    @property
    def backend(self) -> BackendName:
        return "sqs"

    @property
    def capabilities(self) -> Capabilities:
        return self._capabilities

    def now(self) -> float:
        return time.time()

    def close(self) -> None:
        if self._url is not None:
            # What waited behind its group goes back now rather than when its lease runs out.
            for waiting in self._runs.take_all():
                with contextlib.suppress(Exception):
                    self.client.change_message_visibility(
                        QueueUrl=self._url, ReceiptHandle=waiting.receipt, VisibilityTimeout=0
                    )
        self.client.close()

    def ensure(self) -> None:
        fifo: dict[Any, str] = {"FifoQueue": "true"} if self.fifo else {}
        dlq_url = self.client.create_queue(QueueName=self.dead_letter_queue, Attributes=fifo)[
            "QueueUrl"
        ]
        attributes: dict[Any, str] = dict(fifo)
        attributes["VisibilityTimeout"] = str(self._lease_s(None))
        if self.options.max_attempts > 0:
            arn = self.client.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])[
                "Attributes"
            ]["QueueArn"]
            attributes["RedrivePolicy"] = json.dumps(
                {"deadLetterTargetArn": arn, "maxReceiveCount": self.options.max_attempts}
            )
        url = self.client.create_queue(QueueName=self._name, Attributes=attributes)["QueueUrl"]
        self._dlq_url, self._url = dlq_url, url

    def open(self) -> None:
        if self._url is not None and self._dlq_url is not None:
            return
        from botocore.exceptions import ClientError

        try:
            url = self.client.get_queue_url(QueueName=self._name)["QueueUrl"]
            dlq_url = self.client.get_queue_url(QueueName=self.dead_letter_queue)["QueueUrl"]
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code", "")
            if not code.endswith(("NonExistentQueue", "QueueDoesNotExist")):
                raise
            if not self.create:
                raise missing_queue(self._name) from error
            self.ensure()
            return
        self._url, self._dlq_url = url, dlq_url

    def delete(self) -> None:
        """Deletes the queue and its dead-letter queue with their messages."""
        from botocore.exceptions import ClientError

        for name in (self._name, self.dead_letter_queue):
            try:
                url = self.client.get_queue_url(QueueName=name)["QueueUrl"]
                self.client.delete_queue(QueueUrl=url)
            except ClientError as error:
                code = error.response.get("Error", {}).get("Code", "")
                if not code.endswith(("NonExistentQueue", "QueueDoesNotExist")):
                    raise
        self._url = self._dlq_url = None

    def _urls(self) -> tuple[str, str]:
        if self._url is None or self._dlq_url is None:
            self.open()
        if self._url is None or self._dlq_url is None:
            raise BrokerError("SQS gave no queue URL")
        return self._url, self._dlq_url

    # Producing.

    def push(
        self,
        payload: Any,
        *,
        id: str | None = None,
        key: str | None = None,
        delay: float | None = None,
        priority: int = 0,
        max_attempts: int | None = None,
    ) -> Enqueued:
        return self.push_many([PushItem(payload, id, key, delay, priority, max_attempts)])[0]

    def push_many(self, items: Sequence[PushItem]) -> list[Enqueued]:
        url, _ = self._urls()
        entries = [self._entry(str(index), item) for index, item in enumerate(items)]
        results: list[Enqueued] = []
        for start in range(0, len(entries), BATCH_MAX):
            batch = entries[start : start + BATCH_MAX]
            answer = self.client.send_message_batch(QueueUrl=url, Entries=batch)  # type: ignore[arg-type]
            if answer.get("Failed"):
                failed = [
                    (entry["Id"], entry.get("Message", entry["Code"])) for entry in answer["Failed"]
                ]
                raise BrokerError(f"SQS refused {len(failed)} of the batch: {failed}")
            by_id = {entry["Id"]: entry["MessageId"] for entry in answer["Successful"]}
            # SQS says nothing of a queue's depth, nor whether a FIFO send was a duplicate.
            results.extend(
                Enqueued(message_id=by_id[entry["Id"]], created=True, position=None)
                for entry in batch
            )
        return results

    def _entry(self, entry_id: str, item: PushItem) -> dict[str, Any]:
        if item.priority:
            raise Unsupported("sqs", "push with a priority", "SQS has no message priorities")
        if item.id is not None and not self.fifo:
            raise Unsupported(
                "sqs",
                "deduplicate",
                "a standard SQS queue does not deduplicate, so an idempotency id would be"
                " ignored: open the queue with QueueOptions(dedup=True) (a FIFO queue)",
            )
        # The task id is SQS's MessageId, known only once sent: receivers fill it in.
        envelope = TaskEnvelope(
            task_id="",
            payload=item.payload,
            max_attempts=item.max_attempts,
            enqueued_at=time.time(),
            idempotency_id=item.id,
            key=item.key,
        )
        entry: dict[str, Any] = {"Id": entry_id, "MessageBody": envelope.to_json()}
        if item.delay:
            if self.fifo:
                raise Unsupported(
                    "sqs", "delay one message", "FIFO queues take only the queue's delay"
                )
            seconds = math.ceil(item.delay)
            if seconds > DELAY_MAX_S:
                raise Unsupported(
                    "sqs", f"delay {seconds} s", f"SQS delays at most {DELAY_MAX_S} s"
                )
            entry["DelaySeconds"] = seconds
        if self.fifo:
            entry["MessageGroupId"] = item.key or uuid.uuid4().hex
            entry["MessageDeduplicationId"] = item.id or uuid.uuid4().hex
        return entry

    # Consuming.

    def pop(self, *, visibility_timeout: float | None = None, wait: float = 0.0) -> Task | None:
        tasks = self.receive(1, visibility_timeout=visibility_timeout, wait=wait)
        return tasks[0] if tasks else None

    def receive(
        self, max: int = 1, *, visibility_timeout: float | None = None, wait: float = 0.0
    ) -> list[Task]:
        url, _ = self._urls()
        lease = self._lease_s(visibility_timeout)
        tasks: list[Task] = []
        for waiting in self._runs.ready(max) if self.fifo else []:
            # It waited under its lease: the lease starts again now, or it is stale and comes
            # back from SQS.
            try:
                self.client.change_message_visibility(
                    QueueUrl=url, ReceiptHandle=waiting.receipt, VisibilityTimeout=lease
                )
            except Exception:
                self._runs.done(waiting.receipt)
                continue
            tasks.append(replace(waiting, lease_expires_at=time.time() + lease))
        wait_s = 0 if tasks else min(math.ceil(max_wait(wait)), WAIT_MAX_S)
        while len(tasks) < max:
            answer = self.client.receive_message(
                QueueUrl=url,
                MaxNumberOfMessages=min(BATCH_MAX, max - len(tasks)),
                WaitTimeSeconds=wait_s,
                VisibilityTimeout=lease,
                MessageSystemAttributeNames=["All"],
            )
            messages = answer.get("Messages", [])
            now = time.time()
            received = [(message, self._task(message, lease, now)) for message in messages]
            if self.fifo:
                tasks.extend(
                    self._runs.take(
                        (message.get("Attributes", {}).get("MessageGroupId"), task)
                        for message, task in received
                    )
                )
            else:
                tasks.extend(task for _, task in received)
            # After the first answer, only take what is there already.
            wait_s = 0
            if not messages:
                break
        return tasks

    def _back_off(self, task: Task) -> None:
        """`task` comes back (a retry, a release): what waited behind it in its run goes back."""
        url, _ = self._urls()
        for waiting in self._runs.back_off(task.receipt):
            try:
                self.client.change_message_visibility(
                    QueueUrl=url, ReceiptHandle=waiting.receipt, VisibilityTimeout=0
                )
            except Exception as error:
                logging.getLogger("sluice_client.sqs").warning(
                    "giving back %s failed: %s", waiting.task_id, error
                )

    def _task(self, message: Any, lease: int, now: float) -> Task:
        attributes = message.get("Attributes", {})
        envelope = TaskEnvelope.wrap_body(message["MessageId"], message["Body"])
        envelope = replace(
            envelope,
            task_id=envelope.task_id or message["MessageId"],
            attempt=int(attributes.get("ApproximateReceiveCount", "1")),
            max_attempts=self._max_attempts(envelope),
            visibility_timeout=float(lease),
            enqueued_at=envelope.enqueued_at or int(attributes.get("SentTimestamp", "0")) / 1000,
        )
        return Task(
            envelope=envelope, receipt=message["ReceiptHandle"], lease_expires_at=now + lease
        )

    def ack(self, task: Task, result: Any = None) -> None:
        url, _ = self._urls()
        with _lease_errors(task):
            self.client.delete_message(QueueUrl=url, ReceiptHandle=task.receipt)
        self._runs.done(task.receipt)

    def ack_then(self, task: Task, then: Sequence[NextStep], result: Any = None) -> list[Enqueued]:
        refuse_next_steps("sqs", then)
        self.ack(task, result)
        return []

    def ack_many(self, tasks: Sequence[Task]) -> list[bool]:
        """DeleteMessageBatch, ten at a time; an entry SQS refuses is not acked."""
        url, _ = self._urls()
        acked: list[bool] = []
        for start in range(0, len(tasks), BATCH_MAX):
            batch = tasks[start : start + BATCH_MAX]
            answer = self.client.delete_message_batch(
                QueueUrl=url,
                Entries=[
                    {"Id": str(index), "ReceiptHandle": task.receipt}
                    for index, task in enumerate(batch)
                ],
            )
            done = {entry["Id"] for entry in answer.get("Successful", [])}
            for index, task in enumerate(batch):
                if str(index) in done:
                    self._runs.done(task.receipt)
            acked.extend(str(index) in done for index in range(len(batch)))
        return acked

    def nack(
        self, task: Task, error: str = "", *, delay: float | None = None, permanent: bool = False
    ) -> NackOutcome:
        url, dlq_url = self._urls()
        envelope = task.envelope
        dead_letter = should_dead_letter(task.attempt, self._max_attempts(envelope), permanent)
        if delay is None:
            delay = self.options.backoff.delay(task.attempt)
        visibility = (
            DEAD_LETTER_HOLD_S if dead_letter else min(math.ceil(max(delay, 0.0)), VISIBILITY_MAX_S)
        )
        # Reported to the server: sluice nacks it (dead-lettering it when this queue says so,
        # with the error) and answers what it did; another server only changes the visibility.
        reported = _REPORTING.set((error or "failed", dead_letter))
        try:
            with _lease_errors(task):
                answer = self.client.change_message_visibility(
                    QueueUrl=url, ReceiptHandle=task.receipt, VisibilityTimeout=visibility
                )
        finally:
            _REPORTING.reset(reported)
        outcome = answer.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get(_OUTCOME_HEADER)
        if outcome == "dead-lettered":
            self._runs.done(task.receipt)
            return "dead_lettered"
        if outcome is not None or not dead_letter:
            self._back_off(task)
            return "retried"
        dead = replace(envelope, last_error=error, failed_at=time.time())
        entry: dict[str, Any] = {"QueueUrl": dlq_url, "MessageBody": dead.to_json()}
        if self.fifo:
            # A group of its own, so one dead letter never hides another from `dead_letters`.
            entry["MessageGroupId"] = envelope.task_id
            entry["MessageDeduplicationId"] = f"{envelope.task_id}.{task.attempt}"
        self.client.send_message(**entry)
        with _lease_errors(task):
            self.client.delete_message(QueueUrl=url, ReceiptHandle=task.receipt)
        self._runs.done(task.receipt)
        return "dead_lettered"

    def extend_visibility(self, task: Task, visibility_timeout: float) -> None:
        url, _ = self._urls()
        with _lease_errors(task):
            self.client.change_message_visibility(
                QueueUrl=url,
                ReceiptHandle=task.receipt,
                VisibilityTimeout=self._lease_s(visibility_timeout),
            )

    def release(self, task: Task, *, unstarted: bool = False) -> None:
        url, _ = self._urls()
        with _lease_errors(task):
            self.client.change_message_visibility(
                QueueUrl=url, ReceiptHandle=task.receipt, VisibilityTimeout=0
            )
        self._back_off(task)

    # Operating.

    def stats(self) -> QueueStats:
        url, dlq_url = self._urls()
        names: Any = [
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        ]
        main = self.client.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
        dead = self.client.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=names)[
            "Attributes"
        ]
        return QueueStats(
            ready=int(main["ApproximateNumberOfMessages"]),
            delayed=int(main["ApproximateNumberOfMessagesDelayed"]),
            in_flight=int(main["ApproximateNumberOfMessagesNotVisible"]),
            dead_lettered=sum(int(value) for value in dead.values()),
            paused=None,
        )

    def pause(self) -> None:
        raise Unsupported("sqs", "pause", "SQS has no pause")

    def resume(self) -> None:
        raise Unsupported("sqs", "resume", "SQS has no pause")

    def cancel(
        self, *, message_id: str | None = None, id: str | None = None, reason: str | None = None
    ) -> CancelResult:
        raise Unsupported("sqs", "cancel", "SQS deletes only by receipt handle")

    def drain(self, timeout: float) -> bool:
        deadline = time.monotonic() + max(timeout, 0.0)
        while True:
            stats = self.stats()
            if (stats.ready or 0) + (stats.delayed or 0) + (stats.in_flight or 0) == 0:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(DRAIN_POLL_S)

    def dead_letters(self, limit: int = 100) -> list[DeadLetter]:
        """Reads the dead-letter queue by receiving from it (SQS has no other way to look), then
        makes every entry visible again at once; their receive counts grow by one."""
        _, dlq_url = self._urls()
        received: list[Any] = []
        while len(received) < limit:
            answer = self.client.receive_message(
                QueueUrl=dlq_url,
                MaxNumberOfMessages=min(BATCH_MAX, limit - len(received)),
                VisibilityTimeout=DEAD_LETTER_PEEK_S,
                WaitTimeSeconds=0,
                MessageAttributeNames=["All"],
            )
            messages = answer.get("Messages", [])
            if not messages:
                break
            received.extend(messages)
        for start in range(0, len(received), BATCH_MAX):
            self.client.change_message_visibility_batch(
                QueueUrl=dlq_url,
                Entries=[
                    {
                        "Id": str(index),
                        "ReceiptHandle": message["ReceiptHandle"],
                        "VisibilityTimeout": 0,
                    }
                    for index, message in enumerate(received[start : start + BATCH_MAX])
                ],
            )
        letters = [_dead_letter(message, self.options.max_attempts) for message in received]
        return sorted(letters, key=lambda letter: letter.failed_at or 0.0, reverse=True)

    def _lease_s(self, visibility_timeout: float | None) -> int:
        seconds = visibility_timeout or self.options.visibility_timeout
        if seconds is None:
            return DEFAULT_VISIBILITY_TIMEOUT_S
        return min(max(math.ceil(seconds), 0), VISIBILITY_MAX_S)

    def _max_attempts(self, envelope: TaskEnvelope) -> int:
        if envelope.max_attempts is not None:
            return envelope.max_attempts
        return self.options.max_attempts


def _dead_letter(message: Any, max_attempts: int) -> DeadLetter:
    """A message of the dead-letter queue: one sluice dead-lettered carries its error, attempts
    and time as message attributes; one dead-lettered here, in its envelope. One SQS moved by
    the queue's RedrivePolicy carries neither: it was delivered `maxReceiveCount` times, the
    queue's `max_attempts` (the TypeScript and Rust SDKs say the same)."""
    envelope = TaskEnvelope.wrap_body(message["MessageId"], message["Body"])
    attributes = message.get("MessageAttributes", {})

    def attribute(name: str) -> str | None:
        value = attributes.get(name, {}).get("StringValue")
        return value if isinstance(value, str) else None

    attempts = attribute("sluice-attempts")
    failed_at_ms = attribute("sluice-failed-at-ms")
    return DeadLetter(
        task_id=envelope.task_id or message["MessageId"],
        payload=envelope.payload,
        error=attribute("sluice-error") or envelope.last_error,
        attempts=int(attempts) if attempts is not None else envelope.attempt or max_attempts,
        failed_at=int(failed_at_ms) / 1000 if failed_at_ms is not None else envelope.failed_at,
        idempotency_id=envelope.idempotency_id,
        key=envelope.key,
    )


class _lease_errors:
    """SQS's answers for a receipt handle that no longer holds its message are `LeaseLost`."""

    def __init__(self, task: Task) -> None:
        self.task = task

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, _: Any
    ) -> None:
        from botocore.exceptions import ClientError

        if isinstance(error, ClientError):
            code = error.response.get("Error", {}).get("Code", "")
            if code in _LEASE_ERRORS or code.endswith("ReceiptHandleIsInvalid"):
                raise LeaseLost(f"task {self.task.task_id}: {error}") from error


SLUICE_OPEN_CREDENTIALS = ("sluice", "sluice")
"""The access key and secret used against an endpoint when no AWS credentials are found: sluice
accepts any while its access control is off."""


def _make_client(endpoint_url: str | None, region: str | None) -> SQSClient:
    """A boto3 SQS client. The region defaults to `us-east-1` (sluice does not check it). With an
    `endpoint_url` (sluice's SQS API) and no credentials anywhere boto3 looks (arguments,
    environment, shared files, instance roles), it signs with `SLUICE_OPEN_CREDENTIALS`; with
    access control on, set AWS_ACCESS_KEY_ID to a token's name and AWS_SECRET_ACCESS_KEY to the
    token, or pass a client (docs/sqs.md)."""
    import os

    import boto3

    region = region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    session = boto3.Session(region_name=region or "us-east-1")
    if endpoint_url is not None and session.get_credentials() is None:
        key, secret = SLUICE_OPEN_CREDENTIALS
        return session.client(
            "sqs", endpoint_url=endpoint_url, aws_access_key_id=key, aws_secret_access_key=secret
        )
    return session.client("sqs", endpoint_url=endpoint_url)


def max_wait(wait: float) -> float:
    """Waits are not negative."""
    return max(wait, 0.0)
