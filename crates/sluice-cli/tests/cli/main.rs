//! End-to-end tests of the `sluice` client commands against the real binary.
//!
//! Each test starts `sluice serve` with the test kit's launcher (a free loopback port, a temp
//! data dir) and runs CLI commands against it with `--url`, asserting on their stdout, stderr
//! and exit status. Every wait has a deadline, and the server is stopped on drop.
//!
//! One test binary with the CLI's other end-to-end suites, which link the same crates: the
//! README's shell blocks ([`readme`]) and the CLI's scripting contract ([`scripts`]).

/// The README's shell blocks, run in order.
mod readme;
/// Tokens, exit statuses, JSON errors and prompts of the CLI, for scripts.
mod scripts;

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sluice_testkit::server::Launch;

/// How long one CLI command may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a command moving 100,000 messages may take (a debug build on a busy machine).
const SLOW_COMMAND_TIMEOUT: Duration = Duration::from_secs(300);

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

    let status = server.sluice_json(&["status", "payments", "--id", "payment-1"]);
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

/// `sluice queue delete` takes the dead-letter queue along (issue 31), or keeps it when told.
#[test]
fn queue_delete_takes_the_dead_letter_queue_unless_kept() {
    let server = Server::start();
    server.sluice(&["queue", "create", "gone"]).assert_success();
    let deleted = server.sluice(&["queue", "delete", "gone"]);
    deleted.assert_success();
    assert_eq!(
        deleted.stdout.trim(),
        "deleted queue gone (0 messages removed) and its dead-letter queue gone.dlq (0 dead letters removed)"
    );
    let missing = server.sluice(&["queue", "stats", "gone.dlq"]);
    assert!(missing.stderr.contains("queue_not_found"), "{missing:?}");

    server.sluice(&["queue", "create", "kept"]).assert_success();
    let deleted = server.sluice_json(&["queue", "delete", "kept", "--keep-dead-letters"]);
    assert_eq!(
        deleted["dead_letter_queue"],
        serde_json::Value::Null,
        "{deleted}"
    );
    server
        .sluice(&["queue", "stats", "kept.dlq"])
        .assert_success();
}

