//! The pull stream: the client grants credit; the server leases messages as they become ready
//! and sends them, never more than the credit outstanding; acks, nacks and extends come back
//! on the stream and are answered by their `request_id`.
//!
//! One task per stream runs a receive (a long poll through the same [`sluice_ops::Ops::receive`]
//! as HTTP) whenever there is credit, while it reads the client's messages and settles leases
//! concurrently. A stream that breaks leaves its leases as they are: a message not acked is
//! delivered again when its lease runs out, as after any consumer's crash. Messages leased for
//! a client that has already gone are given back at once.
//!
//! Credit bounds the messages a client is sent, not what the server holds for a client that
//! does not read: leased messages wait in the stream's outgoing buffer until the connection
//! takes them. That buffer is bounded in bytes (`[limits] stream_unsent_bytes`, issue 30
//! finding 7): a receive starts only while there is room, asks for as many messages as the room
//! fits at the last batch's average size, and its messages are charged until the connection
//! takes them.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use sluice_core::message::ClaimedMessage;
use sluice_core::queue::limits;
use sluice_grpc::v1;
use sluice_grpc::v1::pull_request::Request as Incoming;
use sluice_ops::{AckRequest, NackRequest, OpsError, OpsResult, ReceiveRequest};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Status, Streaming};

use super::unary::Answers;
use super::{Who, convert, permit, status, stream_error};
use crate::auth::Need;
use crate::state::AppState;

/// Answers waiting to be sent before the stream waits for the client to read them.
const ANSWER_BUFFER: usize = 64;
/// Acks, nacks and extends of one stream being settled at once; past it the stream is not read.
const SETTLING_MAX: usize = 1024;

type Claim = Pin<Box<dyn Future<Output = OpsResult<Vec<ClaimedMessage>>> + Send>>;
/// An answer on its way out, with the bytes of the stream's buffer it holds until sent.
type Unsent = (
    Result<v1::PullResponse, Status>,
    Option<OwnedSemaphorePermit>,
);
type Outbound = mpsc::Sender<Unsent>;

/// Reads the stream's `PullStart`, authorizes it, and starts serving the stream.
pub async fn start(
    app: AppState,
    caller: Who,
    mut inbound: Streaming<v1::PullRequest>,
) -> Result<Answers<v1::PullResponse>, Status> {
    let first = inbound.message().await?.and_then(|first| first.request);
    let Some(Incoming::Start(start)) = first else {
        return Err(status(OpsError::invalid_field(
            "start: the first message of a pull stream is a start naming the queue",
        )));
    };
    if let Some(caller) = &caller {
        permit(&app, caller, Need::Consume, Some(&start.queue)).await?;
    }
    // A missing queue is refused now, not on the first receive.
    app.ops.queue_get(&start.queue).await.map_err(status)?;
    let (outbound, answers) = mpsc::channel(ANSWER_BUFFER);
    let cap = app.stream_messages_in_flight as u64;
    let unsent_max = app.stream_unsent_bytes.min(Semaphore::MAX_PERMITS);
    let puller = Puller {
        credit: u64::from(start.credit).min(cap),
        cap,
        queue: start.queue,
        visibility_timeout_ms: start.visibility_timeout_ms,
        unsent: Arc::new(Semaphore::new(unsent_max)),
        unsent_max,
        average_bytes: 0,
        app,
        caller,
    };
    tokio::spawn(puller.run(inbound, outbound));
    Ok(Box::pin(Charged {
        answers: ReceiverStream::new(answers),
        in_transit: None,
    }))
}

/// What the client asks the stream to settle.
enum Settle {
    Ack(v1::PullAck),
    Nack(v1::PullNack),
    Extend(v1::PullExtend),
}

struct Puller {
    app: AppState,
    /// Who opened the stream: its next steps are checked as produces.
    caller: Who,
    queue: String,
    visibility_timeout_ms: Option<i64>,
    /// Messages the client may still be sent.
    credit: u64,
    /// The most credit a client may hold ([`crate::config::Limits::stream_messages_in_flight`]).
    cap: u64,
    /// Bytes of the outgoing buffer free ([`crate::config::Limits::stream_unsent_bytes`]).
    unsent: Arc<Semaphore>,
    unsent_max: usize,
    /// The average size of the last batch's messages, to size the next receive by.
    average_bytes: usize,
}

