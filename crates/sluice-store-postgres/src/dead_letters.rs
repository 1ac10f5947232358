//! A queue's dead letters (docs/design/postgres-store.md §2.10): the live messages of its
//! dead-letter queue that came from it (`dead_source_queue`), listed newest first, read one
//! by one with their payload, replayed into their source queue (or a target) as new messages,
//! or deleted. The SQLite store is the reference for every answer.
//!
//! Dead letters are ordered as the dead-letter queue's `messages_by_age` index orders them:
//! by the time they were dead-lettered, then seq. A replay or deletion never takes a leased
//! dead letter (someone consumes it from the dead-letter queue); like every change of lane
//! membership it locks the lanes it touches first, and then changes the rows with a plain
//! `UPDATE` whose `WHERE` PostgreSQL evaluates again on a row changed meanwhile, so a dead
//! letter leased, replayed or deleted by another node while this one waited is left alone.

use async_trait::async_trait;
use sluice_core::store::DeadLetterStore;
use std::collections::HashMap;
use std::sync::Arc;

use sluice_core::Millis;
use sluice_core::message::MessageState;
use sluice_core::rules::lanes::lane_key;
use sluice_core::store::{
    DeadLetter, DeadLetterQuery, DeadLetterSelection, DeadLetters, Replay, ReplayParams,
    StoreError, StoreResult,
};
use sluice_core::store::{DeadLetterFilter, PurgeScope, Seq};
use sluice_core::stored::ids;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;
use uuid::Uuid;

use crate::PgStore;
use crate::cache::CachedQueue;
use crate::cached::Cached;
use crate::error::Db;
use crate::messages::{
    BODY_BYTES_SQL, STATUS_COLUMNS, STATUS_COLUMNS_COUNT, lock_lanes_for_enqueue, notify_wake,
    payload, settle, status, take_seqs,
};
use crate::queues::LIVE;
use crate::removal::{CHUNK_ROWS, Finished, Take, UNLEASED, finish};
use crate::retry::retried;
use crate::scan::{AGED_FROM, Walk, rows_in_order, walk};

type Transaction<'a> = deadpool_postgres::Transaction<'a>;

/// Entries one list call looks at before it answers with a cursor (the SQLite store's bound),
/// so a filter that matches little never walks a whole dead-letter queue in one call.
const LIST_SCAN_MAX: usize = 100_000;

/// One batch of a listing's walk ([`crate::scan::walk`]): the dead-letter queue's live
/// messages below the cursor, newest first, and whether the filter matches each.
static LIST_BATCH_SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "SELECT {AGED_FROM}, m.seq, coalesce({}, false) FROM messages m \
         WHERE m.queue_id = $4::int AND m.state IN {LIVE} \
           AND ({AGED_FROM}, m.seq) < ($1::bigint, $2::bigint) \
         ORDER BY {AGED_FROM} DESC, m.seq DESC LIMIT $3::bigint",
        matching(4)
    )
});

/// A queue's dead-letter queue as a dead-letter call finds it.
struct DeadLetterQueue {
    /// Its name (also when it does not exist: it is made by the first dead-letter move).
    name: String,
    /// The queue, when it exists.
    queue: Option<CachedQueue>,
}

/// Which dead letters a replay or deletion takes, as SQL over `messages m`: the parameters
/// from `$1` on, and the condition that uses them.
struct Selection {
    dlq_id: i32,
    source: String,
    chosen: Chosen,
}

enum Chosen {
    /// These messages, by seq and id.
    Ids { seqs: Vec<i64>, ids: Vec<Uuid> },
    /// Those the filter matches.
    Matching {
        since_ms: Option<Millis>,
        until_ms: Option<Millis>,
        error_contains: Option<String>,
    },
}

impl Selection {
    /// The selection of `queue`'s dead letters in `dlq_id`: ids must have come from `queue`,
    /// a filter names its own source (as the index reads it).
    fn new(dlq_id: i32, queue: &str, selection: &DeadLetterSelection) -> Self {
        match selection {
            DeadLetterSelection::Ids(message_ids) => {
                let (seqs, ids) = message_ids
                    .iter()
                    .filter_map(|id| Some((i64::try_from(ids::decode(id)?).ok()?, *id)))
                    .unzip();
                Self {
                    dlq_id,
                    source: queue.to_owned(),
                    chosen: Chosen::Ids { seqs, ids },
                }
            }
            DeadLetterSelection::Matching(filter) => Self::matching(dlq_id, filter),
        }
    }

