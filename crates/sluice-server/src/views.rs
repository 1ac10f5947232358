//! What every protocol shows of a queue or a message: the wire forms of the operations'
//! answers (`sluice_wire`), made once for the HTTP API, gRPC (which sends them as they
//! are or converts them field by field) and the dashboard.

use sluice_core::message::MessageStatus;
use sluice_core::meter::Throughput;
use sluice_core::queue::QueueConfig;
use sluice_core::store::{CancelOutcome, QueueInfo};
use sluice_wire::{
    AckOut, AckResult, AlertOut, AlertSentOut, BackoffOut, CancelOut, CountersOut, DeadLetterOut,
    EnqueueOut, ErrorCode, ErrorDetail, LatencyOut, MessageStatusOut, NackOut, QueueConfigOut,
    QueueOut, QueueStatsOut, RateLimitOut, ReplayOut, ReplayedOut, ScheduleOut, SchemaViolationOut,
    ThroughputOut, format_rfc3339,
};

use sluice_ops::alerts::AlertView;
use sluice_ops::{Acked, Details, EnqueueAnswer, Nacked, Replayed, ScheduleView};

use crate::state::AppState;

/// The wire form of a queue.
pub(crate) fn queue_out(app: &AppState, info: &QueueInfo) -> QueueOut {
    QueueOut {
        name: info.name.clone(),
        config: queue_config_out(&info.config),
        stats: stats_out(app, info),
    }
}

/// The wire form of a queue's settings.
pub(crate) fn queue_config_out(config: &QueueConfig) -> QueueConfigOut {
    QueueConfigOut {
        visibility_timeout_ms: config.visibility_timeout_ms,
        max_attempts: config.max_attempts,
        backoff: BackoffOut {
            initial_ms: config.backoff.initial_ms,
            max_ms: config.backoff.max_ms,
            factor: config.backoff.factor,
            jitter: config.backoff.jitter,
        },
        dead_letter_queue: config.dead_letter_queue.clone(),
        max_message_bytes: config.max_message_bytes,
        ordering: config.ordering.as_str().to_owned(),
        dedup_window_ms: config.dedup_window_ms,
        dedup: config.dedup.as_str().to_owned(),
        max_age_ms: config.max_age_ms,
        on_expire: config.on_expire.as_str().to_owned(),
        keep_acked_ms: config.keep_acked_ms,
        max_depth: config.max_depth,
        max_in_flight: config.max_in_flight,
        rate_limit: config.rate_limit.map(|limit| RateLimitOut {
            per_second: limit.per_second,
            burst: limit.burst,
        }),
        schema: config.schema.as_ref().map(|schema| schema.source().clone()),
        push: config.push.as_deref().cloned(),
        delay_ms: config.delay_ms,
        tags: config.tags.clone(),
        protocol_attributes: config.protocol_attributes.clone(),
    }
}

pub(crate) fn stats_out(app: &AppState, info: &QueueInfo) -> QueueStatsOut {
    let depth = &info.depth;
    let counters = depth.counters;
    QueueStatsOut {
        ready: depth.ready,
        delayed: depth.delayed,
        in_flight: depth.in_flight,
        dead_lettered: info.dead_letter_depth,
        oldest_ready_age_ms: depth.oldest_ready_age_ms,
        paused: depth.paused,
        stuck: sluice_core::stuck::stuck_reasons(info, &app.history.config().stuck),
        counters: CountersOut {
            enqueued: counters.enqueued,
            delivered: counters.delivered,
            acked: counters.acked,
            nacked: counters.nacked,
            dead_lettered: counters.dead_lettered,
            lease_expired: counters.lease_expired,
            expired: counters.expired,
            rejected: counters.rejected,
            cancelled: counters.cancelled,
            purged: counters.purged,
            deduplicated: counters.deduplicated,
        },
        last_1m: throughput_out(depth.recent.last_1m, 60.0),
        last_5m: throughput_out(depth.recent.last_5m, 300.0),
        latency_ms: (depth.recent.latency.samples > 0).then_some(LatencyOut {
            samples: depth.recent.latency.samples,
            p50: depth.recent.latency.p50_ms,
            p95: depth.recent.latency.p95_ms,
            p99: depth.recent.latency.p99_ms,
        }),
        push: info.config.push.as_ref().map(|_| app.push.stats(info)),
    }
}

