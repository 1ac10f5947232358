//! One worker test suite, run against every backend: every test is an async fn taking a
//! [`Harness`], instantiated once per [`Kind`] (the embedded store; a server started in this
//! process over HTTP, over gRPC and over its SQS API; RabbitMQ) by the `suite!` macro at the
//! bottom.
//!
//! Handlers never assert (a panicking handler is only a failed attempt): they record what they
//! saw, and the test checks the records afterwards. Every wait is bounded.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use crate::support::{Clock, Harness, Kind, Running, SlowAcks, eventually, wait_stats};
use serde::{Deserialize, Serialize};
use sluice_sdk::{
    Backend, Backoff, BoxError, CancelOutcome, Context, DeadLetterContext, Envelope, Outgoing,
    Queue, RetryPolicy, Worker,
};
use uuid::Uuid;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Job {
    n: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Keyed {
    key: String,
    seq: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Order {
    id: u32,
    total_cents: u64,
}

const WAIT: Duration = Duration::from_secs(10);

/// What handlers saw that they should not have; checked once the worker stopped.
#[derive(Clone, Default)]
struct Problems(Arc<Mutex<Vec<String>>>);

impl Problems {
    fn report(&self, problem: String) {
        self.0.lock().unwrap().push(problem);
    }

    fn assert_none(&self) {
        let problems = self.0.lock().unwrap();
        assert!(problems.is_empty(), "handlers saw: {problems:#?}");
    }
}

/// Checks the context fields that do not depend on the test.
fn check_context<T: std::fmt::Debug>(h_started: SystemTime, ctx: &Context<T>, problems: &Problems) {
    if ctx.enqueued_at > ctx.processing_started_at {
        problems.report(format!(
            "{:?}: enqueued_at {:?} after processing_started_at {:?}",
            ctx.event, ctx.enqueued_at, ctx.processing_started_at
        ));
    }
    // A parse failure would give the epoch; the backend's clock starts at `h_started`.
    if ctx.enqueued_at + Duration::from_secs(1) < h_started {
        problems.report(format!(
            "{:?}: enqueued_at {:?} before the backend started ({h_started:?})",
            ctx.event, ctx.enqueued_at
        ));
    }
    if ctx.message_id.is_nil() {
        problems.report(format!("{:?}: nil message_id", ctx.event));
    }
}

// 1.
async fn concurrency_is_never_exceeded_and_every_slot_is_used(h: &Harness) {
    let queue: Queue<Job> = h.queue("jobs").await;
    // Idempotency ids where the queue deduplicates: a standard SQS queue and RabbitMQ refuse
    // them (`ids.rs`), so there the context has none.
    let with_ids = !matches!(h.kind, Kind::Sqs | Kind::Amqp);
    let mut ids = HashMap::new();
    for n in 0..40 {
        let enqueue = queue.enqueue(&Job { n });
        let enqueued = if with_ids {
            enqueue.id(format!("job-{n}")).await
        } else {
            enqueue.await
        }
        .unwrap();
        assert!(enqueued.created);
        ids.insert(n, enqueued.message_id);
    }
    let ids = Arc::new(ids);
    let running = Arc::new(AtomicUsize::new(0));
    let max = Arc::new(AtomicUsize::new(0));
    let slots = Arc::new(Mutex::new(BTreeSet::new()));
    let handled = Arc::new(Mutex::new(Vec::new()));
    let problems = Problems::default();
    let started = h.started_at;
    let worker = Worker::new(queue.clone(), 4).poll_wait(Duration::from_millis(100));
    let run = Running::spawn(worker, {
        let (running, max, slots, handled, problems, ids) = (
            running.clone(),
            max.clone(),
            slots.clone(),
            handled.clone(),
            problems.clone(),
            ids.clone(),
        );
        move |ctx: Context<Job>| {
            let (running, max, slots, handled, problems, ids) = (
                running.clone(),
                max.clone(),
                slots.clone(),
                handled.clone(),
                problems.clone(),
                ids.clone(),
            );
            async move {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                max.fetch_max(now, Ordering::SeqCst);
                check_context(started, &ctx, &problems);
                let n = ctx.event.n;
                if ids.get(&n) != Some(&ctx.message_id) {
                    problems.report(format!("job {n}: message_id {}", ctx.message_id));
                }
                let expected = with_ids.then(|| format!("job-{n}"));
                if ctx.idempotency_id != expected {
                    problems.report(format!("job {n}: idempotency_id {:?}", ctx.idempotency_id));
                }
                if ctx.attempt != 1 {
                    problems.report(format!("job {n}: attempt {}", ctx.attempt));
                }
                if ctx.slot >= 4 {
                    problems.report(format!("job {n}: slot {}", ctx.slot));
                }
                slots.lock().unwrap().insert(ctx.slot);
                tokio::time::sleep(Duration::from_millis(25)).await;
                handled.lock().unwrap().push(n);
                running.fetch_sub(1, Ordering::SeqCst);
                Ok::<(), BoxError>(())
            }
        }
    });
    wait_stats(&queue, "40 processed", WAIT, |s| s.processed == 40).await;
    let report = run.stop().await;
    problems.assert_none();
    assert_eq!(report.processed, 40);
    let max = max.load(Ordering::SeqCst);
    assert!(max <= 4, "{max} handlers ran at once with concurrency 4");
    assert_eq!(max, 4, "4 handlers never ran at once");
    assert_eq!(*slots.lock().unwrap(), BTreeSet::from([0, 1, 2, 3]));
    let mut handled = handled.lock().unwrap().clone();
    handled.sort_unstable();
    assert_eq!(handled, (0..40).collect::<Vec<_>>(), "each job once");
}

// 2.
async fn per_key_order_is_kept_with_concurrency_8(h: &Harness) {
    let queue: Queue<Keyed> = h.per_key_queue("keyed").await;
    let keys = ["k0", "k1", "k2", "k3"];
    let events = (0..15).flat_map(|seq| {
        keys.iter().map(move |key| {
            Envelope::new(Keyed {
                key: (*key).into(),
                seq,
            })
            .key(*key)
        })
    });
    let many = queue.enqueue_many(events).await.unwrap();
    assert_eq!(many.enqueued, 60);
    let seen: Arc<Mutex<BTreeMap<String, Vec<u32>>>> = Arc::default();
    let busy: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let problems = Problems::default();
    let worker = Worker::new(queue.clone(), 8).poll_wait(Duration::from_millis(100));
    let run = Running::spawn(worker, {
        let (seen, busy, problems) = (seen.clone(), busy.clone(), problems.clone());
        move |ctx: Context<Keyed>| {
            let (seen, busy, problems) = (seen.clone(), busy.clone(), problems.clone());
            async move {
                let key = ctx.event.key.clone();
                {
                    let mut busy = busy.lock().unwrap();
                    let count = busy.entry(key.clone()).or_default();
                    *count += 1;
                    if *count > 1 {
                        problems.report(format!("two {key} events at once"));
                    }
                }
                let pause = rand::random_range(0..=5);
                tokio::time::sleep(Duration::from_millis(pause)).await;
                seen.lock()
                    .unwrap()
                    .entry(key.clone())
                    .or_default()
                    .push(ctx.event.seq);
                *busy.lock().unwrap().get_mut(&key).unwrap() -= 1;
                Ok::<(), BoxError>(())
            }
        }
    });
    wait_stats(&queue, "60 processed", WAIT, |s| s.processed == 60).await;
    let report = run.stop().await;
    problems.assert_none();
    assert_eq!(report.processed, 60);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 4);
    for (key, seqs) in seen.iter() {
        assert!(
            seqs.windows(2).all(|pair| pair[0] < pair[1]),
            "{key} handled out of order: {seqs:?}"
        );
        assert_eq!(*seqs, (0..15).collect::<Vec<_>>(), "{key}");
    }
}

// 3.
async fn failing_twice_then_succeeding_retries_with_backoff(h: &Harness) {
    let queue: Queue<Job> = h.queue("retries").await;
    let enqueued = queue.enqueue(&Job { n: 1 }).id("flaky").await.unwrap();
    let attempts = Arc::new(Mutex::new(Vec::new()));
    let problems = Problems::default();
    let started = h.started_at;
    let worker = Worker::new(queue.clone(), 2)
        .poll_wait(Duration::from_millis(100))
        .retry(RetryPolicy::new(5).backoff(Backoff::Fixed(Duration::from_secs(10))));
    let run = Running::spawn(worker, {
        let (attempts, problems) = (attempts.clone(), problems.clone());
        move |ctx: Context<Job>| {
            let (attempts, problems) = (attempts.clone(), problems.clone());
            async move {
                check_context(started, &ctx, &problems);
                let calls = {
                    let mut attempts = attempts.lock().unwrap();
                    attempts.push(ctx.attempt);
                    attempts.len()
                };
                if calls < 3 {
                    Err(format!("transient failure {calls}").into())
                } else {
                    Ok(())
                }
            }
        }
    });
    let calls = || attempts.lock().unwrap().len();
    for call in 1..=2 {
        eventually(&format!("call {call}"), WAIT, || async { calls() == call }).await;
        // The nack landed: the message waits for its backoff.
        wait_stats(&queue, "the retry delayed", WAIT, |s| {
            s.delayed == 1 && s.in_flight.unwrap_or(0) == 0
        })
        .await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(calls(), call, "retried before the clock moved");
        h.advance(Duration::from_secs(9)).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(
            calls(),
            call,
            "retried 9 s after a failure, backoff is 10 s"
        );
        h.advance(Duration::from_secs(1)).await;
    }
    eventually("call 3", WAIT, || async { calls() == 3 }).await;
    let stats = wait_stats(&queue, "processed", WAIT, |s| s.processed == 1).await;
    assert_eq!(stats.outstanding(), 0);
    assert_eq!(stats.dead_lettered, 0);
    let report = run.stop().await;
    problems.assert_none();
    assert_eq!(*attempts.lock().unwrap(), vec![1, 2, 3]);
    assert_eq!(report.processed, 1);
    assert_eq!(report.retried, 2);
    assert_eq!(report.dead_lettered, 0);
    let info = queue
        .get(enqueued.message_id)
        .await
        .unwrap()
        .expect("known");
    assert_eq!(info.state, "acked");
    assert_eq!(info.attempts, 3);
}

// 4.
async fn non_retryable_error_dead_letters_at_once(h: &Harness) {
    let queue: Queue<Order> = h.queue("orders").await;
    let card = Order {
        id: 1,
        total_cents: 4250,
    };
    let fatal = queue.enqueue(&card).id("order-1").await.unwrap();
    let transient = queue
        .enqueue(&Order {
            id: 2,
            total_cents: 100,
        })
        .await
        .unwrap();
    let calls: Arc<Mutex<Vec<u32>>> = Arc::default();
    let dead: Arc<Mutex<Vec<(Order, String, DeadLetterContext)>>> = Arc::default();
    let worker = Worker::new(queue.clone(), 2)
        .poll_wait(Duration::from_millis(100))
        .retry(RetryPolicy::new(5).retry_if(|e| !e.to_string().contains("fatal")))
        .on_dead_letter({
            let dead = dead.clone();
            move |order, error, ctx| {
                let dead = dead.clone();
                async move { dead.lock().unwrap().push((order, error, ctx)) }
            }
        });
    let run = Running::spawn(worker, {
        let calls = calls.clone();
        move |ctx: Context<Order>| {
            let calls = calls.clone();
            async move {
                calls.lock().unwrap().push(ctx.event.id);
                if ctx.event.id == 1 {
                    Err("fatal: bad card".into())
                } else {
                    Err("transient: try later".into())
                }
            }
        }
    });
    let stats = wait_stats(&queue, "one dead, one delayed", WAIT, |s| {
        s.dead_lettered == 1 && s.delayed == 1 && s.in_flight.unwrap_or(0) == 0
    })
    .await;
    assert_eq!(stats.processed, 0);
    assert_eq!(stats.ready, 0);
    eventually("on_dead_letter", WAIT, || async {
        !dead.lock().unwrap().is_empty()
    })
    .await;
    // Nothing more happens: the dead one is not retried, the hook does not run again.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let report = run.stop().await;
    let mut calls = calls.lock().unwrap().clone();
    calls.sort_unstable();
    assert_eq!(calls, vec![1, 2], "each order handled once");
    let dead = dead.lock().unwrap().clone();
    assert_eq!(dead.len(), 1, "on_dead_letter runs exactly once");
    let (order, error, ctx) = &dead[0];
    assert_eq!(*order, card);
    assert!(error.contains("fatal: bad card"), "{error}");
    assert_eq!(ctx.message_id, fatal.message_id);
    assert_eq!(ctx.idempotency_id.as_deref(), Some("order-1"));
    assert_eq!(ctx.attempt, 1);
    assert!(ctx.slot < 2);
    assert_eq!(report.dead_lettered, 1);
    assert_eq!(report.retried, 1);
    assert_eq!(report.processed, 0);
    let info = queue.get(fatal.message_id).await.unwrap().expect("known");
    assert_eq!(info.state, "dead");
    assert!(
        info.last_error
            .as_deref()
            .is_some_and(|e| e.contains("fatal: bad card")),
        "{info:?}"
    );
    let info = queue
        .get(transient.message_id)
        .await
        .unwrap()
        .expect("known");
    assert_eq!(info.state, "delayed");
}

// 5. About real time: the backend runs on the system clock.
async fn slow_handler_keeps_its_lease_by_heartbeat(h: &Harness) {
    assert_eq!(h.clock, Clock::Real);
    let queue: Queue<Job> = h.queue("slow").await;
    let enqueued = queue.enqueue(&Job { n: 1 }).await.unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let contexts: Arc<Mutex<Vec<Context<Job>>>> = Arc::default();
    // A second slot polls often: it would get the message as soon as the lease ran out.
    let worker = Worker::new(queue.clone(), 2)
        .visibility_timeout(Duration::from_millis(600))
        .poll_wait(Duration::from_millis(50));
    let run = Running::spawn(worker, {
        let (calls, contexts) = (calls.clone(), contexts.clone());
        move |ctx: Context<Job>| {
            let (calls, contexts) = (calls.clone(), contexts.clone());
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                contexts.lock().unwrap().push(ctx);
                tokio::time::sleep(Duration::from_secs(2)).await;
                Ok::<(), BoxError>(())
            }
        }
    });
    wait_stats(&queue, "processed", WAIT, |s| s.processed == 1).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let report = run.stop().await;
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the message ran twice");
    assert_eq!(report.processed, 1);
    assert_eq!(report.retried, 0);
    let stats = queue.stats().await.unwrap();
    assert_eq!(
        (
            stats.ready,
            stats.delayed,
            stats.in_flight.unwrap_or(0),
            stats.processed
        ),
        (0, 0, 0, 1)
    );
    if queue.capabilities().lookup {
        let info = queue
            .get(enqueued.message_id)
            .await
            .unwrap()
            .expect("known");
        assert_eq!(info.state, "acked");
        assert_eq!(info.attempts, 1);
    }
    let ctx = contexts.lock().unwrap()[0].clone();
    assert_eq!(ctx.message_id, enqueued.message_id);
    assert_eq!(ctx.idempotency_id, None);
    assert_eq!(ctx.attempt, 1);
    assert!(ctx.enqueued_at <= ctx.processing_started_at, "{ctx:?}");
    let waited = ctx
        .processing_started_at
        .duration_since(ctx.enqueued_at)
        .unwrap();
    assert!(waited < Duration::from_secs(5), "{ctx:?}");
    assert!(ctx.enqueued_at + Duration::from_secs(1) >= h.started_at);
}

