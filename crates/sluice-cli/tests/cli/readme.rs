//! The README's shell blocks, run in order against a fresh server: a new user following the
//! README top to bottom gets no surprise.
//!
//! Every fenced block marked `sh` or `bash` runs, in the order it is written, unless the line
//! before its opening fence is `<!-- readme-test: skip -->` (blocks that start a server, install
//! or build, or need a config file the tour has not written). Each block runs in its own
//! `bash -eu` with:
//! - the server this test started on a loopback port (the README's `:7566` becomes its port, and
//!   `SLUICE_URL` names it);
//! - the `sluice` binary of this build first on `PATH`;
//! - `curl` that fails on an HTTP error (`--fail-with-body`), since a curl line that gets a 4xx
//!   is a broken line of the tour even though curl itself exits 0;
//! - a scratch working directory shared by all blocks.
//!
//! A command that exits non-zero fails the test, naming the README line. The tour needs `jq`
//! (the README says so); without it the test fails when `CI` is set and is skipped otherwise.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sluice_testkit::server::{Launch, Server};

const README: &str = include_str!("../../../../README.md");
/// The line before a block's opening fence that keeps the block out of this test.
const SKIP_MARKER: &str = "<!-- readme-test: skip -->";
/// The port the README's commands name.
const README_PORT: &str = ":7566";
/// Longest a block may run (the tour's longest waits are a 5 s long poll and a 5 s drain).
const BLOCK_TIMEOUT: Duration = Duration::from_secs(180);

/// A shell block of the README: the line of its first command, and its text.
struct Block {
    first_line: usize,
    text: String,
}

/// The `sh`/`bash` blocks to run, in README order.
fn blocks(readme: &str) -> Vec<Block> {
    let lines: Vec<&str> = readme.lines().collect();
    let mut blocks = Vec::new();
    let mut index = 0;
    while index < lines.len() {
        let line = lines[index].trim_start();
        let Some(info) = line.strip_prefix("```") else {
            index += 1;
            continue;
        };
        let is_shell = matches!(info.trim(), "sh" | "bash" | "shell");
        let skipped = lines[..index]
            .iter()
            .rev()
            .find(|line| !line.trim().is_empty())
            .is_some_and(|line| line.trim() == SKIP_MARKER);
        let end = lines[index + 1..]
            .iter()
            .position(|line| line.trim_start().starts_with("```"))
            .map_or(lines.len(), |offset| index + 1 + offset);
        if is_shell && !skipped {
            blocks.push(Block {
                first_line: index + 2,
                text: lines[index + 1..end].join("\n"),
            });
        }
        index = end + 1;
    }
    blocks
}

/// The script a block runs as: the README's text, after a preamble that fails on errors and
/// names the README line of a failing command.
fn script(block: &Block, port: u16) -> String {
    let preamble = [
        "set -eu".to_owned(),
        "curl() { command curl --silent --show-error --fail-with-body \"$@\"; echo; }".to_owned(),
        // LINENO counts from the script's first line; the block starts after this preamble.
        format!(
            "trap 'echo \"README.md line $((LINENO + {})) failed (exit $?): $BASH_COMMAND\" >&2' ERR",
            block.first_line as i64 - 4
        ),
    ];
    let text = block.text.replace(README_PORT, &format!(":{port}"));
    format!("{}\n{text}\n", preamble.join("\n"))
}

/// Runs one block; on failure its output and the server's log tail say why.
fn run(block: &Block, server: &Server, port: u16, dir: &Path) {
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_sluice")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut child = Command::new("bash")
        .arg("-c")
        .arg(script(block, port))
        .current_dir(dir.join("work"))
        .env("PATH", path)
        .env("SLUICE_URL", server.url())
        .env_remove("SLUICE_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run bash");
    // Both pipes are read on threads so a chatty block cannot fill one and stall.
    let read = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    };
    let stdout = read(Box::new(child.stdout.take().unwrap()));
    let stderr = read(Box::new(child.stderr.take().unwrap()));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > BLOCK_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let (stdout, stderr) = (stdout.join().unwrap(), stderr.join().unwrap());
    if status.is_some_and(|status| status.success()) {
        return;
    }
    panic!(
        "the README block at line {} {}\n--- stdout\n{stdout}\n--- stderr\n{stderr}\n--- server log (last lines)\n{}",
        block.first_line,
        match status {
            Some(status) => format!("failed: {status}"),
            None => format!("ran longer than {BLOCK_TIMEOUT:?}"),
        },
        server.log_tail(20)
    );
}

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

#[test]
fn the_readme_blocks_run_in_order_against_a_fresh_server() {
    let missing: Vec<&str> = ["bash", "curl", "jq"]
        .into_iter()
        .filter(|tool| !have(tool))
        .collect();
    if !missing.is_empty() {
        assert!(
            std::env::var_os("CI").is_none(),
            "the README test needs {missing:?} (CI is set, so this is a failure)"
        );
        eprintln!("skipped: the README test needs {missing:?}");
        return;
    }
    let blocks = blocks(README);
    // The tour is there and this test sees it: the curl tour, its second part, the CLI.
    assert!(
        blocks.len() >= 3,
        "only {} shell blocks found",
        blocks.len()
    );
    assert!(blocks.iter().any(|b| b.text.contains("curl -X PUT")));
    assert!(blocks.iter().any(|b| b.text.contains("sluice send")));
    assert!(
        !blocks.iter().any(|b| b.text.contains("sluice serve")),
        "a block that starts a server must carry {SKIP_MARKER}"
    );

    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("work")).unwrap();
    // The server under test, killed when dropped; a fresh one sees none of the caller's
    // `SLUICE_*` settings (`SLUICE_CONFIG`, `SLUICE_ADMIN_TOKEN`).
    let server = Launch::new(env!("CARGO_BIN_EXE_sluice"))
        .dir(dir.path())
        .start_blocking();
    let port = server.address().port();
    for block in &blocks {
        run(block, &server, port, dir.path());
    }
}

#[test]
fn blocks_are_found_and_the_marker_skips_one() {
    let text = "intro\n\n```sh\necho one\n```\n\n<!-- readme-test: skip -->\n```sh\nsluice serve\n```\n\n```toml\na = 1\n```\n\n```bash\necho two\necho three\n```\n";
    let found = blocks(text);
    assert_eq!(found.len(), 2);
    assert_eq!(
        (found[0].first_line, found[0].text.as_str()),
        (4, "echo one")
    );
    assert_eq!(
        (found[1].first_line, found[1].text.as_str()),
        (17, "echo two\necho three")
    );
    // The trap names the README line of a failing command.
    let script = script(&found[1], 1);
    let output = Command::new("bash")
        .arg("-c")
        .arg(script.replace("echo three", "false"))
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("README.md line 18 failed"), "{stderr}");
}
