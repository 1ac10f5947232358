//! Protocol parity: one list of scenarios, run through every door to a queue (the HTTP API,
//! gRPC unary calls, a gRPC Publish stream, the SQS-compatible API, the Rust SDK's embedded
//! backend), each asserting one outcome. Where a door differs by design, the difference is
//! listed once, in [`differs`], and asserted: a door that stops differing fails here until its
//! entry goes. docs/protocols.md explains each difference.
//!
//! The store conformance suite (`sluice-store-tests`) does the same for stores; this suite is
//! for what a protocol could decide again (a batch's rule, a code, a default) and must not.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use sluice_grpc::v1::{self, publish_response, queues_client::QueuesClient};
use sluice_sdk::Backend;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;

use crate::support::TestServer;

/// The doors, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Door {
    Http,
    Grpc,
    GrpcStream,
    Sqs,
    Embedded,
}

const DOORS: [Door; 5] = [
    Door::Http,
    Door::Grpc,
    Door::GrpcStream,
    Door::Sqs,
    Door::Embedded,
];

/// Each door's difference from the one outcome, by scenario: the outcome the door gives
/// instead. Nothing else may differ.
fn differs(door: Door, scenario: &str) -> Option<Value> {
    use Door::*;
    Some(match (door, scenario) {
        // SQS names its errors as AWS does (docs/sqs.md, "Errors").
        (Sqs, "unknown_queue") => {
            json!({"request": "sqs:AWS.SimpleQueueService.NonExistentQueue"})
        }
        // A Publish stream answers each message on its own, never a request as a whole.
        (GrpcStream, "unknown_queue") => json!({"entries": ["queue_not_found"]}),
        // Idempotency ids on SQS are FIFO deduplication ids: a standard queue refuses them,
        // as AWS does.
        (Sqs, "duplicate_id") => json!({"entries": ["sqs:InvalidParameterValue"]}),
        // Messages answered one by one: a refusal is its message's alone
        // (`Ops::enqueue_each`; SendMessageBatch as AWS documents it).
        (GrpcStream, "schema_refusal_in_a_batch") => json!({
            "entries": ["stored", "schema_violation", "stored"], "depth": 2
        }),
        (Sqs, "schema_refusal_in_a_batch") => json!({
            "entries": ["stored", "sqs:InvalidParameterValue", "stored"], "depth": 2
        }),
        (GrpcStream, "too_large") => json!({"entries": ["too_large"], "depth": 0}),
        (GrpcStream, "queue_full") => json!({"entries": ["queue_full"], "depth": 1}),
        // Backpressure is `RequestThrottled`, which every AWS SDK retries with backoff.
        (Sqs, "queue_full") => json!({"request": "sqs:RequestThrottled", "depth": 1}),
        (Sqs, "too_large") => json!({"entries": ["sqs:InvalidParameterValue"], "depth": 0}),
        // An old receipt handle of a standard queue deletes nothing and answers success, as
        // AWS documents; the message stays with its current holder.
        (Sqs, "fencing") => json!({"old_receipt": "ok", "new_receipt": "ok", "state": "acked"}),
        // SQS has no nack (a failure is a visibility timeout left to run out), no message
        // lookup and no priority.
        (Sqs, "nack_then_dead_letter") => json!({"unsupported": true}),
        (Sqs, "priority") => json!({"first": "low"}),
        _ => return None,
    })
}

/// What a test sends.
#[derive(Debug, Clone, Default)]
struct Msg {
    body: Value,
    id: Option<String>,
    key: Option<String>,
    priority: Option<i32>,
    delay_ms: Option<i64>,
}

fn msg(body: Value) -> Msg {
    Msg {
        body,
        ..Msg::default()
    }
}

/// A stored message's id, or the code its refusal had.
type Entry = Result<String, String>;
/// Each message's answer, or the code of the request's refusal.
type Sent = Result<Vec<Entry>, String>;

/// A delivery, as every door reports it.
#[derive(Debug, Clone)]
struct Got {
    message_id: String,
    body: Value,
    receipt: String,
}

