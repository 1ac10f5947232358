//! Lookups that change nothing (docs/design/postgres-store.md §2.12): a page of one state of
//! a queue in dispatch order (`message_browse`) and a message's push delivery log
//! (`message_deliveries`). Lookups of one message by id or key are `messages`'
//! (`get_message`, `message_with_body`).
//!
//! A browse page walks one partial index from its cursor, so its time is bounded by the page,
//! not the queue: ready messages by (priority descending, seq) in `messages_ready`, delayed
//! ones by (visible time, seq) in `messages_delayed`, leased ones by (lease deadline, seq) in
//! `messages_leased`, and waiting ones by (retention time, seq) in `messages_by_age`, looking
//! at most [`BROWSE_SCAN_MAX`] live messages per page as the SQLite store's index does. Kept
//! acked messages (a queue's `keep_acked_ms`, migration 6) go newest ack first, by (ack time,
//! seq) backwards in `messages_kept`, or in `messages_kept_key` or `messages_kept_idempotency`
//! when the search names an ordering or idempotency key, or by primary key for a message id;
//! a keep that ended by the query's time is left out whether or not the cleanup ran. The page
//! and the four counts are read in one snapshot.

use async_trait::async_trait;
use sluice_core::message::{DeliveryAttempt, MessageStatus};
use sluice_core::store::LookupStore;
use sluice_core::store::{
    AckedSearch, BrowseCounts, BrowseCursor, BrowsePage, BrowseQuery, BrowseState, BrowsedMessage,
    MessageBody, MessageGetParams, StoreResult,
};
use sluice_core::stored::ids;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use crate::PgStore;
use crate::cached::Cached;
use crate::delivery_log;
use crate::error::Db;
use crate::messages::{BODY_BYTES_SQL, Body, STATUS_COLUMNS, STATUS_COLUMNS_COUNT, status};
use crate::queues::LIVE;
use crate::scan::{AGED_FROM, Walk, rows_in_order, walk};

/// Live messages a page of waiting messages looks at (the SQLite store's bound), so a queue
/// with few waiting messages among many is never walked whole in one call.
const BROWSE_SCAN_MAX: usize = 10_000;

/// What a browse page reads of each message after [`STATUS_COLUMNS`]: when its lease began
/// (in flight only) and its body's size.
static BROWSED_COLUMNS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!("CASE WHEN m.state = 'leased' THEN m.leased_at_ms END, {BODY_BYTES_SQL}")
});

/// A page of the kept acked messages of queue `queue_id` that match `query.search`, newest ack
/// first after `query.after`, and the cursor of the next page when more follow.
async fn acked_page(
    transaction: &impl Cached,
    queue_id: i32,
    query: &BrowseQuery,
) -> StoreResult<(Vec<BrowsedMessage>, Option<BrowseCursor>)> {
    let search = &query.search;
    let (after_at, after_seq) = after(query.after, i64::MAX);
    let fetch = i64::try_from(query.limit).unwrap_or(i64::MAX - 1) + 1;
    let since = search.since_ms.unwrap_or(i64::MIN);
    let until = search.until_ms.unwrap_or(i64::MAX);
    // An id that names no seq names no message.
    let seq = search.message_id.map(|id| {
        ids::decode(&id)
            .and_then(|seq| i64::try_from(seq).ok())
            .unwrap_or(-1)
    });
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![
        &queue_id,
        &query.now_ms,
        &since,
        &until,
        &after_at,
        &after_seq,
        &fetch,
    ];
    if let (Some(seq), Some(id)) = (&seq, &search.message_id) {
        params.push(seq);
        params.push(id);
    }
    if let Some(key) = &search.idempotency_key {
        params.push(key);
    }
    if let Some(key) = &search.key {
        params.push(key);
    }
    let rows = transaction
        .query_cached(&acked_page_sql(search), &params)
        .await?;
    // The statement keeps only keeps that last past the query's time.
    page_of(&rows, query.limit, browsed)
}

