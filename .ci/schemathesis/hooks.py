"""Schemathesis hooks for sluice: aim generated requests at real queues, messages and webhooks.

Random path parameters would almost always name a queue that does not exist, so most requests
would stop at a 404 before reaching the code behind them. Before each call these hooks replace
most path parameters with the names and ids of a queue ("st"), its dead-letter queue, messages
in both and a webhook endpoint, all created here, and re-create them after a call that removed
them; receipts sent to ack, nack and extend are mostly real ones, leased just before, and
drains and long polls wait at most a second. The rest stay random, so the 404 and 400 paths are
tested too.

Push destinations generated for a queue are pointed at a closed loopback port: the run sends
traffic to loopback only.
"""

import json
import os
import random
import urllib.error
import urllib.request

import schemathesis

BASE = os.environ["SLUICE_URL"].rstrip("/")
QUEUE = "st"
DEAD_LETTER_QUEUE = "st.dlq"
WEBHOOK = "st"
# Kept empty, so a drain without a short timeout returns at once instead of waiting its default
# 30 s (the seeded queues always hold messages).
EMPTY_QUEUE = "st.empty"
# Longest wait a drain or long poll keeps (the API allows 15 minutes and 20 s): values in the
# allowed range are cut to it, values outside stay, so their 422 is still tested.
WAIT_MAX_MS = 1000
WAITS = {"/v1/queues/{queue}/drain": ("timeout_ms", 900_000), "/v1/queues/{queue}/receive": ("wait_ms", 20_000)}
# Port 9 (discard) on loopback: nothing listens in CI, so a push fails fast and stays local.
PUSH_URL = "http://127.0.0.1:9/push"
# How often a path parameter is replaced by a known name or id.
KNOWN_SHARE = 0.85
# A generator of its own: Hypothesis controls the global one inside test cases.
rng = random.Random()

message_ids = []
dead_letter_ids = []
idempotency_keys = []


