"""boto3 (botocore 1.43.11, AWS JSON 1.0) against an SQS endpoint: every operation a queue user
needs, with the answers AWS gives (docs/design/sqs-compat.md §2-§4).

    python boto3_flow.py http://127.0.0.1:PORT

Checks that hold on AWS but not on moto_server (spec §5) are skipped there with a note, and
enforced against every other endpoint.
"""

import hashlib
import json
import threading
import time

from sqs_common import Flow, attributes_md5, client, error_of, expect_error, md5_hex, unique, wait_until


# The attributes of the spec's MD5 vectors (3.7), AWS-recorded.
GREETINGS = {
    "General": {"DataType": "String", "StringValue": "Kenobi"},
    "Hello": {"DataType": "String", "StringValue": "There"},
    "Help.Me": {"DataType": "String", "StringValue": "Me"},
}
MD5_ALL = "4c360f3fdafd970e05fae2f149d997f5"
MD5_GENERAL_HELLO = "fca026605781cb4126a1e9044df24232"
MD5_HELLO = "a311262e065454b75da111d535b8dacd"
MD5_HELLO_HELP = "83fee93c1bcd8b9a5a923ffacdc636c7"
TRACE = b"traceparent\x1e00-774062d6c37081a5a0b9b5b88e30627c-2d2482211f6489da-01"
MD5_TRACE = "8cbe4db156db8a94db8b801b7addb984"

state = {}
flow = Flow("boto3 JSON flow")
URL, sqs, checks = flow.url, flow.sqs, flow.checks
strict, account, new_queue = flow.strict, flow.account, flow.new_queue
receive_all, receive_none = flow.receive_all, flow.receive_none
botocore_protocol = sqs.meta.service_model.protocol
assert botocore_protocol == "json", f"this botocore speaks {botocore_protocol}, not json"


# ---- queues ------------------------------------------------------------------------------------


def create_standard():
    name = unique("std")
    url = sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "30"})["QueueUrl"]
    flow.saw(url)
    assert url == f"{URL}/{account()}/{name}", f"queue URL {url!r}"
    # Idempotent: the same attributes, a matching subset, or none at all answer the same URL.
    assert sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "30"})["QueueUrl"] == url
    assert sqs.create_queue(QueueName=name)["QueueUrl"] == url
    e = expect_error(
        sqs.create_queue,
        "QueueAlreadyExists",
        QueueName=name,
        Attributes={"VisibilityTimeout": "60"},
        query_code="QueueNameExists",
    )
    assert isinstance(e, sqs.exceptions.QueueNameExists), type(e)
    state["standard"] = url


def create_fifo():
    name = unique("orders") + ".fifo"
    attributes = {"FifoQueue": "true", "ContentBasedDeduplication": "true"}
    url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    assert url == f"{URL}/{account()}/{name}", url
    assert sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"] == url
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert got["FifoQueue"] == "true", got
    assert got["ContentBasedDeduplication"] == "true", got
    expect_error(
        sqs.create_queue,
        "QueueAlreadyExists",
        QueueName=name,
        Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "false"},
    )
    state["fifo"] = url


def create_rejects_bad_fifo_shapes():
    # A standard queue named .fifo, and a FIFO queue without the suffix (spec 3.1).
    if strict("a standard queue named .fifo is accepted by moto"):
        expect_error(sqs.create_queue, "InvalidParameterValue", QueueName=unique("plain") + ".fifo")
    expect_error(
        sqs.create_queue, "InvalidParameterValue", QueueName=unique("nosuffix"), Attributes={"FifoQueue": "true"}
    )


def get_queue_url():
    url = state["standard"]
    name = url.rsplit("/", 1)[1]
    assert sqs.get_queue_url(QueueName=name)["QueueUrl"] == url
    try:
        sqs.get_queue_url(QueueName=unique("nope"))
    except sqs.exceptions.QueueDoesNotExist as e:
        error = e.response["Error"]
        assert error["Code"] == "AWS.SimpleQueueService.NonExistentQueue", error
        assert error["QueryErrorCode"] == "QueueDoesNotExist", error
        assert error["Type"] == "Sender", error
        assert error["Message"] == "The specified queue does not exist.", error
        assert e.response["ResponseMetadata"]["HTTPStatusCode"] == 400
        assert e.response["ResponseMetadata"].get("RequestId"), "no x-amzn-RequestId"
    else:
        raise AssertionError("GetQueueUrl of a missing queue succeeded")


