"""The SQS query protocol by hand (docs/design/sqs-compat.md 1.2, 1.3, 6.2): form and query-string
requests signed with SigV4 (botocore's signer only, no service model) or not signed at all, and the
XML answers read element by element; then a few JSON requests by hand, for the wire framing an SDK
hides (content type, x-amzn-query-error, `__type`).

    python query_raw.py http://127.0.0.1:PORT
"""

import json
import xml.etree.ElementTree as ET

import requests
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from sqs_common import MOTO_ACCOUNT, SLUICE_ACCOUNT, Checks, credentials, endpoint, is_moto, md5_hex, unique

URL = endpoint()
NS = "{http://queue.amazonaws.com/doc/2012-11-05/}"
checks = Checks(f"raw query requests against {URL}")
KEY, SECRET, REGION = credentials()
state = {}


def signed(url, method="POST", **params):
    """A SigV4-signed query request: a form body for POST, a query string for GET."""
    params = {"Version": "2012-11-05", **params}
    if method == "POST":
        request = AWSRequest(
            method="POST",
            url=url,
            data=params,
            headers={"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"},
        )
    else:
        request = AWSRequest(method="GET", url=url, params=params)
    SigV4Auth(Credentials(KEY, SECRET), "sqs", REGION).add_auth(request)
    prepared = request.prepare()
    return requests.request(method, prepared.url, data=prepared.body, headers=dict(prepared.headers), timeout=30)


def unsigned(url, **params):
    """A plain GET with the action in the query string (access control off: no signature needed)."""
    return requests.get(url, params=params, timeout=30)


def xml(response, root, status=200):
    """The answer's XML root, after checking status, content type, root element and request id."""
    assert response.status_code == status, f"HTTP {response.status_code}, wanted {status}: {response.text}"
    content_type = response.headers.get("Content-Type", "")
    assert content_type.startswith("text/xml"), f"Content-Type {content_type!r}: {response.text}"
    assert response.headers.get("x-amzn-RequestId"), f"no x-amzn-RequestId: {dict(response.headers)}"
    tree = ET.fromstring(response.content)
    assert tree.tag == NS + root, f"root {tree.tag}, wanted {NS + root}: {response.text}"
    return tree


def text(node, path):
    found = node.find(_ns(path))
    assert found is not None, f"no {path} in {ET.tostring(node).decode()}"
    return found.text or ""


def _ns(path):
    return "/".join(NS + part for part in path.split("/"))


def strict(what):
    if state.get("moto"):
        checks.note(f"skipped on moto_server: {what}")
        return False
    return True


def create_and_list():
    name = unique("raw")
    tree = xml(
        signed(URL + "/", Action="CreateQueue", QueueName=name, **{"Attribute.1.Name": "VisibilityTimeout", "Attribute.1.Value": "15", "Tag.1.Key": "k", "Tag.1.Value": "v"}),
        "CreateQueueResponse",
    )
    url = text(tree, "CreateQueueResult/QueueUrl")
    state["moto"] = is_moto(url)
    account = MOTO_ACCOUNT if state["moto"] else SLUICE_ACCOUNT
    assert url == f"{URL}/{account}/{name}", url
    assert text(tree, "ResponseMetadata/RequestId"), "no RequestId in the body"
    state["url"], state["name"] = url, name
    other = signed(URL + "/", Action="CreateQueue", QueueName=name + "-2")
    urls_wanted = sorted([url, text(xml(other, "CreateQueueResponse"), "CreateQueueResult/QueueUrl")])
    # Flattened list: <QueueUrl> elements directly inside the result.
    tree = xml(signed(URL + "/", Action="ListQueues", QueueNamePrefix=name), "ListQueuesResponse")
    urls = sorted(e.text for e in tree.findall(_ns("ListQueuesResult/QueueUrl")))
    assert urls == urls_wanted, urls
    tree = xml(signed(URL + "/", Action="GetQueueUrl", QueueName=name), "GetQueueUrlResponse")
    assert text(tree, "GetQueueUrlResult/QueueUrl") == url
    if strict("moto answers GET requests in JSON"):
        # GET with a signed query string works as well as a POSTed form.
        tree = xml(signed(URL + "/", method="GET", Action="GetQueueUrl", QueueName=name), "GetQueueUrlResponse")
        assert text(tree, "GetQueueUrlResult/QueueUrl") == url
    tree = xml(
        signed(url, Action="GetQueueAttributes", **{"AttributeName.1": "VisibilityTimeout", "AttributeName.2": "QueueArn"}),
        "GetQueueAttributesResponse",
    )
    attributes = {
        a.find(NS + "Name").text: a.find(NS + "Value").text
        for a in tree.findall(_ns("GetQueueAttributesResult/Attribute"))
    }
    assert attributes == {"VisibilityTimeout": "15", "QueueArn": f"arn:aws:sqs:us-east-1:{account}:{name}"}, attributes
    tree = xml(signed(url, Action="ListQueueTags"), "ListQueueTagsResponse")
    tags = {t.find(NS + "Key").text: t.find(NS + "Value").text for t in tree.findall(_ns("ListQueueTagsResult/Tag"))}
    assert tags == {"k": "v"}, tags


