//! The real `sluice` binary, for the tests that kill it (SIGKILL cannot hit an in-process server
//! without taking the test with it); the test kit's [`Launch`](sluice_testkit::server::Launch)
//! starts it.
//!
//! A test binary of this crate cannot name `CARGO_BIN_EXE_sluice` (that binary belongs to
//! sluice-cli), so the binary is the one the workspace built beside this test executable
//! ([`built_binary`]). Build it first with `cargo build -p sluice-cli`; without it the test
//! says it is skipped (it fails when `CI` is set).

use std::path::PathBuf;

use sluice_testkit::server::built_binary;

/// The built `sluice` binary, or `None` after saying the test is skipped (outside CI only).
pub fn sluice_binary_or_skip(what: &str) -> Option<PathBuf> {
    match built_binary() {
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
