"""Smoke test of the Python client generated from the server's /v1/openapi.json.

Run by .ci/openapi-client/run with the generated package `sluice_api` on PYTHONPATH:
    python smoke.py URL TOKEN
The server has access control on (TOKEN is an admin token), as a production server would.
Each step uses the generated functions and models only, and checks the parsed answer: a
document that describes a request or an answer wrongly fails here (a body the generated model
cannot send, a field it cannot parse, a parameter in the wrong place).
"""

import sys
import uuid

from sluice_api import AuthenticatedClient
from sluice_api.api.browse import queue_browse
from sluice_api.api.dead_letters import dead_letter_get, dead_letter_list
from sluice_api.api.delivery import message_ack, message_nack, message_receive
from sluice_api.api.messages import message_enqueue, message_get_by_idempotency_key
from sluice_api.api.queues import queue_delete, queue_list, queue_put, queue_stats
from sluice_api.models import (
    AckIn,
    BrowseOut,
    DeadLetterListOut,
    EnqueueBatchOut,
    EnqueueOut,
    ErrorBody,
    MessageBatchIn,
    MessageIn,
    NackIn,
    QueueDeleteOut,
    QueueSpec,
    ReceiveIn,
)


def expect(answer, model, what):
    """The parsed answer is `model`; anything else (an error body, None) fails the run."""
    if not isinstance(answer, model):
        sys.exit(f"FAILED {what}: expected {model.__name__}, got {answer!r}")
    print(f"ok  {what}")
    return answer


def main():
    url, token = sys.argv[1], sys.argv[2]
    client = AuthenticatedClient(base_url=url, token=token, raise_on_unexpected_status=True)
    queue = f"openapi-smoke-{uuid.uuid4().hex[:8]}"

    created = queue_put.sync(queue, client=client, body=QueueSpec(max_attempts=2))
    assert created.created and created.queue.name == queue, created
    print(f"ok  queue_put {queue}")

    # A body of any JSON type: a string, then an object with an idempotency key.
    one = expect(message_enqueue.sync(queue, client=client, body=MessageIn(body="a")), EnqueueOut, 'enqueue "a"')
    assert one.created, one
    order = MessageIn(body={"order": 1001, "total": 42.5}, id="order-1001")
    two = expect(message_enqueue.sync(queue, client=client, body=order), EnqueueOut, "enqueue an object")
    again = expect(message_enqueue.sync(queue, client=client, body=order), EnqueueOut, "enqueue it again")
    assert (again.created, again.message_id) == (False, two.message_id), again

    batch = MessageBatchIn(messages=[MessageIn(body=n) for n in (1, [2], True, {"n": 4})])
    results = expect(message_enqueue.sync(queue, client=client, body=batch), EnqueueBatchOut, "batch enqueue")
    assert len(results.results) == 4 and all(r.created for r in results.results), results

    status = message_get_by_idempotency_key.sync(queue, client=client, id="order-1001")
    assert status.message_id == two.message_id, status
    print("ok  message_get_by_idempotency_key")

    browsed = expect(queue_browse.sync(queue, client=client, state="ready", limit=2), BrowseOut, "browse (state, limit)")
    assert len(browsed.messages) == 2 and browsed.counts.ready == 6, browsed
    assert isinstance(browsed.next_cursor, str), browsed
    rest = expect(
        queue_browse.sync(queue, client=client, state="ready", limit=10, cursor=browsed.next_cursor),
        BrowseOut,
        "browse (cursor)",
    )
    assert len(rest.messages) == 4, rest

    received = message_receive.sync(queue, client=client, body=ReceiveIn(max_=10, wait_ms=1000))
    bodies = [m.body for m in received.messages]
    assert bodies == ["a", {"order": 1001, "total": 42.5}, 1, [2], True, {"n": 4}], bodies
    print(f"ok  receive: {bodies}")

    acked = message_ack.sync(queue, client=client, body=AckIn(receipts=[m.receipt for m in received.messages[:5]]))
    assert acked.acked == 5, acked
    print("ok  ack")
    nacked = message_nack.sync(
        queue,
        client=client,
        body=NackIn(receipt=received.messages[5].receipt, error="payment declined", permanent=True),
    )
    assert nacked.state == "dead", nacked
    print("ok  nack (permanent)")

    dead = expect(
        dead_letter_list.sync(queue, client=client, error="payment", limit=5), DeadLetterListOut, "dlq list (error, limit)"
    )
    assert [(e.message_id, e.last_error) for e in dead.entries] == [
        (results.results[3].message_id, "payment declined")
    ], dead
    entry = dead_letter_get.sync(queue, dead.entries[0].message_id, client=client)
    assert entry.body == {"n": 4} and entry.source_queue == queue, entry
    print("ok  dlq get")
    none = expect(dead_letter_list.sync(queue, client=client, error="no such error"), DeadLetterListOut, "dlq list (no match)")
    assert none.entries == [], none

    stats = queue_stats.sync(queue, client=client)
    assert (stats.ready, stats.in_flight, stats.dead_lettered) == (0, 0, 1), stats
    print("ok  stats")
    names = [q.name for q in queue_list.sync(client=client).queues]
    assert queue in names and f"{queue}.dlq" in names, names
    print("ok  queue_list")

    # Errors come back as the documented ErrorBody.
    missing = queue_stats.sync(f"{queue}-missing", client=client)
    assert isinstance(missing, ErrorBody) and missing.error.code == "queue_not_found", missing
    anonymous = AuthenticatedClient(base_url=url, token="not-a-token")
    refused = queue_list.sync(client=anonymous)
    assert isinstance(refused, ErrorBody) and refused.error.code == "unauthorized", refused
    print("ok  errors: queue_not_found, unauthorized")

    # Deleting the queue takes its dead-letter queue (and the dead letter in it) along.
    deleted = queue_delete.sync(queue, client=client)
    assert isinstance(deleted, QueueDeleteOut) and deleted.deleted, deleted
    assert deleted.dead_letter_queue == f"{queue}.dlq" and deleted.dead_letters_removed == 1, deleted
    gone = queue_stats.sync(f"{queue}.dlq", client=client)
    assert isinstance(gone, ErrorBody) and gone.error.code == "queue_not_found", gone
    print("ok  queue_delete (with its dead-letter queue)")
    print("generated client: ok")


if __name__ == "__main__":
    main()
