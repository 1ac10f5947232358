//! The gRPC API (docs/grpc.md) against the real binary: the publish and pull streams, the unary
//! calls, errors as statuses with the sluice code, access control, durability of a publish
//! answer, and the HTTP/2 connection rules of the shared listener.

use std::collections::HashSet;
use std::time::Duration;

use serde_json::{Value, json};
use sluice_grpc::v1::queues_client::QueuesClient;
use sluice_grpc::v1::{self, publish_response, pull_request, pull_response};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;
use tonic::{Code, Request, Status, Streaming};

use crate::support::TestServer;
use crate::support::tokens::{self, ADMIN, CONSUMER_A, PRODUCER_A};

/// Longest wait for one answer on a stream.
const ANSWER_WAIT: Duration = Duration::from_secs(10);

/// Sends `authorization: Bearer <token>` when there is a token.
#[derive(Clone)]
struct Token(Option<String>);

impl Interceptor for Token {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        if let Some(token) = &self.0 {
            request.metadata_mut().insert(
                "authorization",
                format!("Bearer {token}").parse().expect("ascii"),
            );
        }
        Ok(request)
    }
}

type Client = QueuesClient<InterceptedService<Channel, Token>>;

async fn client(server: &TestServer, token: Option<&str>) -> Client {
    let channel = Channel::from_shared(server.url().to_owned())
        .expect("url")
        .connect()
        .await
        .expect("gRPC connection");
    QueuesClient::with_interceptor(channel, Token(token.map(str::to_owned)))
}

fn json_message(body: &str) -> v1::OutgoingMessage {
    v1::OutgoingMessage {
        body: Some(v1::outgoing_message::Body::Json(body.to_owned())),
        ..Default::default()
    }
}

fn publish(seq: u64, queue: &str, message: v1::OutgoingMessage) -> v1::PublishRequest {
    v1::PublishRequest {
        seq,
        queue: queue.to_owned(),
        message: Some(message),
    }
}

/// The sluice code of a refused call, from its trailer.
fn sluice_code(status: &Status) -> &str {
    status
        .metadata()
        .get(sluice_grpc::ERROR_CODE_TRAILER)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("")
}

async fn next<T>(stream: &mut Streaming<T>) -> T {
    tokio::time::timeout(ANSWER_WAIT, stream.message())
        .await
        .expect("an answer in time")
        .expect("the stream is healthy")
        .expect("the stream is open")
}

/// Publishes `count` messages on one stream, all in flight at once; answers by seq.
async fn publish_all(
    client: &mut Client,
    requests: Vec<v1::PublishRequest>,
) -> Vec<v1::PublishResponse> {
    let count = requests.len();
    let (sender, outbound) = mpsc::channel(count.max(1));
    for request in requests {
        sender.send(request).await.expect("queued");
    }
    drop(sender);
    let mut answers = client
        .publish(ReceiverStream::new(outbound))
        .await
        .expect("publish stream")
        .into_inner();
    let mut got = Vec::with_capacity(count);
    while got.len() < count {
        got.push(next(&mut answers).await);
    }
    // Every message answered, and the stream ends once the client is done.
    let end = tokio::time::timeout(ANSWER_WAIT, answers.message()).await;
    assert!(matches!(end, Ok(Ok(None))), "stream end: {end:?}");
    got.sort_by_key(|answer| answer.seq);
    got
}

fn enqueued(answer: &v1::PublishResponse) -> &v1::Enqueued {
    match &answer.outcome {
        Some(publish_response::Outcome::Enqueued(enqueued)) => enqueued,
        other => panic!("seq {} was not stored: {other:?}", answer.seq),
    }
}

fn refused(answer: &v1::PublishResponse) -> &v1::Error {
    match &answer.outcome {
        Some(publish_response::Outcome::Error(error)) => error,
        other => panic!("seq {} was not refused: {other:?}", answer.seq),
    }
}

/// A pull stream: the sender for credit and settles, and the server's answers.
struct Pull {
    requests: mpsc::Sender<v1::PullRequest>,
    answers: Streaming<v1::PullResponse>,
}

async fn pull(client: &mut Client, queue: &str, credit: u32, lease_ms: Option<i64>) -> Pull {
    let (requests, outbound) = mpsc::channel(1024);
    requests
        .send(v1::PullRequest {
            request: Some(pull_request::Request::Start(v1::PullStart {
                queue: queue.to_owned(),
                credit,
                visibility_timeout_ms: lease_ms,
            })),
        })
        .await
        .expect("start");
    let answers = client
        .pull(ReceiverStream::new(outbound))
        .await
        .expect("pull stream")
        .into_inner();
    Pull { requests, answers }
}

