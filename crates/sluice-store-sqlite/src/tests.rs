//! The store against a real SQLite file: what survives a reopen, and the paths that read
//! bodies back from disk.

use std::sync::Arc;

use sluice_core::message::{MessageState, MessageStatus, NewMessage, Payload};
use sluice_core::queue::QueueConfig;
use sluice_core::store::*;
use sluice_core::{Millis, Store};

use super::{SharedSqliteStore, SqliteOptions};

const T0: Millis = 1_700_000_000_000;

fn open(dir: &std::path::Path, payload_cache_bytes: usize) -> SharedSqliteStore {
    let mut options = SqliteOptions::new(dir);
    options.payload_cache_bytes = payload_cache_bytes;
    SharedSqliteStore::open(options, T0).unwrap()
}

fn message(body: &str, id: Option<&str>) -> NewMessage {
    NewMessage {
        idempotency_key: id.map(str::to_owned),
        payload: Arc::new(Payload {
            body_bytes: body.as_bytes().to_vec(),
            body_kind: sluice_core::message::BodyKind::Json,
            headers: [("h".to_owned(), "v".to_owned())].into(),
        }),
        key: None,
        priority: 0,
        visible_at_ms: T0,
        dead_letter: None,
    }
}

async fn create_queue(store: &SharedSqliteStore, name: &str) {
    let mut config = QueueConfig::defaults_for(name);
    config.max_attempts = 2;
    store
        .queue_put(QueuePutParams {
            name: name.into(),
            config,
            now_ms: T0,
        })
        .await
        .unwrap();
}

async fn enqueue(store: &SharedSqliteStore, messages: Vec<NewMessage>) -> Vec<Enqueued> {
    store
        .message_enqueue(EnqueueParams {
            queue: "q".into(),
            messages,
            now_ms: T0,
        })
        .await
        .unwrap()
}

async fn claim(store: &SharedSqliteStore, now_ms: Millis) -> Claim {
    store
        .message_claim(ClaimParams {
            lane_runs: false,
            queue: "q".into(),
            max: 10,
            lease_ms: Some(1_000),
            now_ms,
        })
        .await
        .unwrap()
}

#[tokio::test]
async fn messages_queues_and_attempts_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), 64 << 20);
    create_queue(&store, "q").await;
    let ids = enqueue(
        &store,
        vec![message("1", None), message("2", None), message("3", None)],
    )
    .await;
    let first = claim(&store, T0).await;
    assert_eq!(first.messages.len(), 3);
    let acked = store
        .message_ack(AckParams {
            result: None,
            queue: "q".into(),
            receipts: vec![first.messages[0].receipt],
            delivery: None,
            now_ms: T0,
        })
        .await
        .unwrap();
    assert!(acked[0].is_ok());
    store.close().await.unwrap();

    // Bodies now come from disk: the reopened store caches nothing it did not enqueue itself.
    let store = open(dir.path(), 64 << 20);
    let queue = store.queue_get("q", T0).await.unwrap();
    assert_eq!(queue.config.max_attempts, 2);
    assert_eq!(queue.dead_letter_depth, Some(0));
    let again = claim(&store, T0 + 10).await;
    let bodies: Vec<_> = again
        .messages
        .iter()
        .map(|m| String::from_utf8(m.payload.body_bytes.clone()).unwrap())
        .collect();
    assert_eq!(
        bodies,
        ["2", "3"],
        "the in-flight leases came back, the acked message did not"
    );
    assert!(
        again.messages.iter().all(|m| m.attempts == 2),
        "the interrupted delivery counted as an attempt"
    );
    assert_eq!(again.messages[0].payload.headers["h"], "v");
    let status = store
        .message_get(MessageGetParams {
            queue: "q".into(),
            by: MessageRef::Id(ids[0].message_id),
            now_ms: T0,
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.state, MessageState::Acked);
}

