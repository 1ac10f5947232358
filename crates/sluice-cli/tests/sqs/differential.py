"""Differential test (docs/design/sqs-compat.md 6.4): one sequence of boto3 (JSON protocol) calls
against a reference, moto_server 5.2.1, and against the endpoint under test; the answers are
compared field by field where SQS defines them.

    python differential.py http://127.0.0.1:MOTO_PORT http://127.0.0.1:SLUICE_PORT

Before comparing, what legitimately differs is normalised: the endpoint's host, the account id
(moto 123456789012, sluice 000000000000), each side's queue-name prefix, message ids, receipt
handles, timestamps, sender ids and request ids (dropped). Where moto is known to differ from AWS
(spec §5, and what running this against moto found), the field is left out and the difference is
printed as a note; every other difference fails the test.
"""

import re
import sys

from sqs_common import Checks, client, unique

if len(sys.argv) < 3:
    sys.exit(f"usage: {sys.argv[0]} REFERENCE_URL (moto_server) SUBJECT_URL (sluice)")
REFERENCE, SUBJECT = sys.argv[1].rstrip("/"), sys.argv[2].rstrip("/")

UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
TIMESTAMPS = {"CreatedTimestamp", "LastModifiedTimestamp", "SentTimestamp", "ApproximateFirstReceiveTimestamp"}
GREETINGS = {
    "General": {"DataType": "String", "StringValue": "Kenobi"},
    "Hello": {"DataType": "String", "StringValue": "There"},
    "Help.Me": {"DataType": "String", "StringValue": "Me"},
}

# Where moto_server 5.2.1 answers differently from AWS: (step, path prefix) -> why. The subject is
# held to AWS's behaviour by boto3_flow.py instead.
MOTO_DIFFERS = {
    ("batch-send", "Failed/0/SenderFault"): "moto sends the string 'true', not a JSON boolean",
    ("fifo-send", "SequenceNumber"): "moto gives no SequenceNumber",
    ("fifo-send-again", "SequenceNumber"): "moto gives no SequenceNumber",
    ("fifo-send-again", "MessageId"): "moto makes a new MessageId for a deduplicated send",
    ("fifo-receive", "Messages/0/Attributes/SequenceNumber"): "moto gives no SequenceNumber",
    ("receive-max-11", "error/QueryErrorCode"): "moto's __type is InvalidParameterValue, AWS's InvalidParameterValueException",
    ("receive-wait-21", "error/QueryErrorCode"): "moto's __type is InvalidParameterValue, AWS's InvalidParameterValueException",
    ("tags-after-untag", "Tags"): "moto answers an empty Tags map, AWS omits it",
    ("empty-body", ""): "moto accepts an empty body, AWS answers MissingParameter",
}

# Error messages are compared only where moto copies AWS's text (spec 2.2); elsewhere moto words
# them its own way (e.g. "The specified queue already exists." for AWS's "A queue already exists
# with the same name and a different value for attribute VisibilityTimeout").
MESSAGES_COMPARED = {"get-url-missing", "get-url-deleted", "batch-too-many", "fifo-no-group"}


class Side:
    def __init__(self, url):
        self.url = url
        self.sqs = client(url)
        self.prefix = unique("diff")
        self.account = None

    def normalise(self, value, key=None):
        if isinstance(value, dict):
            return {k: self.normalise(v, k) for k, v in value.items() if k != "ResponseMetadata"}
        if isinstance(value, list):
            return [self.normalise(v) for v in value]
        if not isinstance(value, str):
            return value
        if key == "MessageId":
            assert UUID.match(value), f"MessageId {value!r} is not a UUID"
            # Named by the step that first answered it, so one side's extra message (moto taking
            # an empty body) does not renumber the rest, while "the same id again" still shows.
            return self.message_ids.setdefault(value, f"<message of {self.step}>")
        if key == "ReceiptHandle":
            return "<handle>"
        if key in TIMESTAMPS:
            float(value)
            return "<timestamp>"
        if key == "SenderId":
            return "<sender>"
        if key == "SequenceNumber":
            assert value.isdigit(), value
            return "<sequence>"
        value = value.replace(self.url, "<endpoint>").replace(self.prefix, "<prefix>")
        if self.account:
            value = value.replace(self.account, "<account>")
        return value

    def call(self, operation, **kwargs):
        """The normalised answer of `operation`, or {"error": {...}} for an error answer."""
        from botocore.exceptions import ClientError

        try:
            answer = getattr(self.sqs, operation)(**kwargs)
        except ClientError as e:
            error = dict(e.response["Error"])
            error["status"] = e.response["ResponseMetadata"]["HTTPStatusCode"]
            return self.normalise({"error": error})
        return self.normalise(answer)


