//! A full disk, for real: the server's data directory is a small tmpfs, filled by messages and a
//! filler file. New messages are refused with 507 `disk_full` (never a 2xx for what was not
//! stored), `/readyz` says not ready, receives and acks go on (the disk reserve is given back),
//! a start on the full disk serves reads instead of blocking, and once space is freed enqueues
//! succeed again without a restart. Everything acknowledged survives a crash.
//!
//! Mounting needs root (or CAP_SYS_ADMIN). Where `mount` is refused the test says it is skipped,
//! except in CI (`CI` set), where that is a failure.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{TestServer, message_id, receipt};

/// The tmpfs: small, so filling it is quick.
const TMPFS_BYTES: u64 = 48 << 20;
/// `[store] disk_reserve_bytes` of the server under test.
const RESERVE_BYTES: u64 = 8 << 20;
/// Room left by the first filler file for messages to fill.
const ROOM_FOR_MESSAGES: u64 = 12 << 20;
/// Messages per enqueue batch, and their body size.
const BATCH: usize = 50;
const BODY_BYTES: usize = 4_000;
/// Most batches the fill may take (12 MiB of room is about 60).
const FILL_BATCHES_MAX: usize = 1_000;
/// How long writes may take to resume after space is freed (the store probes every second).
const RESUME_WITHIN: Duration = Duration::from_secs(20);

/// A tmpfs mounted on a directory; unmounted on drop (lazily, in case a process still has a
/// file open there).
struct Tmpfs(PathBuf);

