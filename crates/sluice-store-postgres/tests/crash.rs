//! A crash of the whole database (issue 34, item 2): a private PostgreSQL cluster, started by
//! the test with `initdb` and `postgres` in a process group of its own, has every process
//! SIGKILLed at once (what a machine crash does to it) while consumers of a `per_key` queue hold
//! leases, then starts again and recovers from its WAL. A claim the crash could undo would make
//! its message ready again while its consumer still works on it, so a second consumer would
//! hold a message of the same key at the same time. The test checks that no key is handed out
//! again before the held leases end, that every held receipt still acks after the crash, and
//! that the leases before and after never overlap on a key. Meanwhile consumers of an unordered
//! queue claim without pause; their last claims may be undone (the rule for unordered queues),
//! and the test checks that none of its messages is lost and counts those delivered again.
//!
//! The cluster runs with `wal_writer_delay = 10s`, so a commit that did not wait for the WAL
//! flush is lost by the kill unless a later synchronous commit flushed it: the crash then undoes
//! exactly what the store left to chance. Needs PostgreSQL's server binaries (`pg_config
//! --bindir`, else `initdb` and `postgres` on `PATH`); as root they run as the `postgres` user,
//! since PostgreSQL refuses root. Without them the test is skipped, or fails when `CI` is set.

use sluice_core::store::prelude::*;

use std::collections::{HashMap, HashSet};
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sluice_core::message::{NewMessage, Payload, Receipt};
use sluice_core::queue::{Ordering, QueueConfig};
use sluice_core::store::{AckParams, ClaimParams, EnqueueParams, QueuePutParams, StoreError};
use sluice_store_postgres::PgStore;

use crate::support;

/// Keys of the queue, and messages per key.
const KEYS: usize = 12;
const PER_KEY: usize = 6;
/// Consumers, each holding one message at a time.
const CONSUMERS: usize = 4;
/// Messages of the unordered queue, claimed without pause while the database dies.
const UNORDERED: usize = 3000;
/// The leases: long enough to outlast the crash and the recovery.
const LEASE_MS: i64 = 60_000;
/// How long the cluster may take to start or recover.
const START_TIMEOUT: Duration = Duration::from_secs(60);

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as i64
}

/// A PostgreSQL cluster of the test's own on 127.0.0.1, removed when dropped.
struct PrivateCluster {
    bindir: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
    /// The user and group to run as, when the test runs as root.
    run_as: Option<(u32, u32)>,
    server: Option<Child>,
}

