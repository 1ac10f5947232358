//! The conformance scenarios (conformance/scenarios.json at the repository root) on every
//! backend of this SDK: the embedded store on its test clock (`advance` moves the clock), a
//! sluice server started in this process over HTTP, over gRPC and over its SQS API, and RabbitMQ on
//! 127.0.0.1:5672 (skipped with a message when it is not running, a failure when `CI` is set).
//!
//! The rules are conformance/README.md's: a fresh queue per scenario; where a scenario lists
//! the backend under `exceptions`, the runner checks that the backend refuses the scenario's
//! distinctive operation with `Error::Unsupported` and that its capabilities say so (or skips
//! the scenario with the reason, when no operation can be refused); a step's `unchecked`
//! backends run the step without checking its `expect`; a stats field a backend cannot report
//! (`None`) is not checked. Every scenario of a backend runs, and the test fails with all the
//! failures listed.

use std::collections::HashMap;
use std::time::Duration;

use crate::support::{Clock, Harness, Kind};
use serde_json::Value;
use sluice_sdk::{
    CancelOutcome, Capabilities, Delivery, Error, MessageRef, Nack, NackOutcome, Outgoing,
    QueueOptions,
};
use uuid::Uuid;

const SCENARIOS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../conformance/scenarios.json"
);

/// What became of one scenario.
enum Outcome {
    Passed,
    /// The backend refused the distinctive operation, as its exception says.
    Refused(String),
    /// Skipped, with the reason.
    Skipped(String),
}

/// Scenarios a backend fails today because of a bug outside this SDK, skipped with the reason
/// printed: (backend, scenario, why). Remove an entry once its bug is fixed.
const KNOWN_BUGS: &[(Kind, &str, &str)] = &[];

