//! Group commit (docs/design/postgres-store.md §2.1): the enqueue writers and the ack writers
//! of this node. Callers hand their batch to a writer over a bounded channel; a writer takes
//! everything waiting (up to [`GROUP_MESSAGES_MAX`] messages and [`GROUP_BYTES_MAX`] bytes of
//! bodies for enqueues, [`GROUP_RECEIPTS_MAX`] receipts for acks), applies it in one
//! transaction, and answers every caller after `COMMIT` returned: one commit flush for many
//! callers, which is what bounds throughput when every call commits on its own.
//!
//! Safety of grouping:
//! - A group locks the lanes it touches first, all of them in (queue, key) order, before any
//!   idempotency key or message row: the lock order of §2.0, so two groups (of two writers, or
//!   of two nodes) and a nack or claim never wait for each other in a cycle.
//! - A batch refused for `max_depth` is refused alone (nothing of it was written); any other
//!   error fails the group, and every caller in it gets that error: nothing of the group was
//!   stored, so each may retry. A deadlock or serialization failure (which the lock order
//!   should prevent, and PostgreSQL would break) retries the whole group, at most
//!   [`GROUP_RETRIES`] times.
//! - Batches of one group see each other (one transaction): a key enqueued twice in a group is
//!   one message, and a bounded queue's admission counts the batches before it.
//!
//! While the database is lost (`health`), a batch is refused before it is queued and a group
//! taken meanwhile fails without trying, every caller answered `Unavailable` at once.
//!
//! Writers take a connection per group from a pool of their own, one connection per writer
//! (the design asks for dedicated connections; this is the same number, kept alive and
//! replaced by deadpool), so groups and claims never wait for each other's connections. `[store] writer_connections` writers of each kind
//! share one channel, so one group forms while another waits for its flush. A full channel
//! makes callers wait for room; enqueues are not refused as `Overloaded` yet.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use sluice_core::histogram::AtomicHistogram;
use sluice_core::notify::Notifier;
use sluice_core::store::{AckParams, EnqueueParams, Enqueued, StoreError, StoreResult};
use sluice_core::store::{Counters, LeaseError};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::cache::CachedQueue;
use crate::error::{Db, is_conflict};
use crate::health::Database;
use crate::messages;
use crate::stats;

/// Most messages an enqueue group stores.
pub(crate) const GROUP_MESSAGES_MAX: usize = 1_000;
/// Most body bytes an enqueue group stores (a single larger batch still forms a group alone).
pub(crate) const GROUP_BYTES_MAX: usize = 8 << 20;
/// Most receipts an ack group applies.
pub(crate) const GROUP_RECEIPTS_MAX: usize = 4_096;
/// Times a group that failed with a deadlock or serialization failure is tried again.
pub(crate) const GROUP_RETRIES: usize = 3;
/// Batches per group, for the histogram: powers of two up to the largest ack group.
pub(crate) const GROUP_OPS_BOUNDS: &[u64] =
    &[1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1_024, 2_048, 4_096];
/// Batches waiting for a writer of each kind before callers wait for room.
const CHANNEL_JOBS: usize = 1_024;

/// What the writers share with the store.
pub(crate) struct Context {
    /// The writers' own pool, behind the store's health.
    pub database: Database,
    pub notifier: Arc<Notifier>,
    pub counters: Arc<Mutex<HashMap<i32, Counters>>>,
    pub wake_channel: String,
    /// This node's mark on the wake-ups of its enqueue groups (`listen::Followers::wake_tag`).
    pub wake_tag: String,
    /// Batches per committed group, both kinds (`StorageMetrics::group_commit_ops`).
    pub group_commit_ops: AtomicHistogram,
    /// Whether an ack keeps the message's record (`acked_retention_ms` above 0) or deletes it
    /// (unless its queue keeps acked messages with their body, `keep_acked_ms`).
    pub keep_records: bool,
}

