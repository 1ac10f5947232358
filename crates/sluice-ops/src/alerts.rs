//! Alerts: defining them, and the pass that notifies.
//!
//! An alert watches queues (by name or prefix) for dead letters and, optionally, for a depth or
//! an oldest-ready age over a threshold. Its notifications are messages in a queue of its own,
//! `sluice.alerts.<name>`, whose push destination is the alert's (a Slack incoming webhook or
//! any URL, signed with Standard Webhooks when asked); a command destination is run by the
//! server for each. So a notification that cannot be delivered is retried with backoff and
//! dead-lettered like any message, and the queue's stats show what is waiting or failing.
//!
//! A pass ([`Ops::alerts_pass`], on every node's upkeep) reads each alert's progress, counts
//! the dead letters since its last notification for each watched queue, enqueues what is due
//! with an idempotency key made from the progress it read, and then swaps the progress from
//! the text it read ([`sluice_core::store::Store::definition_swap`]). Several nodes passing
//! at once make one notification; a crash between the enqueue and the swap makes it again
//! as a duplicate, which the key answers with the first.

use std::collections::{BTreeMap, HashSet};

use sluice_core::message::BodyKind;
use sluice_core::queue::validate_queue_name;
use sluice_core::rules::alert::{ThresholdStep, threshold_step, window_allows};
use sluice_core::store::DeadLetterFilter;
use sluice_core::store::{DeadLetterQuery, DefinitionKind, QueueInfo};
use sluice_core::stored::AlertState;
use sluice_core::stored::alert_state::{PendingDeadLetters, QueueMarks, ThresholdMark};
use sluice_core::{Millis, StoreError};
use sluice_wire::{AlertSpec, ErrorCode, PushSpec, QueueSpec};
use uuid::Uuid;

use crate::enqueue::MessageRequest;
use crate::queues::QueuePutRequest;
use crate::{Ops, OpsError, OpsResult};

/// The name of every alert's queue starts with this; alerts never watch these queues.
pub const ALERT_QUEUE_PREFIX: &str = "sluice.alerts.";
/// The header naming the alert a notification came from.
pub const ALERT_HEADER: &str = "sluice-alert";
/// Most dead letters one notification counts; beyond, the count is a floor (`count_capped`).
pub const DEAD_LETTER_COUNT_MAX: u64 = 100_000;
/// Dead letters are counted once they are this old: a dead letter's time is taken just before
/// its commit, so one counted the moment it happened could be committed after the count read
/// and fall between two notifications.
pub const DEAD_LETTER_SETTLE_MS: Millis = 1_000;

const WINDOW_MS_DEFAULT: Millis = 300_000;
const WINDOW_MS_MIN: Millis = 1_000;
const WINDOW_MS_MAX: Millis = 7 * 24 * 3_600_000;
const SAMPLE_SIZE_DEFAULT: u32 = 5;
const SAMPLE_SIZE_MAX: u32 = 20;
const MAX_ATTEMPTS_DEFAULT: u32 = 10;
const PATTERNS_MAX: usize = 100;
const COUNT_PAGE: usize = 1_000;
/// The longest error quoted in a notification, in characters.
const ERROR_QUOTE_MAX: usize = 300;

/// Who is defining an alert: only the config file may name a command to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlertOrigin {
    /// `PUT /v1/alerts/{name}` and the clients built on it.
    Api,
    /// `[alerts.<name>]` in the config file (and alerts read back from the store).
    ConfigFile,
}

/// What one pass did, over every alert.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AlertsPassed {
    /// Notifications enqueued.
    pub notifications: u64,
    /// Notifications that could not be enqueued (tried again next pass).
    pub failed: u64,
}

/// How a notification's body is written for its alert's destination (a Slack message, the
/// alert event's JSON): the server's, which renders; ops decides what is notified and when.
pub trait NotificationFormat: Send + Sync {
    /// The body of the message that carries `event` to `alert`'s destination.
    fn body(&self, alert: &Alert, event: &AlertEvent) -> String;
}

/// What a notification is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlertKind {
    /// Messages of a watched queue were dead-lettered.
    DeadLetters,
    /// A queue's depth passed the alert's `depth_above`.
    Depth,
    /// A queue's oldest ready message passed the alert's `oldest_ready_age_above_ms`.
    OldestReadyAge,
}

