//! A gRPC client of sluice in a page: create a queue, publish on a stream, pull on a stream with
//! credit and ack on it, and read a refusal's sluice code.
//!
//! ```sh
//! sluice serve &                                   # listens on 127.0.0.1:7566
//! cargo run -p sluice-grpc --example client -- http://127.0.0.1:7566
//! ```
//!
//! With access control on, set SLUICE_TOKEN: it goes in every call's `authorization` metadata.

use std::collections::HashSet;

use sluice_grpc::v1::queues_client::QueuesClient;
use sluice_grpc::v1::{self, publish_response, pull_request, pull_response};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::MetadataValue;
use tonic::transport::Channel;
use tonic::{Code, Request, Status};

const MESSAGES: u64 = 1_000;
const CREDIT: u32 = 100;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "http://127.0.0.1:7566".into());
    let channel = Channel::from_shared(url)?.connect().await?;
    // The token, when there is one, rides in the metadata of every call, streams included.
    let token: Option<MetadataValue<_>> = match std::env::var("SLUICE_TOKEN") {
        Ok(token) if !token.is_empty() => Some(format!("Bearer {token}").parse()?),
        _ => None,
    };
    let mut client = QueuesClient::with_interceptor(channel, move |mut request: Request<()>| {
        if let Some(token) = &token {
            request
                .metadata_mut()
                .insert("authorization", token.clone());
        }
        Ok::<_, Status>(request)
    });

    let queue = format!("grpc-example-{}", std::process::id());
    client
        .put_queue(v1::PutQueueRequest {
            name: queue.clone(),
            settings_json: r#"{"max_attempts": 3}"#.into(),
        })
        .await?;

    // Publish: send every message without waiting; each answer names its seq.
    let (sender, requests) = mpsc::channel(256);
    let feeder = {
        let queue = queue.clone();
        tokio::spawn(async move {
            for seq in 0..MESSAGES {
                let message = v1::OutgoingMessage {
                    body: Some(v1::outgoing_message::Body::Json(format!(
                        r#"{{"order":{seq}}}"#
                    ))),
                    id: Some(format!("order-{seq}")),
                    ..Default::default()
                };
                let request = v1::PublishRequest {
                    seq,
                    queue: queue.clone(),
                    message: Some(message),
                };
                if sender.send(request).await.is_err() {
                    break;
                }
            }
        })
    };
    let mut answers = client
        .publish(ReceiverStream::new(requests))
        .await?
        .into_inner();
    let mut stored = HashSet::new();
    while let Some(answer) = answers.message().await? {
        match answer.outcome {
            Some(publish_response::Outcome::Enqueued(_)) => {
                stored.insert(answer.seq);
            }
            Some(publish_response::Outcome::Error(error)) => {
                return Err(format!(
                    "seq {} refused: {} {}",
                    answer.seq, error.code, error.message
                )
                .into());
            }
            None => {}
        }
    }
    feeder.await?;
    assert_eq!(stored.len() as u64, MESSAGES, "every message answered once");
    println!("published {} messages", stored.len());

    // Pull: grant credit, ack each message on the stream, grant again as messages come.
    let (sender, requests) = mpsc::channel(1024);
    sender
        .send(v1::PullRequest {
            request: Some(pull_request::Request::Start(v1::PullStart {
                queue: queue.clone(),
                credit: CREDIT,
                visibility_timeout_ms: Some(30_000),
            })),
        })
        .await?;
    let mut stream = client
        .pull(ReceiverStream::new(requests))
        .await?
        .into_inner();
    let (mut received, mut acked, mut request_id) = (0u64, 0u64, 0u64);
    while acked < MESSAGES {
        let Some(answer) = stream.message().await? else {
            return Err("the pull stream ended early".into());
        };
        match answer.response {
            Some(pull_response::Response::Messages(batch)) => {
                for message in batch.messages {
                    received += 1;
                    request_id += 1;
                    let ack = v1::PullAck {
                        request_id,
                        receipts: vec![message.receipt],
                        result_json: None,
                        then: Vec::new(),
                    };
                    sender
                        .send(v1::PullRequest {
                            request: Some(pull_request::Request::Ack(ack)),
                        })
                        .await?;
                }
                sender
                    .send(v1::PullRequest {
                        request: Some(pull_request::Request::Credit(
                            CREDIT
                                .min((MESSAGES - received.min(MESSAGES)) as u32)
                                .max(1),
                        )),
                    })
                    .await?;
            }
            Some(pull_response::Response::Settled(settled)) => match settled.outcome {
                Some(v1::settled::Outcome::Acked(ack)) => acked += ack.acked,
                other => return Err(format!("ack {} failed: {other:?}", settled.request_id).into()),
            },
            None => {}
        }
    }
    drop(sender);
    println!("received and acked {acked} messages");

    // A refusal: the gRPC code, and the sluice code in the `sluice-error-code` trailer.
    let refused = client
        .receive(v1::ReceiveRequest {
            queue: "no-such-queue".into(),
            ..Default::default()
        })
        .await
        .expect_err("the queue does not exist");
    let code = refused
        .metadata()
        .get(sluice_grpc::ERROR_CODE_TRAILER)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default();
    assert_eq!(refused.code(), Code::NotFound);
    assert_eq!(code, "queue_not_found");
    println!(
        "a receive from a missing queue: {:?} / {code}",
        refused.code()
    );

    let left = client
        .get_queue(v1::GetQueueRequest {
            name: queue.clone(),
        })
        .await?
        .into_inner()
        .stats
        .unwrap_or_default();
    assert_eq!((left.ready, left.in_flight), (0, 0), "the queue is empty");
    client
        .delete_queue(v1::DeleteQueueRequest {
            name: queue,
            ..Default::default()
        })
        .await?;
    println!("ok");
    Ok(())
}
