//! Topics: definitions compiled with their filters ([`Topic`]), the set the server serves
//! ([`Registry`]), and a publish ([`publish`]): one copy per subscription whose filter takes the
//! message, all stored in one commit (`Ops::enqueue_together`).
//!
//! Definitions come from the config file (applied at every start) and the admin API; both are
//! stored (`Store::definition_put`), and every node of a shared store serves what is stored.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLock;
use serde_json::{Value, json};
use sluice_core::message::BodyKind;
use sluice_core::queue::validate_queue_name;
use sluice_ops::{Definable, MessageRequest, OpsError};
use sluice_webhooks::expr::Expr;
use sluice_wire::{ErrorCode, TopicCopyOut, TopicOut, TopicSpec, TopicStatsOut};

use crate::error::ApiError;
use crate::expr::{self, EvalError};
use crate::state::AppState;

/// Most subscriptions of one topic.
pub const SUBSCRIPTIONS_MAX: usize = 100;

/// Counts of one topic since start.
#[derive(Debug, Default)]
pub struct TopicStats {
    published: AtomicU64,
    copies: AtomicU64,
    filtered: AtomicU64,
    duplicates: AtomicU64,
}

impl TopicStats {
    /// The wire form.
    pub fn out(&self) -> TopicStatsOut {
        TopicStatsOut {
            published: self.published.load(Ordering::Relaxed),
            copies: self.copies.load(Ordering::Relaxed),
            filtered: self.filtered.load(Ordering::Relaxed),
            duplicates: self.duplicates.load(Ordering::Relaxed),
        }
    }
}

/// A checked topic.
#[derive(Debug)]
pub struct Topic {
    /// Its name.
    pub name: String,
    /// The definition as given.
    pub spec: TopicSpec,
    /// Each subscription's filter, compiled.
    filters: Vec<Option<Expr>>,
    /// Counts since start.
    pub stats: TopicStats,
}

impl Topic {
    /// Checks a definition (not whether its queues exist); the error names the field.
    pub fn compile(name: &str, spec: TopicSpec) -> Result<Topic, String> {
        validate_queue_name(name)
            .map_err(|e| format!("name: {}", e.replace("queue name", "topic name")))?;
        if spec.subscriptions.len() > SUBSCRIPTIONS_MAX {
            return Err(format!(
                "subscriptions: {} subscriptions; at most {SUBSCRIPTIONS_MAX} are allowed",
                spec.subscriptions.len()
            ));
        }
        let mut seen = HashSet::new();
        let mut filters = Vec::with_capacity(spec.subscriptions.len());
        for (index, subscription) in spec.subscriptions.iter().enumerate() {
            validate_queue_name(&subscription.queue)
                .map_err(|e| format!("subscriptions[{index}].queue: {e}"))?;
            if !seen.insert(subscription.queue.as_str()) {
                return Err(format!(
                    "subscriptions[{index}].queue: {:?} is subscribed twice",
                    subscription.queue
                ));
            }
            let filter = subscription
                .filter
                .as_deref()
                .map(Expr::compile)
                .transpose()
                .map_err(|e| format!("subscriptions[{index}].filter: {e}"))?;
            filters.push(filter);
        }
        Ok(Topic {
            name: name.to_owned(),
            spec,
            filters,
            stats: TopicStats::default(),
        })
    }

    /// The wire form.
    pub fn out(&self) -> TopicOut {
        TopicOut {
            name: self.name.clone(),
            spec: self.spec.clone(),
            stats: self.stats.out(),
        }
    }
}

/// The topics this server serves, by name.
#[derive(Debug, Default)]
pub struct Registry {
    topics: RwLock<HashMap<String, Arc<Topic>>>,
}

impl Registry {
    /// One topic.
    pub fn get(&self, name: &str) -> Option<Arc<Topic>> {
        self.topics.read().get(name).cloned()
    }

    /// Every topic, by name.
    pub fn list(&self) -> Vec<Arc<Topic>> {
        let mut all: Vec<_> = self.topics.read().values().cloned().collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }

    /// Adds or replaces a topic (its counters start again); true when it is new.
    pub fn insert(&self, topic: Topic) -> bool {
        self.topics
            .write()
            .insert(topic.name.clone(), Arc::new(topic))
            .is_none()
    }

    /// Removes a topic; true when it existed.
    pub fn remove(&self, name: &str) -> bool {
        self.topics.write().remove(name).is_some()
    }

    /// Serves exactly the `stored` definitions: an unchanged one keeps its counters, a changed
    /// one is compiled again, one no longer stored goes. One that does not compile is not
    /// served, with an error in the log.
    pub fn reconcile(&self, stored: Vec<(String, String)>) {
        let mut next = HashMap::with_capacity(stored.len());
        for (name, text) in stored {
            let current = self.get(&name);
            let unchanged = current.as_ref().is_some_and(|topic| {
                serde_json::to_string(&topic.spec).ok().as_deref() == Some(text.as_str())
            });
            if let (true, Some(topic)) = (unchanged, current) {
                next.insert(name, topic);
                continue;
            }
            match serde_json::from_str(&text)
                .map_err(|e| e.to_string())
                .and_then(|spec| Topic::compile(&name, spec))
            {
                Ok(topic) => {
                    next.insert(name, Arc::new(topic));
                }
                Err(error) => {
                    tracing::error!(topic = %name, %error, "a stored topic does not compile; not served");
                }
            }
        }
        *self.topics.write() = next;
    }
}