def send_with_attributes():
    # The spec's worked example (6.2), recorded against moto_server: the digests of "x" and Hello=There.
    tree = xml(
        signed(
            URL + "/",
            Action="SendMessage",
            QueueUrl=state["url"],
            MessageBody="x",
            **{
                "MessageAttribute.1.Name": "Hello",
                "MessageAttribute.1.Value.DataType": "String",
                "MessageAttribute.1.Value.StringValue": "There",
            },
        ),
        "SendMessageResponse",
    )
    assert text(tree, "SendMessageResult/MD5OfMessageBody") == "9dd4e461268c8034f5c8564e155c67a6"
    assert text(tree, "SendMessageResult/MD5OfMessageAttributes") == "a311262e065454b75da111d535b8dacd"
    assert text(tree, "SendMessageResult/MessageId")
    # The queue URL path carries the queue; the receive names none.
    tree = xml(
        signed(state["url"], Action="ReceiveMessage", **{"MessageAttributeName.1": "All", "AttributeName.1": "All"}),
        "ReceiveMessageResponse",
    )
    (message,) = tree.findall(_ns("ReceiveMessageResult/Message"))
    assert text(message, "Body") == "x"
    assert text(message, "MD5OfMessageAttributes") == "a311262e065454b75da111d535b8dacd"
    (attribute,) = message.findall(NS + "MessageAttribute")
    assert text(attribute, "Name") == "Hello"
    assert text(attribute, "Value/StringValue") == "There" and text(attribute, "Value/DataType") == "String"
    system = {a.find(NS + "Name").text: a.find(NS + "Value").text for a in message.findall(NS + "Attribute")}
    assert system.get("ApproximateReceiveCount") == "1", system
    response = signed(state["url"], Action="DeleteMessage", ReceiptHandle=text(message, "ReceiptHandle"))
    tree = xml(response, "DeleteMessageResponse")
    assert text(tree, "ResponseMetadata/RequestId")
    assert tree.find(NS + "DeleteMessageResult") is None, response.text


def carriage_return():
    body = "{\r\n  \"line\": \"one\"\r\n}\r"
    tree = xml(signed(state["url"], Action="SendMessage", MessageBody=body), "SendMessageResponse")
    assert text(tree, "SendMessageResult/MD5OfMessageBody") == md5_hex(body)
    response = signed(state["url"], Action="ReceiveMessage", VisibilityTimeout="0")
    # A literal CR would be read back as LF by any XML parser: it must be escaped.
    assert "\r" not in response.text, "an unescaped CR in the XML answer"
    assert "&#xD;" in response.text or "&#13;" in response.text, response.text
    (message,) = xml(response, "ReceiveMessageResponse").findall(_ns("ReceiveMessageResult/Message"))
    assert text(message, "Body") == body, repr(text(message, "Body"))
    assert text(message, "MD5OfBody") == md5_hex(body)
    # (Deleted, not purged: a queue may be purged once a minute, and json_by_hand purges it.)
    xml(signed(state["url"], Action="DeleteMessage", ReceiptHandle=text(message, "ReceiptHandle")), "DeleteMessageResponse")


