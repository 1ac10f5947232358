//! Message operations: send, receive, delete, change visibility (docs/design/sqs-compat.md
//! §3.7-3.11, §4), each mapped onto one `ops` call.
//!
//! - A FIFO queue is a `per_key` queue keyed by `MessageGroupId`; its deduplication id (given,
//!   or with `ContentBasedDeduplication`, which is the queue's `dedup = "content"`, the content
//!   key every door makes: `sluice_ops::content_key`) is the idempotency key, so a duplicate
//!   within the window answers with the first message's id, whichever door it came through.
//! - A receipt handle wraps the sluice receipt: deleting is an ack, a visibility change an
//!   extend, and a visibility of 0 gives the lease back without counting a failure.

use std::collections::{BTreeMap, HashSet};

use sha2::{Digest, Sha256};
use sluice_core::message::{BodyKind, ClaimedMessage, Headers, MessageState};
use sluice_core::queue::QueueConfig;
use sluice_ops::{
    AckRequest, Details, MessageRequest, NackRequest, Nacked, OpsError, ReceiveRequest,
};
use sluice_sqs::md5;
use sluice_sqs::request::{
    ChangeMessageVisibility, ChangeMessageVisibilityBatch, DeleteMessage, DeleteMessageBatch,
    MessageToSend, ReceiveMessage, SendMessage, SendMessageBatch,
};
use sluice_sqs::response::{
    BatchResult, BatchResultEntry, BatchResultErrorEntry, Message, ReceiveMessageResult,
    SendMessageBatchResult, SendMessageBatchResultEntry, SendMessageResult,
};
use sluice_sqs::{Action, ErrorKind, Response, SqsError};
use sluice_wire::ErrorCode;

use super::content::{
    self, ATTRIBUTES_HEADER, DEDUPLICATION_HEADER, SENDER_HEADER, SYSTEM_ATTRIBUTES_HEADER,
};
use super::{Ctx, attributes, failure, from_ops, names, queues, receipts};
use crate::auth::Need;
use axum::http::HeaderValue;

type Answer = Result<Response, SqsError>;

/// The attribute a message gets when its body is not UTF-8 (sent through the native API as
/// bytes): the body is then base64.
pub const BODY_ENCODING_ATTRIBUTE: &str = "sluice-body-encoding";

/// The attributes a dead letter is received with: what it failed with, how often, and where
/// (the names the SDKs' SQS backends read).
pub const DEAD_LETTER_ATTRIBUTES: [&str; 4] = [
    "sluice-error",
    "sluice-attempts",
    "sluice-source-queue",
    "sluice-failed-at-ms",
];

/// A message checked and mapped, with the digests its answer carries.
struct Prepared {
    request: MessageRequest,
    digests: Digests,
}

/// The MD5 digests a send answers with.
struct Digests {
    body: String,
    attributes: Option<String>,
    system_attributes: Option<String>,
}

/// Whether a missing `MessageGroupId` is `MissingParameter` (SendMessage) or, in a batch,
/// `InvalidParameterValue`, as SQS answers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Call {
    Single,
    Batch,
}

pub async fn send(ctx: &Ctx<'_>, request: SendMessage) -> Answer {
    let name = ctx.queue_of(&request.queue_url)?;
    ctx.allow(Need::Produce, Some(&name)).await?;
    let mut enqueue = ctx
        .app
        .ops
        .enqueue_to(name.clone())
        .await
        .map_err(from_ops)?;
    let fifo = attributes::is_fifo(&name, enqueue.config());
    let prepared = prepare(ctx, enqueue.config(), fifo, &request.message, Call::Single)?;
    enqueue.add(prepared.request, "").map_err(from_ops)?;
    let out = ctx.app.ops.enqueue(enqueue).await.map_err(from_ops)?;
    let id = out.first().map(|o| o.message_id).unwrap_or_default();
    let digests = prepared.digests;
    Ok(Response::SendMessage(SendMessageResult {
        md5_of_message_body: digests.body,
        md5_of_message_attributes: digests.attributes,
        md5_of_message_system_attributes: digests.system_attributes,
        message_id: id.to_string(),
        sequence_number: fifo.then(|| sequence_number(&id)),
    }))
}