impl AlertKind {
    /// Its name on the wire and in idempotency keys.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::DeadLetters => "dead_letters",
            Self::Depth => "depth",
            Self::OldestReadyAge => "oldest_ready_age",
        }
    }
}

/// One notification, as decided.
#[derive(Debug, Clone, PartialEq)]
pub struct AlertEvent {
    /// What it is about.
    pub kind: AlertKind,
    /// False when a threshold is back within its limit (resolved).
    pub firing: bool,
    /// The alert's name.
    pub alert: String,
    /// The watched queue.
    pub queue: String,
    /// When it was decided.
    pub at_ms: Millis,
    /// For dead letters: how many, when, and the newest of them.
    pub dead_letters: Option<DeadLettersCounted>,
    /// For a threshold: the value seen and the alert's limit.
    pub threshold: Option<(i64, i64)>,
}

/// The dead letters one notification counts.
#[derive(Debug, Clone, PartialEq)]
pub struct DeadLettersCounted {
    /// How many.
    pub count: u64,
    /// True when there were more than [`DEAD_LETTER_COUNT_MAX`] (the count is a floor).
    pub capped: bool,
    /// Dead-lettered at or after this time ...
    pub since_ms: Millis,
    /// ... and before this one.
    pub until_ms: Millis,
    /// Where they are.
    pub dead_letter_queue: String,
    /// The newest of them, at most the alert's `sample_size`.
    pub sample: Vec<AlertSample>,
}

/// One dead letter a notification shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertSample {
    /// Its id.
    pub message_id: Uuid,
    /// Its last error, quoted as one line of plain text ([`quote_error`]).
    pub error: Option<String>,
    /// Its attempts.
    pub attempts: u32,
    /// When it was dead-lettered.
    pub dead_lettered_at_ms: Millis,
}

/// An alert's definition with what it did so far.
#[derive(Debug, Clone, PartialEq)]
pub struct AlertView {
    /// Its name.
    pub name: String,
    /// The definition as given.
    pub spec: AlertSpec,
    /// Its progress: notifications sent, when, which thresholds fire.
    pub state: AlertState,
}

impl AlertView {
    /// Its queue, `sluice.alerts.<name>`.
    pub fn queue(&self) -> String {
        queue_name(&self.name)
    }

    /// The queues over one of its thresholds now.
    pub fn firing(&self) -> Vec<String> {
        self.state
            .queues
            .iter()
            .filter(|(_, marks)| marks.depth.firing || marks.oldest_ready_age.firing)
            .map(|(queue, _)| queue.clone())
            .collect()
    }
}

/// What an alert put did.
#[derive(Debug, Clone, PartialEq)]
pub struct AlertPutDone {
    /// False when an existing alert was replaced.
    pub created: bool,
    /// The alert as it is now.
    pub alert: AlertView,
}

/// An alert checked and with its defaults filled in.
#[derive(Debug, Clone)]
pub struct Alert {
    /// Its name.
    pub name: String,
    /// The definition as given.
    pub spec: AlertSpec,
    window_ms: Millis,
    sample_size: usize,
    patterns: Vec<String>,
}

