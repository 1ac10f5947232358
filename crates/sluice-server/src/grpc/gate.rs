//! What a gRPC call passes before tonic decodes a byte of it (issue 30, findings 2 and 3).
//!
//! tonic buffers a message until its last byte and decodes it before the handler runs, so the
//! handler's own checks come too late for two attacks:
//! - **Decoding before the token**: 16 MB of empty messages decode to gigabytes. So the token
//!   is checked here, on the headers: a call without a valid one is answered UNAUTHENTICATED
//!   and its body never read. (What the token may do is still decided per call, by the
//!   handler, once it knows the queue.)
//! - **Half-sent messages held forever**: a call that sends all but the last byte of a 16 MB
//!   message held it without end. So the request body is [`Gated`]: it follows the gRPC
//!   framing (a 5-byte prefix with the length, then the message) and, while a message is
//!   partly arrived, charges its bytes to `[limits] body_bytes_in_flight` (and the peer's
//!   share) and holds it to the same pace as an HTTP body: no pause longer than
//!   `body_read_timeout_ms`, and `body_min_bytes_per_s` on average after that grace. Between
//!   messages a stream may idle (a pull stream waits for messages for minutes) and holds
//!   nothing. A complete message's charge is kept until the next message starts arriving (or
//!   the call ends): it is then tonic's and the handler's, and a publish stream charges what it
//!   holds again itself.

use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use axum::body::{Bytes, HttpBody};
use hyper::body::{Frame, Incoming, SizeHint};
use sluice_ops::OpsError;
use sluice_wire::ErrorCode;
use tokio::time::{Instant, Sleep};
use tonic::Status;

use crate::body_budget::{BodyBudget, Charge, next_deadline};
use crate::state::AppState;

/// The length prefix of every gRPC message: a compression flag and a big-endian length.
const PREFIX_BYTES: usize = 5;
/// Most top-level fields one request message may have. Every list of the API is capped lower
/// (a batch's 1,000 messages, an ack's 1,000 receipts and 100 next steps), and an element
/// decodes to many times its wire size (an empty `OutgoingMessage` is 2 bytes and a few
/// hundred decoded): counted as the bytes arrive, before prost builds one.
const TOP_LEVEL_FIELDS_MAX: usize = sluice_core::queue::limits::BATCH_MESSAGES_MAX + 128;

/// UNAUTHENTICATED for a call without a valid token, judged on its headers alone; `None` when
/// the call may go on (access control off, or a token that names a caller).
pub fn unauthenticated(app: &AppState, headers: &axum::http::HeaderMap) -> Option<Status> {
    let auth = &app.auth;
    if !auth.enabled() {
        return None;
    }
    let known = headers
        .get("authorization")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| auth.identify_bearer(value))
        .is_some();
    (!known).then(|| {
        let sent = headers.contains_key("authorization");
        super::status(OpsError::new(
            ErrorCode::Unauthorized,
            crate::auth::token_refused(sent, crate::auth::GRPC_TOKEN),
        ))
    })
}

/// A gRPC request body held to the budget and the pace of [`BodyBudget`].
pub struct Gated {
    inner: Incoming,
    budget: Arc<BodyBudget>,
    peer: Option<IpAddr>,
    /// Bytes of the prefix read so far (while `in_message` is 0).
    prefix: [u8; PREFIX_BYTES],
    prefix_read: usize,
    /// Bytes of the current message still to come.
    in_message: usize,
    /// When the current (partly arrived) message started, and how much of it came.
    started: Instant,
    last_arrival: Instant,
    received: usize,
    charge: Charge,
    /// The current message's top-level fields, counted.
    fields: FieldCounter,
    /// The deadline of the current message's next bytes.
    timer: Pin<Box<Sleep>>,
    failed: bool,
}

