//! `sluice-faultfs BACKING MOUNTPOINT [--torn]`: serves BACKING at MOUNTPOINT through the
//! power-cut layer (see the crate docs) until a command arrives on stdin:
//! `cut` drops everything unsynced and unmounts (a simulated power cut; `--torn` lets a random
//! half of the unsynced sectors through first), `unmount` (or the end of stdin) syncs everything
//! and unmounts. Kill the program using the mount before `cut`.
//!
//! Example, from the repository root (as root, or with `fusermount3` installed):
//!
//! ```text
//! mkdir -p /tmp/backing /tmp/mnt
//! cargo run -p sluice-faultfs -- /tmp/backing /tmp/mnt
//! # elsewhere: sluice serve --data /tmp/mnt/data ...; kill -9 it; then type `cut`
//! ```

use std::io::BufRead;
use std::path::PathBuf;
use std::process::ExitCode;

use sluice_faultfs::{FaultFs, TornWrites};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let torn = args.iter().any(|arg| arg == "--torn");
    let paths: Vec<&String> = args.iter().filter(|arg| !arg.starts_with("--")).collect();
    let [backing, mountpoint] = paths.as_slice() else {
        eprintln!("usage: sluice-faultfs BACKING MOUNTPOINT [--torn]");
        return ExitCode::from(2);
    };
    let mounted = match FaultFs::mount(&PathBuf::from(backing), &PathBuf::from(mountpoint)) {
        Ok(mounted) => mounted,
        Err(error) => {
            eprintln!("cannot mount {mountpoint}: {error}");
            return ExitCode::FAILURE;
        }
    };
    println!("mounted {backing} at {mountpoint}; commands: cut, unmount");
    for line in std::io::stdin().lock().lines() {
        match line.as_deref().map(str::trim) {
            Ok("cut") => {
                let torn = if torn {
                    TornWrites::Random
                } else {
                    TornWrites::None
                };
                return match mounted.power_cut(torn) {
                    Ok(report) => {
                        println!("power cut: {report:?}");
                        ExitCode::SUCCESS
                    }
                    Err(error) => {
                        eprintln!("power cut: unmount failed: {error}");
                        ExitCode::FAILURE
                    }
                };
            }
            Ok("unmount") | Err(_) => break,
            Ok(other) => eprintln!("unknown command {other:?}; commands: cut, unmount"),
        }
    }
    match mounted.unmount() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("unmount failed: {error}");
            ExitCode::FAILURE
        }
    }
}