pub async fn send_batch(ctx: &Ctx<'_>, request: SendMessageBatch) -> Answer {
    let ids = request.entries.iter().map(|e| e.id.as_str());
    let name = batch_queue(
        ctx,
        &request.queue_url,
        Need::Produce,
        ids,
        "SendMessageBatchRequestEntry",
    )
    .await?;
    let total: usize = request
        .entries
        .iter()
        .map(|e| {
            e.message.message_body.len()
                + content::check_attributes(&e.message.message_attributes).unwrap_or(0)
        })
        .sum();
    if total > ctx.sqs.config.max_message_bytes {
        return Err(SqsError::new(
            ErrorKind::BatchRequestTooLong,
            format!(
                "Batch requests cannot be longer than {} bytes. You have sent {total} bytes.",
                ctx.sqs.config.max_message_bytes
            ),
        ));
    }
    let mut enqueue = ctx
        .app
        .ops
        .enqueue_to(name.clone())
        .await
        .map_err(from_ops)?;
    let fifo = attributes::is_fifo(&name, enqueue.config());
    let mut failed = Vec::new();
    let mut accepted = Vec::new();
    for entry in &request.entries {
        let prepared = match prepare(ctx, enqueue.config(), fifo, &entry.message, Call::Batch) {
            Ok(prepared) => prepared,
            // A FIFO entry without its group fails the whole request, as SQS does.
            Err(error) if fifo && entry.message.message_group_id.is_none() => return Err(error),
            Err(error) => {
                failed.push(entry_error(&entry.id, &error));
                continue;
            }
        };
        match enqueue.add(prepared.request, "") {
            Ok(()) => accepted.push((entry.id.clone(), prepared.digests)),
            Err(error) => failed.push(entry_error(&entry.id, &from_ops(error))),
        }
    }
    // Entries succeed or fail one by one, as AWS documents: one refused by the queue's
    // schema fails alone, like one refused for its size (`Ops::enqueue_each`).
    let outs = if enqueue.is_empty() {
        Vec::new()
    } else {
        ctx.app.ops.enqueue_each(enqueue).await.map_err(from_ops)?
    };
    let mut successful = Vec::with_capacity(outs.len());
    for ((id, digests), out) in accepted.into_iter().zip(outs) {
        match out {
            Ok(out) => successful.push(SendMessageBatchResultEntry {
                id,
                message_id: out.message_id.to_string(),
                md5_of_message_body: digests.body,
                md5_of_message_attributes: digests.attributes,
                md5_of_message_system_attributes: digests.system_attributes,
                sequence_number: fifo.then(|| sequence_number(&out.message_id)),
            }),
            Err(error) => failed.push(entry_error(&id, &from_ops(error))),
        }
    }
    Ok(Response::SendMessageBatch(SendMessageBatchResult {
        successful,
        failed,
    }))
}