def batch():
    params = {
        "SendMessageBatchRequestEntry.1.Id": "one",
        "SendMessageBatchRequestEntry.1.MessageBody": "b1",
        "SendMessageBatchRequestEntry.1.MessageAttribute.1.Name": "Hello",
        "SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.DataType": "String",
        "SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.StringValue": "There",
        "SendMessageBatchRequestEntry.2.Id": "two",
        "SendMessageBatchRequestEntry.2.MessageBody": "b2",
        "SendMessageBatchRequestEntry.3.Id": "late",
        "SendMessageBatchRequestEntry.3.MessageBody": "b3",
        "SendMessageBatchRequestEntry.3.DelaySeconds": "1000",
    }
    name = unique("rawbatch")
    url = text(xml(signed(URL + "/", Action="CreateQueue", QueueName=name), "CreateQueueResponse"), "CreateQueueResult/QueueUrl")
    tree = xml(signed(url, Action="SendMessageBatch", **params), "SendMessageBatchResponse")
    entries = {e.find(NS + "Id").text: e for e in tree.findall(_ns("SendMessageBatchResult/SendMessageBatchResultEntry"))}
    assert sorted(entries) == ["one", "two"], list(entries)
    assert text(entries["one"], "MD5OfMessageAttributes") == "a311262e065454b75da111d535b8dacd"
    assert text(entries["two"], "MD5OfMessageBody") == md5_hex("b2")
    (failed,) = tree.findall(_ns("SendMessageBatchResult/BatchResultErrorEntry"))
    assert text(failed, "Id") == "late" and text(failed, "Code") == "InvalidParameterValue", ET.tostring(failed)
    assert text(failed, "SenderFault") == "true", ET.tostring(failed)
    tree = xml(signed(url, Action="ReceiveMessage", MaxNumberOfMessages="10", WaitTimeSeconds="1"), "ReceiveMessageResponse")
    handles = [text(m, "ReceiptHandle") for m in tree.findall(_ns("ReceiveMessageResult/Message"))]
    assert 1 <= len(handles) <= 2, handles
    params = {}
    for i, handle in enumerate(handles + ["garbage"], start=1):
        params[f"DeleteMessageBatchRequestEntry.{i}.Id"] = f"d{i}"
        params[f"DeleteMessageBatchRequestEntry.{i}.ReceiptHandle"] = handle
    tree = xml(signed(url, Action="DeleteMessageBatch", **params), "DeleteMessageBatchResponse")
    ok = [text(e, "Id") for e in tree.findall(_ns("DeleteMessageBatchResult/DeleteMessageBatchResultEntry"))]
    assert sorted(ok) == [f"d{i}" for i in range(1, len(handles) + 1)], ok
    (failed,) = tree.findall(_ns("DeleteMessageBatchResult/BatchResultErrorEntry"))
    assert text(failed, "Code") == "ReceiptHandleIsInvalid", ET.tostring(failed)
    xml(signed(url, Action="DeleteQueue"), "DeleteQueueResponse")


def xml_errors():
    response = signed(URL + "/", Action="GetQueueUrl", QueueName=unique("nope"))
    tree = xml(response, "ErrorResponse", status=400)
    assert text(tree, "Error/Type") == "Sender"
    assert text(tree, "Error/Code") == "AWS.SimpleQueueService.NonExistentQueue"
    assert text(tree, "Error/Message") == "The specified queue does not exist for this wsdl version."
    assert text(tree, "RequestId")
    tree = xml(
        signed(state["url"], Action="ReceiveMessage", MaxNumberOfMessages="11"), "ErrorResponse", status=400
    )
    assert text(tree, "Error/Code") == "InvalidParameterValue"
    if strict("an unknown action and a missing parameter answer 500 on moto"):
        tree = xml(signed(URL + "/", Action="FooBar"), "ErrorResponse", status=400)
        assert text(tree, "Error/Code") == "InvalidAction"
        assert text(tree, "Error/Message") == "The action FooBar is not valid for this endpoint."
        tree = xml(signed(state["url"], Action="SendMessage"), "ErrorResponse", status=400)
        assert text(tree, "Error/Code") == "MissingParameter"
        assert text(tree, "Error/Message") == "The request must contain the parameter MessageBody."
        # Against a queue URL, CreateQueue is not an action of that endpoint.
        tree = xml(signed(state["url"], Action="CreateQueue", QueueName="x"), "ErrorResponse", status=400)
        assert text(tree, "Error/Code") == "InvalidAction"


