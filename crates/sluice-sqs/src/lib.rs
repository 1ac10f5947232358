//! The Amazon SQS wire protocol for sluice: parsing and rendering only.
//!
//! SQS clients speak one of two protocols (docs/design/sqs-compat.md §1): AWS JSON 1.0
//! (`X-Amz-Target: AmazonSQS.<Action>`, every current SDK) and AWS query (`Action=<Action>`
//! as form or query parameters, answered in XML: old SDK pins, kombu, `curl`). This crate
//! turns either into one typed request per operation and renders typed responses and errors
//! back into the protocol the request came in:
//!
//! - [`protocol`]: is this HTTP request SQS at all, and in which protocol;
//! - [`action`]: the operation named by the request;
//! - [`request`]: one request struct per operation, from JSON or from flattened query params;
//! - [`response`]: one response struct per operation, rendered as JSON or as query XML;
//! - [`error`]: the SQS error shapes, codes and statuses, in both renderings;
//! - [`answer`]: a response or an error as HTTP status, content type, headers and body;
//! - [`md5`]: the digests SQS returns for message bodies and message attributes;
//! - [`sigv4`]: AWS Signature Version 4 verification, for when access control is on.
//!
//! The queue's rules are not here: "a protocol is a renderer" (ARCHITECTURE.md). The
//! operations will come from `sluice-ops` when the API is wired into the server (issue 13);
//! until then this crate is wired to nothing.

pub mod action;
pub mod answer;
pub mod error;
pub mod md5;
pub mod protocol;
pub mod request;
pub mod response;
pub mod sigv4;
mod xml;

pub use action::Action;
pub use answer::Answer;
pub use error::{ErrorKind, SqsError};
pub use protocol::{Protocol, Wire, detect};
pub use request::Request;
pub use response::Response;
pub use sigv4::{SignedRequest, Verified};
