//! The `sluice` client as scripts use it, against the real binary: tokens with access control
//! on (`--token`, `SLUICE_TOKEN`, `--token-file`), the exit status of each class of failure
//! (docs/cli.md), errors as JSON with `--json`, durations with units, `serve --help`, and the
//! confirmation `dlq replay` asks for at a terminal.
//!
//! Servers come from the integration tests' support (`TestServer`); the CLI runs as a child
//! process with a deadline.

#[path = "../it/support/mod.rs"]
mod support;

use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use serde_json::Value;
use support::TestServer;
use support::tokens::{ADMIN, CONSUMER_A, PRODUCER_A, team_a};

/// How long one CLI command may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// What a CLI command did.
struct Output {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl Output {
    fn code(&self) -> Option<i32> {
        self.status.code()
    }

    #[track_caller]
    fn assert_success(&self) -> &Self {
        assert!(self.status.success(), "command failed: {self:?}");
        self
    }

    /// Stdout parsed as JSON.
    #[track_caller]
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|error| panic!("stdout is not JSON ({error}): {self:?}"))
    }

    /// Stderr parsed as one JSON error `{"error": {"code", "message"}}`; returns its code.
    #[track_caller]
    fn json_error_code(&self) -> String {
        let error: Value = serde_json::from_str(self.stderr.trim())
            .unwrap_or_else(|error| panic!("stderr is not one JSON value ({error}): {self:?}"));
        let message = error["error"]["message"].as_str();
        assert!(
            message.is_some_and(|message| !message.is_empty()),
            "{self:?}"
        );
        error["error"]["code"]
            .as_str()
            .unwrap_or_else(|| panic!("no error.code: {self:?}"))
            .to_owned()
    }

    #[track_caller]
    fn assert_never_shows(&self, secret: &str) {
        assert!(
            !self.stdout.contains(secret) && !self.stderr.contains(secret),
            "the token was printed: {self:?}"
        );
    }
}

impl std::fmt::Debug for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.status, self.stdout, self.stderr
        )
    }
}

