//! Queue definitions: define or update, look up, list, pause and delete
//! (docs/design/postgres-store.md §2.8, §2.11), with the rules of `sluice-core`'s index: a
//! queue comes with its dead-letter queue, putting the same definition again writes nothing, a
//! queue's ordering cannot change while it holds messages, a changed rate limit starts from a
//! full bucket, and a dead-letter queue in use cannot be deleted.
//!
//! A change is one transaction under the queue's row lock and announces itself on
//! `<schema>.config` before it commits, so every node's cache drops its copy once it is
//! visible ([`crate::cache`]).

use async_trait::async_trait;
use sluice_core::Millis;
use sluice_core::queue::QueueConfig;
use sluice_core::store::QueueDepth;
use sluice_core::store::{PurgeScope, QueueStore};
use sluice_core::store::{
    QueueBytes, QueueInfo, QueuePut, QueuePutParams, StoreError, StoreResult,
};
use sluice_core::stored::StoredQueueConfig;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use crate::PgStore;
use crate::cache::{CachedQueue, Lookup};
use crate::cached::Cached;
use crate::counters;
use crate::error::Db;
use crate::messages::DELETE_DOOMED_SQL;
use crate::retry::retried;
use crate::stats::COUNTS_OF_Q;

/// The states of a live message (not final): what a queue holds.
pub(crate) const LIVE: &str = "('waiting', 'ready', 'delayed', 'leased')";

impl PgStore {
    /// The queue's id and definition: the cache's copy when current, else the row
    /// (`QueueNotFound` when there is none). Every message call starts here.
    pub(crate) async fn resolve(&self, name: &str) -> StoreResult<CachedQueue> {
        self.check_open()?;
        let generation = match self.cache.lookup(name) {
            Lookup::Fresh(queue) => return Ok(queue),
            Lookup::Unsure(queue, generation) => {
                let client = self.client().await?;
                let version: Option<i64> = client
                    .query_opt(
                        "SELECT config_version FROM queues WHERE name = $1",
                        &[&name],
                    )
                    .await
                    .db()?
                    .map(|row| row.get(0));
                if version == Some(queue.version) {
                    self.cache.store(name, queue.clone(), generation);
                    return Ok(queue);
                }
                generation
            }
            Lookup::Miss(generation) => generation,
        };
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT id, config_version, config::text FROM queues WHERE name = $1",
                &[&name],
            )
            .await
            .db()?
            .ok_or_else(|| StoreError::QueueNotFound(name.to_owned()))?;
        let queue = CachedQueue {
            id: row.get(0),
            version: row.get(1),
            config: std::sync::Arc::new(parse_config(name, row.get(2))?),
        };
        self.cache.store(name, queue.clone(), generation);
        Ok(queue)
    }

    /// `pg_notify` on `<schema>.config`, `<kind>:<name>` for each name, inside `transaction`:
    /// sent at its commit, never for a rollback.
    pub(crate) async fn announce(
        &self,
        transaction: &deadpool_postgres::Transaction<'_>,
        kind: &str,
        names: &[String],
    ) -> StoreResult<()> {
        transaction
            .execute(
                "SELECT pg_notify($1, $2 || ':' || name) FROM unnest($3::text[]) AS name",
                &[&self.config_channel, &kind, &names],
            )
            .await
            .db()?;
        Ok(())
    }
}

/// Message rows a queue deletion removes in its own transaction.
pub(crate) const DELETE_CHUNK_ROWS: i64 = 2_000;

/// Inserts a queue, or updates its definition and bumps its version; its id, and whether it
/// was new.
async fn upsert(
    transaction: &deadpool_postgres::Transaction<'_>,
    name: &str,
    config: &QueueConfig,
    now_ms: Millis,
) -> StoreResult<(i32, bool)> {
    let columns = Columns::of(config);
    let row = transaction
        .query_one(
            &format!(
                "{INSERT_QUEUE} ON CONFLICT (name) DO UPDATE SET \
                     config = excluded.config, config_version = queues.config_version + 1, \
                     ordering = excluded.ordering, dead_letter_queue = excluded.dead_letter_queue, \
                     max_message_bytes = excluded.max_message_bytes, max_depth = excluded.max_depth, \
                     dedup_window_ms = excluded.dedup_window_ms, has_schema = excluded.has_schema \
                 RETURNING id, (xmax = 0) AS created"
            ),
            &columns.params(&name, &now_ms),
        )
        .await
        .db()?;
    Ok((row.get(0), row.get(1)))
}