// 6.
async fn undecodable_body_is_dead_lettered_without_the_handler(h: &Harness) {
    let queue: Queue<Order> = h.queue("orders").await;
    let backend: &Arc<dyn Backend> = queue.backend();
    let bad = backend
        .enqueue(
            queue.name(),
            vec![Outgoing {
                body: b"{\"unexpected\":true}".to_vec(),
                ..Default::default()
            }],
        )
        .await
        .unwrap()
        .remove(0);
    assert!(bad.created);
    let calls: Arc<Mutex<Vec<Order>>> = Arc::default();
    let dead_hook = Arc::new(AtomicUsize::new(0));
    let worker = Worker::new(queue.clone(), 2)
        .poll_wait(Duration::from_millis(100))
        .on_dead_letter({
            let dead_hook = dead_hook.clone();
            move |_, _, _| {
                dead_hook.fetch_add(1, Ordering::SeqCst);
                async {}
            }
        });
    let run = Running::spawn(worker, {
        let calls = calls.clone();
        move |ctx: Context<Order>| {
            let calls = calls.clone();
            async move {
                calls.lock().unwrap().push(ctx.event);
                Ok::<(), BoxError>(())
            }
        }
    });
    // SQS and RabbitMQ copy the message to the DLQ before they delete the original: for a
    // moment both are counted.
    wait_stats(&queue, "dead-lettered", WAIT, |s| {
        s.dead_lettered == 1 && s.outstanding() == 0
    })
    .await;
    // The worker goes on with the next event.
    let good = Order {
        id: 9,
        total_cents: 1,
    };
    queue.enqueue(&good).await.unwrap();
    wait_stats(&queue, "the good one processed", WAIT, |s| s.processed == 1).await;
    let report = run.stop().await;
    assert_eq!(
        *calls.lock().unwrap(),
        vec![good],
        "the handler saw the bad body"
    );
    assert_eq!(report.dead_lettered, 1);
    assert_eq!(report.processed, 1);
    assert_eq!(queue.stats().await.unwrap().dead_lettered, 1);
    if queue.capabilities().lookup {
        let info = queue.get(bad.message_id).await.unwrap().expect("known");
        assert_eq!(info.state, "dead");
        assert!(
            info.last_error
                .as_deref()
                .is_some_and(|e| e.contains("decode")),
            "{info:?}"
        );
    }
    let dead = queue.dead_letters(10).await.unwrap();
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0].message_id, bad.message_id);
    assert_eq!(dead[0].attempts, 1);
    assert!(
        dead[0]
            .error
            .as_deref()
            .is_some_and(|e| e.contains("decode")),
        "{dead:?}"
    );
}