impl Pull {
    async fn send(&self, request: pull_request::Request) {
        self.requests
            .send(v1::PullRequest {
                request: Some(request),
            })
            .await
            .expect("stream open");
    }

    async fn next(&mut self) -> pull_response::Response {
        next(&mut self.answers).await.response.expect("a response")
    }

    /// Reads until `count` messages came, answering nothing else.
    async fn deliveries(&mut self, count: usize) -> Vec<v1::Delivery> {
        let mut got = Vec::new();
        while got.len() < count {
            match self.next().await {
                pull_response::Response::Messages(batch) => got.extend(batch.messages),
                other => panic!("expected messages, got {other:?}"),
            }
        }
        got
    }

    /// Nothing arrives for `quiet`.
    async fn is_quiet(&mut self, quiet: Duration) -> bool {
        tokio::time::timeout(quiet, self.answers.message())
            .await
            .is_err()
    }
}

#[tokio::test]
async fn publish_stream_stores_in_order_and_pull_stream_keeps_to_its_credit() {
    // 2,000 messages go out on one stream with every one in flight; each is answered once,
    // created, in the order sent (positions rise with seq, so batches were stored one after
    // another). A pull stream granted 50 gets exactly 50 until it grants more; acks on the
    // stream settle every message, and the HTTP API sees the queue empty with 2,000 acks.
    let server = TestServer::builder().start().await;
    server.put_queue("grpc-orders", json!({})).await;
    let mut client = client(&server, None).await;
    let requests = (0..2000)
        .map(|seq| {
            publish(
                seq,
                "grpc-orders",
                json_message(&format!("{{\"n\":{seq}}}")),
            )
        })
        .collect();
    let answers = publish_all(&mut client, requests).await;
    let mut ids = HashSet::new();
    let mut last_position = None;
    for (seq, answer) in answers.iter().enumerate() {
        assert_eq!(answer.seq, seq as u64, "each seq answered once");
        let stored = enqueued(answer);
        assert!(stored.created);
        assert!(ids.insert(stored.message_id.clone()));
        let position = stored.position.expect("a position");
        assert!(
            last_position.is_none_or(|last| position > last),
            "seq {seq} stored before an earlier one"
        );
        last_position = Some(position);
    }

    let mut stream = pull(&mut client, "grpc-orders", 50, None).await;
    let first = stream.deliveries(50).await;
    assert_eq!(first.len(), 50, "one credit per message");
    assert!(
        stream.is_quiet(Duration::from_millis(500)).await,
        "nothing beyond the credit"
    );
    stream.send(pull_request::Request::Credit(1950)).await;
    let mut all = first;
    all.extend(stream.deliveries(1950).await);
    let bodies: HashSet<String> = all
        .iter()
        .map(|m| match &m.body {
            Some(v1::delivery::Body::Json(text)) => text.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(bodies.len(), 2000);
    for (request_id, message) in all.iter().enumerate() {
        assert_eq!(message.attempt, 1);
        stream
            .send(pull_request::Request::Ack(v1::PullAck {
                request_id: request_id as u64,
                receipts: vec![message.receipt.clone()],
                result_json: None,
                then: Vec::new(),
            }))
            .await;
    }
    let mut settled = HashSet::new();
    while settled.len() < 2000 {
        match stream.next().await {
            pull_response::Response::Settled(v1::Settled {
                request_id,
                outcome: Some(v1::settled::Outcome::Acked(ack)),
            }) => {
                assert_eq!(ack.acked, 1);
                assert!(settled.insert(request_id));
            }
            other => panic!("expected an ack's answer, got {other:?}"),
        }
    }
    let stats = server.stats("grpc-orders").await;
    assert_eq!(stats["ready"], 0);
    assert_eq!(stats["in_flight"], 0);
    assert_eq!(stats["counters"]["acked"], 2000);
}

#[tokio::test]
async fn one_refused_message_does_not_stop_the_stream() {
    // Inside a publish stream, a message for a missing queue, a body that is not JSON and a
    // key too long are each refused with their sluice code; the messages around them are
    // stored.
    let server = TestServer::builder().start().await;
    server.put_queue("grpc-mixed", json!({})).await;
    let mut client = client(&server, None).await;
    let long_key = v1::OutgoingMessage {
        key: Some("k".repeat(10_000)),
        ..json_message("{}")
    };
    let answers = publish_all(
        &mut client,
        vec![
            publish(0, "grpc-mixed", json_message("{\"ok\":0}")),
            publish(1, "no-such-queue", json_message("{}")),
            publish(2, "grpc-mixed", json_message("{not json")),
            publish(3, "grpc-mixed", long_key),
            publish(4, "grpc-mixed", json_message("{\"ok\":4}")),
        ],
    )
    .await;
    assert!(enqueued(&answers[0]).created);
    assert_eq!(refused(&answers[1]).code, "queue_not_found");
    assert_eq!(refused(&answers[2]).code, "invalid_field");
    assert!(
        refused(&answers[2]).message.contains("body"),
        "{:?}",
        answers[2]
    );
    assert_eq!(refused(&answers[3]).code, "invalid_field");
    assert!(enqueued(&answers[4]).created);
    assert_eq!(server.stats("grpc-mixed").await["ready"], 2);
}

#[tokio::test]
async fn unary_calls_keep_the_http_rules_and_refusals_carry_the_sluice_code() {
    // The unary calls run the same operations as HTTP: an idempotency key dedups (the second
    // answer names the first message), a stale receipt is FAILED_PRECONDITION with
    // `stale_receipt`, a missing queue NOT_FOUND with `queue_not_found`, a bad limit
    // INVALID_ARGUMENT with `invalid_field`, and a nack past max_attempts dead-letters.
    let server = TestServer::builder().start().await;
    let mut client = client(&server, None).await;
    let put = client
        .put_queue(v1::PutQueueRequest {
            name: "grpc-unary".into(),
            settings_json: r#"{"max_attempts": 1}"#.into(),
        })
        .await
        .expect("put")
        .into_inner();
    assert!(put.created);
    let settings: serde_json::Value =
        serde_json::from_str(&put.queue.expect("queue").queue_json).expect("json");
    assert_eq!(settings["config"]["max_attempts"], 1, "{settings}");

    let keyed = v1::OutgoingMessage {
        id: Some("order-1".into()),
        ..json_message("{\"order\":1}")
    };
    let first = client
        .enqueue(v1::EnqueueRequest {
            queue: "grpc-unary".into(),
            messages: vec![keyed.clone()],
        })
        .await
        .expect("enqueue")
        .into_inner();
    let again = client
        .enqueue(v1::EnqueueRequest {
            queue: "grpc-unary".into(),
            messages: vec![keyed],
        })
        .await
        .expect("enqueue")
        .into_inner();
    assert!(first.results[0].created);
    assert!(!again.results[0].created);
    assert_eq!(first.results[0].message_id, again.results[0].message_id);
    let counters = &server.stats("grpc-unary").await["counters"];
    assert_eq!(
        counters["deduplicated"], 1,
        "an idempotency hit: {counters}"
    );

    let received = client
        .receive(v1::ReceiveRequest {
            queue: "grpc-unary".into(),
            max: Some(10),
            wait_ms: Some(0),
            visibility_timeout_ms: None,
        })
        .await
        .expect("receive")
        .into_inner()
        .messages;
    assert_eq!(received.len(), 1);
    let receipt = received[0].receipt.clone();
    let nacked = client
        .nack(v1::NackRequest {
            queue: "grpc-unary".into(),
            receipt: receipt.clone(),
            error: Some("boom".into()),
            delay_ms: None,
            permanent: false,
        })
        .await
        .expect("nack")
        .into_inner();
    assert_eq!(nacked.state, "dead");

    let stale = client
        .ack(v1::AckRequest {
            queue: "grpc-unary".into(),
            receipts: vec![receipt],
            result_json: None,
            then: Vec::new(),
        })
        .await
        .expect_err("a stale receipt");
    assert_eq!(stale.code(), Code::FailedPrecondition, "{stale:?}");
    assert_eq!(sluice_code(&stale), "stale_receipt");

    let missing = client
        .receive(v1::ReceiveRequest {
            queue: "no-such-queue".into(),
            ..Default::default()
        })
        .await
        .expect_err("a missing queue");
    assert_eq!(missing.code(), Code::NotFound);
    assert_eq!(sluice_code(&missing), "queue_not_found");

    let bad = client
        .receive(v1::ReceiveRequest {
            queue: "grpc-unary".into(),
            max: Some(100_000),
            ..Default::default()
        })
        .await
        .expect_err("max out of range");
    assert_eq!(bad.code(), Code::InvalidArgument);
    assert_eq!(sluice_code(&bad), "invalid_field");
    assert!(bad.message().contains("max"), "{bad:?}");

    let dead = client
        .list_dead_letters(v1::ListDeadLettersRequest {
            queue: "grpc-unary".into(),
            ..Default::default()
        })
        .await
        .expect("dead letters")
        .into_inner();
    assert_eq!(dead.entries.len(), 1);
    assert_eq!(dead.entries[0].last_error.as_deref(), Some("boom"));
    assert_eq!(dead.entries[0].message_id, first.results[0].message_id);
    assert_eq!(
        dead.entries[0].body,
        Some(v1::dead_letter::Body::Json("{\"order\":1}".into())),
        "a dead letter comes with its body"
    );
    let status = client
        .get_message(v1::GetMessageRequest {
            queue: "grpc-unary".into(),
            by: Some(v1::get_message_request::By::Id("order-1".into())),
        })
        .await
        .expect("status")
        .into_inner();
    assert_eq!(status.state, "dead");
}

#[tokio::test]
async fn a_broken_pull_stream_leaves_its_leases_to_expire() {
    // A message sent on a pull stream whose client then goes away is not acked: when its lease
    // runs out (on the test clock) it is delivered again, as attempt 2.
    let server = TestServer::builder().test_clock(true).start().await;
    server.put_queue("grpc-lease", json!({})).await;
    server.send("grpc-lease", json!({"body": {"n": 1}})).await;
    let mut client = client(&server, None).await;
    let mut stream = pull(&mut client, "grpc-lease", 1, Some(5_000)).await;
    assert_eq!(stream.deliveries(1).await.len(), 1);
    drop(stream);
    assert!(
        server
            .receive("grpc-lease", json!({"max": 1}))
            .await
            .is_empty()
    );
    server.advance_clock(6_000).await;
    let again = server.receive("grpc-lease", json!({"max": 1})).await;
    assert_eq!(again.len(), 1);
    assert_eq!(again[0]["attempts"], 2);
}

#[tokio::test]
async fn a_publish_answer_survives_sigkill() {
    // Every message answered on the publish stream is on disk: after SIGKILL and a restart,
    // all 1,000 are there.
    let mut server = TestServer::builder().start().await;
    server.put_queue("grpc-durable", json!({})).await;
    let mut client = client(&server, None).await;
    let requests = (0..1000)
        .map(|seq| publish(seq, "grpc-durable", json_message("{}")))
        .collect();
    let answers = publish_all(&mut client, requests).await;
    assert!(answers.iter().all(|answer| enqueued(answer).created));
    server.kill().await;
    server.restart().await;
    assert_eq!(server.stats("grpc-durable").await["ready"], 1000);
}

#[tokio::test]
async fn a_pull_stream_waiting_for_messages_is_not_idle() {
    // The idle timer closes connections with no request open; a pull stream waiting longer than
    // that for its first message is open, so it gets the message published later.
    let server = TestServer::builder()
        .config("[limits]\nheader_read_timeout_ms = 300\n")
        .start()
        .await;
    server.put_queue("grpc-wait", json!({})).await;
    let mut client = client(&server, None).await;
    let mut stream = pull(&mut client, "grpc-wait", 10, None).await;
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    server
        .send("grpc-wait", json!({"body": {"late": true}}))
        .await;
    assert_eq!(stream.deliveries(1).await.len(), 1);
}

#[tokio::test]
async fn an_idle_http2_connection_is_closed() {
    // A client that opens HTTP/2 (the preface and its settings) and asks nothing is closed
    // after header_read_timeout, as an idle HTTP/1 connection is: it does not hold one of the
    // server's connections (its pings answered or not, for 40 s otherwise).
    let server = TestServer::builder()
        .config("[limits]\nheader_read_timeout_ms = 300\n")
        .start()
        .await;
    let address = server.url().trim_start_matches("http://").to_owned();
    let mut socket = tokio::net::TcpStream::connect(address)
        .await
        .expect("connect");
    socket
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        .await
        .expect("preface");
    let closed = tokio::time::timeout(Duration::from_secs(5), async {
        let mut buffer = [0u8; 1024];
        loop {
            match socket.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "the idle HTTP/2 connection stayed open");
}

/// Who may call a gRPC method, as the HTTP route with the same rule.
#[derive(Debug, Clone, Copy)]
enum Expect {
    AnyToken,
    Read,
    Produce,
    Consume,
    Admin,
}

/// A token the server does not know.
const UNKNOWN: &str = "not-a-token-0123456789";

fn allowed(expect: Expect, token: Option<&str>) -> bool {
    match (expect, token) {
        (_, None | Some(UNKNOWN)) => false,
        (_, Some(ADMIN)) | (Expect::AnyToken, Some(_)) => true,
        (Expect::Read, Some(token)) => token == PRODUCER_A || token == CONSUMER_A,
        (Expect::Produce, Some(token)) => token == PRODUCER_A,
        (Expect::Consume, Some(token)) => token == CONSUMER_A,
        (Expect::Admin, Some(_)) => false,
    }
}

/// Calls `method` on a team-a queue; the status when refused.
async fn call(client: &mut Client, method: &str) -> Result<(), Status> {
    let queue = || "team-a.orders".to_owned();
    let receipt = "not-a-receipt".to_owned();
    match method {
        "Publish" => {
            let mut answers = client
                .publish(tokio_stream::iter(vec![publish(
                    0,
                    &queue(),
                    json_message("{}"),
                )]))
                .await?
                .into_inner();
            let answer = answers.message().await?.expect("an answer");
            match answer.outcome {
                Some(publish_response::Outcome::Error(error)) if error.code == "forbidden" => {
                    Err(Status::permission_denied(error.message))
                }
                _ => Ok(()),
            }
        }
        "Pull" => {
            let start = v1::PullRequest {
                request: Some(pull_request::Request::Start(v1::PullStart {
                    queue: queue(),
                    credit: 1,
                    visibility_timeout_ms: None,
                })),
            };
            client.pull(tokio_stream::iter(vec![start])).await.map(drop)
        }
        "Enqueue" => client
            .enqueue(v1::EnqueueRequest {
                queue: queue(),
                messages: vec![json_message("{}")],
            })
            .await
            .map(drop),
        "Receive" => client
            .receive(v1::ReceiveRequest {
                queue: queue(),
                ..Default::default()
            })
            .await
            .map(drop),
        "Ack" => client
            .ack(v1::AckRequest {
                queue: queue(),
                receipts: vec![receipt],
                result_json: None,
                then: Vec::new(),
            })
            .await
            .map(drop),
        "Nack" => client
            .nack(v1::NackRequest {
                queue: queue(),
                receipt,
                ..Default::default()
            })
            .await
            .map(drop),
        "Extend" => client
            .extend(v1::ExtendRequest {
                queue: queue(),
                receipt,
                visibility_timeout_ms: 1000,
                unstarted: false,
            })
            .await
            .map(drop),
        "GetMessage" => client
            .get_message(v1::GetMessageRequest {
                queue: queue(),
                by: Some(v1::get_message_request::By::Id("x".into())),
            })
            .await
            .map(drop),
        "Cancel" => client
            .cancel(v1::CancelRequest {
                queue: queue(),
                by: Some(v1::cancel_request::By::Id("x".into())),
                reason: None,
            })
            .await
            .map(drop),
        "PutQueue" => client
            .put_queue(v1::PutQueueRequest {
                name: queue(),
                settings_json: "{}".into(),
            })
            .await
            .map(drop),
        "GetQueue" => client
            .get_queue(v1::GetQueueRequest { name: queue() })
            .await
            .map(drop),
        "ListQueues" => client.list_queues(v1::ListQueuesRequest {}).await.map(drop),
        "DeleteQueue" => client
            .delete_queue(v1::DeleteQueueRequest {
                name: "team-a.scratch".into(),
                ..Default::default()
            })
            .await
            .map(drop),
        "SetPaused" => client
            .set_paused(v1::SetPausedRequest {
                name: queue(),
                paused: false,
            })
            .await
            .map(drop),
        "PurgeQueue" => client
            .purge_queue(v1::PurgeQueueRequest {
                name: "team-a.scratch".into(),
            })
            .await
            .map(drop),
        "ListDeadLetters" => client
            .list_dead_letters(v1::ListDeadLettersRequest {
                queue: queue(),
                ..Default::default()
            })
            .await
            .map(drop),
        "ReplayDeadLetters" => client
            .replay_dead_letters(v1::ReplayDeadLettersRequest {
                queue: queue(),
                dry_run: true,
                ..Default::default()
            })
            .await
            .map(drop),
        other => panic!("no call for {other}"),
    }
}

/// Every method of the service, with who may call it (the HTTP route's rule).
const METHODS: &[(&str, Expect)] = &[
    ("Publish", Expect::Produce),
    ("Pull", Expect::Consume),
    ("Enqueue", Expect::Produce),
    ("Receive", Expect::Consume),
    ("Ack", Expect::Consume),
    ("Nack", Expect::Consume),
    ("Extend", Expect::Consume),
    ("GetMessage", Expect::Read),
    ("Cancel", Expect::Produce),
    ("PutQueue", Expect::Admin),
    ("GetQueue", Expect::Read),
    ("ListQueues", Expect::AnyToken),
    ("DeleteQueue", Expect::Admin),
    ("SetPaused", Expect::Admin),
    ("PurgeQueue", Expect::Admin),
    ("ListDeadLetters", Expect::Read),
    ("ReplayDeadLetters", Expect::Admin),
];

#[tokio::test]
async fn every_grpc_method_gives_each_role_exactly_its_access() {
    // The authorization matrix over gRPC: every method of the service (the .proto's list must
    // match this table) with no token, an unknown one, the admin, team-a's producer and
    // consumer, and a token of another team: UNAUTHENTICATED without a valid token,
    // PERMISSION_DENIED where the role or the queue pattern does not allow it, anything else
    // where it does.
    let server = tokens::team_a(
        TestServer::builder(),
        "[[auth.tokens]]\nname = \"team-b\"\ntoken = { env = \"TEST_BOTH_B\" }\nroles = [\"producer\", \"consumer\"]\nqueues = [\"team-b.*\"]\n",
    )
    .env("TEST_BOTH_B", "team-b-token-0123456789")
    .start()
    .await;
    let proto = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../proto/sluice/v1/sluice.proto"),
    )
    .expect("the .proto");
    let declared: Vec<&str> = proto
        .lines()
        .filter_map(|line| line.trim().strip_prefix("rpc "))
        .filter_map(|rest| rest.split('(').next())
        .collect();
    let tested: Vec<&str> = METHODS.iter().map(|(name, _)| *name).collect();
    assert_eq!(
        declared, tested,
        "every method of the service has a row here"
    );

    let mut admin = client(&server, Some(ADMIN)).await;
    for name in ["team-a.orders", "team-a.scratch", "team-b.orders"] {
        admin
            .put_queue(v1::PutQueueRequest {
                name: name.into(),
                settings_json: String::new(),
            })
            .await
            .expect("queue");
    }
    for (method, expect) in METHODS {
        for token in [
            None,
            Some(UNKNOWN),
            Some(ADMIN),
            Some(PRODUCER_A),
            Some(CONSUMER_A),
            Some("team-b-token-0123456789"),
        ] {
            let mut caller = client(&server, token).await;
            let result = call(&mut caller, method).await;
            let who = token.map_or("no token", |t| &t[..t.find('-').unwrap_or(0)]);
            let code = result.as_ref().err().map(Status::code);
            if allowed(*expect, token) {
                assert!(
                    !matches!(code, Some(Code::Unauthenticated | Code::PermissionDenied)),
                    "{who} should be allowed {method}: {result:?}"
                );
            } else if token.is_none() || token == Some(UNKNOWN) {
                assert_eq!(
                    code,
                    Some(Code::Unauthenticated),
                    "{who} {method}: {result:?}"
                );
                assert_eq!(sluice_code(result.as_ref().unwrap_err()), "unauthorized");
            } else {
                assert_eq!(
                    code,
                    Some(Code::PermissionDenied),
                    "{who} {method}: {result:?}"
                );
            }
        }
    }
}

#[tokio::test]
async fn open_streams_end_with_unavailable_and_do_not_hold_a_shutdown() {
    // SIGTERM while a pull stream waits for messages and a publish stream is sending: the server
    // stores and answers what it read, ends both streams with UNAVAILABLE (so clients go
    // elsewhere) and exits well within its 30 s grace, not held by the streams. Every message
    // it stored was answered before the end: after a restart the queue holds exactly the
    // messages answered as stored.
    let mut server = TestServer::builder().start().await;
    server.put_queue("grpc-stop", json!({})).await;
    server.put_queue("grpc-idle", json!({})).await;
    let mut client = client(&server, None).await;
    let mut waiting = pull(&mut client, "grpc-idle", 10, None).await;
    let (sender, outbound) = mpsc::channel(2000);
    for seq in 0..2000 {
        sender
            .send(publish(seq, "grpc-stop", json_message("{}")))
            .await
            .expect("send");
    }
    let mut answers = client
        .publish(ReceiverStream::new(outbound))
        .await
        .expect("publish stream")
        .into_inner();
    let mut stored = u64::from(enqueued(&next(&mut answers).await).created);

    let started = std::time::Instant::now();
    let status = server.terminate().await;
    assert!(status.success(), "{status:?}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "shutdown took {:?}",
        started.elapsed()
    );
    let publish_end = loop {
        match tokio::time::timeout(ANSWER_WAIT, answers.message())
            .await
            .expect("the stream ended in time")
        {
            Ok(Some(answer)) => stored += u64::from(enqueued(&answer).created),
            other => break other,
        }
    };
    drop(sender);
    // Every message was read and answered before the stop, or the stream says UNAVAILABLE.
    match publish_end {
        Ok(None) => assert_eq!(stored, 2000),
        Err(status) => assert_eq!(status.code(), Code::Unavailable, "{status:?}"),
        Ok(Some(_)) => unreachable!(),
    }
    match tokio::time::timeout(ANSWER_WAIT, waiting.answers.message())
        .await
        .expect("the pull stream ended in time")
    {
        Err(status) => assert_eq!(status.code(), Code::Unavailable, "{status:?}"),
        Ok(other) => panic!("expected UNAVAILABLE, got {other:?}"),
    }
    server.restart().await;
    assert_eq!(
        server.stats("grpc-stop").await["ready"],
        stored,
        "stored exactly what was answered"
    );
}

#[tokio::test]
async fn the_http_api_answers_over_http2_on_the_same_port() {
    // A client that multiplexes speaks HTTP/2 with prior knowledge to the HTTP API as well:
    // curl creates a queue and enqueues over HTTP/2, and says so.
    let server = TestServer::builder().start().await;
    let curl = |args: &[&str]| {
        let output = std::process::Command::new("curl")
            .args([
                "-s",
                "--http2-prior-knowledge",
                "-w",
                "\n%{http_version} %{http_code}",
            ])
            .args(args)
            .output()
            .expect("curl runs");
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let put = curl(&[
        "-X",
        "PUT",
        "-d",
        "{}",
        &format!("{}/v1/queues/h2", server.url()),
    ]);
    assert!(put.ends_with("\n2 200"), "{put}");
    let sent = curl(&[
        "-d",
        r#"{"body": {"over": "h2"}}"#,
        &format!("{}/v1/queues/h2/messages", server.url()),
    ]);
    assert!(sent.ends_with("\n2 200"), "{sent}");
    assert_eq!(server.stats("h2").await["ready"], 1);
}

#[tokio::test]
async fn a_message_over_the_size_limits_is_refused() {
    // A gRPC message over 16 MiB (the largest HTTP request) is refused by the decoder with
    // OUT_OF_RANGE (tonic's status for it) before it is built; one under that but over the queue's
    // max_message_bytes is refused as too_large, as over HTTP; the server goes on.
    let server = TestServer::builder().start().await;
    server
        .put_queue("grpc-big", json!({"max_message_bytes": 1024}))
        .await;
    let mut client = client(&server, None)
        .await
        .max_encoding_message_size(64 << 20);
    let huge = v1::OutgoingMessage {
        body: Some(v1::outgoing_message::Body::Bytes(vec![7; 17 << 20])),
        ..Default::default()
    };
    let refused = client
        .enqueue(v1::EnqueueRequest {
            queue: "grpc-big".into(),
            messages: vec![huge],
        })
        .await
        .expect_err("over 16 MiB");
    assert_eq!(refused.code(), Code::OutOfRange, "{refused:?}");
    let big = v1::OutgoingMessage {
        body: Some(v1::outgoing_message::Body::Bytes(vec![7; 2048])),
        ..Default::default()
    };
    let refused = client
        .enqueue(v1::EnqueueRequest {
            queue: "grpc-big".into(),
            messages: vec![big],
        })
        .await
        .expect_err("over max_message_bytes");
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert_eq!(sluice_code(&refused), "too_large");
    let fine = client
        .enqueue(v1::EnqueueRequest {
            queue: "grpc-big".into(),
            messages: vec![json_message("{}")],
        })
        .await
        .expect("a small message");
    assert!(fine.into_inner().results[0].created);
}

#[tokio::test]
async fn acks_carry_next_steps_on_both_calls_and_refusals_change_nothing() {
    // Proves `then` over gRPC: a unary Ack and a pull stream's ack each store their next step
    // in the ack's commit and answer its enqueue result; a next step to a missing queue is
    // refused NOT_FOUND (queue_not_found) on the unary call and as the stream ack's error, and
    // leaves the lease to be acked after.
    let server = TestServer::builder().start().await;
    for queue in ["g-first", "g-next"] {
        server.put_queue(queue, json!({})).await;
    }
    for n in 0..2 {
        server.send("g-first", json!({"body": {"n": n}})).await;
    }
    let mut client = client(&server, None).await;
    let step = |queue: &str, n: u32| v1::NextStep {
        queue: queue.to_owned(),
        message: Some(json_message(&format!("{{\"next\":{n}}}"))),
    };

    let received = client
        .receive(v1::ReceiveRequest {
            queue: "g-first".into(),
            max: Some(1),
            wait_ms: Some(0),
            visibility_timeout_ms: None,
        })
        .await
        .expect("receive")
        .into_inner()
        .messages;
    let ack = |then: Vec<v1::NextStep>| v1::AckRequest {
        queue: "g-first".into(),
        receipts: vec![received[0].receipt.clone()],
        result_json: None,
        then,
    };
    let refused = client
        .ack(ack(vec![step("g-nowhere", 0)]))
        .await
        .expect_err("a missing queue");
    assert_eq!(refused.code(), tonic::Code::NotFound);
    assert_eq!(sluice_code(&refused), "queue_not_found");
    let acked = client
        .ack(ack(vec![step("g-next", 0)]))
        .await
        .expect("ack")
        .into_inner();
    assert_eq!(acked.acked, 1);
    assert!(acked.then[0].created, "{acked:?}");

    let mut stream = pull(&mut client, "g-first", 1, None).await;
    let message = stream.deliveries(1).await.remove(0);
    let pull_ack = |request_id: u64, then: Vec<v1::NextStep>| {
        pull_request::Request::Ack(v1::PullAck {
            request_id,
            receipts: vec![message.receipt.clone()],
            result_json: None,
            then,
        })
    };
    stream.send(pull_ack(1, vec![step("g-nowhere", 1)])).await;
    match stream.next().await {
        pull_response::Response::Settled(v1::Settled {
            request_id: 1,
            outcome: Some(v1::settled::Outcome::Error(error)),
        }) => assert_eq!(error.code, "queue_not_found"),
        other => panic!("expected the ack's refusal, got {other:?}"),
    }
    stream.send(pull_ack(2, vec![step("g-next", 1)])).await;
    match stream.next().await {
        pull_response::Response::Settled(v1::Settled {
            request_id: 2,
            outcome: Some(v1::settled::Outcome::Acked(ack)),
        }) => assert!(ack.acked == 1 && ack.then[0].created, "{ack:?}"),
        other => panic!("expected the ack's answer, got {other:?}"),
    }
    let next = server.receive("g-next", json!({"max": 10})).await;
    let bodies: Vec<&Value> = next.iter().map(|m| &m["body"]).collect();
    assert_eq!(bodies, [&json!({"next": 0}), &json!({"next": 1})]);
}

/// Issue 31: Kubernetes' gRPC probes and `grpcurl` without `-proto` need `grpc.health.v1` and
/// server reflection. Health answers without a token (probes carry none) and says `SERVING`
/// for the server and `sluice.v1.Queues`; reflection lists the services and serves their
/// descriptors to a token holder, and is refused without a token like every other call.
#[tokio::test]
async fn health_answers_probes_without_a_token_and_reflection_describes_the_api() {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::health_client::HealthClient;
    use tonic_reflection::pb::v1::ServerReflectionRequest;
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;

    let server = tokens::team_a(TestServer::builder(), "").start().await;
    let channel = Channel::from_shared(server.url().to_owned())
        .expect("url")
        .connect()
        .await
        .expect("gRPC connection");
    let mut health = HealthClient::new(channel.clone());
    for service in ["", "sluice.v1.Queues"] {
        let answer = health
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap_or_else(|status| panic!("health of {service:?}: {status:?}"))
            .into_inner();
        assert_eq!(answer.status, ServingStatus::Serving as i32, "{service:?}");
    }
    let unknown = health
        .check(HealthCheckRequest {
            service: "nope.v1.Nothing".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound);

    let list = |token: Option<&str>| {
        let mut reflection =
            ServerReflectionClient::with_interceptor(channel.clone(), Token(token.map(Into::into)));
        async move {
            let requests = tokio_stream::iter([
                ServerReflectionRequest {
                    message_request: Some(MessageRequest::ListServices(String::new())),
                    ..Default::default()
                },
                ServerReflectionRequest {
                    message_request: Some(MessageRequest::FileContainingSymbol(
                        "sluice.v1.Queues".into(),
                    )),
                    ..Default::default()
                },
            ]);
            let mut answers = reflection
                .server_reflection_info(requests)
                .await?
                .into_inner();
            let mut out = Vec::new();
            while let Some(answer) = answers.message().await? {
                out.push(answer.message_response);
            }
            Ok::<_, Status>(out)
        }
    };
    let refused = list(None).await.unwrap_err();
    assert_eq!(refused.code(), Code::Unauthenticated);
    let answers = list(Some(ADMIN)).await.expect("reflection with a token");
    let Some(Some(MessageResponse::ListServicesResponse(services))) = answers.first() else {
        panic!("{answers:?}");
    };
    let names: Vec<&str> = services.service.iter().map(|s| s.name.as_str()).collect();
    for name in ["sluice.v1.Queues", "grpc.health.v1.Health"] {
        assert!(names.contains(&name), "{names:?}");
    }
    let Some(Some(MessageResponse::FileDescriptorResponse(files))) = answers.get(1) else {
        panic!("{answers:?}");
    };
    assert!(!files.file_descriptor_proto.is_empty());
}
