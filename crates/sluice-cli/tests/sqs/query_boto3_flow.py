"""boto3/botocore 1.34.89, the last release whose SQS model speaks the query protocol
(docs/design/sqs-compat.md 1.4, 6.2), through the core flow: form-encoded requests, XML answers.

    python query_boto3_flow.py http://127.0.0.1:PORT     (in a venv with .ci/sqs-query-requirements.txt)

botocore does not check MD5s itself (unlike the Java SDK), so the script compares the answers'
MD5OfMessageBody/MD5OfMessageAttributes with its own digests: an XML answer that loses a
character (a CR read back as LF) fails here.
"""

from sqs_common import (
    MOTO_ACCOUNT,
    SLUICE_ACCOUNT,
    Checks,
    client,
    endpoint,
    expect_error,
    is_moto,
    md5_hex,
    unique,
)

URL = endpoint()
sqs = client(URL)
checks = Checks(f"boto3 query flow against {URL}")
protocol = sqs.meta.service_model.protocol
assert protocol == "query", f"this botocore ({__import__('botocore').__version__}) speaks {protocol}, not query"

HELLO = {"Hello": {"DataType": "String", "StringValue": "There"}}
MD5_HELLO = "a311262e065454b75da111d535b8dacd"
state = {}


def strict(what):
    if state.get("moto"):
        checks.note(f"skipped on moto_server (spec §5): {what}")
        return False
    return True


def receive_one(url, **kwargs):
    answer = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=2, **kwargs)
    messages = answer.get("Messages", [])
    assert len(messages) == 1, f"wanted one message: {answer}"
    return messages[0]


def queues():
    name = unique("qstd")
    url = sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "20"}, tags={"via": "query"})["QueueUrl"]
    state["moto"] = is_moto(url)
    account = MOTO_ACCOUNT if state["moto"] else SLUICE_ACCOUNT
    assert url == f"{URL}/{account}/{name}", url
    assert sqs.create_queue(QueueName=name)["QueueUrl"] == url
    e = expect_error(sqs.create_queue, "QueueAlreadyExists", QueueName=name, Attributes={"VisibilityTimeout": "21"})
    assert isinstance(e, sqs.exceptions.QueueNameExists), type(e)
    assert sqs.get_queue_url(QueueName=name)["QueueUrl"] == url
    assert url in sqs.list_queues(QueueNamePrefix=name)["QueueUrls"]
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert got["VisibilityTimeout"] == "20" and got["QueueArn"].endswith(f":{account}:{name}"), got
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"DelaySeconds": "0", "ReceiveMessageWaitTimeSeconds": "1"})
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ReceiveMessageWaitTimeSeconds"])["Attributes"]
    assert got == {"ReceiveMessageWaitTimeSeconds": "1"}, got
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"via": "query"}
    sqs.tag_queue(QueueUrl=url, Tags={"more": "yes"})
    sqs.untag_queue(QueueUrl=url, TagKeys=["via"])
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"more": "yes"}
    state["url"] = url


def missing_queue():
    try:
        sqs.get_queue_url(QueueName=unique("nope"))
    except sqs.exceptions.QueueDoesNotExist as e:
        error = e.response["Error"]
        assert error["Code"] == "AWS.SimpleQueueService.NonExistentQueue", error
        assert error["Type"] == "Sender", error
        assert error["Message"] == "The specified queue does not exist for this wsdl version.", error
        assert e.response["ResponseMetadata"]["HTTPStatusCode"] == 400
        assert e.response["ResponseMetadata"].get("RequestId"), e.response
    else:
        raise AssertionError("GetQueueUrl of a missing queue succeeded")


def messages():
    url = state["url"]
    sent = sqs.send_message(QueueUrl=url, MessageBody="hello over query", MessageAttributes=HELLO)
    assert sent["MD5OfMessageAttributes"] == MD5_HELLO, sent
    message = receive_one(url, MessageAttributeNames=["All"], AttributeNames=["All"], VisibilityTimeout=10)
    assert message["MessageId"] == sent["MessageId"], message
    assert message["MessageAttributes"] == HELLO, message
    assert message["MD5OfMessageAttributes"] == MD5_HELLO, message
    assert message["Attributes"]["ApproximateReceiveCount"] == "1", message
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0)
    again = receive_one(url, AttributeNames=["ApproximateReceiveCount"])
    assert again["MessageId"] == sent["MessageId"] and again["Attributes"]["ApproximateReceiveCount"] == "2", again
    sqs.delete_message(QueueUrl=url, ReceiptHandle=again["ReceiptHandle"])


