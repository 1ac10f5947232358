//! The message path (docs/design/postgres-store.md §2.2-§2.5, §2.6 for nacks, build step 3):
//! enqueue with idempotency keys, lanes and `max_depth`; claim with due delays, expired leases,
//! pause, lanes and the paced path (`max_in_flight`, `rate_limit`); ack, nack, extend and give
//! back, each fenced by the receipt's lease number and token, so a stale receipt is refused by
//! every node; a lookup of one message by id or idempotency key.
//!
//! Every rule is kept by the database, never by this node's memory: the dispatch order is the
//! `messages_ready` index, claims take rows `FOR UPDATE SKIP LOCKED`, a lane's membership is
//! its `lanes` row (locked by every join and leave, §2.5), a queue's shared limits are its
//! `queue_state` row (locked by paced claims and bounded enqueues). What this node keeps is
//! only its own counters (§2.11).
//!
//! Enqueues and acks run inside the group transactions of [`crate::group`] (one commit for
//! every caller waiting); claims, nacks, extends, give-backs and lookups are each one
//! transaction on a pooled connection. A nack that ends a message's attempts moves it with
//! [`crate::dead_letter_move`]. A lease that runs out on its last attempt in a queue with a
//! dead-letter queue stays leased until the leader's upkeep moves it (§2.7, `crate::expiry`).

use crate::retry::retried;
use async_trait::async_trait;
use sluice_core::store::{CancelOutcome, LookupStore, MessageStore};
use std::collections::HashMap;
use std::sync::Arc;

use sluice_core::Millis;
use sluice_core::message::{
    BodyKind, ClaimedMessage, DeadLetterInfo, Failure, Headers, MessageState, MessageStatus,
    NewMessage, Payload, Receipt,
};
use sluice_core::queue::{Ordering, QueueConfig};
use sluice_core::rules::backoff::random_draw;
use sluice_core::rules::backpressure::queue_full_retry_after_s;
use sluice_core::rules::failure::{self, FailureDecision, LEASE_EXPIRED_ERROR};
use sluice_core::rules::lanes::lane_key;
use sluice_core::rules::token_bucket::TokenBucket;
use sluice_core::store::{
    AckParams, Claim, ClaimParams, EnqueueParams, Enqueued, ExtendParams, GiveBackParams,
    MessageBody, MessageGetParams, MessageRef, NackParams, StoreError, StoreResult,
};
use sluice_core::store::{LeaseError, NackOutcome};
use sluice_core::stored::ids;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;
use uuid::Uuid;

use crate::PgStore;
use crate::cache::CachedQueue;
use crate::cached::Cached;
use crate::dead_letter_move::{Leaving, Named};
use crate::delivery_log;
use crate::error::{Db, is_conflict};
use crate::queues::LIVE;

/// The `body_kind` column's numbers, the SQLite store's (0 JSON, 1 bytes).
const BODY_KIND_JSON: i16 = 0;
const BODY_KIND_BYTES: i16 = 1;

/// Times a transaction of one caller that failed with a deadlock or serialization failure is
/// tried again (§2.0): nothing of it was committed.
pub(crate) const RETRIES: usize = 3;

/// Most due delays or expired leases one claim turns ready (the rest go with the next claim
/// or the upkeep), so a claim's time stays bounded after a long pause.
pub(crate) const CLAIM_UPKEEP_ROWS: i64 = 1_000;

/// How a statement deletes messages: it ends with this after a CTE `doomed` that picked their
/// `seq`s, so every row leaves with its payload (migration 3) and the statement counts the
/// messages deleted.
pub(crate) const DELETE_DOOMED_SQL: &str = "unloaded AS (DELETE FROM payloads WHERE seq IN (SELECT seq FROM doomed)) \
     DELETE FROM messages WHERE seq IN (SELECT seq FROM doomed)";

/// The size of message `m`'s body, `NULL` once it is final: the body is in `payloads`
/// (migration 3), read only where it is wanted.
pub(crate) const BODY_BYTES_SQL: &str =
    "(SELECT octet_length(p.body) FROM payloads p WHERE p.seq = m.seq)";

/// The columns a claim returns and [`claimed`] reads, in order: of the leased row `m` and its
/// payload `p`.
const CLAIMED_COLUMNS: &str = "m.seq, m.id, m.lease_number, m.lease_token, p.body, m.body_kind, \
     p.headers, m.idempotency_key, m.msg_key, m.priority, m.attempts, m.enqueued_at_ms, \
     m.first_received_at_ms, m.last_error, m.lease_expires_at_ms, m.dead_source_queue, \
     m.dead_last_error, m.dead_attempts, m.dead_first_seen_at_ms, m.dead_last_seen_at_ms";

/// U1 of §2.3: delays of a queue that are due become ready.
///
/// Here and in [`LEASES_EXPIRED_SQL`] and [`CLAIM_SQL`] the outer statement finds its rows by
/// `seq` alone, without repeating the state the subquery chose them by: the subquery's
/// `FOR UPDATE` re-checked its conditions on the row's latest version and the lock keeps
/// anyone else from changing it, so a second check adds nothing, and it makes the state's
/// partial index usable for the `seq` lookup. A generic plan made while the table's statistics
/// said it was empty (a new schema, the first minute) took exactly that index, scanning all of
/// it for each row: a claim cost milliseconds instead of microseconds under load.
pub(crate) const READY_DUE_SQL: &str = "UPDATE messages SET state = 'ready' \
     WHERE seq IN (SELECT seq FROM messages \
                   WHERE queue_id = $1 AND state = 'delayed' AND visible_at_ms <= $2 \
                   ORDER BY visible_at_ms LIMIT $3 FOR UPDATE SKIP LOCKED)";

/// U2 of §2.3: leases of a queue that ran out are failed attempts retried at once, unless
/// they were the last attempt of a queue with a dead-letter queue ([`expiry_rule`]).
pub(crate) const LEASES_EXPIRED_SQL: &str = "UPDATE messages m \
     SET state = 'ready', visible_at_ms = $2, lease_expires_at_ms = NULL, \
         last_error = $6::text, \
         failures = coalesce(m.failures, '[]'::jsonb) || jsonb_build_object( \
             'attempt', m.attempts, 'at', $2::bigint, 'error', $6::text) \
     WHERE m.seq IN (SELECT seq FROM messages \
                     WHERE queue_id = $1 AND state = 'leased' \
                       AND lease_expires_at_ms <= $2 \
                       AND NOT ($4::int > 0 AND attempts >= $4::int AND $5::boolean) \
                     ORDER BY lease_expires_at_ms LIMIT $3 FOR UPDATE SKIP LOCKED)";

/// C of §2.3: up to $2 ready messages of a queue that is not paused, by priority then seq,
/// leased until $4. A lane's member is taken only when no member of its lane is leased and
/// none before it is ready or delayed (`rules::lanes`): without runs a lane has one active
/// member and this always holds for it; with runs it keeps a run's members, and what comes
/// back of a run, in order.
pub(crate) static CLAIM_SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "WITH picked AS MATERIALIZED ( \
             SELECT seq FROM messages m \
             WHERE queue_id = $1 AND state = 'ready' \
               AND NOT EXISTS (SELECT 1 FROM queue_state s \
                               WHERE s.queue_id = $1 AND s.is_paused) \
               AND (m.lane_key IS NULL OR NOT EXISTS ( \
                   SELECT 1 FROM messages o \
                   WHERE o.queue_id = $1 AND o.lane_key = m.lane_key AND o.seq <> m.seq \
                     AND o.state IN ('ready', 'delayed', 'leased') \
                     AND (o.state = 'leased' OR o.seq < m.seq))) \
             ORDER BY priority DESC, seq \
             LIMIT $2 \
             FOR UPDATE SKIP LOCKED), \
         leased AS ( \
         UPDATE messages m SET {} \
         FROM picked WHERE m.seq = picked.seq \
         RETURNING m.*) \
         SELECT {CLAIMED_COLUMNS} FROM leased m LEFT JOIN payloads p ON p.seq = m.seq",
        lease_set(3, 4)
    )
});

/// The `SET` of a lease of `m` taken at parameter `$at` until `$until`: one more attempt, a
/// new lease number and token.
fn lease_set(at: usize, until: usize) -> String {
    format!(
        "state = 'leased', attempts = m.attempts + 1, \
         lease_number = m.lease_number + 1, lease_token = lease_token(), \
         leased_at_ms = ${at}, lease_expires_at_ms = ${until}, \
         first_received_at_ms = coalesce(m.first_received_at_ms, ${at})"
    )
}

/// The members of a run ([`ClaimParams::lane_runs`]), locked by the caller: leased with the
/// head before them, at $2 until $3.
static LEASE_RUN_SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "WITH leased AS ( \
         UPDATE messages m SET {} \
         WHERE m.seq = ANY($1) \
         RETURNING m.*) \
         SELECT {CLAIMED_COLUMNS} FROM leased m LEFT JOIN payloads p ON p.seq = m.seq",
        lease_set(2, 3)
    )
});

/// N of §2.3: when to look again, the next delay to end or lease to run out. Leases already
/// out on their last attempt wait for the upkeep, not for this queue's claims.
const NEXT_CHANGE_SQL: &str = "SELECT least( \
     (SELECT min(visible_at_ms) FROM messages WHERE queue_id = $1 AND state = 'delayed'), \
     (SELECT min(lease_expires_at_ms) FROM messages \
      WHERE queue_id = $1 AND state = 'leased' AND lease_expires_at_ms > $2))";

/// Ends whatever transaction a failed flight left open on `client`, or, when even that fails,
/// keeps the connection out of the pool: a pooled connection must never carry a transaction
/// to its next user.
pub(crate) async fn roll_back(client: deadpool_postgres::Object) {
    if client.batch_execute("ROLLBACK").await.is_err() {
        drop(deadpool_postgres::Object::take(client));
    }
}