async fn conformance(kind: Kind, clock: Clock) {
    let Some(h) = Harness::try_start(kind, clock).await else {
        return;
    };
    let text = std::fs::read_to_string(SCENARIOS).expect("read conformance/scenarios.json");
    let file: Value = serde_json::from_str(&text).expect("scenarios.json is JSON");
    assert_eq!(
        file["version"], 1,
        "a scenarios.json version this runner knows"
    );
    let scenarios = file["scenarios"].as_array().expect("scenarios");
    assert!(!scenarios.is_empty());
    let run = &Uuid::now_v7().simple().to_string()[20..];
    let mut failures = Vec::new();
    for scenario in scenarios {
        let name = scenario["name"].as_str().expect("a scenario name");
        // Fresh, unique, and within SQS's name rule (80 characters with "-dlq.fifo").
        let queue = format!("c{run}-{}", name.chars().take(50).collect::<String>());
        let known_bug = KNOWN_BUGS
            .iter()
            .find(|(k, scenario, _)| *k == kind && *scenario == name);
        let outcome = if let Some((_, _, why)) = known_bug {
            Ok(Outcome::Skipped((*why).to_owned()))
        } else {
            tokio::time::timeout(Duration::from_secs(60), run_scenario(&h, scenario, &queue))
                .await
                .unwrap_or_else(|_| Err("did not finish within 60 s".into()))
        };
        h.cleanup(&queue).await;
        match outcome {
            Ok(Outcome::Passed) => eprintln!("{}: {name}: passed", kind.name()),
            Ok(Outcome::Refused(what)) => {
                eprintln!("{}: {name}: refused as excepted ({what})", kind.name())
            }
            Ok(Outcome::Skipped(why)) => eprintln!("{}: {name}: skipped: {why}", kind.name()),
            Err(failure) => {
                eprintln!("{}: {name}: FAILED: {failure}", kind.name());
                failures.push(format!("{name}: {failure}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} scenario(s) failed on {}:\n{}",
        failures.len(),
        kind.name(),
        failures.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory() {
    conformance(Kind::Embedded, Clock::Test).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sluice() {
    conformance(Kind::Http, Clock::Real).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sluice_grpc() {
    conformance(Kind::Grpc, Clock::Real).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqs() {
    conformance(Kind::Sqs, Clock::Real).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbitmq() {
    conformance(Kind::Amqp, Clock::Real).await;
}

async fn run_scenario(h: &Harness, scenario: &Value, queue: &str) -> Result<Outcome, String> {
    let label = h.kind.label();
    let options = queue_options(&scenario["queue"]);
    if let Some(reason) = scenario["exceptions"][label].as_str() {
        return check_exception(h, scenario, queue, &options, reason).await;
    }
    h.backend
        .ensure_queue_with(queue, &options)
        .await
        .map_err(|e| format!("opening the queue with {options:?}: {e}"))?;
    let mut runner = Runner {
        h,
        queue,
        messages: HashMap::new(),
        deliveries: HashMap::new(),
    };
    let steps = scenario["steps"].as_array().ok_or("no steps")?;
    for (index, step) in steps.iter().enumerate() {
        if let Some(operation) = step["refused"][label].as_str() {
            // The backend must refuse this step as unsupported; what follows depended on it.
            return match runner.step(step, false).await {
                Err(StepError::Backend(Error::Unsupported(why))) if why.starts_with(operation) => {
                    Ok(Outcome::Refused(why))
                }
                other => Err(format!(
                    "step {index} ({}): not refused as unsupported ({operation}): {}",
                    step["op"],
                    match other {
                        Ok(()) => "it succeeded".to_owned(),
                        Err(error) => error.to_string(),
                    }
                )),
            };
        }
        let checked = step["unchecked"][label].is_null();
        runner
            .step(step, checked)
            .await
            .map_err(|e| format!("step {index} ({}): {e}", step["op"]))?;
    }
    Ok(Outcome::Passed)
}

fn queue_options(queue: &Value) -> QueueOptions {
    QueueOptions {
        max_attempts: queue["max_attempts"].as_u64().map(|n| n as u32),
        per_key: queue["per_key"].as_bool().unwrap_or(false),
        dedup: queue["dedup"].as_bool().unwrap_or(false),
    }
}

/// The first thing the scenario needs that the backend's capabilities say it cannot do, as
/// (capability, the operation that must be refused). Deduplication is asked for by the queue
/// (`dedup`); an id on another queue is carried by every backend, so it is no refusal.
fn missing_capability(
    capabilities: Capabilities,
    options: &QueueOptions,
    steps: &[Value],
) -> Option<(&'static str, Probe)> {
    if options.per_key && !capabilities.per_key_order {
        return Some(("per_key_order", Probe::Open(options.clone())));
    }
    if options.dedup && !capabilities.dedup {
        return Some(("dedup", Probe::Open(options.clone())));
    }
    for step in steps {
        let probe = match step["op"].as_str()? {
            "enqueue" if !step["delay_ms"].is_null() && !capabilities.delays => {
                ("delays", Probe::Step(step.clone()))
            }
            "extend" if !capabilities.extend => ("extend", Probe::Step(step.clone())),
            "pause" | "resume" if !capabilities.pause => ("pause", Probe::Step(step.clone())),
            "cancel" if !capabilities.cancel => ("cancel", Probe::Step(step.clone())),
            "drain" if !capabilities.in_flight_stats => {
                ("in_flight_stats", Probe::Step(step.clone()))
            }
            _ => continue,
        };
        return Some(probe);
    }
    None
}

/// What is sent to check a refusal.
enum Probe {
    /// Opening the queue with these options.
    Open(QueueOptions),
    /// This step, alone, on a fresh queue (a reference to a delivery or message that does not
    /// exist there: the backend must refuse before looking).
    Step(Value),
}

/// A scenario the backend cannot keep: its distinctive operation must be refused with
/// `Error::Unsupported`, and the capability query must say the same; otherwise it is skipped.
async fn check_exception(
    h: &Harness,
    scenario: &Value,
    queue: &str,
    options: &QueueOptions,
    reason: &str,
) -> Result<Outcome, String> {
    let steps = scenario["steps"].as_array().ok_or("no steps")?;
    let capabilities = h.backend.capabilities();
    let Some((capability, probe)) = missing_capability(capabilities, options, steps) else {
        return Ok(Outcome::Skipped(format!(
            "{reason} (no operation to refuse: the backend's capabilities allow every step)"
        )));
    };
    let refused = match probe {
        Probe::Open(options) => h
            .backend
            .ensure_queue_with(queue, &options)
            .await
            .map(|_| "opened".to_owned()),
        Probe::Step(step) => {
            h.backend
                .ensure_queue(queue)
                .await
                .map_err(|e| format!("opening the queue: {e}"))?;
            let mut runner = Runner {
                h,
                queue,
                messages: HashMap::new(),
                deliveries: HashMap::new(),
            };
            match runner.step(&step, false).await {
                Ok(()) => Ok("done".to_owned()),
                Err(StepError::Backend(error)) => Err(error),
                Err(StepError::Check(check)) => Ok(check),
            }
        }
    };
    match refused {
        Err(Error::Unsupported(what)) => Ok(Outcome::Refused(format!("{capability}: {what}"))),
        Err(other) => Err(format!(
            "excepted ({reason}); {capability} should be refused as unsupported, got: {other}"
        )),
        Ok(done) => Err(format!(
            "excepted ({reason}); the capabilities say no {capability}, but the backend did it \
             ({done})"
        )),
    }
}

/// Why a step failed.
enum StepError {
    /// The backend answered an error.
    Backend(Error),
    /// What was seen is not what was expected.
    Check(String),
}

impl std::fmt::Display for StepError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StepError::Backend(error) => write!(f, "the backend failed: {error}"),
            StepError::Check(check) => f.write_str(check),
        }
    }
}

impl From<Error> for StepError {
    fn from(error: Error) -> Self {
        StepError::Backend(error)
    }
}

macro_rules! check {
    ($checked:expr, $cond:expr, $($why:tt)*) => {
        if $checked && !$cond {
            return Err(StepError::Check(format!($($why)*)));
        }
    };
}

/// Runs steps against one queue, with the names they bind.
struct Runner<'a> {
    h: &'a Harness,
    queue: &'a str,
    /// `as` of an enqueue: the message id.
    messages: HashMap<String, Uuid>,
    /// `as` of a receive: the delivery.
    deliveries: HashMap<String, Delivery>,
}

impl Runner<'_> {
    fn receipt(&self, step: &Value) -> String {
        let name = step["ref"].as_str().unwrap_or_default();
        self.deliveries
            .get(name)
            .map(|delivery| delivery.receipt.clone())
            // A probe on a fresh queue names nothing: a receipt no backend issued.
            .unwrap_or_else(|| "0.0".to_owned())
    }

    async fn step(&mut self, step: &Value, checked: bool) -> Result<(), StepError> {
        let backend = &self.h.backend;
        let queue = self.queue;
        let expect = &step["expect"];
        match step["op"].as_str().unwrap_or_default() {
            "enqueue" => {
                let message = Outgoing {
                    body: serde_json::to_vec(&step["body"]).expect("JSON"),
                    id: step["id"].as_str().map(str::to_owned),
                    key: step["key"].as_str().map(str::to_owned),
                    priority: 0,
                    delay: step["delay_ms"].as_u64().map(Duration::from_millis),
                };
                let enqueued = backend
                    .enqueue(queue, vec![message])
                    .await?
                    .pop()
                    .ok_or(StepError::Check("no result".into()))?;
                if let Some(name) = step["as"].as_str() {
                    self.messages.insert(name.to_owned(), enqueued.message_id);
                }
                if let Some(created) = expect["created"].as_bool() {
                    check!(
                        checked,
                        enqueued.created == created,
                        "created {} (expected {created})",
                        enqueued.created
                    );
                }
                if let Some(position) = expect["position"].as_u64() {
                    check!(
                        checked,
                        enqueued.position == position,
                        "position {} (expected {position})",
                        enqueued.position
                    );
                }
                if let Some(name) = expect["same_message_as"].as_str() {
                    let first = self.messages.get(name).copied();
                    check!(
                        checked,
                        first == Some(enqueued.message_id),
                        "message id {} (expected {name}'s, {first:?})",
                        enqueued.message_id
                    );
                }
            }
            "enqueue_many" => {
                let messages = step["bodies"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|body| Outgoing {
                        body: serde_json::to_vec(body).expect("JSON"),
                        ..Outgoing::default()
                    })
                    .collect::<Vec<_>>();
                let count = messages.len();
                let results = backend.enqueue(queue, messages).await?;
                check!(
                    true,
                    results.len() == count,
                    "{} results for {count} messages",
                    results.len()
                );
            }
            "receive" => self.receive(step, checked).await?,
            "ack" => backend.ack(queue, &self.receipt(step)).await?,
            "release" => backend.release(queue, &self.receipt(step)).await?,
            "nack" => {
                let nack = Nack {
                    error: step["error"].as_str().unwrap_or_default().to_owned(),
                    delay: step["delay_ms"].as_u64().map(Duration::from_millis),
                    permanent: step["permanent"].as_bool().unwrap_or(false),
                };
                let outcome = backend.nack(queue, &self.receipt(step), nack).await?;
                if let Some(expected) = expect["outcome"].as_str() {
                    let seen = match outcome {
                        NackOutcome::Retried => "retried",
                        NackOutcome::DeadLettered => "dead_lettered",
                    };
                    check!(
                        checked,
                        seen == expected,
                        "outcome {seen} (expected {expected})"
                    );
                }
            }
            "extend" => {
                let lease = Duration::from_millis(step["lease_ms"].as_u64().unwrap_or(30_000));
                backend.extend(queue, &self.receipt(step), lease).await?
            }
            "advance" => {
                let by = Duration::from_millis(step["ms"].as_u64().unwrap_or(0));
                self.h.pass(by).await
            }
            "stats" => {
                let stats = backend.stats(queue).await?;
                let numbers = [
                    ("ready", Some(stats.ready)),
                    ("delayed", Some(stats.delayed)),
                    ("in_flight", stats.in_flight),
                    ("dead_lettered", Some(stats.dead_lettered)),
                ];
                for (field, seen) in numbers {
                    // A number the backend cannot report (None) is not checked.
                    if let (Some(expected), Some(seen)) = (expect[field].as_u64(), seen) {
                        check!(
                            checked,
                            seen == expected,
                            "{field} {seen} (expected {expected}); {stats:?}"
                        );
                    }
                }
                if let Some(paused) = expect["paused"].as_bool() {
                    check!(
                        checked,
                        stats.paused == paused,
                        "paused {} (expected {paused})",
                        stats.paused
                    );
                }
            }
            "pause" => backend.set_paused(queue, true).await?,
            "resume" => backend.set_paused(queue, false).await?,
            "drain" => {
                let timeout = Duration::from_millis(step["timeout_ms"].as_u64().unwrap_or(0));
                let drained = backend.drain(queue, timeout).await?;
                if let Some(expected) = expect.as_bool() {
                    check!(
                        checked,
                        drained == expected,
                        "drained {drained} (expected {expected})"
                    );
                }
            }
            "cancel" => {
                let message = match (step["message"].as_str(), step["id"].as_str()) {
                    (Some(name), _) => MessageRef::Id(
                        // A probe on a fresh queue names nothing: an id no backend issued.
                        self.messages
                            .get(name)
                            .copied()
                            .unwrap_or_else(Uuid::now_v7),
                    ),
                    (None, Some(id)) => MessageRef::IdempotencyId(id.to_owned()),
                    (None, None) => return Err(StepError::Check("cancel names nothing".into())),
                };
                let outcome = backend.cancel(queue, message).await?;
                if let Some(expected) = expect.as_str() {
                    let seen = match &outcome {
                        CancelOutcome::Cancelled => "cancelled",
                        CancelOutcome::NotFound => "not_found",
                        CancelOutcome::AlreadyProcessing => "already_processing",
                        CancelOutcome::AlreadyCompleted(_) => "already_completed",
                    };
                    check!(
                        checked,
                        seen == expected,
                        "{outcome:?} (expected {expected})"
                    );
                }
            }
            "dead_letters" => {
                let letters = backend.dead_letters(queue, 100).await?;
                let Some(expected) = expect.as_array() else {
                    return Ok(());
                };
                let seen: Vec<Value> = letters
                    .iter()
                    .map(|letter| {
                        serde_json::json!({
                            "body": serde_json::from_slice::<Value>(&letter.body)
                                .unwrap_or(Value::Null),
                            "error": letter.error,
                            "attempts": letter.attempts,
                        })
                    })
                    .collect();
                check!(
                    checked,
                    seen == *expected,
                    "dead letters {seen:?} (expected {expected:?})"
                );
            }
            other => return Err(StepError::Check(format!("unknown op {other:?}"))),
        }
        Ok(())
    }

    /// Receives until it has as many as expected or `wait_ms` has passed, then compares.
    async fn receive(&mut self, step: &Value, checked: bool) -> Result<(), StepError> {
        let expect = &step["expect"];
        let max = step["max"].as_u64().unwrap_or(1) as usize;
        let lease = Duration::from_millis(step["lease_ms"].as_u64().unwrap_or(30_000));
        let wait = Duration::from_millis(step["wait_ms"].as_u64().unwrap_or(0));
        let names: Vec<&str> = step["as"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let wanted = expect["bodies"]
            .as_array()
            .or(expect["bodies_any_order"].as_array())
            .map(Vec::len)
            .or((!names.is_empty()).then_some(names.len()))
            .unwrap_or(max);
        let deadline = tokio::time::Instant::now() + wait;
        let mut received: Vec<Delivery> = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let more = max - received.len();
            let got = self
                .h
                .backend
                .receive(self.queue, more, lease, left)
                .await?;
            received.extend(got);
            if received.len() >= wanted.min(max) || tokio::time::Instant::now() >= deadline {
                break;
            }
        }
        for (name, delivery) in names.iter().zip(&received) {
            self.deliveries.insert((*name).to_owned(), delivery.clone());
        }
        let bodies: Vec<Value> = received
            .iter()
            .map(|d| serde_json::from_slice(&d.body).unwrap_or(Value::Null))
            .collect();
        if let Some(expected) = expect["bodies"].as_array() {
            check!(
                checked,
                bodies == *expected,
                "bodies {bodies:?} (expected {expected:?})"
            );
        }
        if let Some(expected) = expect["bodies_any_order"].as_array() {
            let mut seen: Vec<String> = bodies.iter().map(Value::to_string).collect();
            let mut wanted: Vec<String> = expected.iter().map(Value::to_string).collect();
            seen.sort();
            wanted.sort();
            check!(
                checked,
                seen == wanted,
                "bodies {seen:?} (expected in any order {wanted:?})"
            );
        }
        if let Some(expected) = expect["attempts"].as_array() {
            let seen: Vec<Value> = received.iter().map(|d| d.attempt.into()).collect();
            check!(
                checked,
                seen == *expected,
                "attempts {seen:?} (expected {expected:?})"
            );
        }
        if let Some(expected) = expect["last_errors"].as_array() {
            let seen: Vec<Value> = received
                .iter()
                .map(|d| d.last_error.clone().into())
                .collect();
            check!(
                checked,
                seen == *expected,
                "last errors {seen:?} (expected {expected:?})"
            );
        }
        if let Some(expected) = expect["ids"].as_array() {
            let seen: Vec<Value> = received.iter().map(|d| d.id.clone().into()).collect();
            check!(
                checked,
                seen == *expected,
                "ids {seen:?} (expected {expected:?})"
            );
        }
        if let Some(expected) = expect["keys_any_order"].as_array() {
            let mut seen: Vec<String> = received.iter().map(|d| format!("{:?}", d.key)).collect();
            let mut wanted: Vec<String> = expected
                .iter()
                .map(|k| format!("{:?}", k.as_str().map(str::to_owned)))
                .collect();
            seen.sort();
            wanted.sort();
            check!(
                checked,
                seen == wanted,
                "keys {seen:?} (expected in any order {wanted:?})"
            );
        }
        Ok(())
    }
}
