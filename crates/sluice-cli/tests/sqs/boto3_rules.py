"""boto3 (JSON protocol) against an SQS endpoint: the finer rules a queue user meets after the
basic flow (boto3_flow.py), each as AWS answers it (docs/design/sqs-compat.md §3, §4): receipt
handles after a lease ends, FIFO rules, retries with ReceiveRequestAttemptId, the forms of a
queue URL, delays and size limits, trace headers, permissions and message move tasks.

    python boto3_rules.py http://127.0.0.1:PORT
"""

import json
import time

from sqs_common import Flow, attributes_md5, expect_error, md5_hex, unique, wait_until

flow = Flow("boto3 rules")
URL, sqs, checks = flow.url, flow.sqs, flow.checks
strict, new_queue = flow.strict, flow.new_queue
receive_all, receive_none = flow.receive_all, flow.receive_none

TRACE_HEADER = "Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1"
HELLO = {"Hello": {"DataType": "String", "StringValue": "There"}}


def arn_of(url):
    return sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]


def handles_after_the_lease():
    url = new_queue("handles", VisibilityTimeout="1")
    # A handle whose lease ran out, the message not received since: the delete still deletes.
    sqs.send_message(QueueUrl=url, MessageBody="expired")
    (message,) = receive_all(url, 1)
    time.sleep(1.3)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    receive_none(url, wait=1)
    # Deleted: changing its visibility is InvalidParameterValue, deleting again succeeds.
    if strict("a visibility change on a deleted message is ReceiptHandleIsInvalid on moto"):
        e = expect_error(
            sqs.change_message_visibility,
            "InvalidParameterValue",
            QueueUrl=url,
            ReceiptHandle=message["ReceiptHandle"],
            VisibilityTimeout=5,
        )
        assert e.response["Error"]["Message"].endswith(
            "Reason: Message does not exist or is not available for visibility timeout change."
        ), e.response["Error"]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])


def fifo_handle_after_the_lease():
    if not strict("a FIFO delete with an expired handle succeeds on moto"):
        return
    url = new_queue("fifohandle.fifo", FifoQueue="true", ContentBasedDeduplication="true", VisibilityTimeout="1")
    sqs.send_message(QueueUrl=url, MessageBody="x", MessageGroupId="g")
    (message,) = receive_all(url, 1)
    time.sleep(1.3)
    # Another consumer may hold the group by now: AWS refuses the stale handle (spec 3.10).
    e = expect_error(sqs.delete_message, "InvalidParameterValue", QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    assert e.response["Error"]["Message"].endswith("Reason: The receipt handle has expired."), e.response["Error"]


def fifo_attempt_id_retry():
    if not strict("ReceiveRequestAttemptId"):
        return
    url = new_queue("attempt.fifo", FifoQueue="true", ContentBasedDeduplication="true")
    for body in ("r1", "r2"):
        sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId="g")
    first = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, ReceiveRequestAttemptId="try-1", WaitTimeSeconds=1)
    # A retry of the same attempt (a lost answer) gets the same messages and handles (spec §4).
    again = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, ReceiveRequestAttemptId="try-1")
    got = [(m["Body"], m["ReceiptHandle"]) for m in first.get("Messages", [])]
    assert got and got[0][0] == "r1", first
    assert [(m["Body"], m["ReceiptHandle"]) for m in again.get("Messages", [])] == got, (first, again)


def fifo_attribute_rules():
    fifo = new_queue("rules.fifo", FifoQueue="true")
    # No content-based deduplication and no id: refused.
    expect_error(
        sqs.send_message,
        "InvalidParameterValue",
        QueueUrl=fifo,
        MessageBody="x",
        MessageGroupId="g",
        message="The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly",
    )
    # An explicit id deduplicates, and ContentBasedDeduplication can be switched on later.
    first = sqs.send_message(QueueUrl=fifo, MessageBody="a", MessageGroupId="g", MessageDeduplicationId="d1")
    second = sqs.send_message(QueueUrl=fifo, MessageBody="b", MessageGroupId="g", MessageDeduplicationId="d1")
    if strict("a deduplicated send answers the original MessageId"):
        assert second["MessageId"] == first["MessageId"], (first, second)
    sqs.set_queue_attributes(QueueUrl=fifo, Attributes={"ContentBasedDeduplication": "true"})
    sqs.send_message(QueueUrl=fifo, MessageBody="c", MessageGroupId="g")
    bodies = []
    for _ in range(5):
        for message in sqs.receive_message(QueueUrl=fifo, MaxNumberOfMessages=10, WaitTimeSeconds=1).get("Messages", []):
            bodies.append(message["Body"])
            sqs.delete_message(QueueUrl=fifo, ReceiptHandle=message["ReceiptHandle"])
        if len(bodies) >= 2:
            break
    assert bodies == ["a", "c"], bodies
    standard = new_queue("rules")
    if strict("FifoQueue=false on a standard queue is accepted by moto"):
        expect_error(sqs.create_queue, "InvalidAttributeName", QueueName=unique("plain"), Attributes={"FifoQueue": "false"})
    # A group on a standard queue is a fair queue: accepted, and returned with the message.
    sqs.send_message(QueueUrl=standard, MessageBody="fair", MessageGroupId="tenant-1")
    (message,) = receive_all(standard, 1, MessageSystemAttributeNames=["MessageGroupId"])
    assert message["Attributes"].get("MessageGroupId") == "tenant-1", message
    if strict("MessageDeduplicationId on a standard queue is accepted by moto"):
        expect_error(sqs.send_message, "InvalidParameterValue", QueueUrl=standard, MessageBody="x", MessageDeduplicationId="d")