/// The two facts of a queue's configuration [`LEASES_EXPIRED_SQL`] reads: `max_attempts`
/// and whether it has a dead-letter queue.
pub(crate) fn expiry_rule(config: &QueueConfig) -> (i32, bool) {
    (
        i32::try_from(config.max_attempts).unwrap_or(i32::MAX),
        config.dead_letter_queue.is_some(),
    )
}

/// Behind each claimed message of a lane, the members that follow it while they are visible
/// ([`ClaimParams::lane_runs`]), leased with it, up to `room` in all; in the order handed out:
/// each head, then its run. A member another transaction holds ends the run there.
async fn lease_runs(
    transaction: &deadpool_postgres::Transaction<'_>,
    queue: &CachedQueue,
    heads: Vec<ClaimedMessage>,
    mut room: usize,
    now_ms: Millis,
    lease_expires_at_ms: Millis,
) -> StoreResult<Vec<ClaimedMessage>> {
    let mut out = Vec::with_capacity(heads.len());
    for head in heads {
        let key = head.key.as_deref().map(Arc::<str>::from);
        let lane = lane_key(queue.config.ordering, key.as_ref());
        let seq = ids::decode(&head.message_id).and_then(|seq| i64::try_from(seq).ok());
        out.push(head);
        let (Some(lane), Some(seq)) = (lane, seq) else {
            continue;
        };
        if room == 0 {
            continue;
        }
        let rows = transaction
            .query_cached(
                "SELECT seq, state::text, visible_at_ms FROM messages \
                 WHERE queue_id = $1 AND lane_key = $2 AND seq > $3 \
                   AND state IN ('waiting', 'ready', 'delayed', 'leased') \
                 ORDER BY seq LIMIT $4",
                &[&queue.id, &&*lane, &seq, &(room as i64)],
            )
            .await?;
        let candidates: Vec<i64> = rows
            .iter()
            .take_while(|row| {
                matches!(row.get::<_, &str>(1), "waiting" | "ready")
                    && row.get::<_, i64>(2) <= now_ms
            })
            .map(|row| row.get(0))
            .collect();
        if candidates.is_empty() {
            continue;
        }
        let locked: std::collections::HashSet<i64> = transaction
            .query_cached(
                "SELECT seq FROM messages WHERE seq = ANY($1) AND state IN ('waiting', 'ready') \
                 FOR UPDATE SKIP LOCKED",
                &[&candidates],
            )
            .await?
            .iter()
            .map(|row| row.get(0))
            .collect();
        let run: Vec<i64> = candidates
            .into_iter()
            .take_while(|seq| locked.contains(seq))
            .collect();
        if run.is_empty() {
            continue;
        }
        let mut rows = transaction
            .query_cached(&LEASE_RUN_SQL, &[&run, &now_ms, &lease_expires_at_ms])
            .await?;
        rows.sort_by_key(|row| row.get::<_, i64>(0));
        for row in &rows {
            out.push(claimed(row)?);
        }
        room = room.saturating_sub(rows.len());
    }
    Ok(out)
}

/// Claimed rows as the trait hands them out, in dispatch order (`RETURNING` does not keep
/// the index's order).
fn claimed_in_order(rows: &[Row]) -> StoreResult<Vec<ClaimedMessage>> {
    let mut claimed_rows = rows
        .iter()
        .map(|row| Ok((row.get::<_, i32>(9), row.get::<_, i64>(0), claimed(row)?)))
        .collect::<StoreResult<Vec<_>>>()?;
    claimed_rows.sort_by_key(|&(priority, seq, _)| (std::cmp::Reverse(priority), seq));
    Ok(claimed_rows
        .into_iter()
        .map(|(_, _, message)| message)
        .collect())
}

/// A receipt as the row it fences: `(seq, id, lease_number, token)`.
#[derive(Debug, Clone, Copy)]
struct Fence {
    seq: i64,
    id: Uuid,
    lease_number: i32,
    token: i32,
}

impl Fence {
    /// `None` for an id this store did not make: such a receipt is stale.
    fn of(receipt: &Receipt) -> Option<Self> {
        let seq = ids::decode(&receipt.message_id)?;
        Some(Self {
            seq: i64::try_from(seq).ok()?,
            id: receipt.message_id,
            // The columns are `integer`: the receipt's u32s are kept bit for bit.
            lease_number: receipt.lease_number as i32,
            token: receipt.token as i32,
        })
    }
}

impl PgStore {
    /// Leases up to `max` ready messages (`Store::message_claim`, §2.3). `recorded`: the commit
    /// waits for the flush, so the attempts counted are durable when this returns
    /// (`message_claim_recorded`); otherwise the lease change is committed asynchronously, except
    /// on an ordered queue ([`lease_change_waits_for_flush`]).
    pub(crate) async fn claim(&self, params: ClaimParams, recorded: bool) -> StoreResult<Claim> {
        let mut tries = 0;
        loop {
            match self.claim_once(params.clone(), recorded).await {
                Err(error) if is_conflict(&error) && tries < RETRIES => tries += 1,
                outcome => return outcome,
            }
        }
    }

    async fn claim_once(&self, params: ClaimParams, recorded: bool) -> StoreResult<Claim> {
        let queue = self.resolve(&params.queue).await?;
        let config = queue.config.clone();
        let now_ms = params.now_ms;
        let lease_ms = params.lease_ms.unwrap_or(config.visibility_timeout_ms);
        // Paced queues: the shared limits live in the queue_state row, held until commit.
        let is_paced = config.max_in_flight.is_some() || config.rate_limit.is_some();
        // A run is read after its head is leased: not in the one flight of the unpaced claim.
        let runs = params.lane_runs && config.ordering != Ordering::Unordered;
        if !is_paced && !runs {
            return self.claim_unpaced(&queue, params, recorded).await;
        }
        let mut client = self.client().await?;
        let transaction = client.transaction().await.db()?;
        let durability = if lease_change_waits_for_flush(&config, recorded) {
            "SELECT 1"
        } else {
            "SET LOCAL synchronous_commit = off"
        };
        transaction.batch_execute(durability).await.db()?;
        let mut bucket = None;
        // The queue's state row, locked until commit: whether it is paused, and its bucket.
        {
            let row = transaction
                .query_opt_cached(
                    "SELECT is_paused, bucket_tokens, bucket_updated_at_ms FROM queue_state \
                     WHERE queue_id = $1 FOR UPDATE",
                    &[&queue.id],
                )
                .await?
                .ok_or_else(|| StoreError::QueueNotFound(params.queue.clone()))?;
            if row.get::<_, bool>(0) {
                transaction.commit().await.db()?;
                return Ok(Claim::default());
            }
            if let Some(limit) = &config.rate_limit {
                let mut tokens = match (row.get(1), row.get(2)) {
                    (Some(tokens), Some(updated_at_ms)) => TokenBucket {
                        tokens,
                        updated_at_ms,
                    },
                    _ => TokenBucket::full(limit, now_ms),
                };
                tokens.refill(now_ms, limit);
                bucket = Some(tokens);
            }
        }

        let expired = ready_due(&transaction, queue.id, &config, now_ms).await?;

        let mut allowed = params.max as i64;
        if let Some(max_in_flight) = config.max_in_flight {
            let limit = i64::from(max_in_flight);
            let leased: i64 = transaction
                .query_one_cached(
                    "SELECT count(*) FROM (SELECT 1 FROM messages \
                     WHERE queue_id = $1 AND state = 'leased' LIMIT $2) AS leased",
                    &[&queue.id, &limit],
                )
                .await?
                .get(0);
            allowed = allowed.min(limit - leased);
        }
        if let Some(bucket) = &bucket {
            allowed = allowed.min(bucket.available() as i64);
        }

        let mut messages = Vec::new();
        if allowed > 0 {
            let lease_expires_at_ms = now_ms + lease_ms;
            let rows = transaction
                .query_cached(
                    &CLAIM_SQL,
                    &[&queue.id, &allowed, &now_ms, &lease_expires_at_ms],
                )
                .await?;
            messages = claimed_in_order(&rows)?;
            if runs {
                let room = (allowed as usize).saturating_sub(messages.len());
                messages = lease_runs(
                    &transaction,
                    &queue,
                    messages,
                    room,
                    now_ms,
                    lease_expires_at_ms,
                )
                .await?;
            }
        }

        // When to look again: the next delay to end or lease to run out. Leases already out
        // on their last attempt wait for the upkeep, not for this queue's claims.
        let mut next_change_at_ms: Option<Millis> = transaction
            .query_one_cached(NEXT_CHANGE_SQL, &[&queue.id, &now_ms])
            .await?
            .get(0);
        if let (Some(mut tokens), Some(limit)) = (bucket, &config.rate_limit) {
            tokens.take(messages.len());
            if messages.is_empty()
                && let Some(at) = tokens.next_token_at(limit)
            {
                next_change_at_ms = Some(next_change_at_ms.map_or(at, |next| next.min(at)));
            }
            transaction
                .execute_cached(
                    "UPDATE queue_state SET bucket_tokens = $2, bucket_updated_at_ms = $3 \
                     WHERE queue_id = $1",
                    &[&queue.id, &tokens.tokens, &tokens.updated_at_ms],
                )
                .await?;
        }
        transaction.commit().await.db()?;
        let delivered = messages.len() as u64;
        self.count(queue.id, |counters| {
            counters.delivered += delivered;
            counters.lease_expired += expired;
        });
        Ok(Claim {
            messages,
            next_change_at_ms,
        })
    }

