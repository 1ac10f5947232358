//! Puts the commit the binary was built from into `sluice --version` (`SLUICE_COMMIT`).
//!
//! From the environment when set (a release archive built outside a checkout says it), else
//! from `git` in the checkout, else "unknown" (a `cargo install` from a copy without `.git`).

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=SLUICE_COMMIT");
    let commit = std::env::var("SLUICE_COMMIT")
        .ok()
        .filter(|commit| !commit.is_empty())
        .or_else(git_commit)
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=SLUICE_COMMIT={commit}");
}

/// The checkout's commit, short, with `-dirty` when files differ from it.
fn git_commit() -> Option<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let git_dir = root.join(".git");
    if !git_dir.exists() {
        return None;
    }
    // A new commit or checkout moves HEAD or the branch it names.
    for watched in ["HEAD", "refs/heads", "packed-refs"] {
        println!("cargo:rerun-if-changed={}", git_dir.join(watched).display());
    }
    let run = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(&root)
            .output()
            .ok()
            .filter(|output| output.status.success())
            .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_owned())
    };
    let commit = run(&["rev-parse", "--short=12", "HEAD"])?;
    let dirty = run(&["status", "--porcelain", "--untracked-files=no"])
        .is_some_and(|status| !status.is_empty());
    Some(if dirty {
        format!("{commit}-dirty")
    } else {
        commit
    })
}