#[tokio::test]
async fn idempotency_keys_hold_across_a_reopen_and_within_a_batch() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), 0);
    create_queue(&store, "q").await;
    let first = enqueue(
        &store,
        vec![message("a", Some("k")), message("b", Some("k"))],
    )
    .await;
    assert!(first[0].created && !first[1].created);
    assert_eq!(first[0].message_id, first[1].message_id);
    store.close().await.unwrap();
    let store = open(dir.path(), 0);
    let again = enqueue(&store, vec![message("c", Some("k"))]).await;
    assert_eq!(
        again[0],
        Enqueued {
            message_id: first[0].message_id,
            created: false,
            position: 0,
        }
    );
    let by_key = store
        .message_get(MessageGetParams {
            queue: "q".into(),
            by: MessageRef::IdempotencyKey("k".into()),
            now_ms: T0,
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(by_key.message_id, first[0].message_id);
    let claimed = claim(&store, T0).await;
    assert_eq!(claimed.messages.len(), 1);
    assert_eq!(claimed.messages[0].payload.body_bytes, b"a");
}

#[tokio::test]
async fn dead_letters_keep_their_metadata_across_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), 64 << 20);
    create_queue(&store, "q").await;
    let ids = enqueue(&store, vec![message("x", None)]).await;
    let leased = claim(&store, T0).await.messages.remove(0);
    let nack = NackParams {
        queue: "q".into(),
        receipt: leased.receipt,
        error: Some("boom".into()),
        delay_ms: None,
        permanent: true,
        delivery: None,
        now_ms: T0 + 5,
    };
    store.message_nack(nack).await.unwrap();
    store.close().await.unwrap();
    let store = open(dir.path(), 64 << 20);
    let status = store
        .message_get(MessageGetParams {
            queue: "q".into(),
            by: MessageRef::Id(ids[0].message_id),
            now_ms: T0,
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (status.state, status.queue.as_str()),
        (MessageState::Dead, "q.dlq")
    );
    let info = status.dead_letter.unwrap();
    assert_eq!(
        (
            info.source_queue.as_str(),
            info.last_error.as_deref(),
            info.attempts
        ),
        ("q", Some("boom"), 1)
    );
    assert_eq!(
        store.queue_get("q", T0).await.unwrap().dead_letter_depth,
        Some(1)
    );
}

#[tokio::test]
async fn deleting_a_dead_letter_queue_in_use_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), 0);
    create_queue(&store, "q").await;
    assert!(matches!(
        store.queue_delete("q.dlq").await,
        Err(StoreError::Conflict(_))
    ));
    assert_eq!(store.queue_delete("q").await.unwrap(), 0);
    assert_eq!(store.queue_delete("q.dlq").await.unwrap(), 0);
    assert!(store.queue_list(T0).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_clean_close_leaves_no_wal_behind() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), 0);
    create_queue(&store, "q").await;
    let messages = (0..2_000).map(|i| message(&i.to_string(), None)).collect();
    enqueue(&store, messages).await;
    store.close().await.unwrap();
    let wal = dir.path().join("sluice.db-wal");
    let wal_bytes = std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
    assert_eq!(wal_bytes, 0, "the final checkpoint should empty the WAL");
}

/// With durability "os" nothing waits for a sync, and what was committed is still there after a
/// reopen (the process ended cleanly; the kernel kept the writes).
#[tokio::test]
async fn durability_os_stores_and_reloads_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = SqliteOptions::new(dir.path());
    options.durability = super::Durability::Os;
    let store = SharedSqliteStore::open(options.clone(), T0).unwrap();
    create_queue(&store, "q").await;
    let ids = enqueue(&store, vec![message("1", None), message("2", Some("k"))]).await;
    assert_eq!(claim(&store, T0).await.messages.len(), 2);
    store.close().await.unwrap();
    let store = SharedSqliteStore::open(options, T0).unwrap();
    let again = enqueue(&store, vec![message("3", Some("k"))]).await;
    assert_eq!(
        again[0],
        Enqueued {
            message_id: ids[1].message_id,
            created: false,
            position: 0,
        }
    );
    assert_eq!(claim(&store, T0).await.messages.len(), 2);
}