/// The answers as the connection takes them. An answer's charge is kept until the connection
/// asks for the next one: by then it has handed the answer on to the socket's buffer, which
/// asks for more only when it has room (HTTP/2 flow control).
struct Charged {
    answers: ReceiverStream<Unsent>,
    in_transit: Option<OwnedSemaphorePermit>,
}

impl futures::Stream for Charged {
    type Item = Result<v1::PullResponse, Status>;

    fn poll_next(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        self.in_transit = None;
        match self.answers.poll_next_unpin(cx) {
            std::task::Poll::Ready(Some((answer, charge))) => {
                self.in_transit = charge;
                std::task::Poll::Ready(Some(answer))
            }
            std::task::Poll::Ready(None) => std::task::Poll::Ready(None),
            std::task::Poll::Pending => std::task::Poll::Pending,
        }
    }
}

/// What a leased message holds in memory until it is sent: its body, headers and receipt.
fn unsent_bytes(message: &ClaimedMessage) -> usize {
    let headers: usize = message
        .payload
        .headers
        .iter()
        .map(|(name, value)| name.len() + value.len())
        .sum();
    message.payload.body_bytes.len() + headers + 256
}

impl Puller {
    async fn run(mut self, mut inbound: Streaming<v1::PullRequest>, outbound: Outbound) {
        let mut claim: Option<Claim> = None;
        let mut settling = FuturesUnordered::new();
        let mut reading = true;
        loop {
            if claim.is_none() && reading && self.credit > 0 {
                claim = Some(self.claim());
            }
            if !reading && settling.is_empty() {
                // The client is done sending and every settle is answered.
                return;
            }
            tokio::select! {
                () = self.app.shutdown.cancelled() => {
                    // Acks, nacks and extends under way are answered first, so a client does
                    // not redo work the server settled.
                    while let Some(settled) = settling.next().await {
                        let answer = v1::PullResponse {
                            response: Some(v1::pull_response::Response::Settled(settled)),
                        };
                        if outbound.send((Ok(answer), None)).await.is_err() {
                            return;
                        }
                    }
                    let _ = outbound
                        .send((Err(status(OpsError::unavailable("the server is shutting down"))), None))
                        .await;
                    return;
                }
                next = inbound.message(), if reading && settling.len() < SETTLING_MAX => {
                    match next {
                        Ok(Some(request)) => match request.request {
                            Some(Incoming::Credit(more)) => {
                                self.credit = (self.credit + u64::from(more)).min(self.cap);
                            }
                            Some(Incoming::Start(_)) => {
                                let _ = outbound
                                    .send((Err(status(OpsError::invalid_field(
                                        "start: a pull stream is started once",
                                    ))), None))
                                    .await;
                                return;
                            }
                            Some(Incoming::Ack(ack)) => settling.push(self.settle(Settle::Ack(ack))),
                            Some(Incoming::Nack(nack)) => {
                                settling.push(self.settle(Settle::Nack(nack)));
                            }
                            Some(Incoming::Extend(extend)) => {
                                settling.push(self.settle(Settle::Extend(extend)));
                            }
                            None => {}
                        },
                        // Half-closed: no more credit or settles come; answer those under way.
                        Ok(None) => {
                            reading = false;
                            claim = None;
                        }
                        // Broken: leases follow the normal rules.
                        Err(_) => return,
                    }
                }
                claimed = async { claim.as_mut().expect("guarded").await }, if claim.is_some() => {
                    claim = None;
                    match claimed {
                        Ok(messages) if messages.is_empty() => {}
                        Ok(messages) => {
                            self.credit = self.credit.saturating_sub(messages.len() as u64);
                            if let Err(unsent) = self.send(&outbound, messages).await {
                                self.give_back(unsent);
                                return;
                            }
                        }
                        Err(error) => {
                            let _ = outbound.send((Err(status(error)), None)).await;
                            return;
                        }
                    }
                }
                Some(settled) = settling.next(), if !settling.is_empty() => {
                    let answer = v1::PullResponse {
                        response: Some(v1::pull_response::Response::Settled(settled)),
                    };
                    if outbound.send((Ok(answer), None)).await.is_err() {
                        return;
                    }
                }
            }
        }
    }