#[test]
fn ack_and_nack_settle_received_messages() {
    let server = Server::start();
    server.sluice(&["queue", "create", "work"]).assert_success();
    server.sluice(&["send", "work", "\"a\""]).assert_success();
    server.sluice(&["send", "work", "\"b\""]).assert_success();

    let received =
        server.sluice_json(&["recv", "work", "--max", "2", "--visibility-timeout", "60s"]);
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
    let file = server.dir().join("messages.ndjson");
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

/// `sluice ready`: the health check of the container image (which has no curl).
#[test]
fn ready_exits_0_when_the_server_is_ready_and_1_when_unreachable() {
    let server = Server::start();
    let ready = server.sluice(&["ready"]);
    ready.assert_success();
    assert_eq!(ready.stdout.trim(), "ready: ok");
    let mut command = Command::new(env!("CARGO_BIN_EXE_sluice"));
    command.args(["--url", "http://127.0.0.1:1", "ready"]);
    let out = run(command, None);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
}

#[test]
fn a_paused_queue_delivers_nothing_until_resumed() {
    let server = Server::start();
    server.sluice(&["queue", "create", "held"]).assert_success();
    server.sluice(&["send", "held", "\"a\""]).assert_success();

    let paused = server.sluice(&["queue", "pause", "held"]);
    paused.assert_success();
    assert!(
        paused.stdout.starts_with("paused queue held (ready 1,"),
        "{paused:?}"
    );
    let queue = server.sluice_json(&["queue", "get", "held"]);
    assert_eq!(queue["stats"]["paused"], true, "{queue}");
    let nothing = server.sluice_json(&["recv", "held"]);
    assert_eq!(nothing["messages"], json!([]), "{nothing}");
    // Enqueues are still stored while paused.
    server.sluice(&["send", "held", "\"b\""]).assert_success();

    let resumed = server.sluice_json(&["queue", "resume", "held"]);
    assert_eq!(resumed["stats"]["paused"], false, "{resumed}");
    assert_eq!(resumed["stats"]["ready"], 2, "{resumed}");
    let received = server.sluice_json(&["recv", "held", "--max", "10"]);
    assert_eq!(
        received["messages"].as_array().map(Vec::len),
        Some(2),
        "{received}"
    );
}

/// `recv` that gets nothing says what holds the ready messages back: a pause, `max_in_flight`,
/// or a rate limit (the receive answer does not say; the queue's settings and numbers do).
#[test]
fn recv_says_why_ready_messages_did_not_come() {
    let server = Server::start();
    server.sluice(&["queue", "create", "held"]).assert_success();
    server.sluice(&["send", "held", "\"a\""]).assert_success();
    server.sluice(&["send", "held", "\"b\""]).assert_success();
    server.sluice(&["send", "held", "\"c\""]).assert_success();

    server.sluice(&["queue", "pause", "held"]).assert_success();
    let paused = server.sluice(&["recv", "held"]);
    paused.assert_success();
    assert!(
        paused
            .stderr
            .contains("no messages: 3 ready, but the queue is paused"),
        "{paused:?}"
    );
    server.sluice(&["queue", "resume", "held"]).assert_success();

    server
        .sluice(&["queue", "update", "held", "--max-in-flight", "1"])
        .assert_success();
    server.sluice(&["recv", "held"]).assert_success();
    let full = server.sluice(&["recv", "held"]);
    assert!(
        full.stderr
            .contains("no messages: 2 ready, but all 1 leases of max_in_flight are out"),
        "{full:?}"
    );

    server
        .sluice(&[
            "queue",
            "update",
            "held",
            "--max-in-flight",
            "0",
            "--rate-limit",
            "0.01",
            "--burst",
            "1",
        ])
        .assert_success();
    // The bucket's one token goes to the next receive; the one after it waits for 100 s.
    server.sluice(&["recv", "held"]).assert_success();
    let limited = server.sluice(&["recv", "held"]);
    assert!(
        limited
            .stderr
            .contains("no messages: 1 ready, but the rate limit (0.01/s, burst 1)"),
        "{limited:?}"
    );

    server
        .sluice(&["queue", "create", "empty"])
        .assert_success();
    let empty = server.sluice(&["recv", "empty"]);
    assert_eq!(empty.stderr.trim(), "no messages", "{empty:?}");
}

#[test]
fn purge_removes_waiting_messages_and_drain_reports_what_is_left() {
    let server = Server::start();
    server.sluice(&["queue", "create", "full"]).assert_success();
    server
        .sluice_with_stdin(&["send", "full"], "1\n2\n3\n")
        .assert_success();

    let drain = server.sluice(&["queue", "drain", "full", "--timeout", "200ms"]);
    assert_eq!(drain.status.code(), Some(7), "timed out: {drain:?}");
    assert!(
        drain.stdout.starts_with("not drained after ") && drain.stdout.contains("ready 3,"),
        "{drain:?}"
    );
    assert!(!drain.stderr.contains("error:"), "{drain:?}");

    let received = server.sluice_json(&["recv", "full", "--visibility-timeout", "60s"]);
    let receipt = received["messages"][0]["receipt"]
        .as_str()
        .unwrap()
        .to_owned();

    // stdin is not a terminal here, so no --yes is needed.
    let purged = server.sluice(&["queue", "purge", "full"]);
    purged.assert_success();
    assert_eq!(
        purged.stdout.trim(),
        "purged 2 messages from full (1 in flight left)",
        "{purged:?}"
    );
    let purged = server.sluice_json(&["queue", "purge", "full", "--yes"]);
    assert_eq!(purged, json!({"purged": 0, "in_flight": 1}));

    server.sluice(&["ack", "full", &receipt]).assert_success();
    let drained = server.sluice(&["queue", "drain", "full", "--timeout", "5s"]);
    drained.assert_success();
    assert!(
        drained.stdout.starts_with("drained full in "),
        "{drained:?}"
    );
    let drained = server.sluice_json(&["queue", "drain", "full"]);
    assert_eq!(drained["drained"], true, "{drained}");
}

#[test]
fn cancel_reports_its_outcome_in_words_and_exit_status() {
    let server = Server::start();
    server
        .sluice(&["queue", "create", "orders"])
        .assert_success();
    let first = server.sluice_json(&["send", "orders", "1", "--id", "order-1"]);
    let id = first["message_id"].as_str().unwrap().to_owned();
    server
        .sluice(&["send", "orders", "2", "--id", "order-2"])
        .assert_success();

    let cancelled = server.sluice(&["cancel", "orders", &id, "--reason", "order withdrawn"]);
    cancelled.assert_success();
    assert_eq!(
        cancelled.stdout.trim(),
        format!("cancelled: {id} is cancelled"),
        "{cancelled:?}"
    );
    let shown = server.sluice_json(&["status", "orders", &id]);
    assert_eq!(shown["last_error"], "order withdrawn", "{shown}");
    let again = server.sluice(&["cancel", "orders", &id]);
    assert_eq!(again.status.code(), Some(5), "{again:?}");
    assert!(again.stdout.starts_with("already_completed: "), "{again:?}");
    assert!(again.stderr.is_empty(), "{again:?}");

    let unknown = server.sluice_json_status(&["cancel", "orders", "--id", "no-such-key"], 3);
    assert_eq!(unknown["outcome"], "not_found", "{unknown}");

    server
        .sluice_json(&["recv", "orders", "--visibility-timeout", "60s"])
        .to_string();
    let busy = server.sluice(&["cancel", "orders", "--id", "order-2"]);
    assert_eq!(busy.status.code(), Some(4), "{busy:?}");
    assert!(busy.stdout.starts_with("already_processing: "), "{busy:?}");

    let bad = server.sluice(&["cancel", "orders", "not-a-uuid"]);
    assert_eq!(bad.status.code(), Some(2), "a usage error: {bad:?}");
    assert!(bad.stderr.starts_with("error: "), "{bad:?}");
}

#[test]
fn dead_letters_are_listed_shown_replayed_and_received_again() {
    let server = Server::start();
    server.sluice(&["queue", "create", "work"]).assert_success();
    let sent = server.sluice_json(&[
        "send",
        "work",
        "{\"n\": 1, \"big\": 123456789012345678901234567890}",
        "--header",
        "trace=abc",
    ]);
    let id = sent["message_id"].as_str().unwrap().to_owned();
    let long_error = format!("boom: {}", "x".repeat(200));
    dead_letter_one(&server, "work", &long_error);

    let table = server.sluice(&["dlq", "list", "work"]);
    table.assert_success();
    let row = table
        .stdout
        .lines()
        .find(|line| line.contains(&id))
        .unwrap_or_else(|| panic!("no row for {id}: {table:?}"));
    assert!(row.contains("boom: xxx") && row.contains("..."), "{row}");
    assert!(!row.contains(&long_error), "the error is cut: {row}");

    let listed = server.sluice_json(&["dlq", "list", "work", "--error", "BOOM", "--all"]);
    assert_eq!(listed["dead_letter_queue"], "work.dlq", "{listed}");
    assert_eq!(listed["entries"][0]["message_id"], id.as_str(), "{listed}");
    let none = server.sluice_json(&["dlq", "list", "work", "--error", "no such text"]);
    assert_eq!(none["entries"], json!([]), "{none}");
    let later = server.sluice_json(&["dlq", "list", "work", "--since", "2999-01-01T00:00:00Z"]);
    assert_eq!(later["entries"], json!([]), "{later}");

    let shown = server.sluice(&["dlq", "show", "work", &id]);
    shown.assert_success();
    for text in [
        "trace: abc",
        "\"n\": 1",
        "\"big\": 123456789012345678901234567890",
        "work.dlq",
    ] {
        assert!(shown.stdout.contains(text), "{text}: {shown:?}");
    }

    let dry = server.sluice(&["dlq", "replay", "work", "--dry-run"]);
    dry.assert_success();
    assert_eq!(dry.stdout.trim(), "would replay 1 into work", "{dry:?}");
    let replayed = server.sluice(&["dlq", "replay", "work", "--error", "boom", "--batch", "10"]);
    replayed.assert_success();
    assert_eq!(
        replayed.stdout.trim(),
        "replayed 1 of 1 into work",
        "{replayed:?}"
    );

    let received = server.sluice_json(&["recv", "work"]);
    let message = &received["messages"][0];
    assert_eq!(message["body"]["n"], 1, "{received}");
    assert_eq!(message["attempts"], 1, "{received}");
    assert_eq!(message["headers"]["trace"], "abc", "{received}");
    assert_ne!(
        message["message_id"],
        id.as_str(),
        "a replay is a new message"
    );
    let empty = server.sluice_json(&["dlq", "list", "work"]);
    assert_eq!(empty["entries"], json!([]), "{empty}");
    let record = server.sluice_json(&["dlq", "show", "work", &id]);
    assert_eq!(record["state"], "replayed", "{record}");
    assert_eq!(record["replayed_as"], message["message_id"], "{record}");

    // One id goes through the single-entry route.
    let receipt = message["receipt"].as_str().unwrap().to_owned();
    server
        .sluice(&["nack", "work", &receipt, "--permanent", "--error", "again"])
        .assert_success();
    let dead_id = message["message_id"].as_str().unwrap().to_owned();
    let one = server.sluice_json(&["dlq", "replay", "work", &dead_id]);
    assert_eq!(one["replayed"], 1, "{one}");
    assert_eq!(
        one["results"][0]["dead_letter_id"],
        dead_id.as_str(),
        "{one}"
    );
    let again = server.sluice_json(&["recv", "work"]);
    assert_eq!(again["messages"][0]["body"]["n"], 1, "{again}");
}

#[test]
fn a_filtered_replay_goes_in_batches_until_every_match_is_back() {
    let server = Server::start();
    server.sluice(&["queue", "create", "bulk"]).assert_success();
    let input: String = (0..12).map(|n| format!("{n}\n")).collect();
    server
        .sluice_with_stdin(&["send", "bulk"], &input)
        .assert_success();
    let received = server.sluice_json(&["recv", "bulk", "--max", "12"]);
    let messages = received["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 12, "{received}");
    for (n, message) in messages.iter().enumerate() {
        let error = if n % 3 == 0 {
            "timeout talking to db"
        } else {
            "Payment declined"
        };
        server
            .sluice(&[
                "nack",
                "bulk",
                message["receipt"].as_str().unwrap(),
                "--permanent",
                "--error",
                error,
            ])
            .assert_success();
    }

    let dry = server.sluice_json(&["dlq", "replay", "bulk", "--error", "payment", "--dry-run"]);
    assert_eq!(
        (&dry["dry_run"], &dry["matched"]),
        (&json!(true), &json!(8)),
        "{dry}"
    );
    let replayed = server.sluice(&[
        "dlq", "replay", "bulk", "--error", "payment", "--batch", "3", "--since", "1h",
    ]);
    replayed.assert_success();
    assert_eq!(
        replayed.stdout.trim(),
        "replayed 8 of 8 into bulk",
        "{replayed:?}"
    );
    let stats = server.sluice_json(&["queue", "stats", "bulk"]);
    assert_eq!(stats["ready"], 8, "{stats}");
    let left = server.sluice_json(&["dlq", "list", "bulk", "--all"]);
    let left = left["entries"].as_array().unwrap();
    assert_eq!(left.len(), 4, "{left:?}");
    assert!(
        left.iter()
            .all(|entry| entry["last_error"] == "timeout talking to db"),
        "{left:?}"
    );

    let rest = server.sluice_json(&["dlq", "replay", "bulk", "--batch", "3"]);
    assert_eq!(
        (&rest["matched"], &rest["replayed"]),
        (&json!(4), &json!(4)),
        "{rest}"
    );
    assert_eq!(rest["results"].as_array().map(Vec::len), Some(4), "{rest}");
}

#[test]
fn dead_letters_can_be_deleted_one_by_one_or_all_at_once() {
    let server = Server::start();
    server.sluice(&["queue", "create", "jobs"]).assert_success();
    for n in 0..3 {
        server
            .sluice(&["send", "jobs", &n.to_string()])
            .assert_success();
        dead_letter_one(&server, "jobs", "bad");
    }
    let listed = server.sluice_json(&["dlq", "list", "jobs", "--limit", "1", "--all"]);
    let entries = listed["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 3, "--all follows the cursor: {listed}");
    let page = server.sluice(&["dlq", "list", "jobs", "--limit", "1"]);
    page.assert_success();
    assert!(page.stderr.contains("--cursor "), "{page:?}");

    let id = entries[0]["message_id"].as_str().unwrap();
    let deleted = server.sluice(&["dlq", "delete", "jobs", id]);
    deleted.assert_success();
    assert_eq!(
        deleted.stdout.trim(),
        "deleted 1 dead letter(s)",
        "{deleted:?}"
    );
    let missing = server.sluice(&["dlq", "delete", "jobs", id]);
    assert!(!missing.status.success(), "{missing:?}");
    assert!(missing.stderr.starts_with("error: "), "{missing:?}");

    let purged = server.sluice_json(&["dlq", "purge", "jobs", "--yes"]);
    assert_eq!(purged, json!({"deleted": 2}));
    let stats = server.sluice_json(&["queue", "stats", "jobs"]);
    assert_eq!(stats["dead_lettered"], 0, "{stats}");
}

#[test]
fn stats_shows_every_queue_in_one_table_and_one_in_detail() {
    let server = Server::start();
    server
        .sluice(&["queue", "create", "metrics"])
        .assert_success();
    server.sluice(&["send", "metrics", "1"]).assert_success();
    server
        .sluice(&["recv", "metrics", "--ack"])
        .assert_success();
    server.sluice(&["send", "metrics", "2"]).assert_success();

    let table = server.sluice(&["stats"]);
    table.assert_success();
    let header = table.stdout.lines().next().unwrap_or_default();
    for column in ["name", "ready", "paused", "p99"] {
        assert!(header.contains(column), "{column}: {table:?}");
    }
    let row: Vec<&str> = table
        .stdout
        .lines()
        .find(|line| line.split_whitespace().next() == Some("metrics"))
        .unwrap_or_else(|| panic!("no metrics row: {table:?}"))
        .split_whitespace()
        .collect();
    assert_eq!(&row[1..5], ["1", "0", "0", "no"], "{table:?}");
    assert!(
        table.stdout.contains("metrics.dlq"),
        "every queue is listed: {table:?}"
    );

    let detail = server.sluice(&["stats", "metrics"]);
    detail.assert_success();
    for text in ["latency p50", "acked, last 1m", "rejected"] {
        assert!(detail.stdout.contains(text), "{text}: {detail:?}");
    }
    let stats = server.sluice_json(&["stats", "metrics"]);
    assert_eq!(stats["counters"]["acked"], 1, "{stats}");
    assert_eq!(stats["last_1m"]["enqueued"], 2, "{stats}");
    assert_eq!(stats["latency_ms"]["samples"], 1, "{stats}");
}

#[test]
fn an_ack_result_comes_back_to_a_duplicate_send() {
    let server = Server::start();
    server.sluice(&["queue", "create", "pay"]).assert_success();
    server
        .sluice(&["send", "pay", "{\"amount\": 5}", "--id", "p-1"])
        .assert_success();
    let received = server.sluice_json(&["recv", "pay"]);
    let receipt = received["messages"][0]["receipt"]
        .as_str()
        .unwrap()
        .to_owned();

    let two = server.sluice(&["ack", "pay", &receipt, "other", "--result", "1"]);
    assert!(!two.status.success(), "{two:?}");
    assert!(two.stderr.contains("exactly one receipt"), "{two:?}");
    let bad = server.sluice(&["ack", "pay", &receipt, "--result", "{oops"]);
    assert!(bad.stderr.contains("--result is not JSON"), "{bad:?}");

    let acked = server.sluice(&["ack", "pay", &receipt, "--result", "{\"charge\": \"ch_1\"}"]);
    acked.assert_success();
    assert_eq!(acked.stdout.trim(), "acked 1", "{acked:?}");
    let again = server.sluice_json(&["send", "pay", "{\"amount\": 5}", "--id", "p-1"]);
    assert_eq!(again["created"], false, "{again}");
    assert_eq!(again["state"], "acked", "{again}");
    assert_eq!(again["result"], json!({"charge": "ch_1"}), "{again}");
}

#[test]
fn acked_messages_a_queue_keeps_are_browsed_and_searched() {
    let server = Server::start();
    server
        .sluice(&["queue", "create", "kept", "--keep-acked", "1h"])
        .assert_success();
    let shown = server.sluice(&["queue", "get", "kept"]);
    assert!(
        shown
            .stdout
            .lines()
            .any(|line| line.contains("keep acked") && line.contains("1h00m")),
        "{shown:?}"
    );
    let one = server.sluice_json(&["send", "kept", "{\"n\": 1}", "--key", "k1", "--id", "one"]);
    let two = server.sluice_json(&["send", "kept", "{\"n\": 2}", "--key", "k2", "--id", "two"]);
    let (one, two) = (
        one["message_id"].as_str().unwrap().to_owned(),
        two["message_id"].as_str().unwrap().to_owned(),
    );

    // k1's message acked with a result, then k2's by `recv --ack`: two different ack times.
    let received = server.sluice_json(&["recv", "kept"]);
    assert_eq!(
        received["messages"][0]["message_id"],
        one.as_str(),
        "{received}"
    );
    let receipt = received["messages"][0]["receipt"].as_str().unwrap();
    server
        .sluice(&["ack", "kept", receipt, "--result", "{\"done\": 1}"])
        .assert_success();
    let acked = server.sluice(&["recv", "kept", "--ack"]);
    acked.assert_success();
    assert!(acked.stderr.contains("acked 1"), "{acked:?}");

    // Newest ack first; the page is the API's, with kept_until.
    let all = server.sluice_json(&["browse", "kept", "--state", "acked"]);
    assert_eq!(all["state"], "acked", "{all}");
    let ids: Vec<&str> = all["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|message| message["message_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [two.as_str(), one.as_str()], "{all}");
    assert!(all["messages"][0]["kept_until"].is_string(), "{all}");

    let table = server.sluice(&["browse", "kept", "--state", "acked", "--key", "k1"]);
    table.assert_success();
    let lines: Vec<&str> = table.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "a header and one row: {table:?}");
    assert!(
        lines[0].contains("acked at") && lines[0].contains("result"),
        "{table:?}"
    );
    for cell in [one.as_str(), "k1", "one", "{\"done\":1}"] {
        assert!(lines[1].contains(cell), "{cell} in {table:?}");
    }
    assert!(!table.stdout.contains(&two), "{table:?}");
    assert!(table.stderr.is_empty(), "no next page: {table:?}");

    let page = server.sluice_json(&["browse", "kept", "--state", "acked", "--key", "k1"]);
    let api = server.api_get("/v1/queues/kept/browse?state=acked&key=k1");
    assert_eq!(without_ages(page), without_ages(api));

    // A search alone means acked; the other fields search too, and a page ends with a cursor.
    let by_id = server.sluice_json(&["browse", "kept", "--message-id", &two]);
    assert_eq!(by_id["messages"].as_array().unwrap().len(), 1, "{by_id}");
    assert_eq!(by_id["messages"][0]["id"], "two", "{by_id}");
    let by_key = server.sluice_json(&["browse", "kept", "--id", "one", "--since", "1h"]);
    assert_eq!(
        by_key["messages"][0]["message_id"],
        one.as_str(),
        "{by_key}"
    );
    let paged = server.sluice(&[
        "browse",
        "kept",
        "--state",
        "acked",
        "--limit",
        "1",
        "--preview",
        "16",
    ]);
    paged.assert_success();
    assert!(
        paged.stdout.contains("{\"n\": 2}"),
        "the preview, as sent: {paged:?}"
    );
    assert!(paged.stderr.contains("more: --cursor "), "{paged:?}");
    let none = server.sluice(&["browse", "kept", "--until", "1h"]);
    none.assert_success();
    assert!(
        none.stderr
            .contains("no kept acked message of kept matches"),
        "{none:?}"
    );

    let refused = server.sluice(&["browse", "kept", "--state", "ready", "--key", "k1"]);
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    assert!(refused.stderr.contains("--state acked"), "{refused:?}");

    server
        .sluice(&["queue", "create", "plain"])
        .assert_success();
    let not_kept = server.sluice(&["browse", "plain", "--state", "acked"]);
    not_kept.assert_success();
    assert!(
        not_kept.stderr.contains("does not keep them"),
        "{not_kept:?}"
    );
}

/// A browse page without its messages' ages, which grow between two reads.
fn without_ages(mut page: Value) -> Value {
    for message in page["messages"].as_array_mut().expect("messages") {
        message.as_object_mut().expect("a message").remove("age_ms");
    }
    page
}

#[test]
fn queue_settings_for_pace_and_retention_are_set_and_enforced() {
    let server = Server::start();
    let schema = server.dir().join("schema.json");
    std::fs::write(
        &schema,
        r#"{"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}"#,
    )
    .unwrap();
    let created = server.sluice_json(&[
        "queue",
        "create",
        "paced",
        "--max-age",
        "2h",
        "--on-expire",
        "dead_letter",
        "--max-depth",
        "1",
        "--max-in-flight",
        "5",
        "--rate-limit",
        "100",
        "--burst",
        "7",
        "--schema",
        schema.to_str().unwrap(),
    ]);
    let config = &created["queue"]["config"];
    assert_eq!(config["max_age_ms"], 7_200_000, "{created}");
    assert_eq!(config["on_expire"], "dead_letter", "{created}");
    assert_eq!(config["max_depth"], 1, "{created}");
    assert_eq!(config["max_in_flight"], 5, "{created}");
    assert_eq!(
        config["rate_limit"],
        json!({"per_second": 100.0, "burst": 7}),
        "{created}"
    );
    assert_eq!(config["schema"]["required"], json!(["n"]), "{created}");

    let invalid = server.sluice(&["send", "paced", "{\"n\": \"one\"}"]);
    assert!(
        invalid.stderr.contains("error: schema_violation: "),
        "{invalid:?}"
    );
    server
        .sluice(&["send", "paced", "{\"n\": 1}"])
        .assert_success();
    let full = server.sluice(&["send", "paced", "{\"n\": 2}"]);
    assert!(!full.status.success(), "{full:?}");
    assert!(full.stderr.contains("error: queue_full: "), "{full:?}");
    assert!(full.stderr.contains("retry after: "), "{full:?}");

    let updated = server.sluice_json(&[
        "queue",
        "update",
        "paced",
        "--schema",
        "none",
        "--max-depth",
        "0",
        "--rate-limit",
        "0",
    ]);
    let config = &updated["queue"]["config"];
    assert_eq!(updated["created"], false, "{updated}");
    assert_eq!(config["schema"], Value::Null, "{updated}");
    assert_eq!(config["max_depth"], Value::Null, "{updated}");
    assert_eq!(config["rate_limit"], Value::Null, "{updated}");
    assert_eq!(
        config["max_in_flight"], 5,
        "fields not given stay: {updated}"
    );
    server
        .sluice(&["send", "paced", "\"free\""])
        .assert_success();

    let absent = server.sluice(&["queue", "update", "nope", "--max-depth", "3"]);
    assert!(
        absent.stderr.contains("error: queue_not_found: "),
        "update does not create: {absent:?}"
    );
}

#[test]
fn a_hundred_thousand_dead_letters_are_replayed_with_progress() {
    // Proves the replay of 100,000 entries: retention moves 100k messages to the DLQ
    // (max_age 1 s, on_expire dead_letter), `sluice dlq replay` brings every one back in
    // batches, reporting progress, and the queue holds them all again with the DLQ empty.
    const COUNT: u64 = 100_000;
    let server = Server::start();
    server
        .sluice(&[
            "queue",
            "create",
            "bulk",
            "--max-age",
            "1s",
            "--on-expire",
            "dead_letter",
        ])
        .assert_success();
    let lines: String = (0..COUNT).map(|n| format!("{{\"n\": {n}}}\n")).collect();
    let sent = run_with_timeout(
        server.command(&["send", "bulk"]),
        Some(&lines),
        SLOW_COMMAND_TIMEOUT,
    );
    sent.assert_success();
    // Retention looks at 5,000 messages per 500 ms tick: about 10 s for 100k.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let stats = server.sluice_json(&["stats", "bulk"]);
        if stats["dead_lettered"] == COUNT && stats["ready"] == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "retention stalled: {stats}");
        thread::sleep(Duration::from_millis(250));
    }
    // Keep the replayed messages this time.
    server
        .sluice(&["queue", "update", "bulk", "--max-age", "1d"])
        .assert_success();

    let replay = run_with_timeout(
        server.command(&["dlq", "replay", "bulk"]),
        None,
        SLOW_COMMAND_TIMEOUT,
    );
    replay.assert_success();
    assert!(
        replay
            .stdout
            .contains("replayed 100000 of 100000 into bulk"),
        "{replay:?}"
    );
    let progress_lines = replay
        .stderr
        .lines()
        .filter(|l| l.starts_with("progress: replayed"))
        .count();
    assert!(progress_lines >= 9, "a progress line per tenth: {replay:?}");

    let stats = server.sluice_json(&["stats", "bulk"]);
    assert_eq!(stats["ready"], COUNT, "{stats}");
    assert_eq!(stats["dead_lettered"], 0, "{stats}");
    let listed = server.sluice_json(&["dlq", "list", "bulk"]);
    assert_eq!(
        listed["entries"].as_array().map(Vec::len),
        Some(0),
        "{listed}"
    );
}