    fn matching(dlq_id: i32, filter: &DeadLetterFilter) -> Self {
        Self {
            dlq_id,
            source: filter.source_queue.clone(),
            chosen: Chosen::Matching {
                since_ms: filter.since_ms,
                until_ms: filter.until_ms,
                error_contains: filter.error_contains.clone(),
            },
        }
    }

    /// The condition on `m`, with parameters `$1` to `$n` ([`Selection::params`]).
    fn condition(&self) -> String {
        match self.chosen {
            Chosen::Ids { .. } => "m.queue_id = $1::int AND m.dead_source_queue = $2::text \
                 AND m.seq = ANY($3::bigint[]) AND m.id = ANY($4::uuid[])"
                .to_owned(),
            Chosen::Matching { .. } => matching(1),
        }
    }

    fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        let mut params: Vec<&(dyn ToSql + Sync)> = vec![&self.dlq_id, &self.source];
        match &self.chosen {
            Chosen::Ids { seqs, ids } => {
                params.push(seqs);
                params.push(ids);
            }
            Chosen::Matching {
                since_ms,
                until_ms,
                error_contains,
            } => {
                params.push(since_ms);
                params.push(until_ms);
                params.push(error_contains);
            }
        }
        params
    }

    /// Nothing can match (ids this store did not make).
    fn is_empty(&self) -> bool {
        matches!(&self.chosen, Chosen::Ids { seqs, .. } if seqs.is_empty())
    }
}

/// `DeadLetterFilter::matches` in SQL over `m`, with five parameters from `$first` on: the
/// dead-letter queue's id, the source queue, the dead-letter time bounds and the error text (a
/// case-insensitive substring).
fn matching(first: usize) -> String {
    let [queue, source, since, until, error] = [0, 1, 2, 3, 4].map(|i| first + i);
    format!(
        "m.queue_id = ${queue}::int AND m.dead_source_queue = ${source}::text \
         AND (${since}::bigint IS NULL OR m.dead_last_seen_at_ms >= ${since}::bigint) \
         AND (${until}::bigint IS NULL OR m.dead_last_seen_at_ms < ${until}::bigint) \
         AND (${error}::text IS NULL \
              OR strpos(lower(m.dead_last_error), lower(${error}::text)) > 0)"
    )
}

/// A dead letter picked for a replay or deletion.
struct Candidate {
    seq: i64,
    id: Uuid,
    /// Its place: when it was dead-lettered.
    aged_from: Millis,
    lane_key: Option<String>,
    msg_key: Option<String>,
}

impl PgStore {
    /// The dead-letter queue of `queue`: `QueueNotFound` for an unknown queue, `Conflict` for
    /// one without a dead-letter queue, as the SQLite store answers.
    async fn dead_letter_queue_of(&self, queue: &str) -> StoreResult<DeadLetterQueue> {
        let source = self.resolve(queue).await?;
        let name = source.config.dead_letter_queue.clone().ok_or_else(|| {
            StoreError::Conflict(format!("queue {queue:?} has no dead-letter queue"))
        })?;
        let queue = match self.resolve(&name).await {
            Ok(found) => Some(found),
            Err(StoreError::QueueNotFound(_)) => None,
            Err(error) => return Err(error),
        };
        Ok(DeadLetterQueue { name, queue })
    }

