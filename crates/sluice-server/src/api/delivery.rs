//! Delivery routes: receive (with long polling), ack, nack, extend.
//!
//! A long poll registers for its queue's wake-up before each claim, then sleeps until a wake-up,
//! the next time something becomes claimable on its own (a delay or a lease ending), or its
//! deadline. It never polls on a timer.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use sluice_core::dispatch::NackOutcome;
use sluice_core::message::{ClaimedMessage, Receipt};
use sluice_core::queue::limits;
use sluice_core::store::{AckParams, ClaimParams, ExtendParams, NackParams};
use sluice_core::wire::{
    AckIn, AckOut, AckResult, ErrorDetail, ExtendIn, ExtendOut, NackIn, NackOut, ReceiveIn,
    ReceiveOut, ReceivedMessage, time_out,
};
use tokio::time::Instant;

use super::messages::dead_letter_out;
use super::{ApiJson, ApiPath, AppState};
use crate::error::{ApiError, ErrorCode};

/// Most receipts in one ack.
const ACK_RECEIPTS_MAX: usize = 1000;

/// `POST /v1/queues/{queue}/receive`
#[utoipa::path(post, operation_id = "message_receive", path = "/v1/queues/{queue}/receive", params(("queue" = String, Path)), request_body = ReceiveIn,
    responses((status = 200, body = ReceiveOut), (status = 404, body = sluice_core::wire::ErrorBody), (status = 422, body = sluice_core::wire::ErrorBody)))]
pub async fn receive(
    State(app): State<AppState>,
    ApiPath(queue): ApiPath<String>,
    ApiJson(input): ApiJson<ReceiveIn>,
) -> Result<Json<ReceiveOut>, ApiError> {
    let max = input.max.unwrap_or(1);
    if !(1..=limits::RECEIVE_MAX as i64).contains(&max) {
        return Err(ApiError::invalid_field(format!(
            "max must be between 1 and {}, got {max}",
            limits::RECEIVE_MAX
        )));
    }
    let wait_ms = input.wait_ms.unwrap_or(0);
    if !(0..=limits::WAIT_MS_MAX).contains(&wait_ms) {
        return Err(ApiError::invalid_field(format!(
            "wait_ms must be between 0 and {}, got {wait_ms}",
            limits::WAIT_MS_MAX
        )));
    }
    if let Some(ms) = input.visibility_timeout_ms
        && !(1..=limits::VISIBILITY_TIMEOUT_MS_MAX).contains(&ms)
    {
        return Err(ApiError::invalid_field(format!(
            "visibility_timeout_ms must be between 1 and {}, got {ms}",
            limits::VISIBILITY_TIMEOUT_MS_MAX
        )));
    }
    let deadline = Instant::now() + Duration::from_millis(wait_ms as u64);
    let claim = |now_ms| {
        app.store.message_claim(ClaimParams {
            queue: queue.clone(),
            max: max as usize,
            lease_ms: input.visibility_timeout_ms,
            now_ms,
        })
    };
    // The first look goes without a wake-up signal: it answers at once when there are
    // messages, and with 404 for a queue that does not exist, before the notifier keeps
    // anything for the name.
    let first = claim(app.now_ms()).await?;
    if !first.messages.is_empty() || wait_ms == 0 || app.is_shutting_down() {
        return Ok(Json(ReceiveOut {
            messages: first.messages.into_iter().map(received).collect(),
        }));
    }
    let notify = app.store.notifier().queue(&queue);
    loop {
        let woken = notify.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        let now_ms = app.now_ms();
        let claim = claim(now_ms).await?;
        if !claim.messages.is_empty() || Instant::now() >= deadline || app.is_shutting_down() {
            return Ok(Json(ReceiveOut {
                messages: claim.messages.into_iter().map(received).collect(),
            }));
        }
        let wake_at = match claim.next_change_at_ms {
            Some(at) => {
                deadline.min(Instant::now() + Duration::from_millis((at - now_ms).max(1) as u64))
            }
            None => deadline,
        };
        tokio::select! {
            _ = woken => {}
            _ = tokio::time::sleep_until(wake_at) => {}
            // Shutdown: answer with what there is (nothing) at once.
            () = app.shutdown.cancelled() => {}
        }
    }
}

