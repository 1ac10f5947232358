//! The JSON shapes of the HTTP API v1, shared by the server, the client and the SDK.
//!
//! These types are a promise to the outside world: field names carry their unit (`_ms`) and
//! times are RFC 3339 strings ([`format_rfc3339`]). They hold no queue rules: a spec becomes a
//! validated `QueueConfig` in `sluice-core` (`QueueConfig::apply`), and the server renders its
//! answers into these shapes. So a client compiles serde and nothing of the server.
//!
//! One module per resource; everything is re-exported here, so `sluice_wire::X` is the one path
//! to any shape.

use serde::{Deserialize, Deserializer, Serialize};
use utoipa::ToSchema;

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

/// Formats epoch milliseconds as the wire's time: RFC 3339 in UTC with exactly three fractional
/// digits, e.g. `2026-11-25T22:10:00.120Z`, so every timestamp has the same width.
pub fn format_rfc3339(ms: i64) -> String {
    const FORMAT: &[time::format_description::BorrowedFormatItem<'_>] = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
    );
    let nanos = i128::from(ms) * 1_000_000;
    match time::OffsetDateTime::from_unix_timestamp_nanos(nanos) {
        Ok(at) => at.format(FORMAT).unwrap_or_else(|_| ms.to_string()),
        Err(_) => ms.to_string(),
    }
}

/// Parses an RFC 3339 timestamp into epoch milliseconds.
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    let at =
        time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).ok()?;
    Some((at.unix_timestamp_nanos() / 1_000_000) as i64)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_round_trips_milliseconds() {
        let ms = 1_795_000_000_123;
        let text = format_rfc3339(ms);
        assert!(text.ends_with('Z'), "{text}");
        assert_eq!(
            format_rfc3339(1_795_000_000_120),
            "2026-11-18T11:06:40.120Z"
        );
        assert_eq!(parse_rfc3339(&text), Some(ms));
        assert_eq!(parse_rfc3339("yesterday"), None);
    }
}