    /// A receive of as many messages as the credit allows (at most a receive's limit), waiting
    /// as long as a long poll may.
    fn claim(&self) -> Claim {
        let ops = self.app.ops.clone();
        let unsent = self.unsent.clone();
        let average_bytes = self.average_bytes;
        // Until a batch has shown how big the messages are, one at a time.
        let credit = if average_bytes == 0 {
            self.credit.min(1)
        } else {
            self.credit.min(limits::RECEIVE_MAX as u64)
        };
        let (queue, visibility_timeout_ms) = (self.queue.clone(), self.visibility_timeout_ms);
        Box::pin(async move {
            // Nothing is leased while the buffer is full: wait for the client to read.
            let room = unsent.acquire().await.expect("never closed");
            let fits = (unsent.available_permits() + 1) / average_bytes.max(1);
            drop(room);
            let request = ReceiveRequest {
                lane_runs: false,
                queue,
                max: Some(credit.min(fits.max(1) as u64) as i64),
                wait_ms: Some(limits::WAIT_MS_MAX),
                visibility_timeout_ms,
            };
            ops.receive(request).await
        })
    }

    /// Sends leased messages; gives them back when the client has gone.
    async fn send(
        &mut self,
        outbound: &Outbound,
        messages: Vec<ClaimedMessage>,
    ) -> Result<(), Vec<String>> {
        let receipts: Vec<String> = messages.iter().map(|m| m.receipt.to_string()).collect();
        let bytes: usize = messages.iter().map(unsent_bytes).sum();
        self.average_bytes = bytes / messages.len().max(1);
        // A batch larger than the whole buffer takes all of it (it was leased on room).
        let charge = u32::try_from(bytes.min(self.unsent_max)).unwrap_or(u32::MAX);
        let Ok(permit) = self.unsent.clone().acquire_many_owned(charge).await else {
            return Err(receipts);
        };
        let answer = v1::PullResponse {
            response: Some(v1::pull_response::Response::Messages(v1::Deliveries {
                messages: messages.into_iter().map(convert::delivery).collect(),
            })),
        };
        outbound
            .send((Ok(answer), Some(permit)))
            .await
            .map_err(|_| receipts)
    }

    /// Gives leases back without counting a failure: nobody will work on them.
    fn give_back(&self, receipts: Vec<String>) {
        let ops = self.app.ops.clone();
        let queue = self.queue.clone();
        tokio::spawn(async move {
            for receipt in receipts {
                let _ = ops.extend(queue.clone(), &receipt, 0).await;
            }
        });
    }

    /// Settles one ack, nack or extend; the answer carries its `request_id`.
    fn settle(&self, request: Settle) -> impl Future<Output = v1::Settled> + Send + 'static {
        let ops = self.app.ops.clone();
        let (app, caller) = (self.app.clone(), self.caller.clone());
        let queue = self.queue.clone();
        async move {
            use v1::settled::Outcome;
            let (request_id, outcome) = match request {
                Settle::Ack(ack) => {
                    let done = async {
                        let then = convert::next_steps(ack.then)?;
                        crate::auth::check_next_steps(&app, caller.as_deref(), &then).await?;
                        ops.ack(AckRequest {
                            queue,
                            receipts: ack.receipts,
                            result: ack.result_json,
                            then,
                        })
                        .await
                    }
                    .await;
                    (
                        ack.request_id,
                        done.map(|out| Outcome::Acked(convert::ack_response(out))),
                    )
                }
                Settle::Nack(nack) => {
                    let done = ops
                        .nack(NackRequest {
                            queue,
                            receipt: nack.receipt,
                            error: nack.error,
                            delay_ms: nack.delay_ms,
                            permanent: nack.permanent,
                        })
                        .await;
                    (
                        nack.request_id,
                        done.map(|out| Outcome::Nacked(convert::nack_response(out))),
                    )
                }
                Settle::Extend(extend) => {
                    let done = ops
                        .extend(queue, &extend.receipt, extend.visibility_timeout_ms)
                        .await;
                    (
                        extend.request_id,
                        done.map(|lease_expires_at_ms| {
                            Outcome::Extended(v1::ExtendResponse {
                                lease_expires_at_ms,
                            })
                        }),
                    )
                }
            };
            v1::Settled {
                request_id,
                outcome: Some(outcome.unwrap_or_else(|error| Outcome::Error(stream_error(error)))),
            }
        }
    }
}