/// A deleted queue's rows go in chunks; none of them come back, not even into a new queue of the
/// same name, and rows left by a deletion a crash interrupted are removed at the next start.
#[tokio::test]
async fn a_deleted_queue_stays_deleted_across_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), 0);
    create_queue(&store, "q").await;
    for _ in 0..3 {
        let batch = (0..9_000).map(|i| message(&i.to_string(), None)).collect();
        enqueue(&store, batch).await;
    }
    assert_eq!(store.queue_delete("q").await.unwrap(), 27_000);
    create_queue(&store, "q").await;
    enqueue(&store, vec![message("new", None)]).await;
    store.close().await.unwrap();

    let store = open(dir.path(), 0);
    let queue = store.queue_get("q", T0).await.unwrap();
    assert_eq!(queue.depth.ready, 1, "only the new queue's message");
    create_queue(&store, "other").await;
    store
        .message_enqueue(EnqueueParams {
            queue: "other".into(),
            messages: vec![message("o", None)],
            now_ms: T0,
        })
        .await
        .unwrap();
    store.close().await.unwrap();

    // Simulate a crash after the queue row went but before its rows did.
    let conn = rusqlite::Connection::open(dir.path().join("sluice.db")).unwrap();
    conn.execute("DELETE FROM queues WHERE name = 'other'", [])
        .unwrap();
    drop(conn);
    let store = open(dir.path(), 0);
    create_queue(&store, "other").await;
    assert_eq!(
        store.queue_get("other", T0).await.unwrap().depth.ready,
        0,
        "orphaned rows were removed at start"
    );
    store.close().await.unwrap();
}

async fn status(store: &SharedSqliteStore, id: uuid::Uuid) -> Option<MessageStatus> {
    store
        .message_get(MessageGetParams {
            queue: "q".into(),
            by: MessageRef::Id(id),
            now_ms: T0,
        })
        .await
        .unwrap()
}