/// Inserts a queue unless one of that name exists; its id when this call made it.
async fn insert_if_missing(
    transaction: &deadpool_postgres::Transaction<'_>,
    name: &str,
    config: &QueueConfig,
    now_ms: Millis,
) -> StoreResult<Option<i32>> {
    let columns = Columns::of(config);
    let row = transaction
        .query_opt(
            &format!("{INSERT_QUEUE} ON CONFLICT (name) DO NOTHING RETURNING id"),
            &columns.params(&name, &now_ms),
        )
        .await
        .db()?;
    Ok(row.map(|row| row.get(0)))
}

const INSERT_QUEUE: &str = "INSERT INTO queues (name, config, ordering, dead_letter_queue, \
     max_message_bytes, max_depth, dedup_window_ms, has_schema, created_at_ms) \
     VALUES ($1, $2::text::jsonb, $3, $4, $5, $6, $7, $8, $9)";

/// A definition as the `queues` row holds it: the stored JSON, and the copies SQL reads without
/// parsing it.
struct Columns {
    config: String,
    ordering: &'static str,
    dead_letter_queue: Option<String>,
    max_message_bytes: i32,
    max_depth: Option<i64>,
    dedup_window_ms: i64,
    has_schema: bool,
}

impl Columns {
    fn of(config: &QueueConfig) -> Self {
        Self {
            config: StoredQueueConfig::to_json(config),
            ordering: config.ordering.as_str(),
            dead_letter_queue: config.dead_letter_queue.clone(),
            // Limits are checked when a queue is defined, far below these bounds.
            max_message_bytes: i32::try_from(config.max_message_bytes).unwrap_or(i32::MAX),
            max_depth: config
                .max_depth
                .map(|depth| i64::try_from(depth).unwrap_or(i64::MAX)),
            dedup_window_ms: config.dedup_window_ms,
            has_schema: config.schema.is_some(),
        }
    }

    /// The parameters of [`INSERT_QUEUE`].
    fn params<'a>(
        &'a self,
        name: &'a (dyn ToSql + Sync),
        now_ms: &'a Millis,
    ) -> [&'a (dyn ToSql + Sync); 9] {
        [
            name,
            &self.config,
            &self.ordering,
            &self.dead_letter_queue,
            &self.max_message_bytes,
            &self.max_depth,
            &self.dedup_window_ms,
            &self.has_schema,
            now_ms,
        ]
    }
}

/// Every queue with its state and its counts, one row each, counted now (§2.11): four counts,
/// each an index-only scan of its state's partial index; the oldest ready message by a skip scan
/// over priorities (one probe per priority); the dead-letter queue's live messages.
fn queue_rows_sql() -> String {
    format!(
        "SELECT q.name, q.config::text, s.is_paused, c.ready, c.waiting, c.delayed, c.leased, \
                c.oldest_ready_enqueued_at_ms, \
                (SELECT count(*) FROM messages m JOIN queues d ON d.id = m.queue_id \
                 WHERE d.name = q.dead_letter_queue AND m.state IN {LIVE}) AS dead_letters, \
                q.id, s.is_push_paused \
         FROM queues q JOIN queue_state s ON s.queue_id = q.id \
         CROSS JOIN LATERAL ({COUNTS_OF_Q}) c"
    )
}

