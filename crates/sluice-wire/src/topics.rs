//! The JSON (and TOML) shapes of topics: one publish, one copy per matching subscription.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// One subscription of a topic: a queue, and which messages it takes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubscriptionSpec {
    /// The queue copies go to (it must exist).
    pub queue: String,
    /// A jq expression over `{"body": <JSON body, or null for bytes>, "headers": {...},
    /// "key": <ordering key or null>, "priority": <n>}`: the queue gets a copy when its first
    /// output is neither false nor null. Without one, every message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
}

/// A topic: `PUT /v1/topics/{name}` or `[topics.<name>]` in the config file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TopicSpec {
    /// Where a published message goes (at most 100; each queue once).
    #[serde(default)]
    pub subscriptions: Vec<SubscriptionSpec>,
}

/// A topic's counts since this server started.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TopicStatsOut {
    /// Messages published (duplicates included).
    pub published: u64,
    /// Copies stored in subscribed queues.
    pub copies: u64,
    /// Copies not made because a subscription's filter dropped the message.
    pub filtered: u64,
    /// Copies answered as duplicates of an earlier publish with the same idempotency key.
    pub duplicates: u64,
}

/// A topic, its definition and counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TopicOut {
    /// Its name.
    pub name: String,
    /// The definition.
    pub spec: TopicSpec,
    /// Counts since this server started (each node counts its own publishes).
    pub stats: TopicStatsOut,
}

/// Answer to `GET /v1/topics`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TopicListOut {
    /// Every topic, by name.
    pub topics: Vec<TopicOut>,
}

/// Answer to `PUT /v1/topics/{name}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TopicPutOut {
    /// False when an existing topic was replaced (its counters start again).
    pub created: bool,
    /// The topic as it is now.
    pub topic: TopicOut,
}

/// Answer to `DELETE /v1/topics/{name}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TopicDeleteOut {
    /// Always true.
    pub deleted: bool,
}

/// One copy a publish stored (or found stored, for a duplicate).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TopicCopyOut {
    /// The subscribed queue.
    pub queue: String,
    /// The copy's message id in that queue (the first one's, for a duplicate).
    #[schema(value_type = String)]
    pub message_id: uuid::Uuid,
    /// False for a duplicate of an earlier publish with the same idempotency key.
    pub created: bool,
}

/// Answer to `POST /v1/topics/{name}/messages`: every copy, stored in one commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TopicPublishOut {
    /// One per subscription that took the message, in the topic's order; empty when no
    /// subscription's filter took it.
    pub copies: Vec<TopicCopyOut>,
}
