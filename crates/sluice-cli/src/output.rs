//! How client commands print: pretty JSON with `--json`, comfy-table tables otherwise.
//!
//! Everything meant for scripts goes to stdout; notes, progress and errors go to stderr.
//! Tables get box borders on a terminal and plain space-separated columns in a pipe, so
//! `awk` and `grep` work on them.

use std::io::{IsTerminal, Write};

use comfy_table::{ContentArrangement, Table, presets};
use serde::Serialize;
pub use sluice_client::duration::{millis, parse_duration};

/// Prints `value` as pretty JSON on stdout.
pub fn json<T: Serialize + ?Sized>(value: &T) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut stdout, value)?;
    writeln!(stdout)?;
    Ok(())
}

/// Prints a line on stdout.
pub fn line(text: impl std::fmt::Display) -> anyhow::Result<()> {
    writeln!(std::io::stdout().lock(), "{text}")?;
    Ok(())
}

/// A table with these column headers, styled for where stdout goes.
pub fn table(header: &[&str]) -> Table {
    let mut table = Table::new();
    if std::io::stdout().is_terminal() {
        table.load_preset(presets::UTF8_FULL_CONDENSED);
    } else {
        table.load_preset(presets::NOTHING);
    }
    // Never wrap cells: receipts and ids must stay copyable.
    table.set_content_arrangement(ContentArrangement::Disabled);
    table.set_header(header.iter().copied());
    table
}

/// A two-column table of settings or stats.
pub fn key_value_table(rows: impl IntoIterator<Item = (&'static str, String)>) -> Table {
    let mut table = self::table(&["field", "value"]);
    for (key, value) in rows {
        table.add_row(vec![key.to_owned(), value]);
    }
    table
}

/// Prints a table on stdout.
pub fn print_table(table: &Table) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{table}")?;
    Ok(())
}

/// Stops a command with a large effect typed at a terminal without `--yes` (a usage error,
/// status 2); in a script (stdin not a terminal) it goes ahead. `what` says what would happen,
/// e.g. "purging every ready and delayed message of q cannot be undone".
pub fn require_yes(yes: bool, what: &str) -> anyhow::Result<()> {
    if !yes && std::io::stdin().is_terminal() {
        return Err(crate::failure::usage(format!(
            "{what}; run again with --yes to go ahead"
        )));
    }
    Ok(())
}

/// A duration in ms for people: `850ms`, `12.3s`, `4m05s`, `2h03m`, `3d04h`.
pub fn human_ms(ms: i64) -> String {
    let sign = if ms < 0 { "-" } else { "" };
    let ms = ms.unsigned_abs();
    let (s, m, h, d) = (ms / 1000, ms / 60_000, ms / 3_600_000, ms / 86_400_000);
    let text = if ms < 1000 {
        format!("{ms}ms")
    } else if s < 60 {
        format!("{}.{}s", s, ms % 1000 / 100)
    } else if m < 60 {
        format!("{m}m{:02}s", s % 60)
    } else if h < 24 {
        format!("{h}h{:02}m", m % 60)
    } else {
        format!("{d}d{:02}h", h % 24)
    };
    format!("{sign}{text}")
}

/// An optional count, `-` when absent.
pub fn or_dash<T: ToString>(value: Option<T>) -> String {
    value.map_or_else(|| "-".to_owned(), |value| value.to_string())
}

/// A rate per second for a table cell: `0`, `2.35`, `12.3`, `1530`.
pub fn rate(per_second: f64) -> String {
    if per_second == 0.0 {
        "0".to_owned()
    } else if per_second < 10.0 {
        format!("{per_second:.2}")
    } else if per_second < 100.0 {
        format!("{per_second:.1}")
    } else {
        format!("{per_second:.0}")
    }
}

/// `text` cut to at most `max` characters, ending in `...` when cut; line breaks become spaces
/// so a table row stays one line.
pub fn cut(text: &str, max: usize) -> String {
    let text = text.replace(['\n', '\r'], " ");
    if text.chars().count() <= max {
        return text;
    }
    let mut out: String = text.chars().take(max.saturating_sub(3)).collect();
    out.push_str("...");
    out
}

