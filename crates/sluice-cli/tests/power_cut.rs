//! Power-cut tests: every acknowledged message survives a power cut (`--durability fsync`).
//!
//! The real `sluice serve` runs with its data directory on `sluice-faultfs`, a FUSE layer that
//! keeps unsynced writes and unsynced directory changes in memory. Producers enqueue without
//! pause and record every message answered 2xx (any other answer, a malformed 2xx, or a request
//! that fails before the cut fails the test); at a random moment the server is SIGKILLed and
//! the layer drops everything unsynced (a power cut, sometimes with torn writes: a random half
//! of the unsynced sectors reaches the disk). Then the data directory is checked as the disk
//! holds it: SQLite opens it and passes `integrity_check`, every acknowledged message and the
//! queue whose creation was answered are there, and `sluice serve` starts on it. Each cut must
//! come after messages were acknowledged (a server that acknowledges nothing loses nothing), and
//! in each case some cut must drop store writes made after the run's first acknowledgement (a cut
//! that only drops start-up writes does not test what was acknowledged).
//!
//! Cases: cuts in a steady state, within the first second after a fresh start (a data directory
//! that does not exist yet, or exists empty), and within the first second after a clean restart.
//! The same steady-state cuts with `--durability os` must lose acknowledged messages, which
//! proves the layer bites; that test also measures how much `os` loses per cut. For a longer
//! measurement (the numbers in docs/semantics.md):
//!
//! ```text
//! SLUICE_POWER_CUTS_OS=40 cargo test -p sluice-cli --test power_cut os_ -- --nocapture
//! ```
//!
//! and a longer soak of the `fsync` cases (each case cuts this often):
//!
//! ```text
//! SLUICE_POWER_CUTS=30 cargo test -p sluice-cli --test power_cut power_cuts_ -- --nocapture
//! ```
//!
//! FUSE is needed (`/dev/fuse`, and root or `fusermount3`): without it the tests are skipped,
//! unless `CI` is set, where they fail.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sluice_faultfs::{CutReport, DroppedFile, FaultFs, Mounted, TornWrites};
use sluice_testkit::server::Launch;
use tempfile::TempDir;
use uuid::Uuid;

const QUEUE: &str = "power";
const PRODUCERS: usize = 4;
/// Cuts per case in every run.
const CUTS_PER_CASE: usize = 3;
/// A case cuts up to this many more times when none of its cuts so far dropped store writes made
/// after an acknowledgement (about one cut in four finds every write already synced, more right
/// after a start), so that check holds on almost every run without making every run longer.
const EXTRA_CUTS: usize = 3;
/// Set, the `fsync` cases cut this often each (a longer soak) and the time bound is lifted.
const CUTS_VAR: &str = "SLUICE_POWER_CUTS";
/// The `os` test cuts until one loses acknowledged messages, at most this often.
const OS_PROOF_MAX_CUTS: usize = 8;
/// Set, the `os` test measures instead: this many cuts, whatever they lose.
const OS_CUTS_VAR: &str = "SLUICE_POWER_CUTS_OS";
/// Where a cut in the first second after a start falls, one window per cut in turn, so some
/// land before the first checkpoint (200 ms after the store opens) and some after.
const EARLY_CUT_WINDOWS_MS: [(u64, u64); 3] = [(0, 150), (150, 400), (400, 1000)];
/// Steady state: the cut comes this long after the (re)start.
const STEADY_CUT_MS: (u64, u64) = (1000, 1800);
/// Each producer stops after this many messages in one run between cuts (a bound, not a goal).
const MESSAGES_PER_PRODUCER: usize = 50_000;
/// Messages a run must have acknowledged before a steady-state cut (a second or more after the
/// start). Thousands are usual; the floor is far below that so a slow, busy machine passes,
/// and far above what a server that refuses or drops sends would reach.
const STEADY_MIN_ACKS: usize = 50;
/// The same before a cut in the first second after a start, except in the first window
/// (0-150 ms), where the cut may come before the first answer.
const EARLY_MIN_ACKS: usize = 1;
/// The store's files: a write to one of them after the first acknowledgement is the server's
/// work on acknowledged traffic, unlike the start-up's writes or the shared-memory index
/// (`-shm`), which SQLite never syncs.
const STORE_FILES: [&str; 2] = ["sluice.db", "sluice.db-wal"];
/// One test, all cuts.
const TEST_TIMEOUT: Duration = Duration::from_secs(120);