impl Alert {
    /// Checks a definition; the error names the field.
    pub fn compile(name: &str, spec: AlertSpec, origin: AlertOrigin) -> Result<Alert, String> {
        validate_queue_name(&queue_name(name)).map_err(|e| {
            format!("name: an alert's queue is {ALERT_QUEUE_PREFIX}<name>, and {e}")
        })?;
        let window_ms = spec.window_ms.unwrap_or(WINDOW_MS_DEFAULT);
        if !(WINDOW_MS_MIN..=WINDOW_MS_MAX).contains(&window_ms) {
            return Err(format!(
                "window_ms: {window_ms} is outside {WINDOW_MS_MIN}..={WINDOW_MS_MAX}"
            ));
        }
        let sample_size = spec.sample_size.unwrap_or(SAMPLE_SIZE_DEFAULT);
        if sample_size > SAMPLE_SIZE_MAX {
            return Err(format!(
                "sample_size: {sample_size} is more than {SAMPLE_SIZE_MAX}"
            ));
        }
        if spec.oldest_ready_age_above_ms.is_some_and(|ms| ms <= 0) {
            return Err("oldest_ready_age_above_ms: must be more than 0".into());
        }
        if spec
            .depth_above
            .is_some_and(|depth| depth > i64::MAX as u64)
        {
            return Err(format!("depth_above: at most {}", i64::MAX));
        }
        if spec.max_attempts == Some(0) {
            return Err("max_attempts: must be at least 1".into());
        }
        let patterns = spec.queues.clone().unwrap_or_else(|| vec!["*".into()]);
        if patterns.is_empty() || patterns.len() > PATTERNS_MAX {
            return Err(format!(
                "queues: give 1 to {PATTERNS_MAX} names or prefixes"
            ));
        }
        for (index, pattern) in patterns.iter().enumerate() {
            let stem = pattern.strip_suffix('*').unwrap_or(pattern);
            if stem.contains('*') || (!stem.is_empty() && validate_queue_name(stem).is_err()) {
                return Err(format!(
                    "queues[{index}]: {pattern:?} is neither a queue name nor a prefix ending in *"
                ));
            }
        }
        if spec.dead_letters == Some(false)
            && spec.depth_above.is_none()
            && spec.oldest_ready_age_above_ms.is_none()
        {
            return Err(
                "dead_letters: with it false, give depth_above or oldest_ready_age_above_ms, \
                 or there is nothing to watch"
                    .into(),
            );
        }
        let destination = &spec.destination;
        let named = [
            destination.slack_url.is_some(),
            destination.webhook_url.is_some(),
            destination.command.is_some(),
        ];
        if named.iter().filter(|named| **named).count() > 1 {
            return Err(
                "destination: give one of slack_url, webhook_url and command, not several".into(),
            );
        }
        if destination.webhook_url.is_none()
            && (destination.signing_secret.is_some() || destination.headers.is_some())
        {
            return Err("destination: signing_secret and headers go with webhook_url only".into());
        }
        if let Some(command) = &destination.command {
            if origin == AlertOrigin::Api {
                return Err(
                    "destination.command: only the config file may name a command to run".into(),
                );
            }
            if command.first().is_none_or(String::is_empty) {
                return Err("destination.command: give the program and its arguments".into());
            }
        }
        Ok(Alert {
            name: name.to_owned(),
            window_ms,
            sample_size: sample_size as usize,
            patterns,
            spec,
        })
    }

    /// The queue its notifications go through.
    pub fn queue(&self) -> String {
        queue_name(&self.name)
    }

    /// The command its notifications are given to, if that is its destination.
    pub fn command(&self) -> Option<&[String]> {
        self.spec.destination.command.as_deref()
    }

    /// Whether it watches `queue` (never a dead-letter queue nor an alert's queue: the caller
    /// leaves those out).
    fn watches(&self, queue: &str) -> bool {
        self.patterns
            .iter()
            .any(|pattern| match pattern.strip_suffix('*') {
                Some(prefix) => queue.starts_with(prefix),
                None => queue == pattern,
            })
    }

    /// The alert's queue: its push destination (none for a command, or for a consumer of its
    /// own), and the attempts a notification gets.
    fn queue_spec(&self) -> QueueSpec {
        let destination = &self.spec.destination;
        let push = match (&destination.slack_url, &destination.webhook_url) {
            (Some(url), _) => Some(PushSpec {
                url: url.clone(),
                method: None,
                headers: None,
                timeout_ms: None,
                transform: None,
                signing_secret: None,
                retry_client_errors: None,
                concurrency: Some(1),
                secret_path: Some(true),
            }),
            (None, Some(url)) => Some(PushSpec {
                url: url.clone(),
                method: None,
                headers: destination.headers.clone(),
                timeout_ms: None,
                transform: None,
                signing_secret: destination.signing_secret.clone(),
                retry_client_errors: None,
                concurrency: Some(1),
                secret_path: None,
            }),
            (None, None) => None,
        };
        QueueSpec {
            max_attempts: Some(self.spec.max_attempts.unwrap_or(MAX_ATTEMPTS_DEFAULT)),
            push: Some(push),
            ..QueueSpec::default()
        }
    }
}

/// The queue of the alert `name`.
pub fn queue_name(name: &str) -> String {
    format!("{ALERT_QUEUE_PREFIX}{name}")
}

fn not_found(name: &str) -> OpsError {
    OpsError::new(ErrorCode::AlertNotFound, format!("no alert {name:?}"))
}

