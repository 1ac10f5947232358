//! A budget for request bodies held in memory at once, across all requests.
//!
//! Every handler reads its whole body before answering, so many big requests at once could
//! hold more memory than the machine has. The [`hold`] layer reads each body itself, charging
//! its bytes to the budget as they arrive, and hands the handler the body as one buffer; the
//! charge is returned when the answer is ready. A request the budget cannot take gets 503
//! `overloaded` with `Retry-After`, not more memory.
//!
//! Three rules keep slow or hostile uploads from holding the budget (issue 30, finding 4):
//! - **Charged as they arrive, not as declared**: a `Content-Length` of 16 MiB with one byte
//!   sent holds one step of the budget, not 16 MiB (the declared length is only checked
//!   against the limit, to refuse a body that cannot fit at once).
//! - **A minimum average rate**: after `[limits] body_read_timeout_ms`, a body must have come
//!   at `[limits] body_min_bytes_per_s` on average since it started, or it gets 408; each pause
//!   is bounded by `body_read_timeout_ms` as well. A byte every 20 s is cut after the first
//!   timeout, where it could hold its connection (and its charge) for hours before.
//! - **A share per peer**: the bodies of one client address may hold at most `[limits]
//!   body_bytes_in_flight_per_peer`, so one host cannot take the whole budget from the others.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Request, State};
use axum::http::HeaderMap;
use axum::http::header::CONTENT_LENGTH;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use parking_lot::Mutex;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::config::Limits;
use crate::error::{ApiError, ErrorCode};

/// Largest request body: a 10 MiB batch plus base64 and JSON overhead.
pub const REQUEST_BYTES_MAX: usize = 16 * 1024 * 1024;

/// Charged in steps of at least this much while a body arrives, so a body sent in small pieces
/// does not take the semaphore for each.
const CHARGE_STEP: usize = 64 * 1024;
/// What `Retry-After` says to a request the budget could not take.
const RETRY_AFTER_S: u64 = 1;

/// The bytes of request bodies that may be held at once.
#[derive(Debug)]
pub struct BodyBudget {
    bytes: Arc<Semaphore>,
    total: usize,
    /// Bytes held per client address, and the most one may hold.
    peers: Arc<Mutex<HashMap<IpAddr, usize>>>,
    per_peer: usize,
    /// Longest pause while a body arrives, and the grace before the rate applies.
    read_timeout: Duration,
    /// Slowest average a body may arrive at, after the grace.
    min_bytes_per_s: u64,
}

/// Bytes charged to one peer's share, given back when dropped.
#[derive(Debug)]
struct PeerCharge {
    peers: Arc<Mutex<HashMap<IpAddr, usize>>>,
    peer: IpAddr,
    bytes: usize,
}

impl Drop for PeerCharge {
    fn drop(&mut self) {
        let mut peers = self.peers.lock();
        if let Some(held) = peers.get_mut(&self.peer) {
            *held -= self.bytes.min(*held);
            if *held == 0 {
                peers.remove(&self.peer);
            }
        }
    }
}

/// What one body holds so far: its share of the budget and of its peer's.
#[derive(Debug, Default)]
struct Held {
    permit: Option<OwnedSemaphorePermit>,
    peer: Option<PeerCharge>,
}

impl BodyBudget {
    /// The budget `[limits]` describes.
    pub fn new(limits: &Limits) -> Self {
        let total = limits.body_bytes_in_flight.min(Semaphore::MAX_PERMITS);
        Self {
            bytes: Arc::new(Semaphore::new(total)),
            total,
            peers: Arc::default(),
            per_peer: limits.body_bytes_in_flight_per_peer,
            read_timeout: limits.body_read_timeout,
            min_bytes_per_s: limits.body_min_bytes_per_s,
        }
    }

    /// The longest pause, and the slowest average rate, a body may arrive at.
    pub fn pace(&self) -> (Duration, u64) {
        (self.read_timeout, self.min_bytes_per_s)
    }

    /// Bytes held by bodies in flight now.
    pub fn held(&self) -> usize {
        self.total - self.bytes.available_permits()
    }

    /// Takes `bytes` more into `held` (and into `peer`'s share), or says the budget is spent.
    fn charge(&self, held: &mut Held, peer: Option<IpAddr>, bytes: usize) -> bool {
        if bytes == 0 {
            return true;
        }
        let Ok(count) = u32::try_from(bytes) else {
            return false;
        };
        if let Some(peer) = peer {
            let mut peers = self.peers.lock();
            let share = peers.entry(peer).or_default();
            if *share + bytes > self.per_peer {
                if *share == 0 {
                    peers.remove(&peer);
                }
                return false;
            }
            *share += bytes;
            drop(peers);
            match &mut held.peer {
                Some(charge) => charge.bytes += bytes,
                None => {
                    held.peer = Some(PeerCharge {
                        peers: self.peers.clone(),
                        peer,
                        bytes,
                    });
                }
            }
        }
        match self.bytes.clone().try_acquire_many_owned(count) {
            Ok(permit) => {
                match &mut held.permit {
                    Some(permit_held) => permit_held.merge(permit),
                    None => held.permit = Some(permit),
                }
                true
            }
            Err(_) => {
                if let Some(charge) = &mut held.peer {
                    let mut peers = self.peers.lock();
                    if let Some(share) = peers.get_mut(&charge.peer) {
                        *share -= bytes.min(*share);
                    }
                    charge.bytes -= bytes;
                }
                false
            }
        }
    }

