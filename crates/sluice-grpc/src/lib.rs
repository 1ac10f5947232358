//! sluice's gRPC API: the messages, the `Queues` server trait and client generated from
//! `proto/sluice/v1/sluice.proto`. The server side lives in `sluice-server` (`grpc`), which
//! calls the same operations as the HTTP API; `sluice-sdk` has a backend over the client.

/// Version 1 of the API (`package sluice.v1`).
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod v1 {
    tonic::include_proto!("sluice.v1");
}

/// The encoded `FileDescriptorSet` of `sluice.v1`, served by the reflection service
/// (`grpcurl` without `-proto`).
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/sluice_descriptor.bin"));

/// The trailer that carries the sluice error code of a refused call (`queue_full`, ...).
pub const ERROR_CODE_TRAILER: &str = "sluice-error-code";
/// The domain of the `google.rpc.ErrorInfo` in a refused call's status details.
pub const ERROR_DOMAIN: &str = "sluice";
