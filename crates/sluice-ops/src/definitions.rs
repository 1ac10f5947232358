//! Definitions the server compiles and serves itself (webhook endpoints, topics): stored as
//! opaque JSON, and checked here once for every door that defines them (the HTTP API, the
//! config file). What a definition means (its expressions, its secrets) is the server's to
//! compile before it calls; what it stands on (its queues and topics exist, and room for one
//! more of its kind) is decided here.

use sluice_core::store::DefinitionKind;
use sluice_wire::ErrorCode;

use crate::{Ops, OpsError, OpsResult, room_for_definition};

/// A kind of definition stored for the server to serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Definable {
    /// A webhook endpoint served at `/hooks/{name}`.
    WebhookEndpoint,
    /// A topic that fans a message out to queues.
    Topic,
}

impl Definable {
    /// How a refusal names several of them.
    fn plural(self) -> &'static str {
        match self {
            Definable::WebhookEndpoint => "webhook endpoints",
            Definable::Topic => "topics",
        }
    }
}

/// A definition to store under `name`, replacing one of its kind and name.
#[derive(Debug, Clone)]
pub struct DefinitionPut<'a> {
    /// What it defines.
    pub kind: Definable,
    /// Its name.
    pub name: &'a str,
    /// The definition as the server stores it (JSON).
    pub spec: String,
    /// The queues it sends to: each must exist (404 `queue_not_found`).
    pub queues: Vec<&'a str>,
    /// The topics it publishes to: each must exist (404 `topic_not_found`).
    pub topics: Vec<&'a str>,
}

impl Ops {
    /// Stores a definition once what it names exists and there is room for it: at most
    /// [`sluice_core::queue::limits::DEFINITIONS_PER_KIND_MAX`] of a kind (replacing one
    /// always fits). On a shared store, the other nodes' `definitions_changed` moves.
    pub async fn definition_put(&self, put: DefinitionPut<'_>) -> OpsResult<()> {
        let now_ms = self.now_ms();
        for queue in &put.queues {
            self.store.queue_get(queue, now_ms).await?;
        }
        if !put.topics.is_empty() {
            let topics = self.definition_list(Definable::Topic).await?;
            if let Some(missing) = put
                .topics
                .iter()
                .find(|topic| !topics.iter().any(|(name, _)| name == *topic))
            {
                return Err(OpsError::new(
                    ErrorCode::TopicNotFound,
                    format!("no topic {missing:?}"),
                ));
            }
        }
        let defined = self.definition_list(put.kind).await?;
        if !defined.iter().any(|(name, _)| name == put.name) {
            room_for_definition(put.kind.plural(), defined.len())?;
        }
        match put.kind {
            Definable::WebhookEndpoint => {
                self.store.webhook_put(put.name, put.spec, now_ms).await?
            }
            Definable::Topic => {
                self.store
                    .definition_put(DefinitionKind::Topic, put.name, put.spec, now_ms)
                    .await?;
            }
        }
        Ok(())
    }

    /// Deletes a definition; false when there was none.
    pub async fn definition_delete(&self, kind: Definable, name: &str) -> OpsResult<bool> {
        Ok(match kind {
            Definable::WebhookEndpoint => self.store.webhook_delete(name).await?,
            Definable::Topic => {
                self.store
                    .definition_delete(DefinitionKind::Topic, name)
                    .await?
            }
        })
    }

    /// Every stored definition of `kind`, as `(name, spec)` by name.
    pub async fn definition_list(&self, kind: Definable) -> OpsResult<Vec<(String, String)>> {
        Ok(match kind {
            Definable::WebhookEndpoint => self.store.webhook_list().await?,
            Definable::Topic => self.store.definition_list(DefinitionKind::Topic).await?,
        })
    }
}
