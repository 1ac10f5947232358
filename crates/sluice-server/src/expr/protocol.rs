//! What the server and an expression worker say to each other over the worker's stdin and
//! stdout.
//!
//! Each message is a header, one line of JSON, followed by raw JSON documents whose lengths the
//! header gives. Values travel as bytes next to the header, not inside it, so a value nested as
//! deeply as an output may be ([`sluice_webhooks::expr::MAX_DEPTH`]) is never nested deeper by
//! the envelope (which `serde_json`'s recursion limit would refuse).
//!
//! - The worker starts by writing [`READY`].
//! - Server → worker: [`Request`], then `input_bytes` bytes: the input value.
//! - Worker → server: [`Response`], then for each [`Outcome::Value`] its bytes, in order.

use std::io::{self, BufRead, Read};

use serde::{Deserialize, Serialize};

/// The first line a worker writes once its limits are in place.
pub const READY: &str = "sluice-expr-worker ready v1";

/// The hidden subcommand of the `sluice` binary that runs a worker.
pub const WORKER_SUBCOMMAND: &str = "__expr-worker";

/// Longest header line either side accepts (programs are at most 8 KiB each, error messages
/// are cut to 512 bytes).
pub const HEADER_BYTES_MAX: usize = 1 << 20;

/// One evaluation: programs run in order on the same input.
#[derive(Debug, Serialize, Deserialize)]
pub struct Request {
    /// The programs' source texts (each compiled by the server before).
    pub programs: Vec<ProgramSpec>,
    /// Length of the input document that follows the header.
    pub input_bytes: usize,
}

/// A program of a [`Request`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProgramSpec {
    /// jq source text.
    pub source: String,
    /// Stop after this program when its first output is nothing, `null` or `false` (a filter).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub gate: bool,
}

/// The outcomes of a [`Request`]'s programs, in order. Shorter than the programs when a gate
/// closed or a program failed: the programs after it did not run.
#[derive(Debug, Serialize, Deserialize)]
pub struct Response {
    /// One per program that ran.
    pub outcomes: Vec<Outcome>,
}

/// What one program did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Its first output, serialised in this many bytes after the header.
    Value(usize),
    /// No output.
    Empty,
    /// Its error.
    Error(String),
}

/// Reads one header line (without the newline), at most [`HEADER_BYTES_MAX`] bytes. `None` at
/// the end of the stream.
pub fn read_header(reader: &mut impl BufRead) -> io::Result<Option<Vec<u8>>> {
    let mut line = Vec::new();
    let read = reader
        .take(HEADER_BYTES_MAX as u64 + 1)
        .read_until(b'\n', &mut line)?;
    if read == 0 {
        return Ok(None);
    }
    if line.pop() != Some(b'\n') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "header line too long or cut short",
        ));
    }
    Ok(Some(line))
}