impl Context {
    fn count(&self, queue_id: i32, change: impl FnOnce(&mut Counters)) {
        change(self.counters.lock().entry(queue_id).or_default());
    }
}

/// The way to this node's writers; cloned by every caller.
#[derive(Clone)]
pub(crate) struct Writers {
    enqueue: mpsc::Sender<EnqueueJob>,
    ack: mpsc::Sender<AckJob>,
    /// Checked before a batch is queued: while the database is lost, callers are answered at
    /// once instead of waiting behind groups that cannot commit.
    database: Database,
    /// For the work that runs outside the groups ([`Writers::ack_then`]).
    context: Arc<Context>,
}

struct EnqueueJob {
    queue: CachedQueue,
    params: EnqueueParams,
    answer: oneshot::Sender<StoreResult<Vec<Enqueued>>>,
}

struct AckJob {
    queue: CachedQueue,
    params: AckParams,
    answer: oneshot::Sender<StoreResult<Vec<Result<(), LeaseError>>>>,
}

impl Writers {
    /// Starts `per_kind` writers of each kind. They stop once every [`Writers`] is dropped and
    /// the batches already sent are answered.
    pub(crate) fn spawn(context: Arc<Context>, per_kind: usize) -> (Self, Vec<JoinHandle<()>>) {
        let (enqueue, enqueue_jobs) = mpsc::channel(CHANNEL_JOBS);
        let (ack, ack_jobs) = mpsc::channel(CHANNEL_JOBS);
        let enqueue_jobs = Arc::new(tokio::sync::Mutex::new(enqueue_jobs));
        let ack_jobs = Arc::new(tokio::sync::Mutex::new(ack_jobs));
        let mut tasks = Vec::new();
        for _ in 0..per_kind.max(1) {
            tasks.push(tokio::spawn(enqueue_writer(
                context.clone(),
                enqueue_jobs.clone(),
            )));
            tasks.push(tokio::spawn(ack_writer(context.clone(), ack_jobs.clone())));
        }
        let database = context.database.clone();
        (
            Self {
                enqueue,
                ack,
                database,
                context,
            },
            tasks,
        )
    }

    /// Stores a batch with the next enqueue group; answers after its commit.
    pub(crate) async fn enqueue(
        &self,
        queue: CachedQueue,
        params: EnqueueParams,
    ) -> StoreResult<Vec<Enqueued>> {
        self.database.health().check()?;
        let (answer, answered) = oneshot::channel();
        self.enqueue
            .send(EnqueueJob {
                queue,
                params,
                answer,
            })
            .await
            .map_err(|_| closed())?;
        answered.await.map_err(|_| closed())?
    }

    /// Acks a batch with the next ack group; answers after its commit.
    pub(crate) async fn ack(
        &self,
        queue: CachedQueue,
        params: AckParams,
    ) -> StoreResult<Vec<Result<(), LeaseError>>> {
        self.database.health().check()?;
        let (answer, answered) = oneshot::channel();
        self.ack
            .send(AckJob {
                queue,
                params,
                answer,
            })
            .await
            .map_err(|_| closed())?;
        answered.await.map_err(|_| closed())?
    }
}

impl Writers {
    /// Acks one lease and enqueues the next steps in one transaction of its own
    /// (`Store::message_ack_then`): both or neither. A stale receipt or a refused next step
    /// (its queue full) rolls the whole of it back.
    pub(crate) async fn ack_then(
        &self,
        queue: CachedQueue,
        params: AckParams,
        then: Vec<(CachedQueue, EnqueueParams)>,
    ) -> StoreResult<Result<Vec<Vec<Enqueued>>, LeaseError>> {
        self.together(Some((queue, params)), then).await
    }

