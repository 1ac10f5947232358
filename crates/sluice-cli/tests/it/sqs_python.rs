//! The SQS-compatible API driven by real clients: the Python scripts in `tests/sqs/` (boto3 over
//! JSON, boto3 1.34.89 over query, hand-signed query requests, the AWS CLI, Celery on kombu's SQS
//! transport, and a differential run against moto_server), each against a fresh `sluice serve`.
//! Checks where sluice differs from AWS on purpose (docs/sqs.md) are listed per script (`*_GAPS`).
//!
//! Every script is a plain program taking the endpoint URL, so it runs by hand against any
//! endpoint too, e.g. `python tests/sqs/boto3_flow.py http://127.0.0.1:PORT` in a venv made from
//! `.ci/sqs-requirements.txt` (tests/sqs/README.md). The venvs come from `support::python`: made
//! once per run, skipped outside CI when Python or the package index is missing.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

use crate::support::TestServer;
use crate::support::python::{start_moto, venv_python_or_skip};

/// Longest run of one script (each takes seconds; the bound only stops a hung client).
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(120);

/// The JSON-protocol clients, the AWS CLI, requests and moto_server.
const CLIENTS: (&str, &str) = ("sqs", "sqs-requirements.txt");
/// botocore 1.34.89, the last query-protocol release.
const QUERY_CLIENTS: (&str, &str) = ("sqs-query", "sqs-query-requirements.txt");
/// Celery with kombu's SQS transport.
const CELERY: (&str, &str) = ("sqs-celery", "sqs-celery-requirements.txt");

/// Checks of `boto3_flow.py` where sluice differs from AWS on purpose, as docs/sqs.md ("What
/// differs from AWS") says. Passed as `SQS_KNOWN_GAPS`: each must fail, and one that passes fails
/// the test, so a change of behaviour means changing this list and the docs together.
const BOTO3_FLOW_GAPS: &[&str] = &[];

/// Checks of `boto3_rules.py` where sluice differs on purpose (as [`BOTO3_FLOW_GAPS`]):
const BOTO3_RULES_GAPS: &[&str] = &[];

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/sqs")
        .join(name)
}

/// Runs `tests/sqs/<name>` with the venv `set` against `server`, with `extra` arguments before
/// the endpoint and the checks `gaps` expected to fail; panics with the script's output (and the
/// server's log) unless it exits 0.
async fn run_script(
    server: &TestServer,
    set: (&str, &str),
    name: &str,
    extra: &[&str],
    gaps: &[&str],
) {
    let Some(python) = venv_python_or_skip(set.0, set.1, &format!("the Python clients of {name}"))
    else {
        return;
    };
    let home = tempfile::tempdir().expect("temp dir for the clients");
    let mut command = Command::new(&python);
    command
        .arg(script(name))
        .args(extra)
        .arg(server.url())
        .env("AWS_ACCESS_KEY_ID", "AKIDSLUICE")
        .env("AWS_SECRET_ACCESS_KEY", "secret")
        .env("AWS_DEFAULT_REGION", "us-east-1")
        // The machine's AWS profile, if any, stays out of the test.
        .env("AWS_CONFIG_FILE", home.path().join("config"))
        .env(
            "AWS_SHARED_CREDENTIALS_FILE",
            home.path().join("credentials"),
        )
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("HOME", home.path())
        .env("TMPDIR", home.path())
        .env("SQS_KNOWN_GAPS", gaps.join(","))
        .env("PYTHONUNBUFFERED", "1")
        // No __pycache__ beside the scripts in the source tree.
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let child = command.spawn().expect("start the script");
    let output = match tokio::time::timeout(SCRIPT_TIMEOUT, child.wait_with_output()).await {
        Ok(output) => output.expect("wait for the script"),
        Err(_) => panic!(
            "{name} ran longer than {SCRIPT_TIMEOUT:?}\nserver log:\n{}",
            server.log_tail(40)
        ),
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{name} failed ({}) against {}:\n{stdout}\n{stderr}\nserver log:\n{}",
        output.status,
        server.url(),
        server.log_tail(40)
    );
    // The checks' names and notes, for `--nocapture` runs.
    println!("{stdout}");
}

