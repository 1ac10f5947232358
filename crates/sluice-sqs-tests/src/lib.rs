//! sluice-sqs-tests: no library code. The crate exists for its test binary (`tests/sqs/`), which
//! drives sluice's SQS-compatible API through the AWS SDK for Rust, so that the SDK is a
//! dev-dependency of this crate alone and the server, CLI and client crates never link it.
