"""Shared helpers of the SQS client scripts in this directory.

Every script takes the endpoint as its first argument (or `SQS_ENDPOINT`), runs its checks in
order, prints one line per check and exits 1 when any failed (0 otherwise). The checks are written
against what AWS does (docs/design/sqs-compat.md); where moto_server is known to differ (§5 of that
spec), a check says so and relaxes on moto, which is recognised by its account id in queue URLs.
"""

import hashlib
import os
import struct
import sys
import time
import traceback
import uuid

REGION = "us-east-1"
MOTO_ACCOUNT = "123456789012"
SLUICE_ACCOUNT = "000000000000"


def endpoint(argv=None, index=1):
    """The endpoint URL: argument `index` of argv, else `SQS_ENDPOINT`."""
    argv = sys.argv if argv is None else argv
    url = argv[index] if len(argv) > index else os.environ.get("SQS_ENDPOINT")
    if not url:
        sys.exit(f"usage: {argv[0]} http://127.0.0.1:PORT   (or set SQS_ENDPOINT)")
    return url.rstrip("/")


def credentials():
    """Access key, secret and region from the environment, with loopback defaults."""
    return (
        os.environ.get("AWS_ACCESS_KEY_ID", "AKIDSLUICE"),
        os.environ.get("AWS_SECRET_ACCESS_KEY", "secret"),
        os.environ.get("AWS_DEFAULT_REGION", REGION),
    )


def client(url):
    """A boto3 SQS client for `url`: no retries (a test wants to see the first answer), and a
    read timeout above the 20 s long-poll maximum."""
    import boto3
    from botocore.config import Config

    key, secret, region = credentials()
    return boto3.client(
        "sqs",
        endpoint_url=url,
        region_name=region,
        aws_access_key_id=key,
        aws_secret_access_key=secret,
        config=Config(retries={"total_max_attempts": 1}, connect_timeout=5, read_timeout=30),
    )


def unique(prefix):
    """A queue name no earlier run used (scripts may run again against one long-lived server)."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def is_moto(queue_url):
    return f"/{MOTO_ACCOUNT}/" in queue_url


def error_of(call, *args, **kwargs):
    """Calls `call`, which must fail with a botocore ClientError; returns that error."""
    from botocore.exceptions import ClientError

    try:
        answer = call(*args, **kwargs)
    except ClientError as e:
        return e
    raise AssertionError(f"expected an error, got {strip_metadata(answer)!r}")


def expect_error(call, code, *args, status=400, query_code=None, message=None, **kwargs):
    """`call` fails with Error.Code `code` (and QueryErrorCode / message / status when given)."""
    e = error_of(call, *args, **kwargs)
    error = e.response["Error"]
    assert error.get("Code") == code, f"Error.Code {error.get('Code')!r}, wanted {code!r}: {error}"
    if query_code is not None:
        assert (
            error.get("QueryErrorCode") == query_code
        ), f"QueryErrorCode {error.get('QueryErrorCode')!r}, wanted {query_code!r}: {error}"
    if message is not None:
        assert error.get("Message") == message, f"message {error.get('Message')!r}, wanted {message!r}"
    got = e.response["ResponseMetadata"]["HTTPStatusCode"]
    assert got == status, f"HTTP status {got}, wanted {status}: {error}"
    return e


def strip_metadata(answer):
    if isinstance(answer, dict):
        return {k: v for k, v in answer.items() if k != "ResponseMetadata"}
    return answer


def md5_hex(data):
    return hashlib.md5(data if isinstance(data, bytes) else data.encode()).hexdigest()


def attributes_md5(attributes):
    """MD5OfMessageAttributes as AWS computes it (spec 3.7): names sorted, each as length-prefixed
    name, data type, a transport byte and the length-prefixed value."""
    digest = hashlib.md5()

    def put(data):
        data = data if isinstance(data, bytes) else data.encode()
        digest.update(struct.pack(">I", len(data)) + data)

    for name in sorted(attributes, key=lambda n: n.encode()):
        value = attributes[name]
        put(name)
        put(value["DataType"])
        if "StringValue" in value:
            digest.update(b"\x01")
            put(value["StringValue"])
        elif "BinaryValue" in value:
            digest.update(b"\x02")
            put(value["BinaryValue"])
        elif "StringListValues" in value:
            digest.update(b"\x03")
            for item in value["StringListValues"]:
                put(item)
        else:
            digest.update(b"\x04")
            for item in value["BinaryListValues"]:
                put(item)
    return digest.hexdigest()


def wait_until(condition, timeout, what, interval=0.1):
    """Polls `condition` until it returns something truthy (returned) or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def known_gaps():
    """Checks (by function name) expected to fail against this endpoint: `SQS_KNOWN_GAPS`, a
    comma-separated list. A test suite names there what its server does not do yet, so the rest
    stays enforced; a listed check that passes fails the run, so the list cannot go stale."""
    return {name.strip() for name in os.environ.get("SQS_KNOWN_GAPS", "").split(",") if name.strip()}