    /// A claim of a queue without shared limits: `BEGIN`, both upkeeps (U1, U2), the claim (C)
    /// and `COMMIT` go in one flight (§2.0, "Pipelining"), since nothing is decided between
    /// them; the look for the next change (N) follows, after the commit, only when nothing was
    /// leased.
    ///
    /// The statements are prepared first, so every request of the flight is handed to the
    /// connection on the first poll, in order: a caller that stops waiting leaves a transaction
    /// that still ends with its `COMMIT`. After an error the connection is rolled back before it
    /// goes back to the pool (a `ROLLBACK` after the flight's `COMMIT` only warns).
    async fn claim_unpaced(
        &self,
        queue: &CachedQueue,
        params: ClaimParams,
        recorded: bool,
    ) -> StoreResult<Claim> {
        let now_ms = params.now_ms;
        let lease_ms = params
            .lease_ms
            .unwrap_or(queue.config.visibility_timeout_ms);
        let client = self.client().await?;
        let prepared = tokio::try_join!(
            client.prepare_cached(READY_DUE_SQL),
            client.prepare_cached(LEASES_EXPIRED_SQL),
            client.prepare_cached(&CLAIM_SQL),
            client.prepare_cached(NEXT_CHANGE_SQL),
        )
        .db()?;
        let begin = if lease_change_waits_for_flush(&queue.config, recorded) {
            "BEGIN"
        } else {
            "BEGIN; SET LOCAL synchronous_commit = off"
        };
        let (max_attempts, has_dead_letter_queue) = expiry_rule(&queue.config);
        let (max, lease_expires_at_ms) = (params.max as i64, now_ms + lease_ms);
        let ready_due_params: [&(dyn ToSql + Sync); 3] = [&queue.id, &now_ms, &CLAIM_UPKEEP_ROWS];
        let expired_params: [&(dyn ToSql + Sync); 6] = [
            &queue.id,
            &now_ms,
            &CLAIM_UPKEEP_ROWS,
            &max_attempts,
            &has_dead_letter_queue,
            &LEASE_EXPIRED_ERROR,
        ];
        let claim_params: [&(dyn ToSql + Sync); 4] =
            [&queue.id, &max, &now_ms, &lease_expires_at_ms];
        let flight = tokio::try_join!(
            client.batch_execute(begin),
            client.execute(&prepared.0, &ready_due_params),
            client.execute(&prepared.1, &expired_params),
            client.query(&prepared.2, &claim_params),
            client.batch_execute("COMMIT"),
        );
        let (_, _, expired, rows, _) = match flight {
            Ok(done) => done,
            Err(error) => {
                roll_back(client).await;
                return Err(error).db();
            }
        };
        let messages = claimed_in_order(&rows)?;
        let delivered = messages.len() as u64;
        self.count(queue.id, |counters| {
            counters.delivered += delivered;
            counters.lease_expired += expired;
        });
        // When to look again matters only to a claim that found nothing (`Claim`), and the
        // look walks the leased index's dead entries under load.
        let next_change_at_ms = if messages.is_empty() {
            client
                .query_one(&prepared.3, &[&queue.id, &now_ms])
                .await
                .db()?
                .get(0)
        } else {
            None
        };
        Ok(Claim {
            messages,
            next_change_at_ms,
        })
    }

    async fn nack_once(&self, params: NackParams) -> StoreResult<NackOutcome> {
        let queue = self.resolve(&params.queue).await?;
        let config = queue.config.clone();
        let now_ms = params.now_ms;
        let Some(fence) = Fence::of(&params.receipt) else {
            return Err(LeaseError::Stale.into());
        };
        // A dead-letter queue that may be needed exists before the transaction starts (made
        // as the index makes it when it is missing).
        let dead_letter_queue = match &config.dead_letter_queue {
            Some(dlq) if params.permanent || config.max_attempts > 0 => {
                Some(self.dead_letter_queue(dlq, now_ms).await?)
            }
            _ => None,
        };

        let mut client = self.client().await?;
        let transaction = client.transaction().await.db()?;
        if config.ordering != Ordering::Unordered {
            lock_lanes_of(&transaction, queue.id, &[fence.seq]).await?;
        }
        let row = transaction
            .query_opt_cached(
                "SELECT attempts, lane_key, msg_key FROM messages \
                 WHERE seq = $1 AND id = $2 AND queue_id = $3 AND state = 'leased' \
                   AND lease_number = $4 AND lease_token = $5 \
                 FOR UPDATE",
                &[
                    &fence.seq,
                    &fence.id,
                    &queue.id,
                    &fence.lease_number,
                    &fence.token,
                ],
            )
            .await?;
        let Some(row) = row else {
            let refusal = refusal(&transaction, queue.id, &fence).await?;
            return Err(refusal.into());
        };
        let attempts: i32 = row.get(0);
        let source_lane: Option<String> = row.get(1);
        if let Some(delivery) = &params.delivery {
            // Before the decision: the log follows the message into its dead-letter queue.
            delivery_log::append(&transaction, fence.seq, delivery).await?;
        }
        let msg_key: Option<String> = row.get(2);
        let failure = if params.permanent {
            failure::Failure::Rejected
        } else {
            failure::Failure::Nacked {
                delay_ms: params.delay_ms,
            }
        };
        let decision = failure::decide(
            &config,
            attempts.max(0) as u32,
            failure,
            now_ms,
            random_draw,
        )
        .map_err(|_| LeaseError::NoDeadLetterQueue)?;
        let outcome = match decision {
            FailureDecision::Retry { at_ms } => {
                transaction
                    .execute_cached(
                        "UPDATE messages \
                         SET state = CASE WHEN $2::bigint <= $3::bigint \
                                          THEN 'ready'::message_state ELSE 'delayed' END, \
                             visible_at_ms = $2, last_error = $4::text, lease_token = NULL, \
                             lease_expires_at_ms = NULL, \
                             failures = coalesce(failures, '[]'::jsonb) || jsonb_build_object( \
                                 'attempt', attempts, 'at', $3::bigint, 'error', $4::text) \
                         WHERE seq = $1",
                        &[&fence.seq, &at_ms, &now_ms, &params.error],
                    )
                    .await?;
                self.notify_wake(&transaction, &params.queue).await?;
                NackOutcome::Retry {
                    visible_at_ms: at_ms,
                }
            }
            FailureDecision::DeadLetter { queue: dlq, .. } => {
                let target = dead_letter_queue
                    .clone()
                    .ok_or_else(|| StoreError::QueueNotFound(dlq.to_owned()))?;
                crate::dead_letter_move::move_rows(
                    &transaction,
                    &self.wake_channel,
                    Named {
                        name: &params.queue,
                        queue: &queue,
                    },
                    &[Leaving {
                        seq: fence.seq,
                        lane_key: source_lane,
                        msg_key,
                    }],
                    Named {
                        name: dlq,
                        queue: &target,
                    },
                    params.error.as_deref(),
                    now_ms,
                )
                .await?;
                NackOutcome::DeadLettered {
                    queue: Arc::from(dlq),
                }
            }
        };
        transaction.commit().await.db()?;
        self.notifier.wake(&params.queue);
        let dead_lettered = matches!(outcome, NackOutcome::DeadLettered { .. });
        if let NackOutcome::DeadLettered { queue: dlq } = &outcome {
            self.notifier.wake(dlq);
        }
        self.count(queue.id, |counters| {
            counters.nacked += 1;
            counters.dead_lettered += u64::from(dead_lettered);
        });
        if let (true, Some(target)) = (dead_lettered, &dead_letter_queue) {
            // The dead-letter queue counts what arrives, as the index does.
            self.count(target.id, |counters| counters.enqueued += 1);
        }
        Ok(outcome)
    }

    async fn extend_once(&self, params: ExtendParams) -> StoreResult<Millis> {
        let queue = self.resolve(&params.queue).await?;
        let Some(fence) = Fence::of(&params.receipt) else {
            return Err(LeaseError::Stale.into());
        };
        let mut client = self.client().await?;
        let transaction = client.transaction().await.db()?;
        if !lease_change_waits_for_flush(&queue.config, false) {
            transaction
                .batch_execute("SET LOCAL synchronous_commit = off")
                .await
                .db()?;
        }
        let deadline = params.now_ms + params.timeout_ms;
        let row = transaction
            .query_opt_cached(
                "UPDATE messages SET lease_expires_at_ms = $6 \
                 WHERE seq = $1 AND id = $2 AND queue_id = $3 AND state = 'leased' \
                   AND lease_number = $4 AND lease_token = $5 \
                 RETURNING lease_expires_at_ms",
                &[
                    &fence.seq,
                    &fence.id,
                    &queue.id,
                    &fence.lease_number,
                    &fence.token,
                    &deadline,
                ],
            )
            .await?;
        let Some(row) = row else {
            let refusal = refusal(&transaction, queue.id, &fence).await?;
            return Err(refusal.into());
        };
        transaction.commit().await.db()?;
        Ok(row.get(0))
    }

    async fn give_back_once(&self, params: GiveBackParams) -> StoreResult<()> {
        let queue = self.resolve(&params.queue).await?;
        let Some(fence) = Fence::of(&params.receipt) else {
            return Err(LeaseError::Stale.into());
        };
        let mut client = self.client().await?;
        let transaction = client.transaction().await.db()?;
        transaction
            .batch_execute("SET LOCAL synchronous_commit = off")
            .await
            .db()?;
        let changed = transaction
            .execute_cached(
                // Unstarted: the delivery is not counted either (attempts and first receive as
                // before the claim).
                "UPDATE messages SET state = 'ready', visible_at_ms = $6, lease_expires_at_ms = NULL, \
                     attempts = CASE WHEN $7 THEN greatest(attempts - 1, 0) ELSE attempts END, \
                     first_received_at_ms = CASE WHEN $7 AND attempts <= 1 THEN NULL \
                                                 ELSE first_received_at_ms END \
                 WHERE seq = $1 AND id = $2 AND queue_id = $3 AND state = 'leased' \
                   AND lease_number = $4 AND lease_token = $5",
                &[
                    &fence.seq,
                    &fence.id,
                    &queue.id,
                    &fence.lease_number,
                    &fence.token,
                    &params.now_ms,
                    &params.unstarted,
                ],
            )
            .await?;
        if changed == 0 {
            let refusal = refusal(&transaction, queue.id, &fence).await?;
            return Err(refusal.into());
        }
        self.notify_wake(&transaction, &params.queue).await?;
        transaction.commit().await.db()?;
        self.notifier.wake(&params.queue);
        Ok(())
    }