/// One door, open on its own queues.
struct Opened {
    door: Door,
    server: Option<TestServer>,
    grpc: Option<QueuesClient<Channel>>,
    embedded: Option<sluice_sdk::Embedded>,
}

impl Opened {
    async fn open(door: Door) -> Opened {
        if door == Door::Embedded {
            let embedded = sluice_sdk::Embedded::builder()
                .test_clock(SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000))
                .open()
                .await
                .expect("embedded store");
            return Opened {
                door,
                server: None,
                grpc: None,
                embedded: Some(embedded),
            };
        }
        let server = TestServer::builder().test_clock(true).start().await;
        let grpc = match door {
            Door::Grpc | Door::GrpcStream => Some(
                QueuesClient::connect(server.url().to_owned())
                    .await
                    .expect("gRPC connection"),
            ),
            _ => None,
        };
        Opened {
            door,
            server: Some(server),
            grpc,
            embedded: None,
        }
    }

    fn server(&self) -> &TestServer {
        self.server.as_ref().expect("a server door")
    }

    fn embedded(&self) -> &sluice_sdk::Embedded {
        self.embedded.as_ref().expect("the embedded door")
    }

    fn grpc(&self) -> QueuesClient<Channel> {
        self.grpc.clone().expect("a gRPC door")
    }

    /// One HTTP API call: its answer, or its refusal's code.
    async fn http(&self, path: &str, body: Value) -> Result<Value, String> {
        let reply = self.server().post(path, body).await;
        if reply.status.is_success() {
            Ok(reply.json())
        } else {
            Err(reply.json()["error"]["code"]
                .as_str()
                .unwrap_or("?")
                .to_owned())
        }
    }

    /// Defines a queue (not a door's concern here: every door defines it the same way).
    async fn define(&self, queue: &str, spec: Value) {
        match self.door {
            Door::Embedded => {
                let spec: sluice_wire::QueueSpec =
                    serde_json::from_value(spec).expect("a queue spec");
                let config = sluice_core::queue::QueueConfig::defaults_for(queue)
                    .apply(&spec)
                    .expect("a valid spec");
                self.embedded()
                    .put_queue(queue, config)
                    .await
                    .expect("queue defined");
            }
            _ => {
                self.server().put_queue(queue, spec).await;
            }
        }
    }

    /// Sends `messages` as one request (one by one on a Publish stream).
    async fn send(&self, queue: &str, messages: Vec<Msg>) -> Sent {
        match self.door {
            Door::Http => {
                let messages: Vec<Value> = messages.iter().map(http_message).collect();
                let answer = self
                    .http(
                        &format!("/v1/queues/{queue}/messages"),
                        json!({ "messages": messages }),
                    )
                    .await?;
                Ok(answer["results"]
                    .as_array()
                    .expect("results")
                    .iter()
                    .map(|result| Ok(result["message_id"].as_str().unwrap().to_owned()))
                    .collect())
            }
            Door::Grpc => {
                let request = v1::EnqueueRequest {
                    queue: queue.to_owned(),
                    messages: messages.iter().map(grpc_message).collect(),
                };
                match self.grpc().enqueue(request).await {
                    Ok(answer) => Ok(answer
                        .into_inner()
                        .results
                        .into_iter()
                        .map(|result| Ok(result.message_id))
                        .collect()),
                    Err(status) => Err(grpc_code(&status)),
                }
            }
            Door::GrpcStream => {
                let (sender, outbound) = mpsc::channel(messages.len().max(1));
                for (seq, message) in messages.iter().enumerate() {
                    sender
                        .send(v1::PublishRequest {
                            seq: seq as u64,
                            queue: queue.to_owned(),
                            message: Some(grpc_message(message)),
                        })
                        .await
                        .expect("queued");
                }
                drop(sender);
                let mut answers = self
                    .grpc()
                    .publish(ReceiverStream::new(outbound))
                    .await
                    .expect("publish stream")
                    .into_inner();
                let mut entries = BTreeMap::new();
                while entries.len() < messages.len() {
                    let answer = tokio::time::timeout(Duration::from_secs(10), answers.message())
                        .await
                        .expect("an answer in time")
                        .expect("a healthy stream")
                        .expect("an open stream");
                    let entry = match answer.outcome.expect("an outcome") {
                        publish_response::Outcome::Enqueued(enqueued) => Ok(enqueued.message_id),
                        publish_response::Outcome::Error(error) => Err(error.code),
                    };
                    entries.insert(answer.seq, entry);
                }
                Ok(entries.into_values().collect())
            }
            Door::Sqs => {
                let entries: Vec<Value> = messages
                    .iter()
                    .enumerate()
                    .map(|(index, message)| {
                        let mut entry = json!({
                            "Id": format!("m{index}"),
                            "MessageBody": message.body.to_string(),
                        });
                        if let Some(id) = &message.id {
                            entry["MessageDeduplicationId"] = json!(id);
                        }
                        if let Some(key) = &message.key {
                            entry["MessageGroupId"] = json!(key);
                        }
                        if let Some(delay_ms) = message.delay_ms {
                            entry["DelaySeconds"] = json!(delay_ms / 1000);
                        }
                        entry
                    })
                    .collect();
                let reply = sqs(
                    self.server(),
                    "SendMessageBatch",
                    json!({"QueueUrl": queue, "Entries": entries}),
                )
                .await?;
                let mut by_entry = BTreeMap::new();
                for ok in reply["Successful"].as_array().into_iter().flatten() {
                    by_entry.insert(
                        ok["Id"].as_str().unwrap().to_owned(),
                        Ok(ok["MessageId"].as_str().unwrap().to_owned()),
                    );
                }
                for failed in reply["Failed"].as_array().into_iter().flatten() {
                    by_entry.insert(
                        failed["Id"].as_str().unwrap().to_owned(),
                        Err(format!("sqs:{}", failed["Code"].as_str().unwrap())),
                    );
                }
                Ok((0..messages.len())
                    .map(|index| by_entry.remove(&format!("m{index}")).expect("every entry"))
                    .collect())
            }
            Door::Embedded => {
                let outgoing = messages
                    .iter()
                    .map(|message| sluice_sdk::Outgoing {
                        body: message.body.to_string().into_bytes(),
                        id: message.id.clone(),
                        key: message.key.clone(),
                        priority: message.priority.unwrap_or(0),
                        delay: message.delay_ms.map(|ms| Duration::from_millis(ms as u64)),
                    })
                    .collect();
                match self.embedded().enqueue(queue, outgoing).await {
                    Ok(results) => Ok(results
                        .into_iter()
                        .map(|result| Ok(result.message_id.to_string()))
                        .collect()),
                    Err(error) => Err(sdk_code(&error)),
                }
            }
        }
    }

    /// Receives up to 10 messages at once under a lease of `lease_ms`.
    async fn receive(&self, queue: &str, lease_ms: i64) -> Vec<Got> {
        match self.door {
            Door::Http => self
                .server()
                .receive(queue, json!({"max": 10, "visibility_timeout_ms": lease_ms}))
                .await
                .into_iter()
                .map(|message| Got {
                    message_id: message["message_id"].as_str().unwrap().to_owned(),
                    body: message["body"].clone(),
                    receipt: message["receipt"].as_str().unwrap().to_owned(),
                })
                .collect(),
            Door::Grpc | Door::GrpcStream => self
                .grpc()
                .receive(v1::ReceiveRequest {
                    queue: queue.to_owned(),
                    max: Some(10),
                    wait_ms: None,
                    visibility_timeout_ms: Some(lease_ms),
                })
                .await
                .expect("receive")
                .into_inner()
                .messages
                .into_iter()
                .map(|delivery| Got {
                    message_id: delivery.message_id,
                    body: match delivery.body {
                        Some(v1::delivery::Body::Json(text)) => {
                            serde_json::from_str(&text).expect("JSON")
                        }
                        other => panic!("not a JSON body: {other:?}"),
                    },
                    receipt: delivery.receipt,
                })
                .collect(),
            Door::Sqs => {
                let answer = sqs(
                    self.server(),
                    "ReceiveMessage",
                    json!({
                        "QueueUrl": queue,
                        "MaxNumberOfMessages": 10,
                        "VisibilityTimeout": lease_ms / 1000,
                    }),
                )
                .await
                .expect("ReceiveMessage");
                answer["Messages"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|message| Got {
                        message_id: message["MessageId"].as_str().unwrap().to_owned(),
                        body: serde_json::from_str(message["Body"].as_str().unwrap())
                            .expect("JSON"),
                        receipt: message["ReceiptHandle"].as_str().unwrap().to_owned(),
                    })
                    .collect()
            }
            Door::Embedded => self
                .embedded()
                .receive(
                    queue,
                    10,
                    Duration::from_millis(lease_ms as u64),
                    Duration::ZERO,
                )
                .await
                .expect("lease")
                .into_iter()
                .map(|delivery| Got {
                    message_id: delivery.message_id.to_string(),
                    body: serde_json::from_slice(&delivery.body).expect("JSON"),
                    receipt: delivery.receipt,
                })
                .collect(),
        }
    }

    async fn ack(&self, queue: &str, receipt: &str) -> Result<(), String> {
        match self.door {
            Door::Http => self
                .http(
                    &format!("/v1/queues/{queue}/ack"),
                    json!({ "receipt": receipt }),
                )
                .await
                .map(drop),
            Door::Grpc | Door::GrpcStream => self
                .grpc()
                .ack(v1::AckRequest {
                    queue: queue.to_owned(),
                    receipts: vec![receipt.to_owned()],
                    ..Default::default()
                })
                .await
                .map(drop)
                .map_err(|status| grpc_code(&status)),
            Door::Sqs => sqs(
                self.server(),
                "DeleteMessage",
                json!({"QueueUrl": queue, "ReceiptHandle": receipt}),
            )
            .await
            .map(drop),
            Door::Embedded => self
                .embedded()
                .ack(queue, receipt)
                .await
                .map_err(|error| sdk_code(&error)),
        }
    }

    /// Nacks with `error`; `None` where the door has no nack.
    async fn nack(&self, queue: &str, receipt: &str, error: &str) -> Option<Result<(), String>> {
        Some(match self.door {
            Door::Http => self
                .http(
                    &format!("/v1/queues/{queue}/nack"),
                    json!({ "receipt": receipt, "error": error }),
                )
                .await
                .map(drop),
            Door::Grpc | Door::GrpcStream => self
                .grpc()
                .nack(v1::NackRequest {
                    queue: queue.to_owned(),
                    receipt: receipt.to_owned(),
                    error: Some(error.to_owned()),
                    ..Default::default()
                })
                .await
                .map(drop)
                .map_err(|status| grpc_code(&status)),
            Door::Sqs => return None,
            Door::Embedded => self
                .embedded()
                .nack(
                    queue,
                    receipt,
                    sluice_sdk::Nack {
                        error: error.to_owned(),
                        ..Default::default()
                    },
                )
                .await
                .map(drop)
                .map_err(|error| sdk_code(&error)),
        })
    }

    /// A message's state and last error, as the door reports it (SQS has no lookup: the
    /// native API's answer stands in, the queues being shared).
    async fn state(&self, queue: &str, message_id: &str) -> (String, Option<String>) {
        match self.door {
            Door::Grpc | Door::GrpcStream => {
                let status = self
                    .grpc()
                    .get_message(v1::GetMessageRequest {
                        queue: queue.to_owned(),
                        by: Some(v1::get_message_request::By::MessageId(
                            message_id.to_owned(),
                        )),
                    })
                    .await
                    .expect("GetMessage")
                    .into_inner();
                (status.state, status.last_error)
            }
            Door::Embedded => {
                let id = message_id.parse().expect("a message id");
                let info = self
                    .embedded()
                    .get(queue, sluice_sdk::MessageRef::Id(id))
                    .await
                    .expect("get")
                    .expect("found");
                (info.state, info.last_error)
            }
            Door::Http | Door::Sqs => {
                let status = self.server().message_status(queue, message_id).await;
                (
                    status["state"].as_str().unwrap().to_owned(),
                    status["last_error"].as_str().map(str::to_owned),
                )
            }
        }
    }

    /// Ready plus delayed plus in flight.
    async fn depth(&self, queue: &str) -> u64 {
        match self.door {
            Door::Embedded => {
                let stats = self.embedded().stats(queue).await.expect("stats");
                stats.ready + stats.delayed + stats.in_flight.unwrap_or(0)
            }
            _ => {
                let stats = self.server().stats(queue).await;
                ["ready", "delayed", "in_flight"]
                    .iter()
                    .map(|field| stats[field].as_u64().unwrap())
                    .sum()
            }
        }
    }

    async fn advance(&self, ms: i64) {
        match self.door {
            Door::Embedded => {
                self.embedded()
                    .advance(Duration::from_millis(ms as u64))
                    .await;
            }
            _ => {
                self.server().advance_clock(ms).await;
            }
        }
    }
}

