//! sluice's SQS-compatible API driven by the AWS SDK for Rust (`aws-sdk-sqs`, JSON 1.0).
//!
//! One test binary (one link of the SDK and the server), one module per topic. Each test starts
//! its own in-process server, or talks to `SLUICE_SQS_ENDPOINT` when set (a `moto_server`, to
//! check the tests themselves against another implementation); see `support`.

mod support;

mod attributes;
mod batches;
mod crash;
mod dead_letters;
mod errors;
mod fifo;
mod messages;
mod permissions;
mod queues;
mod tags;
mod visibility;