def fifo_queue_type_is_fixed():
    if not strict("SetQueueAttributes FifoQueue is accepted by moto"):
        return
    fifo = new_queue("fixed.fifo", FifoQueue="true")
    # Restating "true" is no change (LocalStack's AWS-validated rule); "false" would be one.
    sqs.set_queue_attributes(QueueUrl=fifo, Attributes={"FifoQueue": "true"})
    e = expect_error(sqs.set_queue_attributes, "InvalidAttributeValue", QueueUrl=fifo, Attributes={"FifoQueue": "false"})
    assert e.response["Error"]["Message"] == (
        "Invalid value for the parameter FifoQueue. Reason: Modifying queue type is not supported."
    ), e.response["Error"]


def fifo_purge_clears_deduplication():
    if not strict("moto keeps no deduplication to clear"):
        return
    url = new_queue("purgededup.fifo", FifoQueue="true", ContentBasedDeduplication="true")
    first = sqs.send_message(QueueUrl=url, MessageBody="same", MessageGroupId="g")
    sqs.purge_queue(QueueUrl=url)
    # The purge cleared the deduplication cache (spec §4): the same body is a new message.
    again = sqs.send_message(QueueUrl=url, MessageBody="same", MessageGroupId="g")
    assert again["MessageId"] != first["MessageId"], (first, again)
    (message,) = receive_all(url, 1, timeout=3)
    assert message["MessageId"] == again["MessageId"], message


def queue_url_forms():
    url = new_queue("forms")
    name = url.rsplit("/", 1)[1]
    account = flow.account()
    # Any host, or the bare name, names the queue (spec 3.0); another account does not.
    sqs.send_message(QueueUrl=f"https://sqs.us-east-1.amazonaws.com/{account}/{name}", MessageBody="other host")
    sqs.send_message(QueueUrl=name, MessageBody="bare name")
    bodies = sorted(m["Body"] for m in receive_all(url, 2))
    assert bodies == ["bare name", "other host"], bodies
    if strict("moto ignores the account of a queue URL"):
        expect_error(
            sqs.send_message,
            "AWS.SimpleQueueService.NonExistentQueue",
            QueueUrl=f"{URL}/111111111111/{name}",
            MessageBody="x",
        )


def delays_and_limits():
    url = new_queue("delays", ReceiveMessageWaitTimeSeconds="1")
    sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=1)
    got = sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesDelayed"]
    )["Attributes"]
    assert got == {"ApproximateNumberOfMessages": "0", "ApproximateNumberOfMessagesDelayed": "1"}, got
    # The queue's ReceiveMessageWaitTimeSeconds applies when a receive names no wait.
    began = time.monotonic()
    answer = sqs.receive_message(QueueUrl=url)
    took = time.monotonic() - began
    if "Messages" not in answer:
        assert took >= 0.8, f"an empty receive on a queue waiting 1 s took {took:.2f}s"
        (message,) = receive_all(url, 1, timeout=3)
    else:
        (message,) = answer["Messages"]
    assert message["Body"] == "later", message
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"MaximumMessageSize": "1024"})
    e = expect_error(sqs.send_message, "InvalidParameterValue", QueueUrl=url, MessageBody="x" * 1025)
    if strict("the AWS text of a too-large message"):
        assert e.response["Error"]["Message"] == (
            "One or more parameters are invalid. Reason: Message must be shorter than 1024 bytes."
        ), e.response["Error"]
    if strict("moto accepts a VisibilityTimeout over 12 hours"):
        expect_error(
            sqs.set_queue_attributes, "InvalidAttributeValue", QueueUrl=url, Attributes={"VisibilityTimeout": "43201"}
        )