    /// A message found as [`PgStore::get_message`] finds it, with its body and headers while
    /// the row keeps them (`Store::message_body`).
    pub(crate) async fn message_with_body(
        &self,
        params: MessageGetParams,
        prefix: Option<usize>,
    ) -> StoreResult<Option<MessageBody>> {
        let body = match prefix {
            None => Body::Whole,
            Some(max) => Body::Prefix(i32::try_from(max).unwrap_or(i32::MAX)),
        };
        Ok(self
            .find_message(params, body)
            .await?
            .map(|(status, payload)| MessageBody { status, payload }))
    }

    pub(crate) async fn find_message(
        &self,
        params: MessageGetParams,
        body: Body,
    ) -> StoreResult<Option<(MessageStatus, Option<Payload>)>> {
        let queue = self.resolve(&params.queue).await?;
        let client = self.client().await?;
        let id = match &params.by {
            MessageRef::Id(id) => *id,
            MessageRef::IdempotencyKey(key) => {
                let row = client
                    .query_opt_cached(
                        "SELECT message_id FROM idempotency \
                         WHERE queue_id = $1 AND key = $2 AND expires_at_ms > $3",
                        &[&queue.id, key, &params.now_ms],
                    )
                    .await?;
                match row {
                    Some(row) => row.get(0),
                    None => return Ok(None),
                }
            }
        };
        let Some(seq) = ids::decode(&id).and_then(|seq| i64::try_from(seq).ok()) else {
            return Ok(None);
        };
        // The body is read only when asked for: a status lookup never moves it. A kept acked
        // message's payload is its body until the keep ends; the cleanup deletes it later.
        // A prefix is cut by the database (`substring` of a TOASTed bytea fetches only the
        // chunks that hold it): a page of previews does not read whole bodies.
        let body_columns = match body {
            Body::Whole => "p.body, m.body_kind, p.headers",
            Body::Prefix(_) => "substring(p.body from 1 for $6), m.body_kind, NULL::jsonb",
            Body::None => "NULL::bytea, m.body_kind, NULL::jsonb",
        };
        let sql = format!(
            "SELECT {STATUS_COLUMNS}, {body_columns} \
             FROM messages m JOIN queues q ON q.id = m.queue_id \
             LEFT JOIN payloads p ON p.seq = m.seq \
                 AND (m.kept_until_ms IS NULL OR m.kept_until_ms > $5) \
             WHERE m.seq = $1 AND m.id = $2 \
               AND (m.queue_id = $3 OR m.dead_source_queue = $4)"
        );
        let row = match body {
            Body::Prefix(max) => {
                client
                    .query_opt_cached(
                        &sql,
                        &[&seq, &id, &queue.id, &params.queue, &params.now_ms, &max],
                    )
                    .await?
            }
            Body::Whole | Body::None => {
                client
                    .query_opt_cached(&sql, &[&seq, &id, &queue.id, &params.queue, &params.now_ms])
                    .await?
            }
        };
        let Some(row) = row else {
            return Ok(None);
        };
        let body: Option<Vec<u8>> = row.get(STATUS_COLUMNS_COUNT);
        let payload = match body {
            Some(body) => Some(payload(
                Some(body),
                row.get(STATUS_COLUMNS_COUNT + 1),
                row.get(STATUS_COLUMNS_COUNT + 2),
            )?),
            None => None,
        };
        Ok(Some((status(&row)?.kept_as_of(params.now_ms), payload)))
    }

    /// `pg_notify('<schema>.wake', queue)` inside `transaction`: sent at its commit to every
    /// node's listener, never for a rollback; identical ones of a transaction are folded.
    pub(crate) async fn notify_wake(
        &self,
        transaction: &impl Cached,
        queue: &str,
    ) -> StoreResult<()> {
        notify_wake(transaction, &self.wake_channel, queue).await
    }
}

/// `pg_notify(channel, queue)` inside `transaction`: sent at its commit to every node's
/// listener, never for a rollback; identical ones of a transaction are folded.
pub(crate) async fn notify_wake(
    transaction: &impl Cached,
    channel: &str,
    queue: &str,
) -> StoreResult<()> {
    transaction
        .execute_cached("SELECT pg_notify($1, $2)", &[&channel, &queue])
        .await?;
    Ok(())
}

/// The statements of one enqueue inside a group's transaction (§2.2): admission against
/// `max_depth` under the queue's `queue_state` lock, ids from `message_seq`, idempotency keys
/// taken in `idempotency` (the primary key makes one message per key whatever node sends it).
/// Its new rows join `rows`, which the group inserts in one statement once every batch is
/// through ([`insert_rows`]); `seqs` are this batch's, taken by the group in one statement.
/// The group has locked the existing lanes of its messages already
/// ([`lock_lanes_for_enqueue`]); the rows earlier batches of the group will add to a bounded
/// queue count as held in its admission.
///
/// `Ok(Err(QueueFull))` refuses this batch alone: nothing of it was written, and the group's
/// other batches go on. `Err` fails the whole group.
pub(crate) async fn enqueue_in(
    transaction: &impl Cached,
    queue: &CachedQueue,
    name: &str,
    messages: &[NewMessage],
    now_ms: Millis,
    seqs: &[i64],
    rows: &mut NewRows,
) -> StoreResult<StoreResult<Vec<Enqueued>>> {
    let config = queue.config.clone();
    let count = messages.len();
    let earlier = rows.of_queue(queue.id);

    // Held messages, counted only for a bounded queue (at most max_depth + 1 index entries).
    let mut held = 0_u64;
    if let Some(max_depth) = config.max_depth {
        transaction
            .execute_cached(
                "SELECT 1 FROM queue_state WHERE queue_id = $1 FOR UPDATE",
                &[&queue.id],
            )
            .await?;
        // A new statement after the lock: it sees what the lock's last holder committed.
        let limit = i64::try_from(max_depth).unwrap_or(i64::MAX - 1) + 1;
        let depth: i64 = transaction
            .query_one_cached(
                &format!(
                    "SELECT count(*) FROM (SELECT 1 FROM messages \
                     WHERE queue_id = $1 AND state IN {LIVE} LIMIT $2) AS held"
                ),
                &[&queue.id, &limit],
            )
            .await?
            .get(0);
        held = depth.max(0) as u64 + earlier;
        if held + count as u64 > max_depth {
            return Ok(Err(StoreError::QueueFull {
                queue: name.to_owned(),
                depth: held,
                max_depth,
                refused: count as u64,
                // The rule every store answers with; no ack rate is measured here yet (the
                // node's meter comes with step 4), which the rule reads as nothing acked.
                retry_after_s: queue_full_retry_after_s(count as u64, 0.0),
            }));
        }
    }

    let message_ids: Vec<Uuid> = seqs
        .iter()
        .map(|&seq| ids::encode(seq as u64, now_ms))
        .collect();

    // The first message of a key in the batch is the one that may be stored; later ones
    // answer with whatever it turns out to be.
    let mut first_of_key: HashMap<&str, usize> = HashMap::new();
    let mut keyed = Vec::new();
    for (i, message) in messages.iter().enumerate() {
        if let Some(key) = message.idempotency_key.as_deref() {
            first_of_key.entry(key).or_insert_with(|| {
                keyed.push(i);
                i
            });
        }
    }
    let lanes = lanes_of(&config, messages);

    // For each message: `None` when it is stored, `Some(id)` when it is a duplicate of id.
    let mut duplicate_of: Vec<Option<Uuid>> = vec![None; count];
    if !keyed.is_empty() {
        let taken = take_keys(
            transaction,
            queue.id,
            &keyed
                .iter()
                .map(|&i| messages[i].idempotency_key.clone().unwrap_or_default())
                .collect::<Vec<_>>(),
            &keyed.iter().map(|&i| message_ids[i]).collect::<Vec<_>>(),
            now_ms,
            config.dedup_window_ms,
        )
        .await?;
        for (&i, existing) in keyed.iter().zip(taken) {
            duplicate_of[i] = existing;
        }
        for (i, message) in messages.iter().enumerate() {
            if let Some(key) = message.idempotency_key.as_deref() {
                let first = first_of_key[key];
                if first != i {
                    duplicate_of[i] = Some(duplicate_of[first].unwrap_or(message_ids[first]));
                }
            }
        }
    }

    for (i, message) in messages.iter().enumerate() {
        if duplicate_of[i].is_some() {
            continue;
        }
        rows.push(
            queue.id,
            now_ms,
            seqs[i],
            message_ids[i],
            lanes[i].clone(),
            message,
        );
    }

    let mut position = held;
    Ok(Ok(message_ids
        .iter()
        .zip(duplicate_of)
        .map(|(&id, duplicate)| match duplicate {
            Some(original) => Enqueued {
                message_id: original,
                created: false,
                position: 0,
            },
            None => {
                let enqueued = Enqueued {
                    message_id: id,
                    created: true,
                    position,
                };
                position += 1;
                enqueued
            }
        })
        .collect()))
}

/// The lanes of a group's new messages, per queue id.
pub(crate) fn lanes_of(config: &QueueConfig, messages: &[NewMessage]) -> Vec<Option<String>> {
    messages
        .iter()
        .map(|message| {
            let key = message.key.as_deref().map(Arc::<str>::from);
            lane_key(config.ordering, key.as_ref()).map(|lane| lane.to_string())
        })
        .collect()
}

/// Locks the existing lane rows a group of enqueues joins, in (queue, key) order: lanes
/// before idempotency keys, the order acks take them in (lanes, then the memo), so an enqueue
/// of a key whose message is being acked cannot deadlock with it, nor two groups with each
/// other.
pub(crate) async fn lock_lanes_for_enqueue(
    transaction: &impl Cached,
    lanes: &[(i32, String)],
) -> StoreResult<()> {
    if lanes.is_empty() {
        return Ok(());
    }
    let (queue_ids, keys): (Vec<i32>, Vec<&str>) = lanes
        .iter()
        .map(|(queue_id, key)| (*queue_id, key.as_str()))
        .unzip();
    transaction
        .execute_cached(
            "SELECT 1 FROM lanes l \
             WHERE (l.queue_id, l.lane_key) IN ( \
                 SELECT * FROM unnest($1::int[], $2::text[])) \
             ORDER BY l.queue_id, l.lane_key FOR UPDATE",
            &[&queue_ids, &keys],
        )
        .await?;
    Ok(())
}