def carriage_return():
    # The XML answer must escape CR (spec 1.3), or the body comes back with LF and no longer
    # matches its MD5.
    url = state["url"]
    body = '{\r\n  "a": "b"\r\n}\r'
    sent = sqs.send_message(QueueUrl=url, MessageBody=body)
    assert sent["MD5OfMessageBody"] == md5_hex(body), sent
    message = receive_one(url)
    assert message["Body"] == body, repr(message["Body"])
    assert message["MD5OfBody"] == md5_hex(body), message
    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])


def batches():
    url = state["url"]
    answer = sqs.send_message_batch(
        QueueUrl=url,
        Entries=[
            {"Id": "a", "MessageBody": "one", "MessageAttributes": HELLO},
            {"Id": "b", "MessageBody": "two"},
            {"Id": "late", "MessageBody": "x", "DelaySeconds": 1000},
        ],
    )
    assert sorted(e["Id"] for e in answer["Successful"]) == ["a", "b"], answer
    assert [(e["Id"], e["Code"], e["SenderFault"]) for e in answer["Failed"]] == [
        ("late", "InvalidParameterValue", True)
    ], answer
    got = []
    for _ in range(5):
        got += sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get("Messages", [])
        if len(got) >= 2:
            break
    assert sorted(m["Body"] for m in got) == ["one", "two"], got
    answer = sqs.delete_message_batch(
        QueueUrl=url,
        Entries=[{"Id": f"d{i}", "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)]
        + [{"Id": "garbage", "ReceiptHandle": "garbage"}],
    )
    assert sorted(e["Id"] for e in answer["Successful"]) == ["d0", "d1"], answer
    assert [(e["Id"], e["Code"]) for e in answer["Failed"]] == [("garbage", "ReceiptHandleIsInvalid")], answer
    e = expect_error(
        sqs.send_message_batch,
        "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
        QueueUrl=url,
        Entries=[{"Id": f"e{i}", "MessageBody": "x"} for i in range(11)],
    )
    assert isinstance(e, sqs.exceptions.TooManyEntriesInBatchRequest), type(e)
    empty = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0)
    assert "Messages" not in empty, empty


def fifo():
    name = unique("qfifo") + ".fifo"
    url = sqs.create_queue(
        QueueName=name, Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"}
    )["QueueUrl"]
    first = sqs.send_message(QueueUrl=url, MessageBody="f1", MessageGroupId="g")
    sqs.send_message(QueueUrl=url, MessageBody="f2", MessageGroupId="g")
    again = sqs.send_message(QueueUrl=url, MessageBody="f1", MessageGroupId="g")
    if strict("a deduplicated send answers the original MessageId"):
        assert again["MessageId"] == first["MessageId"], (first, again)
    bodies = []
    for _ in range(4):
        for message in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get(
            "Messages", []
        ):
            bodies.append(message["Body"])
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        if len(bodies) >= 2:
            break
    assert bodies == ["f1", "f2"], bodies
    sqs.delete_queue(QueueUrl=url)


def errors_and_cleanup():
    url = state["url"]
    expect_error(sqs.receive_message, "InvalidParameterValue", QueueUrl=url, MaxNumberOfMessages=11)
    e = expect_error(sqs.delete_message, "ReceiptHandleIsInvalid", QueueUrl=url, ReceiptHandle="garbage")
    assert isinstance(e, sqs.exceptions.ReceiptHandleIsInvalid), type(e)
    sqs.send_message(QueueUrl=url, MessageBody="to purge")
    sqs.purge_queue(QueueUrl=url)
    assert "Messages" not in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0)
    sqs.delete_queue(QueueUrl=url)
    e = expect_error(sqs.get_queue_attributes, "AWS.SimpleQueueService.NonExistentQueue", QueueUrl=url)
    assert isinstance(e, sqs.exceptions.QueueDoesNotExist), type(e)


for name, check in [
    ("queues: create, idempotent, url, list, attributes, tags", queues),
    ("QueueDoesNotExist over query", missing_queue),
    ("send with attributes, receive, visibility 0, delete", messages),
    ("a body with CR round-trips with its MD5", carriage_return),
    ("batches with a failing entry", batches),
    ("FIFO order and content-based deduplication", fifo),
    ("errors, purge, delete queue", errors_and_cleanup),
]:
    checks.run(name, check)
checks.finish()