/// Runs `sluice ARGS...` with `env` (and none of the SLUICE_* variables of the test's own
/// environment), stdin empty.
async fn sluice_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_sluice"));
    command.args(args);
    for name in [
        "SLUICE_URL",
        "SLUICE_TOKEN",
        "SLUICE_TOKEN_FILE",
        "SLUICE_CONFIG",
        "SLUICE_LISTEN",
        "SLUICE_DATA",
    ] {
        command.env_remove(name);
    }
    command.envs(env.iter().copied());
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let out = tokio::time::timeout(COMMAND_TIMEOUT, command.output())
        .await
        .unwrap_or_else(|_| panic!("sluice {args:?} did not finish within {COMMAND_TIMEOUT:?}"))
        .expect("run sluice");
    Output {
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs `sluice --url URL ARGS...`.
async fn sluice(server: &TestServer, args: &[&str]) -> Output {
    sluice_at(server.url(), args, &[]).await
}

async fn sluice_at(url: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut all = vec!["--url", url];
    all.extend_from_slice(args);
    sluice_env(&all, env).await
}

/// Runs `sluice --url URL --token ADMIN ARGS...`.
async fn admin(server: &TestServer, args: &[&str]) -> Output {
    let mut all = vec!["--token", ADMIN];
    all.extend_from_slice(args);
    sluice(server, &all).await
}

#[tokio::test]
async fn tokens_come_from_the_flag_the_environment_or_a_file_and_are_never_printed() {
    let server = team_a(TestServer::builder(), "").start().await;
    let url = server.url().to_owned();

    // Without a token: refused (4), saying unauthorized, as text and as JSON.
    let without = sluice(&server, &["queue", "list"]).await;
    assert_eq!(without.code(), Some(4), "{without:?}");
    assert!(without.stderr.contains("unauthorized"), "{without:?}");
    let without = sluice(&server, &["--json", "queue", "list"]).await;
    assert_eq!(without.code(), Some(4), "{without:?}");
    assert_eq!(without.json_error_code(), "unauthorized");

    // --token.
    let created = admin(&server, &["queue", "create", "team-a.jobs"]).await;
    created.assert_success().assert_never_shows(ADMIN);

    // SLUICE_TOKEN.
    let listed = sluice_at(
        &url,
        &["--json", "queue", "list"],
        &[("SLUICE_TOKEN", ADMIN)],
    )
    .await;
    listed.assert_success().assert_never_shows(ADMIN);
    assert_eq!(
        listed.json()["queues"][0]["name"],
        "team-a.jobs",
        "{listed:?}"
    );

    // --token-file and SLUICE_TOKEN_FILE, with the trailing newline `echo` leaves.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, format!("{PRODUCER_A}\n")).unwrap();
    let file = file.to_str().unwrap();
    let sent = sluice_at(
        &url,
        &["--token-file", file, "send", "team-a.jobs", "1"],
        &[],
    )
    .await;
    sent.assert_success().assert_never_shows(PRODUCER_A);
    let sent = sluice_at(
        &url,
        &["send", "team-a.jobs", "2"],
        &[("SLUICE_TOKEN_FILE", file)],
    )
    .await;
    sent.assert_success();

    // A flag on the command line wins over the environment.
    let wrong = "wrong-token-0123456789abcdef";
    let sent = sluice_at(
        &url,
        &["--token-file", file, "send", "team-a.jobs", "3"],
        &[("SLUICE_TOKEN", wrong)],
    )
    .await;
    sent.assert_success().assert_never_shows(wrong);

    // The server tells roles apart: a consumer may receive but not send (403: refused, 4).
    let received = sluice_at(
        &url,
        &[
            "--json",
            "--token",
            CONSUMER_A,
            "recv",
            "team-a.jobs",
            "--max",
            "10",
        ],
        &[],
    )
    .await;
    received.assert_success();
    assert_eq!(
        received.json()["messages"].as_array().map(Vec::len),
        Some(3)
    );
    let forbidden = sluice_at(
        &url,
        &["--json", "send", "team-a.jobs", "4"],
        &[("SLUICE_TOKEN", CONSUMER_A)],
    )
    .await;
    assert_eq!(forbidden.code(), Some(4), "{forbidden:?}");
    assert_eq!(forbidden.json_error_code(), "forbidden");
    forbidden.assert_never_shows(CONSUMER_A);

    // A wrong token: 401, not echoed.
    let refused = sluice_at(&url, &["--token", wrong, "queue", "list"], &[]).await;
    assert_eq!(refused.code(), Some(4), "{refused:?}");
    refused.assert_never_shows(wrong);

    // --help shows where the token comes from, never its value.
    let help = sluice_env(&["queue", "list", "--help"], &[("SLUICE_TOKEN", ADMIN)]).await;
    help.assert_success().assert_never_shows(ADMIN);
    assert!(help.stdout.contains("SLUICE_TOKEN"), "{help:?}");

    // A token file that cannot be read, or is empty, is a usage error naming the file.
    let empty = dir.path().join("empty");
    std::fs::write(&empty, "\n").unwrap();
    for path in [empty.as_path(), Path::new("/nonexistent/token")] {
        let out = sluice_at(
            &url,
            &["--token-file", path.to_str().unwrap(), "queue", "list"],
            &[],
        )
        .await;
        assert_eq!(out.code(), Some(2), "{out:?}");
        assert!(out.stderr.contains(path.to_str().unwrap()), "{out:?}");
    }
    // A token that cannot be an HTTP header: a usage error that does not show it.
    let out = sluice_at(
        &url,
        &["queue", "list"],
        &[("SLUICE_TOKEN", "two\nlines-0123456789")],
    )
    .await;
    assert_eq!(out.code(), Some(2), "{out:?}");
    out.assert_never_shows("lines-0123456789");
}

#[tokio::test]
async fn each_class_of_failure_has_its_exit_status_and_a_json_error() {
    let server = TestServer::builder().start().await;
    sluice(&server, &["queue", "create", "jobs"])
        .await
        .assert_success();

    // 3: not found.
    let missing = sluice(&server, &["queue", "stats", "nope"]).await;
    assert_eq!(missing.code(), Some(3), "{missing:?}");
    assert!(
        missing.stderr.starts_with("error: queue_not_found: "),
        "{missing:?}"
    );
    let missing = sluice(&server, &["--json", "status", "jobs", "--id", "nope"]).await;
    assert_eq!(missing.code(), Some(3), "{missing:?}");
    assert_eq!(missing.json_error_code(), "message_not_found");

    // 4: refused by the server as invalid (a receive of more than 100).
    let invalid = sluice(&server, &["--json", "recv", "jobs", "--max", "1000"]).await;
    assert_eq!(invalid.code(), Some(4), "{invalid:?}");
    assert_eq!(invalid.json_error_code(), "invalid_field");

    // 5: conflict (a receipt acked twice is stale).
    sluice(&server, &["send", "jobs", "1"])
        .await
        .assert_success();
    let received = sluice(&server, &["--json", "recv", "jobs"]).await;
    let receipt = received.json()["messages"][0]["receipt"]
        .as_str()
        .unwrap()
        .to_owned();
    sluice(&server, &["ack", "jobs", &receipt])
        .await
        .assert_success();
    let stale = sluice(&server, &["ack", "jobs", &receipt]).await;
    assert_eq!(stale.code(), Some(5), "{stale:?}");
    let stale = sluice(&server, &["--json", "ack", "jobs", &receipt]).await;
    assert_eq!(stale.json_error_code(), "stale_receipt");

    // 2: usage, from clap and from the command's own checks, as JSON with --json.
    for args in [
        &["--json", "recv", "jobs", "--wait", "5"][..],
        &["--json", "status", "jobs", "not-a-uuid"],
        &["--json", "recv", "jobs", "--no-such-flag"],
        &["--json", "cancel", "jobs", "--key", "k"],
    ] {
        let out = sluice(&server, args).await;
        assert_eq!(out.code(), Some(2), "{args:?}: {out:?}");
        assert_eq!(out.json_error_code(), "usage", "{args:?}");
    }

    // 6: unreachable, with one friendly line naming the URL and what to do.
    let down = sluice_at("http://127.0.0.1:1", &["queue", "list"], &[]).await;
    assert_eq!(down.code(), Some(6), "{down:?}");
    let line = down.stderr.trim();
    assert_eq!(line.lines().count(), 1, "{down:?}");
    for text in ["http://127.0.0.1:1", "sluice serve", "SLUICE_URL", "--url"] {
        assert!(line.contains(text), "{text}: {down:?}");
    }
    assert!(
        !line.contains("error sending request"),
        "no raw chain: {down:?}"
    );
    let down = sluice_at("http://127.0.0.1:1", &["--json", "queue", "list"], &[]).await;
    assert_eq!(down.code(), Some(6), "{down:?}");
    assert_eq!(down.json_error_code(), "unreachable");

    // 7: a drain that timed out (its outcome on stdout, no error line).
    sluice(&server, &["send", "jobs", "2"])
        .await
        .assert_success();
    let drain = sluice(&server, &["queue", "drain", "jobs", "--timeout", "100ms"]).await;
    assert_eq!(drain.code(), Some(7), "{drain:?}");
    assert!(drain.stderr.is_empty(), "{drain:?}");

    // The table is in `sluice --help`.
    let help = sluice_env(&["--help"], &[]).await;
    for line in [
        "3  not found",
        "4  refused",
        "5  conflict",
        "6  unreachable",
    ] {
        assert!(help.stdout.contains(line), "{line}: {help:?}");
    }
}

#[tokio::test]
async fn durations_take_a_unit_and_ids_are_idempotency_keys_everywhere() {
    let server = TestServer::builder().start().await;
    let created = sluice(
        &server,
        &[
            "--json",
            "queue",
            "create",
            "jobs",
            "--visibility-timeout",
            "45s",
            "--dedup-window",
            "2h",
            "--backoff-initial",
            "250ms",
            "--backoff-max",
            "1m",
            "--max-age",
            "1d",
        ],
    )
    .await;
    created.assert_success();
    let config = &created.json()["queue"]["config"];
    assert_eq!(config["visibility_timeout_ms"], 45_000, "{created:?}");
    assert_eq!(config["dedup_window_ms"], 7_200_000, "{created:?}");
    assert_eq!(config["backoff"]["initial_ms"], 250, "{created:?}");
    assert_eq!(config["backoff"]["max_ms"], 60_000, "{created:?}");
    assert_eq!(config["max_age_ms"], 86_400_000, "{created:?}");

    // A bare number is refused with a hint to add a unit.
    for args in [
        &["queue", "update", "jobs", "--visibility-timeout", "30"][..],
        &["recv", "jobs", "--wait", "1"],
        &["send", "jobs", "1", "--delay", "500"],
        &["queue", "drain", "jobs", "--timeout", "30"],
    ] {
        let out = sluice(&server, args).await;
        assert_eq!(out.code(), Some(2), "{args:?}: {out:?}");
        assert!(out.stderr.contains("has no unit"), "{args:?}: {out:?}");
    }

    // send --id (idempotency key) and --key (ordering key); status and cancel find it by --id.
    let sent = sluice(
        &server,
        &[
            "--json",
            "send",
            "jobs",
            "1",
            "--id",
            "order-1",
            "--key",
            "customer-7",
            "--delay",
            "1h",
        ],
    )
    .await;
    sent.assert_success();
    let message_id = sent.json()["message_id"].as_str().unwrap().to_owned();
    let status = sluice(&server, &["--json", "status", "jobs", "--id", "order-1"]).await;
    status.assert_success();
    let status = status.json();
    assert_eq!(status["message_id"], message_id.as_str(), "{status}");
    assert_eq!(status["key"], "customer-7", "{status}");
    assert_eq!(status["state"], "delayed", "{status}");
    let cancelled = sluice(&server, &["--json", "cancel", "jobs", "--id", "order-1"]).await;
    cancelled.assert_success();
    assert_eq!(cancelled.json()["outcome"], "cancelled");

    // recv/extend/nack durations with units.
    sluice(&server, &["send", "jobs", "2"])
        .await
        .assert_success();
    let received = sluice(
        &server,
        &[
            "--json",
            "recv",
            "jobs",
            "--wait",
            "1s",
            "--visibility-timeout",
            "2m",
        ],
    )
    .await;
    received.assert_success();
    let receipt = received.json()["messages"][0]["receipt"]
        .as_str()
        .unwrap()
        .to_owned();
    sluice(
        &server,
        &["extend", "jobs", &receipt, "--visibility-timeout", "90s"],
    )
    .await
    .assert_success();
    let nacked = sluice(
        &server,
        &["--json", "nack", "jobs", &receipt, "--delay", "1h"],
    )
    .await;
    nacked.assert_success();
    assert_eq!(nacked.json()["state"], "delayed", "{nacked:?}");
}

/// `sluice --version` names the release (the one version of every crate and both SDKs) and the
/// commit it was built from, so a bug report says exactly what ran (issue 31).
#[tokio::test]
async fn the_version_names_the_release_and_the_commit() {
    let version = sluice_env(&["--version"], &[]).await;
    version.assert_success();
    let line = version.stdout.trim();
    let expected = format!("sluice {} (commit ", env!("CARGO_PKG_VERSION"));
    assert!(line.starts_with(&expected), "{line}");
    let commit = line[expected.len()..].trim_end_matches(')');
    let hex = commit.trim_end_matches("-dirty");
    assert!(
        hex.len() == 12 && hex.chars().all(|c| c.is_ascii_hexdigit()),
        "a checkout's build names its commit: {line}"
    );
    // The SDKs carry the same version.
    let package: Value =
        serde_json::from_str(include_str!("../../../../clients/typescript/package.json")).unwrap();
    assert_eq!(package["version"], env!("CARGO_PKG_VERSION"));
    let pyproject = include_str!("../../../../clients/python/pyproject.toml");
    let python = format!("\nversion = \"{}\"\n", env!("CARGO_PKG_VERSION"));
    assert!(
        pyproject.contains(&python),
        "clients/python/pyproject.toml: {python}"
    );
    // One licence: the file at the root, the copy each SDK package ships, and every manifest.
    let licence = include_str!("../../../../LICENSE");
    assert!(licence.contains("Apache License\n                           Version 2.0"));
    assert_eq!(
        include_str!("../../../../clients/typescript/LICENSE"),
        licence
    );
    assert_eq!(include_str!("../../../../clients/python/LICENSE"), licence);
    assert_eq!(package["license"], "Apache-2.0");
    assert!(pyproject.contains("\nlicense = \"Apache-2.0\"\n"));
    assert!(include_str!("../../../../Cargo.toml").contains("\nlicense = \"Apache-2.0\"\n"));
}

#[tokio::test]
async fn serve_help_shows_defaults_and_no_client_flags() {
    let help = sluice_env(&["serve", "--help"], &[]).await;
    help.assert_success();
    for flag in ["--url", "--json", "--token", "--token-file"] {
        assert!(!help.stdout.contains(flag), "{flag}: {help:?}");
    }
    for text in ["--listen", "[default: 127.0.0.1:7566", "[default: fsync"] {
        assert!(help.stdout.contains(text), "{text}: {help:?}");
    }
    let refused = sluice_env(&["serve", "--url", "http://127.0.0.1:7566"], &[]).await;
    assert_eq!(refused.code(), Some(2), "{refused:?}");
    assert!(refused.stderr.contains("--listen"), "{refused:?}");
    // Client commands still list them.
    let client_help = sluice_env(&["queue", "list", "--help"], &[]).await;
    assert!(
        client_help.stdout.contains("--token-file"),
        "{client_help:?}"
    );
}

#[tokio::test]
async fn a_bulk_dlq_replay_typed_at_a_terminal_needs_yes() {
    if std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_err()
    {
        assert!(
            std::env::var_os("CI").is_none(),
            "script(1) (util-linux) is needed for a terminal"
        );
        eprintln!("skipped: no script(1) to give the CLI a terminal");
        return;
    }
    let server = TestServer::builder().start().await;
    sluice(&server, &["queue", "create", "jobs"])
        .await
        .assert_success();
    sluice(&server, &["send", "jobs", "1"])
        .await
        .assert_success();
    let received = sluice(&server, &["--json", "recv", "jobs"]).await;
    let receipt = received.json()["messages"][0]["receipt"]
        .as_str()
        .unwrap()
        .to_owned();
    sluice(&server, &["nack", "jobs", &receipt, "--permanent"])
        .await
        .assert_success();

    // script(1) runs the command on a pseudo-terminal, so stdin is a terminal.
    let at_terminal = |extra: &str| {
        let line = format!(
            "{} --url {} dlq replay jobs {extra}",
            env!("CARGO_BIN_EXE_sluice"),
            server.url()
        );
        async move {
            let mut command = tokio::process::Command::new("script");
            command
                .args(["-q", "-e", "-c", &line, "/dev/null"])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .kill_on_drop(true);
            let out = tokio::time::timeout(COMMAND_TIMEOUT, command.output())
                .await
                .expect("script finished in time")
                .expect("run script");
            (
                out.status,
                String::from_utf8_lossy(&out.stdout).into_owned(),
            )
        }
    };
    let (status, text) = at_terminal("").await;
    assert_eq!(status.code(), Some(2), "{text}");
    assert!(
        text.contains("--yes") && text.contains("1 dead letter"),
        "{text}"
    );
    let still = sluice(&server, &["--json", "dlq", "list", "jobs"]).await;
    assert_eq!(still.json()["entries"].as_array().map(Vec::len), Some(1));

    let (status, text) = at_terminal("--yes").await;
    assert!(status.success(), "{text}");
    assert!(text.contains("replayed 1 of 1 into jobs"), "{text}");
}
