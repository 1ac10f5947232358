//! The JSON shapes of the HTTP API v1, shared by the server and the client.
//!
//! These types are a promise to the outside world: field names carry their unit (`_ms`) and
//! times are RFC 3339 strings. Validation into core types happens here too, so the server, the
//! config file and the client agree on what is valid.
//!
//! One module per resource; everything is re-exported here, so `sluice_core::wire::X` is the
//! one path to any shape.

use serde::{Deserialize, Deserializer, Serialize};
use utoipa::ToSchema;

use crate::clock::Millis;

mod alerts;
mod browse;
mod dead_letters;
mod deliveries;
mod delivery;
mod error;
mod hooks;
mod messages;
mod queues;
mod schedules;
mod stats;
mod topics;

pub use alerts::*;
pub use browse::*;
pub use dead_letters::*;
pub use deliveries::*;
pub use delivery::*;
pub use error::*;
pub use hooks::*;
pub use messages::*;
pub use queues::*;
pub use schedules::*;
pub use stats::*;
pub use topics::*;

/// Health answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct HealthOut {
    /// `ok`, or why not.
    pub status: String,
}

/// Converts epoch ms to the wire time format.
pub fn time_out(ms: Millis) -> String {
    crate::clock::format_rfc3339(ms)
}

/// Deserializes a limit where `0` and an explicit `null` both mean "no limit": a `null` reads as
/// `Some(0)` (remove it), while a missing field stays `None` (leave it as it is on an update).
fn null_as_zero<'de, D: Deserializer<'de>, T: Deserialize<'de> + Default>(
    deserializer: D,
) -> Result<Option<T>, D::Error> {
    Option::<T>::deserialize(deserializer).map(|value| Some(value.unwrap_or_default()))
}

/// Deserializes a present field as `Some`, even when it is JSON `null`.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<T>, D::Error> {
    T::deserialize(deserializer).map(Some)
}