/// Checks one message as SQS does and maps it: group → ordering key, deduplication id →
/// idempotency key, attributes → headers.
fn prepare(
    ctx: &Ctx<'_>,
    config: &QueueConfig,
    fifo: bool,
    message: &MessageToSend,
    call: Call,
) -> Result<Prepared, SqsError> {
    let body = &message.message_body;
    content::check_body(body)?;
    let attributes_size = content::check_attributes(&message.message_attributes)?;
    if let Some(name) = message
        .message_system_attributes
        .keys()
        .find(|name| *name != "AWSTraceHeader")
    {
        return Err(invalid(format!(
            "Message system attribute name '{name}' is invalid. The only supported name is AWSTraceHeader."
        )));
    }
    if body.len() + attributes_size > config.max_message_bytes {
        return Err(invalid(format!(
            "One or more parameters are invalid. Reason: Message must be shorter than {} bytes.",
            config.max_message_bytes
        )));
    }
    let delay_ms = match message.delay_seconds {
        Some(seconds) if !(0..=900).contains(&seconds) => {
            return Err(invalid(format!(
                "Value {seconds} for parameter DelaySeconds is invalid. Reason: DelaySeconds must be >= 0 and <= 900."
            )));
        }
        Some(seconds) if fifo && seconds != 0 => {
            return Err(invalid(format!(
                "Value {seconds} for parameter DelaySeconds is invalid. Reason: The request include parameter that is not valid for this queue type."
            )));
        }
        Some(seconds) => Some(seconds * 1000),
        None => None,
    };
    if let Some(group) = &message.message_group_id {
        check_token("MessageGroupId", group)?;
    }
    let group = match (&message.message_group_id, fifo, call) {
        (None, true, Call::Single) => return Err(SqsError::missing_parameter("MessageGroupId")),
        (None, true, Call::Batch) => {
            return Err(invalid(
                "The request must contain the parameter MessageGroupId.",
            ));
        }
        (group, _, _) => group.clone(),
    };
    let deduplication_id = match (&message.message_deduplication_id, fifo) {
        (Some(id), false) => {
            return Err(invalid(format!(
                "Value {id} for parameter MessageDeduplicationId is invalid. Reason: The request includes a parameter that is not valid for this queue type."
            )));
        }
        (Some(id), true) => {
            check_token("MessageDeduplicationId", id)?;
            Some(id.clone())
        }
        // The queue's own `dedup: "content"` is SQS's ContentBasedDeduplication here. A client
        // is shown the body's digest as its deduplication id, as AWS shows it.
        (None, true) if attributes::content_based(config) => {
            Some(hex(&Sha256::digest(body.as_bytes())))
        }
        (None, true) => {
            return Err(invalid(
                "The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly",
            ));
        }
        (None, false) => None,
    };
    let group_scope = attributes::kept(config, "DeduplicationScope") == Some("messageGroup");
    let idempotency_key = match (&message.message_deduplication_id, &deduplication_id) {
        // Content-based: the one content key of every door (`sluice_ops::content_key`), so a
        // body sent here and natively is one message. Scope `messageGroup` keys it by the
        // group, as a native message is keyed by its ordering key; the default scope (the
        // queue) leaves the group out, as AWS does.
        (None, Some(_)) => Some(sluice_ops::content_key(
            group.as_deref().filter(|_| group_scope),
            body.as_bytes(),
        )),
        // Scope `messageGroup` makes the same id in two groups two messages.
        (Some(id), _) => Some(match &group {
            Some(group) if group_scope => format!("{}:{group}{id}", group.len()),
            _ => id.clone(),
        }),
        (None, None) => None,
    };
    let mut headers = Headers::new();
    content::store(&mut headers, ATTRIBUTES_HEADER, &message.message_attributes);
    content::store(
        &mut headers,
        SYSTEM_ATTRIBUTES_HEADER,
        &message.message_system_attributes,
    );
    // Without access control every sender is the account, which a receive assumes when the
    // header is absent: no bytes stored per message for it.
    if ctx.caller.is_some() {
        headers.insert(SENDER_HEADER.to_owned(), ctx.sender_id());
    }
    if let Some(id) = &deduplication_id {
        headers.insert(DEDUPLICATION_HEADER.to_owned(), id.clone());
    }
    let kind = if sluice_ops::check_json_body(body.as_bytes()).is_ok() {
        BodyKind::Json
    } else {
        BodyKind::Bytes
    };
    Ok(Prepared {
        request: MessageRequest {
            body: (body.as_bytes().to_vec(), kind),
            id: idempotency_key,
            key: group,
            headers: Some(headers),
            priority: None,
            delay_ms,
            not_before: None,
        },
        digests: Digests {
            body: md5::of_body(body),
            attributes: md5::of_attributes(&message.message_attributes),
            system_attributes: md5::of_attributes(&message.message_system_attributes),
        },
    })
}

