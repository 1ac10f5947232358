//! The release archive as a user gets it (issue 31): `scripts/release-archive` packs this
//! build's binary (`SLUICE_RELEASE_BINARY`, so the test needs no release build), the archive
//! unpacks to the binary, LICENSE, README, CHANGELOG, the reference config and the systemd unit,
//! is the same bytes when packed twice, and the unpacked binary starts a server with the
//! shipped config. The unit passes `systemd-analyze verify` (with `CI` set it must be there).
//! The container image cannot be built here (no Docker daemon, no image registry): its
//! Dockerfile is checked by hadolint and the Kubernetes manifests by kubernetes-validate against
//! the API's schemas, and the health check the image runs (`sluice ready`) by `tests/cli/main.rs`.

#[allow(dead_code)]
#[path = "it/support/python.rs"]
mod python;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use sluice_testkit::server::Launch;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Packs `binary` into `dist`; the archive's path.
fn pack(binary: &Path, dist: &Path) -> PathBuf {
    let out = Command::new(root().join("scripts/release-archive"))
        .env("SLUICE_RELEASE_BINARY", binary)
        .env("SLUICE_DIST", dist)
        .output()
        .expect("run scripts/release-archive");
    assert!(out.status.success(), "{out:?}");
    let printed = String::from_utf8(out.stdout).unwrap();
    PathBuf::from(printed.trim())
}

fn run(command: &mut Command) -> String {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    assert!(out.status.success(), "{command:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_release_archive_unpacks_to_a_server_that_starts() {
    let work = tempfile::tempdir().unwrap();
    let archive = pack(
        Path::new(env!("CARGO_BIN_EXE_sluice")),
        &work.path().join("one"),
    );
    let name = archive
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .strip_suffix(".tar.gz")
        .unwrap()
        .to_owned();
    let version = env!("CARGO_PKG_VERSION");
    assert!(name.starts_with(&format!("sluice-{version}-")), "{name}");
    // Reproducible: the same files give the same bytes (a small stand-in binary, twice, so
    // the test does not compress this build's 170 MiB debug binary again).
    let small = work.path().join("small-binary");
    std::fs::write(&small, b"#!/bin/sh\n").unwrap();
    let first = pack(&small, &work.path().join("two"));
    let first = std::fs::read(first).unwrap();
    std::thread::sleep(Duration::from_millis(1100));
    let second = pack(&small, &work.path().join("three"));
    assert_eq!(
        first,
        std::fs::read(second).unwrap(),
        "packing the same files twice gives the same archive"
    );
    let sums = std::fs::read_to_string(archive.with_extension("gz.sha256")).unwrap();
    assert!(sums.ends_with(&format!("  {name}.tar.gz\n")), "{sums}");

    let listed = run(Command::new("tar").arg("-tzf").arg(&archive));
    let mut files: Vec<&str> = listed.lines().collect();
    files.sort_unstable();
    let expected: Vec<String> = [
        "",
        "CHANGELOG.md",
        "LICENSE",
        "README.md",
        "config.default.toml",
        "sluice",
        "sluice.service",
    ]
    .iter()
    .map(|file| format!("{name}/{file}"))
    .collect();
    assert_eq!(files, expected);

    let unpacked = work.path().join("unpacked");
    std::fs::create_dir(&unpacked).unwrap();
    run(Command::new("tar")
        .arg("-xzf")
        .arg(&archive)
        .arg("-C")
        .arg(&unpacked));
    let dir = unpacked.join(&name);
    let binary = dir.join("sluice");
    let shown = run(Command::new(&binary).arg("--version"));
    assert!(
        shown.starts_with(&format!("sluice {version} (commit ")),
        "{shown}"
    );

    // It starts with the shipped config and answers /readyz (the test kit's launcher waits for
    // its 200, and kills it on drop).
    let server = Launch::new(&binary)
        .name("the unpacked server")
        .config_file(dir.join("config.default.toml"))
        .data(work.path().join("data"))
        .start_blocking();
    drop(server);

    verify_unit(&dir.join("sluice.service"), &binary, work.path());
}

/// `systemd-analyze verify` of the unit, its `ExecStart` pointed at `binary`.
fn verify_unit(unit: &Path, binary: &Path, work: &Path) {
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        assert!(
            std::env::var_os("CI").is_none(),
            "systemd-analyze (package systemd) checks the unit"
        );
        eprintln!("skipped: no systemd-analyze to verify the unit");
        return;
    }
    let text = std::fs::read_to_string(unit).unwrap();
    for setting in [
        "DynamicUser=yes",
        "StateDirectory=sluice",
        "ProtectSystem=strict",
        "NoNewPrivileges=yes",
    ] {
        assert!(text.lines().any(|line| line == setting), "{setting}");
    }
    let local = text.replace("/usr/local/bin/sluice", binary.to_str().unwrap());
    let copy = work.join("sluice.service");
    std::fs::write(&copy, local).unwrap();
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&copy)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && said.trim().is_empty(), "{said}");
}

#[test]
fn the_dockerfile_and_the_kubernetes_manifests_validate() {
    let venv = python::venv_python("packaging-checks", "requirements-packaging.txt");
    let Some(python) = python::or_skip(venv, "hadolint and kubernetes-validate") else {
        return;
    };
    let bin = python.parent().unwrap();
    let dockerfile = root().join("packaging/Dockerfile");
    let out = Command::new(bin.join("hadolint"))
        .arg(&dockerfile)
        .output()
        .unwrap();
    assert!(out.status.success(), "hadolint: {out:?}");
    let text = std::fs::read_to_string(&dockerfile).unwrap();
    let last_stage = text.rsplit("\nFROM ").next().unwrap();
    for line in [
        "gcr.io/distroless/cc-debian12:nonroot",
        "USER 65532:65532",
        "VOLUME [\"/var/lib/sluice\"]",
        "CMD [\"/usr/local/bin/sluice\", \"--url\", \"http://127.0.0.1:7566\", \"ready\"]",
    ] {
        assert!(last_stage.contains(line), "the image's stage has {line}");
    }

    let manifests = ["single-node.yaml", "postgres.yaml"]
        .map(|name| root().join("packaging/kubernetes").join(name));
    let out = Command::new(bin.join("kubernetes-validate"))
        .arg("--strict")
        .args(&manifests)
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && !said.contains("ERROR"), "{said}");
    for manifest in &manifests {
        let text = std::fs::read_to_string(manifest).unwrap();
        for setting in [
            "runAsNonRoot: true",
            "readOnlyRootFilesystem: true",
            "path: /readyz",
            "secretKeyRef",
        ] {
            assert!(text.contains(setting), "{}: {setting}", manifest.display());
        }
    }
}