    #[expect(
        clippy::too_many_arguments,
        reason = "one replay, with what it reads named"
    )]
    async fn replay_once(
        &self,
        dlq: &CachedQueue,
        dlq_name: &str,
        target: &CachedQueue,
        target_name: &str,
        selection: &Selection,
        limit: usize,
        now_ms: Millis,
    ) -> StoreResult<Replay> {
        let mut client = self.client().await?;
        let transaction = client.transaction().await.db()?;
        let (mut candidates, more) = candidates(&transaction, selection, None, limit).await?;
        if candidates.is_empty() {
            transaction.commit().await.db()?;
            return Ok(Replay {
                matched: 0,
                replayed: Vec::new(),
                more,
            });
        }
        // The lanes the dead letters leave and those their new messages join, all first and
        // in (queue, key) order (§2.0).
        let target_lane = |msg_key: &Option<String>| {
            let key = msg_key.as_deref().map(Arc::<str>::from);
            lane_key(target.config.ordering, key.as_ref()).map(|lane| lane.to_string())
        };
        let mut lanes: Vec<(i32, String)> = candidates
            .iter()
            .flat_map(|candidate| {
                let leaving = candidate.lane_key.clone().map(|lane| (dlq.id, lane));
                let joining = target_lane(&candidate.msg_key).map(|lane| (target.id, lane));
                leaving.into_iter().chain(joining)
            })
            .collect();
        lanes.sort_unstable();
        lanes.dedup();
        lock_lanes_for_enqueue(&transaction, &lanes).await?;

        // The dead letters still there (not leased, replayed or deleted meanwhile) become
        // replayed records; the lanes they leave are counted down.
        let seqs: Vec<i64> = candidates.iter().map(|candidate| candidate.seq).collect();
        let taken: Vec<i64> = transaction
            .query_cached(
                &format!(
                    "WITH gone AS ( \
                         UPDATE messages m SET state = 'replayed', finished_at_ms = $3 \
                         WHERE m.seq = ANY($2) AND m.queue_id = $1 AND m.state IN {UNLEASED} \
                         RETURNING m.seq, m.lane_key), \
                     leaving AS ( \
                         UPDATE lanes l SET members = l.members - n.leaving \
                         FROM (SELECT lane_key, count(*) AS leaving FROM gone \
                               WHERE lane_key IS NOT NULL GROUP BY lane_key) n \
                         WHERE l.queue_id = $1 AND l.lane_key = n.lane_key) \
                     SELECT seq FROM gone"
                ),
                &[&dlq.id, &seqs, &now_ms],
            )
            .await?
            .iter()
            .map(|row| row.get(0))
            .collect();
        candidates.retain(|candidate| taken.contains(&candidate.seq));
        if candidates.is_empty() {
            transaction.commit().await.db()?;
            return Ok(Replay {
                matched: 0,
                replayed: Vec::new(),
                more,
            });
        }

        // New messages, in the dead letters' order, copied row to row inside PostgreSQL.
        let new_seqs = take_seqs(&transaction, candidates.len()).await?;
        let new_ids: Vec<Uuid> = new_seqs
            .iter()
            .map(|&seq| ids::encode(seq as u64, now_ms))
            .collect();
        let old_seqs: Vec<i64> = candidates.iter().map(|candidate| candidate.seq).collect();
        debug_assert_eq!(old_seqs.len(), new_seqs.len());
        let new_lanes: Vec<Option<String>> = candidates
            .iter()
            .map(|candidate| target_lane(&candidate.msg_key))
            .collect();
        let inserted = transaction
            .query_cached(
                "WITH r AS ( \
                     SELECT * FROM unnest($2::bigint[], $3::bigint[], $4::uuid[], $5::text[]) \
                         AS r(old_seq, seq, id, lane_key)), \
                 added AS ( \
                     SELECT lane_key, count(*) AS n, min(seq) AS first_seq \
                     FROM r WHERE lane_key IS NOT NULL GROUP BY lane_key), \
                 joined AS ( \
                     INSERT INTO lanes (queue_id, lane_key, members) \
                     SELECT $1, lane_key, n FROM added ORDER BY lane_key \
                     ON CONFLICT (queue_id, lane_key) DO UPDATE \
                         SET members = lanes.members + excluded.members \
                     RETURNING lane_key, members), \
                 heads AS ( \
                     SELECT a.first_seq AS seq FROM added a JOIN joined j USING (lane_key) \
                     WHERE j.members = a.n), \
                 named AS ( \
                     UPDATE messages o SET replayed_as = r.id FROM r WHERE o.seq = r.old_seq), \
                 copied AS ( \
                     INSERT INTO payloads (seq, body, headers) \
                     SELECT r.seq, p.body, p.headers FROM r JOIN payloads p ON p.seq = r.old_seq), \
                 inserted AS ( \
                     INSERT INTO messages (seq, id, queue_id, state, priority, lane_key, msg_key, \
                                           idempotency_key, enqueued_at_ms, visible_at_ms, \
                                           body_kind) \
                     SELECT r.seq, r.id, $1, \
                            CASE WHEN r.lane_key IS NOT NULL \
                                      AND r.seq NOT IN (SELECT seq FROM heads) \
                                 THEN 'waiting'::message_state ELSE 'ready' END, \
                            o.priority, r.lane_key, o.msg_key, o.idempotency_key, $6, $6, \
                            o.body_kind \
                     FROM r JOIN messages o ON o.seq = r.old_seq \
                     ORDER BY r.seq \
                     RETURNING seq, idempotency_key) \
                 SELECT r.old_seq, r.id, i.idempotency_key \
                 FROM r JOIN inserted i USING (seq) ORDER BY r.seq",
                &[
                    &target.id, &old_seqs, &new_seqs, &new_ids, &new_lanes, &now_ms,
                ],
            )
            .await?;

        // An idempotency key now answers with the new message, for the target's window (the
        // last of several dead letters with one key wins, as in the SQLite store).
        let mut by_key: HashMap<String, Uuid> = HashMap::new();
        let mut replayed = Vec::with_capacity(inserted.len());
        for row in &inserted {
            let (old_seq, new_id): (i64, Uuid) = (row.get(0), row.get(1));
            if let Some(key) = row.get::<_, Option<String>>(2) {
                by_key.insert(key, new_id);
            }
            if let Some(dead) = candidates.iter().find(|candidate| candidate.seq == old_seq) {
                replayed.push((dead.id, new_id));
            }
        }
        if !by_key.is_empty() {
            let mut named: Vec<(String, Uuid)> = by_key.into_iter().collect();
            named.sort_unstable();
            let (keys, key_ids): (Vec<String>, Vec<Uuid>) = named.into_iter().unzip();
            transaction
                .execute_cached(
                    "INSERT INTO idempotency AS i (queue_id, key, message_id, expires_at_ms) \
                     SELECT $1, key, message_id, $4::bigint + $5::bigint \
                     FROM unnest($2::text[], $3::uuid[]) AS k(key, message_id) \
                     ON CONFLICT (queue_id, key) DO UPDATE \
                         SET message_id = excluded.message_id, \
                             expires_at_ms = excluded.expires_at_ms, \
                             acked_at_ms = NULL, result = NULL",
                    &[
                        &target.id,
                        &keys,
                        &key_ids,
                        &now_ms,
                        &target.config.dedup_window_ms,
                    ],
                )
                .await?;
        }

        // The lanes the dead letters left go on.
        let mut left: Vec<String> = candidates
            .iter()
            .filter_map(|candidate| candidate.lane_key.clone())
            .collect();
        if !left.is_empty() {
            left.sort_unstable();
            left.dedup();
            settle(&transaction, dlq.id, &left, now_ms).await?;
            notify_wake(&transaction, &self.wake_channel, dlq_name).await?;
        }
        notify_wake(&transaction, &self.wake_channel, target_name).await?;
        transaction.commit().await.db()?;
        Ok(Replay {
            matched: candidates.len() as u64,
            replayed,
            more,
        })
    }

    /// One chunk of a deletion, the dead letters after position `after`.
    async fn delete_chunk(
        &self,
        dlq: &CachedQueue,
        dlq_name: &str,
        selection: &Selection,
        after: Option<(Millis, i64)>,
        now_ms: Millis,
    ) -> StoreResult<DeleteChunk> {
        let mut client = self.client().await?;
        let transaction = client.transaction().await.db()?;
        let (candidates, more) =
            candidates(&transaction, selection, after, CHUNK_ROWS as usize).await?;
        let last = candidates
            .last()
            .map(|candidate| (candidate.aged_from, candidate.seq));
        let seqs: Vec<i64> = candidates.iter().map(|candidate| candidate.seq).collect();
        let mut deleted = 0;
        if !seqs.is_empty() {
            let take = Take {
                scope: PurgeScope::Waiting,
                state: Finished::Deleted,
                ids: None,
                reason: None,
                now_ms,
            };
            deleted = finish(
                &transaction,
                &self.wake_channel,
                dlq.id,
                dlq_name,
                &seqs,
                take,
            )
            .await?
            .len() as u64;
        }
        transaction.commit().await.db()?;
        Ok(DeleteChunk {
            deleted,
            last,
            more,
        })
    }
}