// 7.
async fn graceful_shutdown_loses_nothing(h: &Harness) {
    let queue: Queue<Job> = h.queue("shutdown").await;
    let many = queue
        .enqueue_many((0..20).map(|n| Envelope::new(Job { n })))
        .await
        .unwrap();
    assert_eq!(many.enqueued, 20);
    let started = Arc::new(AtomicUsize::new(0));
    let finished: Arc<Mutex<BTreeSet<u32>>> = Arc::default();
    let worker = Worker::new(queue.clone(), 4)
        .poll_wait(Duration::from_millis(100))
        .shutdown_grace(Duration::from_millis(100));
    let mut run = Running::spawn(worker, {
        let (started, finished) = (started.clone(), finished.clone());
        move |ctx: Context<Job>| {
            let (started, finished) = (started.clone(), finished.clone());
            async move {
                started.fetch_add(1, Ordering::SeqCst);
                let n = ctx.event.n;
                tokio::time::sleep(Duration::from_millis(200 + u64::from(n * 53 % 201))).await;
                finished.lock().unwrap().insert(n);
                Ok::<(), BoxError>(())
            }
        }
    });
    // The 6th handler has just started: it needs 200 ms or more, the grace is 100 ms.
    eventually("6 handlers started", WAIT, || async {
        started.load(Ordering::SeqCst) >= 6
    })
    .await;
    run.trigger();
    let report = run.join().await;
    assert!(report.processed >= 1, "{report:?}");
    assert!(report.released >= 1, "nothing released: {report:?}");
    let stats = wait_stats(&queue, "every event acked or ready", WAIT, |s| {
        s.in_flight.unwrap_or(0) == 0 && s.delayed == 0 && s.ready + s.processed == 20
    })
    .await;
    // An ack cut short by the end of the grace period may have landed without the worker
    // counting it (see `shutdown_during_a_slow_ack_acks_or_releases`): at least what it counted.
    assert!(stats.processed >= report.processed, "{stats:?} {report:?}");
    let first: BTreeSet<u32> = finished.lock().unwrap().clone();

    let second: Arc<Mutex<Vec<(u32, u32)>>> = Arc::default();
    let worker = Worker::new(queue.clone(), 4).poll_wait(Duration::from_millis(100));
    let run = Running::spawn(worker, {
        let second = second.clone();
        move |ctx: Context<Job>| {
            let second = second.clone();
            async move {
                second.lock().unwrap().push((ctx.event.n, ctx.attempt));
                Ok::<(), BoxError>(())
            }
        }
    });
    wait_stats(&queue, "all 20 processed", WAIT, |s| s.processed == 20).await;
    let report2 = run.stop().await;
    let second = second.lock().unwrap().clone();
    assert_eq!(stats.processed + report2.processed, 20);
    assert_eq!(second.len() as u64, 20 - stats.processed, "{second:?}");
    assert!(
        second.iter().any(|(_, attempt)| *attempt >= 2),
        "a released event comes back as a further attempt: {second:?}"
    );
    let all: BTreeSet<u32> = first
        .iter()
        .copied()
        .chain(second.iter().map(|(n, _)| *n))
        .collect();
    assert_eq!(all, (0..20).collect::<BTreeSet<_>>());
}