#[tokio::test]
async fn lifecycle_operations_hold_across_a_reopen() {
    // Cancel, purge, retention, pause and replay each change the durable record: after a
    // reopen nothing cancelled, purged or expired comes back, the queue is still paused, and a
    // replayed dead letter is a live message while its entry records the replay.
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), 0);
    let mut config = QueueConfig::defaults_for("q");
    config.max_age_ms = 60_000;
    store
        .queue_put(QueuePutParams {
            name: "q".into(),
            config,
            now_ms: T0,
        })
        .await
        .unwrap();
    let ids: Vec<_> = enqueue(
        &store,
        (0..4).map(|n| message(&n.to_string(), None)).collect(),
    )
    .await
    .into_iter()
    .map(|e| e.message_id)
    .collect();
    // [0] dead-lettered then replayed, [1] cancelled, [2] and [3] left for purge and expiry.
    let leased = claim(&store, T0).await;
    let first = leased
        .messages
        .iter()
        .find(|m| m.message_id == ids[0])
        .unwrap();
    store
        .message_nack(NackParams {
            queue: "q".into(),
            receipt: first.receipt,
            error: Some("boom".into()),
            delay_ms: None,
            permanent: true,
            delivery: None,
            now_ms: T0,
        })
        .await
        .unwrap();
    let others: Vec<_> = leased
        .messages
        .iter()
        .filter(|m| m.message_id != ids[0])
        .map(|m| m.receipt)
        .collect();
    for receipt in others {
        store
            .message_extend(ExtendParams {
                queue: "q".into(),
                receipt,
                timeout_ms: 0,
                now_ms: T0,
            })
            .await
            .unwrap();
    }
    store.maintain(T0 + 1).await.unwrap();
    let cancelled = store
        .message_cancel(
            MessageGetParams {
                queue: "q".into(),
                by: MessageRef::Id(ids[1]),
                now_ms: T0 + 1,
            },
            None,
        )
        .await
        .unwrap();
    assert_eq!(cancelled, CancelOutcome::Cancelled { message_id: ids[1] });
    let replay = store
        .dead_letter_replay(ReplayParams {
            queue: "q".into(),
            selection: DeadLetterSelection::Ids(vec![ids[0]]),
            limit: 10,
            dry_run: false,
            target_queue: None,
            now_ms: T0 + 2,
        })
        .await
        .unwrap();
    assert_eq!(replay.replayed.len(), 1);
    let (_, replayed_as) = replay.replayed[0];
    store.queue_pause("q", true).await.unwrap();
    // Retention: [2] and [3] are older than a minute; the replay is not.
    store.maintain(T0 + 60_001).await.unwrap();
    store.close().await.unwrap();

    let store = open(dir.path(), 0);
    let info = store.queue_get("q", T0 + 60_001).await.unwrap();
    assert!(info.depth.paused, "the pause is stored");
    // Reopened at T0, before the replay's time: it waits as delayed until then.
    assert_eq!(
        info.depth.ready + info.depth.delayed,
        1,
        "only the replayed message is live"
    );
    assert_eq!(info.dead_letter_depth, Some(0));
    let state = |status: Option<MessageStatus>| status.map(|s| s.state);
    assert_eq!(
        state(status(&store, ids[1]).await),
        Some(MessageState::Cancelled)
    );
    assert_eq!(
        state(status(&store, ids[2]).await),
        Some(MessageState::Expired)
    );
    assert_eq!(
        state(status(&store, ids[3]).await),
        Some(MessageState::Expired)
    );
    let dead = store.dead_letter_get("q", ids[0]).await.unwrap().unwrap();
    assert_eq!(dead.status.state, MessageState::Replayed);
    assert_eq!(dead.status.replayed_as, Some(replayed_as));
    assert_eq!(
        dead.payload.unwrap().body_bytes,
        b"0",
        "a replayed entry keeps its body"
    );
    let live = status(&store, replayed_as).await.unwrap();
    assert_eq!(live.state, MessageState::Delayed, "until the replay's time");
    assert_eq!(live.attempts, 0);
    // Paused: nothing is delivered until resumed.
    assert!(claim(&store, T0 + 60_001).await.messages.is_empty());
    store.queue_pause("q", false).await.unwrap();
    let claimed = claim(&store, T0 + 60_001).await;
    assert_eq!(claimed.messages.len(), 1);
    assert_eq!(
        &*claimed.messages[0].payload.body_bytes, b"0",
        "the body was copied on disk"
    );
    store.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_definitions_and_deletions_leave_memory_and_disk_agreeing() {
    // A queue redefined and deleted at the same moment must end the same way in memory and on
    // disk: a queue that exists only in memory would take enqueues whose rows the next start
    // removes as orphans. Each round races a redefinition against a deletion, enqueues when
    // the queue survived, and the reopened store must agree on every queue.
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), 64 << 20);
    let mut survivors = Vec::new();
    for round in 0..60 {
        let name = format!("race-{round}");
        create_queue(&store, &name).await;
        let mut changed = QueueConfig::defaults_for(&name);
        changed.max_attempts = 7;
        let redefine = {
            let store = store.clone();
            let name = name.clone();
            tokio::spawn(async move {
                store
                    .queue_put(QueuePutParams {
                        name,
                        config: changed,
                        now_ms: T0,
                    })
                    .await
            })
        };
        let delete = {
            let store = store.clone();
            let name = name.clone();
            tokio::spawn(async move { store.queue_delete(&name).await })
        };
        redefine.await.unwrap().unwrap();
        let _ = delete.await.unwrap();
        if store.queue_config(&name).await.is_ok() {
            store
                .message_enqueue(EnqueueParams {
                    queue: name.clone(),
                    messages: vec![message("kept", None)],
                    now_ms: T0,
                })
                .await
                .unwrap();
            survivors.push(name);
        }
    }
    let before = race_queues(&store).await;
    store.close().await.unwrap();
    drop(store);

    let store = open(dir.path(), 64 << 20);
    let after = race_queues(&store).await;
    assert_eq!(
        after, before,
        "the queues in memory were not the queues on disk"
    );
    for name in &survivors {
        let stats = store.queue_get(name, T0).await.unwrap();
        assert_eq!(stats.depth.ready, 1, "{name} lost its message");
        assert_eq!(
            stats.config.max_attempts, 7,
            "{name} kept an old definition"
        );
    }
}

/// The names of the queues the race test made.
async fn race_queues(store: &SharedSqliteStore) -> Vec<String> {
    store
        .queue_list(T0)
        .await
        .unwrap()
        .into_iter()
        .map(|info| info.name)
        .filter(|name| name.starts_with("race-"))
        .collect()
}

