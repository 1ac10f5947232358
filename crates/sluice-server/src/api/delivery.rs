//! Delivery routes: receive (with long polling), ack, nack, extend. The rules (limits, the
//! long poll, per-receipt ack answers) are [`sluice_ops::Ops`]'s; these parse and render.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use sluice_core::message::ClaimedMessage;
use sluice_ops::{
    ACK_RECEIPTS_MAX, AckRequest, NEXT_STEPS_MAX, NackRequest, NextStep, ReceiveRequest,
    too_many_next_steps, too_many_receipts,
};
use sluice_wire::{
    AckIn, AckOut, ExtendIn, ExtendOut, NackIn, NackOut, ReceiveIn, ReceiveOut, ReceivedMessage,
    format_rfc3339,
};

use super::{ApiJson, ApiPath, AppState};
use crate::error::ApiError;
use crate::views::dead_letter_out;

/// `POST /v1/queues/{queue}/receive`
#[utoipa::path(post, operation_id = "message_receive", path = "/v1/queues/{queue}/receive", params(("queue" = String, Path)), request_body = ReceiveIn,
    responses((status = 200, body = ReceiveOut), (status = 404, body = sluice_wire::ErrorBody), (status = 422, body = sluice_wire::ErrorBody)))]
pub async fn receive(
    State(app): State<AppState>,
    ApiPath(queue): ApiPath<String>,
    ApiJson(input): ApiJson<ReceiveIn>,
) -> Result<Json<ReceiveOut>, ApiError> {
    let messages = app
        .ops
        .receive(ReceiveRequest {
            lane_runs: false,
            queue,
            max: input.max,
            wait_ms: input.wait_ms,
            visibility_timeout_ms: input.visibility_timeout_ms,
        })
        .await?;
    Ok(Json(ReceiveOut {
        messages: messages.into_iter().map(received).collect(),
    }))
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
        enqueued_at: format_rfc3339(message.enqueued_at_ms),
        first_received_at: format_rfc3339(message.first_received_at_ms),
        lease_expires_at: format_rfc3339(message.lease_expires_at_ms),
        last_error: message.last_error,
        dead_letter: message.dead_letter.as_ref().map(dead_letter_out),
    }
}

/// `POST /v1/queues/{queue}/ack`
#[utoipa::path(post, operation_id = "message_ack", path = "/v1/queues/{queue}/ack", params(("queue" = String, Path)), request_body = AckIn,
    responses((status = 200, body = AckOut), (status = 400, body = sluice_wire::ErrorBody), (status = 404, description = "the queue does not exist", body = sluice_wire::ErrorBody), (status = 409, description = "Some receipt was stale; details hold per-receipt results", body = sluice_wire::ErrorBody),
        (status = 413, description = "more than 1000 receipts, or a result over 64 KiB", body = sluice_wire::ErrorBody),
        (status = 422, description = "no receipt, or a result with several receipts", body = sluice_wire::ErrorBody)))]
pub async fn ack(
    State(app): State<AppState>,
    ApiPath(queue): ApiPath<String>,
    caller: Option<axum::Extension<std::sync::Arc<crate::auth::Caller>>>,
    super::ApiBytes(body): super::ApiBytes,
) -> Result<Response, ApiError> {
    // Counted before parsing: a receipt costs several times its text once parsed.
    if let Some(count) = super::json_shape::array_len(&body, "receipts")?
        && count > ACK_RECEIPTS_MAX
    {
        return Err(too_many_receipts(count).into());
    }
    // A next step is a message: its headers are counted before parsing too.
    if let Some((count, too_many_headers)) =
        super::json_shape::message_list(&body, "then", sluice_core::queue::limits::HEADERS_MAX)?
    {
        if count > NEXT_STEPS_MAX {
            return Err(too_many_next_steps(count).into());
        }
        if let Some((position, headers)) = too_many_headers {
            return Err(super::messages::too_many_headers(
                &format!("then[{position}]."),
                headers,
            ));
        }
    }
    let input: AckIn = super::parse_json(&body)?;
    let receipts = input
        .receipt
        .into_iter()
        .chain(input.receipts.unwrap_or_default())
        .collect();
    let mut then = Vec::new();
    for (index, step) in input.then.unwrap_or_default().into_iter().enumerate() {
        let (queue, message) = step.split();
        let prefix = format!("then[{index}].");
        then.push(NextStep {
            queue,
            message: super::messages::message_request(message, &prefix)?,
        });
    }
    // The route let the caller consume here; a next step is a produce to its queue.
    crate::auth::check_next_steps(&app, caller.as_deref().map(|caller| &**caller), &then).await?;
    let acked = app
        .ops
        .ack(AckRequest {
            queue,
            receipts,
            result: input.result.map(|raw| raw.get().to_owned()),
            then,
        })
        .await?;
    Ok((StatusCode::OK, Json(crate::views::ack_out(acked))).into_response())
}

/// `POST /v1/queues/{queue}/nack`
#[utoipa::path(post, operation_id = "message_nack", path = "/v1/queues/{queue}/nack", params(("queue" = String, Path)), request_body = NackIn,
    responses((status = 200, body = NackOut), (status = 400, body = sluice_wire::ErrorBody), (status = 404, description = "the queue does not exist", body = sluice_wire::ErrorBody), (status = 409, body = sluice_wire::ErrorBody), (status = 422, body = sluice_wire::ErrorBody)))]
pub async fn nack(
    State(app): State<AppState>,
    ApiPath(queue): ApiPath<String>,
    ApiJson(input): ApiJson<NackIn>,
) -> Result<Json<NackOut>, ApiError> {
    let nacked = app
        .ops
        .nack(NackRequest {
            queue,
            receipt: input.receipt,
            error: input.error,
            delay_ms: input.delay_ms,
            permanent: input.permanent.unwrap_or(false),
        })
        .await?;
    Ok(Json(crate::views::nack_out(nacked)))
}

/// `POST /v1/queues/{queue}/extend`
#[utoipa::path(post, operation_id = "message_extend", path = "/v1/queues/{queue}/extend", params(("queue" = String, Path)), request_body = ExtendIn,
    responses((status = 200, body = ExtendOut), (status = 400, body = sluice_wire::ErrorBody), (status = 404, description = "the queue does not exist", body = sluice_wire::ErrorBody), (status = 409, body = sluice_wire::ErrorBody), (status = 422, body = sluice_wire::ErrorBody)))]
pub async fn extend(
    State(app): State<AppState>,
    ApiPath(queue): ApiPath<String>,
    ApiJson(input): ApiJson<ExtendIn>,
) -> Result<Json<ExtendOut>, ApiError> {
    if input.unstarted {
        if input.visibility_timeout_ms != 0 {
            return Err(sluice_ops::OpsError::invalid_field(
                "unstarted: only with visibility_timeout_ms 0 (a release)",
            )
            .into());
        }
        app.ops.release(queue, &input.receipt, true).await?;
        return Ok(Json(ExtendOut {
            lease_expires_at: format_rfc3339(app.now_ms()),
        }));
    }
    let lease_expires_at_ms = app
        .ops
        .extend(queue, &input.receipt, input.visibility_timeout_ms)
        .await?;
    Ok(Json(ExtendOut {
        lease_expires_at: format_rfc3339(lease_expires_at_ms),
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