/// What one ack of a group did.
pub(crate) struct AckDone {
    /// One answer per receipt, in order.
    pub answers: Vec<Result<(), LeaseError>>,
    /// Messages acked.
    pub acked: u64,
    /// Whether this node's waiters of the queue are woken after the commit.
    pub wakes: bool,
}

/// The acks of a group in one statement (A2 of §2.4), whatever their queues: the fence is the
/// `WHERE` (the receipt's message, in its batch's queue, with its lease number and token,
/// leased or ready after a lease that ran out or was given back and nobody claimed since); the
/// lanes left are counted down and settled; the idempotency memo keeps the result. The group
/// has locked the lanes of its receipts' messages already ([`lock_lanes_for_ack`]). One
/// answer per batch, in order.
///
/// The payload goes with the ack, unless the queue keeps acked messages (`keep_acked_ms`):
/// then the row stays, with its payload, and `kept_until_ms` is the batch's time plus the
/// keep, whatever `keep_records` says; the cleanup ends the keep ([`crate::cleanup`]).
///
/// A receipt named twice in the group (by one caller or two) is acked once; the others are
/// stale, as a second ack of one receipt is.
pub(crate) async fn ack_group(
    transaction: &impl Cached,
    wake_channel: &str,
    keep_records: bool,
    batches: &[(&CachedQueue, &AckParams)],
) -> StoreResult<Vec<AckDone>> {
    let mut done: Vec<AckDone> = batches
        .iter()
        .map(|(_, params)| AckDone {
            answers: vec![Err(LeaseError::Stale); params.receipts.len()],
            acked: 0,
            wakes: false,
        })
        .collect();
    let mut seen = std::collections::HashSet::new();
    // Per receipt sent: (batch, slot), and the columns of `r`.
    let mut origins = Vec::new();
    let (mut seqs, mut message_ids, mut queue_ids) = (Vec::new(), Vec::new(), Vec::new());
    let (mut lease_numbers, mut tokens) = (Vec::new(), Vec::new());
    let (mut results, mut nows, mut kept_until) = (Vec::new(), Vec::new(), Vec::new());
    // A push attempt goes to the log of its batch's first receipt (a push ack has one).
    let (mut deliveries, mut keeps) = (Vec::new(), Vec::new());
    for (batch, (queue, params)) in batches.iter().enumerate() {
        let mut delivery = params.delivery.as_ref().map(delivery_log::columns);
        // Fixed at the ack from the queue's `keep_acked_ms` then.
        let batch_kept_until = queue.config.kept_until(params.now_ms);
        for (slot, receipt) in params.receipts.iter().enumerate() {
            let Some(fence) = Fence::of(receipt) else {
                continue;
            };
            if !seen.insert(fence.seq) {
                continue;
            }
            let (attempt, keep) = delivery.take().unzip();
            deliveries.push(attempt);
            keeps.push(keep);
            origins.push((batch, slot));
            seqs.push(fence.seq);
            message_ids.push(fence.id);
            queue_ids.push(queue.id);
            lease_numbers.push(fence.lease_number);
            tokens.push(fence.token);
            results.push(params.result.clone());
            nows.push(params.now_ms);
            kept_until.push(batch_kept_until);
        }
    }
    if origins.is_empty() {
        return Ok(done);
    }
    let fence = "m.seq = r.seq AND m.id = r.id AND m.queue_id = r.queue_id \
                 AND m.lease_number = r.lease_number AND m.lease_token = r.token \
                 AND m.state IN ('leased', 'ready')";
    let with_delivery = delivery_log::appended("m.deliveries", "r.delivery::jsonb", "r.keep");
    let record = format!(
        "UPDATE messages m \
         SET state = 'acked', finished_at_ms = r.now_ms, result = r.result, \
             lease_expires_at_ms = NULL, kept_until_ms = r.kept_until_ms, \
             deliveries = CASE WHEN r.delivery IS NULL THEN m.deliveries \
                               ELSE {with_delivery} END \
         FROM r WHERE {fence}"
    );
    let returning = "RETURNING r.i, m.seq, m.id, m.queue_id, m.lane_key, m.idempotency_key, \
                     r.result, r.now_ms, r.kept_until_ms";
    // With `acked_retention_ms = 0` no record is kept, so the ack deletes the row: one small
    // WAL record instead of a new row version with its index entries, which the cleanup would
    // delete a moment later anyway. A message its queue keeps (`keep_acked_ms`) keeps its row
    // either way.
    let finish = if keep_records {
        format!("acked AS ({record} {returning})")
    } else {
        format!(
            "kept AS ({record} AND r.kept_until_ms IS NOT NULL {returning}), \
             gone AS (DELETE FROM messages m USING r \
                      WHERE {fence} AND r.kept_until_ms IS NULL {returning}), \
             acked AS (SELECT * FROM kept UNION ALL SELECT * FROM gone)"
        )
    };
    let rows = transaction
        .query_cached(
            &format!(
                "WITH r AS ( \
                     SELECT * FROM unnest($1::bigint[], $2::uuid[], $3::int[], $4::int[], \
                                          $5::int[], $6::text[], $7::bigint[], $8::text[], \
                                          $9::int[], $10::bigint[]) \
                         WITH ORDINALITY AS r(seq, id, queue_id, lease_number, token, result, \
                                              now_ms, delivery, keep, kept_until_ms, i)), \
                 {finish}, \
                 leaving AS ( \
                     UPDATE lanes l SET members = l.members - n.leaving \
                     FROM (SELECT queue_id, lane_key, count(*) AS leaving FROM acked \
                           WHERE lane_key IS NOT NULL GROUP BY queue_id, lane_key) n \
                     WHERE l.queue_id = n.queue_id AND l.lane_key = n.lane_key), \
                 unloaded AS ( \
                     DELETE FROM payloads p USING acked \
                     WHERE p.seq = acked.seq AND acked.kept_until_ms IS NULL), \
                 memo AS ( \
                     UPDATE idempotency i SET acked_at_ms = acked.now_ms, result = acked.result \
                     FROM acked \
                     WHERE i.queue_id = acked.queue_id AND i.key = acked.idempotency_key \
                       AND i.message_id = acked.id) \
                 SELECT i, lane_key FROM acked"
            ),
            &[
                &seqs,
                &message_ids,
                &queue_ids,
                &lease_numbers,
                &tokens,
                &results,
                &nows,
                &deliveries,
                &keeps,
                &kept_until,
            ],
        )
        .await?;
    let (mut left_queues, mut left_lanes, mut left_nows) = (Vec::new(), Vec::new(), Vec::new());
    let mut is_acked = vec![false; origins.len()];
    for row in &rows {
        let sent = (row.get::<_, i64>(0) - 1) as usize;
        is_acked[sent] = true;
        let (batch, slot) = origins[sent];
        done[batch].answers[slot] = Ok(());
        done[batch].acked += 1;
        if let Some(lane) = row.get::<_, Option<String>>(1) {
            left_queues.push(batches[batch].0.id);
            left_lanes.push(lane);
            left_nows.push(batches[batch].1.now_ms);
        }
    }
    // Refused receipts (rare: a lease that ran out and was granted again, a second ack) are
    // `Stale` unless their message lives in another queue; only they are looked up.
    let refused: Vec<usize> = (0..origins.len()).filter(|&sent| !is_acked[sent]).collect();
    if !refused.is_empty() {
        fn pick<T: Copy>(column: &[T], refused: &[usize]) -> Vec<T> {
            refused.iter().map(|&sent| column[sent]).collect()
        }
        let elsewhere = transaction
            .query_cached(
                &format!(
                    "SELECT r.i FROM unnest($1::bigint[], $2::uuid[], $3::int[]) \
                         WITH ORDINALITY AS r(seq, id, queue_id, i) \
                     JOIN messages m ON m.seq = r.seq AND m.id = r.id \
                     WHERE m.queue_id <> r.queue_id AND m.state IN {LIVE}"
                ),
                &[
                    &pick(&seqs, &refused),
                    &pick(&message_ids, &refused),
                    &pick(&queue_ids, &refused),
                ],
            )
            .await?;
        for row in &elsewhere {
            let (batch, slot) = origins[refused[(row.get::<_, i64>(0) - 1) as usize]];
            done[batch].answers[slot] = Err(LeaseError::NotInQueue);
        }
    }
    if !left_lanes.is_empty() {
        settle_lanes(transaction, &left_queues, &left_lanes, &left_nows).await?;
    }
    // An ack frees a lane's next member or an in-flight place: only then can a waiter find
    // something new.
    let mut woken = Vec::new();
    for ((queue, params), done) in batches.iter().zip(&mut done) {
        done.wakes = done.acked > 0
            && (queue.config.ordering != Ordering::Unordered
                || queue.config.max_in_flight.is_some());
        if done.wakes {
            woken.push(params.queue.as_str());
        }
    }
    if !woken.is_empty() {
        woken.sort_unstable();
        woken.dedup();
        notify_wakes(transaction, wake_channel, &woken).await?;
    }
    Ok(done)
}

/// Locks the lanes of the messages a group of acks names, in (queue, key) order (A1 of §2.4):
/// every change of a lane's membership holds its row first.
pub(crate) async fn lock_lanes_for_ack(
    transaction: &impl Cached,
    receipts: &[Receipt],
) -> StoreResult<()> {
    let seqs: Vec<i64> = receipts
        .iter()
        .filter_map(Fence::of)
        .map(|fence| fence.seq)
        .collect();
    transaction
        .execute_cached(
            "SELECT 1 FROM lanes l \
             WHERE (l.queue_id, l.lane_key) IN ( \
                 SELECT queue_id, lane_key FROM messages \
                 WHERE seq = ANY($1) AND lane_key IS NOT NULL) \
             ORDER BY l.queue_id, l.lane_key FOR UPDATE",
            &[&seqs],
        )
        .await?;
    Ok(())
}