/// Every queue with its state and the leader's last count of it (`queue_stats`), the same
/// columns as [`queue_rows_sql`]; a queue not counted yet (new, or no leader yet) is counted
/// now (`coalesce` evaluates a subquery only when it is needed).
fn counted_queue_rows_sql() -> String {
    let exact = |column: &str| format!("(SELECT c.{column} FROM ({COUNTS_OF_Q}) c)");
    format!(
        "SELECT q.name, q.config::text, s.is_paused, \
                coalesce(st.ready, {ready}), coalesce(st.waiting, {waiting}), \
                coalesce(st.delayed, {delayed}), coalesce(st.in_flight, {leased}), \
                CASE WHEN st.queue_id IS NULL THEN {oldest} \
                     ELSE st.oldest_ready_enqueued_at_ms END, \
                (SELECT coalesce( \
                     (SELECT ds.ready + ds.waiting + ds.delayed + ds.in_flight \
                      FROM queue_stats ds WHERE ds.queue_id = d.id), \
                     (SELECT count(*) FROM messages m WHERE m.queue_id = d.id AND m.state IN {LIVE})) \
                 FROM queues d WHERE d.name = q.dead_letter_queue) AS dead_letters, \
                q.id, s.is_push_paused \
         FROM queues q JOIN queue_state s ON s.queue_id = q.id \
         LEFT JOIN queue_stats st ON st.queue_id = q.id",
        ready = exact("ready"),
        waiting = exact("waiting"),
        delayed = exact("delayed"),
        leased = exact("leased"),
        oldest = exact("oldest_ready_enqueued_at_ms"),
    )
}

/// A row of [`queue_rows_sql`] as the trait reports it. `ready` counts the messages waiting
/// behind their lane too, as the index's depth does.
///
/// Counters are this node's (exact) plus what the other rows of `queue_counters` hold
/// (`crate::counters`).
fn queue_info(
    row: &Row,
    now_ms: Millis,
    counters_of: impl Fn(i32) -> sluice_core::store::Counters,
) -> StoreResult<QueueInfo> {
    let name: String = row.get(0);
    let config = parse_config(&name, row.get(1))?;
    let count = |index: usize| row.get::<_, i64>(index).max(0) as u64;
    let oldest: Option<i64> = row.get(7);
    let dead_letter_depth = config
        .dead_letter_queue
        .as_ref()
        .map(|_| row.get::<_, Option<i64>>(8).unwrap_or(0).max(0) as u64);
    Ok(QueueInfo {
        depth: QueueDepth {
            ready: count(3) + count(4),
            delayed: count(5),
            in_flight: count(6),
            oldest_ready_age_ms: oldest.map(|at| (now_ms - at).max(0)),
            paused: row.get(2),
            counters: counters_of(row.get(9)),
            ..QueueDepth::default()
        },
        name,
        config,
        dead_letter_depth,
        is_push_paused: row.get(10),
    })
}

/// A `queues.config` value as the definition of queue `name`.
fn parse_config(name: &str, text: &str) -> StoreResult<QueueConfig> {
    StoredQueueConfig::from_json(text)
        .and_then(|stored| stored.into_config(name))
        .map_err(|e| {
            StoreError::Other(format!("the stored definition of queue {name:?}: {e}").into())
        })
}

#[async_trait]
impl QueueStore for PgStore {
    /// The body bytes of every queue that stores any. `octet_length` of a stored `bytea` reads
    /// its size from the TOAST pointer, not the value.
    async fn queue_bytes(&self, now_ms: Millis) -> StoreResult<Vec<QueueBytes>> {
        let client = self.client().await?;
        let sql = format!(
            "SELECT q.name,
                COALESCE(SUM(octet_length(p.body)) FILTER (WHERE m.state IN {LIVE}), 0)::bigint,
                COALESCE(SUM(octet_length(p.body)) FILTER (WHERE m.state = 'acked'
                    AND m.kept_until_ms > $1::bigint), 0)::bigint
             FROM messages m JOIN payloads p ON p.seq = m.seq JOIN queues q ON q.id = m.queue_id
             WHERE m.state IN {LIVE} OR (m.state = 'acked' AND m.kept_until_ms > $1::bigint)
             GROUP BY q.name ORDER BY q.name COLLATE \"C\""
        );
        let rows = client.query(&sql, &[&now_ms]).await.db()?;
        Ok(rows
            .iter()
            .map(|row| QueueBytes {
                queue: row.get(0),
                held: row.get::<_, i64>(1).max(0) as u64,
                kept: row.get::<_, i64>(2).max(0) as u64,
            })
            .collect())
    }

