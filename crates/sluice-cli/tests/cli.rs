//! End-to-end tests of the `sluice` client commands against the real binary.
//!
//! Each test starts `sluice serve --listen 127.0.0.1:0 --data <tempdir>`, reads the URL from
//! its ready line, and runs CLI commands against it with `--url`, asserting on their stdout,
//! stderr and exit status. Every wait has a deadline, and the server is stopped on drop.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;

/// How long the server may take to print its ready line.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one CLI command may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);
/// How long SIGTERM may take to stop the server before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// What the server prints on stdout when it is ready, followed by its URL.
const READY_PREFIX: &str = "sluice listening on ";

#[test]
fn a_created_queue_shows_in_the_list() {
    let server = Server::start();
    let created = server.sluice(&[
        "queue",
        "create",
        "orders",
        "--ordering",
        "fifo",
        "--max-attempts",
        "3",
    ]);
    created.assert_success();

    let table = server.sluice(&["queue", "list"]);
    table.assert_success();
    assert!(
        table
            .stdout
            .lines()
            .any(|line| line.split_whitespace().next() == Some("orders")),
        "{table:?}"
    );
    assert!(
        table.stdout.contains("orders.dlq"),
        "the dead-letter queue is listed too: {table:?}"
    );

    let list = server.sluice_json(&["queue", "list"]);
    let queue = list["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|queue| queue["name"] == "orders")
        .unwrap_or_else(|| panic!("no orders in {list}"));
    assert_eq!(queue["config"]["ordering"], "fifo");
    assert_eq!(queue["config"]["max_attempts"], 3);

    let again = server.sluice_json(&["queue", "create", "orders", "--max-attempts", "4"]);
    assert_eq!(again["created"], false, "a second create updates: {again}");
    assert_eq!(again["queue"]["config"]["max_attempts"], 4);
    assert_eq!(
        again["queue"]["config"]["ordering"], "fifo",
        "fields not given stay"
    );
}

#[test]
fn lines_sent_on_stdin_come_back_from_recv_and_ack_empties_the_queue() {
    let server = Server::start();
    server.sluice(&["queue", "create", "jobs"]).assert_success();

    // The third line is a full message (it has a top-level "body"), the others are bodies.
    let input =
        "{\"n\": 1}\n\"two\"\n\n{\"body\": [3], \"key\": \"k\", \"headers\": {\"h\": \"v\"}}\n";
    let sent = server.sluice_with_stdin(&["send", "jobs"], input);
    sent.assert_success();
    let ids: Vec<&str> = sent
        .stdout
        .lines()
        .filter(|line| line.contains('-') && line.contains("true"))
        .collect();
    assert_eq!(ids.len(), 3, "one id per message: {sent:?}");

    let received = server.sluice_json(&["recv", "jobs", "--max", "10", "--ack"]);
    let messages = received["messages"]
        .as_array()
        .unwrap_or_else(|| panic!("{received}"));
    let mut bodies: Vec<String> = messages
        .iter()
        .map(|message| message["body"].to_string())
        .collect();
    bodies.sort();
    assert_eq!(bodies, ["\"two\"", "[3]", "{\"n\":1}"], "{received}");
    for message in messages {
        assert_eq!(message["attempts"], 1, "{message}");
    }
    let full = messages
        .iter()
        .find(|message| message["body"] == json!([3]))
        .unwrap();
    assert_eq!(full["key"], "k");
    assert_eq!(full["headers"], json!({"h": "v"}));

    let stats = server.sluice_json(&["queue", "stats", "jobs"]);
    assert_eq!(
        (&stats["ready"], &stats["delayed"], &stats["in_flight"]),
        (&json!(0), &json!(0), &json!(0)),
        "{stats}"
    );
    assert_eq!(stats["counters"]["acked"], 3, "{stats}");
    let empty = server.sluice_json(&["recv", "jobs", "--max", "10"]);
    assert_eq!(empty["messages"], json!([]), "{empty}");
}

#[test]
fn sending_the_same_id_twice_reports_created_false_the_second_time() {
    let server = Server::start();
    server
        .sluice(&["queue", "create", "payments"])
        .assert_success();

    let first = server.sluice_json(&["send", "payments", "{\"amount\": 5}", "--id", "payment-1"]);
    assert_eq!(first["created"], true, "{first}");
    let second = server.sluice_json(&["send", "payments", "{\"amount\": 5}", "--id", "payment-1"]);
    assert_eq!(second["created"], false, "{second}");
    assert_eq!(
        second["message_id"], first["message_id"],
        "a duplicate answers the first message's id"
    );

    let table = server.sluice(&["send", "payments", "{\"amount\": 5}", "--id", "payment-1"]);
    table.assert_success();
    let id = first["message_id"].as_str().unwrap();
    assert!(
        table
            .stdout
            .lines()
            .any(|line| line.contains(id) && line.contains("false")),
        "{table:?}"
    );

    let status = server.sluice_json(&["status", "payments", "--by-key", "payment-1"]);
    assert_eq!(status["message_id"], first["message_id"], "{status}");
    assert_eq!(status["state"], "ready", "{status}");
}

#[test]
fn an_unknown_queue_is_an_error_with_its_code() {
    let server = Server::start();
    for args in [
        &["send", "nope", "1"][..],
        &["recv", "nope"],
        &["queue", "stats", "nope"],
        &["queue", "delete", "nope"],
    ] {
        let out = server.sluice(args);
        assert!(!out.status.success(), "{args:?} succeeded: {out:?}");
        assert!(
            out.stderr.contains("error: queue_not_found: "),
            "{args:?}: {out:?}"
        );
        assert!(out.stdout.is_empty(), "{args:?} printed on stdout: {out:?}");
    }
}

#[test]
fn ack_and_nack_settle_received_messages() {
    let server = Server::start();
    server.sluice(&["queue", "create", "work"]).assert_success();
    server.sluice(&["send", "work", "\"a\""]).assert_success();
    server.sluice(&["send", "work", "\"b\""]).assert_success();

    let received =
        server.sluice_json(&["recv", "work", "--max", "2", "--visibility-timeout", "60"]);
    let receipts: Vec<String> = received["messages"]
        .as_array()
        .unwrap_or_else(|| panic!("{received}"))
        .iter()
        .map(|message| message["receipt"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(receipts.len(), 2, "{received}");

    let acked = server.sluice(&["ack", "work", &receipts[0]]);
    acked.assert_success();
    assert_eq!(acked.stdout.trim(), "acked 1");
    let stale = server.sluice(&["ack", "work", &receipts[0]]);
    assert!(!stale.status.success(), "{stale:?}");
    assert!(stale.stderr.contains("error: stale_receipt: "), "{stale:?}");

    let nacked = server.sluice_json(&[
        "nack",
        "work",
        &receipts[1],
        "--permanent",
        "--error",
        "no good",
    ]);
    assert_eq!(nacked["state"], "dead", "{nacked}");
    assert_eq!(nacked["dead_letter_queue"], "work.dlq", "{nacked}");
    let dead = server.sluice_json(&["recv", "work.dlq"]);
    assert_eq!(dead["messages"][0]["body"], "b", "{dead}");
    assert_eq!(
        dead["messages"][0]["dead_letter"]["source_queue"], "work",
        "{dead}"
    );
}

#[test]
fn a_long_stream_goes_in_batches_and_prints_a_summary() {
    let server = Server::start();
    server.sluice(&["queue", "create", "bulk"]).assert_success();
    let input: String = (0..1200).map(|n| format!("{{\"n\": {n}}}\n")).collect();

    let sent = server.sluice_with_stdin(&["send", "bulk"], &input);
    sent.assert_success();
    assert_eq!(
        sent.stdout.trim(),
        "sent 1200, created 1200, duplicates 0",
        "{sent:?}"
    );
    let stats = server.sluice_json(&["queue", "stats", "bulk"]);
    assert_eq!(stats["ready"], 1200, "{stats}");

    // A file of several lines is one message per line.
    let file = server.root.path().join("messages.ndjson");
    std::fs::write(&file, "1\n2\n").unwrap();
    let sent = server.sluice_json(&["send", "bulk", &format!("@{}", file.display())]);
    assert_eq!(sent["results"].as_array().map(Vec::len), Some(2), "{sent}");
}

#[test]
fn an_unreachable_server_is_an_error_naming_the_cause() {
    // Port 1 on loopback has no listener, so the connection is refused at once.
    let mut command = Command::new(env!("CARGO_BIN_EXE_sluice"));
    command.args(["--url", "http://127.0.0.1:1", "queue", "list"]);
    let out = run(command, None);
    assert!(!out.status.success(), "{out:?}");
    assert!(out.stderr.starts_with("error: "), "{out:?}");
    assert!(out.stderr.contains("127.0.0.1:1"), "{out:?}");
}

/// A running `sluice serve`; stopped with SIGTERM (then SIGKILL) on drop.
struct Server {
    child: Child,
    url: String,
    log: PathBuf,
    /// Holds the data dir and the log; removed after the child is gone.
    root: TempDir,
}

impl Server {
    fn start() -> Self {
        let root = tempfile::Builder::new()
            .prefix("sluice-cli-test-")
            .tempdir()
            .expect("temp dir");
        let data = root.path().join("data");
        let log = root.path().join("server.log");
        let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["serve", "--listen", "127.0.0.1:0", "--data"])
            .arg(&data)
            .env_remove("SLUICE_CONFIG")
            .env_remove("SLUICE_LISTEN")
            .env_remove("SLUICE_DATA")
            .env_remove("SLUICE_DURABILITY")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("start sluice serve");

        // Read stdout on a thread so the wait can time out; keep draining it afterwards so the
        // server never blocks on a full pipe.
        let stdout = child.stdout.take().expect("piped stdout");
        let (lines_tx, lines_rx) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let _ = lines_tx.send(line);
            }
        });
        let mut server = Self {
            child,
            url: String::new(),
            log,
            root,
        };
        match lines_rx.recv_timeout(READY_TIMEOUT) {
            Ok(line) => match line.strip_prefix(READY_PREFIX) {
                Some(url) => server.url = url.trim().to_owned(),
                None => panic!(
                    "unexpected first line {line:?}; server log:\n{}",
                    server.log_text()
                ),
            },
            Err(error) => panic!(
                "no ready line ({error}); server log:\n{}",
                server.log_text()
            ),
        }
        server
    }

    /// Runs `sluice --url URL ARGS...` with no stdin.
    fn sluice(&self, args: &[&str]) -> Output {
        run(self.command(args), None)
    }

    /// Runs `sluice --url URL ARGS...` with `stdin` as its input.
    fn sluice_with_stdin(&self, args: &[&str], stdin: &str) -> Output {
        run(self.command(args), Some(stdin))
    }

    /// Runs `sluice --url URL --json ARGS...`, asserts success and parses stdout.
    fn sluice_json(&self, args: &[&str]) -> Value {
        let mut command = self.command(args);
        command.arg("--json");
        let out = run(command, None);
        out.assert_success();
        serde_json::from_str(&out.stdout)
            .unwrap_or_else(|error| panic!("stdout is not JSON ({error}): {out:?}"))
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_sluice"));
        command.arg("--url").arg(&self.url).args(args);
        command
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_else(|error| format!("(no log: {error})"))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a CLI command did.
struct Output {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl Output {
    #[track_caller]
    fn assert_success(&self) {
        assert!(self.status.success(), "command failed: {self:?}");
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

/// Runs a command to its end, feeding it `stdin`; kills it after [`COMMAND_TIMEOUT`].
fn run(mut command: Command, stdin: Option<&str>) -> Output {
    let mut child = command
        .env_remove("SLUICE_URL")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start sluice");
    if let Some(text) = stdin {
        let mut pipe = child.stdin.take().expect("piped stdin");
        let text = text.to_owned();
        // Dropping the pipe at the end of the thread closes stdin, which ends the input.
        thread::spawn(move || {
            let _ = pipe.write_all(text.as_bytes());
        });
    }
    let stdout = read_on_thread(child.stdout.take().expect("piped stdout"));
    let stderr = read_on_thread(child.stderr.take().expect("piped stderr"));
    let deadline = Instant::now() + COMMAND_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for sluice") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{command:?} did not finish within {COMMAND_TIMEOUT:?}");
        }
        thread::sleep(Duration::from_millis(10));
    };
    let collect = |rx: mpsc::Receiver<String>| {
        rx.recv_timeout(COMMAND_TIMEOUT)
            .expect("output of the command")
    };
    Output {
        status,
        stdout: collect(stdout),
        stderr: collect(stderr),
    }
}

fn read_on_thread(mut pipe: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        let _ = tx.send(String::from_utf8_lossy(&bytes).into_owned());
    });
    rx
}
