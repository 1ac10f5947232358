//! The single writer: one OS thread owns the write connection and commits in groups.
//!
//! Requests arrive on a channel; new messages wait in it only up to `[store] writer_queue_bytes`
//! (`inbox.rs`: beyond it enqueues are refused, while acks and the other writes the index
//! already made are never refused). The thread takes everything waiting (up to a cap) and
//! applies it in one `BEGIN IMMEDIATE … COMMIT`. The commit itself does not sync (`synchronous=OFF`): the
//! group goes to the syncer thread ([`crate::sync`]), which fsyncs the WAL once for every group
//! waiting and only then publishes new messages to the dispatch index and answers the callers.
//! Meanwhile this thread applies the next group, so applying and syncing overlap and throughput
//! grows with concurrency instead of with fsyncs.
//!
//! A group that fails is rolled back whole and kept as it is, so it can be tried again:
//! - on a full disk, new messages in it are refused and the rest (acks, nacks, deletes: the
//!   index already made their change) is tried again at once with the disk reserve given back,
//!   then held and retried whenever a probe finds room (`space.rs`);
//! - on a lock held too long by another connection, it is tried again after a pause;
//! - on anything else, writes stop for good (`health.rs`).
//!
//! After a commit that leaves the WAL past its limit, this thread checkpoints it whole and
//! truncates it (`checkpoint.rs`), which pauses the writes for that long.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TryRecvError};
use std::time::Instant;

use crate::dispatch::{Change, Entry};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use sluice_core::Millis;
use sluice_core::message::{NewMessage, Payload};
use sluice_core::store::Seq;
use sluice_core::store::{Enqueued, StoreError, StoreResult};
use tokio::sync::oneshot;
use uuid::Uuid;

use crate::checkpoint::WalLimit;
use crate::claims::DeferredClaims;
use crate::health::{Failure, WriteHealth, classify};
use crate::inbox::{Charge, Inbox};
use crate::publish::Publisher;
use crate::schedules::ScheduleWrite;
use crate::schema::{STATE_ACKED, STATE_EXPIRED, STATE_LIVE, STATE_REPLAYED};
use crate::space::Reserve;

/// Most operations applied in one transaction.
const GROUP_OPS_MAX: usize = 4_096;
/// A group commit slower than this is logged: it stalled every request waiting on it.
const SLOW_GROUP: std::time::Duration = std::time::Duration::from_millis(50);
/// Pause before a group that found the database locked is tried again.
const BUSY_RETRY: std::time::Duration = std::time::Duration::from_millis(20);
/// Acked records removed per cleanup pass, so cleanup never holds the writer for long.
const CLEANUP_ROWS_MAX: i64 = 20_000;

/// Which of a queue's pauses a [`WriteOp::QueuePause`] sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PauseKind {
    /// Deliveries to every consumer (`queues.paused`).
    Deliveries,
    /// The server's push delivery only (`queues.push_paused`).
    Push,
}