    /// Charges `bytes` already read by a protocol that frames its own messages (gRPC), or
    /// `None` when the budget (or `peer`'s share of it) cannot take them now.
    pub fn try_charge(&self, peer: Option<IpAddr>, bytes: usize) -> Option<Charge> {
        let mut held = Held::default();
        self.charge(&mut held, peer, bytes)
            .then_some(Charge { _held: held })
    }

    /// Adds `bytes` to a charge already held, or says the budget is spent.
    pub fn add(&self, charge: &mut Charge, peer: Option<IpAddr>, bytes: usize) -> bool {
        self.charge(&mut charge._held, peer, bytes)
    }

    /// An empty charge, to [`add`](Self::add) to as bytes arrive.
    pub fn empty_charge(&self) -> Charge {
        Charge {
            _held: Held::default(),
        }
    }
}

/// Why a body was not taken.
#[derive(Debug)]
pub enum Refusal {
    /// It is (or says it is) longer than the caller's limit.
    TooLarge,
    /// The budget cannot take it now: answer 503 (or the protocol's throttling error).
    Spent,
    /// It stopped arriving, came too slowly, or could not be read: the answer to give.
    Unreadable(ApiError),
}

/// Bytes of the budget held for one body: given back when dropped, once the answer is ready.
#[derive(Debug)]
#[must_use = "the charge is given back when dropped: keep it until the answer is ready"]
pub struct Charge {
    _held: Held,
}

/// When a body that started at `started`, last sent bytes at `last_arrival` and has `received`
/// bytes must have its next bytes:
/// the pause allowed, or the moment its average would fall below the minimum rate, whichever
/// comes first.
pub(crate) fn next_deadline(
    started: Instant,
    last_arrival: Instant,
    received: usize,
    read_timeout: Duration,
    min_bytes_per_s: u64,
) -> (Instant, bool) {
    let pause = last_arrival + read_timeout;
    let earned = Duration::from_secs_f64(received as f64 / min_bytes_per_s.max(1) as f64);
    let rate = started + read_timeout + earned;
    if rate <= pause {
        (rate, true)
    } else {
        (pause, false)
    }
}

/// The 408 of a body that came slower than the minimum rate on average.
pub(crate) fn too_slow(min_bytes_per_s: u64) -> ApiError {
    ApiError::new(
        ErrorCode::RequestTimeout,
        format!(
            "the request body arrived slower than {min_bytes_per_s} bytes/s on average ([limits] body_min_bytes_per_s)"
        ),
    )
}

impl BodyBudget {
    /// Reads a whole body of at most `limit` bytes from `peer`, charging it to the budget (and
    /// to the peer's share) as it arrives. Every protocol on the listener reads its bodies
    /// here, so no route holds memory outside the budget.
    pub async fn read(
        &self,
        headers: &HeaderMap,
        peer: Option<IpAddr>,
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
        let mut held = Held::default();
        let mut body = body;
        match self
            .read_charging(&mut body, peer, declared, limit, &mut held)
            .await
        {
            Ok(bytes) => Ok((bytes, Charge { _held: held })),
            Err(Refusal::Spent) => {
                // What arrived is given back first; the rest is read and dropped, so the
                // client can read the answer rather than see its upload cut off.
                drop(held);
                self.discard(body, limit).await;
                Err(Refusal::Spent)
            }
            Err(refusal) => Err(refusal),
        }
    }

    /// Reads the rest of a refused body and keeps none of it: at most `limit` bytes, at the
    /// pace a body must keep (a trickle is cut as when it is read).
    async fn discard(&self, mut body: Body, limit: usize) {
        let started = Instant::now();
        let mut last_arrival = started;
        let mut discarded = 0usize;
        while discarded <= limit {
            let (deadline, _) = next_deadline(
                started,
                last_arrival,
                discarded,
                self.read_timeout,
                self.min_bytes_per_s,
            );
            match tokio::time::timeout_at(deadline, body.frame()).await {
                Ok(Some(Ok(frame))) => {
                    discarded += frame.data_ref().map_or(0, Bytes::len);
                    last_arrival = Instant::now();
                }
                _ => break,
            }
        }
    }

