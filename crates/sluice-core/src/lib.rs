//! sluice-core: the queue model, the rules every store keeps the same way ([`rules`]: the
//! failure decision, backoff, the token bucket, lanes, retention), the [`Store`] trait every
//! storage backend implements, and the [`Clock`]. The API's serde types are `sluice-wire`'s
//! (a queue's spec becomes a `QueueConfig` here, [`queue::QueueConfig::apply`]); the SQLite
//! store's in-memory index is that store's (`sluice_store_sqlite::dispatch`).
//!
//! Invariant: no IO here. Nothing in this crate touches the network, the disk or the system
//! clock except [`SystemClock`], so every rule can be tested with explicit times.

pub mod clock;
pub mod histogram;
pub mod message;
pub mod meter;
pub mod notify;
pub mod queue;
pub mod rules;
pub mod schedule;

pub mod store;
pub mod stored;
pub mod stuck;

pub use clock::{Clock, ManualClock, Millis, SystemClock};
pub use store::{Store, StoreError, StoreResult};