fn http_message(message: &Msg) -> Value {
    let mut out = json!({ "body": message.body });
    if let Some(id) = &message.id {
        out["id"] = json!(id);
    }
    if let Some(key) = &message.key {
        out["key"] = json!(key);
    }
    if let Some(priority) = message.priority {
        out["priority"] = json!(priority);
    }
    if let Some(delay_ms) = message.delay_ms {
        out["delay_ms"] = json!(delay_ms);
    }
    out
}

fn grpc_message(message: &Msg) -> v1::OutgoingMessage {
    v1::OutgoingMessage {
        body: Some(v1::outgoing_message::Body::Json(message.body.to_string())),
        id: message.id.clone(),
        key: message.key.clone(),
        priority: message.priority,
        delay_ms: message.delay_ms,
        ..Default::default()
    }
}

fn grpc_code(status: &tonic::Status) -> String {
    status
        .metadata()
        .get(sluice_grpc::ERROR_CODE_TRAILER)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("?")
        .to_owned()
}

fn sdk_code(error: &sluice_sdk::Error) -> String {
    use sluice_sdk::Error;
    match error {
        Error::QueueNotFound(_) => "queue_not_found".into(),
        Error::QueueFull { .. } => "queue_full".into(),
        Error::StaleLease(_) => "stale_receipt".into(),
        Error::Invalid { code, .. } | Error::Other { code, .. } => code.as_str().to_owned(),
        other => format!("sdk:{other}"),
    }
}