/// Message bodies are private: the data directory is 0700 and every file in it 0600, also when
/// the directory existed before with the umask's laxer modes.
#[tokio::test]
async fn the_data_dir_and_every_file_in_it_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("data");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let store = open(&dir, 0);
    create_queue(&store, "q").await;
    enqueue(&store, vec![message("secret", None)]).await;
    let mode =
        |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700);
    let mut names = Vec::new();
    for file in std::fs::read_dir(&dir).unwrap() {
        let path = file.unwrap().path();
        names.push(path.file_name().unwrap().to_string_lossy().into_owned());
        assert_eq!(mode(&path), 0o600, "{}", path.display());
    }
    names.sort();
    assert!(
        ["sluice.db", "sluice.db-shm", "sluice.db-wal"]
            .iter()
            .all(|name| names.iter().any(|n| n == name)),
        "{names:?}"
    );
    store.close().await.unwrap();
}

/// A long write load with readers holding snapshots the whole time: passive checkpoints alone
/// never let SQLite rewind the WAL then, so it grew for as long as the load lasted. With a
/// limit, it stays under the limit plus what one group adds before the truncating checkpoint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wal_stays_under_its_limit_under_load_with_readers_holding_snapshots() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::time::{Duration, Instant};
    const LIMIT: u64 = 1 << 20;
    /// What a group of this load (4 producers' batches of 20 KB of bodies, acks) writes at most.
    const GROUP_SLACK: u64 = 1 << 20;
    /// The load: 16 MB of bodies (16 times the limit), unless it takes longer than 30 s.
    const BATCHES: usize = 800;
    const LOAD_FOR_MAX: Duration = Duration::from_secs(30);

    let dir = tempfile::tempdir().unwrap();
    let mut options = SqliteOptions::new(dir.path());
    options.payload_cache_bytes = 0;
    options.max_wal_bytes = LIMIT;
    options.disk_reserve_bytes = 0;
    let store = SharedSqliteStore::open(options, T0).unwrap();
    create_queue(&store, "q").await;
    let stop = Arc::new(AtomicBool::new(false));
    let wal = dir.path().join("sluice.db-wal");

    // Readers: each holds a read transaction (a snapshot) for 20 ms, over and over, staggered
    // so one is always open.
    let readers: Vec<_> = (0..3)
        .map(|i| {
            let (db, stop) = (store.0.db_path().to_owned(), stop.clone());
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(7 * i));
                let conn = rusqlite::Connection::open_with_flags(
                    db,
                    rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
                )
                .unwrap();
                let mut snapshots = 0u64;
                while !stop.load(Ordering::SeqCst) {
                    conn.execute_batch("BEGIN").unwrap();
                    let _: i64 = conn
                        .query_row("SELECT count(*) FROM queues", [], |row| row.get(0))
                        .unwrap();
                    std::thread::sleep(Duration::from_millis(20));
                    conn.execute_batch("COMMIT").unwrap();
                    snapshots += 1;
                }
                snapshots
            })
        })
        .collect();
    let largest = Arc::new(AtomicU64::new(0));
    let sampler = {
        let (wal, stop, largest) = (wal.clone(), stop.clone(), largest.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                let bytes = std::fs::metadata(&wal).map_or(0, |m| m.len());
                largest.fetch_max(bytes, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };

    let started = Instant::now();
    let body = "x".repeat(1_000);
    let producers: Vec<_> = (0..4)
        .map(|_| {
            let (store, body) = (store.clone(), body.clone());
            tokio::spawn(async move {
                let mut batches = 0;
                while started.elapsed() < LOAD_FOR_MAX && batches < BATCHES / 4 {
                    let messages = (0..20).map(|_| message(&body, None)).collect();
                    enqueue(&store, messages).await;
                    let claimed = claim(&store, T0).await;
                    store
                        .message_ack(AckParams {
                            result: None,
                            queue: "q".into(),
                            receipts: claimed.messages.iter().map(|m| m.receipt).collect(),
                            delivery: None,
                            now_ms: T0,
                        })
                        .await
                        .unwrap();
                    batches += 1;
                }
                batches
            })
        })
        .collect();
    let mut batches = 0;
    for producer in producers {
        batches += producer.await.unwrap();
    }
    stop.store(true, Ordering::SeqCst);
    sampler.join().unwrap();
    let snapshots: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
    let written = batches as u64 * 20 * 1_000;
    let largest = largest.load(Ordering::SeqCst);
    assert!(
        written > 4 * (LIMIT + GROUP_SLACK),
        "the load wrote only {written} bytes of bodies: too little to show anything"
    );
    assert!(snapshots > 10, "readers held {snapshots} snapshots");
    assert!(
        largest <= LIMIT + GROUP_SLACK,
        "the WAL reached {largest} bytes with a limit of {LIMIT} ({written} bytes of bodies written)"
    );
    let metrics = store.storage_metrics();
    assert!(
        metrics.value("sluice_storage_wal_truncations").unwrap() > 0.0,
        "{metrics:?}"
    );
    store.close().await.unwrap();
}

/// A data directory of the version that kept push pauses in the server's `push-paused.json`:
/// the store marks the named queues it has when it opens, deletes the file, and keeps the
/// pauses from then on in the database. A name without a queue is dropped; an unreadable file
/// stops the open (nothing an operator paused resumes by accident).
#[tokio::test]
async fn an_old_push_paused_file_is_carried_over_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), 0);
    create_queue(&store, "held").await;
    create_queue(&store, "other").await;
    store.close().await.unwrap();
    drop(store);
    let file = dir.path().join(super::push_pauses::LEGACY_FILE);
    std::fs::write(&file, r#"["held","gone"]"#).unwrap();

    let paused = |store: SharedSqliteStore| async move {
        let mut names: Vec<String> = store
            .queue_list(T0)
            .await
            .unwrap()
            .into_iter()
            .filter(|info| info.is_push_paused)
            .map(|info| info.name)
            .collect();
        names.sort();
        store.close().await.unwrap();
        names
    };
    assert_eq!(paused(open(dir.path(), 0)).await, ["held"]);
    assert!(!file.exists(), "the file is deleted once carried over");
    assert_eq!(
        paused(open(dir.path(), 0)).await,
        ["held"],
        "kept in the database"
    );

    std::fs::write(&file, "{").unwrap();
    let error = SharedSqliteStore::open(SqliteOptions::new(dir.path()), T0).unwrap_err();
    assert!(error.to_string().contains("push-paused.json"), "{error}");
    assert!(file.exists(), "an unreadable file is left for the operator");
}