def list_queues():
    prefix = unique("lst")
    urls = sorted(sqs.create_queue(QueueName=f"{prefix}-{i}")["QueueUrl"] for i in range(3))
    sqs.create_queue(QueueName=unique("other"))
    listed = sqs.list_queues(QueueNamePrefix=prefix)
    assert sorted(listed["QueueUrls"]) == urls, listed
    assert "NextToken" not in listed, "NextToken without MaxResults"
    assert "QueueUrls" not in sqs.list_queues(QueueNamePrefix=unique("none")), "empty list present"
    # Pagination: pages of at most MaxResults, NextToken until the end (moto ignores both).
    pages, token = [], None
    for _ in range(5):
        kwargs = {"NextToken": token} if token else {}
        page = sqs.list_queues(QueueNamePrefix=prefix, MaxResults=2, **kwargs)
        pages.append(page.get("QueueUrls", []))
        token = page.get("NextToken")
        if not token:
            break
    assert sorted(u for p in pages for u in p) == urls, pages
    if strict("ListQueues pagination"):
        assert [len(p) for p in pages] == [2, 1], f"page sizes {[len(p) for p in pages]}"
    if strict("ListQueues MaxResults range"):
        expect_error(sqs.list_queues, "InvalidParameterValue", MaxResults=1001)


def queue_attributes():
    url = new_queue("attrs")
    before = int(time.time())
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    name = url.rsplit("/", 1)[1]
    defaults = {
        "ApproximateNumberOfMessages": "0",
        "ApproximateNumberOfMessagesNotVisible": "0",
        "ApproximateNumberOfMessagesDelayed": "0",
        "DelaySeconds": "0",
        "MaximumMessageSize": "1048576",
        "MessageRetentionPeriod": "345600",
        "ReceiveMessageWaitTimeSeconds": "0",
        "VisibilityTimeout": "30",
        "QueueArn": f"arn:aws:sqs:us-east-1:{account()}:{name}",
    }
    for key, value in defaults.items():
        assert got.get(key) == value, f"{key}={got.get(key)!r}, wanted {value!r}: {got}"
    for key in ("CreatedTimestamp", "LastModifiedTimestamp"):
        # Epoch seconds, as a string (moto's carry a fraction).
        seconds = float(got[key]) if flow.moto else int(got[key])
        assert abs(seconds - before) < 120, f"{key}={got[key]}"
    assert "FifoQueue" not in got and "RedrivePolicy" not in got, got

    sqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "45", "DelaySeconds": "1"})
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout", "DelaySeconds"])
    assert got["Attributes"] == {"VisibilityTimeout": "45", "DelaySeconds": "1"}, got
    # No names: no attributes.
    assert "Attributes" not in sqs.get_queue_attributes(QueueUrl=url), "attributes without names"
    expect_error(
        sqs.get_queue_attributes, "InvalidAttributeName", QueueUrl=url, AttributeNames=["Foobar"]
    )
    if strict("SetQueueAttributes with an unknown name is accepted by moto"):
        expect_error(sqs.set_queue_attributes, "InvalidAttributeName", QueueUrl=url, Attributes={"Foobar": "1"})
    # The changed values are what a later CreateQueue compares against.
    assert sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "45"})["QueueUrl"] == url


# ---- messages ----------------------------------------------------------------------------------