/// What one chunk of a deletion did.
struct DeleteChunk {
    deleted: u64,
    /// The position of the last dead letter it looked at.
    last: Option<(Millis, i64)>,
    /// More dead letters follow it.
    more: bool,
}

/// The first `limit` dead letters a selection takes that are not leased, oldest first (by
/// the time they were dead-lettered, then seq), after position `after`; and whether more
/// follow. Read without locks: the change that takes them checks each row again.
async fn candidates(
    transaction: &Transaction<'_>,
    selection: &Selection,
    after: Option<(Millis, i64)>,
    limit: usize,
) -> StoreResult<(Vec<Candidate>, bool)> {
    let (after_aged, after_seq) = after.unwrap_or((i64::MIN, i64::MIN));
    let fetch = i64::try_from(limit).unwrap_or(i64::MAX - 1) + 1;
    let mut params = selection.params();
    let first_extra = params.len() + 1;
    params.extend([&after_aged as &(dyn ToSql + Sync), &after_seq, &fetch]);
    let rows: Vec<Row> = transaction
        .query_cached(
            &format!(
                "SELECT m.seq, m.id, {AGED_FROM}, m.lane_key, m.msg_key FROM messages m \
                 WHERE {} AND m.state IN {UNLEASED} \
                   AND ({AGED_FROM}, m.seq) > (${}::bigint, ${}::bigint) \
                 ORDER BY {AGED_FROM}, m.seq LIMIT ${}::bigint",
                selection.condition(),
                first_extra,
                first_extra + 1,
                first_extra + 2
            ),
            &params,
        )
        .await?;
    let more = rows.len() > limit;
    Ok((
        rows.iter()
            .take(limit)
            .map(|row| Candidate {
                seq: row.get(0),
                id: row.get(1),
                aged_from: row.get(2),
                lane_key: row.get(3),
                msg_key: row.get(4),
            })
            .collect(),
        more,
    ))
}

