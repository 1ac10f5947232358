"""The typed client against a real server: the models match the server's OpenAPI document both
ways, every route answers into its dataclass, and errors carry the server's stable codes."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import inspect
import json
import time
import typing
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from sluice_client import (
    UNSET,
    AlertDestinationSpec,
    AlertSpec,
    AsyncClient,
    Client,
    MessageIn,
    NextStepIn,
    QueueSpec,
    RateLimitSpec,
    ScheduleMessage,
    ScheduleSpec,
    SecretRef,
    SluiceError,
    SubscriptionSpec,
    TopicSpec,
    VerifySpec,
    WebhookSpec,
    models,
    specs,
)
from sluice_client._codec import parse_datetime

from .conftest import SluiceServer, unique


@pytest.fixture
def client(sluice_server: SluiceServer) -> typing.Iterator[Client]:
    with Client(sluice_server.url) as client:
        yield client


def _schemas(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return typing.cast(dict[str, dict[str, Any]], document["components"]["schemas"])


def _properties(schema: dict[str, Any], schemas: dict[str, dict[str, Any]]) -> set[str]:
    if "allOf" in schema:
        names: set[str] = set()
        for part in schema["allOf"]:
            if "$ref" in part:
                part = schemas[part["$ref"].rsplit("/", 1)[1]]
            names |= _properties(part, schemas)
        return names
    return set(schema.get("properties", {}))


def test_models_match_the_servers_openapi_document(client: Client) -> None:
    """Every answer model has exactly the fields its schema lists, so a server change that a
    model misses (or a model field the server never sends) fails here."""
    schemas = _schemas(client.openapi())
    checked = 0
    for name, cls in inspect.getmembers(models, dataclasses.is_dataclass):
        if name not in schemas:
            continue
        fields = {field.name for field in dataclasses.fields(cls)}
        assert fields == _properties(schemas[name], schemas), name
        checked += 1
    for name in (
        "QueueSpec",
        "MessageIn",
        "NextStepIn",
        "WebhookSpec",
        "PushSpec",
        "BackoffSpec",
        "ScheduleSpec",
        "ScheduleMessage",
        "TopicSpec",
        "SubscriptionSpec",
        "AlertSpec",
        "AlertDestinationSpec",
    ):
        cls = getattr(specs, name)
        fields = {field.name for field in dataclasses.fields(cls)}
        assert fields == _properties(schemas[name], schemas), name
        checked += 1
    assert checked >= 55


def test_every_route_of_the_document_has_a_client_method(client: Client) -> None:
    document = client.openapi()
    operations = {
        operation["operationId"]
        for path in document["paths"].values()
        for operation in path.values()
        if isinstance(operation, dict) and "operationId" in operation
    }
    # The sender's side of a webhook is not a client call: senders post to /hooks/{name}.
    covered = {
        "healthz": "health", "readyz": "ready", "openapi": "openapi", "queue_list": "list_queues",
        "queue_get": "get_queue", "queue_put": "put_queue", "queue_delete": "delete_queue",
        "message_ack": "ack", "queue_browse": "browse", "message_cancel": "cancel",
        "dead_letter_list": "list_dead_letters", "dead_letter_purge": "purge_dead_letters",
        "dead_letter_replay": "replay_dead_letters", "dead_letter_get": "get_dead_letter",
        "dead_letter_delete": "delete_dead_letter",
        "dead_letter_replay_one": "replay_dead_letter", "queue_drain": "drain",
        "message_extend": "extend", "queue_history": "queue_history",
        "message_get_by_idempotency_key": "find_message", "message_enqueue": "enqueue",
        "message_get": "get_message", "message_body": "message_body",
        "message_deliveries": "message_deliveries", "message_nack": "nack",
        "queue_pause": "pause_queue", "queue_purge": "purge", "push_pause": "pause_push",
        "push_resume": "resume_push", "message_receive": "receive", "queue_resume": "resume_queue",
        "queue_stats": "queue_stats", "webhook_list": "list_webhooks", "webhook_get": "get_webhook",
        "webhook_put": "put_webhook", "webhook_delete": "delete_webhook", "history_list": "history",
        "schedule_list": "list_schedules", "schedule_get": "get_schedule",
        "schedule_put": "put_schedule", "schedule_delete": "delete_schedule",
        "schedule_pause": "pause_schedule", "schedule_resume": "resume_schedule",
        "topic_list": "list_topics", "topic_get": "get_topic", "topic_put": "put_topic",
        "topic_delete": "delete_topic", "topic_publish": "publish",
        "alert_list": "list_alerts", "alert_get": "get_alert", "alert_put": "put_alert",
        "alert_delete": "delete_alert",
    }  # fmt: skip
    assert operations - {"webhook_receive"} == set(covered)
    for method in covered.values():
        assert callable(getattr(Client, method)), method
        assert inspect.iscoroutinefunction(getattr(AsyncClient, method)), method


def test_the_async_client_has_the_same_signatures() -> None:
    for name, method in inspect.getmembers(Client, inspect.isfunction):
        if name.startswith("_") or name == "close":
            continue
        twin = getattr(AsyncClient, name)
        assert inspect.signature(twin) == inspect.signature(method), name


def test_a_message_goes_through_its_whole_life(client: Client) -> None:
    queue = unique("client")
    put = client.put_queue(queue, QueueSpec(max_attempts=2, rate_limit=RateLimitSpec(100)))
    assert put.created and put.queue.config.max_attempts == 2
    assert put.queue.config.rate_limit is not None
    unlimited = client.put_queue(queue, QueueSpec(rate_limit=RateLimitSpec(0), schema=None))
    assert unlimited.queue.config.rate_limit is None
    enqueued = client.enqueue(queue, {"order": 1}, id="order-1", headers={"h": "v"})
    assert enqueued.created and enqueued.position == 0
    batch = client.enqueue_batch(queue, [MessageIn(body="a"), MessageIn(body="b", priority=5)])
    assert [result.created for result in batch] == [True, True]
    assert client.find_message(queue, "order-1").message_id == enqueued.message_id
    received = client.receive(queue, 10, wait_ms=1000, visibility_timeout_ms=5000)
    assert [message.body for message in received] == ["b", {"order": 1}, "a"]
    first = received[1]
    assert first.headers == {"h": "v"} and first.attempts == 1
    assert first.enqueued_at.tzinfo is not None
    assert client.extend(queue, first.receipt, 10_000).lease_expires_at > first.lease_expires_at
    nacked = client.nack(queue, first.receipt, error="boom", delay_ms=0)
    assert nacked.state == "ready"
    assert client.ack_many(queue, [received[0].receipt, received[2].receipt]).acked == 2
    again = client.receive(queue, wait_ms=2000)[0]
    assert (again.attempts, again.last_error) == (2, "boom")
    dead = client.nack(queue, again.receipt, error="final")
    assert dead.state == "dead"
    letters = client.list_dead_letters(queue, error="final")
    assert [entry.message_id for entry in letters.entries] == [enqueued.message_id]
    entry = client.get_dead_letter(queue, enqueued.message_id)
    assert (entry.body, entry.attempts, entry.last_error) == ({"order": 1}, 2, "final")
    replay = client.replay_dead_letters(queue, error="final", dry_run=True)
    assert (replay.dry_run, replay.matched) == (True, 1)
    replayed = client.replay_dead_letter(queue, enqueued.message_id)
    assert replayed.replayed == 1
    status = client.get_message(queue, enqueued.message_id)
    assert status.state == "replayed" or status.failures
    stats = client.queue_stats(queue)
    assert stats.ready == 1 and stats.counters.acked == 2
    assert client.browse(queue, "ready", preview_bytes=10).counts.ready == 1
    assert client.drain(queue, timeout_ms=0).drained is False
    assert client.purge(queue).purged == 1
    assert client.pause_queue(queue).stats.paused is True
    assert client.resume_queue(queue).stats.paused is False
    assert client.cancel(queue, id="nobody").outcome == "not_found"
    assert client.purge_dead_letters(queue).deleted == 0
    assert any(q.name == queue for q in client.list_queues())
    assert client.health().status == "ok" and client.ready().status == "ok"
    assert "sluice" in client.metrics()
    assert client.queue_history(queue).queue == queue
    assert client.delete_queue(queue).deleted is True


def test_acked_messages_a_queue_keeps_are_browsed_and_searched(
    client: Client, sluice_server: SluiceServer
) -> None:
    queue = unique("kept")
    put = client.put_queue(queue, QueueSpec(keep_acked_ms=3_600_000))
    assert put.queue.config.keep_acked_ms == 3_600_000
    one = client.enqueue(queue, {"n": 1}, id="one", key="k1")
    two = client.enqueue(queue, {"n": 2}, id="two", key="k2")
    for expected, result in ((one, {"done": 1}), (two, UNSET)):
        (message,) = client.receive(queue)
        assert message.message_id == expected.message_id
        client.ack(queue, message.receipt, result=result)

    every = client.browse(queue, "acked")
    assert every.state == "acked"
    assert [m.message_id for m in every.messages] == [two.message_id, one.message_id]
    page = client.browse(queue, "acked", key="k1", preview_bytes=100)
    (found,) = page.messages
    assert (found.message_id, found.id, found.key) == (one.message_id, "one", "k1")
    assert (found.state, found.result) == ("acked", {"done": 1})
    assert found.body_preview is not None and json.loads(found.body_preview) == {"n": 1}
    assert found.acked_at is not None and found.kept_until is not None
    assert found.kept_until > found.acked_at
    status = client.get_message(queue, one.message_id)
    assert status.kept_until == found.kept_until
    now = datetime.now(timezone.utc)
    searched = client.browse(
        queue,
        "acked",
        message_id=two.message_id,
        id="two",
        since=now - timedelta(hours=1),
        until=now + timedelta(minutes=1),
    )
    assert [m.message_id for m in searched.messages] == [two.message_id]
    assert client.browse(queue, "acked", until=now - timedelta(hours=1)).messages == []
    first = client.browse(queue, "acked", limit=1)
    assert first.next_cursor is not None
    rest = client.browse(queue, "acked", limit=1, cursor=first.next_cursor)
    assert [m.message_id for m in rest.messages] == [one.message_id]
    with pytest.raises(SluiceError) as refused:
        client.browse(queue, "ready", key="k1")
    assert (refused.value.status, refused.value.code) == (422, "invalid_field")

    async def run() -> None:
        async with AsyncClient(sluice_server.url) as aio:
            page = await aio.browse(queue, "acked", id="one")
            assert [m.message_id for m in page.messages] == [one.message_id]

    asyncio.run(run())


def test_errors_carry_the_servers_code(client: Client) -> None:
    with pytest.raises(SluiceError) as missing:
        client.get_queue(unique("absent"))
    assert (missing.value.status, missing.value.code) == (404, "queue_not_found")
    assert missing.value.request_id
    queue = unique("errors")
    client.put_queue(queue, QueueSpec(max_depth=1))
    client.enqueue(queue, 1)
    with pytest.raises(SluiceError) as full:
        client.enqueue(queue, 2)
    assert full.value.code == "queue_full"
    assert full.value.retry_after is not None and full.value.retry_after >= 1
    assert full.value.details["max_depth"] == 1
    receipt = client.receive(queue)[0].receipt
    client.ack(queue, receipt)
    with pytest.raises(SluiceError) as stale:
        client.ack(queue, receipt)
    assert (stale.value.status, stale.value.code) == (409, "stale_receipt")


def _leased(client: Client) -> tuple[str, str, models.ReceivedMessage]:
    """A queue with one message leased, and an empty queue for next steps."""
    queue, target = unique("chain"), unique("chain-next")
    client.put_queue(queue)
    client.put_queue(target)
    client.enqueue(queue, {"order": 1})
    return queue, target, client.receive(queue)[0]


def test_an_ack_enqueues_its_next_steps_in_its_commit(client: Client) -> None:
    queue, target, message = _leased(client)
    answer = client.ack(
        queue,
        message.receipt,
        result={"charged": True},
        then=[
            NextStepIn(queue=target, body={"ship": 1}, id="ship-1", headers={"h": "v"}),
            NextStepIn(queue=target, body_base64=base64.b64encode(b"raw").decode(), priority=5),
        ],
    )
    assert answer.acked == 1 and answer.then is not None
    assert [step.created for step in answer.then] == [True, True]
    status = client.get_message(queue, message.message_id)
    assert (status.state, status.result) == ("acked", {"charged": True})
    # Priority first: the byte body, then the JSON one; each as the answer named it.
    received = client.receive(target, 10)
    ids = [step.message_id for step in answer.then]
    assert [received_message.message_id for received_message in received] == ids[::-1]
    assert base64.b64decode(received[0].body_base64 or "") == b"raw"
    shipped = received[1]
    assert (shipped.body, shipped.id, shipped.headers) == ({"ship": 1}, "ship-1", {"h": "v"})


def test_a_refused_ack_with_next_steps_enqueues_nothing(client: Client) -> None:
    queue, target, message = _leased(client)
    with pytest.raises(SluiceError) as missing:
        client.ack(
            queue,
            message.receipt,
            then=[NextStepIn(queue=target, body=1), NextStepIn(queue=unique("absent"), body=2)],
        )
    assert (missing.value.status, missing.value.code) == (404, "queue_not_found")
    with pytest.raises(SluiceError) as invalid:
        client.ack(queue, message.receipt, then=[NextStepIn(queue=target, body=1, delay_ms=-1)])
    assert (invalid.value.status, invalid.value.code) == (422, "invalid_field")
    assert "then[0]" in invalid.value.message
    # Neither happened: the message is still leased, and acked now without next steps.
    assert client.get_message(queue, message.message_id).state == "in_flight"
    client.ack(queue, message.receipt)
    with pytest.raises(SluiceError) as stale:
        client.ack(queue, message.receipt, then=[NextStepIn(queue=target, body=3)])
    assert (stale.value.status, stale.value.code) == (409, "stale_receipt")
    assert client.queue_stats(target).ready == 0


def test_an_unreachable_server_is_status_0() -> None:
    with Client("http://127.0.0.1:9", timeout=2) as client, pytest.raises(SluiceError) as error:
        client.health()
    assert (error.value.status, error.value.code) == (0, "unreachable")


def test_a_server_that_does_not_answer_in_time_is_status_0_code_timeout() -> None:
    # A listening socket that never accepts: the connection is made, no answer comes.
    import socket

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        with Client(url, timeout=0.3) as client, pytest.raises(SluiceError) as error:
            client.health()
    assert (error.value.status, error.value.code) == (0, "timeout")


def test_the_url_and_token_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, sluice_server: SluiceServer
) -> None:
    monkeypatch.setenv("SLUICE_URL", sluice_server.url)
    monkeypatch.setenv("SLUICE_TOKEN", "secret-token")
    with Client() as client:
        assert client.url == sluice_server.url
        assert client._http.headers["authorization"] == "Bearer secret-token"
        assert client.health().status == "ok"


def test_webhooks_round_trip(client: Client) -> None:
    queue = unique("hooks")
    client.put_queue(queue)
    name = unique("hook")
    spec = WebhookSpec(queue=queue, verify=VerifySpec(scheme="none"), transform=".body")
    assert client.put_webhook(name, spec).created
    shown = client.get_webhook(name)
    assert shown.spec.queue == queue and shown.path == f"/hooks/{name}"
    assert any(hook.name == name for hook in client.list_webhooks())
    assert client.delete_webhook(name).deleted
    assert SecretRef(env="X").env == "X"


def test_schedules_round_trip(client: Client) -> None:
    queue, name = unique("scheduled"), unique("every-second")
    client.put_queue(queue)
    spec = ScheduleSpec(
        queue=queue, every_ms=1000, message=ScheduleMessage(body={"job": "sweep", "none": None})
    )
    put = client.put_schedule(name, spec)
    assert put.created and put.schedule.name == name and put.schedule.spec.every_ms == 1000
    assert any(schedule.name == name for schedule in client.list_schedules())
    shown = client.get_schedule(name)
    assert shown.paused is False and shown.next_run_at is not None
    assert shown.next_run_at.tzinfo is not None and shown.spec.queue == queue
    paused = client.pause_schedule(name)
    assert paused.paused is True and paused.next_run_at is None
    assert client.get_schedule(name).paused is True
    resumed = client.resume_schedule(name)
    assert resumed.paused is False and resumed.next_run_at is not None
    # A run is due within a second of resuming; the server makes due runs every 500 ms.
    deadline = time.monotonic() + 5.0
    received: list[models.ReceivedMessage] = []
    while not received and time.monotonic() < deadline:
        received = client.receive(queue, 10, wait_ms=1000)
    assert received, "no run of the schedule arrived within 5 s"
    assert received[0].headers["sluice-schedule"] == name
    assert received[0].body == {"job": "sweep", "none": None}
    assert client.delete_schedule(name).deleted is True
    with pytest.raises(SluiceError) as gone:
        client.get_schedule(name)
    assert (gone.value.status, gone.value.code) == (404, "schedule_not_found")


def test_the_async_client_manages_schedules(sluice_server: SluiceServer) -> None:
    async def run() -> None:
        async with AsyncClient(sluice_server.url) as client:
            queue, name = unique("async-scheduled"), unique("async-schedule")
            await client.put_queue(queue)
            spec = ScheduleSpec(queue=queue, every_ms=60_000, message=ScheduleMessage(body=1))
            assert (await client.put_schedule(name, spec)).created
            assert any(schedule.name == name for schedule in await client.list_schedules())
            assert (await client.pause_schedule(name)).paused is True
            assert (await client.resume_schedule(name)).next_run_at is not None
            assert (await client.get_schedule(name)).spec.every_ms == 60_000
            assert (await client.delete_schedule(name)).deleted is True
            with pytest.raises(SluiceError) as gone:
                await client.get_schedule(name)
            assert gone.value.code == "schedule_not_found"

    asyncio.run(run())


def test_topics_round_trip(client: Client) -> None:
    every, big, topic = unique("topic-all"), unique("topic-big"), unique("topic")
    client.put_queue(every)
    client.put_queue(big)
    spec = TopicSpec(
        subscriptions=[SubscriptionSpec(queue=every), SubscriptionSpec(big, filter=".body.n > 1")]
    )
    put = client.put_topic(topic, spec)
    assert put.created and put.topic.name == topic and put.topic.spec == spec
    assert any(shown.name == topic for shown in client.list_topics())

    small = client.publish(topic, {"n": 1})
    assert [(c.queue, c.created) for c in small.copies] == [(every, True)]
    first = client.publish(topic, {"n": 2}, id="order-2", headers={"h": "v"})
    assert [(c.queue, c.created) for c in first.copies] == [(every, True), (big, True)]
    again = client.publish(topic, {"n": 2}, id="order-2", headers={"h": "v"})
    assert again.copies == [dataclasses.replace(c, created=False) for c in first.copies]

    stats = client.get_topic(topic).stats
    assert stats == models.TopicStatsOut(published=3, copies=3, filtered=1, duplicates=2)

    from_every = client.receive(every, 10)
    assert {m.message_id for m in from_every} == {
        small.copies[0].message_id,
        first.copies[0].message_id,
    }
    assert sorted(m.body["n"] for m in from_every) == [1, 2]
    from_big = client.receive(big, 10)
    assert [(m.message_id, m.body) for m in from_big] == [(first.copies[1].message_id, {"n": 2})]
    assert from_big[0].headers["h"] == "v"

    assert client.delete_topic(topic).deleted is True
    with pytest.raises(SluiceError) as gone:
        client.get_topic(topic)
    assert (gone.value.status, gone.value.code) == (404, "topic_not_found")


def test_the_async_client_manages_topics(sluice_server: SluiceServer) -> None:
    async def run() -> None:
        async with AsyncClient(sluice_server.url) as client:
            every, big, topic = unique("async-all"), unique("async-big"), unique("async-topic")
            await client.put_queue(every)
            await client.put_queue(big)
            subscriptions = [SubscriptionSpec(every), SubscriptionSpec(big, ".body.n > 1")]
            assert (await client.put_topic(topic, TopicSpec(subscriptions))).created
            assert any(shown.name == topic for shown in await client.list_topics())
            assert len((await client.publish(topic, {"n": 1})).copies) == 1
            first = await client.publish(topic, {"n": 2}, id="order-2")
            assert [c.created for c in first.copies] == [True, True]
            again = await client.publish_message(topic, MessageIn(body={"n": 2}, id="order-2"))
            assert [(c.message_id, c.created) for c in again.copies] == [
                (c.message_id, False) for c in first.copies
            ]
            stats = (await client.get_topic(topic)).stats
            assert (stats.published, stats.copies, stats.filtered, stats.duplicates) == (3, 3, 1, 2)
            assert len(await client.receive(every, 10)) == 2
            received = await client.receive(big, 10)
            assert [m.message_id for m in received] == [first.copies[1].message_id]
            assert (await client.delete_topic(topic)).deleted is True
            with pytest.raises(SluiceError) as gone:
                await client.get_topic(topic)
            assert gone.value.code == "topic_not_found"

    asyncio.run(run())


def test_alerts_round_trip(client: Client) -> None:
    queue, name = unique("alerted"), unique("alert")
    # Scoped to a queue of its own, so the suite's other dead letters do not concern it.
    spec = AlertSpec(
        queues=[queue],
        depth_above=1000,
        window_ms=60_000,
        destination=AlertDestinationSpec(
            webhook_url="http://127.0.0.1:9/alerts", headers={"x-team": "ops"}
        ),
    )
    put = client.put_alert(name, spec)
    assert put.created and put.alert.name == name and put.alert.spec == spec
    assert put.alert.queue == f"sluice.alerts.{name}"
    assert put.alert.sent == models.AlertSentOut(
        dead_letters=0, dead_letters_counted=0, depth=0, oldest_ready_age=0
    )
    replaced = client.put_alert(name, dataclasses.replace(spec, depth_above=500))
    assert replaced.created is False
    shown = client.get_alert(name)
    assert shown.spec.depth_above == 500 and shown.spec.queues == [queue]
    assert shown.spec.destination.webhook_url == "http://127.0.0.1:9/alerts"
    assert shown.delivery is not None and shown.delivery.ready == 0
    assert shown.firing == [] and shown.last_sent_at is None
    assert any(alert.name == name for alert in client.list_alerts())

    command = AlertSpec(destination=AlertDestinationSpec(command=["sh", "-c", "id"]))
    with pytest.raises(SluiceError) as refused:
        client.put_alert(unique("alert"), command)
    assert (refused.value.status, refused.value.code) == (422, "invalid_field")
    assert "destination.command" in refused.value.message

    assert client.delete_alert(name).deleted is True
    with pytest.raises(SluiceError) as gone:
        client.get_alert(name)
    assert (gone.value.status, gone.value.code) == (404, "alert_not_found")


def test_a_dead_letter_makes_a_notification_in_the_alerts_queue(client: Client) -> None:
    queue, name = unique("alert-dead"), unique("alert-dl")
    client.put_queue(queue, QueueSpec(max_attempts=1))
    alert = client.put_alert(name, AlertSpec(queues=[queue])).alert
    sent = client.enqueue(queue, {"n": 1})
    leased = client.receive(queue)[0]
    assert client.nack(queue, leased.receipt, error="boom").state == "dead"
    # A dead letter is counted once it is a second old; the server's passes run every 500 ms.
    deadline = time.monotonic() + 10.0
    received: list[models.ReceivedMessage] = []
    while not received and time.monotonic() < deadline:
        received = client.receive(alert.queue, 10, wait_ms=1000)
    assert len(received) == 1, "no notification arrived within 10 s"
    assert received[0].headers["sluice-alert"] == name
    event = models.AlertEventOut.from_body(received[0].body)
    assert (event.type, event.status, event.alert, event.queue) == (
        "dead_letters",
        "firing",
        name,
        queue,
    )
    assert (event.count, event.count_capped, event.dead_letter_queue) == (1, False, f"{queue}.dlq")
    assert [(s.message_id, s.error) for s in event.sample] == [(sent.message_id, "boom")]
    assert event.timestamp.tzinfo is not None
    client.ack(alert.queue, received[0].receipt)
    shown = client.get_alert(name)
    assert (shown.sent.dead_letters, shown.sent.dead_letters_counted) == (1, 1)
    assert shown.last_sent_at is not None
    client.delete_alert(name)


def test_the_async_client_manages_alerts(sluice_server: SluiceServer) -> None:
    async def run() -> None:
        async with AsyncClient(sluice_server.url) as client:
            queue, name = unique("async-alerted"), unique("async-alert")
            spec = AlertSpec(
                queues=[queue], destination=AlertDestinationSpec(webhook_url="http://127.0.0.1:9/")
            )
            assert (await client.put_alert(name, spec)).created
            assert any(alert.name == name for alert in await client.list_alerts())
            assert (await client.get_alert(name)).spec == spec
            assert (await client.delete_alert(name)).deleted is True
            with pytest.raises(SluiceError) as gone:
                await client.get_alert(name)
            assert gone.value.code == "alert_not_found"

    asyncio.run(run())


def test_the_async_client_works(sluice_server: SluiceServer) -> None:
    async def run() -> None:
        async with AsyncClient(sluice_server.url) as client:
            queue = unique("async-client")
            await client.put_queue(queue)
            sent = await client.enqueue(queue, {"n": 1})
            received = await client.receive(queue, wait_ms=1000)
            assert received[0].message_id == sent.message_id
            await client.ack(queue, received[0].receipt, result={"ok": True})
            status = await client.get_message(queue, sent.message_id)
            assert (status.state, status.result) == ("acked", {"ok": True})

    asyncio.run(run())


def test_times_read_with_any_precision() -> None:
    parsed = parse_datetime("2024-05-06T07:08:09.123456789Z")
    assert parsed == datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=timezone.utc)
    assert parse_datetime("2024-05-06T07:08:09+02:00").utcoffset() is not None
    with pytest.raises(ValueError, match="RFC 3339"):
        parse_datetime("yesterday")


def test_deleting_a_queue_takes_its_dead_letter_queue_unless_kept(client: Client) -> None:
    name = f"del-{time.monotonic_ns()}"
    client.put_queue(name)
    kept = client.delete_queue(name, dead_letters="keep")
    assert kept.dead_letter_queue is None
    client.get_queue(f"{name}.dlq")
    client.delete_queue(f"{name}.dlq")

    client.put_queue(name)
    deleted = client.delete_queue(name)
    assert deleted.dead_letter_queue == f"{name}.dlq"
    with pytest.raises(SluiceError) as missing:
        client.get_queue(f"{name}.dlq")
    assert missing.value.code == "queue_not_found"
