//! Integration tests of HTTP API v1 (docs/http-api.md) against the real `sluice` binary.
//!
//! Each module covers one topic; every test starts its own server on a temp dir through
//! [`support::TestServer`]. Time-dependent rules run on the server's test clock, never on sleeps.

mod support;

mod bad_input;
mod batch;
mod config;
mod dead_letter;
mod delay;
mod extend;
mod idempotency;
mod long_poll;
mod nack;
mod ordering;
mod restart;
mod round_trip;
mod stats;
mod status;
mod visibility;