impl Gated {
    pub fn new(inner: Incoming, budget: Arc<BodyBudget>, peer: Option<IpAddr>) -> Self {
        let charge = budget.empty_charge();
        Self {
            inner,
            budget,
            peer,
            prefix: [0; PREFIX_BYTES],
            prefix_read: 0,
            in_message: 0,
            started: Instant::now(),
            last_arrival: Instant::now(),
            received: 0,
            charge,
            fields: FieldCounter::default(),
            timer: Box::pin(tokio::time::sleep(std::time::Duration::ZERO)),
            failed: false,
        }
    }

    /// A message (or its prefix) has partly arrived.
    fn partial(&self) -> bool {
        self.in_message > 0 || self.prefix_read > 0
    }

    /// Follows the framing over `data`, charging what belongs to messages under way.
    fn account(&mut self, mut data: &[u8]) -> Result<(), Status> {
        self.last_arrival = Instant::now();
        while !data.is_empty() {
            if self.in_message == 0 {
                if self.prefix_read == 0 {
                    // A new message starts: the previous one is tonic's now.
                    self.charge = self.budget.empty_charge();
                    self.started = self.last_arrival;
                    self.received = 0;
                }
                let take = (PREFIX_BYTES - self.prefix_read).min(data.len());
                self.prefix[self.prefix_read..self.prefix_read + take]
                    .copy_from_slice(&data[..take]);
                self.prefix_read += take;
                self.received += take;
                data = &data[take..];
                if self.prefix_read == PREFIX_BYTES {
                    let length = u32::from_be_bytes([
                        self.prefix[1],
                        self.prefix[2],
                        self.prefix[3],
                        self.prefix[4],
                    ]) as usize;
                    self.prefix_read = 0;
                    self.in_message = length;
                    // A compressed message is not read here (the service refuses it anyway).
                    self.fields = FieldCounter {
                        skip_all: self.prefix[0] != 0,
                        ..FieldCounter::default()
                    };
                }
                continue;
            }
            let take = self.in_message.min(data.len());
            if let Err(why) = self.fields.feed(&data[..take]) {
                return Err(super::status(OpsError::new(ErrorCode::TooLarge, why)));
            }
            if !self.budget.add(&mut self.charge, self.peer, take) {
                return Err(super::status(OpsError::new(
                    ErrorCode::Overloaded,
                    self.budget.spent_message(),
                )));
            }
            self.in_message -= take;
            self.received += take;
            data = &data[take..];
        }
        Ok(())
    }
}