/// Reads a point in time for the command line: an RFC 3339 time (e.g. `2025-01-31T12:00:00Z`),
/// kept as given, or a duration meaning that long ago (`90m`, `2d`), as RFC 3339 in UTC.
pub fn parse_time(text: &str) -> Result<String, String> {
    if sluice_wire::parse_rfc3339(text).is_some() {
        return Ok(text.to_owned());
    }
    let Ok(ago) = parse_duration(text) else {
        return Err(format!(
            "{text:?} is not an RFC 3339 time (e.g. 2025-01-31T12:00:00Z) or a duration ago (e.g. 2h)"
        ));
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let at = now.saturating_sub(ago);
    Ok(sluice_wire::format_rfc3339(millis(at)))
}

/// Indents JSON text for people, keeping numbers and strings exactly as written (like
/// [`compact_json`], which it starts from).
pub fn pretty_json(json: &str) -> String {
    let compact = compact_json(json);
    let mut out = String::with_capacity(compact.len() * 2);
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let mut chars = compact.chars().peekable();
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        out.push_str(&"  ".repeat(depth));
    };
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                out.push(c);
            }
            '{' | '[' => {
                out.push(c);
                if matches!(chars.peek(), Some('}' | ']')) {
                    out.push(chars.next().expect("peeked"));
                } else {
                    depth += 1;
                    newline(&mut out, depth);
                }
            }
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(c);
            }
            ',' => {
                out.push(c);
                newline(&mut out, depth);
            }
            ':' => out.push_str(": "),
            c => out.push(c),
        }
    }
    out
}

/// Removes the whitespace between JSON tokens, keeping numbers and strings exactly as written
/// (re-serializing through `serde_json::Value` would round big numbers).
pub fn compact_json(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    let mut in_string = false;
    let mut escaped = false;
    for c in json.chars() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if !c.is_ascii_whitespace() {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_well_at_every_scale() {
        for (ms, expected) in [
            (0, "0ms"),
            (850, "850ms"),
            (12_345, "12.3s"),
            (245_000, "4m05s"),
            (7_380_000, "2h03m"),
            (273_600_000, "3d04h"),
            (-1500, "-1.5s"),
        ] {
            assert_eq!(human_ms(ms), expected, "{ms}");
        }
    }

    #[test]
    fn times_must_be_rfc_3339() {
        assert!(parse_time("2025-01-31T12:00:00Z").is_ok());
        assert!(parse_time("2025-01-31T12:00:00.5+02:00").is_ok());
        assert!(parse_time("yesterday").is_err());
        assert!(parse_time("2025-01-31").is_err());
        let ago = parse_time("1h").unwrap();
        let ms = sluice_wire::parse_rfc3339(&ago).unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        assert!((now - 3_600_000 - ms).abs() < 60_000, "{ago}");
    }

    #[test]
    fn long_text_is_cut_with_an_ellipsis() {
        assert_eq!(cut("short", 10), "short");
        assert_eq!(cut("a\nb", 10), "a b");
        assert_eq!(cut("0123456789abc", 10), "0123456...");
    }

    #[test]
    fn pretty_json_indents_without_touching_values() {
        assert_eq!(
            pretty_json(
                r#"{"a":[1,2.50],"b":{},"c":"x, {y}: z","d":[],"e":123456789012345678901234567890}"#
            ),
            "{\n  \"a\": [\n    1,\n    2.50\n  ],\n  \"b\": {},\n  \"c\": \"x, {y}: z\",\n  \"d\": [],\n  \"e\": 123456789012345678901234567890\n}"
        );
        assert_eq!(pretty_json("\"s\""), "\"s\"");
    }

    #[test]
    fn compacting_keeps_strings_and_numbers_as_written() {
        assert_eq!(
            compact_json(
                "{ \"a b\" : [1 ,\n 2.50, 123456789012345678901234567890],\"c\\\" d\": \"x \\\\\" }"
            ),
            "{\"a b\":[1,2.50,123456789012345678901234567890],\"c\\\" d\":\"x \\\\\"}"
        );
    }
}