pub async fn receive(ctx: &Ctx<'_>, request: ReceiveMessage) -> Answer {
    let name = ctx.queue_of(&request.queue_url)?;
    ctx.allow(Need::Consume, Some(&name)).await?;
    let info = queues::queue(ctx, &name).await?;
    let max_entries = ctx.sqs.config.max_batch_entries as i64;
    let max = request.max_number_of_messages.unwrap_or(1);
    if !(1..=max_entries).contains(&max) {
        return Err(invalid(format!(
            "Value {max} for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and {max_entries}, if provided."
        )));
    }
    let wait = match request.wait_time_seconds {
        Some(wait) => wait,
        None => attributes::kept(&info.config, "ReceiveMessageWaitTimeSeconds")
            .and_then(|text| text.parse().ok())
            .unwrap_or(0),
    };
    if !(0..=20).contains(&wait) {
        return Err(invalid(format!(
            "Value {wait} for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided."
        )));
    }
    if let Some(seconds) = request.visibility_timeout
        && !(0..=43_200).contains(&seconds)
    {
        return Err(invalid(format!(
            "Value {seconds} for parameter VisibilityTimeout is invalid. Reason: Must be >= 0 and <= 43200, if provided."
        )));
    }
    let fifo = attributes::is_fifo(&name, &info.config);
    let attempt = match &request.receive_request_attempt_id {
        Some(attempt) if fifo => {
            check_token("ReceiveRequestAttemptId", attempt)?;
            Some(attempt.as_str())
        }
        _ => None,
    };
    let visibility_ms = request.visibility_timeout.map(|s| (s * 1000).max(1));
    if let Some(attempt) = attempt
        && let Some(messages) = retried(ctx, &name, attempt, visibility_ms, &info.config).await
    {
        return Ok(Response::ReceiveMessage(ReceiveMessageResult { messages }));
    }
    let claimed = ctx
        .app
        .ops
        .receive(ReceiveRequest {
            lane_runs: fifo,
            queue: name.clone(),
            max: Some(max),
            wait_ms: Some(wait * 1000),
            // A lease of 0 ms cannot be: 0 s is the shortest lease, 1 ms.
            visibility_timeout_ms: visibility_ms,
        })
        .await
        .map_err(from_ops)?;
    let system_names: Vec<&String> = request
        .attribute_names
        .iter()
        .chain(&request.message_system_attribute_names)
        .collect();
    let messages = claimed
        .into_iter()
        .map(|message| {
            render(
                ctx,
                &name,
                fifo,
                message,
                &system_names,
                &request.message_attribute_names,
            )
        })
        .collect::<Vec<_>>();
    if let Some(attempt) = attempt
        && !messages.is_empty()
    {
        ctx.sqs
            .receive_attempts
            .put(&name, attempt, messages.clone());
    }
    Ok(Response::ReceiveMessage(ReceiveMessageResult { messages }))
}

/// The messages of an earlier receive with the same attempt id, when it still holds every one
/// of them: their leases are extended by the visibility timeout again. Otherwise the attempt
/// is forgotten and the receive goes on as a new one.
async fn retried(
    ctx: &Ctx<'_>,
    queue: &str,
    attempt: &str,
    visibility_ms: Option<i64>,
    config: &QueueConfig,
) -> Option<Vec<Message>> {
    let messages = ctx.sqs.receive_attempts.get(queue, attempt)?;
    let lease_ms = visibility_ms.unwrap_or(config.visibility_timeout_ms);
    for message in &messages {
        let held = match receipts::decode(queue, &message.receipt_handle) {
            Ok(receipt) => ctx
                .app
                .ops
                .extend(queue.to_owned(), &receipt, lease_ms)
                .await
                .is_ok(),
            Err(_) => false,
        };
        if !held {
            ctx.sqs.receive_attempts.forget(queue, attempt);
            return None;
        }
    }
    Some(messages)
}