def send_with_attributes():
    url = new_queue("attrmsg")
    state["attr_queue"] = url
    sent = sqs.send_message(QueueUrl=url, MessageBody="msg", MessageAttributes=GREETINGS)
    assert sent["MD5OfMessageBody"] == "6e2baaf3b97dbeef01c0043275f9a0e7", sent
    assert sent["MD5OfMessageAttributes"] == MD5_ALL, sent
    assert attributes_md5(GREETINGS) == MD5_ALL  # the script's own digest agrees with the vector
    state["attr_message_id"] = sent["MessageId"]
    plain = sqs.send_message(QueueUrl=url, MessageBody="test")
    assert plain["MD5OfMessageBody"] == "098f6bcd4621d373cade4e832627b4f6", plain
    assert "MD5OfMessageAttributes" not in plain, plain
    binary = {"attr1": {"DataType": "Binary", "BinaryValue": TRACE}}
    sent = sqs.send_message(QueueUrl=url, MessageBody="bin", MessageAttributes=binary)
    assert sent["MD5OfMessageAttributes"] == MD5_TRACE, sent
    number = {"customNumberTypeAttrib": {"DataType": "Number.float", "StringValue": "4563442423554324324264524243.32543234"}}
    sent = sqs.send_message(QueueUrl=url, MessageBody="num", MessageAttributes=number)
    assert sent["MD5OfMessageAttributes"] == "9fe1b90bbd9965bdf77bac517c7d2495", sent
    binary = {"binaryAttribute": {"DataType": "Binary", "BinaryValue": b"Hello binary world!"}}
    sent = sqs.send_message(QueueUrl=url, MessageBody="bin2", MessageAttributes=binary)
    assert sent["MD5OfMessageAttributes"] == "31a92b15d92f8db860eda32aceb656c3", sent
    state["attr_count"] = 5
    if strict("list-valued attributes are left out of moto's MD5"):
        # Transport 3 (spec 3.7): the vector computed from the algorithm, no external record.
        listed = {"a": {"DataType": "String", "StringListValues": ["x", "y"]}}
        assert attributes_md5(listed) == "9b30dab58df08a3e3fccee8f544f1c2d"
        sent = sqs.send_message(QueueUrl=url, MessageBody="list", MessageAttributes=listed)
        assert sent["MD5OfMessageAttributes"] == "9b30dab58df08a3e3fccee8f544f1c2d", sent
        state["attr_count"] = 6


def receive_attribute_filters():
    url = state["attr_queue"]
    cases = [
        (["Hel.*"], ["Hello", "Help.Me"], MD5_HELLO_HELP),
        (["All"], ["General", "Hello", "Help.Me"], MD5_ALL),
        ([".*"], ["General", "Hello", "Help.Me"], MD5_ALL),
        (["General", "Hello", "Unknown"], ["General", "Hello"], MD5_GENERAL_HELLO),
        (["Hello"], ["Hello"], MD5_HELLO),
        (None, [], None),
    ]
    for names, want, md5 in cases:
        kwargs = {"MessageAttributeNames": names} if names else {}
        # VisibilityTimeout 0: the messages stay visible for the next case.
        messages = receive_all(url, state["attr_count"], VisibilityTimeout=0, **kwargs)
        (message,) = [m for m in messages if m["MessageId"] == state["attr_message_id"]]
        assert message["Body"] == "msg" and message["MD5OfBody"] == md5_hex("msg"), message
        got = message.get("MessageAttributes", {})
        assert sorted(got) == want, f"filter {names}: attributes {sorted(got)}, wanted {want}"
        for name in want:
            assert got[name] == GREETINGS[name], got
        assert message.get("MD5OfMessageAttributes") == md5, f"filter {names}: {message}"
        (binary,) = [m for m in messages if m["Body"] == "bin"]
        if names in (["All"], [".*"]):
            assert binary["MessageAttributes"]["attr1"]["BinaryValue"] == TRACE, binary
            assert binary["MD5OfMessageAttributes"] == MD5_TRACE, binary