impl Ops {
    /// Defines or replaces an alert, and its queue with the alert's destination as push.
    /// `check_push` checks that destination as the push workers will run it (the server's).
    pub async fn alert_put(
        &self,
        name: &str,
        spec: AlertSpec,
        origin: AlertOrigin,
        check_push: impl FnOnce(&PushSpec) -> Result<(), String>,
    ) -> OpsResult<AlertPutDone> {
        let alert = Alert::compile(name, spec, origin).map_err(OpsError::invalid_field)?;
        let created = self.alert_row(name).await?.is_none();
        if created {
            let defined = self
                .store
                .definition_list(DefinitionKind::Alert)
                .await?
                .len();
            crate::room_for_definition("alerts", defined)?;
        }
        self.queue_put(
            QueuePutRequest {
                name: alert.queue(),
                spec: alert.queue_spec(),
            },
            check_push,
        )
        .await
        .map_err(|mut error| {
            // The queue's push fields are the alert's destination fields.
            if error.code == ErrorCode::InvalidField {
                error.message = format!("destination: {}", error.message);
            }
            error
        })?;
        let text = serde_json::to_string(&alert.spec)
            .map_err(|e| OpsError::invalid_field(format!("cannot store the alert: {e}")))?;
        let now_ms = self.now_ms();
        if created {
            // Progress first, so no pass sees the alert without its start.
            let state = AlertState {
                started_ms: Some(now_ms),
                ..AlertState::default()
            };
            self.store
                .definition_put(DefinitionKind::AlertState, name, state.to_json(), now_ms)
                .await?;
        }
        self.store
            .definition_put(DefinitionKind::Alert, name, text, now_ms)
            .await?;
        Ok(AlertPutDone {
            created,
            alert: self.alert_get(name).await?,
        })
    }

    /// One alert and what it did.
    pub async fn alert_get(&self, name: &str) -> OpsResult<AlertView> {
        let spec = self.alert_row(name).await?.ok_or_else(|| not_found(name))?;
        let states = self.alert_states().await?;
        Ok(alert_view(name, spec, states.get(name)))
    }

    /// Every alert, by name.
    pub async fn alert_list(&self) -> OpsResult<Vec<AlertView>> {
        let states = self.alert_states().await?;
        Ok(self
            .store
            .definition_list(DefinitionKind::Alert)
            .await?
            .into_iter()
            .filter_map(|(name, text)| {
                let spec = read_spec(&name, &text)?;
                Some(alert_view(&name, spec, states.get(&name)))
            })
            .collect())
    }

    /// Every alert that compiles, for the server's command runner.
    pub async fn alerts(&self) -> OpsResult<Vec<Alert>> {
        Ok(self
            .store
            .definition_list(DefinitionKind::Alert)
            .await?
            .into_iter()
            .filter_map(|(name, text)| compile_stored(&name, &text))
            .collect())
    }

    /// Deletes an alert, its progress and its queue (notifications not yet delivered go too).
    pub async fn alert_delete(&self, name: &str) -> OpsResult<()> {
        if !self
            .store
            .definition_delete(DefinitionKind::Alert, name)
            .await?
        {
            return Err(not_found(name));
        }
        self.store
            .definition_delete(DefinitionKind::AlertState, name)
            .await?;
        let queue = queue_name(name);
        match self
            .queue_delete(&crate::Anyone, &queue, crate::OnDelete::DeleteDeadLetters)
            .await
        {
            Ok(_) => Ok(()),
            Err(error) if error.code == ErrorCode::QueueNotFound => Ok(()),
            Err(error) => Err(error),
        }
    }

    /// Makes every alert's due notifications, their bodies written by `format`. Called by the
    /// server's upkeep on a timer, on every node.
    pub async fn alerts_pass(&self, format: &dyn NotificationFormat) -> OpsResult<AlertsPassed> {
        let mut passed = AlertsPassed::default();
        let alerts = self.alerts().await?;
        if alerts.is_empty() {
            return Ok(passed);
        }
        let now_ms = self.now_ms();
        let queues = self.store.queue_list(now_ms).await?;
        let dead_letter_queues: HashSet<&str> = queues
            .iter()
            .filter_map(|info| info.config.dead_letter_queue.as_deref())
            .collect();
        let watchable: Vec<&QueueInfo> = queues
            .iter()
            .filter(|info| {
                !info.name.starts_with(ALERT_QUEUE_PREFIX)
                    && !dead_letter_queues.contains(info.name.as_str())
            })
            .collect();
        let states = self.alert_state_texts().await?;
        for alert in &alerts {
            // One alert's trouble (a store error) does not hold up the others.
            let pass = AlertPass {
                alert,
                queues: &watchable,
                all_queues: &queues,
                read_text: states.get(&alert.name).cloned(),
                format,
                now_ms,
            };
            if let Err(error) = self.pass_alert(pass, &mut passed).await {
                passed.failed += 1;
                tracing::warn!(alert = %alert.name, code = error.code.as_str(), error = %error.message, "an alert's pass failed; it is tried again");
            }
        }
        Ok(passed)
    }