/// One request to the writer.
pub enum WriteOp {
    /// Store new messages; the reply comes after commit and after the index has them.
    Enqueue {
        queue: Arc<str>,
        dedup_window_ms: Millis,
        now_ms: Millis,
        messages: Vec<NewMessage>,
        reply: oneshot::Sender<StoreResult<Vec<Enqueued>>>,
        /// Their room in the inbox, held until the reply is sent (`inbox.rs`).
        charge: Charge,
    },
    /// Record deliveries (attempt counts survive a restart). Without `reply` (ordinary
    /// receives) the records wait in [`DeferredClaims`] for an ack that makes them unnecessary;
    /// with one they are written now and the reply comes once they are durable.
    Claimed {
        records: Vec<(Seq, u32, Millis)>,
        reply: Option<oneshot::Sender<StoreResult<()>>>,
    },
    /// Mark messages acked, with the consumer's result; `memos` are the idempotency keys
    /// (queue, key, message) that remember it.
    Ack {
        /// (message, its attempts, its first delivery).
        seqs: Vec<(Seq, u32, Option<Millis>)>,
        memos: Vec<(Arc<str>, Arc<str>, Uuid)>,
        result: Option<String>,
        /// Until when the rows keep their body and headers (the queue's `keep_acked_ms`);
        /// `None` drops them now.
        kept_until: Option<Millis>,
        now_ms: Millis,
        reply: oneshot::Sender<StoreResult<()>>,
    },
    /// Put messages in a final state (cancelled, purged, deleted): the index has let them go.
    /// The body is dropped unless `keep_body`.
    Finish {
        seqs: Vec<Seq>,
        state: i64,
        /// Why, kept as `last_error` (a cancel's reason); `None` keeps the last error.
        reason: Option<String>,
        now_ms: Millis,
        reply: Option<oneshot::Sender<StoreResult<()>>>,
    },
    /// Copy dead letters into `target` as new messages and mark them replayed.
    Replay {
        target: Arc<str>,
        items: Vec<ReplayItem>,
        dedup_window_ms: Millis,
        now_ms: Millis,
        reply: oneshot::Sender<StoreResult<Vec<Enqueued>>>,
    },
    /// Create or replace a webhook endpoint definition.
    WebhookPut {
        name: String,
        spec: String,
        now_ms: Millis,
        reply: oneshot::Sender<StoreResult<()>>,
    },
    /// Delete a webhook endpoint definition.
    WebhookDelete {
        name: String,
        reply: oneshot::Sender<StoreResult<()>>,
    },
    /// Define, delete or advance a schedule.
    Schedule {
        write: ScheduleWrite,
        reply: oneshot::Sender<StoreResult<()>>,
    },
    /// Pause or resume a queue's deliveries, or its push.
    QueuePause {
        name: String,
        pause: PauseKind,
        paused: bool,
        reply: oneshot::Sender<StoreResult<()>>,
    },
    /// Persist retries and dead-letter moves; `reply` is `None` for background changes.
    Apply {
        changes: Vec<Change>,
        now_ms: Millis,
        reply: Option<oneshot::Sender<StoreResult<()>>>,
    },
    /// Create or replace queue definitions.
    QueuePut {
        queues: Vec<(String, String)>,
        now_ms: Millis,
        reply: oneshot::Sender<StoreResult<()>>,
    },
    /// Delete a queue and everything in it.
    /// Delete a queue's definition and idempotency keys, and the first chunk of its rows.
    QueueDelete {
        name: String,
        seqs: Vec<Seq>,
        reply: oneshot::Sender<StoreResult<()>>,
    },
    /// Forget a queue's idempotency ids (a purge of everything).
    ForgetIds {
        queue: String,
        reply: oneshot::Sender<StoreResult<()>>,
    },
    /// Delete more rows of a deleted queue; answered when `reply` is given.
    Purge {
        seqs: Vec<Seq>,
        reply: Option<oneshot::Sender<StoreResult<()>>>,
    },
    /// Drop acked records older than `acked_before_ms` and expired idempotency keys.
    Cleanup {
        now_ms: Millis,
        acked_before_ms: Millis,
    },
    /// Append a push attempt to a message's delivery log (`delivery_log.rs`), keeping its last
    /// `keep`. Sent just before the ack or nack it ends with, whose answer covers it.
    LogDelivery {
        seq: Seq,
        entry: String,
        keep: usize,
    },
    /// Answered once everything sent before it is committed.
    Flush {
        reply: oneshot::Sender<StoreResult<()>>,
    },
    /// Ops applied in one transaction, in order: all of them are stored or none (an ack and
    /// the next steps it enqueues). Each is answered as it would be alone. Its ack has changed
    /// the index already, so it is kept until stored, as an ack is.
    Together(Vec<WriteOp>),
}

/// One dead letter to replay: what the new message's index entry needs besides its body,
/// which is copied on disk.
pub struct ReplayItem {
    pub seq: Seq,
    pub idempotency_key: Option<Arc<str>>,
    pub key: Option<Arc<str>>,
    pub priority: i32,
    pub payload: Option<Arc<Payload>>,
}

impl WriteOp {
    /// Ops that do a lot of work: each is committed in a group of its own.
    fn is_heavy(&self) -> bool {
        match self {
            WriteOp::QueueDelete { .. } | WriteOp::Purge { .. } | WriteOp::Replay { .. } => true,
            WriteOp::Finish { seqs, .. } => seqs.len() > 100,
            _ => false,
        }
    }

    /// Ops refused while the disk is full: they add data, and memory has not changed for them
    /// yet (an enqueue enters the index only once stored). Every other op is kept until it is
    /// stored, because the index already made its change (an ack dropped the message, a queue
    /// definition is served): dropping it would leave memory and disk disagreeing.
    fn refused_when_full(&self) -> bool {
        matches!(
            self,
            WriteOp::Enqueue { .. }
                | WriteOp::WebhookPut { .. }
                | WriteOp::Schedule {
                    write: ScheduleWrite::Put { .. },
                    ..
                }
        )
    }

    /// The answer of an op whose group was committed.
    fn into_pending(self, applied: Applied) -> Pending {
        let created = |applied: Applied| match applied {
            Applied::Created { results, entries } => (results, entries),
            Applied::Done | Applied::Together(_) => (Vec::new(), Vec::new()),
        };
        match self {
            WriteOp::Enqueue {
                queue,
                now_ms,
                reply,
                charge,
                ..
            } => {
                let (results, entries) = created(applied);
                Pending::Enqueue {
                    reply,
                    results,
                    entries,
                    queue,
                    now_ms,
                    charge: Some(charge),
                }
            }
            WriteOp::Replay {
                target: queue,
                now_ms,
                reply,
                ..
            } => {
                let (results, entries) = created(applied);
                Pending::Enqueue {
                    reply,
                    results,
                    entries,
                    queue,
                    now_ms,
                    charge: None,
                }
            }
            WriteOp::Ack { reply, .. }
            | WriteOp::QueuePause { reply, .. }
            | WriteOp::WebhookPut { reply, .. }
            | WriteOp::WebhookDelete { reply, .. }
            | WriteOp::Schedule { reply, .. }
            | WriteOp::QueuePut { reply, .. }
            | WriteOp::QueueDelete { reply, .. }
            | WriteOp::ForgetIds { reply, .. }
            | WriteOp::Flush { reply } => Pending::Unit(reply),
            WriteOp::Finish { reply, .. }
            | WriteOp::Apply { reply, .. }
            | WriteOp::Claimed { reply, .. }
            | WriteOp::Purge { reply, .. } => reply.map_or(Pending::Nothing, Pending::Unit),
            WriteOp::Cleanup { .. } | WriteOp::LogDelivery { .. } => Pending::Nothing,
            WriteOp::Together(ops) => {
                let applied = match applied {
                    Applied::Together(applied) => applied,
                    // Not applied (it cannot happen: `apply` answers an op in kind).
                    Applied::Created { .. } | Applied::Done => Vec::new(),
                };
                let mut applied = applied.into_iter();
                Pending::Together(
                    ops.into_iter()
                        .map(|op| op.into_pending(applied.next().unwrap_or(Applied::Done)))
                        .collect(),
                )
            }
        }
    }
}