def system_attributes():
    url = new_queue("sysattr")
    sqs.send_message(QueueUrl=url, MessageBody="sys")
    sent_ms = time.time() * 1000
    names = ["ApproximateReceiveCount", "SentTimestamp", "SenderId", "ApproximateFirstReceiveTimestamp"]
    (first,) = receive_all(url, 1, VisibilityTimeout=0, MessageSystemAttributeNames=names)
    attributes = first["Attributes"]
    assert sorted(attributes) == sorted(names), attributes
    assert attributes["ApproximateReceiveCount"] == "1", attributes
    assert abs(int(attributes["SentTimestamp"]) - sent_ms) < 60_000, attributes
    assert int(attributes["ApproximateFirstReceiveTimestamp"]) >= int(attributes["SentTimestamp"]), attributes
    assert attributes["SenderId"], attributes
    (second,) = receive_all(url, 1, AttributeNames=["All"])
    assert second["Attributes"]["ApproximateReceiveCount"] == "2", second
    assert second["Attributes"]["SentTimestamp"] == attributes["SentTimestamp"], second
    assert second["ReceiptHandle"] != first["ReceiptHandle"], "a receipt handle reused"
    # Only what was asked for.
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=second["ReceiptHandle"], VisibilityTimeout=0)
    (third,) = receive_all(url, 1, MessageSystemAttributeNames=["SentTimestamp"])
    assert sorted(third.get("Attributes", {})) == ["SentTimestamp"], third


def send_batch():
    url = new_queue("batch")
    entries = [
        {"Id": "a", "MessageBody": "one"},
        {"Id": "b", "MessageBody": "two", "MessageAttributes": {"Hello": GREETINGS["Hello"]}},
        {"Id": "bad-delay", "MessageBody": "late", "DelaySeconds": 1000},
        {"Id": "c", "MessageBody": "three"},
    ]
    answer = sqs.send_message_batch(QueueUrl=url, Entries=entries)
    ok = {e["Id"]: e for e in answer["Successful"]}
    assert sorted(ok) == ["a", "b", "c"], answer
    assert ok["a"]["MD5OfMessageBody"] == md5_hex("one"), ok
    assert ok["b"]["MD5OfMessageAttributes"] == MD5_HELLO, ok
    assert "MD5OfMessageAttributes" not in ok["a"], ok
    (failed,) = answer["Failed"]
    assert failed["Id"] == "bad-delay" and failed["Code"] == "InvalidParameterValue", failed
    if strict("SenderFault as a JSON boolean (moto sends the string 'true')"):
        assert failed["SenderFault"] is True, failed
    bodies = sorted(m["Body"] for m in receive_all(url, 3))
    assert bodies == ["one", "three", "two"], bodies

    e = expect_error(
        sqs.send_message_batch,
        "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
        QueueUrl=url,
        Entries=[{"Id": f"e{i}", "MessageBody": "x"} for i in range(11)],
        query_code="TooManyEntriesInBatchRequest",
        message="Maximum number of entries per request are 10. You have sent 11.",
    )
    assert isinstance(e, sqs.exceptions.TooManyEntriesInBatchRequest), type(e)
    e = expect_error(
        sqs.send_message_batch,
        "AWS.SimpleQueueService.BatchEntryIdsNotDistinct",
        QueueUrl=url,
        Entries=[{"Id": "same", "MessageBody": "x"}, {"Id": "same", "MessageBody": "y"}],
    )
    assert isinstance(e, sqs.exceptions.BatchEntryIdsNotDistinct), type(e)
    expect_error(sqs.send_message_batch, "AWS.SimpleQueueService.EmptyBatchRequest", QueueUrl=url, Entries=[])
    expect_error(
        sqs.send_message_batch,
        "AWS.SimpleQueueService.InvalidBatchEntryId",
        QueueUrl=url,
        Entries=[{"Id": "not valid!", "MessageBody": "x"}],
    )
    if strict("invalid characters are accepted by moto"):
        answer = sqs.send_message_batch(
            QueueUrl=url,
            Entries=[{"Id": "fine", "MessageBody": "fine"}, {"Id": "nul", "MessageBody": "bad\x00"}],
        )
        assert [e["Id"] for e in answer["Successful"]] == ["fine"], answer
        assert [(e["Id"], e["Code"]) for e in answer["Failed"]] == [("nul", "InvalidMessageContents")], answer