impl PrivateCluster {
    /// `initdb` in a fresh directory; `None` (skipped) when the binaries are missing outside CI.
    fn init() -> Option<Self> {
        let Some(bindir) = server_binaries() else {
            let why = "PostgreSQL's server binaries (initdb, postgres) are not installed";
            assert!(
                !sluice_testkit::postgres::is_required(),
                "{why} (CI is set)"
            );
            eprintln!("skipped: {why}");
            return None;
        };
        let run_as = run_as();
        let dir = tempfile::tempdir().expect("a directory for the cluster");
        if let Some((uid, gid)) = run_as {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid)).expect("chown");
        }
        let cluster = Self {
            bindir,
            dir,
            port: free_port(),
            run_as,
            server: None,
        };
        let output = cluster
            .command("initdb")
            .args([
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--no-sync",
                "-D",
            ])
            .arg(cluster.data())
            .output()
            .expect("run initdb");
        assert!(
            output.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        Some(cluster)
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn command(&self, program: &str) -> Command {
        let mut command = Command::new(self.bindir.join(program));
        if let Some((uid, gid)) = self.run_as {
            command.uid(uid).gid(gid);
        }
        command.stdin(Stdio::null());
        command
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Starts the server (recovering from the WAL after a crash) and waits until it answers.
    async fn start(&mut self) {
        let log = std::fs::File::create(self.dir.path().join("server.log")).expect("log file");
        let server = self
            .command("postgres")
            .arg("-D")
            .arg(self.data())
            .args(["-p", &self.port.to_string(), "-k"])
            .arg(self.dir.path())
            .args([
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "fsync=on",
                "-c",
                "wal_writer_delay=10s",
                "-c",
                "max_connections=40",
                "-c",
                "shared_buffers=16MB",
            ])
            // Its own process group, so one signal reaches every process of the cluster.
            .process_group(0)
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start postgres");
        self.server = Some(server);
        let deadline = Instant::now() + START_TIMEOUT;
        while support::connect(&self.url()).await.is_err() {
            assert!(
                Instant::now() < deadline,
                "the private cluster did not answer within {START_TIMEOUT:?}:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// SIGKILLs every process of the cluster at once, as a machine crash stops them.
    fn kill_all(&mut self) {
        let mut server = self.server.take().expect("the cluster runs");
        let group = format!("-{}", server.id());
        let status = Command::new("kill")
            .args(["-KILL", "--", &group])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -KILL {group}");
        server.wait().expect("the postmaster is gone");
        // Its children got the same signal; give the kernel a moment to finish them.
        std::thread::sleep(Duration::from_millis(300));
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }
}

impl Drop for PrivateCluster {
    fn drop(&mut self) {
        if self.server.is_some() {
            self.kill_all();
        }
    }
}

/// The directory of `initdb` and `postgres`: `pg_config --bindir`, else where `PATH` has them.
fn server_binaries() -> Option<PathBuf> {
    let configured = Command::new("pg_config")
        .arg("--bindir")
        .output()
        .ok()
        .filter(|output| output.status.success())
        .map(|output| PathBuf::from(String::from_utf8_lossy(&output.stdout).trim()));
    let on_path = std::env::var_os("PATH")
        .and_then(|path| std::env::split_paths(&path).find(|dir| dir.join("initdb").is_file()));
    configured
        .filter(|dir| dir.join("initdb").is_file() && dir.join("postgres").is_file())
        .or(on_path)
}

/// As root, the uid and gid of the `postgres` user (PostgreSQL refuses to run as root).
fn run_as() -> Option<(u32, u32)> {
    let id = |flag: &str| -> Option<u32> {
        let output = Command::new("id").args([flag, "postgres"]).output().ok()?;
        String::from_utf8_lossy(&output.stdout).trim().parse().ok()
    };
    let me = Command::new("id").arg("-u").output().expect("run id");
    if String::from_utf8_lossy(&me.stdout).trim() != "0" {
        return None;
    }
    Some((
        id("-u").expect("a postgres user to run the cluster as"),
        id("-g").expect("its group"),
    ))
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").port()
}

fn message(key: usize, n: usize) -> NewMessage {
    NewMessage {
        idempotency_key: None,
        payload: Arc::new(Payload {
            body_bytes: format!("k{key}-{n}").into_bytes(),
            ..Payload::default()
        }),
        key: Some(format!("k{key}")),
        priority: 0,
        visible_at_ms: 0,
        dead_letter: None,
    }
}

/// A lease a consumer held: its key, its receipt, and the span it held it for.
#[derive(Debug, Clone)]
struct Held {
    key: String,
    receipt: Receipt,
    from_ms: i64,
    until_ms: i64,
}

async fn claim_one(store: &PgStore) -> Result<Option<Held>, StoreError> {
    let claim = store
        .message_claim(ClaimParams {
            queue: "q".into(),
            max: 1,
            lease_ms: Some(LEASE_MS),
            lane_runs: false,
            now_ms: now_ms(),
        })
        .await?;
    Ok(claim.messages.into_iter().next().map(|m| Held {
        key: m.key.clone().expect("every message has a key"),
        receipt: m.receipt,
        from_ms: now_ms(),
        until_ms: m.lease_expires_at_ms,
    }))
}

async fn ack(store: &PgStore, receipt: Receipt) -> Result<(), StoreError> {
    let mut results = store
        .message_ack(AckParams {
            queue: "q".into(),
            receipts: vec![receipt],
            result: None,
            delivery: None,
            now_ms: now_ms(),
        })
        .await?;
    results.remove(0).map_err(StoreError::from)
}

/// Claims up to 50 messages of the unordered queue `u`: (message id, lease number) of each.
async fn claim_unordered(store: &PgStore) -> Result<Vec<(uuid::Uuid, u32)>, StoreError> {
    let claim = store
        .message_claim(ClaimParams {
            queue: "u".into(),
            max: 50,
            lease_ms: Some(LEASE_MS),
            lane_runs: false,
            now_ms: now_ms(),
        })
        .await?;
    Ok(claim
        .messages
        .iter()
        .map(|m| (m.message_id, m.receipt.lease_number))
        .collect())
}

/// `call` again while the store reports the database unavailable (it reconnects by itself).
async fn until_available<T, F, Fut>(what: &str, mut call: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, StoreError>>,
{
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        match call().await {
            Ok(value) => return value,
            Err(StoreError::Unavailable(why)) if Instant::now() < deadline => {
                let _ = why;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(error) => panic!("{what}: {error}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_crash_never_lets_two_consumers_hold_one_key() {
    let Some(mut cluster) = PrivateCluster::init() else {
        return;
    };
    cluster.start().await;
    let mut options = support::options(&cluster.url(), "sluice_crash");
    options.pool_size = 8;
    let store = PgStore::open(options).await.expect("open the store");
    let mut config = QueueConfig::defaults_for("q");
    config.ordering = Ordering::PerKey;
    for (name, config) in [("q", config), ("u", QueueConfig::defaults_for("u"))] {
        store
            .queue_put(QueuePutParams {
                name: name.into(),
                config,
                now_ms: now_ms(),
            })
            .await
            .expect("create the queues");
    }
    store
        .message_enqueue(EnqueueParams {
            queue: "u".into(),
            messages: (0..UNORDERED).map(|n| message(n, 0)).collect(),
            now_ms: now_ms(),
        })
        .await
        .expect("enqueue");
    store
        .message_enqueue(EnqueueParams {
            queue: "q".into(),
            messages: (0..PER_KEY)
                .flat_map(|n| (0..KEYS).map(move |key| message(key, n)))
                .collect(),
            now_ms: now_ms(),
        })
        .await
        .expect("enqueue");

    // Load: consumers claim and ack, one message at a time each.
    let mut spans: Vec<Held> = Vec::new();
    let store = Arc::new(store);
    let consumers = (0..CONSUMERS).map(|_| {
        let store = store.clone();
        tokio::spawn(async move {
            let mut done = Vec::new();
            for _ in 0..KEYS {
                let Some(mut held) = claim_one(&store).await.expect("claim") else {
                    break;
                };
                held.until_ms = now_ms();
                ack(&store, held.receipt).await.expect("ack");
                done.push(held);
            }
            done
        })
    });
    for consumer in consumers {
        spans.extend(consumer.await.expect("a consumer"));
    }
    // Consumers of the unordered queue claim without pause (their claims do not wait for the
    // flush, so they do not flush the others' either) until the database dies under them.
    let unordered = tokio::spawn({
        let store = store.clone();
        async move {
            let mut claimed = Vec::new();
            while let Ok(batch) = claim_unordered(&store).await {
                claimed.extend(batch);
                tokio::task::yield_now().await;
            }
            claimed
        }
    });
    // Meanwhile each consumer of `q` takes one more and works on it when the database dies.
    let mut holding = Vec::new();
    for _ in 0..CONSUMERS {
        if let Some(held) = claim_one(&store).await.expect("claim") {
            holding.push(held);
        }
    }
    assert_eq!(holding.len(), CONSUMERS, "a message for each consumer");
    tokio::time::sleep(Duration::from_millis(20)).await;
    cluster.kill_all();
    let claimed_before = unordered.await.expect("the unordered consumers");
    cluster.start().await;

    // After recovery: every key held at the crash is still held. A fresh consumer gets only
    // messages of other keys, however often it asks.
    let held_keys: HashSet<&str> = holding.iter().map(|held| held.key.as_str()).collect();
    let mut after = Vec::new();
    for _ in 0..KEYS {
        let Some(mut held) = until_available("claim after the crash", || claim_one(&store)).await
        else {
            break;
        };
        assert!(
            !held_keys.contains(held.key.as_str()),
            "key {} was handed out again after the crash while a consumer held it (the claim \
             was lost): {held:?}, held at the crash: {holding:?}",
            held.key
        );
        held.until_ms = now_ms();
        ack(&store, held.receipt)
            .await
            .expect("ack after the crash");
        after.push(held);
    }
    // The consumers that held leases through the crash finish their work: their receipts ack.
    for held in &mut holding {
        held.until_ms = now_ms();
        until_available("ack of a lease held through the crash", || {
            ack(&store, held.receipt)
        })
        .await;
    }
    let (before, through, later) = (spans.len(), holding.len(), after.len());
    spans.extend(holding);
    spans.extend(after);

    // The unordered queue: nothing is lost, and what the crash undid is delivered again, with
    // the lease number (and attempts) of the undone claim: docs/semantics.md says so.
    let mut claimed_after = Vec::new();
    loop {
        let batch = until_available("unordered claim after the crash", || {
            claim_unordered(&store)
        })
        .await;
        if batch.is_empty() {
            break;
        }
        claimed_after.extend(batch);
    }
    let first_leases: HashMap<uuid::Uuid, u32> = claimed_before.iter().copied().collect();
    let again = claimed_after
        .iter()
        .filter(|(id, lease)| first_leases.get(id) == Some(lease))
        .count();
    let every: HashSet<uuid::Uuid> = first_leases
        .keys()
        .chain(claimed_after.iter().map(|(id, _)| id))
        .copied()
        .collect();
    assert_eq!(every.len(), UNORDERED, "every unordered message delivered");
    eprintln!(
        "unordered: {} claims before the crash; {again} of them undone by it and delivered \
         again with the same lease number",
        claimed_before.len()
    );

    // No two spans of one key overlap, before, across or after the crash.
    let mut by_key: HashMap<&str, Vec<&Held>> = HashMap::new();
    for span in &spans {
        by_key.entry(span.key.as_str()).or_default().push(span);
    }
    for (key, mut spans) in by_key {
        spans.sort_by_key(|span| span.from_ms);
        for pair in spans.windows(2) {
            assert!(
                pair[0].until_ms <= pair[1].from_ms,
                "two consumers held key {key} at once: {:?} and {:?}",
                pair[0],
                pair[1]
            );
        }
    }
    eprintln!(
        "{before} leases before the crash, {through} held through it, {later} after; no key \
         held twice at once"
    );
    store.close().await.expect("close the store");
    drop(cluster);
}
