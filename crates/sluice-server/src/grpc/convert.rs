//! Between the protocol's messages and the operations' types. Where the HTTP API has a
//! document of many optional fields (a queue's settings, a message's full record, a replay's
//! report), the gRPC message carries the HTTP API's JSON of it, so both protocols share one
//! schema for it.

use sluice_core::message::{BodyKind, ClaimedMessage, Payload};
use sluice_core::store::{DeadLetter, QueueInfo};
use sluice_grpc::v1;
use sluice_ops::{Acked, EnqueueAnswer, MessageRequest, Nacked, NextStep, OpsError};

use super::Who;
use crate::state::AppState;

/// A message to store, its body checked: JSON text must be JSON, as the HTTP API's `body`.
pub fn message_request(
    message: v1::OutgoingMessage,
    prefix: &str,
) -> Result<MessageRequest, OpsError> {
    let body = match message.body {
        Some(v1::outgoing_message::Body::Json(text)) => {
            if let Err(error) = sluice_ops::check_json_body(text.as_bytes()) {
                return Err(OpsError::invalid_field(format!(
                    "{prefix}body: json is not JSON: {error}"
                )));
            }
            (text.into_bytes(), BodyKind::Json)
        }
        Some(v1::outgoing_message::Body::Bytes(bytes)) => (bytes, BodyKind::Bytes),
        None => {
            return Err(OpsError::invalid_field(format!(
                "{prefix}body: a message needs json or bytes"
            )));
        }
    };
    // Header count and size are the enqueue's rules (`Enqueue::add`), as for HTTP.
    Ok(MessageRequest {
        body,
        id: message.id,
        key: message.key,
        headers: (!message.headers.is_empty()).then(|| message.headers.into_iter().collect()),
        priority: message.priority,
        delay_ms: message.delay_ms,
        not_before: message.not_before,
    })
}

/// An ack's next steps, each message checked as [`message_request`] checks one.
pub fn next_steps(steps: Vec<v1::NextStep>) -> Result<Vec<NextStep>, OpsError> {
    steps
        .into_iter()
        .enumerate()
        .map(|(index, step)| {
            let prefix = format!("then[{index}].");
            let message = step.message.ok_or_else(|| {
                OpsError::invalid_field(format!("{prefix}message: a next step needs a message"))
            })?;
            Ok(NextStep {
                queue: step.queue,
                message: message_request(message, &prefix)?,
            })
        })
        .collect()
}

/// The answer to one stored message.
pub fn enqueued(out: EnqueueAnswer) -> v1::Enqueued {
    v1::Enqueued {
        message_id: out.message_id.to_string(),
        created: out.created,
        position: out.position,
        state: out.state.map(|state| state.as_str().to_owned()),
        result_json: out.result.map(|result| result.to_string()),
    }
}

fn delivery_body(payload: &Payload) -> v1::delivery::Body {
    match payload.body_kind {
        BodyKind::Json => {
            v1::delivery::Body::Json(String::from_utf8_lossy(&payload.body_bytes).into_owned())
        }
        BodyKind::Bytes => v1::delivery::Body::Bytes(payload.body_bytes.to_vec()),
    }
}

/// A leased message.
pub fn delivery(message: ClaimedMessage) -> v1::Delivery {
    let payload = &message.payload;
    v1::Delivery {
        message_id: message.message_id.to_string(),
        receipt: message.receipt.to_string(),
        body: Some(delivery_body(payload)),
        id: message.idempotency_key,
        key: message.key,
        headers: payload
            .headers
            .iter()
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect(),
        priority: message.priority,
        attempt: message.attempts,
        enqueued_at_ms: message.enqueued_at_ms,
        first_received_at_ms: message.first_received_at_ms,
        lease_expires_at_ms: message.lease_expires_at_ms,
        last_error: message.last_error,
        dead_letter_source_queue: message.dead_letter.map(|info| info.source_queue),
    }
}

/// An ack's per-receipt answer.
pub fn ack_response(out: Acked) -> v1::AckResponse {
    v1::AckResponse {
        acked: out.acked as u64,
        results: out
            .results
            .into_iter()
            .map(|result| v1::AckResult {
                receipt: result.receipt,
                acked: result.stale.is_none(),
                error: result.stale.map(|why| v1::Error {
                    code: sluice_wire::ErrorCode::StaleReceipt.as_str().to_owned(),
                    message: why,
                    details_json: None,
                    retry_after_s: None,
                }),
            })
            .collect(),
        then: out
            .then
            .unwrap_or_default()
            .into_iter()
            .map(enqueued)
            .collect(),
    }
}

/// What a nack did.
pub fn nack_response(nacked: Nacked) -> v1::NackResponse {
    let state = crate::views::nack_state(&nacked).to_owned();
    match nacked {
        Nacked::Retry { visible_at_ms, .. } => v1::NackResponse {
            state,
            visible_at_ms: Some(visible_at_ms),
            dead_letter_queue: None,
        },
        Nacked::DeadLettered { queue } => v1::NackResponse {
            state,
            visible_at_ms: None,
            dead_letter_queue: Some(queue),
        },
    }
}

/// A queue: its numbers, and its settings as the HTTP API shows them to this caller.
pub fn queue(app: &AppState, who: &Who, info: &QueueInfo) -> v1::Queue {
    let out = crate::views::queue_view(app, who.as_ref(), info);
    let depth = &info.depth;
    v1::Queue {
        name: info.name.clone(),
        stats: Some(v1::QueueStats {
            ready: depth.ready,
            delayed: depth.delayed,
            in_flight: depth.in_flight,
            dead_lettered: info.dead_letter_depth,
            oldest_ready_age_ms: depth.oldest_ready_age_ms,
            paused: depth.paused,
            enqueued: depth.counters.enqueued,
            acked: depth.counters.acked,
        }),
        queue_json: serde_json::to_string(&out).unwrap_or_default(),
    }
}

/// A dead letter.
pub fn dead_letter(entry: DeadLetter) -> v1::DeadLetter {
    let DeadLetter {
        status, payload, ..
    } = entry;
    let info = status.dead_letter.as_ref();
    v1::DeadLetter {
        message_id: status.message_id.to_string(),
        body: payload
            .as_ref()
            .map(|payload| match delivery_body(payload) {
                v1::delivery::Body::Json(text) => v1::dead_letter::Body::Json(text),
                v1::delivery::Body::Bytes(bytes) => v1::dead_letter::Body::Bytes(bytes),
            }),
        id: status.idempotency_key.clone(),
        key: status.key.clone(),
        last_error: info
            .and_then(|info| info.last_error.clone())
            .or_else(|| status.last_error.clone()),
        attempts: info.map_or(status.attempts, |info| info.attempts),
        enqueued_at_ms: status.enqueued_at_ms,
        failed_at_ms: info.map_or(status.enqueued_at_ms, |info| info.last_seen_at_ms),
        source_queue: info
            .map(|info| info.source_queue.clone())
            .unwrap_or_default(),
    }
}
