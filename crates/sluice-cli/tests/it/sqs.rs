//! The SQS-compatible API on the main listener (docs/sqs.md), driven with raw requests in both
//! protocols: how it shares queues with the native API, and the rules that need the test
//! clock (fencing, give-back, redrive). The AWS SDKs, boto3 and the AWS CLI drive it in
//! `crates/sluice-sqs-tests` and `it/sqs_python.rs`.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{Reply, TestServer};

/// One AWS JSON 1.0 request.
pub(crate) async fn sqs(server: &TestServer, action: &str, body: Value) -> Reply {
    let response = server
        .client()
        .post(format!("{}/", server.url()))
        .header("content-type", "application/x-amz-json-1.0")
        .header("x-amz-target", format!("AmazonSQS.{action}"))
        .body(body.to_string())
        .send()
        .await
        .unwrap_or_else(|e| panic!("{action}: {e}"));
    let status = response.status();
    let headers = response.headers().clone();
    let text = response.text().await.unwrap();
    Reply {
        request: format!("SQS {action}"),
        status,
        text,
        headers,
    }
}

async fn sqs_ok(server: &TestServer, action: &str, body: Value) -> Value {
    let reply = sqs(server, action, body).await;
    assert_eq!(reply.status, StatusCode::OK, "{action}: {}", reply.text);
    reply.json()
}

/// The legacy code of an SQS error (what SDKs report), asserting its status.
fn code(reply: &Reply, status: u16) -> String {
    assert_eq!(
        reply.status.as_u16(),
        status,
        "{}: {}",
        reply.request,
        reply.text
    );
    let header = reply
        .header("x-amzn-query-error")
        .expect("x-amzn-query-error");
    header.split(';').next().unwrap().to_owned()
}

async fn receive(server: &TestServer, queue: &str, extra: Value) -> Vec<Value> {
    let mut body = json!({"QueueUrl": queue, "AttributeNames": ["All"]});
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let answer = sqs_ok(server, "ReceiveMessage", body).await;
    answer["Messages"].as_array().cloned().unwrap_or_default()
}

#[tokio::test]
async fn queues_and_messages_are_shared_with_the_native_api() {
    let server = TestServer::builder().start().await;
    let created = sqs_ok(
        &server,
        "CreateQueue",
        json!({"QueueName": "jobs", "Attributes": {"VisibilityTimeout": "45", "DelaySeconds": "0"}, "tags": {"team": "a"}}),
    )
    .await;
    assert_eq!(
        created["QueueUrl"],
        format!("{}/000000000000/jobs", server.url())
    );
    let native = server.get("/v1/queues/jobs").await.ok();
    assert_eq!(native["config"]["visibility_timeout_ms"], 45_000);
    assert_eq!(native["config"]["tags"], json!({"team": "a"}));
    // SQS defines no dead-letter queue until a RedrivePolicy does.
    assert_eq!(native["config"]["dead_letter_queue"], Value::Null);

    server.put_queue("native", json!({})).await;
    let listed = sqs_ok(&server, "ListQueues", json!({})).await;
    let urls: Vec<&str> = listed["QueueUrls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u.as_str().unwrap())
        .collect();
    assert!(
        urls.iter().any(|u| u.ends_with("/000000000000/native.dlq")),
        "{urls:?}"
    );

    // Native in, SQS out: the body as sent, the ordering key as the group.
    server
        .send("native", json!({"body": {"order": 1}, "key": "k1"}))
        .await;
    let got = receive(&server, "native", json!({})).await;
    assert_eq!(got[0]["Body"], r#"{"order":1}"#);
    assert_eq!(got[0]["Attributes"]["MessageGroupId"], "k1");
    assert_eq!(got[0]["Attributes"]["ApproximateReceiveCount"], "1");

    // SQS in, native out: a JSON body is a JSON body.
    sqs_ok(
        &server,
        "SendMessage",
        json!({"QueueUrl": "jobs", "MessageBody": "{\"a\": [1, 2]}"}),
    )
    .await;
    let native = server.receive("jobs", json!({})).await;
    assert_eq!(native[0]["body"], json!({"a": [1, 2]}));
}

#[tokio::test]
async fn the_dashboard_and_the_native_api_keep_their_paths() {
    let server = TestServer::builder().start().await;
    let dashboard = server.get("/").await;
    assert!(
        dashboard.status.is_success() || dashboard.status.is_redirection(),
        "{}",
        dashboard.status
    );
    assert!(dashboard.header("x-amzn-requestid").is_none());
    server.put_queue("q", json!({})).await;
    server.send("q", json!({"body": 1})).await;
    // A POST / that names no action is SQS's MissingAction, in the query protocol's XML.
    let reply = server.post_empty("/").await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert!(
        reply.text.contains("<Code>MissingAction</Code>"),
        "{}",
        reply.text
    );
    // A cross-site form cannot reach the SQS API either (access control is off here).
    let forged = server
        .client()
        .post(format!("{}/", server.url()))
        .header("origin", "https://evil.example")
        .header("sec-fetch-site", "cross-site")
        .header("content-type", "application/x-www-form-urlencoded")
        .body("Action=CreateQueue&QueueName=planted")
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), StatusCode::FORBIDDEN);
    assert_eq!(
        server.get("/v1/queues/planted").await.status,
        StatusCode::NOT_FOUND
    );
    // Every SQS answer names its request id.
    let answer = sqs(&server, "ListQueues", json!({})).await;
    assert_eq!(
        answer.header("x-amzn-requestid"),
        answer.header("x-request-id")
    );
}

