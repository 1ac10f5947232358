//! This store's metrics: the counters of the write path (ops per committed group, recorded by
//! the writer; the time of each WAL sync, by the syncer: a few relaxed atomic adds per group or
//! sync, never a lock) and what it reports with them ([`Report`]), named and explained here.

use sluice_core::histogram::AtomicHistogram;
use sluice_core::store::StoreMetric;

/// Ops per group: powers of two up to the writer's largest group (4096).
const GROUP_OPS_BOUNDS: &[u64] = &[1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1_024, 2_048, 4_096];
/// WAL sync time, in µs: 50 µs to 2.5 s.
const WAL_SYNC_BOUNDS_US: &[u64] = &[
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000,
];

/// Shared by the writer, the syncer and the store.
#[derive(Debug)]
pub struct WriteStats {
    /// Ops of each committed group.
    pub group_commit_ops: AtomicHistogram,
    /// µs of each successful WAL sync.
    pub wal_sync_us: AtomicHistogram,
}

impl Default for WriteStats {
    fn default() -> Self {
        Self {
            group_commit_ops: AtomicHistogram::new(GROUP_OPS_BOUNDS),
            wal_sync_us: AtomicHistogram::new(WAL_SYNC_BOUNDS_US),
        }
    }
}

impl WriteStats {
    /// The write path's histograms; `syncs` is false when the store never syncs the WAL itself
    /// (`durability = "os"`).
    pub fn report(&self, syncs: bool, into: &mut Vec<StoreMetric>) {
        into.push(StoreMetric::histogram(
            "sluice_storage_group_commit_operations",
            "Write operations committed together in one transaction (group commit).",
            self.group_commit_ops.snapshot(),
            1.0,
        ));
        if syncs {
            into.push(StoreMetric::histogram(
                "sluice_storage_wal_fsync_duration_seconds",
                "Time of each fdatasync of the write-ahead log (one covers every group committed before it).",
                self.wal_sync_us.snapshot(),
                1e6,
            ));
        }
    }
}

/// What the store reads for its gauges and counters, at one moment.
pub struct Report {
    /// Bytes of the main database file.
    pub database_file_bytes: u64,
    /// Bytes of the write-ahead log.
    pub wal_bytes: u64,
    /// WAL frames not yet copied into the database file, as of the last checkpoint.
    pub wal_checkpoint_lag_frames: u64,
    /// Checkpoints that emptied the WAL because it passed its limit.
    pub wal_truncations: u64,
    /// Bytes of new messages waiting for the writer.
    pub writer_queue_bytes: u64,
    /// Write operations waiting for the writer.
    pub writer_queue_ops: u64,
    /// Messages the index holds.
    pub index_messages: u64,
    /// Messages of deep backlogs on disk only.
    pub paged_out_messages: u64,
}

impl Report {
    /// The gauges and counters, named and explained.
    pub fn metrics(&self, into: &mut Vec<StoreMetric>) {
        into.extend([
            StoreMetric::gauge(
                "sluice_storage_database_bytes",
                "Size of the database on disk: the main file plus the write-ahead log.",
                (self.database_file_bytes + self.wal_bytes) as f64,
            ),
            StoreMetric::gauge(
                "sluice_storage_wal_bytes",
                "Size of the write-ahead log; kept near [store] max_wal_bytes by truncating checkpoints.",
                self.wal_bytes as f64,
            ),
            StoreMetric::gauge(
                "sluice_storage_wal_checkpoint_lag_frames",
                "WAL frames not yet copied into the database file, as of the last checkpoint.",
                self.wal_checkpoint_lag_frames as f64,
            ),
            StoreMetric::counter(
                "sluice_storage_wal_truncations",
                "Checkpoints that copied the whole WAL so it starts over (or emptied it) because it passed max_wal_bytes.",
                self.wal_truncations,
            ),
            StoreMetric::gauge(
                "sluice_storage_writer_queue_bytes",
                "Bytes of new messages waiting to be stored; enqueues beyond [store] writer_queue_bytes get 503.",
                self.writer_queue_bytes as f64,
            ),
            StoreMetric::gauge(
                "sluice_storage_writer_queue_operations",
                "Write operations of every kind waiting for the writer thread.",
                self.writer_queue_ops as f64,
            ),
            StoreMetric::gauge(
                "sluice_storage_index_messages",
                "Messages the in-memory dispatch index holds.",
                self.index_messages as f64,
            ),
            StoreMetric::gauge(
                "sluice_storage_paged_out_messages",
                "Messages of deep backlogs waiting on disk only, read back in order as the head drains ([store] resident_messages).",
                self.paged_out_messages as f64,
            ),
        ]);
    }
}
