//! Counters of the write path for metrics: ops per committed group (the writer) and the time of
//! each WAL sync (the syncer). Recording is a few relaxed atomic adds per group or sync, never a
//! lock, so it costs nothing the callers could notice.

use sluice_core::histogram::AtomicHistogram;
use sluice_core::store::StorageMetrics;

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
    /// The snapshot for metrics; `syncs` is false when the store never syncs the WAL itself
    /// (`durability = "os"`).
    pub fn snapshot(&self, syncs: bool) -> StorageMetrics {
        StorageMetrics {
            group_commit_ops: Some(self.group_commit_ops.snapshot()),
            wal_sync_us: syncs.then(|| self.wal_sync_us.snapshot()),
            ..StorageMetrics::default()
        }
    }
}
