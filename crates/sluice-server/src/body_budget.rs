//! A budget for request bodies held in memory at once, across all requests.
//!
//! Every handler reads its whole body before answering, so many big requests at once could
//! hold more memory than the machine has. The [`hold`] layer reads each body itself, charging
//! its bytes to the budget as they arrive (the declared `Content-Length` up front), and hands
//! the handler the body as one buffer; the charge is returned when the answer is ready. A request
//! the budget cannot take gets 503 `overloaded` with `Retry-After`, not more memory.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::HeaderMap;
use axum::http::header::CONTENT_LENGTH;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::api::REQUEST_BYTES_MAX;
use crate::error::{ApiError, ErrorCode};

/// Charged in steps of at least this much while a body of unknown length arrives, so a body
/// sent in small pieces does not take the semaphore for each.
const CHARGE_STEP: usize = 64 * 1024;
/// What `Retry-After` says to a request the budget could not take.
const RETRY_AFTER_S: u64 = 1;

/// The bytes of request bodies that may be held at once.
#[derive(Debug)]
pub struct BodyBudget {
    bytes: Arc<Semaphore>,
    total: usize,
    /// Longest pause while a body arrives.
    read_timeout: Duration,
}

impl BodyBudget {
    /// A budget of `total` bytes; a body that pauses longer than `read_timeout` gets 408.
    pub fn new(total: usize, read_timeout: Duration) -> Self {
        let total = total.min(Semaphore::MAX_PERMITS);
        Self {
            bytes: Arc::new(Semaphore::new(total)),
            total,
            read_timeout,
        }
    }

    /// Bytes held by bodies in flight now.
    pub fn held(&self) -> usize {
        self.total - self.bytes.available_permits()
    }

    /// Takes `bytes` more into `charge`, or says the budget is spent.
    fn charge(&self, charge: &mut Option<OwnedSemaphorePermit>, bytes: usize) -> bool {
        if bytes == 0 {
            return true;
        }
        let Ok(count) = u32::try_from(bytes) else {
            return false;
        };
        match self.bytes.clone().try_acquire_many_owned(count) {
            Ok(permit) => {
                match charge {
                    Some(held) => held.merge(permit),
                    None => *charge = Some(permit),
                }
                true
            }
            Err(_) => false,
        }
    }
}

impl BodyBudget {
    /// Charges `bytes` already read by a protocol that frames its own messages (gRPC), or
    /// `None` when the budget cannot take them now.
    pub fn try_charge(&self, bytes: usize) -> Option<Charge> {
        let mut charge = None;
        self.charge(&mut charge, bytes)
            .then_some(Charge { _permit: charge })
    }
}

/// Why a body was not taken.
#[derive(Debug)]
pub enum Refusal {
    /// It is (or says it is) longer than the caller's limit.
    TooLarge,
    /// The budget cannot take it now: answer 503 (or the protocol's throttling error).
    Spent,
    /// It stopped arriving, or could not be read: the answer to give.
    Unreadable(ApiError),
}

/// Bytes of the budget held for one body: given back when dropped, once the answer is ready.
#[derive(Debug)]
#[must_use = "the charge is given back when dropped: keep it until the answer is ready"]
pub struct Charge {
    _permit: Option<OwnedSemaphorePermit>,
}

impl BodyBudget {
    /// Reads a whole body of at most `limit` bytes, charging it to the budget as it arrives (the
    /// declared `Content-Length` up front). Every protocol on the listener reads its bodies
    /// here, so no route holds memory outside the budget.
    pub async fn read(
        &self,
        headers: &HeaderMap,
        body: Body,
        limit: usize,
    ) -> Result<(Bytes, Charge), Refusal> {
        let declared = headers
            .get(CONTENT_LENGTH)
            .and_then(|value| value.to_str().ok())
            .and_then(|text| text.parse::<usize>().ok());
        if declared.is_some_and(|length| length > limit) {
            return Err(Refusal::TooLarge);
        }
        let mut charge = None;
        if !self.charge(&mut charge, declared.unwrap_or(0)) {
            self.discard(body).await;
            return Err(Refusal::Spent);
        }
        let bytes = self
            .read_charging(body, declared, limit, &mut charge)
            .await?;
        Ok((bytes, Charge { _permit: charge }))
    }