/// One SQS JSON request: the answer, or `sqs:<code>` of its refusal.
async fn sqs(server: &TestServer, action: &str, body: Value) -> Result<Value, String> {
    let reply = crate::sqs::sqs(server, action, body).await;
    if reply.status.is_success() {
        return Ok(serde_json::from_str(&reply.text).unwrap_or(Value::Null));
    }
    let code = reply
        .header("x-amzn-query-error")
        .and_then(|value| value.split(';').next())
        .unwrap_or(&reply.text);
    Err(format!("sqs:{code}"))
}

/// The stored/refused shape of a send: per entry when the door answered per entry.
fn sent_shape(sent: &Sent) -> Value {
    match sent {
        Err(code) => json!({ "request": code }),
        Ok(entries) => json!({
            "entries": entries
                .iter()
                .map(|entry| match entry {
                    Ok(_) => "stored".to_owned(),
                    Err(code) => code.clone(),
                })
                .collect::<Vec<_>>()
        }),
    }
}

fn stored_ids(sent: &Sent) -> Vec<String> {
    sent.as_ref()
        .expect("stored")
        .iter()
        .map(|entry| entry.clone().expect("stored"))
        .collect()
}

// ---- the scenarios: each returns its outcome ------------------------------------------------

async fn unknown_queue(door: &Opened) -> Value {
    sent_shape(&door.send("nope", vec![msg(json!({"n": 1}))]).await)
}

