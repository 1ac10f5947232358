//! How client commands print: pretty JSON with `--json`, comfy-table tables otherwise.
//!
//! Everything meant for scripts goes to stdout; notes, progress and errors go to stderr.
//! Tables get box borders on a terminal and plain space-separated columns in a pipe, so
//! `awk` and `grep` work on them.

use std::io::{IsTerminal, Write};

use comfy_table::{ContentArrangement, Table, presets};
use serde::Serialize;

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
    fn compacting_keeps_strings_and_numbers_as_written() {
        assert_eq!(
            compact_json(
                "{ \"a b\" : [1 ,\n 2.50, 123456789012345678901234567890],\"c\\\" d\": \"x \\\\\" }"
            ),
            "{\"a b\":[1,2.50,123456789012345678901234567890],\"c\\\" d\":\"x \\\\\"}"
        );
    }
}