/// What applying one op inside the transaction produced, answered once durable.
pub enum Applied {
    /// New messages (enqueue, replay): the callers' results and the index entries.
    Created {
        results: Vec<Enqueued>,
        entries: Vec<Entry>,
    },
    /// Anything else.
    Done,
    /// A [`WriteOp::Together`]: what each of its ops produced, in order.
    Together(Vec<Applied>),
}

/// What the writer thread owns.
pub struct Writer {
    pub conn: Connection,
    pub publisher: Arc<Publisher>,
    /// Committed groups go here to be made durable; `None` with `durability = "os"`.
    pub syncer: Option<SyncSender<Vec<Pending>>>,
    pub syncer_thread: Option<std::thread::JoinHandle<()>>,
    /// Whether writes are taken: disk full (temporary) or stopped (for good).
    pub health: Arc<WriteHealth>,
    /// Space kept back for acks when the disk fills.
    pub reserve: Reserve,
    /// Keeps the WAL under its limit.
    pub wal_limit: WalLimit,
    /// Ops that hit a full disk and must still reach it; they go first in the next group.
    pub held: Vec<WriteOp>,
    pub next_seq: Seq,
    pub payload_cache_bytes: usize,
    pub checkpoint: Arc<crate::checkpoint::CheckpointSignal>,
    pub claims: DeferredClaims,
    /// Write every deferred claim record in the next group (on flush and at the end).
    pub flush_all_claims: bool,
    /// Group sizes, for metrics.
    pub stats: Arc<crate::metrics::WriteStats>,
    /// Counts the requests this thread takes off the channel.
    pub inbox: Arc<Inbox>,
}

/// The outcome of one op, answered once durable.
pub enum Pending {
    Enqueue {
        reply: oneshot::Sender<StoreResult<Vec<Enqueued>>>,
        results: Vec<Enqueued>,
        entries: Vec<Entry>,
        queue: Arc<str>,
        now_ms: Millis,
        /// An enqueue's room in the inbox (none for a replay), given back once answered.
        charge: Option<Charge>,
    },
    Unit(oneshot::Sender<StoreResult<()>>),
    Nothing,
    /// A [`WriteOp::Together`]'s answers, published and answered as if sent one by one.
    Together(Vec<Pending>),
}

impl Pending {
    /// The answers of a group with every [`Pending::Together`] opened up, in order.
    pub fn flatten(pendings: Vec<Pending>) -> Vec<Pending> {
        // Most groups hold none: they are handed on as they are, without a copy.
        if !pendings
            .iter()
            .any(|pending| matches!(pending, Pending::Together(_)))
        {
            return pendings;
        }
        let mut flat = Vec::with_capacity(pendings.len());
        for pending in pendings {
            match pending {
                Pending::Together(inner) => flat.extend(Pending::flatten(inner)),
                pending => flat.push(pending),
            }
        }
        flat
    }
}

