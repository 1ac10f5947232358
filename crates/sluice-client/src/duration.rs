//! Durations as people type them on a command line, and as the API counts them. Here rather than
//! in the CLI so `sluice bench` (its own crate) reads its flags exactly as every other command.

use std::time::Duration;

/// Parses a duration for the command line, with the `humantime` crate: a number and a unit,
/// `500ms`, `30s`, `1.5s`, `5m`, `2h`, `1d`, or several (`1h30m`). A bare number is refused with
/// a hint rather than guessed: the API counts ms and people count seconds, so `30` is a trap.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return Err(format!(
            "{text:?} has no unit: add one, e.g. {text}s or {text}ms (units: ms, s, m, h, d)"
        ));
    }
    humantime::parse_duration(text).map_err(|error| {
        format!("{text:?} is not a duration ({error}): write e.g. 500ms, 30s, 5m, 1h30m or 1d")
    })
}

/// A duration as whole milliseconds for the API.
pub fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_a_unit_and_bare_numbers_are_refused() {
        for (text, ms) in [
            ("1500ms", 1500),
            ("30s", 30_000),
            ("1h30m", 5_400_000),
            ("1.5s", 1500),
            ("5m", 300_000),
            ("2h", 7_200_000),
            ("4d", 345_600_000),
            ("0s", 0),
        ] {
            assert_eq!(
                parse_duration(text),
                Ok(Duration::from_millis(ms)),
                "{text}"
            );
        }
        for text in [
            "", "s", "-1s", "1e3", "soon", "1.2.3s", "1500", "30", "0", "1.5",
        ] {
            assert!(parse_duration(text).is_err(), "{text}");
        }
        let error = parse_duration("30").unwrap_err();
        assert!(
            error.contains("has no unit") && error.contains("30s"),
            "{error}"
        );
    }
}