/// A claimed message as SQS shows it, with the system and message attributes asked for.
fn render(
    ctx: &Ctx<'_>,
    queue: &str,
    fifo: bool,
    message: ClaimedMessage,
    system_names: &[&String],
    attribute_names: &[String],
) -> Message {
    let headers = &message.payload.headers;
    let mut stored = content::load(headers, ATTRIBUTES_HEADER);
    let body = match String::from_utf8(message.payload.body_bytes.clone()) {
        Ok(text) => text,
        Err(_) => {
            use base64::Engine;
            stored.insert(
                BODY_ENCODING_ATTRIBUTE.to_owned(),
                sluice_sqs::request::MessageAttributeValue {
                    data_type: "String".into(),
                    string_value: Some("base64".into()),
                    ..Default::default()
                },
            );
            base64::engine::general_purpose::STANDARD.encode(&message.payload.body_bytes)
        }
    };
    if let Some(dead) = &message.dead_letter {
        let [error, attempts, source, failed_at] = DEAD_LETTER_ATTRIBUTES;
        let value = |data_type: &str, text: String| sluice_sqs::request::MessageAttributeValue {
            data_type: data_type.into(),
            string_value: Some(text),
            ..Default::default()
        };
        let mut put = |name: &str, value| {
            stored.entry(name.to_owned()).or_insert(value);
        };
        if let Some(text) = dead.last_error.clone().filter(|text| !text.is_empty()) {
            put(error, value("String", text));
        }
        put(attempts, value("Number", dead.attempts.to_string()));
        put(source, value("String", dead.source_queue.clone()));
        put(failed_at, value("Number", dead.last_seen_at_ms.to_string()));
    }
    let message_attributes = content::filter(stored, attribute_names);
    let system = content::load(headers, SYSTEM_ATTRIBUTES_HEADER);
    let mut all = BTreeMap::new();
    let mut put = |name: &str, value: String| {
        all.insert(name.to_owned(), value);
    };
    put(
        "SenderId",
        headers
            .get(SENDER_HEADER)
            .cloned()
            .unwrap_or_else(|| ctx.sqs.config.account_id.clone()),
    );
    put("SentTimestamp", message.enqueued_at_ms.to_string());
    put("ApproximateReceiveCount", message.attempts.to_string());
    put(
        "ApproximateFirstReceiveTimestamp",
        message.first_received_at_ms.to_string(),
    );
    if let Some(group) = &message.key {
        put("MessageGroupId", group.clone());
    }
    if fifo {
        if let Some(id) = headers.get(DEDUPLICATION_HEADER) {
            put("MessageDeduplicationId", id.clone());
        }
        put("SequenceNumber", sequence_number(&message.message_id));
    }
    if let Some(trace) = system
        .get("AWSTraceHeader")
        .and_then(|v| v.string_value.clone())
    {
        put("AWSTraceHeader", trace);
    }
    if let Some(dead) = &message.dead_letter {
        put(
            "DeadLetterQueueSourceArn",
            names::queue_arn(&ctx.sqs.config, &dead.source_queue),
        );
    }
    if !system_names.iter().any(|n| *n == "All") {
        all.retain(|name, _| system_names.contains(&name));
    }
    Message {
        message_id: message.message_id.to_string(),
        receipt_handle: receipts::encode(queue, &message.receipt),
        md5_of_body: md5::of_body(&body),
        body,
        attributes: all,
        md5_of_message_attributes: md5::of_attributes(&message_attributes),
        message_attributes,
    }
}

pub async fn delete(ctx: &Ctx<'_>, request: DeleteMessage) -> Answer {
    let name = ctx.queue_of(&request.queue_url)?;
    ctx.allow(Need::Consume, Some(&name)).await?;
    let receipt = receipts::decode(&name, &request.receipt_handle)?;
    let fifo = is_fifo_queue(ctx, &name).await?;
    if fifo {
        refuse_expired_fifo_handle(ctx, &name, &receipt, &request.receipt_handle).await?;
    }
    let outcome = ctx
        .app
        .ops
        .ack(AckRequest {
            queue: name.clone(),
            receipts: vec![receipt.clone()],
            result: None,
            then: Vec::new(),
        })
        .await;
    match outcome {
        Ok(_) => {}
        Err(error) if error.code == ErrorCode::StaleReceipt => {
            stale_delete(ctx, fifo, &name, &receipt, &request.receipt_handle).await?;
        }
        Err(error) => return Err(from_ops(error)),
    }
    Ok(Response::Empty(Action::DeleteMessage))
}