def unsigned_get():
    if not strict("unsigned requests are routed to moto's S3"):
        return
    url = state["url"]
    tree = xml(unsigned(url, Action="ReceiveMessage"), "ReceiveMessageResponse")
    assert tree.findall(_ns("ReceiveMessageResult/Message")) == [], "the queue should be empty"
    assert tree.find(_ns("ReceiveMessageResult")) is not None, "an empty receive has <ReceiveMessageResult/>"
    tree = xml(unsigned(url, Action="SendMessage", MessageBody="plain get"), "SendMessageResponse")
    assert text(tree, "SendMessageResult/MD5OfMessageBody") == md5_hex("plain get")
    tree = xml(unsigned(url, Action="ReceiveMessage"), "ReceiveMessageResponse")
    assert [text(m, "Body") for m in tree.findall(_ns("ReceiveMessageResult/Message"))] == ["plain get"]
    # A QueueUrl parameter wins over the path (spec 1.2).
    other = text(
        xml(signed(URL + "/", Action="CreateQueue", QueueName=state["name"] + "-2"), "CreateQueueResponse"),
        "CreateQueueResult/QueueUrl",
    )
    xml(unsigned(url, Action="SendMessage", QueueUrl=other, MessageBody="elsewhere"), "SendMessageResponse")
    tree = xml(unsigned(other, Action="ReceiveMessage"), "ReceiveMessageResponse")
    assert [text(m, "Body") for m in tree.findall(_ns("ReceiveMessageResult/Message"))] == ["elsewhere"]
    # The queue path without an action: 404 <UnknownOperationException/>.
    response = requests.get(url, timeout=30)
    assert response.status_code == 404 and "UnknownOperationException" in response.text, response.text


def signed_json(url, target, body):
    """A SigV4-signed AWS JSON 1.0 request, as the SDKs send it."""
    request = AWSRequest(
        method="POST",
        url=url,
        data=json.dumps(body),
        headers={"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": f"AmazonSQS.{target}"},
    )
    SigV4Auth(Credentials(KEY, SECRET), "sqs", REGION).add_auth(request)
    prepared = request.prepare()
    return requests.post(url, data=prepared.body, headers=dict(prepared.headers), timeout=30)


def json_by_hand():
    # The JSON protocol's framing (spec 1.1, 2.1), read off the wire rather than through an SDK.
    response = signed_json(URL + "/", "GetQueueUrl", {"QueueName": unique("nope")})
    assert response.status_code == 400, response.text
    assert response.headers.get("Content-Type") == "application/x-amz-json-1.0", dict(response.headers)
    assert response.headers.get("x-amzn-query-error") == "AWS.SimpleQueueService.NonExistentQueue;Sender", dict(
        response.headers
    )
    assert response.headers.get("x-amzn-RequestId"), dict(response.headers)
    body = response.json()
    assert body["__type"] == "com.amazonaws.sqs#QueueDoesNotExist", body
    assert body.get("message", body.get("Message")) == "The specified queue does not exist.", body
    # A JSON request POSTed to the queue URL path (as the PHP SDK does) is JSON, not query.
    url = state["url"]
    response = signed_json(url, "SendMessage", {"QueueUrl": url, "MessageBody": "via path"})
    assert response.status_code == 200, response.text
    assert response.headers.get("Content-Type") == "application/x-amz-json-1.0", dict(response.headers)
    assert response.json()["MD5OfMessageBody"] == md5_hex("via path"), response.text
    # Operations without output answer an empty object.
    response = signed_json(URL + "/", "PurgeQueue", {"QueueUrl": url})
    assert response.status_code == 200 and response.json() == {}, response.text
    if strict("an unknown target answers 500 on moto"):
        response = signed_json(URL + "/", "FooBar", {})
        assert response.status_code == 400, response.text
        assert response.json()["__type"].endswith("#InvalidAction"), response.text
        assert response.headers.get("x-amzn-query-error", "").startswith("InvalidAction;"), dict(response.headers)


def cleanup():
    for url in (state["url"], state["url"] + "-2"):
        xml(signed(url, Action="DeleteQueue"), "DeleteQueueResponse")


for name, check in [
    ("CreateQueue, ListQueues, GetQueueUrl, GetQueueAttributes, tags", create_and_list),
    ("SendMessage with an attribute: the spec's MD5s; receive and delete on the queue path", send_with_attributes),
    ("a CR body round-trips escaped, with a matching MD5", carriage_return),
    ("SendMessageBatch and DeleteMessageBatch entries", batch),
    ("XML errors", xml_errors),
    ("unsigned GET requests on the queue URL", unsigned_get),
    ("JSON requests by hand: error framing, the queue path, empty answers", json_by_hand),
    ("DeleteQueue", cleanup),
]:
    checks.run(name, check)
checks.finish()