/// A kept acked row outlives the store's retention of acked records while its keep lasts;
/// when the keep ends the upkeep drops its body first, and the row goes once it is past the
/// retention of acked records too. The cleanup of other acked rows is not held up by it.
#[tokio::test]
async fn the_upkeep_drops_a_kept_body_when_its_keep_ends_and_not_before() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = SqliteOptions::new(dir.path());
    options.acked_retention_ms = 1_000;
    let store = SharedSqliteStore::open(options, T0).unwrap();
    for (name, keep_acked_ms) in [("q", 60_000), ("plain", 0)] {
        let mut config = QueueConfig::defaults_for(name);
        config.keep_acked_ms = keep_acked_ms;
        store
            .queue_put(QueuePutParams {
                name: name.into(),
                config,
                now_ms: T0,
            })
            .await
            .unwrap();
    }
    for queue in ["q", "plain"] {
        store
            .message_enqueue(EnqueueParams {
                queue: queue.into(),
                messages: vec![message("{\"a\":1}", None)],
                now_ms: T0,
            })
            .await
            .unwrap();
        let receipts = store
            .message_claim(ClaimParams {
                lane_runs: false,
                queue: queue.into(),
                max: 1,
                lease_ms: None,
                now_ms: T0,
            })
            .await
            .unwrap()
            .messages
            .into_iter()
            .map(|m| m.receipt)
            .collect();
        store
            .message_ack(AckParams {
                queue: queue.into(),
                receipts,
                result: None,
                delivery: None,
                now_ms: T0,
            })
            .await
            .unwrap();
    }
    // (queue, has a body, kept_until) of every row, as the file holds them.
    let rows = || {
        let conn = rusqlite::Connection::open(dir.path().join("sluice.db")).unwrap();
        let mut statement = conn
            .prepare("SELECT queue, body IS NOT NULL, kept_until FROM messages ORDER BY seq")
            .unwrap();
        statement
            .query_map([], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, bool>(1)?,
                    row.get::<_, Option<i64>>(2)?,
                ))
            })
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap()
    };
    assert_eq!(
        rows(),
        [
            ("q".to_owned(), true, Some(T0 + 60_000)),
            ("plain".to_owned(), false, None)
        ]
    );
    store.maintain(T0 + 30_000).await.unwrap();
    store.0.flush().await.unwrap();
    assert_eq!(
        rows(),
        [("q".to_owned(), true, Some(T0 + 60_000))],
        "past the acked retention, only the kept row is left, whole"
    );
    store.maintain(T0 + 60_000).await.unwrap();
    store.0.flush().await.unwrap();
    assert_eq!(
        rows(),
        [("q".to_owned(), false, None)],
        "its keep ended: the body went"
    );
    store.maintain(T0 + 60_000).await.unwrap();
    store.0.flush().await.unwrap();
    assert_eq!(rows(), [], "then the record, past the acked retention");
    store.close().await.unwrap();
}