/// A page of at most `limit` messages read by `read` from `rows`, fetched one more than the
/// page (each row ends with its position after [`BROWSED_COLUMNS`]): the next page starts
/// after the last message when that one more came.
fn page_of(
    rows: &[Row],
    limit: usize,
    read: impl Fn(&Row) -> StoreResult<BrowsedMessage>,
) -> StoreResult<(Vec<BrowsedMessage>, Option<BrowseCursor>)> {
    let mut messages = Vec::with_capacity(rows.len().min(limit));
    let mut last = None;
    for row in rows {
        if messages.len() == limit {
            return Ok((messages, last));
        }
        last = Some(position(row, STATUS_COLUMNS_COUNT + 2)?);
        messages.push(read(row)?);
    }
    Ok((messages, None))
}

/// The statement of a page of kept acked messages for the conditions `search` gives (one
/// statement per combination, so each generic plan uses the index its conditions fix): `$1`
/// queue id, `$2` now, `$3`/`$4` the ack times since (inclusive) and until (exclusive), `$5`/`$6`
/// the cursor (ack time, seq), `$7` rows to fetch; then the seq and id of `message_id`, the
/// idempotency key and the ordering key, those given, in that order.
pub(crate) fn acked_page_sql(search: &AckedSearch) -> String {
    let browsed = &*BROWSED_COLUMNS;
    let mut rows = "messages m".to_owned();
    let mut conditions = String::new();
    let mut next = 8;
    if search.message_id.is_some() {
        // The message by primary key, behind a fence (`OFFSET 0`) the planner does not look
        // through: with the other conditions beside it, a generic plan made before the table's
        // first statistics walked the queue's kept rows in `messages_kept` for the one seq.
        rows = format!(
            "(SELECT * FROM messages WHERE seq = ${next}::bigint AND id = ${}::uuid OFFSET 0) m",
            next + 1
        );
        next += 2;
    }
    if search.idempotency_key.is_some() {
        conditions.push_str(&format!(" AND m.idempotency_key = ${next}::text"));
        next += 1;
    }
    if search.key.is_some() {
        conditions.push_str(&format!(" AND m.msg_key = ${next}::text"));
    }
    format!(
        "SELECT {STATUS_COLUMNS}, {browsed}, m.finished_at_ms, m.seq \
         FROM {rows} JOIN queues q ON q.id = m.queue_id \
         WHERE m.queue_id = $1::int AND m.state = 'acked' \
           AND m.kept_until_ms IS NOT NULL AND m.kept_until_ms > $2::bigint \
           AND m.finished_at_ms >= $3::bigint AND m.finished_at_ms < $4::bigint \
           AND (m.finished_at_ms, m.seq) < ($5::bigint, $6::bigint){conditions} \
         ORDER BY m.finished_at_ms DESC, m.seq DESC LIMIT $7::bigint"
    )
}

/// The sets a page walks by one key.
#[derive(Debug, Clone, Copy)]
enum Ordered {
    Ready,
    Delayed,
    InFlight,
}

/// A cursor as the statements take it: (key, seq), or `(start, start)` for the first page.
fn after(cursor: Option<BrowseCursor>, start: i64) -> (i64, i64) {
    cursor.map_or((start, start), |(key, seq)| {
        (key, i64::try_from(seq).unwrap_or(i64::MAX))
    })
}

