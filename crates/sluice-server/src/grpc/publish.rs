//! The publish stream: messages come in with the client's sequence numbers; each is answered
//! once stored (or refused).
//!
//! Two tasks per stream. The reader takes messages off the stream while it holds a permit for
//! each ([`Limits::stream_messages_in_flight`](crate::config::Limits) of them: past that it
//! stops reading, and HTTP/2 flow control holds the client). The storer takes everything that
//! has arrived (up to a batch's limits), stores it with one enqueue per queue, answers, and
//! goes again: messages that came while a commit ran go together in the next, so a busy stream
//! makes big commits. Batches are stored one after another, so messages of one stream are
//! stored in the order they were sent (per-key order holds for a stream's messages).

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::join_all;
use sluice_core::queue::limits;
use sluice_grpc::v1;
use sluice_ops::OpsError;
use sluice_wire::ErrorCode;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Status, Streaming};

use super::unary::Answers;
use super::{Who, convert, permit, stream_error};
use crate::auth::Need;
use crate::state::AppState;

/// Answers waiting to be sent before the storer waits for the client to read them.
const ANSWER_BUFFER: usize = 1024;
/// Body bytes stored in one batch: under the enqueue's batch limit, whatever the messages.
const BATCH_BYTES: usize = limits::BATCH_BYTES_MAX / 2;
/// Queues whose permission a stream remembers (a stream naming more starts again).
const PERMISSIONS_KEPT: usize = 1024;

/// A message read off the stream, holding its place among those in flight and its body's
/// bytes in the body budget until it is answered.
struct Arrived {
    request: v1::PublishRequest,
    _place: OwnedSemaphorePermit,
    _charge: crate::body_budget::Charge,
}

/// What the reader hands the storer: a message, or why the stream ends (after the answers to
/// everything before it).
// Every value but a stream's last is a `Message`: boxing it would only add an allocation per
// message.
#[allow(clippy::large_enum_variant)]
enum Arrival {
    Message(Arrived),
    End(Status),
}

/// Starts serving a publish stream; the answers are the returned stream.
pub fn start(
    app: AppState,
    caller: Who,
    inbound: Streaming<v1::PublishRequest>,
) -> Answers<v1::PublishResponse> {
    let (answers, outbound) = mpsc::channel(ANSWER_BUFFER);
    let (arrivals, arrived) = mpsc::unbounded_channel();
    let places = Arc::new(Semaphore::new(app.stream_messages_in_flight));
    tokio::spawn(read(
        app.clone(),
        inbound,
        places,
        arrivals,
        answers.clone(),
    ));
    tokio::spawn(
        Storer {
            app,
            caller,
            permissions: HashMap::new(),
        }
        .run(arrived, answers),
    );
    Box::pin(ReceiverStream::new(outbound))
}

/// Reads the stream while places are free; ends at its end, when it breaks, or at shutdown.
async fn read(
    app: AppState,
    mut inbound: Streaming<v1::PublishRequest>,
    places: Arc<Semaphore>,
    arrivals: mpsc::UnboundedSender<Arrival>,
    answers: mpsc::Sender<Result<v1::PublishResponse, Status>>,
) {
    loop {
        let place = tokio::select! {
            place = places.clone().acquire_owned() => place.expect("never closed"),
            () = app.shutdown.cancelled() => break,
        };
        let next = tokio::select! {
            next = inbound.message() => next,
            () = app.shutdown.cancelled() => break,
        };
        match next {
            Ok(Some(request)) => {
                // Charged as it is read, as an HTTP body is: the messages a stream holds are
                // bounded in bytes by `[limits] body_bytes_in_flight`, not only in number.
                let Some(charge) = app.body_budget.try_charge(None, body_len(&request)) else {
                    let refusal = v1::PublishResponse {
                        seq: request.seq,
                        outcome: Some(v1::publish_response::Outcome::Error(stream_error(
                            overloaded(),
                        ))),
                    };
                    if answers.send(Ok(refusal)).await.is_err() {
                        return;
                    }
                    continue;
                };
                let arrived = Arrived {
                    request,
                    _place: place,
                    _charge: charge,
                };
                if arrivals.send(Arrival::Message(arrived)).is_err() {
                    return;
                }
            }
            // The client is done sending: the storer answers what came, then the stream ends.
            Ok(None) => return,
            // A broken stream or a message over the size limit: the storer answers what came
            // before it, then ends the stream with this.
            Err(status) => {
                let _ = arrivals.send(Arrival::End(status));
                return;
            }
        }
    }
    // Shutdown: what was read is still stored and answered; then the stream ends as
    // UNAVAILABLE, so the client sends the rest elsewhere or later.
    let _ = arrivals.send(Arrival::End(super::status(OpsError::unavailable(
        "the server is shutting down",
    ))));
}

/// Stores what arrives, batch by batch, and answers each message.
struct Storer {
    app: AppState,
    caller: Who,
    /// Whether the caller may publish to a queue, as found on first use in this stream.
    permissions: HashMap<String, Result<(), Status>>,
}

type Answer = (u64, Result<v1::Enqueued, OpsError>);
/// A message's place among those in flight and its bytes in the body budget.
type Held = (OwnedSemaphorePermit, crate::body_budget::Charge);