#[test]
fn bench_measures_the_sqs_api_beside_the_native_one() {
    // Proves scenario 11 of `sluice bench` against a real server, with tiny sizes: SendMessage,
    // SendMessageBatch (capped at 10) and ReceiveMessage + DeleteMessageBatch get every message
    // through and count each once, beside the native scenarios of the same run, and the bench's
    // SQS queues are gone afterwards. A leftover queue of an earlier run, holding a message the
    // bench never sent, must be deleted first: else that message arrives as an extra, or
    // CreateQueue refuses the differing attributes.
    let server = Server::start();
    server
        .sluice(&["queue", "create", "bench-sqs-e2e"])
        .assert_success();
    server
        .sluice_with_stdin(&["send", "bench-sqs-e2e"], "{\"left\": \"over\"}\n")
        .assert_success();
    let sizes = [
        "--single-messages",
        "30",
        "--single-clients",
        "3",
        "--batch-messages",
        "95",
        "--batch-clients",
        "2",
        "--batch-size",
        "25",
        "--e2e-messages",
        "95",
        "--e2e-producers",
        "2",
        "--consumers",
        "2",
        "--wait",
        "1s",
        "--body-bytes",
        "300",
        "--time-limit",
        "60s",
    ];
    let mut command = server.command(&["bench", "--scenarios", "single,batch,e2e,sqs", "--json"]);
    command.args(sizes);
    let bench = run_with_timeout(command, None, SLOW_COMMAND_TIMEOUT);
    bench.assert_success();
    let report: Value = serde_json::from_str(&bench.stdout)
        .unwrap_or_else(|error| panic!("stdout is not JSON ({error}): {bench:?}"));
    let sqs = &report["sqs"];
    assert_eq!(sqs["failure"], Value::Null, "{sqs}");

    let single = &sqs["single"];
    assert_eq!(single["queue"], "bench-sqs-single", "{single}");
    assert_eq!(
        (&single["messages"], &single["requests"], &single["errors"]),
        (&json!(30), &json!(30), &json!(0)),
        "{single}"
    );
    let batch = &sqs["batch"];
    assert_eq!(batch["batch_size"], 10, "SQS takes 10 per batch: {batch}");
    assert_eq!(
        (&batch["messages"], &batch["requests"], &batch["errors"]),
        (&json!(95), &json!(10), &json!(0)),
        "{batch}"
    );
    let e2e = &sqs["end_to_end"];
    for (field, value) in [
        ("enqueued", 95),
        ("deliveries", 95),
        ("distinct", 95),
        ("duplicates", 0),
        ("missing", 0),
        ("acked", 95),
        ("errors", 0),
    ] {
        assert_eq!(e2e[field], value, "{field}: {e2e}");
    }
    assert_eq!(e2e["wait_ms"], 1000, "{e2e}");
    assert!(e2e["msgs_per_s"].as_f64().unwrap_or(0.0) > 0.0, "{e2e}");
    assert!(
        e2e["ack_request"]["count"].as_u64().unwrap_or(0) >= 10,
        "one DeleteMessageBatch per receive of at most 10: {e2e}"
    );
    // The native figures of the same run are there to compare with.
    assert_eq!(report["single"]["messages"], 30, "{report}");
    assert_eq!(report["batch"]["batch_size"], 25, "{report}");
    assert_eq!(report["end_to_end"]["distinct"], 95, "{report}");

    let list = server.sluice_json(&["queue", "list"]);
    let names: Vec<&str> = list["queues"]
        .as_array()
        .unwrap_or_else(|| panic!("{list}"))
        .iter()
        .filter_map(|queue| queue["name"].as_str())
        .collect();
    for queue in ["bench-sqs-single", "bench-sqs-batch", "bench-sqs-e2e"] {
        assert!(!names.contains(&queue), "{queue} is left: {names:?}");
    }

    // The text report puts each SQS figure beside the native one.
    let mut command = server.command(&["bench", "--scenarios", "single,sqs"]);
    command.args(sizes);
    let text = run_with_timeout(command, None, SLOW_COMMAND_TIMEOUT);
    text.assert_success();
    for line in [
        "11. the SQS API (AWS JSON 1.0)",
        "SendMessage, one message per request, 3 clients",
        "30 msgs in 30 requests",
        "native API in this run (scenario 1): ",
        "SendMessageBatch of 10, 2 clients",
        "95 enqueued, 95 distinct received, 0 duplicates, 0 missing, 95 acked",
    ] {
        assert!(text.stdout.contains(line), "no {line:?} in {text:?}");
    }
    assert!(!text.stdout.contains("FAILED"), "{text:?}");
}