/// The statement of a page of ready, delayed or leased messages, and its cursor parameters:
/// rows after the cursor in the set's order, each with its position (key, seq) last. `$1`
/// queue id, `$2`/`$3` the cursor, `$4` rows to fetch (one more than the page).
fn ordered_page(set: Ordered, cursor: Option<BrowseCursor>) -> (String, i64, i64) {
    let browsed = &*BROWSED_COLUMNS;
    match set {
        Ordered::Ready => {
            // The cursor key is the negated priority (the index's): after (key, seq) come the
            // rest of that priority, then the lower ones. Two range scans of `messages_ready`
            // keep a deep page as cheap as the first.
            let (priority, seq) = match cursor {
                Some((key, seq)) => (
                    (-key).clamp(i64::from(i32::MIN), i64::from(i32::MAX)),
                    i64::try_from(seq).unwrap_or(i64::MAX),
                ),
                None => (i64::from(i32::MAX), i64::MIN),
            };
            let sql = format!(
                "SELECT {STATUS_COLUMNS}, {browsed}, -o.priority::bigint, o.seq \
                 FROM ( \
                     (SELECT priority, seq FROM messages \
                      WHERE queue_id = $1::int AND state = 'ready' \
                        AND priority = $2::bigint::int AND seq > $3::bigint \
                      ORDER BY seq LIMIT $4::bigint) \
                     UNION ALL \
                     (SELECT priority, seq FROM messages \
                      WHERE queue_id = $1::int AND state = 'ready' \
                        AND priority < $2::bigint::int \
                      ORDER BY priority DESC, seq LIMIT $4::bigint)) o \
                 JOIN messages m ON m.seq = o.seq JOIN queues q ON q.id = m.queue_id \
                 ORDER BY o.priority DESC, o.seq LIMIT $4::bigint"
            );
            (sql, priority, seq)
        }
        Ordered::Delayed | Ordered::InFlight => {
            let (state, key) = match set {
                Ordered::Delayed => ("delayed", "m.visible_at_ms"),
                _ => ("leased", "m.lease_expires_at_ms"),
            };
            let (key_after, seq) = after(cursor, i64::MIN);
            let sql = format!(
                "SELECT {STATUS_COLUMNS}, {browsed}, {key}, m.seq \
                 FROM messages m JOIN queues q ON q.id = m.queue_id \
                 WHERE m.queue_id = $1::int AND m.state = '{state}' \
                   AND ({key}, m.seq) > ($2::bigint, $3::bigint) \
                 ORDER BY {key}, m.seq LIMIT $4::bigint"
            );
            (sql, key_after, seq)
        }
    }
}

/// One batch of a walk over waiting messages ([`crate::scan::walk`]): the queue's live
/// messages after the cursor in `messages_by_age` order (the time retention counts from, then
/// seq), and whether each is waiting.
static WAITING_BATCH_SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "SELECT {AGED_FROM}, m.seq, m.state = 'waiting' FROM messages m \
         WHERE m.queue_id = $4::int AND m.state IN {LIVE} \
           AND ({AGED_FROM}, m.seq) > ($1::bigint, $2::bigint) \
         ORDER BY {AGED_FROM}, m.seq LIMIT $3::bigint"
    )
});

/// The position (key, seq) in the two columns from `at` on.
fn position(row: &Row, at: usize) -> StoreResult<BrowseCursor> {
    let seq: i64 = row.get(at + 1);
    Ok((row.get(at), seq.max(0) as u64))
}

/// A row of a browse page as the trait reports it.
fn browsed(row: &Row) -> StoreResult<BrowsedMessage> {
    let at = STATUS_COLUMNS_COUNT;
    let body_bytes: Option<i32> = row.get(at + 1);
    Ok(BrowsedMessage {
        status: status(row)?,
        leased_at_ms: row.get(at),
        body_bytes: body_bytes.map(|bytes| bytes.max(0) as u64),
    })
}

#[async_trait]
impl LookupStore for PgStore {
    async fn message_body(&self, params: MessageGetParams) -> StoreResult<Option<MessageBody>> {
        self.message_with_body(params, None).await
    }

    async fn message_body_prefix(
        &self,
        params: MessageGetParams,
        max_bytes: usize,
    ) -> StoreResult<Option<MessageBody>> {
        self.message_with_body(params, Some(max_bytes)).await
    }