def sequence(side):
    """The steps, in order, as (name, normalised answer). `side.q` holds queue URLs by role."""
    side.message_ids, side.step = {}, None
    sqs, p, steps = side.sqs, side.prefix, []

    def record(name, answer):
        side.step = name
        steps.append((name, side.normalise(answer)))
        return steps[-1][1]

    def step(name, operation, **kwargs):
        side.step = name
        steps.append((name, side.call(operation, **kwargs)))
        return steps[-1][1]

    url = sqs.create_queue(QueueName=f"{p}-std", Attributes={"VisibilityTimeout": "30"})["QueueUrl"]
    side.account = url.rsplit("/", 2)[1]
    record("create", {"QueueUrl": url})
    step("create-same", "create_queue", QueueName=f"{p}-std", Attributes={"VisibilityTimeout": "30"})
    step("create-different", "create_queue", QueueName=f"{p}-std", Attributes={"VisibilityTimeout": "31"})
    step("get-url", "get_queue_url", QueueName=f"{p}-std")
    step("get-url-missing", "get_queue_url", QueueName=f"{p}-missing")
    step("attributes-all", "get_queue_attributes", QueueUrl=url, AttributeNames=["All"])
    step("set-attributes", "set_queue_attributes", QueueUrl=url, Attributes={"DelaySeconds": "0", "MaximumMessageSize": "2048"})
    step("attributes-some", "get_queue_attributes", QueueUrl=url, AttributeNames=["DelaySeconds", "MaximumMessageSize"])
    step("send", "send_message", QueueUrl=url, MessageBody="msg", MessageAttributes=GREETINGS)
    step("receive-filtered", "receive_message", QueueUrl=url, MessageAttributeNames=["Hel.*"],
         MessageSystemAttributeNames=["ApproximateReceiveCount"], VisibilityTimeout=0, WaitTimeSeconds=1)
    got = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"], WaitTimeSeconds=1)
    record("receive-all", got)
    handle = got["Messages"][0]["ReceiptHandle"]
    step("visibility-0", "change_message_visibility", QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=0)
    got = sqs.receive_message(QueueUrl=url, MessageSystemAttributeNames=["ApproximateReceiveCount"], WaitTimeSeconds=1)
    record("receive-again", got)
    step("delete", "delete_message", QueueUrl=url, ReceiptHandle=got["Messages"][0]["ReceiptHandle"])
    step("receive-empty", "receive_message", QueueUrl=url)
    step("batch-send", "send_message_batch", QueueUrl=url, Entries=[
        {"Id": "a", "MessageBody": "one", "MessageAttributes": {"Hello": GREETINGS["Hello"]}},
        {"Id": "b", "MessageBody": "two"},
        {"Id": "late", "MessageBody": "x", "DelaySeconds": 1000},
    ])
    step("batch-too-many", "send_message_batch", QueueUrl=url,
         Entries=[{"Id": f"e{i}", "MessageBody": "x"} for i in range(11)])
    step("batch-ids-repeat", "send_message_batch", QueueUrl=url,
         Entries=[{"Id": "same", "MessageBody": "x"}, {"Id": "same", "MessageBody": "y"}])
    handles = []
    for _ in range(5):
        handles += [m["ReceiptHandle"] for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get("Messages", [])]
        if len(handles) >= 2:
            break
    step("batch-delete", "delete_message_batch", QueueUrl=url, Entries=[
        {"Id": f"d{i}", "ReceiptHandle": h} for i, h in enumerate(handles)] + [{"Id": "bad", "ReceiptHandle": "garbage"}])
    step("delete-garbage", "delete_message", QueueUrl=url, ReceiptHandle="garbage")
    step("receive-max-11", "receive_message", QueueUrl=url, MaxNumberOfMessages=11)
    step("receive-wait-21", "receive_message", QueueUrl=url, WaitTimeSeconds=21)
    step("empty-body", "send_message", QueueUrl=url, MessageBody="")
    step("purge", "purge_queue", QueueUrl=url)
    step("receive-after-purge", "receive_message", QueueUrl=url)

    fifo = sqs.create_queue(QueueName=f"{p}-f.fifo", Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"})["QueueUrl"]
    step("fifo-attributes", "get_queue_attributes", QueueUrl=fifo, AttributeNames=["All"])
    step("fifo-send", "send_message", QueueUrl=fifo, MessageBody="f1", MessageGroupId="g")
    step("fifo-send-again", "send_message", QueueUrl=fifo, MessageBody="f1", MessageGroupId="g")
    step("fifo-no-group", "send_message", QueueUrl=fifo, MessageBody="f2")
    step("fifo-receive", "receive_message", QueueUrl=fifo, MessageSystemAttributeNames=["MessageGroupId", "MessageDeduplicationId", "SequenceNumber"], WaitTimeSeconds=1)

    tagged = sqs.create_queue(QueueName=f"{p}-tags", tags={"a": "1", "b": "2"})["QueueUrl"]
    step("tags", "list_queue_tags", QueueUrl=tagged)
    step("tag", "tag_queue", QueueUrl=tagged, Tags={"b": "3", "c": "4"})
    step("untag", "untag_queue", QueueUrl=tagged, TagKeys=["a", "missing"])
    step("tags-after", "list_queue_tags", QueueUrl=tagged)
    step("untag-all", "untag_queue", QueueUrl=tagged, TagKeys=["b", "c"])
    step("tags-after-untag", "list_queue_tags", QueueUrl=tagged)

    listed = sqs.list_queues(QueueNamePrefix=p)
    record("list", {"QueueUrls": sorted(listed.get("QueueUrls", []))})
    for role in (url, fifo, tagged):
        step("delete-queue", "delete_queue", QueueUrl=role)
    step("get-url-deleted", "get_queue_url", QueueName=f"{p}-std")
    return steps


def differences(step, ours, theirs, path=""):
    if isinstance(ours, dict) and isinstance(theirs, dict):
        for key in sorted(set(ours) | set(theirs)):
            sub = f"{path}/{key}" if path else key
            if key not in theirs:
                yield step, sub, ours[key], "<absent>"
            elif key not in ours:
                yield step, sub, "<absent>", theirs[key]
            else:
                yield from differences(step, ours[key], theirs[key], sub)
    elif isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        for i, (a, b) in enumerate(zip(ours, theirs)):
            yield from differences(step, a, b, f"{path}/{i}" if path else str(i))
    elif ours != theirs:
        yield step, path, ours, theirs


def known(step, path):
    if (path == "Message" or path.endswith("/Message")) and step not in MESSAGES_COMPARED:
        return "error texts compared only where moto copies AWS"
    for (s, prefix), why in MOTO_DIFFERS.items():
        if s == step and (path == prefix or path.startswith(prefix + "/") or prefix == ""):
            return why
    return None


def main():
    checks = Checks(f"differential: {REFERENCE} (moto) vs {SUBJECT}")
    result = {}

    def run(role, url):
        result[role] = sequence(Side(url))

    checks.run("the sequence against the reference", run, "reference", REFERENCE)
    checks.run("the sequence against the subject", run, "subject", SUBJECT)

    def compare():
        reference, subject = result["reference"], result["subject"]
        assert [s for s, _ in reference] == [s for s, _ in subject], "different step lists"
        unexpected = []
        for (step, theirs), (_, ours) in zip(reference, subject):
            for step_name, path, a, b in differences(step, ours, theirs):
                why = known(step_name, path)
                if why:
                    checks.note(f"{step_name} {path}: moto {b!r} vs {a!r} ({why})")
                else:
                    unexpected.append(f"{step_name} {path or '(answer)'}: moto {b!r}, subject {a!r}")
        assert not unexpected, "answers differ:\n  " + "\n  ".join(unexpected)

    if "reference" in result and "subject" in result:
        checks.run("answers agree field by field", compare)
    checks.finish()


main()
