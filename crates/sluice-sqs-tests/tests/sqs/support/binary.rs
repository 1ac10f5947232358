//! The real `sluice` binary as a child process, for the tests that kill it (SIGKILL cannot hit
//! an in-process server without taking the test with it).
//!
//! A test binary of this crate cannot name `CARGO_BIN_EXE_sluice` (that binary belongs to
//! sluice-cli), so the binary is looked up where the workspace builds it: beside this test
//! executable's `deps/` directory, i.e. `target/<profile>/sluice`. Build it first with
//! `cargo build -p sluice-cli`; without it the test says it is skipped (it fails when `CI` is
//! set).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// How long a start may take until the ready line, including retries for a port still busy.
const READY_TIMEOUT: Duration = Duration::from_secs(15);
/// What `sluice serve` prints on stdout when it accepts connections, then its URL.
const READY_PREFIX: &str = "sluice listening on ";

/// `target/<profile>/sluice` next to this test executable, if it was built.
pub fn sluice_binary() -> Option<PathBuf> {
    let test_executable = std::env::current_exe().ok()?;
    // target/<profile>/deps/<test>-<hash> -> target/<profile>/sluice
    let profile_dir = test_executable.parent()?.parent()?;
    let binary = profile_dir.join(format!("sluice{}", std::env::consts::EXE_SUFFIX));
    binary.is_file().then_some(binary)
}

/// [`sluice_binary`], or `None` after saying the test is skipped (outside CI only).
pub fn sluice_binary_or_skip(what: &str) -> Option<PathBuf> {
    match sluice_binary() {
        Some(binary) => Some(binary),
        None if std::env::var_os("CI").is_none() => {
            eprintln!(
                "skipped: {what} needs the sluice binary beside the test executable \
                 (cargo build -p sluice-cli)"
            );
            None
        }
        None => panic!("{what}: no sluice binary beside the test executable in CI"),
    }
}

/// `sluice serve` on a data dir that outlives restarts, on one port across restarts.
pub struct ServerProcess {
    binary: PathBuf,
    root: tempfile::TempDir,
    /// `127.0.0.1:0` before the first start, then the port it got.
    listen: String,
    url: String,
    child: Option<Child>,
    starts: u32,
}

impl ServerProcess {
    /// Starts `binary` on a fresh temp data dir and waits for its ready line.
    pub async fn start(binary: &Path) -> ServerProcess {
        let root = tempfile::Builder::new()
            .prefix("sluice-sqs-crash-")
            .tempdir()
            .expect("temp dir");
        let mut server = ServerProcess {
            binary: binary.to_owned(),
            root,
            listen: "127.0.0.1:0".to_owned(),
            url: String::new(),
            child: None,
            starts: 0,
        };
        server.launch().await;
        server
    }

    /// `http://127.0.0.1:PORT`, the same across restarts.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// SIGKILL, then waits for the process to be gone.
    pub async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.start_kill().expect("SIGKILL the server");
            child.wait().await.expect("wait for the killed server");
        }
    }

    /// Starts the binary again on the same data dir and port (it must not be running).
    pub async fn restart(&mut self) {
        assert!(self.child.is_none(), "restart of a running server");
        self.launch().await;
    }

    /// The last lines of the server's stderr, across starts.
    pub fn log_tail(&self, lines: usize) -> String {
        let log = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let all: Vec<&str> = log.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    fn log_path(&self) -> PathBuf {
        self.root.path().join("server.log")
    }

    /// Spawns the binary and reads its ready line; a restart retries while the old socket is
    /// not yet free (the process then exits before its ready line).
    async fn launch(&mut self) {
        let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
        loop {
            self.starts += 1;
            let log = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(self.log_path())
                .expect("open the server log");
            let mut child = Command::new(&self.binary)
                .arg("serve")
                .arg("--listen")
                .arg(&self.listen)
                .arg("--data")
                .arg(self.root.path().join("data"))
                .env_remove("SLUICE_TEST_CLOCK")
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::from(log))
                .kill_on_drop(true)
                .spawn()
                .expect("spawn the sluice binary");
            let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
            match tokio::time::timeout_at(deadline, stdout.next_line()).await {
                Ok(Ok(Some(line))) => {
                    let url = line
                        .strip_prefix(READY_PREFIX)
                        .unwrap_or_else(|| {
                            panic!("first stdout line is not the ready line: {line:?}")
                        })
                        .trim()
                        .to_owned();
                    if self.url.is_empty() {
                        let port = url
                            .rsplit(':')
                            .next()
                            .unwrap_or_else(|| panic!("no port in the ready line {line:?}"));
                        self.listen = format!("127.0.0.1:{port}");
                        self.url = url;
                    } else {
                        assert_eq!(url, self.url, "a restart announced another URL");
                    }
                    // Keep the pipe drained so the server never blocks on stdout.
                    tokio::spawn(
                        async move { while let Ok(Some(_)) = stdout.next_line().await {} },
                    );
                    self.child = Some(child);
                    return;
                }
                Ok(_) => {
                    let status = child.wait().await.expect("wait for the server");
                    let port_is_fixed = !self.listen.ends_with(":0");
                    if port_is_fixed
                        && tokio::time::Instant::now() + Duration::from_millis(200) < deadline
                    {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                    panic!(
                        "sluice serve exited with {status} before its ready line (start #{})\n{}",
                        self.starts,
                        self.log_tail(40)
                    );
                }
                Err(_) => {
                    let _ = child.start_kill();
                    panic!(
                        "sluice serve printed no ready line within {READY_TIMEOUT:?}\n{}",
                        self.log_tail(40)
                    );
                }
            }
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "---- sluice server log ----\n{}\n---- end of server log ----",
                self.log_tail(60)
            );
        }
        if let Some(child) = &mut self.child {
            let _ = child.start_kill();
        }
    }
}
