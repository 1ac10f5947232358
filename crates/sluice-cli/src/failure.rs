//! How a failed client command ends: its exit status (one table for every command, in
//! [`EXIT_CODES`]) and its error on stderr, as `error: <code>: <message>` or, with `--json`, as
//! `{"error": {"code", "message", "details"}}`, the shape of the server's own error bodies.
//!
//! The code is the server's (`queue_not_found`, `stale_receipt`, ...) when the server answered;
//! local failures have their own: `usage` (bad flags or input, caught before any request),
//! `unreachable` (no connection, or no answer in time), `bad_answer` (an answer that is not the
//! API's), `transport` (a connection that broke mid-request), `io` and `error`.

use std::io::ErrorKind;

use serde_json::{Value, json};
use sluice_client::Code;

/// The exit statuses of every client command, for `sluice --help`, the README and docs/cli.md.
pub const EXIT_CODES: &str = "\
Exit status (every client command):
  0  ok
  1  other failure: a server error (5xx), a broken connection, a local I/O error
  2  usage: a bad flag, argument or input, found before any request
  3  not found: no such queue or message (HTTP 404; cancel: not_found)
  4  refused: no or a wrong token (401, 403) or input the server refused (400, 413, 422,
     other 4xx; cancel: already_processing)
  5  conflict: HTTP 409, e.g. a stale receipt (cancel: already_completed)
  6  unreachable: no connection to the server, or no answer in time
  7  timed out: `queue drain` reached --timeout before the queue was empty
With --json, errors are printed on stderr as {\"error\": {\"code\": ..., \"message\": ...}}.
Durations take a unit: 500ms, 30s, 5m, 2h, 1d (a bare number is refused).";

/// Exit status of a command that ran but whose wait ran out (`queue drain --timeout`).
pub const TIMED_OUT: u8 = 7;

/// A mistake in what the user gave (flags, arguments, input), found before any request:
/// exit status 2, code `usage`.
#[derive(Debug)]
pub struct Usage(pub String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// A [`Usage`] error.
pub fn usage(message: impl Into<String>) -> anyhow::Error {
    Usage(message.into()).into()
}

/// The code of a failed command: the server's, or one of the CLI's own for failures that
/// never got an answer from it.
#[derive(Debug, Clone, PartialEq)]
pub enum FailureCode {
    /// The server answered with this code (one from a newer server stays as sent).
    Server(Code),
    /// Bad flags, arguments or input, found before any request.
    Usage,
    /// No connection to the server, or no answer in time.
    Unreachable,
    /// The connection broke mid-request.
    Transport,
    /// An answer that is not the API's.
    BadAnswer,
    /// A local I/O error.
    Io,
    /// Anything else.
    Error,
}

impl FailureCode {
    /// The code as printed, e.g. `queue_not_found` or `usage`.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Server(code) => code.as_str(),
            Self::Usage => "usage",
            Self::Unreachable => "unreachable",
            Self::Transport => "transport",
            Self::BadAnswer => "bad_answer",
            Self::Io => "io",
            Self::Error => "error",
        }
    }

    /// The exit status of a local failure (see [`EXIT_CODES`]); the server's answers go by
    /// their HTTP status instead ([`exit_for_status`]).
    fn local_exit(&self) -> u8 {
        match self {
            Self::Usage => 2,
            Self::Unreachable => 6,
            Self::Server(_) | Self::Transport | Self::BadAnswer | Self::Io | Self::Error => 1,
        }
    }

    /// Whether the message alone says it all, so the text form leaves the code out.
    fn speaks_for_itself(&self) -> bool {
        matches!(
            self,
            Self::Usage | Self::Error | Self::Io | Self::Unreachable
        )
    }
}

/// What is printed for a failed command, and its exit status.
#[derive(Debug, PartialEq)]
pub struct Failure {
    /// The server's error code, or a local one (see the module docs).
    pub code: FailureCode,
    /// What went wrong, in words (the causes of local errors included).
    pub message: String,
    /// The server's `details`, when it sent any.
    pub details: Option<Value>,
    /// The server's `Retry-After`, in seconds.
    pub retry_after_s: Option<u64>,
    /// The exit status, from [`EXIT_CODES`].
    pub exit: u8,
}

impl Failure {
    /// Sorts an error into its code and exit status. `url` is the server's, for the message
    /// of an unreachable server.
    pub fn of(error: &anyhow::Error, url: &str) -> Self {
        let plain = |code: FailureCode| Self {
            exit: code.local_exit(),
            code,
            message: format!("{error:#}"),
            details: None,
            retry_after_s: None,
        };
        for cause in error.chain() {
            if cause.downcast_ref::<Usage>().is_some() {
                return plain(FailureCode::Usage);
            }
            if let Some(client) = cause.downcast_ref::<sluice_client::Error>() {
                return Self::of_client(error, client, url);
            }
        }
        if error
            .chain()
            .any(|cause| cause.downcast_ref::<std::io::Error>().is_some())
        {
            return plain(FailureCode::Io);
        }
        plain(FailureCode::Error)
    }