impl HttpBody for Gated {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = self.get_mut();
        if this.failed {
            return Poll::Ready(None);
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref()
                    && let Err(status) = this.account(data)
                {
                    this.failed = true;
                    return Poll::Ready(Some(Err(status)));
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(error))) => {
                Poll::Ready(Some(Err(Status::cancelled(error.to_string()))))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => {
                if !this.partial() {
                    return Poll::Pending;
                }
                let (limits_read_timeout, min_rate) = this.budget.pace();
                let (deadline, by_rate) = next_deadline(
                    this.started,
                    this.last_arrival,
                    this.received,
                    limits_read_timeout,
                    min_rate,
                );
                // The deadline moves as bytes arrive; the timer is set to the latest one.
                if this.timer.deadline() != deadline {
                    this.timer.as_mut().reset(deadline);
                }
                ready!(this.timer.as_mut().poll(cx));
                this.failed = true;
                let error = if by_rate {
                    crate::body_budget::too_slow(min_rate)
                } else {
                    crate::body_budget::body_timeout(limits_read_timeout)
                };
                Poll::Ready(Some(Err(super::status(OpsError::new(
                    error.code,
                    format!(
                        "a message {}",
                        error.message.trim_start_matches("the request body ")
                    ),
                )))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.failed || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Counts a protobuf message's top-level fields as its bytes arrive, without keeping them: a
/// tag (a varint), then a varint, 8 or 4 bytes, or a length and that many bytes.
#[derive(Debug, Default)]
struct FieldCounter {
    count: usize,
    state: FieldState,
    /// The varint being read, and its shift.
    varint: u64,
    shift: u32,
    skip_all: bool,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum FieldState {
    #[default]
    Tag,
    /// A varint value.
    Varint,
    /// A length-delimited field's length.
    Length,
    /// Bytes of a value to pass over.
    Skip(u64),
}

impl FieldCounter {
    fn feed(&mut self, mut data: &[u8]) -> Result<(), String> {
        if self.skip_all {
            return Ok(());
        }
        while let Some((&byte, rest)) = data.split_first() {
            match self.state {
                FieldState::Skip(left) => {
                    let take = left.min(data.len() as u64);
                    data = &data[take as usize..];
                    self.state = if take == left {
                        FieldState::Tag
                    } else {
                        FieldState::Skip(left - take)
                    };
                    continue;
                }
                FieldState::Tag | FieldState::Varint | FieldState::Length => {
                    data = rest;
                    if self.shift >= 64 {
                        return Err(
                            "the message is not valid protobuf (a varint over 10 bytes)".into()
                        );
                    }
                    self.varint |= u64::from(byte & 0x7f) << self.shift;
                    self.shift += 7;
                    if byte & 0x80 != 0 {
                        continue;
                    }
                    let value = std::mem::take(&mut self.varint);
                    self.shift = 0;
                    self.state = match self.state {
                        FieldState::Tag => {
                            self.count += 1;
                            if self.count > TOP_LEVEL_FIELDS_MAX {
                                return Err(format!(
                                    "the message has more than {TOP_LEVEL_FIELDS_MAX} fields; no list of the API takes more than {}",
                                    sluice_core::queue::limits::BATCH_MESSAGES_MAX
                                ));
                            }
                            match value & 7 {
                                0 => FieldState::Varint,
                                1 => FieldState::Skip(8),
                                2 => FieldState::Length,
                                5 => FieldState::Skip(4),
                                _ => {
                                    return Err("the message is not valid protobuf (a group or an unknown wire type)".into());
                                }
                            }
                        }
                        FieldState::Length if value == 0 => FieldState::Tag,
                        FieldState::Length => FieldState::Skip(value),
                        _ => FieldState::Tag,
                    };
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use prost::Message as _;
    use sluice_grpc::v1;

    use super::*;

    fn count(bytes: &[u8], chunk: usize) -> Result<usize, String> {
        let mut counter = FieldCounter::default();
        for piece in bytes.chunks(chunk.max(1)) {
            counter.feed(piece)?;
        }
        Ok(counter.count)
    }

    #[test]
    fn fields_are_counted_in_any_split() {
        let request = v1::EnqueueRequest {
            queue: "q".into(),
            messages: (0..10)
                .map(|i| v1::OutgoingMessage {
                    key: Some(format!("k{i}")),
                    priority: Some(-3),
                    ..Default::default()
                })
                .collect(),
        };
        let bytes = request.encode_to_vec();
        for chunk in [1, 2, 3, 7, bytes.len()] {
            assert_eq!(count(&bytes, chunk), Ok(11), "chunks of {chunk}");
        }
    }

    /// Issue 30, finding 2 (with a token): 8.3M empty messages in 16.6 MB decoded to 2 GB.
    #[test]
    fn a_message_of_millions_of_fields_is_refused_as_it_arrives() {
        let bytes: Vec<u8> = std::iter::repeat_n([0x12u8, 0x00], 8_000_000)
            .flatten()
            .collect();
        let refused = count(&bytes, 1 << 16).unwrap_err();
        assert!(refused.contains("more than"), "{refused}");
        let at_cap: Vec<u8> = std::iter::repeat_n([0x12u8, 0x00], TOP_LEVEL_FIELDS_MAX)
            .flatten()
            .collect();
        assert_eq!(count(&at_cap, 5), Ok(TOP_LEVEL_FIELDS_MAX));
    }
}