/// Every search of kept acked messages reads the index range it names, in the page's order: a
/// message id by primary key, an idempotency key or an ordering key by its partial index, else
/// the queue's kept rows by ack time; never a scan of the table nor a sort (the store runs no
/// ANALYZE, so the plan must not depend on statistics).
#[tokio::test]
async fn each_search_of_kept_messages_reads_its_own_index() {
    let dir = tempfile::tempdir().unwrap();
    open(dir.path(), 0).close().await.unwrap();
    let conn = rusqlite::Connection::open(dir.path().join("sluice.db")).unwrap();
    let id = uuid::Uuid::now_v7();
    let cases: [(AckedSearch, &str); 6] = [
        (AckedSearch::default(), "messages_kept "),
        (
            AckedSearch {
                since_ms: Some(1),
                until_ms: Some(2),
                ..AckedSearch::default()
            },
            "messages_kept ",
        ),
        (
            AckedSearch {
                key: Some("k".into()),
                since_ms: Some(1),
                ..AckedSearch::default()
            },
            "messages_kept_key",
        ),
        (
            AckedSearch {
                idempotency_key: Some("i".into()),
                key: Some("k".into()),
                ..AckedSearch::default()
            },
            "messages_kept_idempotency",
        ),
        (
            AckedSearch {
                message_id: Some(id),
                key: Some("k".into()),
                ..AckedSearch::default()
            },
            "INTEGER PRIMARY KEY",
        ),
        (
            AckedSearch {
                message_id: Some(id),
                ..AckedSearch::default()
            },
            "INTEGER PRIMARY KEY",
        ),
    ];
    for (search, index) in cases {
        for after in [false, true] {
            let sql = crate::reads::acked_page_sql(&search, after);
            let mut statement = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
            let count = statement.parameter_count();
            let nulls = vec![rusqlite::types::Null; count];
            let plan: Vec<String> = statement
                .query_map(rusqlite::params_from_iter(nulls), |row| row.get(3))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            let plan = plan.join(" | ");
            assert!(
                plan.contains("SEARCH") && plan.contains(index),
                "{search:?} (after: {after}): {plan}"
            );
            assert!(!plan.contains("TEMP B-TREE"), "{search:?}: {plan}");
        }
    }
}

/// The store names and explains its own metrics: each is described in docs/metrics.md, named
/// by the conventions (`sluice_storage_` and a unit), and reported once.
#[tokio::test]
async fn every_metric_the_store_reports_is_documented() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), 1 << 20);
    let docs = include_str!("../../../docs/metrics.md");
    let metrics = store.storage_metrics();
    let names: Vec<&str> = metrics.reported.iter().map(|metric| metric.name).collect();
    assert!(names.len() >= 9, "{names:?}");
    for (index, metric) in metrics.reported.iter().enumerate() {
        let name = metric.name;
        // A counter is exposed with `_total`, as the exposition format has it.
        let exposed = match metric.value {
            StoreMetricValue::Counter(_) => format!("{name}_total"),
            _ => name.to_owned(),
        };
        assert!(
            docs.contains(&format!("`{exposed}`")),
            "{exposed} is not described in docs/metrics.md"
        );
        assert!(name.starts_with("sluice_storage_"), "{name}");
        assert!(!metric.help.is_empty(), "{name}");
        assert!(!names[..index].contains(&name), "{name} twice");
    }
    assert!(metrics.value("sluice_storage_database_bytes").unwrap() > 0.0);
    store.close().await.unwrap();
}