    /// Defines or updates a queue, creating the dead-letter queue it names when missing
    /// (`Store::queue_put`).
    async fn queue_put(&self, params: QueuePutParams) -> StoreResult<QueuePut> {
        let QueuePutParams {
            name,
            config,
            now_ms,
        } = params;
        let mut client = self.client().await?;
        let transaction = client.transaction().await.db()?;
        let existing = transaction
            .query_opt(
                "SELECT id, config::text FROM queues WHERE name = $1 FOR UPDATE",
                &[&name],
            )
            .await
            .db()?;
        let stored = match &existing {
            Some(row) => Some((row.get::<_, i32>(0), parse_config(&name, row.get(1))?)),
            None => None,
        };
        let dead_letter_queue = config.dead_letter_queue.clone().filter(|dlq| *dlq != name);
        let missing_dead_letter_queue = match &dead_letter_queue {
            Some(dlq) => transaction
                .query_opt("SELECT 1 FROM queues WHERE name = $1", &[dlq])
                .await
                .db()?
                .is_none()
                .then_some(dlq.as_str()),
            None => None,
        };
        if let Some((id, stored)) = &stored {
            if missing_dead_letter_queue.is_none() && *stored == config {
                // Nothing changes (every node applies the config file's queues at each
                // start): no write, no notification.
                transaction.commit().await.db()?;
                return Ok(QueuePut {
                    created: false,
                    dead_letter_created: false,
                });
            }
            if stored.ordering != config.ordering {
                let live: i64 = transaction
                    .query_one(
                        &format!(
                            "SELECT count(*) FROM messages WHERE queue_id = $1 AND state IN {LIVE}"
                        ),
                        &[id],
                    )
                    .await
                    .db()?
                    .get(0);
                if live > 0 {
                    return Err(StoreError::Conflict(format!(
                        "cannot change ordering from {} to {} while the queue holds {live} messages",
                        stored.ordering.as_str(),
                        config.ordering.as_str(),
                    )));
                }
            }
        }
        let (id, created) = upsert(&transaction, &name, &config, now_ms).await?;
        transaction
            .execute(
                "INSERT INTO queue_state (queue_id) VALUES ($1) ON CONFLICT DO NOTHING",
                &[&id],
            )
            .await
            .db()?;
        if stored.is_some_and(|(_, stored)| stored.rate_limit != config.rate_limit) {
            // A new rate starts from a full bucket, as the index's does.
            transaction
                .execute(
                    "UPDATE queue_state SET bucket_tokens = NULL, bucket_updated_at_ms = NULL \
                     WHERE queue_id = $1",
                    &[&id],
                )
                .await
                .db()?;
        }
        let mut changed = vec![name.clone()];
        let mut dead_letter_created = false;
        if let Some(dlq) = missing_dead_letter_queue {
            // Another node may create it at this moment: both agree on one row.
            let dlq_config = QueueConfig::for_dead_letter_queue(dlq);
            if let Some(dlq_id) = insert_if_missing(&transaction, dlq, &dlq_config, now_ms).await? {
                transaction
                    .execute(
                        "INSERT INTO queue_state (queue_id) VALUES ($1) ON CONFLICT DO NOTHING",
                        &[&dlq_id],
                    )
                    .await
                    .db()?;
                dead_letter_created = true;
                changed.push(dlq.to_owned());
            }
        }
        self.announce(&transaction, "queue", &changed).await?;
        if !created {
            // Limits may have grown or a pause-like setting eased: waiters look again.
            self.notify_wake(&transaction, &name).await?;
        }
        transaction.commit().await.db()?;
        for name in &changed {
            self.cache.invalidate(name);
        }
        if !created {
            self.notifier.wake(&name);
        }
        Ok(QueuePut {
            created,
            dead_letter_created,
        })
    }