#[tokio::test]
async fn the_query_protocol_answers_in_xml_on_queue_urls() {
    let server = TestServer::builder().start().await;
    sqs_ok(&server, "CreateQueue", json!({"QueueName": "xml"})).await;
    let sent = server
        .get("/000000000000/xml?Action=SendMessage&MessageBody=a%0D%0Ab&MessageAttribute.1.Name=Hello&MessageAttribute.1.Value.DataType=String&MessageAttribute.1.Value.StringValue=There")
        .await;
    assert_eq!(sent.status, StatusCode::OK, "{}", sent.text);
    assert_eq!(sent.header("content-type"), Some("text/xml"));
    // MD5 of "a\r\nb", and the AWS-recorded digest of Hello=There.
    assert!(
        sent.text.contains(
            "<MD5OfMessageAttributes>a311262e065454b75da111d535b8dacd</MD5OfMessageAttributes>"
        ),
        "{}",
        sent.text
    );
    let received = server
        .get("/000000000000/xml?Action=ReceiveMessage&MessageAttributeName.1=All")
        .await;
    assert!(
        received.text.contains("<Body>a&#xD;\nb</Body>"),
        "{}",
        received.text
    );
    let missing = server
        .get("/000000000000/nope?Action=GetQueueAttributes")
        .await;
    assert_eq!(missing.status, StatusCode::BAD_REQUEST);
    assert!(
        missing
            .text
            .contains("<Code>AWS.SimpleQueueService.NonExistentQueue</Code>")
    );
    assert!(missing.text.contains("for this wsdl version."));
}

#[tokio::test]
async fn a_visibility_of_zero_gives_the_message_back_without_a_failure() {
    let server = TestServer::builder().start().await;
    // A native queue: a failure would wait out its 1 s backoff and record an error.
    server.put_queue("work", json!({})).await;
    server.send("work", json!({"body": "job"})).await;
    let first = receive(&server, "work", json!({})).await;
    sqs_ok(
        &server,
        "ChangeMessageVisibility",
        json!({"QueueUrl": "work", "ReceiptHandle": first[0]["ReceiptHandle"], "VisibilityTimeout": 0}),
    )
    .await;
    let again = receive(&server, "work", json!({})).await;
    assert_eq!(again.len(), 1, "ready again at once");
    assert_eq!(again[0]["Attributes"]["ApproximateReceiveCount"], "2");
    let status = server
        .message_status("work", again[0]["MessageId"].as_str().unwrap())
        .await;
    assert_eq!(status["last_error"], Value::Null);
    assert_eq!(server.stats("work").await["counters"]["lease_expired"], 0);
    // The given-back handle no longer holds it: a change is refused, the holder's works.
    let stale = sqs(
        &server,
        "ChangeMessageVisibility",
        json!({"QueueUrl": "work", "ReceiptHandle": first[0]["ReceiptHandle"], "VisibilityTimeout": 10}),
    )
    .await;
    assert_eq!(code(&stale, 400), "InvalidParameterValue");
    sqs_ok(
        &server,
        "DeleteMessage",
        json!({"QueueUrl": "work", "ReceiptHandle": again[0]["ReceiptHandle"]}),
    )
    .await;
}