fn throughput_out(counts: Throughput, seconds: f64) -> ThroughputOut {
    let rate = |count: u64| (count as f64 / seconds * 1000.0).round() / 1000.0;
    ThroughputOut {
        enqueued: counts.enqueued,
        acked: counts.acked,
        failed: counts.failed,
        enqueued_per_s: rate(counts.enqueued),
        acked_per_s: rate(counts.acked),
        failed_per_s: rate(counts.failed),
    }
}

/// A queue as `caller` may see it (for protocols other than this router: gRPC).
pub(crate) fn queue_view(
    app: &AppState,
    caller: Option<&std::sync::Arc<crate::auth::Caller>>,
    info: &QueueInfo,
) -> QueueOut {
    redacted_for(caller, queue_out(app, info))
}

/// What a push destination's credentials look like to a token that is not an admin: header
/// values, the URL's user info and query, and its path when declared secret, hidden
/// (producers and consumers read a queue's settings, but the destination's secrets are not
/// theirs).
pub(crate) fn redacted_for(
    caller: Option<&std::sync::Arc<crate::auth::Caller>>,
    mut out: QueueOut,
) -> QueueOut {
    if caller.is_none_or(|caller| caller.is_admin()) {
        return out;
    }
    if let Some(push) = &mut out.config.push {
        for value in push
            .headers
            .iter_mut()
            .flat_map(|headers| headers.values_mut())
        {
            *value = crate::redact::HIDDEN.into();
        }
        push.url = crate::redact::url_for_non_admins(&push.url, push.secret_path.unwrap_or(false));
    }
    out
}

/// The wire form of a cancel's outcome.
pub(crate) fn cancel_out(outcome: CancelOutcome) -> CancelOut {
    let (outcome, message_id, state) = match outcome {
        CancelOutcome::Cancelled { message_id } => {
            ("cancelled", Some(message_id), Some("cancelled"))
        }
        CancelOutcome::NotFound => ("not_found", None, None),
        CancelOutcome::AlreadyProcessing { message_id } => {
            ("already_processing", Some(message_id), Some("in_flight"))
        }
        CancelOutcome::AlreadyCompleted { message_id, state } => {
            ("already_completed", Some(message_id), Some(state.as_str()))
        }
    };
    CancelOut {
        outcome: outcome.into(),
        message_id,
        state: state.map(str::to_owned),
    }
}

/// The wire form of a message's status.
pub(crate) fn status_out(status: MessageStatus) -> MessageStatusOut {
    MessageStatusOut {
        message_id: status.message_id,
        queue: status.queue,
        state: status.state.as_str().to_owned(),
        id: status.idempotency_key,
        key: status.key,
        priority: status.priority,
        attempts: status.attempts,
        enqueued_at: format_rfc3339(status.enqueued_at_ms),
        first_received_at: status.first_received_at_ms.map(format_rfc3339),
        visible_at: format_rfc3339(status.visible_at_ms),
        lease_expires_at: status.lease_expires_at_ms.map(format_rfc3339),
        last_error: status.last_error,
        acked_at: status.acked_at_ms.map(format_rfc3339),
        finished_at: status.finished_at_ms.map(format_rfc3339),
        kept_until: status.kept_until_ms.map(format_rfc3339),
        dead_letter: status.dead_letter.as_ref().map(dead_letter_out),
        result: status
            .result
            .and_then(|text| serde_json::from_str(&text).ok()),
        replayed_as: status.replayed_as,
        failures: status
            .failures
            .into_iter()
            .map(|failure| sluice_wire::FailureOut {
                attempt: failure.attempt,
                at: format_rfc3339(failure.at),
                error: failure.error,
                dead_lettered: failure.dead_lettered,
            })
            .collect(),
    }
}

/// The wire form of dead-letter metadata.
pub(crate) fn dead_letter_out(info: &sluice_core::message::DeadLetterInfo) -> DeadLetterOut {
    DeadLetterOut {
        source_queue: info.source_queue.clone(),
        last_error: info.last_error.clone(),
        attempts: info.attempts,
        first_seen_at: format_rfc3339(info.first_seen_at_ms),
        last_seen_at: format_rfc3339(info.last_seen_at_ms),
    }
}

