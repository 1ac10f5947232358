//! Leader election (docs/design/postgres-store.md §4.1): the node holding the session advisory
//! lock `(7567, hashtext(schema))` on a connection of its own runs the cluster's upkeep
//! (`crate::upkeep`). The lock lives exactly as long as that session: a node whose process dies
//! has its socket closed by the kernel, its backend exits and the lock is free at once; a node
//! that closes gives it up and says so on `<schema>.leader`, so a follower takes over at once.
//!
//! A follower tries the lock every [`TRY_EVERY`] and at each `<schema>.leader` notification; the
//! leader runs `SELECT 1` on its session every [`TRY_EVERY`], and when that fails it steps down at
//! once (the session, and with it the lock, may be gone) and comes back as a follower on a new
//! connection. Leadership is an optimisation, never a rule: every upkeep statement re-checks its
//! condition on the row it locked, so a moment with two leaders (an old one that has not noticed
//! yet) costs work, not correctness. Who leads is also written down in `nodes.is_leader`, for
//! operators and tests.
//!
//! This module must not run upkeep or answer callers; it only keeps [`Leadership`] true.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sluice_core::store::StoreResult;
use tokio::sync::{Notify, oneshot};
use tokio::task::JoinHandle;
use tokio_postgres::{AsyncMessage, Client};
use uuid::Uuid;

use crate::connect;
use crate::error::Db;
use crate::options::PgOptions;

/// The first half of the leadership lock's key (sluice's port plus one; 7566 is the
/// migrations', §1.6). The second half is the schema's hash, so stores on different schemas
/// of one database never share a lock.
pub(crate) const LOCK_KEY: i32 = 7567;
/// How often a follower tries the lock and the leader checks its session.
const TRY_EVERY: Duration = Duration::from_secs(1);
/// The first wait before connecting again after the session broke.
const RECONNECT_MIN: Duration = Duration::from_millis(100);
/// The longest wait before connecting again.
const RECONNECT_MAX: Duration = Duration::from_secs(5);

/// The channel a leader that steps down announces itself on: payload `resigned`.
pub(crate) fn leader_channel(schema: &str) -> String {
    format!("{schema}.leader")
}

/// Whether this node leads now, as far as it knows (it may learn a second late that its
/// session broke; see the module doc for why that is harmless).
#[derive(Debug, Default)]
pub(crate) struct Leadership {
    is_leader: AtomicBool,
}

impl Leadership {
    pub(crate) fn is_leader(&self) -> bool {
        self.is_leader.load(Ordering::Acquire)
    }

    fn set(&self, is_leader: bool) {
        self.is_leader.store(is_leader, Ordering::Release);
    }
}

/// The elector of this node: its task and the way to stop it.
pub(crate) struct Elector {
    leadership: Arc<Leadership>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl Elector {
    /// Connects the election session, tries the lock once (so a node alone on its schema leads
    /// when `open` returns) and starts the task that keeps trying. `Unavailable` when the
    /// database cannot be reached.
    pub(crate) async fn start(options: PgOptions, node_id: Uuid) -> StoreResult<Self> {
        let leadership = Arc::new(Leadership::default());
        let session = Session::connect(&options).await?;
        let election = Election {
            options,
            node_id,
            leadership: leadership.clone(),
        };
        if election.try_to_lead(&session.client).await? {
            election.became_leader();
        }
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(election.run(session, stopped));
        Ok(Self {
            leadership,
            stop: Some(stop),
            task: Some(task),
        })
    }

    pub(crate) fn leadership(&self) -> Arc<Leadership> {
        self.leadership.clone()
    }

    /// Stops trying; a leader gives the lock up and announces it, so another node takes over
    /// at once. Waits at most `within` for that.
    pub(crate) async fn resign(&mut self, within: Duration) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take()
            && tokio::time::timeout(within, task).await.is_err()
        {
            tracing::warn!("the leader did not step down in time; its lock goes with its session");
        }
        self.leadership.set(false);
    }
}