    /// Reads a body into one buffer, charging it as it comes.
    async fn read_charging(
        &self,
        body: &mut Body,
        peer: Option<IpAddr>,
        declared: Option<usize>,
        limit: usize,
        held: &mut Held,
    ) -> Result<Bytes, Refusal> {
        // Room for what is declared only up to one step: what is declared is not charged
        // until it arrives, so it must not be allocated before either.
        let mut buffer = Vec::with_capacity(declared.unwrap_or(0).min(CHARGE_STEP));
        let mut charged = 0usize;
        let started = Instant::now();
        let mut last_arrival = started;
        loop {
            let (deadline, by_rate) = next_deadline(
                started,
                last_arrival,
                buffer.len(),
                self.read_timeout,
                self.min_bytes_per_s,
            );
            let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
                Err(_) if by_rate => {
                    return Err(Refusal::Unreadable(too_slow(self.min_bytes_per_s)));
                }
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
            last_arrival = Instant::now();
            let length = buffer.len() + data.len();
            if length > limit {
                return Err(Refusal::TooLarge);
            }
            if length > charged {
                let step = (length - charged).max(CHARGE_STEP).min(limit - charged);
                if !self.charge(held, peer, step) {
                    return Err(Refusal::Spent);
                }
                charged += step;
            }
            buffer.extend_from_slice(&data);
        }
        Ok(Bytes::from(buffer))
    }

    /// The message of a `Spent` refusal, naming the settings.
    pub fn spent_message(&self) -> String {
        format!(
            "request bodies in flight already hold the server's budget ([limits] body_bytes_in_flight = {}, body_bytes_in_flight_per_peer = {}); retry shortly",
            self.total, self.per_peer
        )
    }
}

/// The layer: reads the body within the budget, then runs the handler holding the charge.
pub async fn hold(State(budget): State<Arc<BodyBudget>>, request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    if axum::body::HttpBody::is_end_stream(&body) {
        return next.run(Request::from_parts(parts, body)).await;
    }
    let peer = peer_of(&parts.extensions);
    let (bytes, charge) = match budget
        .read(&parts.headers, peer, body, REQUEST_BYTES_MAX)
        .await
    {
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

/// The client address of a request, as the listener recorded it.
pub fn peer_of(extensions: &axum::http::Extensions) -> Option<IpAddr> {
    extensions
        .get::<ConnectInfo<std::net::SocketAddr>>()
        .map(|ConnectInfo(address)| address.ip())
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

pub(crate) fn body_timeout(timeout: Duration) -> ApiError {
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

    fn budget(total: usize, per_peer: usize) -> BodyBudget {
        BodyBudget::new(&Limits {
            body_bytes_in_flight: total,
            body_bytes_in_flight_per_peer: per_peer,
            ..Limits::DEFAULT
        })
    }

    #[test]
    fn charges_add_up_and_come_back_when_dropped() {
        let budget = budget(100, 100);
        let mut first = Held::default();
        assert!(budget.charge(&mut first, None, 60));
        assert!(budget.charge(&mut first, None, 30));
        assert_eq!(budget.held(), 90);
        let mut second = Held::default();
        assert!(!budget.charge(&mut second, None, 20), "over the budget");
        assert!(second.permit.is_none());
        drop(first);
        assert_eq!(budget.held(), 0);
        assert!(budget.charge(&mut second, None, 100));
    }

    #[test]
    fn one_peer_holds_at_most_its_share_and_gets_it_back() {
        let budget = budget(100, 40);
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        let mut first = Held::default();
        assert!(budget.charge(&mut first, Some(a), 30));
        let mut second = Held::default();
        assert!(!budget.charge(&mut second, Some(a), 20), "over a's share");
        assert!(
            budget.charge(&mut second, Some(b), 40),
            "b has its own share"
        );
        assert_eq!(budget.held(), 70);
        drop(first);
        assert!(
            budget.peers.lock().get(&a).is_none(),
            "a's share is given back"
        );
        let mut third = Held::default();
        assert!(budget.charge(&mut third, Some(a), 40));
        // A charge the budget refuses is not left on the peer's share.
        let tight = self::budget(50, 50);
        let mut hog = Held::default();
        assert!(tight.charge(&mut hog, None, 45));
        let mut refused = Held::default();
        assert!(!tight.charge(&mut refused, Some(a), 10));
        assert_eq!(refused.peer.as_ref().map_or(0, |charge| charge.bytes), 0);
        assert_eq!(tight.peers.lock().get(&a).copied().unwrap_or(0), 0);
    }

    #[test]
    fn the_rate_deadline_grows_with_what_arrived() {
        let started = Instant::now();
        let timeout = Duration::from_secs(30);
        // Nothing arrived: the rate's deadline is the grace, sooner than a fresh pause.
        let (at, by_rate) = next_deadline(started, started, 0, timeout, 1000);
        assert!(by_rate);
        assert!(at <= started + timeout);
        // Plenty arrived: the pause since the last bytes bounds the wait.
        let (at, by_rate) = next_deadline(started, started, 1_000_000, timeout, 1000);
        assert!(!by_rate);
        assert_eq!(at, started + timeout);
    }
}