/// Takes idempotency keys for new messages (E2 of §2.2): per key, `None` when this batch's
/// message took it (no key or a key whose window ended), `Some(id)` of the message holding it.
async fn take_keys(
    transaction: &impl Cached,
    queue_id: i32,
    keys: &[String],
    message_ids: &[Uuid],
    now_ms: Millis,
    dedup_window_ms: Millis,
) -> StoreResult<Vec<Option<Uuid>>> {
    let rows = transaction
        .query_cached(
            "WITH input AS ( \
                 SELECT * FROM unnest($2::text[], $3::uuid[]) WITH ORDINALITY AS i(key, message_id, n)), \
             taken AS ( \
                 INSERT INTO idempotency AS i (queue_id, key, message_id, expires_at_ms) \
                 SELECT $1, key, message_id, $4::bigint + $5::bigint FROM input ORDER BY key \
                 ON CONFLICT (queue_id, key) DO UPDATE \
                     SET message_id = excluded.message_id, expires_at_ms = excluded.expires_at_ms, \
                         acked_at_ms = NULL, result = NULL \
                     WHERE i.expires_at_ms <= $4::bigint \
                 RETURNING i.key) \
             SELECT t.key IS NOT NULL, e.message_id \
             FROM input LEFT JOIN taken t ON t.key = input.key \
                        LEFT JOIN idempotency e \
                               ON t.key IS NULL AND e.queue_id = $1 AND e.key = input.key \
             ORDER BY input.n",
            &[&queue_id, &keys, &message_ids, &now_ms, &dedup_window_ms],
        )
        .await?;
    let mut answers = Vec::with_capacity(rows.len());
    for (row, key) in rows.iter().zip(keys) {
        if row.get(0) {
            answers.push(None);
            continue;
        }
        let holder: Option<Uuid> = match row.get(1) {
            Some(id) => Some(id),
            // The holder committed after this statement's snapshot: a new statement sees it.
            None => transaction
                .query_opt_cached(
                    "SELECT message_id FROM idempotency WHERE queue_id = $1 AND key = $2",
                    &[&queue_id, key],
                )
                .await?
                .map(|row| row.get(0)),
        };
        let holder = holder.ok_or_else(|| {
            StoreError::Other(format!("idempotency key {key:?} neither taken nor held").into())
        })?;
        answers.push(Some(holder));
    }
    Ok(answers)
}

/// New message rows as columns, for one `unnest`.
#[derive(Default)]
pub(crate) struct NewRows {
    /// Rows per queue id.
    per_queue: HashMap<i32, u64>,
    queue_id: Vec<i32>,
    now_ms: Vec<i64>,
    seq: Vec<i64>,
    id: Vec<Uuid>,
    lane_key: Vec<Option<String>>,
    msg_key: Vec<Option<String>>,
    idempotency_key: Vec<Option<String>>,
    priority: Vec<i32>,
    visible_at_ms: Vec<i64>,
    body: Vec<Vec<u8>>,
    body_kind: Vec<i16>,
    headers: Vec<Option<serde_json::Value>>,
    dead_source_queue: Vec<Option<String>>,
    dead_last_error: Vec<Option<String>>,
    dead_attempts: Vec<Option<i32>>,
    dead_first_seen_at_ms: Vec<Option<i64>>,
    dead_last_seen_at_ms: Vec<Option<i64>>,
}

impl NewRows {
    /// True when there is no row to insert.
    pub(crate) fn is_empty(&self) -> bool {
        self.seq.is_empty()
    }

    /// Rows to insert into queue `queue_id`.
    pub(crate) fn of_queue(&self, queue_id: i32) -> u64 {
        self.per_queue.get(&queue_id).copied().unwrap_or(0)
    }

    fn push(
        &mut self,
        queue_id: i32,
        now_ms: Millis,
        seq: i64,
        id: Uuid,
        lane_key: Option<String>,
        message: &sluice_core::message::NewMessage,
    ) {
        let payload = &message.payload;
        *self.per_queue.entry(queue_id).or_default() += 1;
        self.queue_id.push(queue_id);
        self.now_ms.push(now_ms);
        self.seq.push(seq);
        self.id.push(id);
        self.lane_key.push(lane_key);
        self.msg_key.push(message.key.clone());
        self.idempotency_key.push(message.idempotency_key.clone());
        self.priority.push(message.priority);
        self.visible_at_ms.push(message.visible_at_ms);
        self.body.push(payload.body_bytes.clone());
        self.body_kind.push(match payload.body_kind {
            BodyKind::Json => BODY_KIND_JSON,
            BodyKind::Bytes => BODY_KIND_BYTES,
        });
        self.headers.push(
            (!payload.headers.is_empty())
                .then(|| serde_json::to_value(&payload.headers).unwrap_or_default()),
        );
        let dead = message.dead_letter.as_ref();
        self.dead_source_queue
            .push(dead.map(|dead| dead.source_queue.clone()));
        self.dead_last_error
            .push(dead.and_then(|dead| dead.last_error.clone()));
        self.dead_attempts
            .push(dead.map(|dead| i32::try_from(dead.attempts).unwrap_or(i32::MAX)));
        self.dead_first_seen_at_ms
            .push(dead.map(|dead| dead.first_seen_at_ms));
        self.dead_last_seen_at_ms
            .push(dead.map(|dead| dead.last_seen_at_ms));
    }
}

/// E3 of §2.2: lanes and messages of a group in one statement ([`insert_rows`]).
pub(crate) const INSERT_ROWS_SQL: &str = "WITH m AS ( \
                 SELECT * FROM unnest($1::int[], $2::bigint[], $3::bigint[], $4::uuid[], \
                                      $5::text[], $6::text[], $7::text[], $8::int[], $9::bigint[], \
                                      $10::bytea[], $11::smallint[], $12::jsonb[], $13::text[], \
                                      $14::text[], $15::int[], $16::bigint[], $17::bigint[]) \
                     AS m(queue_id, now_ms, seq, id, lane_key, msg_key, idempotency_key, priority, \
                          visible_at_ms, body, body_kind, headers, dead_source_queue, \
                          dead_last_error, dead_attempts, dead_first_seen_at_ms, \
                          dead_last_seen_at_ms)), \
             added AS ( \
                 SELECT queue_id, lane_key, count(*) AS n, min(seq) AS first_seq \
                 FROM m WHERE lane_key IS NOT NULL GROUP BY queue_id, lane_key), \
             joined AS ( \
                 INSERT INTO lanes (queue_id, lane_key, members) \
                 SELECT queue_id, lane_key, n FROM added ORDER BY queue_id, lane_key \
                 ON CONFLICT (queue_id, lane_key) DO UPDATE \
                     SET members = lanes.members + excluded.members \
                 RETURNING queue_id, lane_key, members), \
             heads AS ( \
                 SELECT a.first_seq AS seq FROM added a JOIN joined j USING (queue_id, lane_key) \
                 WHERE j.members = a.n), \
             loaded AS ( \
                 INSERT INTO payloads (seq, body, headers) SELECT seq, body, headers FROM m) \
             INSERT INTO messages (seq, id, queue_id, state, priority, lane_key, msg_key, \
                                   idempotency_key, enqueued_at_ms, visible_at_ms, \
                                   body_kind, last_error, dead_source_queue, \
                                   dead_last_error, dead_attempts, dead_first_seen_at_ms, \
                                   dead_last_seen_at_ms, first_visible_at_ms) \
             SELECT m.seq, m.id, m.queue_id, \
                    CASE WHEN m.lane_key IS NOT NULL AND m.seq NOT IN (SELECT seq FROM heads) \
                              THEN 'waiting'::message_state \
                         WHEN m.visible_at_ms <= m.now_ms THEN 'ready' ELSE 'delayed' END, \
                    m.priority, m.lane_key, m.msg_key, m.idempotency_key, m.now_ms, \
                    m.visible_at_ms, m.body_kind, m.dead_last_error, \
                    m.dead_source_queue, m.dead_last_error, m.dead_attempts, \
                    m.dead_first_seen_at_ms, m.dead_last_seen_at_ms, \
                    CASE WHEN m.visible_at_ms > m.now_ms THEN m.visible_at_ms END \
             FROM m ORDER BY m.seq";

/// Joins the rows' lanes and inserts them in one statement, for every queue of a group (E3
/// of §2.2): a lane that was empty (its count after the upsert is what this group added) gets
/// its first new member active; every other laned message waits.
pub(crate) async fn insert_rows(transaction: &impl Cached, rows: &NewRows) -> StoreResult<()> {
    transaction
        .execute_cached(
            INSERT_ROWS_SQL,
            &[
                &rows.queue_id,
                &rows.now_ms,
                &rows.seq,
                &rows.id,
                &rows.lane_key,
                &rows.msg_key,
                &rows.idempotency_key,
                &rows.priority,
                &rows.visible_at_ms,
                &rows.body,
                &rows.body_kind,
                &rows.headers,
                &rows.dead_source_queue,
                &rows.dead_last_error,
                &rows.dead_attempts,
                &rows.dead_first_seen_at_ms,
                &rows.dead_last_seen_at_ms,
            ],
        )
        .await?;
    Ok(())
}

/// `count` fresh seqs from `message_seq`, increasing, in one statement: a group takes all its
/// batches' at once (a refused or duplicate message leaves a gap, as any rollback does).
pub(crate) async fn take_seqs(transaction: &impl Cached, count: usize) -> StoreResult<Vec<i64>> {
    let mut seqs: Vec<i64> = transaction
        .query_one_cached(
            "SELECT array_agg(nextval('message_seq') ORDER BY g) \
             FROM generate_series(1, $1::int) AS g",
            &[&(count as i32)],
        )
        .await?
        .get(0);
    seqs.sort_unstable();
    Ok(seqs)
}

/// The statement of [`notify_own_wakes`]: the payload is `<queue> <tag>`.
pub(crate) const NOTIFY_OWN_WAKES_SQL: &str =
    "SELECT pg_notify($1, queue || ' ' || $3) FROM unnest($2::text[]) AS queue";