    /// Enqueues several batches in one transaction of its own
    /// (`Store::message_enqueue_together`): all or none.
    pub(crate) async fn enqueue_together(
        &self,
        batches: Vec<(CachedQueue, EnqueueParams)>,
    ) -> StoreResult<Vec<Vec<Enqueued>>> {
        match self.together(None, batches).await? {
            Ok(answers) => Ok(answers),
            // No ack, so no lease to be stale.
            Err(stale) => Err(StoreError::Lease(stale)),
        }
    }

    /// An optional ack and enqueues, in one transaction.
    async fn together(
        &self,
        ack: Option<(CachedQueue, AckParams)>,
        then: Vec<(CachedQueue, EnqueueParams)>,
    ) -> StoreResult<Result<Vec<Vec<Enqueued>>, LeaseError>> {
        self.database.health().check()?;
        let context = &*self.context;
        let ack_ref = ack.as_ref().map(|(queue, params)| (queue, params));
        let mut tries = 0;
        let outcome = loop {
            let outcome = on_connection(context, async |client| {
                together_once(client, context, ack_ref, &then).await
            })
            .await;
            match outcome {
                Err(error) if is_conflict(&error) && tries < GROUP_RETRIES => tries += 1,
                outcome => break outcome,
            }
        };
        let (done, answers) = match outcome {
            Ok(done) => done,
            // Rolled back: nothing was acked or enqueued.
            Err(StoreError::Lease(stale)) => return Ok(Err(stale)),
            Err(error) => return Err(error),
        };
        if let (Some(done), Some((queue, params))) = (done, &ack) {
            context.count(queue.id, |counters| counters.acked += done.acked);
            if done.wakes {
                context.notifier.wake(&params.queue);
            }
        }
        for ((target, batch), enqueued) in then.iter().zip(&answers) {
            let created = enqueued.iter().filter(|e| e.created).count() as u64;
            let hits = enqueued.len() as u64 - created;
            context.count(target.id, |counters| {
                counters.enqueued += created;
                counters.deduplicated += hits;
            });
            if created > 0 {
                context.notifier.wake_for(&batch.queue, created);
            }
        }
        Ok(Ok(answers))
    }
}

/// One try of [`Writers::together`]: lanes locked in order, the ack (if any) fenced by its
/// receipt, then every batch; any refusal rolls it all back.
async fn together_once(
    client: &deadpool_postgres::ClientWrapper,
    context: &Context,
    ack: Option<(&CachedQueue, &AckParams)>,
    then: &[(CachedQueue, EnqueueParams)],
) -> StoreResult<(Option<messages::AckDone>, Vec<Vec<Enqueued>>)> {
    let lanes = lanes_to_lock(then.iter().map(|(target, batch)| (target, batch)));
    let total = then.iter().map(|(_, batch)| batch.messages.len()).sum();
    client.batch_execute("BEGIN").await.db()?;
    if let Some((queue, params)) = ack
        && queue.config.ordering != sluice_core::queue::Ordering::Unordered
    {
        messages::lock_lanes_for_ack(client, &params.receipts).await?;
    }
    messages::lock_lanes_for_enqueue(client, &lanes).await?;
    let seqs = messages::take_seqs(client, total).await?;
    let done = match ack {
        Some((queue, params)) => {
            let mut done = messages::ack_group(
                client,
                &context.wake_channel,
                context.keep_records,
                &[(queue, params)],
            )
            .await?
            .pop()
            .expect("one batch, one answer");
            if let Some(Err(stale)) = done.answers.first() {
                return Err(StoreError::Lease(stale.clone()));
            }
            done.answers.truncate(1);
            Some(done)
        }
        None => None,
    };
    let mut rows = messages::NewRows::default();
    let mut answers = Vec::with_capacity(then.len());
    let mut offset = 0;
    for (target, batch) in then {
        let count = batch.messages.len();
        let answer = messages::enqueue_in(
            client,
            target,
            &batch.queue,
            &batch.messages,
            batch.now_ms,
            &seqs[offset..offset + count],
            &mut rows,
        )
        .await??;
        answers.push(answer);
        offset += count;
    }
    if !rows.is_empty() {
        let mut woken: Vec<&str> = then
            .iter()
            .zip(&answers)
            .filter(|(_, enqueued)| enqueued.iter().any(|e| e.created))
            .map(|((_, batch), _)| batch.queue.as_str())
            .collect();
        woken.sort_unstable();
        woken.dedup();
        messages::insert_rows(client, &rows).await?;
        messages::notify_own_wakes(client, &context.wake_channel, &context.wake_tag, &woken)
            .await?;
    }
    client.batch_execute("COMMIT").await.db()?;
    Ok((done, answers))
}