    async fn pass_alert(&self, pass: AlertPass<'_>, passed: &mut AlertsPassed) -> OpsResult<()> {
        let AlertPass {
            alert,
            queues: watchable,
            all_queues: queues,
            read_text,
            format,
            now_ms,
        } = pass;
        // An alert's queue deleted by hand is made again: its notifications need it. (Not for
        // an alert deleted since this pass listed it.)
        if !queues.iter().any(|info| info.name == alert.queue())
            && self.alert_row(&alert.name).await?.is_some()
        {
            tracing::warn!(alert = %alert.name, queue = %alert.queue(), "an alert's queue was missing; made again");
            let request = QueuePutRequest {
                name: alert.queue(),
                spec: alert.queue_spec(),
            };
            // Its destination was checked when the alert was defined.
            self.queue_put(request, |_| Ok(())).await?;
        }
        let read = read_text
            .as_deref()
            .map(AlertState::from_json)
            .unwrap_or_default();
        // A queue seen for the first time counts its dead letters from the alert's start when
        // the alert has seen no queue yet (its first pass), else from now: a queue made or
        // watched later has no past of the alert's, and a key made from that time is new.
        let first_look_from_ms = match read.started_ms {
            Some(started) if read.queues.is_empty() => started,
            _ => now_ms,
        };
        let mut state = read.clone();
        state
            .queues
            .retain(|queue, _| watchable.iter().any(|info| &info.name == queue));
        for info in watchable.iter().filter(|info| alert.watches(&info.name)) {
            let pass = QueuePass {
                ops: self,
                alert,
                info,
                format,
                now_ms,
                first_look_from_ms,
            };
            pass.run(&mut state, passed).await;
        }
        if state != read {
            self.store
                .definition_swap(
                    DefinitionKind::AlertState,
                    &alert.name,
                    read_text,
                    state.to_json(),
                    now_ms,
                )
                .await?;
        }
        Ok(())
    }

    async fn alert_row(&self, name: &str) -> OpsResult<Option<AlertSpec>> {
        Ok(self
            .store
            .definition_list(DefinitionKind::Alert)
            .await?
            .into_iter()
            .find(|(existing, _)| existing == name)
            .and_then(|(name, text)| read_spec(&name, &text)))
    }

    async fn alert_state_texts(&self) -> OpsResult<BTreeMap<String, String>> {
        Ok(self
            .store
            .definition_list(DefinitionKind::AlertState)
            .await?
            .into_iter()
            .collect())
    }

    async fn alert_states(&self) -> OpsResult<BTreeMap<String, AlertState>> {
        Ok(self
            .alert_state_texts()
            .await?
            .into_iter()
            .map(|(name, text)| (name, AlertState::from_json(&text)))
            .collect())
    }
}

/// One alert's pass: what it reads.
struct AlertPass<'a> {
    alert: &'a Alert,
    queues: &'a [&'a QueueInfo],
    all_queues: &'a [QueueInfo],
    read_text: Option<String>,
    format: &'a dyn NotificationFormat,
    now_ms: Millis,
}

/// One alert's pass over one queue.
struct QueuePass<'a> {
    ops: &'a Ops,
    alert: &'a Alert,
    info: &'a QueueInfo,
    format: &'a dyn NotificationFormat,
    now_ms: Millis,
    /// Where a queue's dead letters count from when the alert sees it for the first time.
    first_look_from_ms: Millis,
}