/// Like [`notify_wakes`], for wake-ups this node also gives its own waiters at the commit (an
/// enqueue group's): each payload carries the node's `tag`, so its listener passes over them
/// instead of waking the same waiters a second time, for a claim that would find nothing.
pub(crate) async fn notify_own_wakes(
    transaction: &impl Cached,
    channel: &str,
    tag: &str,
    queues: &[&str],
) -> StoreResult<()> {
    transaction
        .execute_cached(NOTIFY_OWN_WAKES_SQL, &[&channel, &queues, &tag])
        .await?;
    Ok(())
}

/// The statement of [`notify_wakes`].
pub(crate) const NOTIFY_WAKES_SQL: &str =
    "SELECT pg_notify($1, queue) FROM unnest($2::text[]) AS queue";

/// `pg_notify(channel, queue)` for each queue, inside `transaction`, in one statement.
pub(crate) async fn notify_wakes(
    transaction: &impl Cached,
    channel: &str,
    queues: &[&str],
) -> StoreResult<()> {
    transaction
        .execute_cached(NOTIFY_WAKES_SQL, &[&channel, &queues])
        .await?;
    Ok(())
}

/// U1 and U2 of §2.3 for one queue: delays that are due become ready, and leases that ran out
/// are failed attempts retried at once (`rules::failure::decide` for `LeaseExpired`, its
/// arithmetic in the `WHERE`; `rules_sql` tests hold the two together). Returns the leases
/// expired. A laned message stays its lane's active member through both.
pub(crate) async fn ready_due(
    transaction: &impl Cached,
    queue_id: i32,
    config: &QueueConfig,
    now_ms: Millis,
) -> StoreResult<u64> {
    transaction
        .execute_cached(READY_DUE_SQL, &[&queue_id, &now_ms, &CLAIM_UPKEEP_ROWS])
        .await?;
    let (max_attempts, has_dead_letter_queue) = expiry_rule(config);
    let expired = transaction
        .execute_cached(
            LEASES_EXPIRED_SQL,
            &[
                &queue_id,
                &now_ms,
                &CLAIM_UPKEEP_ROWS,
                &max_attempts,
                &has_dead_letter_queue,
                &LEASE_EXPIRED_ERROR,
            ],
        )
        .await?;
    Ok(expired)
}

/// Locks the lanes of the messages `seqs` of a queue, in key order (A1 of §2.4): every change
/// of a lane's membership holds its row first.
pub(crate) async fn lock_lanes_of(
    transaction: &impl Cached,
    queue_id: i32,
    seqs: &[i64],
) -> StoreResult<()> {
    transaction
        .execute_cached(
            "SELECT 1 FROM lanes l \
             WHERE l.queue_id = $1 AND l.lane_key IN ( \
                 SELECT lane_key FROM messages \
                 WHERE seq = ANY($2) AND queue_id = $1 AND lane_key IS NOT NULL) \
             ORDER BY l.lane_key FOR UPDATE",
            &[&queue_id, &seqs],
        )
        .await?;
    Ok(())
}

/// Settles the lanes of one queue after members left (§2.5); see [`settle_lanes`].
pub(crate) async fn settle(
    transaction: &impl Cached,
    queue_id: i32,
    lanes: &[String],
    now_ms: Millis,
) -> StoreResult<()> {
    settle_lanes(
        transaction,
        &vec![queue_id; lanes.len()],
        lanes,
        &vec![now_ms; lanes.len()],
    )
    .await?;
    Ok(())
}

/// Settles lanes, named by (queue id, key) with the time of the change that left them, after
/// members left (§2.5), in a statement of its own so it sees what the leaving statement did:
/// an emptied lane's row goes; a lane with members and none active promotes its first waiting
/// member (ready, or delayed until its visible time). Returns the members promoted.
pub(crate) async fn settle_lanes(
    transaction: &impl Cached,
    queue_ids: &[i32],
    lanes: &[String],
    nows: &[Millis],
) -> StoreResult<u64> {
    transaction
        .execute_cached(
            "WITH l AS ( \
                 SELECT queue_id, lane_key, max(now_ms) AS now_ms \
                 FROM unnest($1::int[], $2::text[], $3::bigint[]) AS l(queue_id, lane_key, now_ms) \
                 GROUP BY queue_id, lane_key), \
             emptied AS ( \
                 DELETE FROM lanes d USING l \
                 WHERE d.queue_id = l.queue_id AND d.lane_key = l.lane_key AND d.members = 0), \
             next AS ( \
                 SELECT DISTINCT ON (w.queue_id, w.lane_key) w.seq, l.now_ms \
                 FROM l JOIN messages w \
                      ON w.queue_id = l.queue_id AND w.lane_key = l.lane_key \
                     AND w.state = 'waiting' \
                 WHERE NOT EXISTS (SELECT 1 FROM messages a \
                                   WHERE a.queue_id = l.queue_id AND a.lane_key = l.lane_key \
                                     AND a.state IN ('ready', 'delayed', 'leased')) \
                 ORDER BY w.queue_id, w.lane_key, w.seq) \
             UPDATE messages m \
             SET state = CASE WHEN m.visible_at_ms <= next.now_ms THEN 'ready'::message_state \
                              ELSE 'delayed' END \
             FROM next WHERE m.seq = next.seq",
            &[&queue_ids, &lanes, &nows],
        )
        .await
}

/// Why a fenced change found no row: `NotInQueue` when the receipt's message lives (not final)
/// in another queue, `Stale` otherwise (a later lease, a final state, an unknown message), the
/// answers `Index::ack` gives.
async fn refusal(
    transaction: &impl Cached,
    queue_id: i32,
    fence: &Fence,
) -> StoreResult<LeaseError> {
    let elsewhere = transaction
        .query_opt_cached(
            &format!(
                "SELECT 1 FROM messages \
                 WHERE seq = $1 AND id = $2 AND queue_id <> $3 AND state IN {LIVE}"
            ),
            &[&fence.seq, &fence.id, &queue_id],
        )
        .await?
        .is_some();
    Ok(if elsewhere {
        LeaseError::NotInQueue
    } else {
        LeaseError::Stale
    })
}

/// A claimed row ([`CLAIMED_COLUMNS`]) as the trait hands it out.
fn claimed(row: &Row) -> StoreResult<ClaimedMessage> {
    let message_id: Uuid = row.get(1);
    let lease_number: i32 = row.get(2);
    let token: Option<i32> = row.get(3);
    let lease_expires_at_ms: Option<i64> = row.get(14);
    let lease_expires_at_ms =
        lease_expires_at_ms.ok_or_else(|| broken("a lease without a deadline"))?;
    let attempts: i32 = row.get(10);
    Ok(ClaimedMessage {
        message_id,
        receipt: Receipt {
            message_id,
            lease_number: lease_number as u32,
            token: token.ok_or_else(|| broken("a lease without a token"))? as u32,
        },
        payload: Arc::new(payload(row.get(4), row.get(5), row.get(6))?),
        idempotency_key: row.get(7),
        key: row.get(8),
        priority: row.get(9),
        attempts: attempts.max(0) as u32,
        enqueued_at_ms: row.get(11),
        first_received_at_ms: row.get::<_, Option<i64>>(12).unwrap_or(lease_expires_at_ms),
        last_error: row.get(13),
        lease_expires_at_ms,
        dead_letter: dead_letter(row, 15),
    })
}

/// The dead-letter metadata in five columns from `first` on (source, last error, attempts,
/// first seen, last seen); `None` unless it was dead-lettered.
fn dead_letter(row: &Row, first: usize) -> Option<DeadLetterInfo> {
    let source_queue: String = row.get::<_, Option<String>>(first)?;
    Some(DeadLetterInfo {
        source_queue,
        last_error: row.get(first + 1),
        attempts: row.get::<_, Option<i32>>(first + 2).unwrap_or(0).max(0) as u32,
        first_seen_at_ms: row.get::<_, Option<i64>>(first + 3).unwrap_or(0),
        last_seen_at_ms: row.get::<_, Option<i64>>(first + 4).unwrap_or(0),
    })
}

/// A body, its kind and headers as stored.
pub(crate) fn payload(
    body: Option<Vec<u8>>,
    body_kind: i16,
    headers: Option<serde_json::Value>,
) -> StoreResult<Payload> {
    let body_kind = match body_kind {
        BODY_KIND_JSON => BodyKind::Json,
        BODY_KIND_BYTES => BodyKind::Bytes,
        other => return Err(broken(&format!("body_kind {other}"))),
    };
    let headers: Headers = match headers {
        Some(value) => {
            serde_json::from_value(value).map_err(|e| broken(&format!("stored headers: {e}")))?
        }
        None => Headers::new(),
    };
    Ok(Payload {
        body_bytes: body.unwrap_or_default(),
        body_kind,
        headers,
    })
}

/// The columns [`status`] reads, in order, from `messages m JOIN queues q ON q.id =
/// m.queue_id`; a query adds its own columns after them (from [`STATUS_COLUMNS_COUNT`] on).
pub(crate) const STATUS_COLUMNS: &str = "m.id, q.name, m.state::text, m.idempotency_key, \
     m.msg_key, m.priority, m.attempts, m.enqueued_at_ms, m.first_received_at_ms, \
     m.visible_at_ms, m.lease_expires_at_ms, m.last_error, m.finished_at_ms, m.result, \
     m.replayed_as, m.dead_source_queue, m.dead_last_error, m.dead_attempts, \
     m.dead_first_seen_at_ms, m.dead_last_seen_at_ms, m.failures, m.kept_until_ms";

/// How many columns [`STATUS_COLUMNS`] names.
pub(crate) const STATUS_COLUMNS_COUNT: usize = 22;