class Checks:
    """Runs named checks in order, each isolated: a failure is printed with its traceback and the
    remaining checks still run. `finish()` exits with the overall status."""

    def __init__(self, title):
        self.title = title
        self.failed = []
        self.gaps = known_gaps()
        self.started = time.monotonic()
        print(f"== {title}", flush=True)

    def run(self, name, check, *args):
        began = time.monotonic()
        gap = check.__name__ in self.gaps
        try:
            check(*args)
        except Exception:  # every failure, assertion or client error, is a failed check
            took = time.monotonic() - began
            if gap:
                print(f"gap  {name} ({took:.1f}s): fails as expected ({check.__name__} in SQS_KNOWN_GAPS)")
                traceback.print_exc(file=sys.stdout, limit=-1)
                sys.stdout.flush()
                return False
            self.failed.append(name)
            print(f"FAIL {name} ({took:.1f}s)", flush=True)
            traceback.print_exc(file=sys.stdout)
            sys.stdout.flush()
            return False
        took = time.monotonic() - began
        if gap:
            self.failed.append(name)
            print(f"FAIL {name} ({took:.1f}s): passes, so take {check.__name__} out of SQS_KNOWN_GAPS", flush=True)
            return True
        print(f"ok   {name} ({took:.1f}s)", flush=True)
        return True

    def note(self, text):
        print(f"note {text}", flush=True)

    def finish(self):
        took = time.monotonic() - self.started
        if self.failed:
            print(f"== {self.title}: {len(self.failed)} failed ({took:.1f}s): {', '.join(self.failed)}")
            sys.exit(1)
        print(f"== {self.title}: all passed ({took:.1f}s)")
        sys.exit(0)


class Flow:
    """What a boto3 script shares: its client, its checks, and whether the endpoint is moto
    (known from the first queue URL it sees)."""

    def __init__(self, title):
        self.url = endpoint()
        self.sqs = client(self.url)
        self.checks = Checks(f"{title} against {self.url}")
        self.moto = False

    def saw(self, queue_url):
        self.moto = is_moto(queue_url)
        return queue_url

    def strict(self, what):
        """True unless the endpoint is moto, where `what` is a known difference (then noted)."""
        if self.moto:
            self.checks.note(f"skipped on moto_server: {what}")
            return False
        return True

    def account(self):
        return MOTO_ACCOUNT if self.moto else SLUICE_ACCOUNT

    def new_queue(self, prefix, **attributes):
        """A queue named `prefix-<random>` (FIFO when the prefix ends in .fifo)."""
        if prefix.endswith(".fifo"):
            name = unique(prefix[: -len(".fifo")]) + ".fifo"
        else:
            name = unique(prefix)
        kwargs = {"Attributes": attributes} if attributes else {}
        return self.saw(self.sqs.create_queue(QueueName=name, **kwargs)["QueueUrl"])

    def receive_all(self, queue_url, count, timeout=5.0, **kwargs):
        """Receives until `count` messages came (standard queues may answer with fewer)."""
        got = []
        deadline = time.monotonic() + timeout
        while len(got) < count and time.monotonic() < deadline:
            answer = self.sqs.receive_message(
                QueueUrl=queue_url, MaxNumberOfMessages=min(10, count - len(got)), WaitTimeSeconds=1, **kwargs
            )
            got.extend(answer.get("Messages", []))
        assert len(got) == count, f"received {len(got)} messages, wanted {count}: {got}"
        return got

    def receive_none(self, queue_url, wait=0):
        answer = self.sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=wait)
        assert "Messages" not in answer, f"wanted no messages, got {answer['Messages']}"
