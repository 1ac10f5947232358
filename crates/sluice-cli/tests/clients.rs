//! The TypeScript and Python SDKs' own suites (`clients/typescript`, `clients/python`), run by
//! the README's test command against this build's `sluice`: type checks, linters, and their
//! tests, which start `sluice serve` from `SLUICE_BIN` and run the shared conformance scenarios
//! (`conformance/scenarios.json`) on every backend of each SDK (sluice, memory, SQS through
//! sluice's SQS-compatible API, SQS on moto_server standing in for AWS, RabbitMQ on
//! 127.0.0.1:5672). moto_server comes from the venv of the SQS tests (`.ci/sqs-requirements.txt`),
//! one per suite, its URL passed as `SLUICE_TEST_MOTO_URL`.
//!
//! Each suite is also one command by hand, from its directory: `npm ci && npm run check`, and
//! `./check.sh` for Python (each SDK's README). Outside CI a missing Node.js, Python or package
//! index skips the suite with a message; with `CI` set it fails.

#[allow(dead_code)]
#[path = "it/support/python.rs"]
mod python;

use std::io::{Read, Seek};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Longest run of one step of a suite (an install, or the tests); the bound only stops a hung
/// suite.
const STEP_TIMEOUT: Duration = Duration::from_secs(900);

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn in_ci() -> bool {
    std::env::var_os("CI").is_some()
}

/// Whether `program --version` runs; outside CI a missing tool skips the suite.
fn have(program: &str, suite: &str) -> bool {
    let found = Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !found {
        assert!(!in_ci(), "{suite} needs {program}, which is not installed");
        eprintln!("skipped: {suite} needs {program}, which is not installed");
    }
    found
}

/// moto_server for a suite's SQS-on-AWS backend; `None` (the suite then skips that backend)
/// outside CI when its venv cannot be made.
fn moto() -> Option<python::Moto> {
    let python = python::venv_python_or_skip("sqs", "sqs-requirements.txt", "moto_server")?;
    Some(python::start_moto(&python))
}

/// Runs one step of a suite in `dir` with the server binary in `SLUICE_BIN`; panics with its
/// output unless it exits 0 within [`STEP_TIMEOUT`].
fn step(dir: &Path, program: &Path, args: &[&str]) {
    step_with_moto(dir, program, args, None);
}

/// [`step`], with moto's URL in `SLUICE_TEST_MOTO_URL` when given.
fn step_with_moto(dir: &Path, program: &Path, args: &[&str], moto: Option<&python::Moto>) {
    let described = format!(
        "{} {} (in {})",
        program.display(),
        args.join(" "),
        dir.display()
    );
    let mut output = tempfile::tempfile().expect("a file for the step's output");
    let mut child = Command::new(program)
        .args(args)
        .current_dir(dir)
        .env("SLUICE_BIN", env!("CARGO_BIN_EXE_sluice"))
        .envs(moto.map(|moto| ("SLUICE_TEST_MOTO_URL", &moto.url)))
        .stdin(Stdio::null())
        .stdout(output.try_clone().expect("clone"))
        .stderr(output.try_clone().expect("clone"))
        .spawn()
        .unwrap_or_else(|e| panic!("{described}: {e}"));
    let deadline = Instant::now() + STEP_TIMEOUT;
    // `None`: it ran past the deadline and was killed.
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the step") {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let mut text = String::new();
    output.rewind().expect("rewind");
    output.read_to_string(&mut text).ok();
    match status {
        Some(status) if status.success() => {}
        Some(status) => panic!("{described} failed ({status}):\n{text}"),
        None => panic!("{described} ran longer than {STEP_TIMEOUT:?}:\n{text}"),
    }
    // What the suite said (its counts, its skips) is kept in the test's output.
    eprintln!("{described}:\n{}", tail(&text, 40));
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[test]
fn typescript_sdk_suite() {
    let dir = root().join("clients/typescript");
    if !have("node", "the TypeScript SDK's suite") || !have("npm", "the TypeScript SDK's suite") {
        return;
    }
    let npm = PathBuf::from("npm");
    step(&dir, &npm, &["ci", "--no-audit", "--no-fund"]);
    step_with_moto(&dir, &npm, &["run", "check"], moto().as_ref());
}

#[test]
fn python_sdk_suite() {
    let dir = root().join("clients/python");
    let venv = python::venv_python_at(
        "python-sdk",
        Path::new("clients/python/requirements-dev.txt"),
    );
    let Some(python) = python::or_skip(venv, "the Python SDK's tools") else {
        return;
    };
    // The SDK itself, editable, into the venv of its pinned tools (their versions are the lock).
    step(
        &dir,
        &python,
        &[
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--disable-pip-version-check",
            "-e",
            ".",
        ],
    );
    step(&dir, &python, &["-m", "ruff", "check", "."]);
    step(&dir, &python, &["-m", "ruff", "format", "--check", "."]);
    step(&dir, &python, &["-m", "mypy", "--strict", "src", "tests"]);
    step_with_moto(&dir, &python, &["-m", "pytest", "-q"], moto().as_ref());
}