def call(method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(BASE + path, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def seed():
    """The queue with its default-like settings, a ready message and a dead letter; the webhook.

    Best effort: with several workers another call may delete the queue meanwhile, so a step
    that fails is tried again at the next seed rather than failing the run."""
    spec = {
        "dead_letter_queue": DEAD_LETTER_QUEUE,
        "max_attempts": 1,
        "schema": None,
        "push": None,
        "max_depth": 0,
        "max_in_flight": 0,
        "rate_limit": {"per_second": 0},
        "ordering": "unordered",
        "visibility_timeout_ms": 30000,
        "max_message_bytes": 1048576,
    }
    call("PUT", f"/v1/queues/{QUEUE}", spec)
    call("PUT", f"/v1/queues/{DEAD_LETTER_QUEUE}", {**spec, "dead_letter_queue": ""})
    call("POST", f"/v1/queues/{QUEUE}/resume")
    call("PUT", f"/v1/queues/{EMPTY_QUEUE}", {})
    call("PUT", f"/v1/webhooks/{WEBHOOK}", {"queue": QUEUE, "verify": {"scheme": "none"}})
    # A dead letter: enqueue, receive, fail for good.
    call("POST", f"/v1/queues/{QUEUE}/messages", {"body": {"seeded": "dead"}})
    status, received = call("POST", f"/v1/queues/{QUEUE}/receive", {"max": 100})
    for message in received["messages"] if status == 200 else []:
        call("POST", f"/v1/queues/{QUEUE}/nack", {"receipt": message["receipt"], "permanent": True})
        dead_letter_ids.append(message["message_id"])
    # Messages that stay: one ready, one delayed, with idempotency keys.
    for body in ({"body": "a"}, {"body": [1, 2], "delay_ms": 600000, "key": "k"}):
        key = f"seed-{rng.randrange(1 << 32)}"
        status, enqueued = call("POST", f"/v1/queues/{QUEUE}/messages", {**body, "id": key})
        if status == 200:
            message_ids.append(enqueued["message_id"])
            idempotency_keys.append(key)
    for known_list in (message_ids, dead_letter_ids, idempotency_keys):
        del known_list[:-20]


def fresh_receipt():
    """A receipt of a message leased now, so ack, nack and extend get past the receipt check."""
    call("POST", f"/v1/queues/{QUEUE}/messages", {"body": "to lease"})
    status, received = call("POST", f"/v1/queues/{QUEUE}/receive", {"max": 1})
    if status == 200 and received["messages"]:
        return received["messages"][0]["receipt"]
    return None


# Calls that take a receipt.
LEASING = {"/v1/queues/{queue}/ack", "/v1/queues/{queue}/nack", "/v1/queues/{queue}/extend"}

# Calls after which the seeded state may be gone.
REMOVING = {
    ("DELETE", "/v1/queues/{queue}"),
    ("POST", "/v1/queues/{queue}/purge"),
    ("POST", "/v1/queues/{queue}/pause"),
    ("PUT", "/v1/queues/{queue}"),
    ("POST", "/v1/queues/{queue}/receive"),
    ("POST", "/v1/queues/{queue}/cancel"),
    ("DELETE", "/v1/queues/{queue}/dlq"),
    ("DELETE", "/v1/queues/{queue}/dlq/{message_id}"),
    ("POST", "/v1/queues/{queue}/dlq/replay"),
    ("POST", "/v1/queues/{queue}/dlq/{message_id}/replay"),
    ("DELETE", "/v1/webhooks/{name}"),
    ("PUT", "/v1/webhooks/{name}"),
}

seed()
assert message_ids and dead_letter_ids, "the seed found nothing to work on: is the server up?"


def known(value, choices):
    return rng.choice(choices) if choices and rng.random() < KNOWN_SHARE else value


@schemathesis.hook
def before_call(context, case, **kwargs):
    parameters = case.path_parameters or {}
    path = case.operation.path
    if "queue" in parameters:
        parameters["queue"] = known(parameters["queue"], [QUEUE, QUEUE, DEAD_LETTER_QUEUE])
    if "message_id" in parameters:
        ids = dead_letter_ids if "/dlq/" in path else message_ids
        parameters["message_id"] = known(parameters["message_id"], ids)
    if "name" in parameters:
        parameters["name"] = known(parameters["name"], [WEBHOOK])
    if case.operation.method.upper() == "GET" and path == "/v1/queues/{queue}/messages":
        if idempotency_keys and rng.random() < KNOWN_SHARE:
            case.query = {**(case.query or {}), "id": rng.choice(idempotency_keys)}
    body = case.body
    if path in WAITS:
        field, allowed = WAITS[path]
        wait = body.get(field) if isinstance(body, dict) else None
        if type(wait) is int and WAIT_MAX_MS < wait <= allowed:
            body[field] = WAIT_MAX_MS
        elif wait is None and path.endswith("/drain") and parameters.get("queue") in (QUEUE, DEAD_LETTER_QUEUE):
            parameters["queue"] = EMPTY_QUEUE
            # Emptied first: a generated definition or replay may have put messages there, and a
            # drain of a queue that holds any waits its whole default 30 s (one CI run timed out
            # here, 30 s per retry of the example).
            call("POST", f"/v1/queues/{EMPTY_QUEUE}/purge")
    if path in LEASING and isinstance(body, dict) and rng.random() < KNOWN_SHARE:
        if "receipt" in body:
            body["receipt"] = fresh_receipt()
        if isinstance(body.get("receipts"), list) and body["receipts"]:
            body["receipts"] = [fresh_receipt() for _ in body["receipts"][:3]]
    if isinstance(body, dict) and isinstance(body.get("push"), dict):
        body["push"]["url"] = PUSH_URL


@schemathesis.hook
def after_call(context, case, response):
    if (case.operation.method.upper(), case.operation.path) in REMOVING and response.status_code < 300:
        seed()


@schemathesis.hook
def filter_failure(context, failure, case, response):
    """Keeps every failure but one: a documented `503 queue_full` with `Retry-After`, the answer
    to an enqueue over a `max_depth` a generated queue update set. `not_a_server_error` counts
    every 5xx, and a full queue is the API working as documented; any other 5xx still fails."""
    if response is None or response.status_code != 503 or "retry-after" not in {
        name.lower() for name in response.headers
    }:
        return True
    try:
        code = json.loads(response.content)["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return True
    return code != "queue_full"
