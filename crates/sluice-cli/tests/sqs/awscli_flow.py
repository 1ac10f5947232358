"""The AWS CLI v1 (awscli 1.45.11, botocore 1.43.11: JSON protocol) against an SQS endpoint, as a
user types it (docs/design/sqs-compat.md 6.3): `--endpoint-url` on every call, credentials and region
from the environment. The `aws` program is the one beside this Python (the venv's).

    python awscli_flow.py http://127.0.0.1:PORT
"""

import json
import os
import subprocess
import sys
import tempfile

from sqs_common import Checks, credentials, endpoint, md5_hex, unique

URL = endpoint()
AWS = os.path.join(os.path.dirname(sys.executable), "aws")
checks = Checks(f"aws cli against {URL}")
state = {}


def aws(*args, expect=0):
    """Runs `aws --endpoint-url URL sqs ARGS`; returns (stdout, stderr) after checking the status."""
    key, secret, region = credentials()
    empty = tempfile.mkdtemp(prefix="awscli-")
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": empty,
        "AWS_ACCESS_KEY_ID": key,
        "AWS_SECRET_ACCESS_KEY": secret,
        "AWS_DEFAULT_REGION": region,
        # No profile or config of the machine may leak in.
        "AWS_CONFIG_FILE": os.path.join(empty, "config"),
        "AWS_SHARED_CREDENTIALS_FILE": os.path.join(empty, "credentials"),
        "AWS_DEFAULT_OUTPUT": "json",
        "AWS_PAGER": "",
        "AWS_MAX_ATTEMPTS": "1",
    }
    done = subprocess.run(
        [sys.executable, AWS, "--endpoint-url", URL, "sqs", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == expect, (
        f"aws sqs {' '.join(args)}: exit {done.returncode}, wanted {expect}\n"
        f"stdout: {done.stdout}\nstderr: {done.stderr}"
    )
    return done.stdout, done.stderr


def create_queue():
    name = unique("cli")
    out, _ = aws("create-queue", "--queue-name", name, "--attributes", "VisibilityTimeout=20")
    url = json.loads(out)["QueueUrl"]
    assert url.startswith(URL + "/") and url.endswith("/" + name), url
    state["url"], state["name"] = url, name


def send_and_receive():
    url = state["url"]
    out, _ = aws(
        "send-message",
        "--queue-url",
        url,
        "--message-body",
        "hi from the cli",
        "--message-attributes",
        '{"Hello": {"DataType": "String", "StringValue": "There"}}',
    )
    sent = json.loads(out)
    assert sent["MD5OfMessageBody"] == md5_hex("hi from the cli"), sent
    assert sent["MD5OfMessageAttributes"] == "a311262e065454b75da111d535b8dacd", sent
    out, _ = aws(
        "receive-message",
        "--queue-url",
        url,
        "--wait-time-seconds",
        "2",
        "--attribute-names",
        "All",
        "--message-attribute-names",
        "All",
    )
    (message,) = json.loads(out)["Messages"]
    assert message["MessageId"] == sent["MessageId"], message
    assert message["Body"] == "hi from the cli", message
    assert message["MessageAttributes"]["Hello"]["StringValue"] == "There", message
    assert message["Attributes"]["ApproximateReceiveCount"] == "1", message
    aws("delete-message", "--queue-url", url, "--receipt-handle", message["ReceiptHandle"])


def missing_queue():
    # Exit status 255 and the legacy code, as the CLI prints it for AWS (spec 6.3).
    _, err = aws("get-queue-url", "--queue-name", unique("nope"), expect=255)
    wanted = (
        "An error occurred (AWS.SimpleQueueService.NonExistentQueue) when calling the GetQueueUrl operation: "
        "The specified queue does not exist."
    )
    assert wanted in err, err


def delete_queue():
    aws("delete-queue", "--queue-url", state["url"])


for name, check in [
    ("create-queue", create_queue),
    ("send-message, receive-message, delete-message", send_and_receive),
    ("get-queue-url of a missing queue", missing_queue),
    ("delete-queue", delete_queue),
]:
    checks.run(name, check)
checks.finish()