// ---- cases ---------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn power_cuts_in_a_steady_state_lose_no_acknowledged_message() {
    let Some(rig) = Rig::new() else { return };
    let count = cuts_per_case();
    let cuts = bounded(steady_cuts(rig, "fsync", count + EXTRA_CUTS, |cuts| {
        enough_cuts(cuts, count)
    }))
    .await;
    for cut in &cuts {
        cut.assert_acknowledged_at_least(STEADY_MIN_ACKS);
        cut.assert_nothing_lost();
    }
    assert_some_cut_dropped_state(&cuts);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn power_cuts_right_after_a_fresh_start_lose_no_acknowledged_message() {
    bounded(async {
        let mut cuts = Vec::new();
        // Whether the data directory exists (empty) before the start, and when the cut comes.
        let plan = [(false, 0), (true, 0), (false, 1), (true, 2)];
        let count = cuts_per_case().max(plan.len());
        for (i, (dir_exists, window)) in plan
            .into_iter()
            .cycle()
            .take(count + EXTRA_CUTS)
            .enumerate()
        {
            if enough_cuts(&cuts, count) {
                break;
            }
            let Some(mut rig) = Rig::new() else { return };
            if dir_exists {
                std::fs::create_dir(rig.backing_data()).expect("data dir");
                rig.remount();
            }
            let mut server = Server::start(&rig.layer_data(), "fsync", &rig.log()).await;
            let run = Run::start(&server, Earlier::default());
            let cut_at = server.ready_at + early_cut_delay(window);
            tokio::time::sleep_until(cut_at.into()).await;
            let cut = rig
                .cut(&mut server, run, torn(i), format!("fresh start #{i}"))
                .await;
            cut.assert_acknowledged_at_least(early_min_acks(window));
            cuts.push(cut);
            rig.check_restart("fsync").await;
        }
        for cut in &cuts {
            cut.assert_nothing_lost();
        }
        assert_some_cut_dropped_state(&cuts);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn power_cuts_right_after_a_clean_restart_lose_no_acknowledged_message() {
    bounded(async {
        let mut cuts = Vec::new();
        let count = cuts_per_case();
        for i in 0..count + EXTRA_CUTS {
            if enough_cuts(&cuts, count) {
                break;
            }
            let Some(mut rig) = Rig::new() else { return };
            let mut server = Server::start(&rig.layer_data(), "fsync", &rig.log()).await;
            let first = Run::start(&server, Earlier::default());
            tokio::time::sleep(Duration::from_millis(300)).await;
            let first = first.stop().await;
            // The server was up all along: no request may have failed.
            first.assert_no_failure_before(
                Instant::now(),
                "the producers were stopped",
                &format!("clean restart #{i}, first run"),
            );
            assert!(
                first.own_acks >= EARLY_MIN_ACKS && first.queue_created,
                "clean restart #{i}: the first run (300 ms) got {} messages acknowledged, queue created {}",
                first.own_acks,
                first.queue_created
            );
            server.terminate().await;
            let mut server = Server::start(&rig.layer_data(), "fsync", &rig.log()).await;
            let run = Run::start(
                &server,
                Earlier {
                    acks: first.acks,
                    queue_created: first.queue_created,
                },
            );
            let cut_at = server.ready_at + early_cut_delay(i);
            tokio::time::sleep_until(cut_at.into()).await;
            let cut = rig
                .cut(&mut server, run, torn(i), format!("clean restart #{i}"))
                .await;
            cut.assert_acknowledged_at_least(early_min_acks(i));
            cuts.push(cut);
            rig.check_restart("fsync").await;
        }
        for cut in &cuts {
            cut.assert_nothing_lost();
        }
        assert_some_cut_dropped_state(&cuts);
    })
    .await;
}

/// Proves the layer bites: with `--durability os` answers do not wait for a sync, and a power
/// cut loses what was answered since the checkpointer's last sync. Prints the loss per cut.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn os_durability_loses_acknowledged_messages_on_a_power_cut() {
    let Some(rig) = Rig::new() else { return };
    let measure: Option<usize> = std::env::var(OS_CUTS_VAR)
        .ok()
        .and_then(|value| value.parse().ok());
    let cuts = match measure {
        Some(count) => steady_cuts(rig, "os", count, |_| false).await,
        // A cut right after a checkpoint's sync can find nothing to lose, so the proof cuts
        // until one loses, a bounded number of times.
        None => {
            bounded(steady_cuts(rig, "os", OS_PROOF_MAX_CUTS, |cuts| {
                cuts.iter().any(|cut| !cut.lost.is_empty())
            }))
            .await
        }
    };
    let losses: Vec<(usize, u64)> = cuts
        .iter()
        .filter(|cut| !cut.lost.is_empty())
        .map(|cut| (cut.lost.len(), cut.loss_window_ms()))
        .collect();
    let mut messages: Vec<usize> = losses.iter().map(|(lost, _)| *lost).collect();
    let mut window_ms: Vec<u64> = losses.iter().map(|(_, ms)| *ms).collect();
    messages.sort_unstable();
    window_ms.sort_unstable();
    println!(
        "durability os: {} of {} cuts lost acknowledged messages; lost per losing cut {}; \
         acknowledgements lost per losing cut, in ms before the cut: {}",
        losses.len(),
        cuts.len(),
        spread(&messages),
        spread(&window_ms),
    );
    assert!(
        !losses.is_empty(),
        "no cut lost an acknowledged message with --durability os: the layer does not drop unsynced writes"
    );
    for cut in &cuts {
        cut.assert_store_intact();
    }
}

/// Min, median and max.
fn spread<T: Copy + std::fmt::Display>(sorted: &[T]) -> String {
    match sorted {
        [] => "-".to_owned(),
        _ => format!(
            "min {} / median {} / max {}",
            sorted[0],
            sorted[sorted.len() / 2],
            sorted[sorted.len() - 1]
        ),
    }
}

/// Starts on one data directory and cuts `count` times, restarting through the layer after
/// each cut (so later cuts also hit a store recovered from earlier ones).
async fn steady_cuts(
    mut rig: Rig,
    durability: &str,
    count: usize,
    done: impl Fn(&[Cut]) -> bool,
) -> Vec<Cut> {
    let mut cuts = Vec::new();
    let mut known = Vec::new();
    let mut server = Server::start(&rig.layer_data(), durability, &rig.log()).await;
    let mut queue_created = false;
    for i in 0..count {
        let run = Run::start(
            &server,
            Earlier {
                acks: std::mem::take(&mut known),
                queue_created,
            },
        );
        let delay = rand::random_range(STEADY_CUT_MS.0..STEADY_CUT_MS.1);
        tokio::time::sleep_until((server.ready_at + Duration::from_millis(delay)).into()).await;
        let cut = rig
            .cut(
                &mut server,
                run,
                torn(i),
                format!("{durability} steady #{i}"),
            )
            .await;
        // A queue whose creation `os` lost is created again.
        queue_created = cut.on_disk.queue_exists;
        // What `os` lost is gone for good; the next cut is checked for what came after.
        let lost: HashSet<Uuid> = cut.lost.iter().map(|(id, _)| *id).collect();
        known = cut
            .acks
            .iter()
            .filter(|(id, _)| !lost.contains(id))
            .cloned()
            .collect();
        cuts.push(cut);
        if done(&cuts) {
            break;
        }
        rig.remount();
        server = Server::start(&rig.layer_data(), durability, &rig.log()).await;
    }
    server.kill().await;
    cuts
}

fn torn(i: usize) -> TornWrites {
    if i % 2 == 1 {
        TornWrites::Random
    } else {
        TornWrites::None
    }
}

fn early_cut_delay(i: usize) -> Duration {
    let (low, high) = EARLY_CUT_WINDOWS_MS[i % EARLY_CUT_WINDOWS_MS.len()];
    Duration::from_millis(rand::random_range(low..high))
}

/// The acknowledgements a cut in early window `i` must come after.
fn early_min_acks(i: usize) -> usize {
    if i.is_multiple_of(EARLY_CUT_WINDOWS_MS.len()) {
        0
    } else {
        EARLY_MIN_ACKS
    }
}

fn cuts_per_case() -> usize {
    std::env::var(CUTS_VAR)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(CUTS_PER_CASE)
}

/// The test within [`TEST_TIMEOUT`], unless a longer run was asked for.
async fn bounded<T>(test: impl Future<Output = T>) -> T {
    if std::env::var_os(CUTS_VAR).is_some() || std::env::var_os(OS_CUTS_VAR).is_some() {
        return test.await;
    }
    tokio::time::timeout(TEST_TIMEOUT, test)
        .await
        .expect("the power-cut test ran over its time bound")
}

/// `count` cuts were made, and one of them dropped store writes made after an acknowledgement.
fn enough_cuts(cuts: &[Cut], count: usize) -> bool {
    cuts.len() >= count && cuts.iter().any(Cut::dropped_store_writes_after_first_ack)
}

/// Some cut dropped writes the server made to its store after it had acknowledged messages in
/// that run: the cuts came while acknowledged traffic was being written, not only in start-up
/// writes (any unsynced write, even the start-up's or the never-synced `-shm` index's, would
/// satisfy `dropped_anything`). With `fsync` those writes are of requests not yet answered;
/// what was answered must be on disk, which `assert_nothing_lost` checks.
fn assert_some_cut_dropped_state(cuts: &[Cut]) {
    assert!(
        cuts.iter().any(Cut::dropped_store_writes_after_first_ack),
        "no cut dropped a store write made after its run's first acknowledgement:\n{}",
        cuts.iter().map(Cut::summary).collect::<Vec<_>>().join("\n")
    );
}

// ---- the layer -----------------------------------------------------------------------------

/// A backing directory, the layer mounted over it, and the server's log.
struct Rig {
    /// Declared first so it is dropped (cleanly unmounted) before the directories are removed.
    mounted: Option<Mounted>,
    root: TempDir,
}

impl Rig {
    /// `None` (the test is skipped) when FUSE cannot be mounted here, unless `CI` is set.
    fn new() -> Option<Rig> {
        let root = tempfile::Builder::new()
            .prefix("sluice-power-cut-")
            .tempdir()
            .expect("temp dir");
        std::fs::create_dir(root.path().join("backing")).expect("backing dir");
        std::fs::create_dir(root.path().join("mnt")).expect("mount point");
        match FaultFs::mount(&root.path().join("backing"), &root.path().join("mnt")) {
            Ok(mounted) => Some(Rig {
                root,
                mounted: Some(mounted),
            }),
            Err(error) if std::env::var_os("CI").is_none() => {
                eprintln!("skipped: FUSE cannot be mounted here ({error})");
                None
            }
            Err(error) => panic!("FUSE cannot be mounted, and CI is set: {error}"),
        }
    }

    fn backing_data(&self) -> PathBuf {
        self.root.path().join("backing/data")
    }

    fn layer_data(&self) -> PathBuf {
        self.root.path().join("mnt/data")
    }

    fn log(&self) -> PathBuf {
        self.root.path().join("server.log")
    }

    /// Unmounts cleanly (nothing pending is lost) and mounts again.
    fn remount(&mut self) {
        if let Some(mounted) = self.mounted.take() {
            mounted.unmount().expect("clean unmount");
        }
        self.mount();
    }

    fn mount(&mut self) {
        let mounted = FaultFs::mount(
            &self.root.path().join("backing"),
            &self.root.path().join("mnt"),
        )
        .expect("mount the layer again");
        self.mounted = Some(mounted);
    }

    /// The power cut: SIGKILL, drop what was not synced, then check the disk.
    async fn cut(&mut self, server: &mut Server, run: Run, torn: TornWrites, name: String) -> Cut {
        let cut_at = Instant::now();
        server.kill().await;
        let report = self
            .mounted
            .take()
            .expect("mounted")
            .power_cut(torn)
            .unwrap_or_else(|error| panic!("{name}: unmount at the power cut: {error}"));
        let produced = run.stop().await;
        produced.assert_no_failure_before(cut_at, "the cut", &name);
        let on_disk = read_store(&self.backing_data());
        let lost = produced
            .acks
            .iter()
            .filter(|(id, _)| !on_disk.ids.contains(id))
            .cloned()
            .collect();
        let cut = Cut {
            name,
            cut_at,
            report,
            queue_created: produced.queue_created,
            own_acks: produced.own_acks,
            first_own_ack: produced.first_own_ack,
            acks: produced.acks,
            lost,
            on_disk,
            log: sluice_testkit::server::tail(&self.log(), 30),
        };
        println!("{}", cut.summary());
        cut
    }

    /// After a cut: `sluice serve` starts on the backing directory as the disk left it, and
    /// serves the queue.
    async fn check_restart(&mut self, durability: &str) {
        let mut server = Server::start(&self.backing_data(), durability, &self.log()).await;
        let client = reqwest::Client::new();
        let response = client
            .get(format!("{}/v1/queues", server.url))
            .send()
            .await
            .expect("list queues after the restart");
        assert!(
            response.status().is_success(),
            "GET /v1/queues: {}",
            response.status()
        );
        server.kill().await;
    }
}

/// What the disk held after one cut, against what was acknowledged.
struct Cut {
    name: String,
    cut_at: Instant,
    report: CutReport,
    queue_created: bool,
    /// Messages acknowledged by the run this cut ended (not counting earlier runs').
    own_acks: usize,
    /// When that run's first acknowledgement came.
    first_own_ack: Option<Instant>,
    /// Every message acknowledged so far (that was not lost at an earlier cut), with the time
    /// of its answer.
    acks: Vec<(Uuid, Instant)>,
    lost: Vec<(Uuid, Instant)>,
    on_disk: OnDisk,
    log: String,
}

impl Cut {
    /// How long before the cut the earliest lost acknowledgement came.
    fn loss_window_ms(&self) -> u64 {
        self.lost
            .iter()
            .map(|(_, at)| self.cut_at.saturating_duration_since(*at).as_millis() as u64)
            .max()
            .unwrap_or(0)
    }

    /// Whether the cut dropped writes to the store's files that came after the run's first
    /// acknowledgement.
    fn dropped_store_writes_after_first_ack(&self) -> bool {
        let Some(first_ack) = self.first_own_ack else {
            return false;
        };
        self.report.dropped_files.iter().any(|file: &DroppedFile| {
            let is_store = file.path.as_ref().is_some_and(|path| {
                path.parent() == Some(Path::new("data"))
                    && path
                        .file_name()
                        .is_some_and(|name| STORE_FILES.iter().any(|store| name == *store))
            });
            is_store && file.last_change.is_some_and(|at| at > first_ack)
        })
    }

    fn dropped_files(&self) -> String {
        let files: Vec<String> = self
            .report
            .dropped_files
            .iter()
            .map(|file| {
                let before = file.last_change.map_or("-".to_owned(), |at| {
                    format!("{}", self.cut_at.saturating_duration_since(at).as_millis())
                });
                let after_first_ack = match (file.last_change, self.first_own_ack) {
                    (Some(at), Some(first)) if at > first => " (after the first ack)",
                    _ => "",
                };
                format!(
                    "{} {} B, last written {before} ms before the cut{after_first_ack}",
                    file.path
                        .as_ref()
                        .map_or("(unnamed)".to_owned(), |path| path.display().to_string()),
                    file.unsynced_bytes
                )
            })
            .collect();
        files.join("; ")
    }

    fn summary(&self) -> String {
        format!(
            "{}: {} acknowledged ({} in this run), {} on disk, {} lost ({} ms of acknowledgements); queue created {} / on disk {}; \
             integrity {:?}; dropped {} files ({} unsynced directories, {} torn sectors written): {}",
            self.name,
            self.acks.len(),
            self.own_acks,
            self.on_disk.ids.len(),
            self.lost.len(),
            self.loss_window_ms(),
            self.queue_created,
            self.on_disk.queue_exists,
            self.on_disk.integrity,
            self.report.files_with_unsynced_data,
            self.report.dirs_with_unsynced_entries,
            self.report.torn_sectors_written,
            self.dropped_files(),
        )
    }

    /// A cut before anything was acknowledged cannot lose an acknowledged message: the case
    /// would pass on a server that refuses or never answers every send.
    fn assert_acknowledged_at_least(&self, min: usize) {
        assert!(
            self.own_acks >= min,
            "{}: only {} messages acknowledged before the cut, at least {min} expected\n{}\nserver log:\n{}",
            self.name,
            self.own_acks,
            self.summary(),
            self.log
        );
    }

    fn assert_store_intact(&self) {
        assert_eq!(
            self.on_disk.integrity,
            "ok",
            "{}: the store is damaged\n{}\nserver log:\n{}",
            self.name,
            self.summary(),
            self.log
        );
    }

    fn assert_nothing_lost(&self) {
        self.assert_store_intact();
        assert!(
            self.lost.is_empty() && (!self.queue_created || self.on_disk.queue_exists),
            "{}: acknowledged state was lost at the power cut\n{}\nfirst lost: {:?}\nserver log:\n{}",
            self.name,
            self.summary(),
            self.lost.first().map(|(id, _)| id),
            self.log
        );
    }
}

/// The store as the disk holds it.
struct OnDisk {
    /// `PRAGMA integrity_check`, or why the store could not be read.
    integrity: String,
    ids: HashSet<Uuid>,
    queue_exists: bool,
}

/// Opens a copy of the data directory's database and WAL (SQLite recovers the WAL into the
/// copy, as the server would at its start) and reads the queue's message ids.
fn read_store(data: &Path) -> OnDisk {
    let mut on_disk = OnDisk {
        integrity: String::new(),
        ids: HashSet::new(),
        queue_exists: false,
    };
    if !data.join("sluice.db").exists() {
        on_disk.integrity = "ok".to_owned();
        return on_disk;
    }
    let copy = tempfile::tempdir().expect("temp dir");
    for file in ["sluice.db", "sluice.db-wal"] {
        if data.join(file).exists() {
            std::fs::copy(data.join(file), copy.path().join(file)).expect("copy the store");
        }
    }
    let read = || -> rusqlite::Result<OnDisk> {
        let conn = rusqlite::Connection::open(copy.path().join("sluice.db"))?;
        let integrity: String = conn.query_row("PRAGMA integrity_check", [], |row| row.get(0))?;
        // A database that was never set up has no tables: nothing is on disk.
        let has_tables: bool = conn.query_row(
            "SELECT count(*) > 0 FROM sqlite_master WHERE name = 'messages'",
            [],
            |row| row.get(0),
        )?;
        if !has_tables {
            return Ok(OnDisk {
                integrity,
                ids: HashSet::new(),
                queue_exists: false,
            });
        }
        let queue_exists = conn.query_row(
            "SELECT count(*) > 0 FROM queues WHERE name = ?1",
            [QUEUE],
            |row| row.get(0),
        )?;
        let mut statement = conn.prepare("SELECT id FROM messages WHERE queue = ?1")?;
        let ids = statement
            .query_map([QUEUE], |row| row.get::<_, Vec<u8>>(0))?
            .map(|id| id.map(|bytes| Uuid::from_slice(&bytes).expect("16-byte id")))
            .collect::<rusqlite::Result<HashSet<Uuid>>>()?;
        Ok(OnDisk {
            integrity,
            ids,
            queue_exists,
        })
    };
    match read() {
        Ok(read) => on_disk = read,
        Err(error) => on_disk.integrity = format!("cannot read the store: {error}"),
    }
    on_disk
}

// ---- the server and its producers ------------------------------------------------------------

/// A `sluice serve` on the test's data directory and log (the test kit's [`Launch`]).
struct Server {
    server: sluice_testkit::server::Server,
    url: String,
    /// When it was ready (its `/readyz` answered 200).
    ready_at: Instant,
}

impl Server {
    async fn start(data: &Path, durability: &str, log: &Path) -> Server {
        let server = Launch::new(env!("CARGO_BIN_EXE_sluice"))
            .name("power-cut server")
            .data(data)
            .log(log)
            .args(["--durability", durability])
            .start()
            .await;
        Server {
            url: server.url().to_owned(),
            ready_at: Instant::now(),
            server,
        }
    }

    async fn kill(&mut self) {
        self.server.kill().await;
    }

    /// SIGTERM: the clean stop (the store checkpoints and closes).
    async fn terminate(&mut self) {
        let status = self.server.terminate().await;
        assert!(status.success(), "the clean stop exited with {status}");
    }
}

/// What earlier runs on the same data directory had acknowledged, carried into the next run so
/// its cut checks it too.
#[derive(Default)]
struct Earlier {
    acks: Vec<(Uuid, Instant)>,
    /// The queue exists (its creation was answered); the run creates it otherwise.
    queue_created: bool,
}

/// Producers sending to one server until it is gone.
struct Run {
    earlier: Earlier,
    /// This run's acknowledgements.
    acks: Arc<Mutex<Vec<(Uuid, Instant)>>>,
    queue_created: Arc<AtomicBool>,
    failed: Failed,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

/// The first request of a run that failed without an answer, and when that was seen. A killed
/// server fails requests, so this is only an error when it was seen before the cut.
type Failed = Arc<Mutex<Option<(Instant, String)>>>;

/// What a run's producers saw.
struct Produced {
    /// The earlier runs' acknowledgements and this run's.
    acks: Vec<(Uuid, Instant)>,
    own_acks: usize,
    first_own_ack: Option<Instant>,
    queue_created: bool,
    failed: Option<(Instant, String)>,
}

impl Produced {
    /// A request that failed before `at` (the kill, or now while the server is still up) failed
    /// for another reason than the power cut: the producers stopped early, and whatever the
    /// test then finds would not be what it claims to check. `at_is` names the moment.
    fn assert_no_failure_before(&self, at: Instant, at_is: &str, name: &str) {
        if let Some((seen, what)) = &self.failed {
            assert!(
                *seen >= at,
                "{name}: a request failed {} ms before {at_is}: {what}",
                at.saturating_duration_since(*seen).as_millis()
            );
        }
    }
}

/// Awaits a task and fails the test with its panic, if it panicked.
async fn join(task: tokio::task::JoinHandle<()>) {
    match task.await {
        Ok(()) => {}
        Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
        Err(error) => panic!("a producer task did not finish: {error}"),
    }
}

fn record_failure(failed: &Failed, what: String) {
    failed
        .lock()
        .unwrap()
        .get_or_insert_with(|| (Instant::now(), what));
}

impl Run {
    /// Creates the queue first unless `earlier` says it exists, then starts the producers.
    fn start(server: &Server, earlier: Earlier) -> Run {
        let acks = Arc::new(Mutex::new(Vec::new()));
        let queue_created = Arc::new(AtomicBool::new(earlier.queue_created));
        let failed: Failed = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let url = server.url.clone();
        let create_queue = !earlier.queue_created;
        let task = tokio::spawn({
            let (acks, queue_created, failed, stop) = (
                acks.clone(),
                queue_created.clone(),
                failed.clone(),
                stop.clone(),
            );
            async move {
                let client = reqwest::Client::builder()
                    .timeout(Duration::from_secs(10))
                    .build()
                    .expect("client");
                if create_queue {
                    match client
                        .put(format!("{url}/v1/queues/{QUEUE}"))
                        .json(&json!({}))
                        .send()
                        .await
                    {
                        Ok(response) if response.status().is_success() => {
                            queue_created.store(true, Ordering::SeqCst)
                        }
                        Ok(response) => {
                            let status = response.status();
                            let body = response.text().await.unwrap_or_default();
                            panic!("PUT /v1/queues/{QUEUE} answered {status}: {body}");
                        }
                        Err(error) => {
                            record_failure(&failed, format!("PUT /v1/queues/{QUEUE}: {error}"));
                            return;
                        }
                    }
                }
                let producers: Vec<_> = (0..PRODUCERS)
                    .map(|_| {
                        tokio::spawn(produce(
                            client.clone(),
                            url.clone(),
                            acks.clone(),
                            failed.clone(),
                            stop.clone(),
                        ))
                    })
                    .collect();
                for producer in producers {
                    join(producer).await;
                }
            }
        });
        Run {
            earlier,
            acks,
            queue_created,
            failed,
            stop,
            task,
        }
    }

    /// Stops the producers and waits for them; a producer's panic fails the test here.
    async fn stop(self) -> Produced {
        self.stop.store(true, Ordering::SeqCst);
        join(self.task).await;
        let own = std::mem::take(&mut *self.acks.lock().unwrap());
        let first_own_ack = own.iter().map(|(_, at)| *at).min();
        let own_acks = own.len();
        let mut acks = self.earlier.acks;
        acks.extend(own);
        Produced {
            acks,
            own_acks,
            first_own_ack,
            queue_created: self.queue_created.load(Ordering::SeqCst),
            failed: self.failed.lock().unwrap().take(),
        }
    }
}

/// Sends single messages and batches of up to 20 until stopped, the bound is reached or a
/// request fails without an answer (the server is gone); records the id of every message
/// answered 2xx. Any other answer, or a 2xx without the ids, panics: the server is wrong.
async fn produce(
    client: reqwest::Client,
    url: String,
    acks: Arc<Mutex<Vec<(Uuid, Instant)>>>,
    failed: Failed,
    stop: Arc<AtomicBool>,
) {
    let endpoint = format!("{url}/v1/queues/{QUEUE}/messages");
    let mut sent = 0;
    while sent < MESSAGES_PER_PRODUCER && !stop.load(Ordering::SeqCst) {
        let size = rand::random_range(1..=20usize);
        let request = if size == 1 {
            json!({"body": {"n": sent}})
        } else {
            json!({"messages": (0..size).map(|i| json!({"body": {"n": sent + i}})).collect::<Vec<_>>()})
        };
        let response = match client.post(&endpoint).json(&request).send().await {
            Ok(response) => response,
            Err(error) => return record_failure(&failed, format!("a send: {error}")),
        };
        let status = response.status();
        // A body cut off by the kill is a failed request, not a wrong answer; its messages may
        // be stored but are not counted as acknowledged (their ids are unknown).
        let body = match response.bytes().await {
            Ok(body) => body,
            Err(error) => {
                return record_failure(
                    &failed,
                    format!("the answer ({status}) to a send: {error}"),
                );
            }
        };
        assert!(
            status.is_success(),
            "a send of {size} was answered {status}: {}",
            String::from_utf8_lossy(&body)
        );
        let answer: Value = serde_json::from_slice(&body).unwrap_or_else(|error| {
            panic!(
                "a {status} answer to a send of {size} is not JSON ({error}): {}",
                String::from_utf8_lossy(&body)
            )
        });
        let answered_at = Instant::now();
        let ids: Vec<Uuid> = if size == 1 {
            vec![message_id(&answer)]
        } else {
            answer["results"]
                .as_array()
                .unwrap_or_else(|| panic!("no results in a {status} answer: {answer}"))
                .iter()
                .map(message_id)
                .collect()
        };
        assert_eq!(
            ids.len(),
            size,
            "a 2xx answer for {size} messages: {answer}"
        );
        acks.lock()
            .unwrap()
            .extend(ids.into_iter().map(|id| (id, answered_at)));
        sent += size;
    }
}

fn message_id(answer: &Value) -> Uuid {
    answer["message_id"]
        .as_str()
        .and_then(|id| id.parse().ok())
        .unwrap_or_else(|| panic!("no message_id in {answer}"))
}