impl Writer {
    /// Runs until every sender is gone.
    pub fn run(mut self, ops: Receiver<WriteOp>) {
        let mut group = Vec::with_capacity(GROUP_OPS_MAX);
        loop {
            // Wait for work, or until a deferred claim record falls due or a full disk is
            // probed for space (held ops are retried then).
            // While the disk is full, deferred claims wait for the probe: they could not be
            // written anyway, and waking for them would spin.
            let claims_due_at = (!self.health.is_full())
                .then(|| self.claims.next_due())
                .flatten();
            let wake_at = [claims_due_at, self.reserve.next_probe()]
                .into_iter()
                .flatten()
                .min();
            let first = match wake_at {
                Some(due) => {
                    match ops.recv_timeout(due.saturating_duration_since(Instant::now())) {
                        Ok(op) => Some(op),
                        Err(RecvTimeoutError::Timeout) => None,
                        Err(RecvTimeoutError::Disconnected) => break,
                    }
                }
                None => match ops.recv() {
                    Ok(op) => Some(op),
                    Err(_) => break,
                },
            };
            if first.is_some() {
                self.inbox.taken();
            }
            group.extend(first);
            // A chunk of a queue deletion ends the group, so chunks commit one by one and other
            // writes get in between them.
            while group.len() < GROUP_OPS_MAX && !group.last().is_some_and(WriteOp::is_heavy) {
                match ops.try_recv() {
                    Ok(op) => {
                        self.inbox.taken();
                        group.push(op);
                    }
                    Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
                }
            }
            self.look_for_space();
            self.commit_group(&mut group);
        }
        self.flush_all_claims = true;
        self.commit_group(&mut group);
        for op in self.held.drain(..) {
            fail_op(op, &crate::health::disk_full);
        }
        // Let the syncer answer the last groups, then checkpoint with syncing on: this
        // connection runs with synchronous=OFF because the syncer does its syncs.
        self.syncer = None;
        if let Some(thread) = self.syncer_thread.take() {
            let _ = thread.join();
        }
        if let Err(error) = self.conn.pragma_update(None, "synchronous", "FULL") {
            tracing::warn!(%error, "cannot turn syncing on for the final checkpoint");
        }
        // The checkpoint thread has stopped by now, so this one can finish: the next start then
        // has no WAL to replay. A busy result (1 in the first column) means it could not.
        match self
            .conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| {
                row.get::<_, i64>(0)
            }) {
            Ok(0) => {}
            Ok(_) => tracing::warn!(
                "final checkpoint was blocked; the WAL is replayed at the next start"
            ),
            Err(error) => tracing::warn!(%error, "final checkpoint failed"),
        }
    }

    /// While the disk is full: the reserve is given back (the checkpointer may have found the
    /// disk full first), and a due probe that finds room again lets new data in.
    fn look_for_space(&mut self) {
        if !self.health.is_full() {
            return;
        }
        self.reserve.on_full();
        if self.reserve.probe(Instant::now()) {
            self.health.set_full(false);
            tracing::info!("the disk has room again; new messages are taken again");
        }
    }

    fn commit_group(&mut self, group: &mut Vec<WriteOp>) {
        if let Some(reason) = self.health.stopped() {
            let reason = reason.to_owned();
            for op in self.held.drain(..).chain(group.drain(..)) {
                fail_op(op, &|| StoreError::WritesStopped(reason.clone()));
            }
            return;
        }
        if !self.held.is_empty() {
            // Held ops first: the disk sees changes in the order the index made them.
            let newer = std::mem::take(group);
            group.append(&mut self.held);
            group.extend(newer);
        }
        loop {
            if self.health.is_full() {
                for op in group.extract_if(.., |op| op.refused_when_full()) {
                    fail_op(op, &crate::health::disk_full);
                }
            }
            // An empty group still commits the claim records that fell due (the writer woke
            // for them); returning without them would wake it again at once, and again.
            if group.is_empty() && !self.claims_due() {
                return;
            }
            let first_seq = self.next_seq;
            let error = match self.apply_group(group) {
                Ok(applied) => {
                    self.committed(group, applied);
                    return;
                }
                Err(error) => error,
            };
            // Nothing of the group was stored; it is still whole in `group`.
            self.next_seq = first_seq;
            match classify(&error) {
                Failure::DiskFull => {
                    let newly = !self.health.set_full(true);
                    if newly {
                        tracing::error!(%error, "the disk is full: new messages are refused until space is freed; acks go on");
                    }
                    if self.reserve.next_probe().is_none() {
                        // The reserve is free from now on: try again at once, without new data.
                        self.reserve.on_full();
                        self.wal_limit.truncate(&self.conn, &self.checkpoint);
                        continue;
                    }
                    // Even the reserve did not help: keep them until a probe finds room.
                    self.held.append(group);
                    return;
                }
                Failure::Busy => {
                    tracing::warn!(%error, "group commit found the database locked; retrying");
                    std::thread::sleep(BUSY_RETRY);
                }
                Failure::Fatal => {
                    // The index may already hold what this group failed to write (acks,
                    // cancels, removals): from here memory and disk could disagree, so the
                    // store takes no more writes. A restart reloads the truth from disk.
                    let reason = format!("a write failed: {error}");
                    tracing::error!(%error, ops = group.len(), "group commit failed; nothing in it was stored");
                    self.health.stop(reason.clone());
                    for op in group.drain(..) {
                        fail_op(op, &|| StoreError::WritesStopped(reason.clone()));
                    }
                    return;
                }
            }
        }
    }

    /// Whether deferred claim records are due to be written now (and the disk can take them).
    fn claims_due(&self) -> bool {
        !self.health.is_full()
            && (self.flush_all_claims
                || self
                    .claims
                    .next_due()
                    .is_some_and(|at| at <= Instant::now()))
    }

    /// Hands a committed group to the syncer (or answers it), and keeps the WAL bounded.
    fn committed(&mut self, group: &mut Vec<WriteOp>, applied: Vec<Applied>) {
        let pendings: Vec<Pending> = group
            .drain(..)
            .zip(applied)
            .map(|(op, applied)| op.into_pending(applied))
            .collect();
        self.stats.group_commit_ops.record(pendings.len() as u64);
        self.checkpoint
            .dirty
            .store(true, std::sync::atomic::Ordering::Relaxed);
        match &self.syncer {
            // The syncer makes the group durable and answers it, while this thread goes on
            // with the next group.
            Some(syncer) => {
                if let Err(unsent) = syncer.send(pendings) {
                    self.publisher.fail(unsent.0, || {
                        StoreError::Unavailable("the WAL sync thread has stopped".into())
                    });
                }
            }
            None => self.publisher.publish(pendings),
        }
        self.wal_limit.after_commit(&self.conn, &self.checkpoint);
    }

    /// Applies and commits a group. On failure nothing of it is stored (the transaction is
    /// rolled back) and the group can be tried again as it is.
    fn apply_group(&mut self, group: &[WriteOp]) -> rusqlite::Result<Vec<Applied>> {
        let started = Instant::now();
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut applied = Vec::with_capacity(group.len());
        for op in group {
            if matches!(op, WriteOp::Flush { .. }) {
                self.flush_all_claims = true;
            }
            applied.push(apply(
                &tx,
                op,
                &mut self.next_seq,
                self.payload_cache_bytes,
                &mut self.claims,
            )?);
        }
        let everything = std::mem::take(&mut self.flush_all_claims);
        let due = self.claims.take_due(Instant::now(), everything);
        match finish_group(tx, &due, started, applied.len()) {
            Ok(()) => Ok(applied),
            Err(error) => {
                // Written with the next group instead.
                self.claims.restore(due);
                self.flush_all_claims = everything;
                Err(error)
            }
        }
    }
}