    /// A page of one state of a queue in dispatch order, from a cursor (`Store::message_browse`).
    async fn message_browse(&self, query: BrowseQuery) -> StoreResult<BrowsePage> {
        let queue = self.resolve(&query.queue).await?;
        let mut client = self.client().await?;
        // One snapshot for the page and the counts.
        let transaction = client
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
            .db()?;
        let counts = transaction
            .query_one_cached(
                "SELECT \
                     (SELECT count(*) FROM messages WHERE queue_id = $1 AND state = 'ready'), \
                     (SELECT count(*) FROM messages WHERE queue_id = $1 AND state = 'waiting'), \
                     (SELECT count(*) FROM messages WHERE queue_id = $1 AND state = 'delayed'), \
                     (SELECT count(*) FROM messages WHERE queue_id = $1 AND state = 'leased')",
                &[&queue.id],
            )
            .await?;
        let count = |index: usize| counts.get::<_, i64>(index).max(0) as u64;
        let counts = BrowseCounts {
            ready: count(0),
            waiting: count(1),
            delayed: count(2),
            in_flight: count(3),
        };
        let limit = i64::try_from(query.limit).unwrap_or(i64::MAX - 1);
        let (messages, next) = match query.state {
            BrowseState::Waiting => {
                let walked = walk(
                    &transaction,
                    Walk {
                        batch_sql: &WAITING_BATCH_SQL,
                        params: &[&queue.id],
                        after: after(query.after, i64::MIN),
                        limit: query.limit,
                        scan_max: BROWSE_SCAN_MAX,
                    },
                )
                .await?;
                let rows = rows_in_order(&transaction, &walked.seqs, &BROWSED_COLUMNS).await?;
                let messages = rows.iter().map(browsed).collect::<StoreResult<_>>()?;
                let next = walked.next.map(|(key, seq)| (key, seq.max(0) as u64));
                (messages, next)
            }
            BrowseState::Acked => acked_page(&transaction, queue.id, &query).await?,
            BrowseState::Ready | BrowseState::Delayed | BrowseState::InFlight => {
                let set = match query.state {
                    BrowseState::Ready => Ordered::Ready,
                    BrowseState::Delayed => Ordered::Delayed,
                    _ => Ordered::InFlight,
                };
                let (sql, key, seq) = ordered_page(set, query.after);
                let fetch = limit + 1;
                let rows = transaction
                    .query_cached(&sql, &[&queue.id, &key, &seq, &fetch])
                    .await?;
                page_of(&rows, query.limit, browsed)?
            }
        };
        transaction.commit().await.db()?;
        Ok(BrowsePage {
            messages,
            next,
            counts,
        })
    }

    /// A message found as `message_get` finds it, with its push delivery log, oldest first
    /// (`Store::message_deliveries`).
    async fn message_deliveries(
        &self,
        params: MessageGetParams,
    ) -> StoreResult<Option<(MessageStatus, Vec<DeliveryAttempt>)>> {
        let Some(status) = self.message_get(params).await? else {
            return Ok(None);
        };
        let Some(seq) = ids::decode(&status.message_id).and_then(|seq| i64::try_from(seq).ok())
        else {
            return Ok(Some((status, Vec::new())));
        };
        let log: Option<serde_json::Value> = self
            .client()
            .await?
            .query_opt_cached(
                "SELECT deliveries FROM messages WHERE seq = $1 AND id = $2",
                &[&seq, &status.message_id],
            )
            .await?
            .and_then(|row| row.get(0));
        Ok(Some((status, delivery_log::read(log))))
    }

    /// Where a message is now (`Store::message_get`, §2.12): by id (decoded to its seq, read by
    /// primary key), or by an idempotency key whose window is open. A message belongs to the
    /// asking queue when it is in it, or is a dead letter that came from it.
    async fn message_get(&self, params: MessageGetParams) -> StoreResult<Option<MessageStatus>> {
        Ok(self
            .find_message(params, Body::None)
            .await?
            .map(|(status, _)| status))
    }
}