#[async_trait]
impl DeadLetterStore for PgStore {
    /// A page of `query.queue`'s dead letters, newest first (`Store::dead_letter_list`), with
    /// their status and body size; leased ones are listed too. Looks at most
    /// [`LIST_SCAN_MAX`] entries per call: `next` is set when it stopped before the end (the
    /// page is full and more follow, or the bound was reached).
    async fn dead_letter_list(&self, query: DeadLetterQuery) -> StoreResult<DeadLetters> {
        let dlq = self.dead_letter_queue_of(&query.queue).await?;
        let mut page = DeadLetters {
            dead_letter_queue: dlq.name,
            entries: Vec::new(),
            next: None,
        };
        let Some(dlq_queue) = dlq.queue else {
            return Ok(page);
        };
        let selection = Selection::matching(dlq_queue.id, &query.filter);
        let before = query.before.map_or((i64::MAX, i64::MAX), |(at, seq)| {
            (at, i64::try_from(seq).unwrap_or(i64::MAX))
        });
        let mut client = self.client().await?;
        // One snapshot for the walk and the rows it found.
        let transaction = client
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
            .db()?;
        let params = selection.params();
        let walked = walk(
            &transaction,
            Walk {
                batch_sql: &LIST_BATCH_SQL,
                params: &params,
                after: before,
                limit: query.limit,
                scan_max: LIST_SCAN_MAX,
            },
        )
        .await?;
        let rows = rows_in_order(&transaction, &walked.seqs, BODY_BYTES_SQL).await?;
        transaction.commit().await.db()?;
        for row in &rows {
            let body_bytes: Option<i32> = row.get(STATUS_COLUMNS_COUNT);
            page.entries.push(DeadLetter {
                status: status(row)?,
                payload: None,
                body_bytes: body_bytes.map(|bytes| bytes.max(0) as u64),
            });
        }
        page.next = walked
            .next
            .map(|(aged_from, seq)| (aged_from, seq.max(0) as Seq));
        Ok(page)
    }