    /// A queue with its settings and depth (`Store::queue_get`): counted now, exactly; the
    /// counters of the other nodes as they last wrote them.
    async fn queue_get(&self, name: &str, now_ms: Millis) -> StoreResult<QueueInfo> {
        let client = self.client().await?;
        let statement = format!("{} WHERE q.name = $1", queue_rows_sql());
        let row = client
            .query_opt(&statement, &[&name])
            .await
            .db()?
            .ok_or_else(|| StoreError::QueueNotFound(name.to_owned()))?;
        let id: i32 = row.get(9);
        let others = counters::others(&client, self.node.node_id, Some(id)).await?;
        queue_info(&row, now_ms, |id| self.counters_of(id, &others))
    }

    /// Every queue with its depth, by name as Rust orders strings (`Store::queue_list`): the
    /// depths of the leader's last count (§2.11, at most a second or two old), so that this
    /// call, made every 500 ms by every node, never counts live messages.
    async fn queue_list(&self, now_ms: Millis) -> StoreResult<Vec<QueueInfo>> {
        let client = self.client().await?;
        let statement = format!("{} ORDER BY q.name COLLATE \"C\"", counted_queue_rows_sql());
        let (rows, others) = tokio::try_join!(
            async { client.query(&statement, &[]).await.db() },
            counters::others(&client, self.node.node_id, None),
        )?;
        rows.iter()
            .map(|row| queue_info(row, now_ms, |id| self.counters_of(id, &others)))
            .collect()
    }

    /// A queue's settings, from this node's cache when it has a current copy
    /// (`Store::queue_config`).
    async fn queue_config(&self, name: &str) -> StoreResult<std::sync::Arc<QueueConfig>> {
        Ok(self.resolve(name).await?.config)
    }