#[tokio::test]
async fn old_receipt_handles_are_fenced() {
    let server = TestServer::builder().test_clock(true).start().await;
    for name in ["std", "grp.fifo"] {
        let mut attributes = json!({"VisibilityTimeout": "10"});
        if name.ends_with(".fifo") {
            attributes["FifoQueue"] = json!("true");
            attributes["ContentBasedDeduplication"] = json!("true");
        }
        sqs_ok(
            &server,
            "CreateQueue",
            json!({"QueueName": name, "Attributes": attributes}),
        )
        .await;
        sqs_ok(
            &server,
            "SendMessage",
            json!({"QueueUrl": name, "MessageBody": "m", "MessageGroupId": "g"}),
        )
        .await;
        let first = receive(&server, name, json!({})).await;
        server.advance_clock(11_000).await;
        // After the deadline the latest handle deletes nothing on a FIFO queue (its lease is
        // over); on a standard queue SQS lets it delete, so it is kept for the check below,
        // after the message was received again.
        if name.ends_with(".fifo") {
            let late = sqs(
                &server,
                "DeleteMessage",
                json!({"QueueUrl": name, "ReceiptHandle": first[0]["ReceiptHandle"]}),
            )
            .await;
            assert_eq!(code(&late, 400), "InvalidParameterValue", "{}", late.text);
        }
        let second = receive(&server, name, json!({})).await;
        assert_eq!(second.len(), 1, "{name}: visible again after the timeout");
        assert_ne!(first[0]["ReceiptHandle"], second[0]["ReceiptHandle"]);
        let old = sqs(
            &server,
            "DeleteMessage",
            json!({"QueueUrl": name, "ReceiptHandle": first[0]["ReceiptHandle"]}),
        )
        .await;
        if name.ends_with(".fifo") {
            assert_eq!(code(&old, 400), "InvalidParameterValue", "{name}");
            assert!(old.text.contains("expired"), "{}", old.text);
        } else {
            assert_eq!(old.status, StatusCode::OK, "{name}: {}", old.text);
        }
        let id = second[0]["MessageId"].as_str().unwrap();
        assert_eq!(
            server.message_status(name, id).await["state"],
            "in_flight",
            "{name}"
        );
        sqs_ok(
            &server,
            "DeleteMessage",
            json!({"QueueUrl": name, "ReceiptHandle": second[0]["ReceiptHandle"]}),
        )
        .await;
        assert_eq!(server.message_status(name, id).await["state"], "acked");
        let garbage = sqs(
            &server,
            "DeleteMessage",
            json!({"QueueUrl": name, "ReceiptHandle": "garbage"}),
        )
        .await;
        assert_eq!(code(&garbage, 400), "ReceiptHandleIsInvalid");
    }
}