pub async fn delete_batch(ctx: &Ctx<'_>, request: DeleteMessageBatch) -> Answer {
    let ids = request.entries.iter().map(|e| e.id.as_str());
    let name = batch_queue(
        ctx,
        &request.queue_url,
        Need::Consume,
        ids,
        "DeleteMessageBatchRequestEntry",
    )
    .await?;
    let fifo = is_fifo_queue(ctx, &name).await?;
    let mut failed = Vec::new();
    let mut valid = Vec::new();
    for entry in &request.entries {
        let checked = match receipts::decode(&name, &entry.receipt_handle) {
            Ok(receipt) if !fifo => Ok(receipt),
            Ok(receipt) => refuse_expired_fifo_handle(ctx, &name, &receipt, &entry.receipt_handle)
                .await
                .map(|()| receipt),
            Err(error) => Err(error),
        };
        match checked {
            Ok(receipt) => valid.push((entry, receipt)),
            Err(error) => failed.push(entry_error(&entry.id, &error)),
        }
    }
    let acked: Vec<bool> = if valid.is_empty() {
        Vec::new()
    } else {
        let outcome = ctx
            .app
            .ops
            .ack(AckRequest {
                queue: name.clone(),
                receipts: valid.iter().map(|(_, r)| r.clone()).collect(),
                result: None,
                then: Vec::new(),
            })
            .await;
        match outcome {
            Ok(out) => out.results.iter().map(|r| r.stale.is_none()).collect(),
            Err(error) => per_receipt(error, valid.len())?,
        }
    };
    let mut successful = Vec::new();
    for ((entry, receipt), acked) in valid.into_iter().zip(acked) {
        if !acked
            && let Err(error) =
                stale_delete(ctx, fifo, &name, &receipt, &entry.receipt_handle).await
        {
            failed.push(entry_error(&entry.id, &error));
            continue;
        }
        successful.push(BatchResultEntry {
            id: entry.id.clone(),
        });
    }
    Ok(Response::DeleteMessageBatch(BatchResult {
        successful,
        failed,
    }))
}

/// Which receipts of a multi-receipt ack were acked, from a refusal that lists them.
fn per_receipt(error: OpsError, count: usize) -> Result<Vec<bool>, SqsError> {
    if error.code != ErrorCode::StaleReceipt {
        return Err(from_ops(error));
    }
    let Some(Details::Acks(out)) = &error.details else {
        return Err(from_ops(error));
    };
    let acked: Vec<bool> = out.results.iter().map(|r| r.stale.is_none()).collect();
    Ok(if acked.len() == count {
        acked
    } else {
        vec![false; count]
    })
}

/// Whether a delete's queue is FIFO, looked up once per request; only a `.fifo` name can be
/// one, so other deletes need no lookup.
async fn is_fifo_queue(ctx: &Ctx<'_>, queue: &str) -> Result<bool, SqsError> {
    Ok(queue.ends_with(".fifo")
        && attributes::is_fifo(queue, &queues::queue(ctx, queue).await?.config))
}

/// On a FIFO queue a handle whose lease ran out is expired even when nobody received the
/// message since (SQS's rule: another consumer may hold the group by now), so it deletes
/// nothing. Standard queues let it delete, as SQS's do (the index acks such a receipt).
async fn refuse_expired_fifo_handle(
    ctx: &Ctx<'_>,
    queue: &str,
    receipt: &str,
    handle: &str,
) -> Result<(), SqsError> {
    let id = receipt.split('.').next().unwrap_or_default();
    match ctx.app.ops.message_by_id(queue.to_owned(), id).await {
        // Leases run out at their deadline, whether or not the index has noticed yet (it
        // notices at the next claim or maintenance tick).
        Ok(status)
            if status.queue == queue
                && !status.state.is_final()
                && (status.state != MessageState::InFlight
                    || status
                        .lease_expires_at_ms
                        .is_some_and(|deadline| deadline <= ctx.now_ms())) =>
        {
            Err(expired(handle))
        }
        _ => Ok(()),
    }
}

fn expired(handle: &str) -> SqsError {
    invalid(format!(
        "Value {handle} for parameter ReceiptHandle is invalid. Reason: The receipt handle has expired."
    ))
}