    /// Whether another queue names `name` as its dead-letter queue
    /// (`Store::queue_is_dead_letter_queue`): one probe of `queues_by_dead_letter_queue`.
    async fn queue_is_dead_letter_queue(&self, name: &str) -> StoreResult<bool> {
        let client = self.client().await?;
        let row = client
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM queues WHERE dead_letter_queue = $1)",
                &[&name],
            )
            .await
            .db()?;
        Ok(row.get(0))
    }

    /// Pauses or resumes deliveries of a queue, durably (`Store::queue_pause`); a resume wakes
    /// the queue's waiters on every node.
    async fn queue_pause(&self, name: &str, paused: bool) -> StoreResult<()> {
        let client = self.client().await?;
        let changed = client
            .execute(
                "UPDATE queue_state SET is_paused = $2 \
                 WHERE queue_id = (SELECT id FROM queues WHERE name = $1)",
                &[&name, &paused],
            )
            .await
            .db()?;
        if changed == 0 {
            return Err(StoreError::QueueNotFound(name.to_owned()));
        }
        if !paused {
            // After the commit: a waiter woken before it would find the queue still paused.
            client
                .execute("SELECT pg_notify($1, $2)", &[&self.wake_channel, &name])
                .await
                .db()?;
            self.notifier.wake(name);
        }
        Ok(())
    }

    /// Pauses or resumes the server's push delivery of a queue, durably
    /// (`Store::queue_push_pause`), and announces it as `push:<name>` on `<schema>.config` in
    /// the same statement, so every node's server looks at its push workers again.
    async fn queue_push_pause(&self, name: &str, paused: bool) -> StoreResult<()> {
        let client = self.client().await?;
        let changed = client
            .execute(
                "WITH changed AS ( \
                     UPDATE queue_state SET is_push_paused = $2 \
                     WHERE queue_id = (SELECT id FROM queues WHERE name = $1) RETURNING queue_id) \
                 SELECT pg_notify($3, 'push:' || $1) FROM changed",
                &[&name, &paused, &self.config_channel],
            )
            .await
            .db()?;
        if changed == 0 {
            return Err(StoreError::QueueNotFound(name.to_owned()));
        }
        Ok(())
    }

    /// Deletes a queue and its messages; refused while another queue dead-letters into it
    /// (`Store::queue_delete`). Returns the live messages it held.
    ///
    /// The definition, its state, lanes and idempotency keys go in one transaction with the
    /// first [`DELETE_CHUNK_ROWS`] messages; the rest of a large queue's rows belong to an id no
    /// queue can have again, and the leader's cleanup removes them (`crate::cleanup`).
    async fn queue_delete(&self, name: &str) -> StoreResult<u64> {
        let mut client = self.client().await?;
        let transaction = client.transaction().await.db()?;
        let id: i32 = transaction
            .query_opt("SELECT id FROM queues WHERE name = $1 FOR UPDATE", &[&name])
            .await
            .db()?
            .ok_or_else(|| StoreError::QueueNotFound(name.to_owned()))?
            .get(0);
        let users: Vec<String> = transaction
            .query(
                "SELECT name FROM queues WHERE dead_letter_queue = $1 AND name <> $1 \
                 ORDER BY name COLLATE \"C\"",
                &[&name],
            )
            .await
            .db()?
            .iter()
            .map(|row| row.get(0))
            .collect();
        if !users.is_empty() {
            return Err(StoreError::Conflict(format!(
                "queue {name:?} is the dead-letter queue of {}; delete those first",
                users.join(", ")
            )));
        }
        let live: i64 = transaction
            .query_one(
                &format!("SELECT count(*) FROM messages WHERE queue_id = $1 AND state IN {LIVE}"),
                &[&id],
            )
            .await
            .db()?
            .get(0);
        transaction
            .batch_execute(&format!(
                "DELETE FROM queues WHERE id = {id}; \
                 DELETE FROM queue_state WHERE queue_id = {id}; \
                 DELETE FROM lanes WHERE queue_id = {id}; \
                 DELETE FROM idempotency WHERE queue_id = {id}; \
                 WITH doomed AS ( \
                     SELECT seq FROM messages WHERE queue_id = {id} LIMIT {DELETE_CHUNK_ROWS}), \
                 {DELETE_DOOMED_SQL};"
            ))
            .await
            .db()?;
        self.announce(&transaction, "queue", &[name.to_owned()])
            .await?;
        transaction
            .execute("SELECT pg_notify($1, $2)", &[&self.wake_channel, &name])
            .await
            .db()?;
        transaction.commit().await.db()?;
        self.cache.invalidate(name);
        self.notifier.wake(name);
        Ok(live as u64)
    }

    /// Removes the messages of `name` that `scope` names (`Store::queue_purge`), in
    /// transactions of [`CHUNK_ROWS`] rows; messages enqueued after the call began stay.
    /// Unless the scope is everything, leased messages stay and may still be acked; a lane
    /// whose head was purged lets its next member go, one whose leased head stays keeps its
    /// place. A purge of everything then forgets the queue's idempotency ids. Returns how
    /// many went.
    async fn queue_purge(&self, name: &str, scope: PurgeScope, now_ms: Millis) -> StoreResult<u64> {
        let queue = self.resolve(name).await?;
        // Later enqueues take larger seqs: they are not this purge's.
        let upto: i64 = self
            .client()
            .await?
            .query_one_cached("SELECT last_value FROM message_seq", &[])
            .await?
            .get(0);
        let mut purged = 0_u64;
        let mut after = (i64::MIN, i64::MIN);
        loop {
            let (taken, last) =
                retried(|| self.purge_chunk(&queue, name, scope, upto, after, now_ms)).await?;
            purged += taken;
            match last {
                Some(last) => after = last,
                None => break,
            }
        }
        if scope == PurgeScope::Everything {
            retried(|| async {
                self.client()
                    .await?
                    .execute_cached("DELETE FROM idempotency WHERE queue_id = $1", &[&queue.id])
                    .await?;
                Ok(())
            })
            .await?;
        }
        self.count(queue.id, |counters| counters.purged += purged);
        Ok(purged)
    }
}
