//! Integration tests of HTTP API v1 (docs/http-api.md) against the real `sluice` binary.
//!
//! Each module covers one topic; every test starts its own server on a temp dir through
//! [`support::TestServer`]. Time-dependent rules run on the server's test clock, never on sleeps.

mod support;

mod alerts;
mod attacks;
mod auth;
mod backpressure;
mod bad_input;
mod batch;
mod browser_guard;
mod cancel;
mod chaining;
mod config;
mod dead_letter;
mod delay;
mod delivery_log;
mod disk_full;
mod dlq_grant;
mod dlq_ops;
mod expressions;
mod extend;
mod file_modes;
mod grpc;
mod grpc_python;
mod history;
mod idempotency;
mod kept;
mod kill_lifecycle;
mod lifecycle_stats;
mod limits;
mod long_poll;
mod memo_retention;
mod metrics;
mod metrics_conventions;
mod nack;
mod ordering;
mod pace;
mod paging;
mod pause;
mod purge_drain;
mod push;
mod push_method;
mod redaction;
mod request_ids;
mod restart;
mod result_memo;
mod retention;
mod round_trip;
mod schedules;
mod schema;
mod schema_time;
mod sqs;
mod sqs_python;
mod stats;
mod status;
mod store_config;
mod tenants;
mod tls;
mod topics;
mod tracing;
mod visibility;
mod webhook_senders;
mod webhooks;
mod writer_backpressure;