/// A delete whose handle no longer holds the message. On a standard queue that succeeds, as
/// SQS's does: the message is gone already, or someone who received it since holds it, and
/// the handle (fenced) deletes nothing. On a FIFO queue a handle whose message is still there
/// has expired, as SQS answers, since another consumer may now hold the group.
async fn stale_delete(
    ctx: &Ctx<'_>,
    fifo: bool,
    queue: &str,
    receipt: &str,
    handle: &str,
) -> Result<(), SqsError> {
    if !fifo {
        return Ok(());
    }
    let id = receipt.split('.').next().unwrap_or_default();
    match ctx.app.ops.message_by_id(queue.to_owned(), id).await {
        Ok(status) if !status.state.is_final() && status.queue == queue => Err(expired(handle)),
        _ => Ok(()),
    }
}

pub async fn change_visibility(ctx: &Ctx<'_>, request: ChangeMessageVisibility) -> Answer {
    let name = ctx.queue_of(&request.queue_url)?;
    ctx.allow(Need::Consume, Some(&name)).await?;
    if let Some(failure) = &ctx.failure {
        report_failure(
            ctx,
            &name,
            &request.receipt_handle,
            request.visibility_timeout,
            failure,
        )
        .await?;
        return Ok(Response::Empty(Action::ChangeMessageVisibility));
    }
    set_visibility(
        ctx,
        &name,
        &request.receipt_handle,
        Some(request.visibility_timeout),
    )
    .await?;
    Ok(Response::Empty(Action::ChangeMessageVisibility))
}

pub async fn change_visibility_batch(
    ctx: &Ctx<'_>,
    request: ChangeMessageVisibilityBatch,
) -> Answer {
    let ids = request.entries.iter().map(|e| e.id.as_str());
    let name = batch_queue(
        ctx,
        &request.queue_url,
        Need::Consume,
        ids,
        "ChangeMessageVisibilityBatchRequestEntry",
    )
    .await?;
    let mut successful = Vec::new();
    let mut failed = Vec::new();
    for entry in &request.entries {
        match set_visibility(ctx, &name, &entry.receipt_handle, entry.visibility_timeout).await {
            Ok(()) => successful.push(BatchResultEntry {
                id: entry.id.clone(),
            }),
            Err(error) => failed.push(entry_error(&entry.id, &error)),
        }
    }
    Ok(Response::ChangeMessageVisibilityBatch(BatchResult {
        successful,
        failed,
    }))
}

/// A failed attempt reported with a visibility change (`failure.rs`): a nack, retried after
/// `seconds` or dead-lettered; the answer names the outcome in a header.
async fn report_failure(
    ctx: &Ctx<'_>,
    queue: &str,
    handle: &str,
    seconds: i64,
    failure: &failure::Reported,
) -> Result<(), SqsError> {
    let receipt = receipts::decode(queue, handle)?;
    check_visibility(seconds)?;
    let nacked = ctx
        .app
        .ops
        .nack(NackRequest {
            queue: queue.to_owned(),
            receipt,
            error: Some(failure.error.clone()),
            delay_ms: Some(seconds * 1000),
            permanent: failure.permanent,
        })
        .await
        .map_err(|error| visibility_error(handle, error))?;
    let outcome = match nacked {
        Nacked::Retry { .. } => "retried",
        Nacked::DeadLettered { .. } => "dead-lettered",
    };
    ctx.reply_headers
        .lock()
        .push((failure::OUTCOME_HEADER, HeaderValue::from_static(outcome)));
    Ok(())
}

/// A new visibility timeout from now; 0 gives the lease back at once, not as a failure.
async fn set_visibility(
    ctx: &Ctx<'_>,
    queue: &str,
    handle: &str,
    seconds: Option<i64>,
) -> Result<(), SqsError> {
    let receipt = receipts::decode(queue, handle)?;
    let seconds = seconds.unwrap_or(0);
    check_visibility(seconds)?;
    // 0 releases the message (`Ops::extend`): ready at once, no failure counted.
    ctx.app
        .ops
        .extend(queue.to_owned(), &receipt, seconds * 1000)
        .await
        .map(|_| ())
        .map_err(|error| visibility_error(handle, error))
}