/// The lanes the batches' messages join, each once and in lock order (sorted).
fn lanes_to_lock<'a>(
    batches: impl Iterator<Item = (&'a CachedQueue, &'a EnqueueParams)>,
) -> Vec<(i32, String)> {
    let mut lanes: Vec<(i32, String)> = batches
        .flat_map(|(queue, batch)| {
            messages::lanes_of(&queue.config, &batch.messages)
                .into_iter()
                .flatten()
                .map(|lane| (queue.id, lane))
        })
        .collect();
    lanes.sort_unstable();
    lanes.dedup();
    lanes
}

fn closed() -> StoreError {
    StoreError::Unavailable("the PostgreSQL store is closed".into())
}

/// Takes the next group of enqueues: the first waiting, then whatever else waits within the
/// bounds. `None` once the channel is closed and empty.
async fn enqueue_writer(
    context: Arc<Context>,
    jobs: Arc<tokio::sync::Mutex<mpsc::Receiver<EnqueueJob>>>,
) {
    loop {
        let group = {
            let mut jobs = jobs.lock().await;
            let Some(first) = jobs.recv().await else {
                return;
            };
            let mut messages = first.params.messages.len();
            let mut bytes = body_bytes(&first);
            let mut group = vec![first];
            while messages < GROUP_MESSAGES_MAX && bytes < GROUP_BYTES_MAX {
                let Ok(job) = jobs.try_recv() else { break };
                messages += job.params.messages.len();
                bytes += body_bytes(&job);
                group.push(job);
            }
            group
        };
        run_enqueues(&context, group).await;
    }
}

fn body_bytes(job: &EnqueueJob) -> usize {
    job.params
        .messages
        .iter()
        .map(|message| message.payload.body_bytes.len())
        .sum()
}

/// Applies one enqueue group and answers its callers.
async fn run_enqueues(context: &Context, group: Vec<EnqueueJob>) {
    let mut tries = 0;
    let outcome = loop {
        match try_enqueues(context, &group).await {
            Err(error) if is_conflict(&error) && tries < GROUP_RETRIES => tries += 1,
            outcome => break outcome,
        }
    };
    match outcome {
        Ok(answers) => {
            for (job, answer) in group.into_iter().zip(answers) {
                match &answer {
                    Ok(enqueued) => {
                        let created = enqueued.iter().filter(|e| e.created).count() as u64;
                        if created > 0 {
                            context.notifier.wake_for(&job.params.queue, created);
                            context.count(job.queue.id, |counters| counters.enqueued += created);
                        }
                        let hits = enqueued.len() as u64 - created;
                        if hits > 0 {
                            context.count(job.queue.id, |counters| counters.deduplicated += hits);
                        }
                    }
                    Err(StoreError::QueueFull { refused, .. }) => {
                        context.count(job.queue.id, |counters| counters.rejected += refused);
                    }
                    Err(_) => {}
                }
                // A caller that stopped waiting (its request was cancelled) needs no answer.
                let _ = job.answer.send(answer);
            }
        }
        Err(error) => {
            for job in group {
                let _ = job.answer.send(Err(copy(&error)));
            }
        }
    }
}

