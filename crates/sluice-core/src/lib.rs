//! sluice-core: the queue model, the rules every store keeps the same way ([`rules`]: the
//! failure decision, backoff, the token bucket, lanes, retention), the dispatch index, the
//! [`Store`] trait every storage backend implements, the [`Clock`], and the serde types of the
//! HTTP API ([`wire`]).
//!
//! Invariant: no IO here. Nothing in this crate touches the network, the disk or the system
//! clock except [`SystemClock`], so every rule can be tested with explicit times.

pub mod clock;
pub mod dispatch;
pub mod histogram;
pub mod message;
pub mod meter;
pub mod notify;
pub mod queue;
pub mod rules;
pub mod schedule;
pub mod sessions;
pub mod store;
pub mod stored;
pub mod stuck;
pub mod wire;

pub use clock::{Clock, ManualClock, Millis, SystemClock};
pub use store::{Store, StoreError, StoreResult};