/// A claim record: a message's attempts and first receive (none once its attempts are back to
/// 0: a give-back of a delivery never started).
const CLAIM_RECORD_SQL: &str = "UPDATE messages SET attempts = ?2, \
     first_received_at = CASE WHEN ?2 = 0 THEN NULL ELSE ?3 END WHERE seq = ?1";

/// Writes the due claim records and commits.
fn finish_group(
    tx: rusqlite::Transaction<'_>,
    due: &[(Seq, u32, Millis)],
    started: Instant,
    ops: usize,
) -> rusqlite::Result<()> {
    if !due.is_empty() {
        let mut statement = tx.prepare_cached(CLAIM_RECORD_SQL)?;
        for &(seq, attempts, first_received_at_ms) in due {
            statement.execute(params![seq as i64, attempts, first_received_at_ms])?;
        }
    }
    let applied = started.elapsed();
    tx.commit()?;
    let total = started.elapsed();
    if total >= SLOW_GROUP {
        tracing::warn!(
            ops,
            apply_ms = applied.as_millis() as u64,
            commit_ms = (total - applied).as_millis() as u64,
            "slow group commit"
        );
    }
    Ok(())
}

/// Answers an op that will not be stored with `error()`.
fn fail_op(op: WriteOp, error: &dyn Fn() -> StoreError) {
    match op {
        WriteOp::Enqueue { reply, charge, .. } => {
            // The room is free before the caller hears, so a retry finds it.
            drop(charge);
            let _ = reply.send(Err(error()));
        }
        WriteOp::Replay { reply, .. } => {
            let _ = reply.send(Err(error()));
        }
        WriteOp::Together(ops) => {
            for op in ops {
                fail_op(op, error);
            }
        }
        WriteOp::Ack { reply, .. }
        | WriteOp::QueuePause { reply, .. }
        | WriteOp::WebhookPut { reply, .. }
        | WriteOp::WebhookDelete { reply, .. }
        | WriteOp::Schedule { reply, .. }
        | WriteOp::QueuePut { reply, .. }
        | WriteOp::QueueDelete { reply, .. }
        | WriteOp::ForgetIds { reply, .. }
        | WriteOp::Flush { reply }
        | WriteOp::Finish {
            reply: Some(reply), ..
        }
        | WriteOp::Apply {
            reply: Some(reply), ..
        }
        | WriteOp::Claimed {
            reply: Some(reply), ..
        }
        | WriteOp::Purge {
            reply: Some(reply), ..
        } => {
            let _ = reply.send(Err(error()));
        }
        WriteOp::Apply { reply: None, .. }
        | WriteOp::Finish { reply: None, .. }
        | WriteOp::Claimed { .. }
        | WriteOp::Cleanup { .. }
        | WriteOp::LogDelivery { .. }
        | WriteOp::Purge { reply: None, .. } => {}
    }
}