// 8.
async fn on_empty_fires_when_the_queue_empties(h: &Harness) {
    let queue: Queue<Job> = h.queue("empty").await;
    queue
        .enqueue_many((0..10).map(|n| Envelope::new(Job { n })))
        .await
        .unwrap();
    let empties: Arc<Mutex<Vec<(u64, sluice_sdk::QueueStats)>>> = Arc::default();
    let worker = Worker::new(queue.clone(), 3)
        .poll_wait(Duration::from_millis(50))
        .on_empty({
            let (empties, queue) = (empties.clone(), queue.clone());
            move |ctx| {
                let (empties, queue) = (empties.clone(), queue.clone());
                async move {
                    let stats = queue.stats().await.unwrap();
                    empties.lock().unwrap().push((ctx.processed, stats));
                }
            }
        });
    let run = Running::spawn(worker, |ctx: Context<Job>| async move {
        tokio::time::sleep(Duration::from_millis(10 + u64::from(ctx.event.n % 3) * 10)).await;
        Ok::<(), BoxError>(())
    });
    eventually("on_empty", WAIT, || async {
        !empties.lock().unwrap().is_empty()
    })
    .await;
    let report = run.stop().await;
    assert_eq!(report.processed, 10);
    let empties = empties.lock().unwrap();
    for (processed, stats) in empties.iter() {
        assert_eq!(*processed, 10, "on_empty before every event was done");
        assert_eq!(stats.processed, 10);
        assert_eq!(stats.outstanding(), 0);
    }
}