#[tokio::test]
async fn boto3_over_json_gets_what_aws_answers() {
    // Proves, with boto3 1.43.11 (JSON protocol): create (standard, FIFO, idempotent,
    // QueueNameExists), GetQueueUrl and QueueDoesNotExist, ListQueues with prefix and
    // pagination, queue attributes, sends with the spec's MD5 vectors, batches with a failing
    // entry and the 10-entry limit, receive filters and system attributes, deletes, visibility 0,
    // FIFO order per group under three consumers, content-based dedup, the DLQ after
    // maxReceiveCount, the long-poll wake-up, purge, tags, DeleteQueue and parameter errors.
    let server = TestServer::builder().start().await;
    run_script(&server, CLIENTS, "boto3_flow.py", &[], BOTO3_FLOW_GAPS).await;
}

#[tokio::test]
async fn boto3_meets_the_finer_rules_as_aws_does() {
    // Proves, with boto3 1.43.11: an expired handle still deletes on a standard queue and is
    // refused on a FIFO queue; a deleted message's handle; ReceiveRequestAttemptId retries; FIFO
    // deduplication ids, ContentBasedDeduplication switched on later, fair queues, FifoQueue
    // fixed; PurgeQueue clearing FIFO deduplication; queue URLs with any host, a bare name, not
    // another account; delays, the queue's wait, MaximumMessageSize; AWSTraceHeader and its MD5;
    // AddPermission/RemovePermission; a message move task back to the source queue.
    let server = TestServer::builder().start().await;
    run_script(&server, CLIENTS, "boto3_rules.py", &[], BOTO3_RULES_GAPS).await;
}

#[tokio::test]
async fn boto3_over_query_runs_the_core_flow() {
    // Proves the same core flow over the query protocol with botocore 1.34.89: form-encoded
    // requests, XML answers (their MD5s checked, a CR body included), XML errors with
    // the legacy codes and the query wording of QueueDoesNotExist.
    let server = TestServer::builder().start().await;
    run_script(&server, QUERY_CLIENTS, "query_boto3_flow.py", &[], &[]).await;
}

#[tokio::test]
async fn hand_signed_and_unsigned_query_requests_get_xml() {
    // Proves the query protocol without an SDK model: SigV4-signed POSTs and GETs and unsigned
    // GETs on `/` and on queue URLs, flattened lists and maps in requests and answers, the
    // spec's MD5s, CR escaped in XML, the ErrorResponse envelope, InvalidAction and
    // MissingParameter, a QueueUrl parameter winning over the path.
    let server = TestServer::builder().start().await;
    run_script(&server, CLIENTS, "query_raw.py", &[], &[]).await;
}

#[tokio::test]
async fn the_aws_cli_creates_sends_receives_and_reports_a_missing_queue() {
    // Proves awscli 1.45.11 with --endpoint-url: create-queue, send-message with an attribute,
    // receive-message with all attributes, delete-message, delete-queue, and get-queue-url of a
    // missing queue exiting 255 with the legacy code in its message.
    let server = TestServer::builder().start().await;
    run_script(&server, CLIENTS, "awscli_flow.py", &[], &[]).await;
}

#[tokio::test]
async fn celery_runs_jobs_through_the_sqs_endpoint_unchanged() {
    // Proves Celery on kombu's SQS transport, configured only with the endpoint and keys,
    // creates its queue, sends 20 jobs and has a worker (kombu's async pycurl path) run each
    // exactly once and delete it.
    let server = TestServer::builder().start().await;
    run_script(&server, CELERY, "celery_jobs.py", &[], &[]).await;
}

#[tokio::test]
async fn answers_match_moto_field_by_field() {
    // Proves one sequence of calls answers like moto_server 5.2.1 wherever SQS defines the
    // answer and moto follows AWS (normalised ids, handles, timestamps, account and host; the
    // script lists the known moto differences).
    let Some(python) = venv_python_or_skip(CLIENTS.0, CLIENTS.1, "moto_server") else {
        return;
    };
    let moto = tokio::task::spawn_blocking(move || start_moto(&python))
        .await
        .expect("start moto_server");
    let server = TestServer::builder().start().await;
    run_script(&server, CLIENTS, "differential.py", &[&moto.url], &[]).await;
}