def receive_max_number():
    url = new_queue("maxn")
    sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": f"m{i}"} for i in range(5)])
    answer = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=2, WaitTimeSeconds=1)
    assert 1 <= len(answer["Messages"]) <= 2, answer
    rest = receive_all(url, 5 - len(answer["Messages"]))
    bodies = sorted(m["Body"] for m in answer["Messages"] + rest)
    assert bodies == [f"m{i}" for i in range(5)], bodies
    receive_none(url)


def delete_messages():
    url = new_queue("del", VisibilityTimeout="30")
    sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": f"d{i}"} for i in range(4)])
    messages = receive_all(url, 4)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=messages[0]["ReceiptHandle"])
    # Deleting a message already deleted succeeds (spec 3.10).
    sqs.delete_message(QueueUrl=url, ReceiptHandle=messages[0]["ReceiptHandle"])
    entries = [{"Id": f"h{i}", "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages[1:])]
    entries.append({"Id": "garbage", "ReceiptHandle": "garbage"})
    answer = sqs.delete_message_batch(QueueUrl=url, Entries=entries)
    assert sorted(e["Id"] for e in answer["Successful"]) == ["h0", "h1", "h2"], answer
    assert [(e["Id"], e["Code"]) for e in answer["Failed"]] == [("garbage", "ReceiptHandleIsInvalid")], answer
    e = expect_error(sqs.delete_message, "ReceiptHandleIsInvalid", QueueUrl=url, ReceiptHandle="garbage")
    assert isinstance(e, sqs.exceptions.ReceiptHandleIsInvalid), type(e)
    # Nothing left, visible or in flight.
    got = sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    assert got == {"ApproximateNumberOfMessages": "0", "ApproximateNumberOfMessagesNotVisible": "0"}, got


def change_visibility():
    url = new_queue("vis", VisibilityTimeout="30")
    sent = sqs.send_message(QueueUrl=url, MessageBody="again")
    (first,) = receive_all(url, 1)
    receive_none(url)  # in flight for 30 s
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"], VisibilityTimeout=0)
    (second,) = receive_all(url, 1, timeout=2, MessageSystemAttributeNames=["ApproximateReceiveCount"])
    assert second["MessageId"] == sent["MessageId"], second
    assert second["Attributes"]["ApproximateReceiveCount"] == "2", second
    # A longer timeout keeps it hidden; the batch form answers per entry.
    answer = sqs.change_message_visibility_batch(
        QueueUrl=url,
        Entries=[
            {"Id": "ok", "ReceiptHandle": second["ReceiptHandle"], "VisibilityTimeout": 60},
            {"Id": "bad", "ReceiptHandle": "garbage", "VisibilityTimeout": 60},
        ],
    )
    assert [e["Id"] for e in answer["Successful"]] == ["ok"], answer
    assert [(e["Id"], e["Code"]) for e in answer["Failed"]] == [("bad", "ReceiptHandleIsInvalid")], answer
    receive_none(url)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=second["ReceiptHandle"])


def fifo_order_per_group():
    url = new_queue("groups.fifo", FifoQueue="true", ContentBasedDeduplication="true")
    groups, per_group = ["A", "B", "C"], 6
    sequenced = strict("SequenceNumber in SendMessageBatch results")
    # AWS keeps a group hidden while any of its messages is in flight, also after a partial
    # delete (spec §4); moto releases it at the first delete, so on moto one message a receive.
    per_receive = 3 if strict("several messages of a group in one receive") else 1
    for i in range(per_group):
        entries = [
            {"Id": f"{g}{i}", "MessageBody": f"{g}-{i}", "MessageGroupId": g} for g in groups
        ]
        answer = sqs.send_message_batch(QueueUrl=url, Entries=entries)
        assert not answer["Failed"], answer
        for entry in answer["Successful"] if sequenced else []:
            assert entry.get("SequenceNumber"), entry
    log, lock, errors = [], threading.Lock(), []
    total = len(groups) * per_group

    def consumer(me):
        # Each consumer receives, records and deletes; FIFO hides a group while any of its
        # messages is in flight, so the shared log must list every group in order.
        own = client(URL)
        deadline = time.monotonic() + 15
        try:
            while time.monotonic() < deadline:
                with lock:
                    if len(log) >= total:
                        return
                answer = own.receive_message(
                    QueueUrl=url,
                    MaxNumberOfMessages=per_receive,
                    WaitTimeSeconds=1,
                    VisibilityTimeout=30,
                    MessageSystemAttributeNames=["MessageGroupId", "SequenceNumber"],
                )
                for message in answer.get("Messages", []):
                    with lock:
                        log.append((me, message["Attributes"]["MessageGroupId"], message["Body"]))
                    own.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        except Exception as e:  # reported by the main thread
            errors.append(repr(e))

    threads = [threading.Thread(target=consumer, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert not errors, errors
    assert len(log) == total, f"{len(log)} of {total} messages: {log}"
    for g in groups:
        bodies = [body for _, group, body in log if group == g]
        assert bodies == [f"{g}-{i}" for i in range(per_group)], f"group {g} out of order: {bodies}"
    consumers = {me for me, _, _ in log}
    checks.note(f"FIFO: {total} messages over consumers {sorted(consumers)}")


def content_based_dedup():
    url = state["fifo"]
    first = sqs.send_message(QueueUrl=url, MessageBody="same body", MessageGroupId="g")
    again = sqs.send_message(QueueUrl=url, MessageBody="same body", MessageGroupId="g")
    assert again["MD5OfMessageBody"] == first["MD5OfMessageBody"] == md5_hex("same body")
    same_id = strict("a deduplicated send answers the original MessageId (moto makes a new one)")
    if same_id:
        assert again["MessageId"] == first["MessageId"], (first, again)
    (message,) = receive_all(url, 1, timeout=3, MessageSystemAttributeNames=["All"])
    assert message["MessageId"] == first["MessageId"], message
    attributes = message["Attributes"]
    assert attributes["MessageGroupId"] == "g", attributes
    assert attributes["MessageDeduplicationId"] == hashlib.sha256(b"same body").hexdigest(), attributes
    if strict("SequenceNumber of received FIFO messages"):
        assert attributes["SequenceNumber"] == first["SequenceNumber"], (attributes, first)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    receive_none(url, wait=1)
    if strict("deduplication after the first copy was deleted"):
        # Still deduplicated after the first copy was deleted (within 5 minutes).
        third = sqs.send_message(QueueUrl=url, MessageBody="same body", MessageGroupId="g")
        assert third["MessageId"] == first["MessageId"], third
        receive_none(url, wait=1)
    # FIFO rules on send.
    expect_error(
        sqs.send_message,
        "MissingParameter",
        QueueUrl=url,
        MessageBody="no group",
        message="The request must contain the parameter MessageGroupId.",
    )
    expect_error(
        sqs.send_message, "InvalidParameterValue", QueueUrl=url, MessageBody="d", MessageGroupId="g", DelaySeconds=2
    )


def dead_letter_queue():
    dlq = new_queue("dlq")
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    policy = '{"deadLetterTargetArn":"%s","maxReceiveCount":"2"}' % dlq_arn
    source = new_queue("src", RedrivePolicy=policy, VisibilityTimeout="1")
    got = sqs.get_queue_attributes(QueueUrl=source, AttributeNames=["RedrivePolicy"])["Attributes"]
    assert json.loads(got["RedrivePolicy"])["deadLetterTargetArn"] == dlq_arn, got
    assert int(json.loads(got["RedrivePolicy"])["maxReceiveCount"]) == 2, got
    sent = sqs.send_message(QueueUrl=source, MessageBody="poison")
    for attempt in (1, 2):
        # Received and never deleted: each lease of 1 s runs out.
        (message,) = receive_all(
            source, 1, timeout=4, VisibilityTimeout=1, MessageSystemAttributeNames=["ApproximateReceiveCount"]
        )
        assert message["Attributes"]["ApproximateReceiveCount"] == str(attempt), message
    time.sleep(1.2)
    # The third attempt finds it moved (AWS moves it on that receive; sluice may move it at expiry).
    receive_none(source, wait=1)
    (dead,) = receive_all(dlq, 1, timeout=5, MessageSystemAttributeNames=["All"])
    assert dead["Body"] == "poison", dead
    assert dead["MessageId"] == sent["MessageId"], dead
    if strict("DeadLetterQueueSourceArn on dead-lettered messages"):
        source_arn = sqs.get_queue_attributes(QueueUrl=source, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        assert dead["Attributes"].get("DeadLetterQueueSourceArn") == source_arn, dead
    sources = sqs.list_dead_letter_source_queues(QueueUrl=dlq)
    assert sources["queueUrls"] == [source], sources
    # "" removes the policy (spec 3.5).
    sqs.set_queue_attributes(QueueUrl=source, Attributes={"RedrivePolicy": ""})
    got = sqs.get_queue_attributes(QueueUrl=source, AttributeNames=["All"])["Attributes"]
    assert "RedrivePolicy" not in got, got


def long_poll_wakeup():
    url = new_queue("poll")

    def send_later():
        time.sleep(0.5)
        client(URL).send_message(QueueUrl=url, MessageBody="wake")

    sender = threading.Thread(target=send_later)
    began = time.monotonic()
    sender.start()
    answer = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5)
    took = time.monotonic() - began
    sender.join(5)
    assert [m["Body"] for m in answer.get("Messages", [])] == ["wake"], answer
    assert took < 3.0, f"the long poll answered after {took:.2f}s, not soon after the send"
    # And an empty long poll waits about its time.
    began = time.monotonic()
    receive_none(url, wait=1)
    took = time.monotonic() - began
    assert 0.8 <= took < 3.0, f"an empty 1 s long poll took {took:.2f}s"


def purge_queue():
    url = new_queue("purge")
    sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": "p"} for i in range(3)])
    sqs.send_message(QueueUrl=url, MessageBody="delayed", DelaySeconds=1)
    sqs.purge_queue(QueueUrl=url)
    receive_none(url)
    time.sleep(1.1)
    receive_none(url)  # the delayed one went too
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])["Attributes"]
    assert got == {"ApproximateNumberOfMessages": "0"}, got
    if strict("PurgeQueue within 60 s is refused (moto does not enforce it)"):
        e = expect_error(
            sqs.purge_queue, "AWS.SimpleQueueService.PurgeQueueInProgress", QueueUrl=url, status=403
        )
        assert isinstance(e, sqs.exceptions.PurgeQueueInProgress), type(e)


def purge_takes_in_flight_messages():
    url = new_queue("purgeinflight")
    sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": "p"} for i in range(2)])
    # One in flight: AWS purges it too (spec 3.4), so it does not come back when its lease ends.
    receive_all(url, 1, VisibilityTimeout=1)
    sqs.purge_queue(QueueUrl=url)
    receive_none(url)
    time.sleep(1.2)
    receive_none(url)
    got = sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    assert got == {"ApproximateNumberOfMessages": "0", "ApproximateNumberOfMessagesNotVisible": "0"}, got


def tags():
    name = unique("tagged")
    url = sqs.create_queue(QueueName=name, tags={"team": "core", "Env": "dev"})["QueueUrl"]
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"team": "core", "Env": "dev"}
    sqs.tag_queue(QueueUrl=url, Tags={"team": "infra", "env": "lower-case is another key"})
    got = sqs.list_queue_tags(QueueUrl=url)["Tags"]
    assert got == {"team": "infra", "Env": "dev", "env": "lower-case is another key"}, got
    sqs.untag_queue(QueueUrl=url, TagKeys=["Env", "env", "missing"])
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"team": "infra"}
    sqs.untag_queue(QueueUrl=url, TagKeys=["team"])
    if strict("ListQueueTags answers an empty Tags map"):
        assert "Tags" not in sqs.list_queue_tags(QueueUrl=url), "empty tags present"