async fn duplicate_id(door: &Opened) -> Value {
    door.define("q", json!({})).await;
    let with_id = Msg {
        id: Some("order-1".into()),
        ..msg(json!({"n": 1}))
    };
    let first = door.send("q", vec![with_id.clone()]).await;
    if first
        .as_ref()
        .map_or(true, |entries| entries.iter().any(Result::is_err))
    {
        return sent_shape(&first);
    }
    let again = door.send("q", vec![with_id]).await;
    json!({
        "same_message": stored_ids(&first) == stored_ids(&again),
        "depth": door.depth("q").await,
    })
}

async fn content_dedup(door: &Opened) -> Value {
    door.define("q", json!({"dedup": "content"})).await;
    let first = door
        .send("q", vec![msg(json!({"alert": "disk full"}))])
        .await;
    let again = door
        .send("q", vec![msg(json!({"alert": "disk full"}))])
        .await;
    let other = door.send("q", vec![msg(json!({"alert": "cpu"}))]).await;
    json!({
        "same_message": stored_ids(&first) == stored_ids(&again),
        "other_is_new": stored_ids(&first) != stored_ids(&other),
        "depth": door.depth("q").await,
    })
}

async fn schema_refusal_in_a_batch(door: &Opened) -> Value {
    let schema = json!({
        "type": "object",
        "required": ["n"],
        "properties": {"n": {"type": "integer"}},
    });
    door.define("q", json!({ "schema": schema })).await;
    let sent = door
        .send(
            "q",
            vec![
                msg(json!({"n": 1})),
                msg(json!({"n": "two"})),
                msg(json!({"n": 3})),
            ],
        )
        .await;
    let mut outcome = sent_shape(&sent);
    outcome["depth"] = json!(door.depth("q").await);
    outcome
}