/// Receives one message of `queue` and nacks it with `permanent`, so it lands in the DLQ.
fn dead_letter_one(server: &Server, queue: &str, error: &str) {
    let received = server.sluice_json(&["recv", queue]);
    let receipt = received["messages"][0]["receipt"]
        .as_str()
        .unwrap_or_else(|| panic!("nothing received from {queue}: {received}"))
        .to_owned();
    let nacked = server.sluice_json(&["nack", queue, &receipt, "--permanent", "--error", error]);
    assert_eq!(nacked["state"], "dead", "{nacked}");
}

/// A running `sluice serve` (the test kit's [`Launch`]); killed on drop.
struct Server {
    server: sluice_testkit::server::Server,
    url: String,
}

impl Server {
    fn start() -> Self {
        let server = Launch::new(env!("CARGO_BIN_EXE_sluice")).start_blocking();
        Self {
            url: server.url().to_owned(),
            server,
        }
    }

    /// The server's directory, for files of the test's.
    fn dir(&self) -> &Path {
        self.server.dir()
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

    /// Runs `sluice --url URL --json ARGS...`, asserts its exit code and parses stdout.
    fn sluice_json_status(&self, args: &[&str], code: i32) -> Value {
        let mut command = self.command(args);
        command.arg("--json");
        let out = run(command, None);
        assert_eq!(out.status.code(), Some(code), "{out:?}");
        serde_json::from_str(&out.stdout)
            .unwrap_or_else(|error| panic!("stdout is not JSON ({error}): {out:?}"))
    }

    /// `GET URL PATH` straight to the API, parsed; panics unless it answers 2xx.
    fn api_get(&self, path: &str) -> Value {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async {
            let response = reqwest::Client::new()
                .get(format!("{}{path}", self.url))
                .timeout(COMMAND_TIMEOUT)
                .send()
                .await
                .unwrap_or_else(|error| panic!("GET {path}: {error}"));
            assert!(response.status().is_success(), "GET {path}: {response:?}");
            response.json().await.expect("a JSON answer")
        })
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_sluice"));
        command.arg("--url").arg(&self.url).args(args);
        command
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
fn run(command: Command, stdin: Option<&str>) -> Output {
    run_with_timeout(command, stdin, COMMAND_TIMEOUT)
}

/// Runs a command to its end, feeding it `stdin`; kills it after `timeout`.
fn run_with_timeout(mut command: Command, stdin: Option<&str>, timeout: Duration) -> Output {
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
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for sluice") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{command:?} did not finish within {timeout:?}");
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

#[test]
fn bench_runs_the_peers_workload_on_both_protocols_and_sweeps_depths() {
    // Proves scenarios 13 and 14 of `sluice bench` with tiny sizes: the peers' workload over HTTP
    // and over the gRPC streams gets every message through once (none lost, none twice) and
    // measures latency at the rate; the depth sweep fills its queue to each depth, reads memory
    // and restarts at each.
    let server = Server::start();
    let command = server.command(&[
        "bench",
        "--scenarios",
        "peers,depth-sweep",
        "--json",
        "--peers-messages",
        "300",
        "--peers-producers",
        "2",
        "--peers-window",
        "8",
        "--peers-consumers",
        "2",
        "--peers-batch",
        "8",
        "--peers-rate",
        "200",
        "--peers-latency",
        "1s",
        "--sweep-depths",
        "500,100",
        "--sweep-probes",
        "20",
        "--time-limit",
        "60s",
    ]);
    let bench = run_with_timeout(command, None, SLOW_COMMAND_TIMEOUT);
    bench.assert_success();
    let report: Value = serde_json::from_str(&bench.stdout)
        .unwrap_or_else(|error| panic!("stdout is not JSON ({error}): {bench:?}"));
    let peers = report["peers"].as_array().expect("peers");
    assert_eq!(peers.len(), 2, "{report}");
    for (run, protocol) in peers.iter().zip(["http", "grpc"]) {
        assert_eq!(run["protocol"], protocol, "{run}");
        assert_eq!(run["failure"], Value::Null, "{run}");
        assert_eq!(
            (
                &run["produced"],
                &run["distinct"],
                &run["duplicates"],
                &run["lost"]
            ),
            (&json!(300), &json!(300), &json!(0), &json!(0)),
            "{run}"
        );
        assert!(
            run["latency"]["count"].as_u64().unwrap_or(0) >= 100,
            "{run}"
        );
    }
    let sweep = &report["depth_sweep"];
    assert_eq!(sweep["failure"], Value::Null, "{sweep}");
    let depths: Vec<u64> = sweep["points"]
        .as_array()
        .expect("points")
        .iter()
        .map(|point| point["depth"].as_u64().unwrap_or(0))
        .collect();
    assert_eq!(depths, [100, 500], "in ascending order: {sweep}");
    for point in sweep["points"].as_array().expect("points") {
        assert!(point["rss_mib"].as_f64().unwrap_or(0.0) > 0.0, "{point}");
        assert!(point["restart_s"].as_f64().unwrap_or(0.0) > 0.0, "{point}");
    }
}