    /// Reads a body into one buffer, charging what goes beyond the declared length as it comes.
    async fn read_charging(
        &self,
        mut body: Body,
        declared: Option<usize>,
        limit: usize,
        charge: &mut Option<OwnedSemaphorePermit>,
    ) -> Result<Bytes, Refusal> {
        let mut buffer = Vec::with_capacity(declared.unwrap_or(0));
        let mut charged = declared.unwrap_or(0);
        loop {
            let frame = match tokio::time::timeout(self.read_timeout, body.frame()).await {
                Err(_) => return Err(Refusal::Unreadable(body_timeout(self.read_timeout))),
                Ok(None) => break,
                Ok(Some(Err(error))) => {
                    return Err(Refusal::Unreadable(ApiError::malformed_json(format!(
                        "the request body could not be read: {error}"
                    ))));
                }
                Ok(Some(Ok(frame))) => frame,
            };
            let Ok(data) = frame.into_data() else {
                continue;
            };
            let length = buffer.len() + data.len();
            if length > limit {
                return Err(Refusal::TooLarge);
            }
            if length > charged {
                let step = (length - charged).max(CHARGE_STEP);
                if !self.charge(charge, step) {
                    return Err(Refusal::Spent);
                }
                charged += step;
            }
            buffer.extend_from_slice(&data);
        }
        Ok(Bytes::from(buffer))
    }

    /// Reads a refused body and drops it (keeping none of it, for at most the read timeout),
    /// so the client can read the answer rather than see its upload cut off.
    async fn discard(&self, mut body: Body) {
        let mut discarded = 0usize;
        while discarded <= REQUEST_BYTES_MAX {
            match tokio::time::timeout(self.read_timeout, body.frame()).await {
                Ok(Some(Ok(frame))) => {
                    discarded += frame.data_ref().map_or(0, Bytes::len);
                }
                _ => break,
            }
        }
    }

    /// The message of a `Spent` refusal, naming the setting.
    pub fn spent_message(&self) -> String {
        format!(
            "request bodies in flight already hold the server's budget ([limits] body_bytes_in_flight = {}); retry shortly",
            self.total
        )
    }
}

/// The layer: reads the body within the budget, then runs the handler holding the charge.
pub async fn hold(State(budget): State<Arc<BodyBudget>>, request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    if axum::body::HttpBody::is_end_stream(&body) {
        return next.run(Request::from_parts(parts, body)).await;
    }
    let (bytes, charge) = match budget.read(&parts.headers, body, REQUEST_BYTES_MAX).await {
        Ok(read) => read,
        Err(Refusal::TooLarge) => return too_large().into_response(),
        Err(Refusal::Spent) => return overloaded_error(&budget).into_response(),
        Err(Refusal::Unreadable(error)) => return error.into_response(),
    };
    let response = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    // The handler and what it parsed are done with the body now.
    drop(charge);
    response
}

fn overloaded_error(budget: &BodyBudget) -> ApiError {
    let mut error = ApiError::new(ErrorCode::Overloaded, budget.spent_message());
    error.retry_after_s = Some(RETRY_AFTER_S);
    error
}

fn too_large() -> ApiError {
    ApiError::too_large(format!(
        "the request body is larger than {} bytes (16 MiB)",
        REQUEST_BYTES_MAX
    ))
}

fn body_timeout(timeout: Duration) -> ApiError {
    ApiError::new(
        ErrorCode::RequestTimeout,
        format!(
            "the request body stopped arriving for {} ms ([limits] body_read_timeout_ms)",
            timeout.as_millis()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_add_up_and_come_back_when_dropped() {
        let budget = BodyBudget::new(100, Duration::from_secs(1));
        let mut first = None;
        assert!(budget.charge(&mut first, 60));
        assert!(budget.charge(&mut first, 30));
        assert_eq!(budget.held(), 90);
        let mut second = None;
        assert!(!budget.charge(&mut second, 20), "over the budget");
        assert!(second.is_none());
        drop(first);
        assert_eq!(budget.held(), 0);
        assert!(budget.charge(&mut second, 100));
    }
}