/// A nacked message's state on the wire: `delayed`, `ready` or `dead`.
pub(crate) fn nack_state(nacked: &Nacked) -> &'static str {
    match nacked {
        Nacked::Retry { delayed: true, .. } => "delayed",
        Nacked::Retry { delayed: false, .. } => "ready",
        Nacked::DeadLettered { .. } => "dead",
    }
}

/// The wire form of what a nack did.
pub(crate) fn nack_out(nacked: Nacked) -> NackOut {
    let state = nack_state(&nacked).to_owned();
    match nacked {
        Nacked::Retry { visible_at_ms, .. } => NackOut {
            state,
            visible_at: Some(format_rfc3339(visible_at_ms)),
            dead_letter_queue: None,
        },
        Nacked::DeadLettered { queue } => NackOut {
            state,
            visible_at: None,
            dead_letter_queue: Some(queue),
        },
    }
}

/// The wire form of a schedule and where it stands.
pub(crate) fn schedule_out(schedule: ScheduleView) -> ScheduleOut {
    ScheduleOut {
        name: schedule.name,
        spec: schedule.spec,
        paused: schedule.paused,
        next_run_at: schedule.next_run_ms.map(format_rfc3339),
        last_run_at: schedule.last_run_ms.map(format_rfc3339),
        last_enqueued_at: schedule.last_enqueued_ms.map(format_rfc3339),
        last_message_id: schedule.last_message_id,
        runs: schedule.runs,
        skipped_runs: schedule.skipped_runs,
        last_error: schedule.last_error,
    }
}

/// The wire form of what an enqueue did with one message.
pub(crate) fn enqueue_out(answer: EnqueueAnswer) -> EnqueueOut {
    EnqueueOut {
        message_id: answer.message_id,
        created: answer.created,
        position: answer.position,
        state: answer.state.map(|state| state.as_str().to_owned()),
        result: answer.result,
    }
}

/// The wire form of an ack's answer: per receipt, and the next steps it enqueued.
pub(crate) fn ack_out(acked: Acked) -> AckOut {
    AckOut {
        acked: acked.acked,
        results: acked
            .results
            .into_iter()
            .map(|result| AckResult {
                receipt: result.receipt,
                acked: result.stale.is_none(),
                error: result
                    .stale
                    .map(|why| ErrorDetail::new(ErrorCode::StaleReceipt, why)),
            })
            .collect(),
        then: acked
            .then
            .map(|then| then.into_iter().map(enqueue_out).collect()),
    }
}

/// The wire form of a replay's answer.
pub(crate) fn replay_out(replayed: Replayed) -> ReplayOut {
    ReplayOut {
        dry_run: replayed.dry_run,
        matched: replayed.matched,
        replayed: replayed.replayed,
        more: replayed.more,
        target_queue: replayed.target_queue,
        results: replayed
            .results
            .into_iter()
            .map(|(dead_letter_id, message_id)| ReplayedOut {
                dead_letter_id,
                message_id,
            })
            .collect(),
    }
}

/// The JSON `details` of a refusal, as the HTTP API and gRPC send them.
pub(crate) fn details_json(details: Details) -> serde_json::Value {
    match details {
        Details::Acks(acked) => serde_json::to_value(ack_out(acked)).unwrap_or_default(),
        Details::Violations(violations) => {
            let violations: Vec<SchemaViolationOut> = violations
                .into_iter()
                .map(|violation| SchemaViolationOut {
                    index: violation.index,
                    path: violation.path,
                    reason: violation.reason,
                })
                .collect();
            serde_json::json!({ "violations": violations })
        }
        Details::QueueFull {
            refused,
            depth,
            max_depth,
        } => serde_json::json!({
            "accepted": 0,
            "refused": refused,
            "depth": depth,
            "max_depth": max_depth,
        }),
    }
}

/// The wire form of an alert and what it did (its delivery queue's stats are added by the
/// caller, which has the queue).
pub(crate) fn alert_out(view: AlertView) -> AlertOut {
    let sent = &view.state.sent;
    AlertOut {
        queue: view.queue(),
        firing: view.firing(),
        sent: AlertSentOut {
            dead_letters: sent.dead_letters,
            dead_letters_counted: sent.dead_letters_counted,
            depth: sent.depth,
            oldest_ready_age: sent.oldest_ready_age,
        },
        last_sent_at: view.state.last_sent_ms.map(format_rfc3339),
        name: view.name,
        spec: view.spec,
        delivery: None,
    }
}