/// Applies one op inside the group's transaction. Takes the op by reference: if the group
/// fails, it is tried again as it is.
fn apply(
    tx: &rusqlite::Transaction<'_>,
    op: &WriteOp,
    next_seq: &mut Seq,
    payload_cache_bytes: usize,
    claims: &mut DeferredClaims,
) -> rusqlite::Result<Applied> {
    Ok(match op {
        WriteOp::Together(ops) => Applied::Together(
            ops.iter()
                .map(|op| apply(tx, op, next_seq, payload_cache_bytes, claims))
                .collect::<rusqlite::Result<_>>()?,
        ),
        WriteOp::Enqueue {
            queue,
            dedup_window_ms,
            now_ms,
            messages,
            ..
        } => {
            let (dedup_window_ms, now_ms) = (*dedup_window_ms, *now_ms);
            let mut results = Vec::with_capacity(messages.len());
            let mut entries = Vec::with_capacity(messages.len());
            for message in messages {
                if let Some(key) = &message.idempotency_key
                    && let Some(existing) = find_idempotent(tx, queue, key, now_ms)?
                {
                    results.push(Enqueued {
                        message_id: existing.message_id,
                        created: false,
                        position: 0,
                    });
                    continue;
                }
                let seq = *next_seq;
                *next_seq += 1;
                let id = sluice_core::stored::ids::encode(seq, now_ms);
                insert_message(tx, seq, id, queue, message, now_ms)?;
                if let Some(key) = &message.idempotency_key {
                    tx.prepare_cached("INSERT OR REPLACE INTO idempotency (queue, key, message_id, expires_at) VALUES (?1, ?2, ?3, ?4)")?
                        .execute(params![&**queue, key, id.as_bytes(), now_ms + dedup_window_ms])?;
                }
                let mut entry = Entry::new(
                    seq,
                    id,
                    queue.clone(),
                    message.priority,
                    message.key.as_deref().map(Arc::from),
                    now_ms,
                    message.visible_at_ms,
                );
                entry.idempotency_key = message.idempotency_key.as_deref().map(Arc::from);
                entry.last_error = message
                    .dead_letter
                    .as_ref()
                    .and_then(|dead| dead.last_error.as_deref())
                    .map(Arc::from);
                entry.dead_letter = message.dead_letter.clone().map(Arc::new);
                if payload_cache_bytes > 0 {
                    entry.payload = Some(message.payload.clone());
                }
                entries.push(entry);
                results.push(Enqueued {
                    message_id: id,
                    created: true,
                    position: 0,
                });
            }
            Applied::Created { results, entries }
        }
        WriteOp::Claimed {
            records,
            reply: None,
        } => {
            let now = Instant::now();
            for &(seq, attempts, first_received_at_ms) in records {
                claims.record(seq, attempts, first_received_at_ms, now);
            }
            Applied::Done
        }
        WriteOp::Claimed {
            records,
            reply: Some(_),
        } => {
            let mut statement = tx.prepare_cached(CLAIM_RECORD_SQL)?;
            for &(seq, attempts, first_received_at_ms) in records {
                claims.forget(seq);
                statement.execute(params![seq as i64, attempts, first_received_at_ms])?;
            }
            Applied::Done
        }
        WriteOp::Ack {
            seqs,
            memos,
            result,
            kept_until,
            now_ms,
            ..
        } => {
            // A kept row keeps its body and headers until `kept_until`; the cleanup drops
            // them then (`Store::maintain`, `lib.rs`).
            let mut statement = tx.prepare_cached("UPDATE messages SET state = ?2, acked_at = ?3, body = CASE WHEN ?7 IS NULL THEN NULL ELSE body END, headers = CASE WHEN ?7 IS NULL THEN NULL ELSE headers END, result = ?4, attempts = ?5, first_received_at = ?6, kept_until = ?7 WHERE seq = ?1")?;
            for &(seq, attempts, first_received_at_ms) in seqs {
                claims.forget(seq);
                statement.execute(params![
                    seq as i64,
                    STATE_ACKED,
                    now_ms,
                    result,
                    attempts,
                    first_received_at_ms,
                    kept_until
                ])?;
            }
            let mut statement = tx.prepare_cached("UPDATE idempotency SET acked_at = ?4, result = ?5 WHERE queue = ?1 AND key = ?2 AND message_id = ?3")?;
            for (queue, key, id) in memos {
                statement.execute(params![&**queue, &**key, id.as_bytes(), now_ms, result])?;
            }
            Applied::Done
        }
        WriteOp::Finish {
            seqs,
            state,
            reason,
            now_ms,
            ..
        } => {
            finish_rows(tx, seqs, *state, reason.as_deref(), *now_ms, claims)?;
            Applied::Done
        }
        WriteOp::Replay {
            target,
            items,
            dedup_window_ms,
            now_ms,
            ..
        } => {
            let (dedup_window_ms, now_ms) = (*dedup_window_ms, *now_ms);
            let mut results = Vec::with_capacity(items.len());
            let mut entries = Vec::with_capacity(items.len());
            for item in items {
                let seq = *next_seq;
                *next_seq += 1;
                let id = sluice_core::stored::ids::encode(seq, now_ms);
                let copied = tx
                    .prepare_cached(
                        "INSERT INTO messages (seq, id, queue, state, priority, msg_key, idempotency_key, visible_at, enqueued_at, attempts, body, body_kind, headers)
                         SELECT ?1, ?2, ?3, ?4, priority, msg_key, idempotency_key, ?5, ?5, 0, body, body_kind, headers FROM messages WHERE seq = ?6",
                    )?
                    .execute(params![seq as i64, id.as_bytes(), &**target, STATE_LIVE, now_ms, item.seq as i64])?;
                if copied == 0 {
                    // The index had it but the row is gone: nothing to replay.
                    *next_seq -= 1;
                    results.push(Enqueued {
                        message_id: Uuid::nil(),
                        created: false,
                        position: 0,
                    });
                    continue;
                }
                claims.forget(item.seq);
                tx.prepare_cached(
                    "UPDATE messages SET state = ?2, acked_at = ?3, replayed_as = ?4 WHERE seq = ?1",
                )?
                .execute(params![item.seq as i64, STATE_REPLAYED, now_ms, id.as_bytes()])?;
                if let Some(key) = &item.idempotency_key {
                    // The key now answers with the live replay, not the dead letter.
                    tx.prepare_cached("INSERT OR REPLACE INTO idempotency (queue, key, message_id, expires_at) VALUES (?1, ?2, ?3, ?4)")?
                        .execute(params![&**target, &**key, id.as_bytes(), now_ms + dedup_window_ms])?;
                }
                let mut entry = Entry::new(
                    seq,
                    id,
                    target.clone(),
                    item.priority,
                    item.key.clone(),
                    now_ms,
                    now_ms,
                );
                entry.idempotency_key = item.idempotency_key.clone();
                entry.payload = item.payload.clone().filter(|_| payload_cache_bytes > 0);
                entries.push(entry);
                results.push(Enqueued {
                    message_id: id,
                    created: true,
                    position: 0,
                });
            }
            Applied::Created { results, entries }
        }
        WriteOp::WebhookPut {
            name, spec, now_ms, ..
        } => {
            tx.prepare_cached(
                "INSERT INTO webhooks (name, spec, created_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (name) DO UPDATE SET spec = excluded.spec",
            )?
            .execute(params![name, spec, now_ms])?;
            Applied::Done
        }
        WriteOp::WebhookDelete { name, .. } => {
            tx.prepare_cached("DELETE FROM webhooks WHERE name = ?1")?
                .execute(params![name])?;
            Applied::Done
        }
        WriteOp::Schedule { write, .. } => {
            crate::schedules::apply(tx, write)?;
            Applied::Done
        }
        WriteOp::QueuePause {
            name,
            pause,
            paused,
            ..
        } => {
            let sql = match pause {
                PauseKind::Deliveries => "UPDATE queues SET paused = ?2 WHERE name = ?1",
                PauseKind::Push => "UPDATE queues SET push_paused = ?2 WHERE name = ?1",
            };
            tx.prepare_cached(sql)?.execute(params![name, paused])?;
            Applied::Done
        }
        WriteOp::Apply {
            changes, now_ms, ..
        } => {
            for change in changes {
                claims.forget(change.seq());
                apply_change(tx, change, *now_ms, claims)?;
            }
            Applied::Done
        }
        WriteOp::QueuePut { queues, now_ms, .. } => {
            for (name, config) in queues {
                tx.prepare_cached(
                    "INSERT INTO queues (name, config, created_at) VALUES (?1, ?2, ?3)
                     ON CONFLICT (name) DO UPDATE SET config = excluded.config",
                )?
                .execute(params![name, config, now_ms])?;
            }
            Applied::Done
        }
        WriteOp::ForgetIds { queue, .. } => {
            tx.execute("DELETE FROM idempotency WHERE queue = ?1", params![queue])?;
            Applied::Done
        }
        WriteOp::QueueDelete { name, seqs, .. } => {
            tx.execute("DELETE FROM idempotency WHERE queue = ?1", params![name])?;
            tx.execute("DELETE FROM queues WHERE name = ?1", params![name])?;
            delete_rows(tx, seqs)?;
            // Its kept acked messages go with it, or a queue made again under the name would
            // list them (through `messages_kept`: the time grows with the queue's keeps).
            tx.execute(
                "DELETE FROM messages WHERE queue = ?1 AND kept_until IS NOT NULL",
                params![name],
            )?;
            Applied::Done
        }
        WriteOp::Purge { seqs, .. } => {
            delete_rows(tx, seqs)?;
            Applied::Done
        }
        WriteOp::Cleanup {
            now_ms,
            acked_before_ms,
        } => {
            tx.prepare_cached("DELETE FROM messages WHERE seq IN (SELECT seq FROM messages WHERE state > 0 AND kept_until IS NULL AND acked_at < ?1 LIMIT ?2)")?
                .execute(params![acked_before_ms, CLEANUP_ROWS_MAX])?;
            // Kept acked rows whose keep ended become ordinary acked records: the line above
            // removes them once past the retention of those (reads stop showing the body at
            // `kept_until` whenever this runs).
            tx.prepare_cached("UPDATE messages SET kept_until = NULL, body = NULL, headers = NULL WHERE seq IN (SELECT seq FROM messages WHERE kept_until IS NOT NULL AND kept_until <= ?1 LIMIT ?2)")?
                .execute(params![now_ms, CLEANUP_ROWS_MAX])?;
            tx.prepare_cached("DELETE FROM idempotency WHERE (queue, key) IN (SELECT queue, key FROM idempotency WHERE expires_at < ?1 LIMIT ?2)")?
                .execute(params![now_ms, CLEANUP_ROWS_MAX])?;
            Applied::Done
        }
        WriteOp::LogDelivery { seq, entry, keep } => {
            crate::delivery_log::append(tx, *seq, entry, *keep)?;
            Applied::Done
        }
        WriteOp::Flush { .. } => Applied::Done,
    })
}