    fn of_client(error: &anyhow::Error, client: &sluice_client::Error, url: &str) -> Self {
        use sluice_client::Error as E;
        // The notes wrapped around the client's error (e.g. how much of a stream was stored).
        let context: Vec<String> = error
            .chain()
            .take_while(|cause| cause.downcast_ref::<sluice_client::Error>().is_none())
            .map(ToString::to_string)
            .collect();
        let with_context = |message: String| {
            let mut parts = context.clone();
            parts.push(message);
            parts.join(": ")
        };
        let (code, message) = match client {
            E::Api { code, message, .. } => (FailureCode::Server(code.clone()), message.clone()),
            E::Transport(transport) if transport.is_connect() || transport.is_timeout() => (
                FailureCode::Unreachable,
                format!(
                    "cannot reach the sluice server at {url} ({}); start it with `sluice serve` \
                     or set SLUICE_URL / --url",
                    transport_reason(transport)
                ),
            ),
            E::Transport(transport) => (
                FailureCode::Transport,
                format!(
                    "the connection to the sluice server at {url} failed: {}",
                    transport_reason(transport)
                ),
            ),
            E::Decode { .. } => (FailureCode::BadAnswer, client.to_string()),
            E::InvalidUrl { .. } | E::InvalidPathSegment { .. } | E::InvalidToken { .. } => {
                (FailureCode::Usage, client.to_string())
            }
        };
        let exit = match (&code, client) {
            (FailureCode::Server(_), E::Api { status, .. }) => exit_for_status(*status),
            (local, _) => local.local_exit(),
        };
        Self {
            code,
            message: with_context(message),
            details: client.details().cloned(),
            retry_after_s: client.retry_after().map(|after| after.as_secs()),
            exit,
        }
    }

    /// Prints the error on stderr: JSON with `json`, else `error: <code>: <message>` (local
    /// errors without a code of their own as `error: <message>`), then details.
    pub fn print(&self, json: bool) {
        if json {
            let mut error = json!({"code": self.code.as_str(), "message": self.message});
            if let Some(details) = &self.details {
                error["details"] = details.clone();
            }
            if let Some(after) = self.retry_after_s {
                error["retry_after_s"] = after.into();
            }
            eprintln!("{}", json!({ "error": error }));
            return;
        }
        if self.code.speaks_for_itself() {
            eprintln!("error: {}", self.message);
        } else {
            eprintln!("error: {}: {}", self.code.as_str(), self.message);
        }
        if let Some(details) = &self.details {
            let details =
                serde_json::to_string_pretty(details).unwrap_or_else(|_| details.to_string());
            eprintln!("details: {details}");
        }
        if let Some(after) = self.retry_after_s {
            eprintln!("retry after: {after}s");
        }
    }
}

/// The exit status of an HTTP error status; see [`EXIT_CODES`].
pub fn exit_for_status(status: u16) -> u8 {
    match status {
        404 => 3,
        409 => 5,
        400..=499 => 4,
        _ => 1,
    }
}

/// Why a request got no answer, in a few words: the innermost cause (`Connection refused`,
/// `dns error: ...`) rather than reqwest's whole chain.
fn transport_reason(error: &reqwest::Error) -> String {
    let mut innermost: &dyn std::error::Error = error;
    while let Some(source) = innermost.source() {
        if let Some(io) = source.downcast_ref::<std::io::Error>() {
            return match io.kind() {
                ErrorKind::ConnectionRefused => "connection refused".to_owned(),
                ErrorKind::TimedOut => "timed out".to_owned(),
                _ => io.to_string(),
            };
        }
        innermost = source;
    }
    if error.is_timeout() {
        "no answer in time".to_owned()
    } else {
        innermost.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_statuses_map_to_the_documented_exit_codes() {
        for (status, exit) in [
            (400, 4),
            (401, 4),
            (403, 4),
            (404, 3),
            (409, 5),
            (413, 4),
            (422, 4),
            (500, 1),
            (503, 1),
        ] {
            assert_eq!(exit_for_status(status), exit, "{status}");
        }
        for exit in 0..=7 {
            assert!(EXIT_CODES.contains(&format!("\n  {exit}  ")), "{exit}");
        }
    }

    #[test]
    fn usage_errors_and_api_errors_keep_their_codes() {
        let failure = Failure::of(&usage("bad"), "http://h:1");
        assert_eq!((failure.code.as_str(), failure.exit), ("usage", 2));
        let api = sluice_client::Error::Api {
            status: 404,
            code: Code::parse("queue_not_found"),
            message: "no queue".into(),
            details: None,
            retry_after: None,
        };
        let error = anyhow::Error::from(api).context("3 messages were stored");
        let failure = Failure::of(&error, "http://h:1");
        assert_eq!(
            failure.code,
            FailureCode::Server(Code::Known(sluice_client::ErrorCode::QueueNotFound))
        );
        assert_eq!(failure.code.as_str(), "queue_not_found");
        assert_eq!(failure.exit, 3);
        assert_eq!(failure.message, "3 messages were stored: no queue");
    }

    /// A code from a newer server is printed as sent and exits by its HTTP status.
    #[test]
    fn an_unknown_server_code_is_kept_and_exits_by_its_status() {
        let api = sluice_client::Error::Api {
            status: 409,
            code: Code::parse("already_replayed"),
            message: "m".into(),
            details: None,
            retry_after: None,
        };
        let failure = Failure::of(&anyhow::Error::from(api), "http://h:1");
        assert_eq!(failure.code.as_str(), "already_replayed");
        assert_eq!(failure.exit, 5);
        for (code, exit) in [
            (FailureCode::Usage, 2),
            (FailureCode::Unreachable, 6),
            (FailureCode::Io, 1),
            (FailureCode::BadAnswer, 1),
        ] {
            assert_eq!(code.local_exit(), exit, "{code:?}");
        }
    }
}
