//! The queue's rules as pure functions and plain values: the decisions every store must make the
//! same way, whatever it keeps its messages in.
//!
//! Nothing here holds state beyond the value it is given, does IO or reads the clock: each
//! function takes the queue's configuration, the message's own figures and `now_ms`, and says
//! what happens. The in-memory index of the SQLite store (`sluice_store_sqlite::dispatch::Index`) calls them; a SQL
//! store calls the same ones (or writes their arithmetic into its queries), so two backends
//! cannot drift apart on when a message is retried, dead-lettered, paced or expired.

pub mod alert;
pub mod backoff;
pub mod backpressure;
pub mod failure;
pub mod lanes;
pub mod retention;
pub mod schedule;
pub mod token_bucket;
