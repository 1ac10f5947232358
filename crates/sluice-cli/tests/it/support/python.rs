//! Python tools the tests drive (a sender's own signing library, a reference parser): each set
//! is pinned in a requirements file under `.ci/` and installed, on first use, into a venv of its
//! own beside the build profiles (`target/<name>-venv`), again when its requirements change.
//! Without Python's venv or the package index a test reports itself skipped, unless `CI` is set,
//! where it fails: [`venv_python_or_skip`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The Python of venv `name` with the packages of `.ci/<requirements>`, made once per test run.
pub fn venv_python(name: &str, requirements: &str) -> Result<PathBuf, String> {
    venv_python_at(name, &Path::new(".ci").join(requirements))
}

/// [`venv_python`] for a requirements file anywhere in the repository (`requirements` is
/// relative to its root).
pub fn venv_python_at(name: &str, requirements: &Path) -> Result<PathBuf, String> {
    static MADE: Mutex<BTreeMap<String, Result<PathBuf, String>>> = Mutex::new(BTreeMap::new());
    let mut made = MADE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    made.entry(name.to_owned())
        .or_insert_with(|| make_venv(name, requirements))
        .clone()
}

/// [`venv_python`], or `None` after saying the test is skipped (outside CI only).
pub fn venv_python_or_skip(name: &str, requirements: &str, what: &str) -> Option<PathBuf> {
    or_skip(venv_python(name, requirements), what)
}

/// A venv's Python, or `None` after saying the test is skipped (outside CI only); in CI a
/// venv that could not be made fails the test.
pub fn or_skip(venv: Result<PathBuf, String>, what: &str) -> Option<PathBuf> {
    match venv {
        Ok(python) => Some(python),
        Err(why) if std::env::var_os("CI").is_none() => {
            eprintln!("skipped: {what} could not be installed ({why})");
            None
        }
        Err(why) => panic!("{what} could not be installed in CI: {why}"),
    }
}

fn make_venv(name: &str, requirements: &Path) -> Result<PathBuf, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let requirements = root.join(requirements);
    // The binary is target/<profile>/sluice: the venv goes beside the profiles.
    let target = Path::new(env!("CARGO_BIN_EXE_sluice"))
        .parent()
        .and_then(Path::parent)
        .ok_or("no target directory")?
        .to_path_buf();
    let venv = target.join(format!("{name}-venv"));
    let installed = venv.join("requirements.txt");
    let wanted = std::fs::read(&requirements)
        .map_err(|e| format!("cannot read {}: {e}", requirements.display()))?;
    if std::fs::read(&installed).ok().as_deref() != Some(wanted.as_slice()) {
        let _ = std::fs::remove_dir_all(&venv);
        let pip = venv.join("bin/pip");
        run(Command::new("python3").arg("-m").arg("venv").arg(&venv))?;
        run(Command::new(&pip)
            .args([
                "install",
                "-q",
                "--disable-pip-version-check",
                "--no-deps",
                "-r",
            ])
            .arg(&requirements))?;
        run(Command::new(&pip).args(["check", "--disable-pip-version-check"]))?;
        std::fs::write(&installed, &wanted).map_err(|e| e.to_string())?;
    }
    Ok(venv.join("bin/python"))
}

/// Runs a command to its end (at most 5 minutes); its output in the error when it fails.
pub fn run(command: &mut Command) -> Result<(), String> {
    let described = format!("{command:?}");
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{described}: {e}"))?;
    let deadline = Instant::now() + Duration::from_secs(300);
    while child.try_wait().map_err(|e| e.to_string())?.is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            return Err(format!("{described} ran longer than 5 minutes"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let output = child.wait_with_output().map_err(|e| e.to_string())?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{described} failed ({}): {}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

/// A moto_server (a second SQS implementation, standing in for AWS) on 127.0.0.1, killed when
/// dropped.
pub struct Moto {
    child: std::process::Child,
    /// Its endpoint URL.
    pub url: String,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How long moto_server may take to say where it listens.
const MOTO_START_TIMEOUT: Duration = Duration::from_secs(30);

/// moto_server from the venv of `python` on a port of its choosing (`-p 0`).
pub fn start_moto(python: &Path) -> Moto {
    use std::io::{BufRead, BufReader};
    let moto = python.with_file_name("moto_server");
    let mut child = Command::new(&moto)
        .args(["-H", "127.0.0.1", "-p", "0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("start {}: {e}", moto.display()));
    let stderr = child.stderr.take().expect("moto's stderr");
    let (found, url) = std::sync::mpsc::channel();
    // It logs every request to stderr: the reader keeps reading after the URL, or a full pipe
    // would stall it.
    std::thread::spawn(move || {
        let mut seen = Vec::new();
        let mut found = Some(found);
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            // Werkzeug says " * Running on http://127.0.0.1:PORT" once it listens.
            if let Some(at) = line.find("http://127.0.0.1:") {
                if let Some(found) = found.take() {
                    let _ = found.send(Ok(line[at..].trim().to_owned()));
                }
            } else if found.is_some() {
                seen.push(line);
            }
        }
        if let Some(found) = found {
            let _ = found.send(Err(seen.join("\n")));
        }
    });
    let mut moto = Moto {
        child,
        url: String::new(),
    };
    moto.url = match url.recv_timeout(MOTO_START_TIMEOUT) {
        Ok(Ok(url)) => url,
        Ok(Err(said)) => panic!("moto_server exited: {said}"),
        Err(_) => panic!("moto_server did not start within {MOTO_START_TIMEOUT:?}"),
    };
    moto
}