impl Drop for Elector {
    /// A store dropped without `close` behaves as a process that died: the session closes with
    /// the task, and the lock with it.
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// The election session: a dedicated connection whose notifications (`<schema>.leader`) are
/// turned into wake-ups of [`Election::run`].
struct Session {
    client: Client,
    /// Notified at a `<schema>.leader` notification, and when the connection ends.
    changed: Arc<Notify>,
}

impl Session {
    async fn connect(options: &PgOptions) -> StoreResult<Self> {
        let (client, mut connection) = connect::Connector::new(options)?.dedicated().await?;
        let changed = Arc::new(Notify::new());
        let notify = changed.clone();
        tokio::spawn(async move {
            // Ends when the connection does: a broken socket, or the client dropped.
            while let Some(Ok(message)) =
                std::future::poll_fn(|cx| connection.poll_message(cx)).await
            {
                if let AsyncMessage::Notification(_) = message {
                    notify.notify_one();
                }
            }
            notify.notify_one();
        });
        // The server's keepalives on this session (§4.1): a leader whose machine vanished
        // without closing its socket loses its backend, and the lock, in about 11 s.
        client
            .batch_execute(&format!(
                "{} SET tcp_keepalives_idle = 5; SET tcp_keepalives_interval = 2; \
                 SET tcp_keepalives_count = 3; LISTEN \"{}\"",
                connect::session_settings(options),
                leader_channel(&options.schema)
            ))
            .await
            .db()?;
        Ok(Self { client, changed })
    }
}

/// What the elector's task owns.
struct Election {
    options: PgOptions,
    node_id: Uuid,
    leadership: Arc<Leadership>,
}

/// Why a session's life ended.
enum Ended {
    /// `close` asked: the session was given up cleanly.
    Stopped,
    /// The session broke (or a statement on it failed).
    Broken(String),
}

impl Election {
    /// Tries the lock; on success writes `nodes.is_leader` (this node's row true, any other's
    /// false: a leader that died without stepping down is no longer one).
    async fn try_to_lead(&self, client: &Client) -> StoreResult<bool> {
        let locked: bool = client
            .query_one(
                "SELECT pg_try_advisory_lock($1, hashtext($2))",
                &[&LOCK_KEY, &self.options.schema],
            )
            .await
            .db()?
            .get(0);
        if locked {
            client
                .execute(
                    "UPDATE nodes SET is_leader = (node_id = $1) WHERE is_leader OR node_id = $1",
                    &[&self.node_id],
                )
                .await
                .db()?;
        }
        Ok(locked)
    }

    fn became_leader(&self) {
        self.leadership.set(true);
        tracing::info!(schema = %self.options.schema, node = %self.options.node_name, "this node leads the store's upkeep");
    }

    /// Runs until `stop`: serves each session until it breaks, then connects a new one after a
    /// jittered backoff. `first` is the session `start` made.
    async fn run(self, first: Session, mut stop: oneshot::Receiver<()>) {
        let mut session = Some(first);
        let mut backoff = RECONNECT_MIN;
        loop {
            let current = match session.take() {
                Some(current) => current,
                None => match Session::connect(&self.options).await {
                    Ok(current) => current,
                    Err(error) => {
                        tracing::debug!(%error, "the election session cannot connect");
                        if self.wait(&mut stop, &mut backoff).await {
                            return;
                        }
                        continue;
                    }
                },
            };
            match self.serve(&current, &mut stop).await {
                Ended::Stopped => {
                    self.step_down(&current.client).await;
                    return;
                }
                Ended::Broken(why) => {
                    if self.leadership.is_leader() {
                        tracing::warn!(reason = %why, "this node lost its election session and steps down");
                    }
                    self.leadership.set(false);
                }
            }
            drop(current);
            backoff = RECONNECT_MIN;
            if self.wait(&mut stop, &mut backoff).await {
                return;
            }
        }
    }

    /// Follows or leads on one session until it breaks or `stop` comes.
    async fn serve(&self, session: &Session, stop: &mut oneshot::Receiver<()>) -> Ended {
        loop {
            if self.leadership.is_leader() {
                if let Err(error) = session.client.simple_query("SELECT 1").await {
                    return Ended::Broken(error.to_string());
                }
            } else {
                match self.try_to_lead(&session.client).await {
                    Ok(true) => self.became_leader(),
                    Ok(false) => {}
                    Err(error) => return Ended::Broken(error.to_string()),
                }
            }
            tokio::select! {
                _ = &mut *stop => return Ended::Stopped,
                // A resignation elsewhere (or this connection ending): look at once.
                () = session.changed.notified() => {
                    if session.client.is_closed() {
                        return Ended::Broken("the connection closed".into());
                    }
                }
                () = tokio::time::sleep(TRY_EVERY) => {}
            }
        }
    }

    /// Gives the lock up and announces it (a follower then tries at once).
    async fn step_down(&self, client: &Client) {
        if !self.leadership.is_leader() {
            return;
        }
        self.leadership.set(false);
        let resigned = async {
            client
                .execute(
                    "UPDATE nodes SET is_leader = false WHERE node_id = $1",
                    &[&self.node_id],
                )
                .await?;
            client
                .query_one(
                    "SELECT pg_advisory_unlock($1, hashtext($2)), pg_notify($3, 'resigned')",
                    &[
                        &LOCK_KEY,
                        &self.options.schema,
                        &leader_channel(&self.options.schema),
                    ],
                )
                .await
        }
        .await;
        match resigned {
            Ok(_) => {
                tracing::info!(schema = %self.options.schema, "this node stepped down as leader")
            }
            // The lock goes with the session, which closes next.
            Err(error) => tracing::debug!(%error, "stepping down failed; the session closes"),
        }
    }

    /// Waits the backoff (jittered, doubled for next time); true when `stop` came meanwhile.
    async fn wait(&self, stop: &mut oneshot::Receiver<()>, backoff: &mut Duration) -> bool {
        let ms = backoff.as_millis() as i64;
        let jittered = sluice_core::rules::backoff::random_draw(ms / 2..=ms);
        *backoff = (*backoff * 2).min(RECONNECT_MAX);
        tokio::select! {
            _ = stop => true,
            () = tokio::time::sleep(Duration::from_millis(jittered as u64)) => false,
        }
    }
}