impl QueuePass<'_> {
    async fn run(&self, state: &mut AlertState, passed: &mut AlertsPassed) {
        let queue = self.info.name.clone();
        let mut marks = state.queues.get(&queue).copied().unwrap_or(QueueMarks {
            dead_letters_from_ms: self.first_look_from_ms,
            ..QueueMarks::default()
        });
        let mut outcome = |result: OpsResult<bool>, state: &mut AlertState| match result {
            Ok(sent) => {
                if sent {
                    passed.notifications += 1;
                    state.last_sent_ms = Some(self.now_ms);
                }
            }
            Err(error) => {
                passed.failed += 1;
                tracing::warn!(alert = %self.alert.name, %queue, code = error.code.as_str(), error = %error.message, "an alert's notification was not made; it is tried again");
            }
        };
        if self.alert.spec.dead_letters != Some(false) {
            let result = self.dead_letters(&mut marks, state).await;
            outcome(result, state);
        }
        let depth = &self.info.depth;
        let thresholds = [
            (
                Threshold::Depth,
                self.alert.spec.depth_above.map(|limit| limit as i64),
                (depth.ready + depth.delayed + depth.in_flight) as i64,
            ),
            (
                Threshold::OldestReadyAge,
                self.alert.spec.oldest_ready_age_above_ms,
                depth.oldest_ready_age_ms.unwrap_or(0),
            ),
        ];
        for (threshold, limit, value) in thresholds {
            let Some(limit) = limit else {
                continue;
            };
            let (mark, sent) = match threshold {
                Threshold::Depth => (&mut marks.depth, &mut state.sent.depth),
                Threshold::OldestReadyAge => (
                    &mut marks.oldest_ready_age,
                    &mut state.sent.oldest_ready_age,
                ),
            };
            let result = self.threshold(threshold, mark, value, limit).await;
            if matches!(result, Ok(true)) {
                *sent += 1;
            }
            outcome(result, state);
        }
        state.queues.insert(queue, marks);
    }

    /// Makes the dead-letter notification an earlier pass decided, exactly as decided; else,
    /// when the window allows and there are new dead letters, decides one for the next pass.
    /// True when a notification was made.
    async fn dead_letters(
        &self,
        marks: &mut QueueMarks,
        state: &mut AlertState,
    ) -> OpsResult<bool> {
        if self.info.config.dead_letter_queue.is_none() {
            return Ok(false);
        }
        if let Some(pending) = marks.pending {
            self.notify_dead_letters(&pending).await?;
            marks.dead_letters_from_ms = pending.until_ms;
            marks.dead_letters_sent_ms = Some(pending.decided_ms);
            marks.pending = None;
            state.sent.dead_letters += 1;
            state.sent.dead_letters_counted += pending.count;
            return Ok(true);
        }
        if !window_allows(
            marks.dead_letters_sent_ms,
            self.now_ms,
            self.alert.window_ms,
        ) {
            return Ok(false);
        }
        let since = marks.dead_letters_from_ms;
        let until = self.now_ms - DEAD_LETTER_SETTLE_MS;
        if until <= since {
            return Ok(false);
        }
        // Decided here, made by the next pass: of several nodes deciding at once, the one
        // whose progress is stored wins, and every node then makes that one notification.
        if let Some(counted) = self.count_dead_letters(since, until).await? {
            marks.pending = Some(PendingDeadLetters {
                since_ms: since,
                until_ms: until,
                count: counted.count,
                capped: counted.capped,
                decided_ms: self.now_ms,
            });
        }
        Ok(false)
    }

    /// Enqueues the notification of a decided count, with its span's newest errors.
    async fn notify_dead_letters(&self, pending: &PendingDeadLetters) -> OpsResult<()> {
        let queue = &self.info.name;
        let (since, until) = (pending.since_ms, pending.until_ms);
        let page = self
            .dead_letter_page(since, until, None, self.alert.sample_size.max(1))
            .await?;
        let sample: Vec<AlertSample> = page
            .entries
            .iter()
            .take(self.alert.sample_size)
            .map(sample_of)
            .collect();
        let event = AlertEvent {
            kind: AlertKind::DeadLetters,
            firing: true,
            alert: self.alert.name.clone(),
            queue: queue.clone(),
            at_ms: pending.decided_ms,
            dead_letters: Some(DeadLettersCounted {
                count: pending.count,
                capped: pending.capped,
                since_ms: since,
                until_ms: until,
                dead_letter_queue: page.dead_letter_queue,
                sample,
            }),
            threshold: None,
        };
        let key = format!("alert:{}:{queue}:dead_letters:{since}", self.alert.name);
        self.notify(&event, key).await
    }

    /// A page of this queue's dead letters dead-lettered in `[since, until)`, newest first.
    async fn dead_letter_page(
        &self,
        since: Millis,
        until: Millis,
        before: Option<(Millis, sluice_core::store::Seq)>,
        limit: usize,
    ) -> Result<sluice_core::store::DeadLetters, StoreError> {
        let queue = &self.info.name;
        self.ops
            .store
            .dead_letter_list(DeadLetterQuery {
                queue: queue.clone(),
                filter: DeadLetterFilter {
                    source_queue: queue.clone(),
                    since_ms: Some(since),
                    until_ms: Some(until),
                    ..DeadLetterFilter::default()
                },
                before,
                limit,
            })
            .await
    }

    /// The dead letters of this queue dead-lettered in `[since, until)`, when there are any.
    /// A pass with nothing new reads little: a listing with `since` stops at the first entry
    /// older than it.
    async fn count_dead_letters(&self, since: Millis, until: Millis) -> OpsResult<Option<Counted>> {
        let mut counted = Counted {
            count: 0,
            capped: false,
        };
        let mut before = None;
        loop {
            let page = match self
                .dead_letter_page(since, until, before, COUNT_PAGE)
                .await
            {
                Ok(page) => page,
                // Deleted since the pass listed it.
                Err(StoreError::QueueNotFound(_)) => return Ok(None),
                Err(error) => return Err(error.into()),
            };
            counted.count += page.entries.len() as u64;
            // Entries are in the order they were dead-lettered, newest first: a page that
            // starts before `since` has nothing more to count.
            match page.next {
                Some(next) if next.0 >= since && counted.count < DEAD_LETTER_COUNT_MAX => {
                    before = Some(next);
                }
                Some(next) if next.0 >= since => {
                    counted.capped = true;
                    break;
                }
                _ => break,
            }
        }
        Ok((counted.count > 0).then_some(counted))
    }

    /// Notifies about a threshold when its step says so; true when a notification was made.
    async fn threshold(
        &self,
        threshold: Threshold,
        mark: &mut ThresholdMark,
        value: i64,
        limit: i64,
    ) -> OpsResult<bool> {
        let step = threshold_step(*mark, value > limit, self.now_ms, self.alert.window_ms);
        let firing = match step {
            ThresholdStep::Quiet => return Ok(false),
            ThresholdStep::Fire => true,
            ThresholdStep::Resolve => false,
        };
        let kind = match threshold {
            Threshold::Depth => AlertKind::Depth,
            Threshold::OldestReadyAge => AlertKind::OldestReadyAge,
        };
        let event = AlertEvent {
            kind,
            firing,
            alert: self.alert.name.clone(),
            queue: self.info.name.clone(),
            at_ms: self.now_ms,
            dead_letters: None,
            threshold: Some((value, limit)),
        };
        let key = format!(
            "alert:{}:{}:{}:{}:{}",
            self.alert.name,
            self.info.name,
            kind.as_str(),
            mark.sent_ms.unwrap_or(0),
            if firing { "firing" } else { "resolved" }
        );
        self.notify(&event, key).await?;
        *mark = ThresholdMark {
            firing,
            sent_ms: Some(self.now_ms),
        };
        Ok(true)
    }

    /// Enqueues one notification into the alert's queue, shaped for its destination.
    async fn notify(&self, event: &AlertEvent, key: String) -> OpsResult<()> {
        let body = self.format.body(self.alert, event);
        let mut enqueue = self.ops.enqueue_to(self.alert.queue()).await?;
        enqueue.add(
            MessageRequest {
                body: (body.into_bytes(), BodyKind::Json),
                id: Some(key),
                key: None,
                headers: Some(BTreeMap::from([(
                    ALERT_HEADER.to_owned(),
                    self.alert.name.clone(),
                )])),
                priority: None,
                delay_ms: None,
                not_before: None,
            },
            "",
        )?;
        self.ops.enqueue(enqueue).await?;
        Ok(())
    }
}

