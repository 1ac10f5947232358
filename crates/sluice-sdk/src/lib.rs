//! sluice-sdk: typed producers and a worker runtime for sluice queues.
//!
//! The same code runs on a sluice server ([`Http`], or `Grpc` over its gRPC API with cargo
//! feature `grpc`), with the queue inside the process (`Embedded`, cargo feature `embedded`, on
//! by default: a SQLite file or a temporary store, with an optional test clock that makes
//! delays and retries instant and deterministic), on Amazon SQS or sluice's SQS-compatible API (`Sqs`, cargo feature `sqs`) or
//! on RabbitMQ (`Amqp`, cargo feature `amqp`). Each implements
//! [`Backend`]; [`Backend::capabilities`] says what a backend can do, and what it cannot do
//! fails with [`Error::Unsupported`] rather than doing nothing.
//!
//! - [`Queue<T>`]: enqueue events of any serde type (with an idempotency id, key, priority,
//!   delay), enqueue many, status, pause/resume, cancel, drain, get, dead letters.
//! - [`Worker<T>`]: runs an async handler with a fixed concurrency, keeps leases alive while it
//!   runs, acks on success, retries failures with a [`RetryPolicy`], dead-letters what is not
//!   retryable or out of attempts (and calls `on_dead_letter`), and shuts down gracefully on
//!   SIGTERM or ctrl-c. Its [`WorkerHandle`] shows one instance's status and pauses, resumes,
//!   drains or stops that instance.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use serde::{Deserialize, Serialize};
//! use sluice_sdk::{Embedded, Queue, Worker};
//!
//! #[derive(Debug, Serialize, Deserialize)]
//! struct Order { id: u32, total_cents: u64 }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // A store inside the process; `Http::new("http://127.0.0.1:7566")?` talks to a server instead.
//! let backend = Arc::new(Embedded::temporary().await?);
//! let orders: Queue<Order> = Queue::open(backend, "orders").await?;
//!
//! // Producer: a second enqueue with the same id stores nothing.
//! let first = orders.enqueue(&Order { id: 7, total_cents: 4250 }).id("order-7").await?;
//! let again = orders.enqueue(&Order { id: 7, total_cents: 4250 }).id("order-7").await?;
//! assert!(first.created && !again.created);
//!
//! // Worker: 4 handlers at most; stops here once the queue is empty.
//! let worker = Worker::new(orders.clone(), 4);
//! let handle = worker.handle();
//! let report = worker
//!     .on_empty(move |_| { let handle = handle.clone(); async move { handle.shutdown() } })
//!     .run(|ctx| async move {
//!         println!("charging order {} (attempt {})", ctx.event.id, ctx.attempt);
//!         Ok(())
//!     })
//!     .await?;
//! assert_eq!(report.processed, 1);
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

#[cfg(feature = "amqp")]
mod amqp;
mod backend;
#[cfg(feature = "embedded")]
mod embedded;
mod error;
#[cfg(feature = "grpc")]
mod grpc;
mod http;
mod queue;
#[cfg(feature = "sqs")]
mod sqs;
#[cfg(feature = "sqs")]
mod sqs_runs;
mod worker;

#[cfg(feature = "amqp")]
pub use amqp::Amqp;
pub use backend::{
    Backend, CancelOutcome, Capabilities, DeadLetter, Delivery, Enqueued, MessageInfo, MessageRef,
    Nack, NackOutcome, NextStep, Outgoing, QueueOptions, QueueStats,
};
#[cfg(feature = "embedded")]
pub use embedded::{Embedded, EmbeddedBuilder};
pub use error::{Error, Result};
#[cfg(feature = "grpc")]
pub use grpc::Grpc;
pub use http::Http;
pub use queue::{Enqueue, EnqueuedMany, Envelope, Queue};
pub use sluice_client::{Code, ErrorCode};
#[cfg(feature = "sqs")]
pub use sqs::Sqs;
pub use worker::{
    Backoff, BoxError, Context, DeadLetterContext, EmptyContext, RetryPolicy, SlotState, Worker,
    WorkerHandle, WorkerReport, WorkerStatus,
};
