//! Every test of the SDK against its backends, in one test binary: one link instead of one per
//! file (the files keep their names; `cargo test -p sluice-sdk --test sdk conformance::` runs
//! one of them). Each file's own doc says what it covers.

mod support;

mod conformance;
mod ids;
mod server_errors;
mod sqs_failures;
mod tokens;
mod unstarted;
mod worker_suite;