/// One try of an enqueue group: one transaction, every batch's answer in order.
///
/// The transaction is driven on the connection itself rather than through a `Transaction`, so
/// that `BEGIN` travels with the group's first statements and `COMMIT` with its last ones
/// (§2.0, "Pipelining"): a group of batches without keys or bounds costs two round trips and
/// the commit's flush. A failed try ends its transaction before the connection goes back to
/// the pool ([`messages::roll_back`]).
async fn try_enqueues(
    context: &Context,
    group: &[EnqueueJob],
) -> StoreResult<Vec<StoreResult<Vec<Enqueued>>>> {
    on_connection(context, async |client| {
        enqueue_group(client, context, group).await
    })
    .await
}

/// Runs one try of a group on a writer's connection; a try that failed has its transaction
/// rolled back before the connection returns to the pool ([`messages::roll_back`]).
async fn on_connection<T>(
    context: &Context,
    work: impl AsyncFnOnce(&deadpool_postgres::ClientWrapper) -> StoreResult<T>,
) -> StoreResult<T> {
    let client = context.database.client().await?;
    let outcome = work(&client).await;
    if outcome.is_err() {
        messages::roll_back(client).await;
    }
    outcome
}

async fn enqueue_group(
    client: &deadpool_postgres::ClientWrapper,
    context: &Context,
    group: &[EnqueueJob],
) -> StoreResult<Vec<StoreResult<Vec<Enqueued>>>> {
    let lanes = lanes_to_lock(group.iter().map(|job| (&job.queue, &job.params)));
    let total = group.iter().map(|job| job.params.messages.len()).sum();
    // A bounded queue's admission counts what it holds exactly; the others' positions start
    // from the leader's last count (§2.2), read in the same flight as the seqs.
    let mut unbounded: Vec<i32> = group
        .iter()
        .filter(|job| job.queue.config.max_depth.is_none())
        .map(|job| job.queue.id)
        .collect();
    unbounded.sort_unstable();
    unbounded.dedup();
    // `BEGIN` is sent first, on the first poll, so whatever follows runs inside it.
    let (_, (), seqs, counted) = tokio::try_join!(
        async { client.batch_execute("BEGIN").await.db() },
        messages::lock_lanes_for_enqueue(client, &lanes),
        messages::take_seqs(client, total),
        stats::counted_depths(client, &unbounded),
    )?;
    let mut rows = messages::NewRows::default();
    let mut answers = Vec::with_capacity(group.len());
    let mut offset = 0;
    for job in group {
        let count = job.params.messages.len();
        let earlier = rows.of_queue(job.queue.id);
        let mut answer = messages::enqueue_in(
            client,
            &job.queue,
            &job.params.queue,
            &job.params.messages,
            job.params.now_ms,
            &seqs[offset..offset + count],
            &mut rows,
        )
        .await?;
        if let (None, Ok(enqueued)) = (job.queue.config.max_depth, &mut answer) {
            let ahead = counted.get(&job.queue.id).copied().unwrap_or(0) + earlier;
            for enqueued in enqueued.iter_mut().filter(|enqueued| enqueued.created) {
                enqueued.position += ahead;
            }
        }
        answers.push(answer);
        offset += count;
    }
    if rows.is_empty() {
        client.batch_execute("COMMIT").await.db()?;
    } else {
        let mut woken: Vec<&str> = group
            .iter()
            .zip(&answers)
            .filter(|(_, answer)| {
                answer
                    .as_ref()
                    .is_ok_and(|enqueued| enqueued.iter().any(|e| e.created))
            })
            .map(|(job, _)| job.params.queue.as_str())
            .collect();
        woken.sort_unstable();
        woken.dedup();
        // Prepared before the flight, so the insert and the notification are sent on its first
        // poll, ahead of the `COMMIT`.
        tokio::try_join!(
            client.prepare_cached(messages::INSERT_ROWS_SQL),
            client.prepare_cached(messages::NOTIFY_OWN_WAKES_SQL),
        )
        .db()?;
        tokio::try_join!(
            messages::insert_rows(client, &rows),
            messages::notify_own_wakes(client, &context.wake_channel, &context.wake_tag, &woken),
            async { client.batch_execute("COMMIT").await.db() },
        )?;
    }
    context.group_commit_ops.record(group.len() as u64);
    Ok(answers)
}