async fn too_large(door: &Opened) -> Value {
    door.define("q", json!({"max_message_bytes": 1024})).await;
    let sent = door
        .send("q", vec![msg(json!({"pad": "x".repeat(2000)}))])
        .await;
    let mut outcome = sent_shape(&sent);
    outcome["depth"] = json!(door.depth("q").await);
    outcome
}

async fn queue_full(door: &Opened) -> Value {
    door.define("q", json!({"max_depth": 1})).await;
    door.send("q", vec![msg(json!({"n": 1}))])
        .await
        .expect("stored");
    let mut outcome = sent_shape(&door.send("q", vec![msg(json!({"n": 2}))]).await);
    outcome["depth"] = json!(door.depth("q").await);
    outcome
}

async fn delay(door: &Opened) -> Value {
    door.define("q", json!({})).await;
    let delayed = Msg {
        delay_ms: Some(5_000),
        ..msg(json!({"n": 1}))
    };
    door.send("q", vec![delayed]).await.expect("stored");
    let before = door.receive("q", 30_000).await.len();
    door.advance(5_000).await;
    let after = door.receive("q", 30_000).await.len();
    json!({ "before": before, "after": after })
}

async fn per_key_order(door: &Opened) -> Value {
    door.define("q", json!({"ordering": "per_key"})).await;
    let keyed = |n: i64, key: &str| Msg {
        key: Some(key.to_owned()),
        ..msg(json!({ "n": n }))
    };
    door.send("q", vec![keyed(1, "a"), keyed(2, "a"), keyed(3, "b")])
        .await
        .expect("stored");
    let first = door.receive("q", 30_000).await;
    let mut first_bodies: Vec<i64> = first
        .iter()
        .map(|got| got.body["n"].as_i64().unwrap())
        .collect();
    first_bodies.sort_unstable();
    let one = first
        .iter()
        .find(|got| got.body["n"] == 1)
        .expect("the first of key a");
    door.ack("q", &one.receipt).await.expect("acked");
    let next: Vec<i64> = door
        .receive("q", 30_000)
        .await
        .iter()
        .map(|got| got.body["n"].as_i64().unwrap())
        .collect();
    json!({ "first": first_bodies, "after_ack": next })
}

