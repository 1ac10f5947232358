//! The rules of `sluice-core` that the PostgreSQL store writes as SQL arithmetic, held against
//! the Rust rule itself (docs/design/postgres-store.md §2.15): a lease that runs out is retried
//! at the next claim exactly when `rules::failure::decide` says `Retry` for
//! `Failure::LeaseExpired`, over a grid of `max_attempts` × attempts made × a dead-letter queue
//! or none; otherwise it is left to the upkeep's dead-letter move.

use crate::support;
use sluice_core::store::prelude::*;

use std::sync::Arc;

use sluice_core::message::{NewMessage, Payload};
use sluice_core::queue::QueueConfig;
use sluice_core::rules::failure::{self, Failure, FailureDecision};
use sluice_core::store::{ClaimParams, EnqueueParams, QueuePutParams, Store};
use sluice_store_postgres::PgStore;

const T0: i64 = 1_700_000_000_000;
const LEASE_MS: i64 = 1_000;
/// Attempts made on each message of the grid: past every `max_attempts` below.
const ATTEMPTS_MAX: u32 = 4;

#[tokio::test]
async fn a_claim_retries_an_expired_lease_exactly_when_the_failure_rule_does() {
    let Some(url) = support::database_url_or_skip().await else {
        return;
    };
    let schema = support::fresh_schema();
    let store = PgStore::open(support::options(&url, &schema))
        .await
        .expect("the store opens");
    let mut checked = 0;
    for max_attempts in 0..=3_u32 {
        for has_dead_letter_queue in [false, true] {
            let name = format!("q{max_attempts}{has_dead_letter_queue}");
            let config = QueueConfig {
                max_attempts,
                dead_letter_queue: has_dead_letter_queue.then(|| format!("{name}.dlq")),
                ..QueueConfig::defaults_for(&name)
            };
            store
                .queue_put(QueuePutParams {
                    name: name.clone(),
                    config: config.clone(),
                    now_ms: T0,
                })
                .await
                .unwrap();
            store
                .message_enqueue(EnqueueParams {
                    queue: name.clone(),
                    messages: vec![NewMessage {
                        idempotency_key: None,
                        payload: Arc::new(Payload::default()),
                        key: None,
                        priority: 0,
                        visible_at_ms: T0,
                        dead_letter: None,
                    }],
                    now_ms: T0,
                })
                .await
                .unwrap();
            let mut now_ms = T0;
            let mut attempts = 0;
            loop {
                let claim = store
                    .message_claim(ClaimParams {
                        lane_runs: false,
                        queue: name.clone(),
                        max: 1,
                        lease_ms: Some(LEASE_MS),
                        now_ms,
                    })
                    .await
                    .unwrap();
                let expected = attempts == 0
                    || matches!(
                        failure::decide(&config, attempts, Failure::LeaseExpired, now_ms, |_| {
                            unreachable!("a lease expiry draws no jitter")
                        }),
                        Ok(FailureDecision::Retry { at_ms }) if at_ms == now_ms
                    );
                assert_eq!(
                    claim.messages.len() == 1,
                    expected,
                    "max_attempts {max_attempts}, dead-letter queue {has_dead_letter_queue}, \
                     after {attempts} attempts"
                );
                checked += 1;
                if claim.messages.is_empty() || attempts == ATTEMPTS_MAX {
                    break;
                }
                attempts = claim.messages[0].attempts;
                now_ms += LEASE_MS;
            }
        }
    }
    assert!(checked > 20, "the grid ran ({checked} checks)");
    store.close().await.unwrap();
    support::drop_schema(url, schema).await;
}