/// A `VisibilityTimeout` SQS takes: 0 to 12 hours.
fn check_visibility(seconds: i64) -> Result<(), SqsError> {
    if (0..=43_200).contains(&seconds) {
        return Ok(());
    }
    Err(invalid(format!(
        "Value {seconds} for parameter VisibilityTimeout is invalid. Reason: Must be between 0 and 43200."
    )))
}

/// A visibility change refused: a handle no longer holding its message is SQS's
/// `InvalidParameterValue`.
fn visibility_error(handle: &str, error: OpsError) -> SqsError {
    match error.code {
        ErrorCode::StaleReceipt | ErrorCode::MessageNotFound => invalid(format!(
            "Value {handle} for parameter ReceiptHandle is invalid. Reason: Message does not exist or is not available for visibility timeout change."
        )),
        _ => from_ops(error),
    }
}

/// A batch request's queue, once the caller may `need` it and the entries pass
/// [`check_batch`].
async fn batch_queue<'e>(
    ctx: &Ctx<'_>,
    url: &str,
    need: Need,
    ids: impl ExactSizeIterator<Item = &'e str>,
    entry_name: &str,
) -> Result<String, SqsError> {
    let name = ctx.queue_of(url)?;
    ctx.allow(need, Some(&name)).await?;
    check_batch(ctx, ids, entry_name)?;
    Ok(name)
}

/// The checks of every batch request: at least one entry, at most the limit, ids of
/// `[A-Za-z0-9_-]{1,80}`, no id twice.
fn check_batch<'e>(
    ctx: &Ctx<'_>,
    ids: impl ExactSizeIterator<Item = &'e str>,
    entry_name: &str,
) -> Result<(), SqsError> {
    let count = ids.len();
    let max = ctx.sqs.config.max_batch_entries;
    if count == 0 {
        return Err(SqsError::new(
            ErrorKind::EmptyBatchRequest,
            format!("There should be at least one {entry_name} in the request."),
        ));
    }
    if count > max {
        return Err(SqsError::new(
            ErrorKind::TooManyEntriesInBatchRequest,
            format!("Maximum number of entries per request are {max}. You have sent {count}."),
        ));
    }
    let mut seen = HashSet::new();
    for id in ids {
        let valid = !id.is_empty()
            && id.len() <= 80
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !valid {
            return Err(SqsError::new(
                ErrorKind::InvalidBatchEntryId,
                "A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long.",
            ));
        }
        if !seen.insert(id) {
            return Err(SqsError::new(
                ErrorKind::BatchEntryIdsNotDistinct,
                format!("Id {id} repeated."),
            ));
        }
    }
    Ok(())
}

/// `MessageGroupId` and `MessageDeduplicationId`: 1 to 128 of alphanumerics and punctuation.
fn check_token(parameter: &str, value: &str) -> Result<(), SqsError> {
    let valid = !value.is_empty()
        && value.len() <= 128
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b.is_ascii_punctuation());
    if valid {
        Ok(())
    } else {
        Err(invalid(format!(
            "Value {value} for parameter {parameter} is invalid. Reason: {parameter} can only include alphanumeric and punctuation characters. 1 to 128 in length."
        )))
    }
}

fn entry_error(id: &str, error: &SqsError) -> BatchResultErrorEntry {
    BatchResultErrorEntry {
        id: id.to_owned(),
        sender_fault: !error.kind.status().is_server_error(),
        code: error.kind.code().to_owned(),
        message: Some(error.message.clone()),
    }
}

/// A FIFO message's `SequenceNumber`: its id as a number. Ids sort by enqueue time and then
/// enqueue order, so the number grows with every message of the queue, hence of each group.
fn sequence_number(id: &uuid::Uuid) -> String {
    u128::from_be_bytes(*id.as_bytes()).to_string()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn invalid(message: impl Into<String>) -> SqsError {
    SqsError::new(ErrorKind::InvalidParameterValue, message)
}