async fn fencing(door: &Opened) -> Value {
    door.define("q", json!({})).await;
    door.send("q", vec![msg(json!({"n": 1}))])
        .await
        .expect("stored");
    let first = door.receive("q", 1_000).await;
    door.advance(1_500).await;
    let second = door.receive("q", 30_000).await;
    assert_eq!(
        second.len(),
        1,
        "{door:?}: delivered again after the lease",
        door = door.door
    );
    let old = door.ack("q", &first[0].receipt).await;
    let new = door.ack("q", &second[0].receipt).await;
    let (state, _) = door.state("q", &second[0].message_id).await;
    let shown = |result: Result<(), String>| result.err().unwrap_or_else(|| "ok".to_owned());
    json!({ "old_receipt": shown(old), "new_receipt": shown(new), "state": state })
}

async fn nack_then_dead_letter(door: &Opened) -> Value {
    door.define(
        "q",
        json!({"max_attempts": 2, "backoff": {"initial_ms": 1000, "max_ms": 1000}}),
    )
    .await;
    let sent = door.send("q", vec![msg(json!({"n": 1}))]).await;
    let id = stored_ids(&sent).remove(0);
    let got = door.receive("q", 30_000).await;
    let Some(first) = door.nack("q", &got[0].receipt, "boom 1").await else {
        return json!({"unsupported": true});
    };
    first.expect("nacked");
    let (after_first, _) = door.state("q", &id).await;
    door.advance(1_000).await;
    let got = door.receive("q", 30_000).await;
    door.nack("q", &got[0].receipt, "boom 2")
        .await
        .expect("a nack")
        .expect("nacked");
    let (after_second, last_error) = door.state("q", &id).await;
    json!({
        "after_first": after_first,
        "after_second": after_second,
        "last_error": last_error,
        "depth": door.depth("q").await,
    })
}

async fn priority(door: &Opened) -> Value {
    door.define("q", json!({})).await;
    let low = msg(json!({"p": "low"}));
    let high = Msg {
        priority: Some(5),
        ..msg(json!({"p": "high"}))
    };
    door.send("q", vec![low]).await.expect("stored");
    door.send("q", vec![high]).await.expect("stored");
    let got = door.receive("q", 30_000).await;
    json!({ "first": got[0].body["p"] })
}

/// Runs `scenario` through every door; every door's outcome is the one of the HTTP API, or
/// its listed difference.
macro_rules! parity {
    ($scenario:ident, $expected:expr) => {
        #[tokio::test]
        async fn $scenario() {
            let expected: Value = $expected;
            let mut wrong = Vec::new();
            for door in DOORS {
                let opened = Opened::open(door).await;
                let got = super::$scenario(&opened).await;
                let want = differs(door, stringify!($scenario)).unwrap_or_else(|| expected.clone());
                if got != want {
                    wrong.push(format!("{door:?}: got {got}, want {want}"));
                }
            }
            assert!(
                wrong.is_empty(),
                "{}: doors differ beyond their listed differences:\n{}",
                stringify!($scenario),
                wrong.join("\n")
            );
        }
    };
}

mod scenarios {
    use super::*;

    parity!(unknown_queue, json!({"request": "queue_not_found"}));
    parity!(duplicate_id, json!({"same_message": true, "depth": 1}));
    parity!(
        content_dedup,
        json!({"same_message": true, "other_is_new": true, "depth": 2})
    );
    parity!(
        schema_refusal_in_a_batch,
        json!({"request": "schema_violation", "depth": 0})
    );
    parity!(too_large, json!({"request": "too_large", "depth": 0}));
    parity!(queue_full, json!({"request": "queue_full", "depth": 1}));
    parity!(delay, json!({"before": 0, "after": 1}));
    parity!(per_key_order, json!({"first": [1, 3], "after_ack": [2]}));
    parity!(
        fencing,
        json!({"old_receipt": "stale_receipt", "new_receipt": "ok", "state": "acked"})
    );
    parity!(
        nack_then_dead_letter,
        json!({
            "after_first": "delayed",
            "after_second": "dead",
            "last_error": "boom 2",
            "depth": 0,
        })
    );
    parity!(priority, json!({"first": "high"}));
}