/// Checks, stores and serves a definition; true when the topic is new. Shared by the API and
/// the config file.
pub async fn define(app: &AppState, name: &str, spec: TopicSpec) -> Result<bool, ApiError> {
    let topic = Topic::compile(name, spec).map_err(ApiError::invalid_field)?;
    let stored = serde_json::to_string(&topic.spec)
        .map_err(|e| ApiError::invalid_field(format!("cannot store the topic: {e}")))?;
    app.ops
        .definition_put(sluice_ops::DefinitionPut {
            kind: Definable::Topic,
            name,
            spec: stored,
            queues: topic
                .spec
                .subscriptions
                .iter()
                .map(|subscription| subscription.queue.as_str())
                .collect(),
            topics: Vec::new(),
        })
        .await?;
    Ok(app.topics.insert(topic))
}

/// Deletes a topic; false when there was none.
pub async fn delete(app: &AppState, name: &str) -> Result<bool, ApiError> {
    let stored = app.ops.definition_delete(Definable::Topic, name).await?;
    let served = app.topics.remove(name);
    Ok(stored || served)
}

/// The topic of that name, or 404 `topic_not_found`.
pub fn find(app: &AppState, name: &str) -> Result<Arc<Topic>, ApiError> {
    app.topics.get(name).ok_or_else(|| not_found(name))
}

/// The 404 of a topic that does not exist, or that the caller may not know of.
pub fn not_found(name: &str) -> ApiError {
    ApiError::new(ErrorCode::TopicNotFound, format!("no topic {name:?}"))
}

/// Publishes one message: a copy to each subscription whose filter takes it, in one commit.
/// `id` (the message's idempotency key) is the key of every copy, so publishing again with
/// it stores nothing new and answers each copy's first message.
pub async fn publish(
    app: &AppState,
    topic: &Topic,
    message: MessageRequest,
) -> Result<Vec<TopicCopyOut>, ApiError> {
    topic.stats.published.fetch_add(1, Ordering::Relaxed);
    let taken = matching(app, topic, &message).await?;
    let filtered = topic.filters.len() - taken.len();
    topic
        .stats
        .filtered
        .fetch_add(filtered as u64, Ordering::Relaxed);
    // Checked before a copy is made: each subscription stores the whole message, so a big
    // message to many subscriptions must be refused while it is still one message.
    let one: usize = message.body.0.len()
        + message
            .headers
            .iter()
            .flatten()
            .map(|(name, value)| name.len() + value.len())
            .sum::<usize>();
    let total = one.saturating_mul(taken.len());
    if total > app.limits.max_topic_publish_bytes {
        return Err(ApiError::too_large(format!(
            "this message ({one} bytes) would be stored {} times, {total} bytes in all; one publish may store at most {} ([limits] max_topic_publish_bytes)",
            taken.len(),
            app.limits.max_topic_publish_bytes
        )));
    }
    let mut enqueues = Vec::with_capacity(taken.len());
    for &index in &taken {
        let queue = topic.spec.subscriptions[index].queue.clone();
        let mut enqueue = app.ops.enqueue_to(queue).await?;
        enqueue.add(message.clone(), "")?;
        enqueues.push(enqueue);
    }
    if enqueues.is_empty() {
        return Ok(Vec::new());
    }
    let answers = app.ops.enqueue_together(enqueues).await?;
    let mut copies = Vec::with_capacity(answers.len());
    for (index, answer) in taken.into_iter().zip(answers) {
        let Some(out) = answer.into_iter().next() else {
            continue;
        };
        let counter = if out.created {
            &topic.stats.copies
        } else {
            &topic.stats.duplicates
        };
        counter.fetch_add(1, Ordering::Relaxed);
        copies.push(TopicCopyOut {
            queue: topic.spec.subscriptions[index].queue.clone(),
            message_id: out.message_id,
            created: out.created,
        });
    }
    Ok(copies)
}

/// The subscriptions (by index) whose filter takes the message; the filters run in one
/// evaluation in the expression workers.
async fn matching(
    app: &AppState,
    topic: &Topic,
    message: &MessageRequest,
) -> Result<Vec<usize>, ApiError> {
    let programs: Vec<_> = topic.filters.iter().flatten().map(expr::program).collect();
    if programs.is_empty() {
        return Ok((0..topic.filters.len()).collect());
    }
    let (bytes, kind) = &message.body;
    let body = match kind {
        BodyKind::Json => serde_json::from_slice(bytes).unwrap_or(Value::Null),
        BodyKind::Bytes => Value::Null,
    };
    let input = json!({
        "body": body,
        "headers": message.headers.clone().unwrap_or_default(),
        "key": message.key,
        "priority": message.priority.unwrap_or(0),
    });
    let results = app
        .expr
        .eval(&programs, &input)
        .await
        .map_err(|e| match e {
            EvalError::Unavailable(why) => ApiError::unavailable(why),
            EvalError::Stopped(why) => ApiError::from(OpsError::invalid_field(format!(
                "a subscription's filter failed: {why}"
            ))),
        })?;
    let mut results = results.into_iter();
    let mut taken = Vec::new();
    for (index, filter) in topic.filters.iter().enumerate() {
        if filter.is_none() {
            taken.push(index);
            continue;
        }
        let output = results.next().ok_or_else(|| {
            ApiError::invalid_field("a subscription's filter stopped early".to_owned())
        })?;
        let output = output.map_err(|e| {
            ApiError::invalid_field(format!("subscriptions[{index}].filter failed: {e}"))
        })?;
        if output.is_some_and(|v| !matches!(v, Value::Null | Value::Bool(false))) {
            taken.push(index);
        }
    }
    Ok(taken)
}
