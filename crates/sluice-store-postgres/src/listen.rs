//! The listener: one dedicated connection per node that `LISTEN`s on `<schema>.config`, so a
//! definition changed on another node drops this node's cached copy, and on `<schema>.wake`,
//! so a message made claimable on another node wakes this node's waiters on its queue
//! (docs/design/postgres-store.md §3.1, §4.4).
//!
//! Each change also moves the store's `definitions_changed` counter, so the server reloads what
//! it keeps in memory (webhook endpoints; the push supervisor looks at the queues again); so
//! does each (re)connect, since changes made while it was away were announced to nobody here.
//! While it is not connected, wake-ups of other nodes are lost: every waiter of this node is
//! woken every 250 ms until it is back, and once more when it is, so they look again on their
//! own (their waits are bounded anyway, as the `Notifier` asks).
//! The listener never answers a caller: when its connection breaks it tells the cache (whose
//! entries are then re-checked before use) and reconnects with a jittered backoff, 100 ms
//! doubling to 5 s; a reconnect that fails declares the database lost (`health`), and the
//! database coming back (another connection made) ends its wait at once.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_postgres::AsyncMessage;

use crate::cache::QueueCache;

/// What a definition change reaches on this node.
#[derive(Clone)]
pub(crate) struct Followers {
    pub cache: Arc<QueueCache>,
    /// Bumped at every change and every (re)connect ([`sluice_core::Store::definitions_changed`]).
    pub changed: Arc<tokio::sync::watch::Sender<u64>>,
    /// This node's waiters, woken by `<schema>.wake` (payload: a queue name, or
    /// `<queue> <tag>` from a node's enqueue group).
    pub notifier: Arc<sluice_core::notify::Notifier>,
    /// This node's tag: a wake-up carrying it came from this node's own enqueue group, which
    /// woke the waiters at its commit already.
    pub wake_tag: String,
    /// Told when the listener cannot connect (the database is lost); its return cuts the
    /// listener's backoff short.
    pub health: Arc<crate::health::Health>,
}

impl Followers {
    fn bump(&self) {
        self.changed
            .send_modify(|count| *count = count.wrapping_add(1));
    }
}
use crate::connect;
use crate::health::{self, RECONNECT_MAX, RECONNECT_MIN};
use crate::options::PgOptions;

/// How often every waiter is woken while the listener is not connected.
const FALLBACK_WAKE: Duration = Duration::from_millis(250);

/// The channel of definition changes: payloads `queue:<name>`, `webhook:<name>`,
/// `push:<name>` (a push pause or resume).
pub(crate) fn config_channel(schema: &str) -> String {
    format!("{schema}.config")
}

/// The channel of wake-ups: payload, the name of a queue that may have a claimable message.
pub(crate) fn wake_channel(schema: &str) -> String {
    format!("{schema}.wake")
}

/// Starts the listener; it runs until the handle is aborted ([`crate::PgStore`]'s close).
pub(crate) fn spawn(
    options: PgOptions,
    connector: connect::Connector,
    followers: Followers,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut backoff = RECONNECT_MIN;
        loop {
            match listen_once(&options, &connector, &followers).await {
                // It was connected: start the next attempt from the shortest wait.
                Ok(()) => backoff = RECONNECT_MIN,
                Err(error) => {
                    tracing::warn!(schema = %options.schema, %error, "the store's listener cannot connect; cached definitions are re-checked before use");
                    followers.health.lost(&error);
                }
            }
            followers.cache.set_listening(false);
            // Equal jitter: several nodes that lost the database together do not come back
            // together.
            let reconnect_at = tokio::time::Instant::now() + health::jittered(backoff);
            // Once the database is back (another connection was made), at once.
            let was_lost = followers.health.check().is_err();
            // Wake-ups sent meanwhile reach nobody here: waiters look again on a timer, and
            // only while the listener is away (§3.1).
            loop {
                followers.notifier.wake_all();
                let now = tokio::time::Instant::now();
                if now >= reconnect_at {
                    break;
                }
                tokio::select! {
                    () = tokio::time::sleep_until(reconnect_at.min(now + FALLBACK_WAKE)) => {}
                    () = followers.health.until_regained(), if was_lost => break,
                }
            }
            backoff = (backoff * 2).min(RECONNECT_MAX);
        }
    })
}

/// One connection's life: connect, `LISTEN`, then apply notifications until it breaks.
/// `Ok` once it was listening (whatever ended it), `Err` when it never got that far.
async fn listen_once(
    options: &PgOptions,
    connector: &connect::Connector,
    followers: &Followers,
) -> Result<(), String> {
    let (client, mut connection) = connector.dedicated().await.map_err(|e| e.to_string())?;
    let channel = config_channel(&options.schema);
    let wake = wake_channel(&options.schema);
    // The connection must be polled for the LISTEN to be sent and answered; notifications that
    // arrive meanwhile are applied at once, the cache being cleared after anyway.
    let mut drive = std::pin::pin!(async {
        loop {
            match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                Some(Ok(AsyncMessage::Notification(notification))) => {
                    if notification.channel() == wake {
                        match notification.payload().split_once(' ') {
                            Some((_, tag)) if tag == followers.wake_tag => {}
                            Some((queue, _)) => followers.notifier.wake(queue),
                            None => followers.notifier.wake(notification.payload()),
                        }
                    } else {
                        apply(followers, notification.payload());
                    }
                }
                Some(Ok(_notice)) => {}
                Some(Err(error)) => return error.to_string(),
                None => return "the connection closed".to_owned(),
            }
        }
    });
    let listen_statement = format!("LISTEN \"{channel}\"; LISTEN \"{wake}\"");
    let listen = client.batch_execute(&listen_statement);
    tokio::select! {
        ended = &mut drive => return Err(ended),
        listened = listen => listened.map_err(|e| e.to_string())?,
    }
    // Changes committed before the LISTEN took effect were announced to nobody here.
    followers.cache.set_listening(true);
    // Wake-ups sent before the LISTEN reached nobody here; woken before the counter moves, so
    // whoever sees it move knows the catch-up wake-up is behind it.
    followers.notifier.wake_all();
    followers.bump();
    tracing::debug!(schema = %options.schema, "the store's listener is connected");
    let ended = drive.await;
    tracing::warn!(schema = %options.schema, reason = %ended, "the store's listener lost its connection; reconnecting");
    drop(client);
    Ok(())
}

/// Applies one `<schema>.config` payload.
fn apply(followers: &Followers, payload: &str) {
    match payload.split_once(':') {
        Some(("queue", name)) => followers.cache.invalidate(name),
        // Webhook endpoints and push pauses are not cached in the store: the server reloads
        // them.
        Some(("webhook" | "push", _)) => {}
        _ => {
            tracing::debug!(payload, "unknown definition change ignored");
            return;
        }
    }
    followers.bump();
}