fn received(message: ClaimedMessage) -> ReceivedMessage {
    let payload = &message.payload;
    let (body, body_base64) = super::body_out(payload);
    ReceivedMessage {
        message_id: message.message_id,
        receipt: message.receipt.to_string(),
        body,
        body_base64,
        headers: payload.headers.clone(),
        id: message.idempotency_key,
        key: message.key,
        priority: message.priority,
        attempts: message.attempts,
        enqueued_at: time_out(message.enqueued_at_ms),
        first_received_at: time_out(message.first_received_at_ms),
        lease_expires_at: time_out(message.lease_expires_at_ms),
        last_error: message.last_error,
        dead_letter: message.dead_letter.as_ref().map(dead_letter_out),
    }
}

fn parse_receipt(text: &str) -> Result<Receipt, ApiError> {
    Receipt::parse(text).ok_or_else(|| {
        ApiError::malformed_receipt(format!(
            "{:?} is not a receipt from receive",
            truncate_for_error(text)
        ))
    })
}

fn truncate_for_error(text: &str) -> &str {
    sluice_core::message::cut_utf8(text, 80)
}

fn too_many_receipts(count: usize) -> ApiError {
    ApiError::too_large(format!(
        "receipts: {count} receipts; at most {ACK_RECEIPTS_MAX} per ack"
    ))
}

/// `POST /v1/queues/{queue}/ack`
#[utoipa::path(post, operation_id = "message_ack", path = "/v1/queues/{queue}/ack", params(("queue" = String, Path)), request_body = AckIn,
    responses((status = 200, body = AckOut), (status = 400, body = sluice_core::wire::ErrorBody), (status = 404, description = "the queue does not exist", body = sluice_core::wire::ErrorBody), (status = 409, description = "Some receipt was stale; details hold per-receipt results", body = sluice_core::wire::ErrorBody),
        (status = 413, description = "more than 1000 receipts, or a result over 64 KiB", body = sluice_core::wire::ErrorBody),
        (status = 422, description = "no receipt, or a result with several receipts", body = sluice_core::wire::ErrorBody)))]
pub async fn ack(
    State(app): State<AppState>,
    ApiPath(queue): ApiPath<String>,
    super::ApiBytes(body): super::ApiBytes,
) -> Result<Response, ApiError> {
    // Counted before parsing: a receipt costs several times its text once parsed.
    if let Some(count) = super::json_shape::array_len(&body, "receipts")?
        && count > ACK_RECEIPTS_MAX
    {
        return Err(too_many_receipts(count));
    }
    let input: AckIn = super::parse_json(&body)?;
    let texts: Vec<String> = input
        .receipt
        .into_iter()
        .chain(input.receipts.unwrap_or_default())
        .collect();
    if texts.is_empty() {
        return Err(ApiError::invalid_field(
            "receipts: give receipt or a non-empty receipts list",
        ));
    }
    if texts.len() > ACK_RECEIPTS_MAX {
        return Err(too_many_receipts(texts.len()));
    }
    let receipts = texts
        .iter()
        .map(|text| parse_receipt(text))
        .collect::<Result<Vec<_>, _>>()?;
    let result = match input.result {
        None => None,
        Some(_) if texts.len() != 1 => {
            return Err(ApiError::invalid_field(
                "result: give a result with a single receipt",
            ));
        }
        Some(raw) if raw.get().len() > limits::RESULT_BYTES_MAX => {
            return Err(ApiError::too_large(format!(
                "result: {} bytes; at most {} are kept",
                raw.get().len(),
                limits::RESULT_BYTES_MAX
            )));
        }
        Some(raw) => Some(raw.get().to_owned()),
    };
    let outcomes = app
        .store
        .message_ack(AckParams {
            queue,
            receipts,
            result,
            delivery: None,
            now_ms: app.now_ms(),
        })
        .await?;
    let results: Vec<AckResult> = texts
        .into_iter()
        .zip(outcomes)
        .map(|(receipt, outcome)| match outcome {
            Ok(()) => AckResult {
                receipt,
                acked: true,
                error: None,
            },
            Err(error) => AckResult {
                receipt,
                acked: false,
                error: Some(ErrorDetail::new(ErrorCode::StaleReceipt, error.to_string())),
            },
        })
        .collect();
    let acked = results.iter().filter(|r| r.acked).count();
    if acked == results.len() {
        return Ok((StatusCode::OK, Json(AckOut { acked, results })).into_response());
    }
    let message = format!(
        "{} of {} receipts are stale: those messages are no longer leased with them",
        results.len() - acked,
        results.len()
    );
    Err(ApiError::stale_receipt(message)
        .with_details(serde_json::to_value(AckOut { acked, results }).unwrap_or_default()))
}

