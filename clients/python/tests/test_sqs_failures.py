"""Issue 33, item 2: the SQS backend reports a failed attempt to the server. On sluice the
failure is a nack, so sluice retries or dead-letters the message itself, with its error, counted
in the queue's `dead_lettered` and replayable from the native API; the backend's own reading of
the dead-letter queue shows the same errors. Against a server that does not know the report
(AWS), the backend dead-letters by itself, as before."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from sluice_client import QueueOptions
from sluice_client.queues.sqs import SQSQueue

from .conftest import SluiceServer, unique


def _json(url: str, body: bytes | None = None) -> Any:
    request = urllib.request.Request(url, data=body, method="POST" if body is not None else "GET")
    request.add_header("content-type", "application/json")
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.loads(answer.read())


def test_failures_through_sqs_on_sluice_are_sluice_dead_letters(
    sluice_server: SluiceServer,
) -> None:
    name = unique("pyfail")
    queue = SQSQueue(
        name,
        endpoint_url=sluice_server.url,
        options=QueueOptions(max_attempts=2),
        create=True,
    )
    try:
        queue.push({"n": "used up"})
        queue.push({"n": "poison"})
        first = [queue.pop(wait=2.0), queue.pop(wait=2.0)]
        for task in first:
            assert task is not None
            if task.envelope.payload == {"n": "poison"}:
                assert queue.nack(task, "bad input: é", permanent=True) == "dead_lettered"
            else:
                assert queue.nack(task, "timeout 1", delay=0) == "retried"
        again = queue.pop(wait=5.0)
        assert again is not None and again.attempt == 2
        assert again.envelope.payload == {"n": "used up"}
        assert queue.nack(again, "timeout 2", delay=0) == "dead_lettered"

        base = f"{sluice_server.url}/v1/queues/{name}"
        listed = _json(f"{base}/dlq")
        assert sorted(entry["last_error"] for entry in listed["entries"]) == [
            "bad input: é",
            "timeout 2",
        ], listed
        assert _json(f"{base}/stats")["counters"]["dead_lettered"] == 2

        letters = sorted(queue.dead_letters(), key=lambda letter: str(letter.payload))
        assert [(letter.payload, letter.error, letter.attempts) for letter in letters] == [
            ({"n": "poison"}, "bad input: é", 1),
            ({"n": "used up"}, "timeout 2", 2),
        ]
        assert all(letter.failed_at for letter in letters)

        assert _json(f"{base}/dlq/replay", b"{}")["replayed"] == 2
        back = [queue.pop(wait=5.0), queue.pop(wait=5.0)]
        assert all(task is not None and task.attempt == 1 for task in back)
    finally:
        queue.delete()