    /// One dead letter of `queue` with its payload (`Store::dead_letter_get`), also once
    /// replayed or deleted while its record is kept; `None` when the message did not come
    /// from `queue` or is back in a normal state.
    async fn dead_letter_get(&self, queue: &str, id: Uuid) -> StoreResult<Option<DeadLetter>> {
        self.dead_letter_queue_of(queue).await?;
        let Some(seq) = ids::decode(&id).and_then(|seq| i64::try_from(seq).ok()) else {
            return Ok(None);
        };
        let row = self
            .client()
            .await?
            .query_opt_cached(
                &format!(
                    "SELECT {STATUS_COLUMNS}, p.body, m.body_kind, p.headers \
                     FROM messages m JOIN queues q ON q.id = m.queue_id \
                     LEFT JOIN payloads p ON p.seq = m.seq \
                     WHERE m.seq = $1 AND m.id = $2 AND m.dead_source_queue = $3"
                ),
                &[&seq, &id, &queue],
            )
            .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let status = status(&row)?;
        if matches!(status.state, MessageState::Ready | MessageState::Delayed) {
            return Ok(None);
        }
        let at = STATUS_COLUMNS_COUNT;
        let body: Option<Vec<u8>> = row.get(at);
        let payload = match body {
            Some(body) => Some(payload(Some(body), row.get(at + 1), row.get(at + 2))?),
            None => None,
        };
        Ok(Some(DeadLetter {
            body_bytes: payload.as_ref().map(|p| p.body_bytes.len() as u64),
            payload,
            status,
        }))
    }

    /// Replays dead letters as new messages of their source queue or `target_queue`
    /// (`Store::dead_letter_replay`): oldest first, at most `limit`, in one transaction. Each
    /// new message has the dead letter's body, headers, key, priority and idempotency key
    /// (which now names it), attempts reset, and joins its lane when the target is ordered;
    /// the dead letter becomes a `replayed` record naming it and keeps its body. A dry run
    /// only counts the dead letters that would be replayed. Leased dead letters are left.
    async fn dead_letter_replay(&self, params: ReplayParams) -> StoreResult<Replay> {
        let dlq = self.dead_letter_queue_of(&params.queue).await?;
        let target_name = params
            .target_queue
            .clone()
            .unwrap_or_else(|| params.queue.clone());
        let target = self.resolve(&target_name).await?;
        let Some(dlq_queue) = dlq.queue else {
            return Ok(Replay::default());
        };
        let selection = Selection::new(dlq_queue.id, &params.queue, &params.selection);
        if selection.is_empty() {
            return Ok(Replay::default());
        }
        if params.dry_run {
            let counted: i64 = self
                .client()
                .await?
                .query_one_cached(
                    &format!(
                        "SELECT count(*) FROM messages m \
                         WHERE {} AND m.state IN {UNLEASED}",
                        selection.condition()
                    ),
                    &selection.params(),
                )
                .await?
                .get(0);
            return Ok(Replay {
                matched: counted.max(0) as u64,
                replayed: Vec::new(),
                more: false,
            });
        }
        let replay = retried(|| {
            self.replay_once(
                &dlq_queue,
                &dlq.name,
                &target,
                &target_name,
                &selection,
                params.limit,
                params.now_ms,
            )
        })
        .await?;
        if !replay.replayed.is_empty() {
            self.notifier.wake(&target_name);
            let created = replay.replayed.len() as u64;
            self.count(target.id, |counters| counters.enqueued += created);
        }
        Ok(replay)
    }

    /// Deletes dead letters of `queue` (`Store::dead_letter_delete`): in transactions of
    /// [`CHUNK_ROWS`], each a `deleted` record without its body; leased ones are left, and
    /// those dead-lettered after the call began are not chased. Returns how many went.
    async fn dead_letter_delete(
        &self,
        queue: &str,
        selection: DeadLetterSelection,
        now_ms: Millis,
    ) -> StoreResult<u64> {
        let dlq = self.dead_letter_queue_of(queue).await?;
        let Some(dlq_queue) = dlq.queue else {
            return Ok(0);
        };
        let selection = Selection::new(dlq_queue.id, queue, &selection);
        if selection.is_empty() {
            return Ok(0);
        }
        let mut deleted = 0;
        let mut after = None;
        loop {
            let chunk =
                retried(|| self.delete_chunk(&dlq_queue, &dlq.name, &selection, after, now_ms))
                    .await?;
            deleted += chunk.deleted;
            match chunk.last {
                // Those dead-lettered after the call began are the next call's.
                Some(last) if chunk.more && last.0 <= now_ms => after = Some(last),
                _ => break,
            }
        }
        Ok(deleted)
    }
}