/// `POST /v1/queues/{queue}/nack`
#[utoipa::path(post, operation_id = "message_nack", path = "/v1/queues/{queue}/nack", params(("queue" = String, Path)), request_body = NackIn,
    responses((status = 200, body = NackOut), (status = 400, body = sluice_core::wire::ErrorBody), (status = 404, description = "the queue does not exist", body = sluice_core::wire::ErrorBody), (status = 409, body = sluice_core::wire::ErrorBody), (status = 422, body = sluice_core::wire::ErrorBody)))]
pub async fn nack(
    State(app): State<AppState>,
    ApiPath(queue): ApiPath<String>,
    ApiJson(input): ApiJson<NackIn>,
) -> Result<Json<NackOut>, ApiError> {
    let receipt = parse_receipt(&input.receipt)?;
    if let Some(delay) = input.delay_ms
        && !(0..=limits::DELAY_MS_MAX).contains(&delay)
    {
        return Err(ApiError::invalid_field(format!(
            "delay_ms must be between 0 and {}",
            limits::DELAY_MS_MAX
        )));
    }
    let now_ms = app.now_ms();
    let params = NackParams {
        queue,
        receipt,
        error: input.error,
        delay_ms: input.delay_ms,
        permanent: input.permanent.unwrap_or(false),
        delivery: None,
        now_ms,
    };
    let out = match app.store.message_nack(params).await? {
        NackOutcome::Retry { visible_at_ms } => NackOut {
            state: if visible_at_ms > now_ms {
                "delayed"
            } else {
                "ready"
            }
            .into(),
            visible_at: Some(time_out(visible_at_ms)),
            dead_letter_queue: None,
        },
        NackOutcome::DeadLettered { queue } => NackOut {
            state: "dead".into(),
            visible_at: None,
            dead_letter_queue: Some(queue.to_string()),
        },
    };
    Ok(Json(out))
}

/// `POST /v1/queues/{queue}/extend`
#[utoipa::path(post, operation_id = "message_extend", path = "/v1/queues/{queue}/extend", params(("queue" = String, Path)), request_body = ExtendIn,
    responses((status = 200, body = ExtendOut), (status = 400, body = sluice_core::wire::ErrorBody), (status = 404, description = "the queue does not exist", body = sluice_core::wire::ErrorBody), (status = 409, body = sluice_core::wire::ErrorBody), (status = 422, body = sluice_core::wire::ErrorBody)))]
pub async fn extend(
    State(app): State<AppState>,
    ApiPath(queue): ApiPath<String>,
    ApiJson(input): ApiJson<ExtendIn>,
) -> Result<Json<ExtendOut>, ApiError> {
    let receipt = parse_receipt(&input.receipt)?;
    if !(0..=limits::VISIBILITY_TIMEOUT_MS_MAX).contains(&input.visibility_timeout_ms) {
        return Err(ApiError::invalid_field(format!(
            "visibility_timeout_ms must be between 0 and {}",
            limits::VISIBILITY_TIMEOUT_MS_MAX
        )));
    }
    let deadline = app
        .store
        .message_extend(ExtendParams {
            queue,
            receipt,
            timeout_ms: input.visibility_timeout_ms,
            now_ms: app.now_ms(),
        })
        .await?;
    Ok(Json(ExtendOut {
        lease_expires_at: time_out(deadline),
    }))
}

/// The consumer's routes and who may call each.
pub fn routes() -> super::route::Routes {
    use super::route::Routes;
    use crate::auth::Need;
    use utoipa_axum::routes;

    Routes::new("delivery")
        .documented(Need::Consume, routes!(receive))
        .documented(Need::Consume, routes!(ack))
        .documented(Need::Consume, routes!(nack))
        .documented(Need::Consume, routes!(extend))
}