#[derive(Debug, Clone, Copy)]
enum Threshold {
    Depth,
    OldestReadyAge,
}

struct Counted {
    count: u64,
    capped: bool,
}

fn sample_of(entry: &sluice_core::store::DeadLetter) -> AlertSample {
    let status = &entry.status;
    let dead = status.dead_letter.as_ref();
    AlertSample {
        message_id: status.message_id,
        error: dead
            .and_then(|dead| dead.last_error.as_deref())
            .map(quote_error),
        attempts: dead.map_or(status.attempts, |dead| dead.attempts),
        dead_lettered_at_ms: dead.map_or(status.enqueued_at_ms, |d| d.last_seen_at_ms),
    }
}

/// A consumer's error as a notification quotes it: at most [`ERROR_QUOTE_MAX`] characters,
/// control characters (newlines, terminal escapes) as spaces. The text is the consumer's, and
/// a notification goes to Slack, a webhook or a command's standard input: one line of plain
/// text cannot pass for more lines of the notification or drive a terminal (issue 30,
/// finding 19).
pub fn quote_error(error: &str) -> String {
    error
        .chars()
        .take(ERROR_QUOTE_MAX)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

fn read_spec(name: &str, text: &str) -> Option<AlertSpec> {
    match serde_json::from_str(text) {
        Ok(spec) => Some(spec),
        Err(error) => {
            tracing::error!(alert = %name, %error, "a stored alert does not read; it is ignored");
            None
        }
    }
}

fn compile_stored(name: &str, text: &str) -> Option<Alert> {
    let spec = read_spec(name, text)?;
    match Alert::compile(name, spec, AlertOrigin::ConfigFile) {
        Ok(alert) => Some(alert),
        Err(error) => {
            tracing::error!(alert = %name, %error, "a stored alert does not compile; it is ignored");
            None
        }
    }
}

fn alert_view(name: &str, spec: AlertSpec, state: Option<&AlertState>) -> AlertView {
    AlertView {
        name: name.to_owned(),
        spec,
        state: state.cloned().unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_quoted_error_is_one_line_of_plain_text() {
        let quoted = super::quote_error("boom\n{\"fake\": true}\u{1b}[2J\r\tend");
        assert_eq!(quoted, "boom {\"fake\": true} [2J  end");
        let long = "x".repeat(super::ERROR_QUOTE_MAX + 10);
        assert_eq!(super::quote_error(&long).len(), super::ERROR_QUOTE_MAX);
    }

    use super::*;
    use sluice_wire::AlertDestinationSpec;

    fn compile(spec: AlertSpec) -> Result<Alert, String> {
        Alert::compile("ops", spec, AlertOrigin::Api)
    }

    #[test]
    fn patterns_match_names_and_prefixes() {
        let alert = compile(AlertSpec {
            queues: Some(vec!["orders".into(), "team-a.*".into()]),
            ..AlertSpec::default()
        })
        .unwrap();
        assert!(alert.watches("orders"));
        assert!(!alert.watches("orders2"));
        assert!(alert.watches("team-a.x"));
        assert!(!alert.watches("team-b.x"));
        assert!(compile(AlertSpec::default()).unwrap().watches("anything"));
    }

    #[test]
    fn definitions_are_checked_naming_the_field() {
        let refused = |spec: AlertSpec, field: &str| {
            let error = compile(spec).unwrap_err();
            assert!(error.starts_with(field), "{error}");
        };
        refused(
            AlertSpec {
                window_ms: Some(10),
                ..AlertSpec::default()
            },
            "window_ms",
        );
        refused(
            AlertSpec {
                queues: Some(vec!["a*b".into()]),
                ..AlertSpec::default()
            },
            "queues[0]",
        );
        refused(
            AlertSpec {
                dead_letters: Some(false),
                ..AlertSpec::default()
            },
            "dead_letters",
        );
        refused(
            AlertSpec {
                destination: AlertDestinationSpec {
                    slack_url: Some("https://x".into()),
                    webhook_url: Some("https://y".into()),
                    ..AlertDestinationSpec::default()
                },
                ..AlertSpec::default()
            },
            "destination",
        );
        let command = AlertSpec {
            destination: AlertDestinationSpec {
                command: Some(vec!["true".into()]),
                ..AlertDestinationSpec::default()
            },
            ..AlertSpec::default()
        };
        refused(command.clone(), "destination.command");
        assert!(Alert::compile("ops", command, AlertOrigin::ConfigFile).is_ok());
        assert!(Alert::compile(&"x".repeat(300), AlertSpec::default(), AlertOrigin::Api).is_err());
    }
}
