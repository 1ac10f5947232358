"""The README's SQS line as written (issue 31): `SQSQueue("orders", endpoint_url=...)` against
sluice's SQS API, with no region and no AWS credentials anywhere boto3 looks, works (it raised
botocore's `NoCredentialsError`)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from sluice_client.queues.sqs import SQSQueue

from .conftest import SluiceServer

AWS_VARIABLES = [
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
]


def test_an_endpoint_is_all_the_sqs_queue_needs(
    sluice_server: SluiceServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in AWS_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    # No shared files of the machine's user, and no instance metadata lookup.
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    name = f"sqs-quick-{time.monotonic_ns()}"
    queue = SQSQueue(name, endpoint_url=sluice_server.url, create=True)
    try:
        queue.push({"order_id": 7})
        task = queue.pop(wait=2.0)
        assert task is not None
        assert task.payload == {"order_id": 7}
        queue.ack(task)
    finally:
        queue.close()