#[tokio::test]
async fn a_redrive_policy_dead_letters_after_max_receive_count() {
    let server = TestServer::builder().test_clock(true).start().await;
    sqs_ok(&server, "CreateQueue", json!({"QueueName": "dead"})).await;
    let policy = json!({"deadLetterTargetArn": "arn:aws:sqs:us-east-1:000000000000:dead", "maxReceiveCount": 2});
    sqs_ok(
        &server,
        "CreateQueue",
        json!({"QueueName": "src", "Attributes": {"RedrivePolicy": policy.to_string(), "VisibilityTimeout": "5"}}),
    )
    .await;
    sqs_ok(
        &server,
        "SendMessage",
        json!({"QueueUrl": "src", "MessageBody": "poison"}),
    )
    .await;
    for receive_count in 1..=2 {
        let got = receive(&server, "src", json!({})).await;
        assert_eq!(
            got[0]["Attributes"]["ApproximateReceiveCount"],
            receive_count.to_string()
        );
        server.advance_clock(6_000).await;
    }
    assert!(receive(&server, "src", json!({})).await.is_empty());
    let dead = receive(&server, "dead", json!({})).await;
    assert_eq!(dead[0]["Body"], "poison");
    assert_eq!(
        dead[0]["Attributes"]["DeadLetterQueueSourceArn"],
        "arn:aws:sqs:us-east-1:000000000000:src"
    );
    let sources = sqs_ok(
        &server,
        "ListDeadLetterSourceQueues",
        json!({"QueueUrl": "dead"}),
    )
    .await;
    assert_eq!(
        sources["queueUrls"],
        json!([format!("{}/000000000000/src", server.url())])
    );
    // A policy whose target does not exist is refused.
    let bad = json!({"deadLetterTargetArn": "arn:aws:sqs:us-east-1:000000000000:nope", "maxReceiveCount": 2});
    let refused = sqs(
        &server,
        "SetQueueAttributes",
        json!({"QueueUrl": "src", "Attributes": {"RedrivePolicy": bad.to_string()}}),
    )
    .await;
    assert_eq!(code(&refused, 400), "InvalidParameterValue");
}