def delete_queue():
    url = new_queue("gone")
    sqs.delete_queue(QueueUrl=url)
    name = url.rsplit("/", 1)[1]
    wait_until(lambda: error_of(sqs.get_queue_url, QueueName=name), 2, "the queue to go")
    expect_error(sqs.send_message, "AWS.SimpleQueueService.NonExistentQueue", QueueUrl=url, MessageBody="x")
    e = expect_error(sqs.delete_queue, "AWS.SimpleQueueService.NonExistentQueue", QueueUrl=url)
    assert isinstance(e, sqs.exceptions.QueueDoesNotExist), type(e)


def errors():
    url = state["standard"]
    e = expect_error(
        sqs.receive_message,
        "InvalidParameterValue",
        QueueUrl=url,
        MaxNumberOfMessages=11,
        query_code="InvalidParameterValueException" if strict("QueryErrorCode of InvalidParameterValue") else None,
    )
    if strict("the AWS text of the MaxNumberOfMessages error"):
        assert e.response["Error"]["Message"] == (
            "Value 11 for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided."
        ), e.response["Error"]
    e = expect_error(sqs.receive_message, "InvalidParameterValue", QueueUrl=url, WaitTimeSeconds=21)
    if strict("the AWS text of the WaitTimeSeconds error"):
        assert e.response["Error"]["Message"] == (
            "Value 21 for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided."
        ), e.response["Error"]
    expect_error(sqs.receive_message, "InvalidParameterValue", QueueUrl=url, MaxNumberOfMessages=0)
    if strict("moto accepts an empty body"):
        expect_error(
            sqs.send_message,
            "MissingParameter",
            QueueUrl=url,
            MessageBody="",
            message="The request must contain the parameter MessageBody.",
        )
    expect_error(sqs.send_message, "InvalidParameterValue", QueueUrl=url, MessageBody="x", DelaySeconds=901)
    expect_error(
        sqs.send_message, "InvalidParameterValue", QueueUrl=url, MessageBody="x" * (1048576 + 1)
    )
    if strict("invalid characters are accepted by moto"):
        expect_error(sqs.send_message, "InvalidMessageContents", QueueUrl=url, MessageBody="nul \x00")
    expect_error(
        sqs.receive_message, "AWS.SimpleQueueService.NonExistentQueue", QueueUrl=f"{URL}/{account()}/{unique('nope')}"
    )
    if strict("an empty String attribute is accepted by moto"):
        expect_error(
            sqs.send_message,
            "InvalidParameterValue",
            QueueUrl=url,
            MessageBody="x",
            MessageAttributes={"Empty": {"DataType": "String", "StringValue": ""}},
            message="Message (user) attribute 'Empty' must contain a non-empty value of type 'String'.",
        )