/// Puts messages in a final state, dropping their bodies (a replayed one keeps it).
fn finish_rows(
    tx: &rusqlite::Transaction<'_>,
    seqs: &[Seq],
    state: i64,
    reason: Option<&str>,
    now_ms: Millis,
    claims: &mut DeferredClaims,
) -> rusqlite::Result<()> {
    let mut statement = tx.prepare_cached(
        "UPDATE messages SET state = ?2, acked_at = ?3, body = NULL, headers = NULL, last_error = COALESCE(?4, last_error) WHERE seq = ?1 AND state = 0",
    )?;
    for &seq in seqs {
        claims.forget(seq);
        statement.execute(params![seq as i64, state, now_ms, reason])?;
    }
    Ok(())
}

/// Deletes message rows by primary key.
pub fn delete_rows(conn: &Connection, seqs: &[Seq]) -> rusqlite::Result<()> {
    let mut statement = conn.prepare_cached("DELETE FROM messages WHERE seq = ?1")?;
    for &seq in seqs {
        statement.execute(params![seq as i64])?;
    }
    Ok(())
}

/// What an idempotency key answers with while its window is open.
#[derive(Debug, Clone)]
pub struct IdempotencyRecord {
    /// The first message.
    pub message_id: Uuid,
    /// When that message was acked, if it was.
    pub acked_at_ms: Option<Millis>,
    /// The result it was acked with.
    pub result: Option<String>,
}