impl Storer {
    async fn run(
        mut self,
        mut arrived: mpsc::UnboundedReceiver<Arrival>,
        answers: mpsc::Sender<Result<v1::PublishResponse, Status>>,
    ) {
        let mut end = None;
        while end.is_none() {
            let first = match arrived.recv().await {
                Some(Arrival::Message(first)) => first,
                Some(Arrival::End(status)) => {
                    end = Some(status);
                    break;
                }
                None => break,
            };
            let mut bytes = body_len(&first.request);
            let mut batch = vec![first];
            while batch.len() < limits::BATCH_MESSAGES_MAX && bytes < BATCH_BYTES {
                match arrived.try_recv() {
                    Ok(Arrival::Message(next)) => {
                        bytes += body_len(&next.request);
                        batch.push(next);
                    }
                    Ok(Arrival::End(status)) => {
                        end = Some(status);
                        break;
                    }
                    Err(_) => break,
                }
            }
            let (results, held) = self.store(batch).await;
            for (seq, result) in results {
                let outcome = match result {
                    Ok(enqueued) => v1::publish_response::Outcome::Enqueued(enqueued),
                    Err(error) => v1::publish_response::Outcome::Error(stream_error(error)),
                };
                let answer = v1::PublishResponse {
                    seq,
                    outcome: Some(outcome),
                };
                if answers.send(Ok(answer)).await.is_err() {
                    // The client went away; what was stored stays stored.
                    return;
                }
            }
            // The batch's places and body bytes are free once its answers are out.
            drop(held);
        }
        if let Some(status) = end {
            let _ = answers.send(Err(status)).await;
        }
    }

    /// Stores one batch: one enqueue per queue, the queues at once. Returns the answers, and
    /// what the batch holds (its places in flight and its bytes in the body budget), to be let
    /// go once the answers are sent.
    async fn store(&mut self, batch: Vec<Arrived>) -> (Vec<Answer>, Vec<Held>) {
        let mut answers = Vec::new();
        let mut held = Vec::with_capacity(batch.len());
        let mut groups: Vec<(String, Vec<(u64, v1::OutgoingMessage)>)> = Vec::new();
        for Arrived {
            request,
            _place: place,
            _charge: charge,
        } in batch
        {
            held.push((place, charge));
            let v1::PublishRequest {
                seq,
                queue,
                message,
            } = request;
            let Some(message) = message else {
                answers.push((seq, Err(OpsError::invalid_field("message: give a message"))));
                continue;
            };
            if let Err(refusal) = self.may_publish(&queue).await {
                answers.push((seq, Err(refusal)));
                continue;
            }
            match groups.iter_mut().find(|(name, _)| *name == queue) {
                Some((_, group)) => group.push((seq, message)),
                None => groups.push((queue, vec![(seq, message)])),
            }
        }
        let app = &self.app;
        for stored in join_all(
            groups
                .into_iter()
                .map(|(queue, messages)| store_group(app, queue, messages)),
        )
        .await
        {
            answers.extend(stored);
        }
        (answers, held)
    }

    /// Whether the caller may publish to `queue`, remembered for the stream.
    async fn may_publish(&mut self, queue: &str) -> Result<(), OpsError> {
        let Some(caller) = &self.caller else {
            return Ok(());
        };
        if !self.permissions.contains_key(queue) {
            if self.permissions.len() >= PERMISSIONS_KEPT {
                self.permissions.clear();
            }
            let found = permit(&self.app, caller, Need::Produce, Some(queue)).await;
            self.permissions.insert(queue.to_owned(), found);
        }
        match &self.permissions[queue] {
            Ok(()) => Ok(()),
            Err(status) => Err(OpsError::new(
                if status.code() == tonic::Code::PermissionDenied {
                    ErrorCode::Forbidden
                } else {
                    ErrorCode::Unavailable
                },
                status.message(),
            )),
        }
    }
}

/// Stores one queue's messages of a batch in one enqueue, so one commit. Each message was sent
/// on its own, so each is decided on its own (`Ops::enqueue_each`): one message's refusal
/// (its size, a field, the queue's schema) is its answer alone.
async fn store_group(
    app: &AppState,
    queue: String,
    messages: Vec<(u64, v1::OutgoingMessage)>,
) -> Vec<Answer> {
    let mut enqueue = match app.ops.enqueue_to(queue).await {
        Ok(enqueue) => enqueue,
        Err(error) => return refuse_all(messages, &error),
    };
    let mut answers = Vec::new();
    let mut added = Vec::with_capacity(messages.len());
    for (seq, message) in messages {
        match convert::message_request(message, "").and_then(|request| enqueue.add(request, "")) {
            Ok(()) => added.push(seq),
            Err(error) => answers.push((seq, Err(error))),
        }
    }
    if added.is_empty() {
        return answers;
    }
    match app.ops.enqueue_each(enqueue).await {
        Ok(results) => answers.extend(
            added
                .into_iter()
                .zip(results)
                .map(|(seq, out)| (seq, out.map(convert::enqueued))),
        ),
        Err(error) => answers.extend(added.into_iter().map(|seq| (seq, Err(error.clone())))),
    }
    answers
}

fn refuse_all(messages: Vec<(u64, v1::OutgoingMessage)>, error: &OpsError) -> Vec<Answer> {
    messages
        .into_iter()
        .map(|(seq, _)| (seq, Err(error.clone())))
        .collect()
}

fn body_len(request: &v1::PublishRequest) -> usize {
    match request.message.as_ref().and_then(|m| m.body.as_ref()) {
        Some(v1::outgoing_message::Body::Json(text)) => text.len(),
        Some(v1::outgoing_message::Body::Bytes(bytes)) => bytes.len(),
        None => 0,
    }
}

fn overloaded() -> OpsError {
    let mut error = OpsError::new(
        ErrorCode::Overloaded,
        "request bodies in flight already hold [limits] body_bytes_in_flight; send again shortly",
    );
    error.retry_after_s = Some(1);
    error
}