for name, check in [
    ("CreateQueue standard, idempotent, QueueNameExists", create_standard),
    ("CreateQueue FIFO with ContentBasedDeduplication", create_fifo),
    ("CreateQueue refuses .fifo mismatches", create_rejects_bad_fifo_shapes),
    ("GetQueueUrl and QueueDoesNotExist", get_queue_url),
    ("ListQueues prefix and pagination", list_queues),
    ("Get/SetQueueAttributes", queue_attributes),
    ("SendMessage MD5s of body and attributes", send_with_attributes),
    ("ReceiveMessage MessageAttributeNames filters", receive_attribute_filters),
    ("ReceiveMessage system attributes", system_attributes),
    ("SendMessageBatch with a failing entry and batch errors", send_batch),
    ("ReceiveMessage MaxNumberOfMessages", receive_max_number),
    ("DeleteMessage and DeleteMessageBatch", delete_messages),
    ("ChangeMessageVisibility 0 and batch", change_visibility),
    ("FIFO order per group with three consumers", fifo_order_per_group),
    ("FIFO content-based deduplication", content_based_dedup),
    ("Dead-letter queue after maxReceiveCount", dead_letter_queue),
    ("Long poll wakes on send", long_poll_wakeup),
    ("PurgeQueue", purge_queue),
    ("PurgeQueue takes in-flight messages too", purge_takes_in_flight_messages),
    ("TagQueue, UntagQueue, ListQueueTags", tags),
    ("DeleteQueue", delete_queue),
    ("Parameter errors", errors),
]:
    checks.run(name, check)
checks.finish()
