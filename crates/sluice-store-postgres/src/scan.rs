//! Bounded walks of a queue's live messages for lookups that filter as they go (a dead-letter
//! listing by error text, a browse of waiting messages): the SQLite store's index looks at
//! most a fixed number of entries per call and answers with a cursor where it stopped, so one
//! call never walks a whole queue. Here the walk reads positions in batches (each an ordered
//! range of one index, from the previous batch's last position), keeps those the caller
//! wants, and stops as the index's loop does; the wanted rows are then read whole in one
//! statement.

use sluice_core::store::StoreResult;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use crate::cached::Cached;
use crate::messages::STATUS_COLUMNS;

type Transaction<'a> = deadpool_postgres::Transaction<'a>;

/// The order of `messages_by_age` over `messages m`: the time retention counts from (when a
/// dead letter was dead-lettered, else when it first became visible: NULL
/// `first_visible_at_ms` means its enqueue), then seq. Dead-letter listings,
/// browsing waiting messages, purges and dead-letter deletions walk it.
pub(crate) const AGED_FROM: &str =
    "coalesce(m.dead_last_seen_at_ms, m.first_visible_at_ms, m.enqueued_at_ms)";

/// Positions the first batch reads beyond the page (so a page whose positions all match
/// needs one batch), and the most any batch reads.
const BATCH_MIN: usize = 64;
const BATCH_MAX: usize = 10_000;

/// A position in a walk: (the order's key, seq).
pub(crate) type Position = (i64, i64);

/// Where a walk goes and how far.
pub(crate) struct Walk<'a> {
    /// One batch: positions after the cursor `($1, $2)` in the walk's order, at most `$3`
    /// (bigint) of them, as rows of (key bigint, seq bigint, wanted boolean); its own
    /// parameters follow from `$4` on.
    pub batch_sql: &'a str,
    /// The batch's own parameters (`$4` on).
    pub params: &'a [&'a (dyn ToSql + Sync)],
    /// Where the walk starts (exclusive).
    pub after: Position,
    /// Wanted positions to collect.
    pub limit: usize,
    /// Positions to look at, at most.
    pub scan_max: usize,
}

/// What a walk found: the seqs wanted, in order, and the position the next call starts after
/// when the walk stopped before the end.
pub(crate) struct Walked {
    pub seqs: Vec<i64>,
    pub next: Option<Position>,
}

/// Walks as the index's loops do: at each position, once `limit` are collected or `scan_max`
/// were looked at, it stops and the next call starts after the last position looked at; a
/// walk that reaches the end has no next.
pub(crate) async fn walk(transaction: &Transaction<'_>, walk: Walk<'_>) -> StoreResult<Walked> {
    let mut seqs = Vec::new();
    let mut looked = 0_usize;
    let mut last: Option<Position> = None;
    let mut cursor = walk.after;
    let mut batch = walk.limit.saturating_add(1).clamp(BATCH_MIN, BATCH_MAX);
    loop {
        // One more than the bound allows, to know whether anything follows it.
        let size = batch.min(walk.scan_max - looked + 1) as i64;
        let mut params: Vec<&(dyn ToSql + Sync)> = vec![&cursor.0, &cursor.1, &size];
        params.extend_from_slice(walk.params);
        let rows = transaction.query_cached(walk.batch_sql, &params).await?;
        for row in &rows {
            if seqs.len() >= walk.limit || looked >= walk.scan_max {
                return Ok(Walked { seqs, next: last });
            }
            let position: Position = (row.get(0), row.get(1));
            looked += 1;
            last = Some(position);
            if row.get::<_, bool>(2) {
                seqs.push(position.1);
            }
        }
        if (rows.len() as i64) < size {
            return Ok(Walked { seqs, next: None });
        }
        cursor = last.unwrap_or(cursor);
        batch = (batch * 4).min(BATCH_MAX);
    }
}

/// The rows `seqs` as [`STATUS_COLUMNS`] and then `extra`, in the order given (those gone
/// are left out).
pub(crate) async fn rows_in_order(
    transaction: &Transaction<'_>,
    seqs: &[i64],
    extra: &str,
) -> StoreResult<Vec<Row>> {
    if seqs.is_empty() {
        return Ok(Vec::new());
    }
    transaction
        .query_cached(
            &format!(
                "SELECT {STATUS_COLUMNS}, {extra} \
                 FROM unnest($1::bigint[]) WITH ORDINALITY AS s(seq, i) \
                      JOIN messages m ON m.seq = s.seq JOIN queues q ON q.id = m.queue_id \
                 ORDER BY s.i"
            ),
            &[&seqs],
        )
        .await
}