/// The record an idempotency key still answers with, if its window is open.
pub fn find_idempotent(
    conn: &Connection,
    queue: &str,
    key: &str,
    now_ms: Millis,
) -> rusqlite::Result<Option<IdempotencyRecord>> {
    let found: Option<(Vec<u8>, Option<Millis>, Option<String>)> = conn
        .prepare_cached(
            "SELECT message_id, acked_at, result FROM idempotency WHERE queue = ?1 AND key = ?2 AND expires_at > ?3",
        )?
        .query_row(params![queue, key, now_ms], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })
        .optional()?;
    Ok(found.and_then(|(id, acked_at_ms, result)| {
        Some(IdempotencyRecord {
            message_id: Uuid::from_slice(&id).ok()?,
            acked_at_ms,
            result,
        })
    }))
}

fn insert_message(
    tx: &rusqlite::Transaction<'_>,
    seq: Seq,
    id: Uuid,
    queue: &str,
    message: &NewMessage,
    now_ms: Millis,
) -> rusqlite::Result<()> {
    let headers = if message.payload.headers.is_empty() {
        None
    } else {
        serde_json::to_string(&message.payload.headers).ok()
    };
    let dead = message.dead_letter.as_ref();
    tx.prepare_cached(
        "INSERT INTO messages (seq, id, queue, state, priority, msg_key, idempotency_key, visible_at, enqueued_at, attempts, body, body_kind, headers,
                              last_error, dead_source_queue, dead_last_error, dead_attempts, dead_first_seen_at, dead_last_seen_at,
                              first_visible_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 0, ?10, ?11, ?12, ?13, ?14, ?13, ?15, ?16, ?17, ?18)",
    )?
    .execute(params![
        seq as i64,
        id.as_bytes(),
        queue,
        STATE_LIVE,
        message.priority,
        message.key,
        message.idempotency_key,
        message.visible_at_ms,
        now_ms,
        message.payload.body_bytes,
        crate::body_kind::BodyKindColumn(message.payload.body_kind),
        headers,
        dead.and_then(|d| d.last_error.as_deref()),
        dead.map(|d| d.source_queue.as_str()),
        dead.map(|d| d.attempts),
        dead.map(|d| d.first_seen_at_ms),
        dead.map(|d| d.last_seen_at_ms),
        // NULL (its enqueue) unless delayed: the common row stays as small as before.
        (message.visible_at_ms > now_ms).then_some(message.visible_at_ms),
    ])?;
    Ok(())
}

fn apply_change(
    tx: &rusqlite::Transaction<'_>,
    change: &Change,
    now_ms: Millis,
    claims: &mut DeferredClaims,
) -> rusqlite::Result<()> {
    match change {
        Change::Expired { seq } => finish_rows(tx, &[*seq], STATE_EXPIRED, None, now_ms, claims)?,
        Change::Retried {
            seq,
            attempts,
            visible_at_ms,
            last_error,
        } => {
            tx.prepare_cached(
                "UPDATE messages SET attempts = ?2, visible_at = ?3, last_error = ?4,
                 failures = json_insert(coalesce(failures, '[]'), '$[#]', json_object('attempt', ?2, 'at', ?5, 'error', ?4))
                 WHERE seq = ?1",
            )?
            .execute(params![*seq as i64, attempts, visible_at_ms, last_error.as_deref(), now_ms])?;
        }
        Change::DeadLettered { seq, queue, info } => {
            tx.prepare_cached(
                "UPDATE messages SET queue = ?2, attempts = 0, first_received_at = NULL, visible_at = ?3, last_error = ?4,
                 dead_source_queue = ?5, dead_last_error = ?4, dead_attempts = ?6, dead_first_seen_at = ?7, dead_last_seen_at = ?8,
                 failures = json_insert(coalesce(failures, '[]'), '$[#]', json_object('attempt', ?6, 'at', ?3, 'error', ?4, 'dead_lettered', json('true')))
                 WHERE seq = ?1",
            )?
            .execute(params![*seq as i64, &**queue, now_ms, info.last_error, info.source_queue, info.attempts, info.first_seen_at_ms, info.last_seen_at_ms])?;
        }
    }
    Ok(())
}