impl Tmpfs {
    /// Mounts, or says why not.
    fn mount(dir: &Path, bytes: u64) -> Result<Self, String> {
        let output = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={bytes},mode=0700"),
                "tmpfs",
            ])
            .arg(dir)
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if output.status.success() {
            Ok(Self(dir.to_owned()))
        } else {
            Err(String::from_utf8_lossy(&output.stderr).trim().to_owned())
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Writes zeros to `path` until `bytes` are written or the filesystem is full; returns the
/// bytes written.
fn fill_file(path: &Path, bytes: u64) -> u64 {
    let mut file = std::fs::File::create(path).expect("create the filler file");
    let chunk = vec![0u8; 1 << 20];
    let mut written = 0;
    while written < bytes {
        let now = (bytes - written).min(chunk.len() as u64) as usize;
        match file.write(&chunk[..now]) {
            Ok(0) | Err(_) => break,
            Ok(n) => written += n as u64,
        }
    }
    let _ = file.sync_all();
    written
}

fn batch(from: usize) -> Value {
    let body = "x".repeat(BODY_BYTES);
    let messages: Vec<Value> = (from..from + BATCH)
        .map(|i| json!({ "body": { "n": i, "pad": body } }))
        .collect();
    json!({ "messages": messages })
}

/// The ids of an enqueue answer (single or batch).
fn stored_ids(answer: &Value) -> Vec<String> {
    match answer["results"].as_array() {
        Some(messages) => messages.iter().map(message_id).collect(),
        None => vec![message_id(answer)],
    }
}

async fn assert_refused_as_full(server: &TestServer, body: Value) {
    let reply = server.post("/v1/queues/q/messages", body).await;
    let error = reply.error(507, "disk_full");
    assert!(
        error["message"].as_str().unwrap().contains("disk is full"),
        "{error}"
    );
    assert!(reply.header("retry-after").is_some(), "{reply:?}");
}

async fn readyz_status(server: &TestServer) -> u16 {
    server.get("/readyz").await.status.as_u16()
}

/// Stops `server`, mounts a tmpfs of [`TMPFS_BYTES`] on its data directory and starts it
/// there: the directory and the mount (unmounted when dropped). `None` where mounting is refused
/// (the test is skipped, except in CI).
async fn on_a_small_tmpfs(server: &mut TestServer) -> Option<(PathBuf, Tmpfs)> {
    server.terminate().await;
    let data = server.data_dir();
    let tmpfs = match Tmpfs::mount(&data, TMPFS_BYTES) {
        Ok(tmpfs) => tmpfs,
        Err(why) if std::env::var_os("CI").is_none() => {
            eprintln!("skipped: cannot mount a tmpfs ({why}); run as root to test a full disk");
            return None;
        }
        Err(why) => panic!("cannot mount a tmpfs in CI: {why}"),
    };
    server.restart().await;
    Some((data, tmpfs))
}

#[tokio::test]
async fn a_full_disk_refuses_new_messages_keeps_acks_working_and_recovers_without_a_restart() {
    let mut server = TestServer::builder()
        .config(&format!(
            "[store]\ndisk_reserve_bytes = {RESERVE_BYTES}\nwal_max_bytes = 1048576\n"
        ))
        .start()
        .await;
    let Some((data, _tmpfs)) = on_a_small_tmpfs(&mut server).await else {
        return;
    };
    server.put_queue("q", json!({})).await;

    // Most of the room goes to a filler file; messages fill the rest.
    let filler = data.join("filler");
    let free = fs_free(&data);
    assert!(
        free > ROOM_FOR_MESSAGES,
        "only {free} bytes free on the tmpfs"
    );
    fill_file(&filler, free - ROOM_FOR_MESSAGES);
    let mut stored: BTreeSet<String> = BTreeSet::new();
    let mut refused = None;
    for i in 0..FILL_BATCHES_MAX {
        let reply = server.post("/v1/queues/q/messages", batch(i * BATCH)).await;
        if reply.status.is_success() {
            stored.extend(stored_ids(&reply.ok()));
        } else {
            refused = Some(reply);
            break;
        }
    }
    let refused = refused.expect("the disk never filled up");
    let error = refused.error(507, "disk_full");
    assert!(refused.header("retry-after").is_some(), "{refused:?}");
    assert!(!stored.is_empty(), "{error}");

    // Full: not ready, but alive; receives, acks and nacks go on.
    assert_eq!(readyz_status(&server).await, 503);
    server.get("/healthz").await.ok();
    let metrics = server.get("/metrics").await;
    for sample in ["sluice_storage_disk_full 1", "sluice_storage_wal_bytes "] {
        assert!(metrics.text.contains(sample), "{sample}: {}", metrics.text);
    }
    let mut acked: BTreeSet<String> = BTreeSet::new();
    let received = server.receive("q", json!({ "max": 20 })).await;
    assert_eq!(received.len(), 20);
    for message in &received[..19] {
        server.ack("q", receipt(message)).await;
        acked.insert(message_id(message));
    }
    server
        .nack(
            "q",
            json!({ "receipt": receipt(&received[19]), "error": "later" }),
        )
        .await;
    assert_refused_as_full(&server, batch(1_000_000)).await;
    assert_eq!(readyz_status(&server).await, 503, "ready again while full");

    // A crash and a start on a disk with no byte left: the server comes up, serves reads and
    // refuses new messages (it used to block at the first write).
    let last_bytes = data.join("filler-2");
    fill_file(&last_bytes, TMPFS_BYTES);
    server.kill().await;
    server.restart_unready().await;
    assert_eq!(readyz_status(&server).await, 503);
    assert!(!server.receive("q", json!({ "max": 5 })).await.is_empty());
    assert_refused_as_full(&server, json!({ "body": "one more" })).await;

    // Space is freed: new messages are taken again, without a restart.
    std::fs::remove_file(&last_bytes).unwrap();
    std::fs::remove_file(&filler).unwrap();
    let deadline = tokio::time::Instant::now() + RESUME_WITHIN;
    loop {
        let reply = server
            .post("/v1/queues/q/messages", json!({ "body": "after" }))
            .await;
        if reply.status.is_success() {
            stored.extend(stored_ids(&reply.ok()));
            break;
        }
        reply.error(507, "disk_full");
        assert!(
            tokio::time::Instant::now() < deadline,
            "enqueues still refused {RESUME_WITHIN:?} after space was freed"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    stored.extend(stored_ids(&server.send("q", batch(2_000_000)).await));
    assert_eq!(readyz_status(&server).await, 200);

    // Everything acknowledged survives a crash: what was stored is there, what was acked is
    // acked, and nothing else appeared.
    server.kill().await;
    server.restart().await;
    let stats = server.stats("q").await;
    let live = ["ready", "delayed", "in_flight"]
        .iter()
        .map(|state| stats[state].as_u64().unwrap())
        .sum::<u64>();
    assert_eq!(live, (stored.len() - acked.len()) as u64, "{stats}");
    for id in &acked {
        assert_eq!(server.message_status("q", id).await["state"], "acked");
    }
    for id in stored.difference(&acked).take(100) {
        let state = server.message_status("q", id).await["state"].clone();
        assert!(
            ["ready", "delayed"].contains(&state.as_str().unwrap()),
            "{id}: {state}"
        );
    }
    server.kill().await;
}

/// The test binary has no statvfs without `unsafe` or a new dependency: `df` says it.
fn fs_free(dir: &Path) -> u64 {
    let output = Command::new("df")
        .args(["--output=avail", "-B1"])
        .arg(dir)
        .output()
        .expect("run df");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .nth(1)
        .and_then(|line| line.trim().parse().ok())
        .expect("df's answer")
}

/// Issue 30, finding 13: on a volume smaller than twice the default reserve (64 MiB), the
/// server started without a reserve, acks hung for 10-30 s when the disk filled, and after
/// space was freed enqueues stayed 507 (and `/readyz` 503) until a restart, because the store
/// waited for 128 MiB free on a smaller volume. The reserve is sized to the volume now.
#[tokio::test]
async fn a_volume_smaller_than_the_default_reserve_fills_and_recovers() {
    let mut server = TestServer::builder()
        .config("[store]\nwal_max_bytes = 1048576\n")
        .start()
        .await;
    let Some((data, _tmpfs)) = on_a_small_tmpfs(&mut server).await else {
        return;
    };
    assert!(
        data.join("sluice.reserve").exists(),
        "the reserve, sized to the volume, is allocated at start"
    );
    server.put_queue("q", json!({})).await;
    let filler = data.join("filler");
    let free = fs_free(&data);
    fill_file(&filler, free.saturating_sub(ROOM_FOR_MESSAGES));
    let mut refused = None;
    for i in 0..FILL_BATCHES_MAX {
        let reply = server.post("/v1/queues/q/messages", batch(i * BATCH)).await;
        if !reply.status.is_success() {
            refused = Some(reply);
            break;
        }
    }
    refused
        .expect("the disk never filled up")
        .error(507, "disk_full");
    // Acks are answered at once: the reserve given back lets them commit.
    let received = server.receive("q", json!({ "max": 10 })).await;
    assert_eq!(received.len(), 10);
    for message in &received {
        let started = std::time::Instant::now();
        server.ack("q", receipt(message)).await;
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "an ack on a full disk took {:?}",
            started.elapsed()
        );
    }
    std::fs::remove_file(&filler).unwrap();
    let deadline = tokio::time::Instant::now() + RESUME_WITHIN;
    loop {
        let reply = server
            .post("/v1/queues/q/messages", json!({ "body": "after" }))
            .await;
        if reply.status.is_success() {
            break;
        }
        reply.error(507, "disk_full");
        assert!(
            tokio::time::Instant::now() < deadline,
            "enqueues still refused {RESUME_WITHIN:?} after space was freed"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(readyz_status(&server).await, 200);
    server.kill().await;
}