/// A row that starts with [`STATUS_COLUMNS`] as a status (§1.4), its keep as stored
/// ([`MessageStatus::kept_until_ms`] also once past: a reader that knows its time calls
/// [`MessageStatus::kept_as_of`]).
pub(crate) fn status(row: &Row) -> StoreResult<MessageStatus> {
    let state_text: String = row.get(2);
    let dead_letter = dead_letter(row, 15);
    let is_dead = dead_letter.is_some();
    let state = match state_text.as_str() {
        "leased" => MessageState::InFlight,
        "ready" | "waiting" if is_dead => MessageState::Dead,
        "delayed" if is_dead => MessageState::Dead,
        "ready" | "waiting" => MessageState::Ready,
        "delayed" => MessageState::Delayed,
        "acked" => MessageState::Acked,
        "expired" => MessageState::Expired,
        "cancelled" => MessageState::Cancelled,
        "purged" => MessageState::Purged,
        "replayed" => MessageState::Replayed,
        "deleted" => MessageState::Deleted,
        other => return Err(broken(&format!("message state {other}"))),
    };
    let finished_at_ms: Option<i64> = row.get(12);
    let failures: Vec<Failure> = match row.get::<_, Option<serde_json::Value>>(20) {
        Some(value) => {
            serde_json::from_value(value).map_err(|e| broken(&format!("stored failures: {e}")))?
        }
        None => Vec::new(),
    };
    let attempts: i32 = row.get(6);
    Ok(MessageStatus {
        message_id: row.get(0),
        queue: row.get(1),
        state,
        idempotency_key: row.get(3),
        key: row.get(4),
        priority: row.get(5),
        attempts: attempts.max(0) as u32,
        enqueued_at_ms: row.get(7),
        first_received_at_ms: row.get(8),
        visible_at_ms: row.get(9),
        lease_expires_at_ms: if state == MessageState::InFlight {
            row.get(10)
        } else {
            None
        },
        last_error: row.get(11),
        acked_at_ms: finished_at_ms.filter(|_| state == MessageState::Acked),
        finished_at_ms,
        dead_letter,
        result: row.get(13),
        kept_until_ms: row.get(21),
        replayed_as: row.get(14),
        failures,
    })
}

/// A row that breaks what this store writes: a bug or damage, never bad input.
pub(crate) fn broken(what: &str) -> StoreError {
    StoreError::Other(format!("a stored message does not read back: {what}").into())
}

/// How much of a message's body a lookup reads.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Body {
    /// None: a status lookup never moves the body.
    None,
    /// Its first bytes (previews).
    Prefix(i32),
    /// All of it, with the headers.
    Whole,
}

/// Whether a lease change (a claim, an extend) commits with the WAL flushed
/// (`synchronous_commit` as the connection has it) rather than asynchronously.
///
/// A change committed asynchronously can be undone by a crash of the database (every
/// process killed, the machine losing power) after its answer was sent. For a claim that
/// means the message is ready again while its consumer still works on it, and for an extend
/// that the lease ends at its older deadline:
///
/// - On an unordered queue that is an early second delivery, which at-least-once allows; the
///   first holder's receipt stays fenced, because the token the crash undid was random (§0,
///   "Lease durability").
/// - On an ordered queue (`per_key`, SQS FIFO) it would let a second consumer hold a message
///   of a key while the first may still work on one: the key's order would break. So there
///   every lease change waits for the flush. Issue 34 measured seven such double holds in
///   one crash before this rule; `tests/crash.rs` kills every process of a private cluster
///   and checks there are none.
///
/// A claim the caller records (`message_claim_recorded`: its attempts must survive) always
/// waits. A give-back never needs to: lost, it only leaves the message held until its
/// deadline.
fn lease_change_waits_for_flush(config: &QueueConfig, recorded: bool) -> bool {
    recorded || config.ordering != Ordering::Unordered
}

#[async_trait]
impl MessageStore for PgStore {
    async fn message_claim(&self, params: ClaimParams) -> StoreResult<Claim> {
        self.claim(params, false).await
    }

    async fn message_claim_recorded(&self, params: ClaimParams) -> StoreResult<Claim> {
        self.claim(params, true).await
    }

    /// Stores a batch (`Store::message_enqueue`, §2.2) through this node's enqueue writer,
    /// which commits it in one transaction with whatever other batches wait ([`crate::group`]).
    async fn message_enqueue(&self, params: EnqueueParams) -> StoreResult<Vec<Enqueued>> {
        let queue = self.resolve(&params.queue).await?;
        if params.messages.is_empty() {
            return Ok(Vec::new());
        }
        self.writers()?.enqueue(queue, params).await
    }

    /// Acks a batch of receipts (`Store::message_ack`, §2.4) through this node's ack writer,
    /// which commits it in one transaction with whatever other acks wait ([`crate::group`]).
    async fn message_ack(&self, params: AckParams) -> StoreResult<Vec<Result<(), LeaseError>>> {
        let queue = self.resolve(&params.queue).await?;
        if params.receipts.is_empty() {
            return Ok(Vec::new());
        }
        self.writers()?.ack(queue, params).await
    }

    /// Acks one lease and enqueues the next steps in the same transaction
    /// (`Store::message_ack_then`, [`crate::group::Writers::ack_then`]).
    async fn message_ack_then(
        &self,
        params: AckParams,
        then: Vec<EnqueueParams>,
    ) -> StoreResult<Result<Vec<Vec<Enqueued>>, LeaseError>> {
        let queue = self.resolve(&params.queue).await?;
        let mut targets = Vec::with_capacity(then.len());
        for batch in then {
            targets.push((self.resolve(&batch.queue).await?, batch));
        }
        self.writers()?.ack_then(queue, params, targets).await
    }

    /// `Store::message_enqueue_together`: every batch in one transaction.
    async fn message_enqueue_together(
        &self,
        batches: Vec<EnqueueParams>,
    ) -> StoreResult<Vec<Vec<Enqueued>>> {
        let mut targets = Vec::with_capacity(batches.len());
        for batch in batches {
            targets.push((self.resolve(&batch.queue).await?, batch));
        }
        self.writers()?.enqueue_together(targets).await
    }

    /// Records a failed attempt (`Store::message_nack`, §2.4): `rules::failure::decide` on the
    /// attempts read under the row lock; a retry keeps the message its lane's active member;
    /// a dead-letter move (§2.6) takes it to the dead-letter queue, whose lane it joins when
    /// that queue is ordered, and lets its source lane go on.
    async fn message_nack(&self, params: NackParams) -> StoreResult<NackOutcome> {
        let mut tries = 0;
        loop {
            match self.nack_once(params.clone()).await {
                Err(error) if is_conflict(&error) && tries < RETRIES => tries += 1,
                outcome => return outcome,
            }
        }
    }

    /// Pushes a lease's deadline to now + `timeout_ms` (`Store::message_extend`); committed
    /// asynchronously, as every lease change.
    async fn message_extend(&self, params: ExtendParams) -> StoreResult<Millis> {
        let mut tries = 0;
        loop {
            match self.extend_once(params.clone()).await {
                Err(error) if is_conflict(&error) && tries < RETRIES => tries += 1,
                outcome => return outcome,
            }
        }
    }

    /// Ends a lease early (`Store::message_give_back`): ready at once, no failure counted, the
    /// token kept so the receipt still acks until the next claim (`Index::give_back`).
    async fn message_give_back(&self, params: GiveBackParams) -> StoreResult<()> {
        let mut tries = 0;
        loop {
            match self.give_back_once(params.clone()).await {
                Err(error) if is_conflict(&error) && tries < RETRIES => tries += 1,
                outcome => return outcome,
            }
        }
    }

    /// Cancels one message that is not being processed (`Store::message_cancel`): one named
    /// by an idempotency key is found while the key's window is open. A message leased now is
    /// left to its consumer (`AlreadyProcessing`); one already final, or a dead letter of the
    /// queue, is reported with its state.
    async fn message_cancel(
        &self,
        params: MessageGetParams,
        reason: Option<String>,
    ) -> StoreResult<CancelOutcome> {
        let queue = self.resolve(&params.queue).await?;
        let id = match &params.by {
            MessageRef::Id(id) => *id,
            MessageRef::IdempotencyKey(key) => {
                let row = self
                    .client()
                    .await?
                    .query_opt_cached(
                        "SELECT message_id FROM idempotency \
                         WHERE queue_id = $1 AND key = $2 AND expires_at_ms > $3",
                        &[&queue.id, key, &params.now_ms],
                    )
                    .await?;
                match row {
                    Some(row) => row.get(0),
                    None => return Ok(CancelOutcome::NotFound),
                }
            }
        };
        let Some(seq) = ids::decode(&id).and_then(|seq| i64::try_from(seq).ok()) else {
            return Ok(CancelOutcome::NotFound);
        };
        // A consumer may give the message back or lose its lease between the refused cancel
        // and the lookup that says why; then the cancel is tried again.
        for _ in 0..=crate::messages::RETRIES {
            let cancelled = retried(|| {
                self.cancel_once(
                    &queue,
                    &params.queue,
                    seq,
                    id,
                    reason.as_deref(),
                    params.now_ms,
                )
            })
            .await?;
            if cancelled {
                self.count(queue.id, |counters| counters.cancelled += 1);
                // The next message of its lane may be ready now.
                self.notifier.wake(&params.queue);
                return Ok(CancelOutcome::Cancelled { message_id: id });
            }
            let status = self
                .message_get(MessageGetParams {
                    queue: params.queue.clone(),
                    by: MessageRef::Id(id),
                    now_ms: params.now_ms,
                })
                .await?;
            match status {
                // Leased in this queue, or a dead letter leased from the dead-letter queue.
                Some(status) if status.state == MessageState::InFlight => {
                    return Ok(CancelOutcome::AlreadyProcessing { message_id: id });
                }
                Some(status)
                    if status.queue == params.queue
                        && matches!(status.state, MessageState::Ready | MessageState::Delayed) =>
                {
                    continue;
                }
                Some(status) => {
                    return Ok(CancelOutcome::AlreadyCompleted {
                        message_id: id,
                        state: status.state,
                    });
                }
                None => return Ok(CancelOutcome::NotFound),
            }
        }
        // It kept moving between leases: a consumer has it.
        Ok(CancelOutcome::AlreadyProcessing { message_id: id })
    }
}