/// Proves SQS request bodies are read within `[limits] body_bytes_in_flight`, as native ones
/// are: while a slow native upload holds the whole budget, a small SendMessage is throttled
/// (`RequestThrottled`, which every SDK retries) instead of taking memory beyond the budget;
/// once the upload is gone it is taken. Before the fix the SQS layer read its bodies outside
/// the budget and the send was stored at once.
#[tokio::test]
async fn sqs_bodies_are_read_within_the_in_flight_budget() {
    use std::time::{Duration, Instant};
    use tokio::io::AsyncWriteExt;

    let server = TestServer::builder()
        .config("[limits]\nbody_bytes_in_flight = 16777216\n")
        .start()
        .await;
    server.put_queue("q", json!({})).await;
    let url = sqs_ok(&server, "GetQueueUrl", json!({"QueueName": "q"})).await["QueueUrl"]
        .as_str()
        .unwrap()
        .to_owned();
    let address = server.url().trim_start_matches("http://").to_owned();
    let mut upload = tokio::net::TcpStream::connect(&address).await.unwrap();
    // The largest request there is, all sent but its last bytes: its charge is the whole
    // budget (bodies are charged as they arrive, not as declared).
    upload
        .write_all(
            format!(
                "POST /v1/queues/q/messages HTTP/1.1\r\nhost: {address}\r\ncontent-type: application/json\r\ncontent-length: 16777216\r\n\r\n{{\"messages\":["
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    upload.write_all(&vec![b' '; 16_777_000]).await.unwrap();
    upload.flush().await.unwrap();
    // Wait until the server holds the upload's charge (a request without a body is never
    // charged, so the scrape cannot take the upload's place in the budget).
    let deadline = Instant::now() + Duration::from_secs(20);
    while server.body_bytes_held().await < 16_000_000 {
        assert!(
            Instant::now() < deadline,
            "the upload's charge never showed in sluice_http_request_body_held_bytes"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let send = json!({"QueueUrl": url, "MessageBody": "small"});
    let reply = sqs(&server, "SendMessage", send.clone()).await;
    assert_eq!(code(&reply, 400), "RequestThrottled", "{}", reply.text);
    assert!(
        reply.text.contains("body_bytes_in_flight"),
        "the refusal names the setting: {}",
        reply.text
    );
    drop(upload);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let reply = sqs(&server, "SendMessage", send.clone()).await;
        if reply.status == StatusCode::OK {
            break;
        }
        assert_eq!(code(&reply, 400), "RequestThrottled", "{}", reply.text);
        assert!(
            Instant::now() < deadline,
            "the closed upload's charge never came back"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Every charge, the SQS requests' too, is given back.
    while server.body_bytes_held().await != 0 {
        assert!(Instant::now() < deadline, "charges were never given back");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Proves an SQS request whose body stops arriving is answered after
/// `[limits] body_read_timeout_ms` (and its connection's memory given back), not held open for
/// as long as the client likes.
#[tokio::test]
async fn a_stalled_sqs_body_is_answered_after_the_read_timeout() {
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let server = TestServer::builder()
        .config("[limits]\nbody_read_timeout_ms = 500\n")
        .start()
        .await;
    let address = server.url().trim_start_matches("http://").to_owned();
    let mut stalled = tokio::net::TcpStream::connect(&address).await.unwrap();
    stalled
        .write_all(
            format!(
                "POST / HTTP/1.1\r\nhost: {address}\r\ncontent-type: application/x-amz-json-1.0\r\nx-amz-target: AmazonSQS.ListQueues\r\ncontent-length: 100\r\n\r\n{{\"Queue"
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let mut answer = vec![0u8; 4096];
    let read = tokio::time::timeout(Duration::from_secs(10), stalled.read(&mut answer))
        .await
        .expect("no answer 10 s after the body stalled (the read timeout is 500 ms)")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer[..read]);
    assert!(answer.contains("RequestThrottled"), "{answer}");
    assert!(answer.contains("body_read_timeout_ms"), "{answer}");
}

#[tokio::test]
async fn content_dedup_is_one_rule_for_native_and_sqs_senders() {
    // Proves a body sent natively and through SQS to a content-deduplicated queue is stored
    // once: one content key for every door (issue 32; SQS hashed the body alone, the native
    // API its ordering key and body, so the same message was stored twice). With SQS's default
    // deduplication scope (the queue) the group is left out, as AWS does; with scope
    // `messageGroup` the group is the native ordering key. A standard queue with
    // `dedup = "content"` deduplicates SQS sends as native ones.
    let server = TestServer::builder().start().await;
    sqs_ok(
        &server,
        "CreateQueue",
        json!({"QueueName": "orders.fifo", "Attributes": {"FifoQueue": "true", "ContentBasedDeduplication": "true"}}),
    )
    .await;
    let native = server
        .send("orders.fifo", json!({"body": {"order": 1}}))
        .await;
    for group in ["g1", "g2"] {
        let via_sqs = sqs_ok(
            &server,
            "SendMessage",
            json!({"QueueUrl": "orders.fifo", "MessageBody": r#"{"order":1}"#, "MessageGroupId": group}),
        )
        .await;
        assert_eq!(via_sqs["MessageId"], native["message_id"], "{via_sqs}");
    }
    assert_eq!(server.stats("orders.fifo").await["ready"], 1);

    sqs_ok(
        &server,
        "CreateQueue",
        json!({"QueueName": "by-group.fifo", "Attributes": {"FifoQueue": "true", "ContentBasedDeduplication": "true", "DeduplicationScope": "messageGroup"}}),
    )
    .await;
    let native = server
        .send("by-group.fifo", json!({"body": {"order": 2}, "key": "g1"}))
        .await;
    let same_group = sqs_ok(
        &server,
        "SendMessage",
        json!({"QueueUrl": "by-group.fifo", "MessageBody": r#"{"order":2}"#, "MessageGroupId": "g1"}),
    )
    .await;
    assert_eq!(same_group["MessageId"], native["message_id"]);
    let other_group = sqs_ok(
        &server,
        "SendMessage",
        json!({"QueueUrl": "by-group.fifo", "MessageBody": r#"{"order":2}"#, "MessageGroupId": "g2"}),
    )
    .await;
    assert_ne!(other_group["MessageId"], native["message_id"]);
    assert_eq!(server.stats("by-group.fifo").await["ready"], 2);

    server
        .put_queue("events", json!({"dedup": "content"}))
        .await;
    let native = server.send("events", json!({"body": {"alert": 7}})).await;
    let via_sqs = sqs_ok(
        &server,
        "SendMessage",
        json!({"QueueUrl": "events", "MessageBody": r#"{"alert":7}"#}),
    )
    .await;
    assert_eq!(via_sqs["MessageId"], native["message_id"]);
    assert_eq!(server.stats("events").await["ready"], 1);
}