def trace_header():
    url = new_queue("trace")
    system = {"AWSTraceHeader": {"DataType": "String", "StringValue": TRACE_HEADER}}
    sent = sqs.send_message(QueueUrl=url, MessageBody="traced", MessageAttributes=HELLO, MessageSystemAttributes=system)
    # System attributes get their own digest and leave MD5OfMessageAttributes alone (spec 3.7).
    assert sent["MD5OfMessageAttributes"] == "a311262e065454b75da111d535b8dacd", sent
    if strict("moto gives no MD5OfMessageSystemAttributes"):
        assert sent["MD5OfMessageSystemAttributes"] == attributes_md5(system), sent
    (message,) = receive_all(url, 1, MessageSystemAttributeNames=["AWSTraceHeader"], MessageAttributeNames=["All"])
    assert message["Attributes"] == {"AWSTraceHeader": TRACE_HEADER}, message
    assert message["MD5OfMessageAttributes"] == "a311262e065454b75da111d535b8dacd", message
    assert message["MD5OfBody"] == md5_hex("traced"), message


def permissions():
    url = new_queue("perm")
    arn = arn_of(url)
    sqs.add_permission(QueueUrl=url, Label="cross", AWSAccountIds=["111122223333"], Actions=["SendMessage"])
    policy = json.loads(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])["Attributes"]["Policy"])
    (statement,) = policy["Statement"]
    assert policy["Id"] == f"{arn}/SQSDefaultPolicy", policy
    if strict("moto writes policy Version 2012-10-17"):
        assert policy["Version"] == "2008-10-17", policy
    assert statement["Sid"] == "cross" and statement["Effect"] == "Allow", statement
    assert statement["Action"] in ("SQS:SendMessage", ["SQS:SendMessage"]), statement
    assert statement["Resource"] == arn, statement
    principal = statement["Principal"]["AWS"]
    assert principal in ("arn:aws:iam::111122223333:root", ["arn:aws:iam::111122223333:root"]), statement
    e = expect_error(
        sqs.add_permission, "InvalidParameterValue", QueueUrl=url, Label="cross", AWSAccountIds=["1"], Actions=["*"]
    )
    if strict("the AWS text of a repeated permission label"):
        assert e.response["Error"]["Message"] == "Value cross for parameter Label is invalid. Reason: Already exists."
    sqs.remove_permission(QueueUrl=url, Label="cross")
    # The last statement gone, the policy goes.
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert "Policy" not in got, got


def move_task():
    if not strict("message move tasks"):
        return
    dlq = new_queue("movedlq")
    dlq_arn = arn_of(dlq)
    source = new_queue("movesrc", VisibilityTimeout="1", RedrivePolicy=json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 1}))
    e = expect_error(sqs.start_message_move_task, "InvalidParameterValue", SourceArn=arn_of(source))
    assert e.response["Error"]["Message"] == "Source queue must be configured as a Dead Letter Queue.", e.response
    sqs.send_message(QueueUrl=source, MessageBody="poison")
    receive_all(source, 1)
    time.sleep(1.3)
    receive_none(source, wait=1)
    wait_until(
        lambda: sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["ApproximateNumberOfMessages"])["Attributes"][
            "ApproximateNumberOfMessages"
        ]
        == "1",
        3,
        "the message in the dead-letter queue",
    )
    task = sqs.start_message_move_task(SourceArn=dlq_arn)
    assert task["TaskHandle"], task
    # Back in its source queue (no DestinationArn: where it came from).
    (message,) = receive_all(source, 1, timeout=5)
    assert message["Body"] == "poison", message
    (entry,) = sqs.list_message_move_tasks(SourceArn=dlq_arn)["Results"]
    assert entry["SourceArn"] == dlq_arn and "DestinationArn" not in entry, entry
    assert entry["Status"] in ("RUNNING", "COMPLETED"), entry
    assert isinstance(entry["StartedTimestamp"], int) and abs(entry["StartedTimestamp"] - time.time() * 1000) < 60_000, entry


for name, check in [
    ("an expired handle still deletes; a deleted message's handle", handles_after_the_lease),
    ("FIFO: an expired handle is refused", fifo_handle_after_the_lease),
    ("FIFO: a retried ReceiveRequestAttemptId gets the same messages", fifo_attempt_id_retry),
    ("FIFO and fair-queue attribute rules", fifo_attribute_rules),
    ("FIFO: SetQueueAttributes cannot change FifoQueue", fifo_queue_type_is_fixed),
    ("FIFO: PurgeQueue clears deduplication", fifo_purge_clears_deduplication),
    ("queue URL forms: any host, a bare name, not another account", queue_url_forms),
    ("delays, the queue's wait, MaximumMessageSize", delays_and_limits),
    ("AWSTraceHeader and MD5OfMessageSystemAttributes", trace_header),
    ("AddPermission and RemovePermission write the policy", permissions),
    ("a message move task returns dead letters to their source", move_task),
]:
    checks.run(name, check)
checks.finish()