async fn ack_writer(context: Arc<Context>, jobs: Arc<tokio::sync::Mutex<mpsc::Receiver<AckJob>>>) {
    loop {
        let group = {
            let mut jobs = jobs.lock().await;
            let Some(first) = jobs.recv().await else {
                return;
            };
            let mut receipts = first.params.receipts.len();
            let mut group = vec![first];
            while receipts < GROUP_RECEIPTS_MAX {
                let Ok(job) = jobs.try_recv() else { break };
                receipts += job.params.receipts.len();
                group.push(job);
            }
            group
        };
        run_acks(&context, group).await;
    }
}

/// Applies one ack group and answers its callers.
async fn run_acks(context: &Context, group: Vec<AckJob>) {
    let mut tries = 0;
    let outcome = loop {
        match try_acks(context, &group).await {
            Err(error) if is_conflict(&error) && tries < GROUP_RETRIES => tries += 1,
            outcome => break outcome,
        }
    };
    match outcome {
        Ok(done) => {
            for (job, done) in group.into_iter().zip(done) {
                if done.wakes {
                    context.notifier.wake(&job.params.queue);
                }
                context.count(job.queue.id, |counters| counters.acked += done.acked);
                let _ = job.answer.send(Ok(done.answers));
            }
        }
        Err(error) => {
            for job in group {
                let _ = job.answer.send(Err(copy(&error)));
            }
        }
    }
}

/// One try of an ack group: one transaction, every batch's answers in order; `BEGIN` travels
/// with the first statements, as an enqueue group's does ([`try_enqueues`]).
async fn try_acks(context: &Context, group: &[AckJob]) -> StoreResult<Vec<messages::AckDone>> {
    on_connection(context, async |client| {
        ack_group(client, context, group).await
    })
    .await
}

async fn ack_group(
    client: &deadpool_postgres::ClientWrapper,
    context: &Context,
    group: &[AckJob],
) -> StoreResult<Vec<messages::AckDone>> {
    let receipts: Vec<_> = group
        .iter()
        .flat_map(|job| job.params.receipts.iter().copied())
        .collect();
    let is_ordered = group
        .iter()
        .any(|job| job.queue.config.ordering != sluice_core::queue::Ordering::Unordered);
    let batches: Vec<_> = group.iter().map(|job| (&job.queue, &job.params)).collect();
    let (_, done) = tokio::try_join!(async { client.batch_execute("BEGIN").await.db() }, async {
        if is_ordered {
            messages::lock_lanes_for_ack(client, &receipts).await?;
        }
        messages::ack_group(
            client,
            &context.wake_channel,
            context.keep_records,
            &batches,
        )
        .await
    },)?;
    client.batch_execute("COMMIT").await.db()?;
    context.group_commit_ops.record(group.len() as u64);
    Ok(done)
}

/// The error of a failed group, for each of its callers: the same meaning, the cause as text.
fn copy(error: &StoreError) -> StoreError {
    match error {
        StoreError::QueueNotFound(name) => StoreError::QueueNotFound(name.clone()),
        StoreError::Conflict(text) => StoreError::Conflict(text.clone()),
        StoreError::Lease(lease) => StoreError::Lease(lease.clone()),
        StoreError::Unavailable(text) => StoreError::Unavailable(text.clone()),
        StoreError::DiskFull(text) => StoreError::DiskFull(text.clone()),
        StoreError::WritesStopped(text) => StoreError::WritesStopped(text.clone()),
        other => StoreError::Other(other.to_string().into()),
    }
}