// 9.
async fn producer_and_operator_actions(h: &Harness) {
    let queue: Queue<Job> = h.queue("ops").await;
    let first = queue.enqueue(&Job { n: 1 }).id("a").await.unwrap();
    assert!(first.created);
    let again = queue.enqueue(&Job { n: 1 }).id("a").await.unwrap();
    assert!(!again.created);
    assert_eq!(again.message_id, first.message_id);
    assert_eq!(again.position, 0, "a duplicate has position 0");
    let second = queue.enqueue(&Job { n: 2 }).await.unwrap();
    assert!(second.created);
    assert_ne!(second.message_id, first.message_id);
    assert!(second.position >= 1, "{second:?}");
    assert!(second.position > first.position, "{first:?} {second:?}");

    let many = queue
        .enqueue_many([
            Envelope::new(Job { n: 1 }).id("a"),
            Envelope::new(Job { n: 3 }).id("c"),
            Envelope::new(Job { n: 4 }),
        ])
        .await
        .unwrap();
    assert_eq!((many.enqueued, many.duplicates), (2, 1));
    assert_eq!(many.results.len(), 3);
    assert!(!many.results[0].created);
    assert_eq!(many.results[0].message_id, first.message_id);
    assert!(many.results[1].created && many.results[2].created);

    let third = many.results[1].message_id;
    assert_eq!(queue.cancel(third).await.unwrap(), CancelOutcome::Cancelled);
    assert!(matches!(
        queue.cancel(third).await.unwrap(),
        CancelOutcome::AlreadyCompleted(state) if state == "cancelled"
    ));
    assert_eq!(
        queue.cancel(Uuid::now_v7()).await.unwrap(),
        CancelOutcome::NotFound
    );
    assert_eq!(
        queue.cancel("no-such-id").await.unwrap(),
        CancelOutcome::NotFound
    );
    assert_eq!(
        queue.get(third).await.unwrap().expect("known").state,
        "cancelled"
    );
    assert_eq!(queue.get(Uuid::now_v7()).await.unwrap(), None);
    let info = queue.get(first.message_id).await.unwrap().expect("known");
    assert_eq!((info.state.as_str(), info.attempts), ("ready", 0));
    assert_eq!(queue.stats().await.unwrap().ready, 3);
    assert!(
        !queue.drain(Duration::from_millis(100)).await.unwrap(),
        "drain returned true with 3 ready"
    );

    queue.pause().await.unwrap();
    assert!(queue.stats().await.unwrap().paused);
    let handled: Arc<Mutex<Vec<u32>>> = Arc::default();
    let worker = Worker::new(queue.clone(), 2).poll_wait(Duration::from_millis(50));
    let run = Running::spawn(worker, {
        let handled = handled.clone();
        move |ctx: Context<Job>| {
            let handled = handled.clone();
            async move {
                handled.lock().unwrap().push(ctx.event.n);
                Ok::<(), BoxError>(())
            }
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(handled.lock().unwrap().is_empty(), "handled while paused");
    let stats = queue.stats().await.unwrap();
    assert_eq!(
        (stats.ready, stats.in_flight.unwrap_or(0), stats.processed),
        (3, 0, 0)
    );

    queue.resume().await.unwrap();
    assert!(!queue.stats().await.unwrap().paused);
    assert!(
        queue.drain(Duration::from_secs(5)).await.unwrap(),
        "the queue did not drain"
    );
    let stats = queue.stats().await.unwrap();
    assert_eq!(
        (stats.ready, stats.in_flight.unwrap_or(0), stats.processed),
        (0, 0, 3)
    );
    let report = run.stop().await;
    assert_eq!(report.processed, 3);
    let mut handled = handled.lock().unwrap().clone();
    handled.sort_unstable();
    assert_eq!(handled, vec![1, 2, 4], "the cancelled event was handled");
    let info = queue.get(first.message_id).await.unwrap().expect("known");
    assert_eq!((info.state.as_str(), info.attempts), ("acked", 1));
    assert_eq!(
        queue.get("a").await.unwrap().expect("known").message_id,
        first.message_id
    );
    assert!(matches!(
        queue.cancel(first.message_id).await.unwrap(),
        CancelOutcome::AlreadyCompleted(state) if state == "acked"
    ));
}

// 10. `get` after an ack tells how many deliveries it took.
async fn acked_message_reports_its_attempts(h: &Harness) {
    let queue: Queue<Job> = h.queue("attempts").await;
    let once = queue.enqueue(&Job { n: 1 }).await.unwrap();
    let twice = queue.enqueue(&Job { n: 2 }).await.unwrap();
    let worker = Worker::new(queue.clone(), 2)
        .poll_wait(Duration::from_millis(50))
        .retry(RetryPolicy::new(5).backoff(Backoff::Fixed(Duration::ZERO)));
    let run = Running::spawn(worker, |ctx: Context<Job>| async move {
        if ctx.event.n == 2 && ctx.attempt == 1 {
            Err("once more".into())
        } else {
            Ok(())
        }
    });
    wait_stats(&queue, "2 processed", WAIT, |s| s.processed == 2).await;
    let report = run.stop().await;
    assert_eq!((report.processed, report.retried), (2, 1));
    let info = queue.get(once.message_id).await.unwrap().expect("known");
    assert_eq!(
        (info.state.as_str(), info.attempts),
        ("acked", 1),
        "{info:?}"
    );
    let info = queue.get(twice.message_id).await.unwrap().expect("known");
    assert_eq!(
        (info.state.as_str(), info.attempts),
        ("acked", 2),
        "{info:?}"
    );
}

// 11. The end of the grace period does not cut an ack short: a handler that finished within
// the grace has its ack land (and counted), or its message released; not left in flight until
// the lease runs out.
async fn shutdown_during_a_slow_ack_acks_or_releases(h: &Harness) {
    let slow: Arc<dyn Backend> = Arc::new(SlowAcks {
        inner: h.backend.clone(),
        before: Duration::from_millis(150),
        after: Duration::from_millis(150),
    });
    let queue: Queue<Job> = Queue::open(slow, &h.name("slow-acks")).await.unwrap();
    queue.enqueue(&Job { n: 1 }).await.unwrap();
    let started = Arc::new(AtomicUsize::new(0));
    let worker = Worker::new(queue.clone(), 1)
        .poll_wait(Duration::from_millis(50))
        .shutdown_grace(Duration::from_millis(100));
    let mut run = Running::spawn(worker, {
        let started = started.clone();
        move |_ctx: Context<Job>| {
            started.fetch_add(1, Ordering::SeqCst);
            async {
                tokio::time::sleep(Duration::from_millis(20)).await;
                Ok::<(), BoxError>(())
            }
        }
    });
    eventually("the handler started", WAIT, || async {
        started.load(Ordering::SeqCst) == 1
    })
    .await;
    // The handler finishes within the grace; its ack is on the way when the grace ends.
    run.trigger();
    let report = run.join().await;
    let stats = wait_stats(
        &queue,
        "acked or ready again",
        Duration::from_secs(3),
        |s| s.in_flight.unwrap_or(0) == 0 && s.ready + s.processed == 1,
    )
    .await;
    assert_eq!(report.processed, stats.processed, "{report:?} {stats:?}");
}

// 12. `on_empty` counts every ack, even when ack responses are slow.
async fn on_empty_counts_every_ack_with_slow_ack_responses(h: &Harness) {
    let slow: Arc<dyn Backend> = Arc::new(SlowAcks {
        inner: h.backend.clone(),
        before: Duration::ZERO,
        after: Duration::from_millis(200),
    });
    let queue: Queue<Job> = Queue::open(slow, &h.name("slow-empty")).await.unwrap();
    queue
        .enqueue_many((0..3).map(|n| Envelope::new(Job { n })))
        .await
        .unwrap();
    // Two slots: both finish an event, then one acks the last event while the other polls an
    // empty queue.
    let empties: Arc<Mutex<Vec<u64>>> = Arc::default();
    let worker = Worker::new(queue.clone(), 2)
        .poll_wait(Duration::from_millis(20))
        .on_empty({
            let empties = empties.clone();
            move |ctx| {
                empties.lock().unwrap().push(ctx.processed);
                async {}
            }
        });
    let run = Running::spawn(worker, |_ctx: Context<Job>| async {
        Ok::<(), BoxError>(())
    });
    wait_stats(&queue, "3 processed", WAIT, |s| s.processed == 3).await;
    // Every ack response is back once an empty poll counts all three.
    eventually("on_empty after the third ack", WAIT, || async {
        empties.lock().unwrap().contains(&3)
    })
    .await;
    let report = run.stop().await;
    assert_eq!(report.processed, 3);
    let empties = empties.lock().unwrap();
    assert!(!empties.is_empty(), "on_empty never ran");
    assert!(
        empties.iter().all(|processed| *processed == 3),
        "on_empty ran before every ack was counted: processed {empties:?}"
    );
}

// 13. One instance's controls: status shows what each slot runs and what the instance holds,
// `pause` stops this instance leasing (the queue is not paused), `resume` starts it again, and
// `drain` says when the work is done. The context counts exactly what this instance finished
// and holds.
async fn an_instance_pauses_resumes_drains_and_reports_its_status(h: &Harness) {
    let queue: Queue<Job> = h.queue("instance").await;
    queue
        .enqueue_many((0..6).map(|n| Envelope::new(Job { n })))
        .await
        .unwrap();
    // Handlers wait for a permit, so the test decides when each one finishes.
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let seen: Arc<Mutex<Vec<(u32, u64, u64)>>> = Arc::default();
    let worker = Worker::new(queue.clone(), 2).poll_wait(Duration::from_millis(50));
    let handle = worker.handle();
    let run = Running::spawn(worker, {
        let (gate, seen) = (gate.clone(), seen.clone());
        move |ctx: Context<Job>| {
            let (gate, seen) = (gate.clone(), seen.clone());
            async move {
                seen.lock()
                    .unwrap()
                    .push((ctx.event.n, ctx.processed_count, ctx.pending_count));
                gate.acquire().await.expect("open gate").forget();
                Ok::<(), BoxError>(())
            }
        }
    });
    eventually("2 handlers running", WAIT, || async {
        seen.lock().unwrap().len() == 2
    })
    .await;
    let status = handle.status().await.unwrap();
    assert!(!status.paused);
    assert_eq!(status.processed_count, 0);
    let running: BTreeSet<Uuid> = status.slots.iter().filter_map(|s| s.current).collect();
    assert_eq!(running.len(), 2, "{status:?}");
    assert_eq!(
        status.leased.iter().copied().collect::<BTreeSet<_>>(),
        running,
        "what the instance holds is what its slots run: {status:?}"
    );
    for slot in &status.slots {
        assert_eq!(slot.attempt, Some(1), "{slot:?}");
        assert!(slot.since.is_some(), "{slot:?}");
    }
    {
        let seen = seen.lock().unwrap();
        // Nothing finished yet; the first started alone or beside the second.
        assert!(
            seen.iter().all(|(_, processed, _)| *processed == 0),
            "{seen:?}"
        );
        assert!(seen.iter().all(|(_, _, pending)| *pending <= 1), "{seen:?}");
        assert!(seen.iter().any(|(_, _, pending)| *pending == 1), "{seen:?}");
    }

    // Paused, the instance finishes what it runs and leases nothing more.
    handle.pause();
    assert!(handle.is_paused());
    gate.add_permits(2);
    wait_stats(&queue, "2 processed", WAIT, |s| s.processed == 2).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let status = handle.status().await.unwrap();
    assert!(status.paused);
    assert_eq!(status.processed_count, 2);
    assert!(status.leased.is_empty(), "{status:?}");
    assert_eq!(seen.lock().unwrap().len(), 2, "leased while paused");
    assert_eq!(status.queue.ready, 4, "{status:?}");
    assert!(
        !status.queue.paused,
        "the instance's pause paused the queue"
    );
    assert!(
        !handle.drain(Duration::from_millis(100)).await.unwrap(),
        "drained with 4 ready"
    );

    handle.resume();
    gate.add_permits(4);
    assert!(
        handle.drain(WAIT).await.unwrap(),
        "the instance did not drain the queue"
    );
    let report = run.stop().await;
    assert_eq!(report.processed, 6);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 6);
    let processed: Vec<u64> = seen.iter().map(|(_, processed, _)| *processed).collect();
    // The last two started after at least the first four were acked.
    assert!(processed[4..].iter().all(|p| *p >= 2), "{processed:?}");
    assert!(processed.iter().all(|p| *p < 6), "{processed:?}");
    let mut events: Vec<u32> = seen.iter().map(|(n, _, _)| *n).collect();
    events.sort_unstable();
    assert_eq!(events, (0..6).collect::<Vec<_>>());
}

// 14. The dead-letter hook learns when the event was enqueued and when it failed, and the
// dead letter keeps the error and the attempts.
async fn dead_letter_hook_gets_enqueued_at_and_failed_at(h: &Harness) {
    let queue: Queue<Job> = h.queue("hook").await;
    let enqueued = queue.enqueue(&Job { n: 5 }).await.unwrap();
    let dead: Arc<Mutex<Vec<(Job, String, DeadLetterContext)>>> = Arc::default();
    let worker = Worker::new(queue.clone(), 1)
        .poll_wait(Duration::from_millis(50))
        .retry(RetryPolicy::new(1))
        .on_dead_letter({
            let dead = dead.clone();
            move |job, error, ctx| {
                let dead = dead.clone();
                async move { dead.lock().unwrap().push((job, error, ctx)) }
            }
        });
    let run = Running::spawn(worker, |_ctx: Context<Job>| async {
        Err::<(), BoxError>("card declined".into())
    });
    eventually("on_dead_letter", WAIT, || async {
        !dead.lock().unwrap().is_empty()
    })
    .await;
    let report = run.stop().await;
    assert_eq!((report.dead_lettered, report.processed), (1, 0));
    let (job, error, ctx) = dead.lock().unwrap()[0].clone();
    assert_eq!(job, Job { n: 5 });
    assert_eq!(error, "card declined");
    assert_eq!(ctx.message_id, enqueued.message_id);
    assert_eq!(ctx.attempt, 1);
    assert!(ctx.enqueued_at <= ctx.failed_at, "{ctx:?}");
    assert!(
        ctx.enqueued_at + Duration::from_secs(1) >= h.started_at,
        "{ctx:?}"
    );
    let took = ctx.failed_at.duration_since(ctx.enqueued_at).unwrap();
    assert!(took < Duration::from_secs(10), "{ctx:?}");
    let letters = queue.dead_letters(10).await.unwrap();
    assert_eq!(letters.len(), 1, "{letters:?}");
    let letter = &letters[0];
    assert_eq!(letter.message_id, enqueued.message_id);
    assert_eq!(letter.error.as_deref(), Some("card declined"));
    assert_eq!(letter.attempts, 1);
    assert_eq!(
        serde_json::from_slice::<Job>(&letter.body).unwrap(),
        Job { n: 5 }
    );
    assert!(letter.enqueued_at <= letter.failed_at, "{letter:?}");
}

/// What a backend cannot do for a test: (test, backend, why). Such a test is skipped there,
/// with the reason printed. Everything else runs on every backend.
const CANNOT: &[(&str, Kind, &str)] = &[
    (
        "per_key_order_is_kept_with_concurrency_8",
        Kind::Amqp,
        "a classic RabbitMQ queue has no ordering key",
    ),
    (
        "failing_twice_then_succeeding_retries_with_backoff",
        Kind::Sqs,
        "SQS counts a retry waiting for its delay as in flight (a visibility timeout), and cannot look a message up",
    ),
    (
        "failing_twice_then_succeeding_retries_with_backoff",
        Kind::Amqp,
        "RabbitMQ runs on real time (a 10 s backoff, twice) and cannot look a message up",
    ),
    (
        "non_retryable_error_dead_letters_at_once",
        Kind::Sqs,
        "SQS counts a retry waiting for its delay as in flight, and cannot look a message up",
    ),
    (
        "non_retryable_error_dead_letters_at_once",
        Kind::Amqp,
        "RabbitMQ cannot look a message up",
    ),
    (
        "producer_and_operator_actions",
        Kind::Sqs,
        "SQS has no pause, cancel or lookup",
    ),
    (
        "producer_and_operator_actions",
        Kind::Amqp,
        "RabbitMQ has no pause, cancel, lookup or deduplication",
    ),
    (
        "acked_message_reports_its_attempts",
        Kind::Sqs,
        "SQS cannot look a message up",
    ),
    (
        "acked_message_reports_its_attempts",
        Kind::Amqp,
        "RabbitMQ cannot look a message up",
    ),
];

// 15.
async fn next_steps_are_enqueued_with_the_ack_and_only_then(h: &Harness) {
    let first: Queue<Job> = h.queue("chain-first").await;
    let next: Queue<Job> = h.queue("chain-next").await;
    let chaining = first.capabilities().chaining;
    for n in [1, 2] {
        first.enqueue(&Job { n }).await.unwrap();
    }
    let refusals: Arc<Mutex<Vec<String>>> = Arc::default();
    let worker = Worker::new(first.clone(), 2)
        .poll_wait(Duration::from_millis(100))
        .retry(RetryPolicy::new(1));
    let run = Running::spawn(worker, {
        let (next, refusals) = (next.clone(), refusals.clone());
        move |ctx: Context<Job>| {
            let (next, refusals) = (next.clone(), refusals.clone());
            async move {
                if let Err(error) = ctx.add_next_step(
                    &next,
                    &Job {
                        n: ctx.event.n * 10,
                    },
                ) {
                    refusals.lock().unwrap().push(error.to_string());
                }
                // The second fails after adding its next step: that step must not be stored.
                if ctx.event.n == 2 {
                    return Err("failed after adding a next step".into());
                }
                Ok(())
            }
        }
    });
    wait_stats(&first, "both settled", WAIT, |s| {
        s.processed == 1 && s.dead_lettered == 1 && s.outstanding() == 0
    })
    .await;
    run.stop().await;
    let stored = next
        .backend()
        .receive(
            next.name(),
            10,
            Duration::from_secs(30),
            Duration::from_millis(200),
        )
        .await
        .unwrap();
    let bodies: Vec<Job> = stored
        .iter()
        .map(|delivery| serde_json::from_slice(&delivery.body).unwrap())
        .collect();
    let refusals = refusals.lock().unwrap().clone();
    if chaining {
        assert_eq!(bodies, [Job { n: 10 }]);
        assert!(refusals.is_empty(), "{refusals:?}");
    } else {
        // Refused at `then`, never enqueued apart from the ack.
        assert!(bodies.is_empty(), "{bodies:?}");
        assert_eq!(refusals.len(), 2, "{refusals:?}");
        assert!(refusals[0].contains("next steps"), "{refusals:?}");
    }
}

/// Runs one test on one backend: skipped where [`CANNOT`] says so, or where the backend's
/// service is missing (outside CI); bounded to 25 s.
async fn run_on<F, Fut>(test: &str, kind: Kind, clock: Clock, body: F)
where
    F: FnOnce(Arc<Harness>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    if let Some((_, _, why)) = CANNOT.iter().find(|(t, k, _)| *t == test && *k == kind) {
        eprintln!("skipped on {}: {why}", kind.name());
        return;
    }
    // RabbitMQ has no test clock; the tests that move the clock are in CANNOT.
    let clock = if kind == Kind::Amqp {
        Clock::Real
    } else {
        clock
    };
    let Some(h) = Harness::try_start(kind, clock).await else {
        return;
    };
    let h = Arc::new(h);
    let finished = tokio::time::timeout(Duration::from_secs(25), body(h.clone())).await;
    h.cleanup_all().await;
    finished.expect("the test took more than 25 s");
}

/// Every test, once per backend. `name: Test` runs on a test clock, `name: Real` on the
/// system clock.
macro_rules! suite {
    ($($(#[$meta:meta])* $test:ident: $clock:ident),* $(,)?) => {
        suite!(@kind embedded, Embedded; $($(#[$meta])* $test: $clock),*);
        suite!(@kind http, Http; $($(#[$meta])* $test: $clock),*);
        suite!(@kind grpc, Grpc; $($(#[$meta])* $test: $clock),*);
        suite!(@kind sqs, Sqs; $($(#[$meta])* $test: $clock),*);
        suite!(@kind amqp, Amqp; $($(#[$meta])* $test: $clock),*);
    };
    (@kind $module:ident, $kind:ident; $($(#[$meta:meta])* $test:ident: $clock:ident),*) => {
        mod $module {
            use super::*;
            $(
                $(#[$meta])*
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $test() {
                    run_on(stringify!($test), Kind::$kind, Clock::$clock, |h| async move {
                        super::$test(&h).await
                    })
                    .await;
                }
            )*
        }
    };
}

suite! {
    concurrency_is_never_exceeded_and_every_slot_is_used: Test,
    per_key_order_is_kept_with_concurrency_8: Test,
    failing_twice_then_succeeding_retries_with_backoff: Test,
    non_retryable_error_dead_letters_at_once: Test,
    slow_handler_keeps_its_lease_by_heartbeat: Real,
    undecodable_body_is_dead_lettered_without_the_handler: Test,
    graceful_shutdown_loses_nothing: Test,
    on_empty_fires_when_the_queue_empties: Test,
    producer_and_operator_actions: Test,
    acked_message_reports_its_attempts: Test,
    shutdown_during_a_slow_ack_acks_or_releases: Test,
    on_empty_counts_every_ack_with_slow_ack_responses: Test,
    an_instance_pauses_resumes_drains_and_reports_its_status: Test,
    dead_letter_hook_gets_enqueued_at_and_failed_at: Test,
    next_steps_are_enqueued_with_the_ack_and_only_then: Test,
}
