//! An order pipeline of three queues, where each stage's handler enqueues into the next:
//! `orders` → validate → `payments` → charge → `shipments` → ship.
//!
//! Shows:
//! - three workers running concurrently in one process, one per queue;
//! - handing work on with the order id as the idempotency id, so a stage that is retried after
//!   it already enqueued the next step does not duplicate it: here the payment gateway times
//!   out *after* the shipment was enqueued for every fifth order, the charge is retried, and
//!   the second enqueue into `shipments` answers `created: false`;
//! - stopping every worker once the last order is shipped and the queues are drained
//!   ([`Queue::drain`], [`WorkerHandle::shutdown`]).
//!
//! Run it with the queues inside the process:
//!
//! ```text
//! cargo run -p sluice-sdk --example order_pipeline
//! ```
//!
//! or against a running `sluice serve`:
//!
//! ```text
//! SLUICE_URL=http://127.0.0.1:7566 cargo run -p sluice-sdk --example order_pipeline
//! ```
//!
//! It exits non-zero unless every order reached `shipments` exactly once.
//!
//! [`Queue::drain`]: sluice_sdk::Queue::drain
//! [`WorkerHandle::shutdown`]: sluice_sdk::WorkerHandle::shutdown

#[path = "support/cleanup.rs"]
mod cleanup;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sluice_sdk::{
    Backend, Backoff, BoxError, Embedded, Http, Queue, RetryPolicy, Worker, WorkerHandle,
};

/// The workers give up after this long, whatever happened.
const TIMEOUT: Duration = Duration::from_secs(60);
const ORDERS: u32 = 20;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Order {
    order_id: u32,
    customer: String,
    total_cents: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Payment {
    order_id: u32,
    amount_cents: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Shipment {
    order_id: u32,
    charge_id: String,
}

/// `SLUICE_URL` set: that server (with the token in `SLUICE_TOKEN`, if set); else a temporary
/// store inside the process.
async fn backend() -> sluice_sdk::Result<Arc<dyn Backend>> {
    Ok(match std::env::var("SLUICE_URL") {
        Ok(url) => {
            println!("backend: sluice server at {url}");
            Arc::new(Http::with_env_token(&url)?)
        }
        Err(_) => {
            println!("backend: embedded (temporary store)");
            Arc::new(Embedded::temporary().await?)
        }
    })
}

/// Quick retries, so the example does not wait on the default backoff.
fn retry() -> RetryPolicy {
    RetryPolicy::new(4).backoff(Backoff::Fixed(Duration::from_millis(100)))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let backend = backend().await?;
    let run = std::process::id();
    let orders: Queue<Order> = Queue::open(backend.clone(), &format!("orders-{run}")).await?;
    let payments: Queue<Payment> = Queue::open(backend.clone(), &format!("payments-{run}")).await?;
    let shipments: Queue<Shipment> =
        Queue::open(backend.clone(), &format!("shipments-{run}")).await?;
    println!(
        "queues: {} → {} → {}",
        orders.name(),
        payments.name(),
        shipments.name()
    );

    let order_worker = Worker::new(orders.clone(), 4).retry(retry());
    let payment_worker = Worker::new(payments.clone(), 2).retry(retry());
    let shipment_worker = Worker::new(shipments.clone(), 2).retry(retry());
    let handles: Vec<WorkerHandle> = vec![
        order_worker.handle(),
        payment_worker.handle(),
        shipment_worker.handle(),
    ];
    // Order id → how many times it was shipped.
    let shipped = Arc::new(Mutex::new(BTreeMap::<u32, u32>::new()));
    let duplicate_handoffs = Arc::new(Mutex::new(0u32));

    // Stage 1: validate, then hand over to payments.
    let validate = {
        let payments = payments.clone();
        move |ctx: sluice_sdk::Context<Order>| {
            let payments = payments.clone();
            async move {
                let order = ctx.event;
                if order.total_cents == 0 {
                    return Err(BoxError::from(format!("order {}: empty", order.order_id)));
                }
                let payment = Payment {
                    order_id: order.order_id,
                    amount_cents: order.total_cents,
                };
                let enqueued = payments
                    .enqueue(&payment)
                    .id(format!("order-{}", order.order_id))
                    .await?;
                println!(
                    "orders    validated order {:>2} for {} → payments (created: {})",
                    order.order_id, order.customer, enqueued.created
                );
                Ok(())
            }
        }
    };

    // Stage 2: charge, then hand over to shipments. Every fifth order's gateway call times
    // out after the shipment was enqueued: the retry enqueues it again, as a duplicate.
    let charge = {
        let shipments = shipments.clone();
        let duplicate_handoffs = duplicate_handoffs.clone();
        move |ctx: sluice_sdk::Context<Payment>| {
            let shipments = shipments.clone();
            let duplicate_handoffs = duplicate_handoffs.clone();
            async move {
                let payment = ctx.event;
                tokio::time::sleep(Duration::from_millis(10)).await;
                let shipment = Shipment {
                    order_id: payment.order_id,
                    charge_id: format!("ch_{:06}", payment.order_id),
                };
                let enqueued = shipments
                    .enqueue(&shipment)
                    .id(format!("order-{}", payment.order_id))
                    .await?;
                if !enqueued.created {
                    *duplicate_handoffs.lock().unwrap() += 1;
                }
                println!(
                    "payments  charged order {:>2} {:>5} cents, attempt {} → shipments (created: {})",
                    payment.order_id, payment.amount_cents, ctx.attempt, enqueued.created
                );
                if payment.order_id.is_multiple_of(5) && ctx.attempt == 1 {
                    return Err(BoxError::from(
                        "payment gateway timeout (after the handoff)",
                    ));
                }
                Ok(())
            }
        }
    };

    // Stage 3: ship; the last order's shipment wakes the coordinator below.
    let all_shipped = Arc::new(tokio::sync::Notify::new());
    let ship = {
        let shipped = shipped.clone();
        let all_shipped = all_shipped.clone();
        move |ctx: sluice_sdk::Context<Shipment>| {
            let shipped = shipped.clone();
            let all_shipped = all_shipped.clone();
            async move {
                let shipment = ctx.event;
                let done = {
                    let mut shipped = shipped.lock().unwrap();
                    *shipped.entry(shipment.order_id).or_default() += 1;
                    shipped.len() == ORDERS as usize
                };
                println!(
                    "shipments shipped order {:>2} (charge {})",
                    shipment.order_id, shipment.charge_id
                );
                if done {
                    all_shipped.notify_one();
                }
                Ok(())
            }
        }
    };

    // Once every order is shipped, let the retried charges finish (drain waits until a queue
    // holds nothing ready, delayed or in flight), then stop all three workers.
    let coordinator = {
        let (orders, payments, shipments) = (orders.clone(), payments.clone(), shipments.clone());
        async move {
            tokio::select! {
                _ = all_shipped.notified() => println!("all {ORDERS} orders shipped: draining"),
                _ = tokio::time::sleep(TIMEOUT) => println!("timed out: stopping"),
            }
            let drain = Duration::from_secs(10);
            let drained = orders.drain(drain).await?
                && payments.drain(drain).await?
                && shipments.drain(drain).await?;
            println!("queues drained: {drained}; stopping the workers");
            for handle in &handles {
                handle.shutdown();
            }
            Ok::<_, sluice_sdk::Error>(())
        }
    };

    // The producer: orders come in while the workers run.
    let producer = {
        let orders = orders.clone();
        async move {
            for order_id in 1..=ORDERS {
                let order = Order {
                    order_id,
                    customer: format!("customer-{}", order_id % 7),
                    total_cents: 1000 + u64::from(order_id) * 125,
                };
                orders
                    .enqueue(&order)
                    .id(format!("order-{order_id}"))
                    .await?;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Ok::<_, sluice_sdk::Error>(())
        }
    };

    let (produced, coordinated, order_report, payment_report, shipment_report) = tokio::join!(
        producer,
        coordinator,
        order_worker.run_until(validate, tokio::time::sleep(TIMEOUT)),
        payment_worker.run_until(charge, tokio::time::sleep(TIMEOUT)),
        shipment_worker.run_until(ship, tokio::time::sleep(TIMEOUT)),
    );
    produced?;
    coordinated?;
    let (order_report, payment_report, shipment_report) =
        (order_report?, payment_report?, shipment_report?);
    for (stage, report) in [
        ("orders", &order_report),
        ("payments", &payment_report),
        ("shipments", &shipment_report),
    ] {
        println!(
            "report {stage:<9}: processed {:>2}, retried {}, dead-lettered {}",
            report.processed, report.retried, report.dead_lettered
        );
    }

    // Check: every order shipped exactly once, the retried charges' handoffs deduplicated.
    let shipped = shipped.lock().unwrap().clone();
    let duplicate_handoffs = *duplicate_handoffs.lock().unwrap();
    let timeouts = (1..=ORDERS).filter(|id| id.is_multiple_of(5)).count() as u32;
    let mut failures = Vec::new();
    let wrong: Vec<(u32, u32)> = (1..=ORDERS)
        .map(|id| (id, shipped.get(&id).copied().unwrap_or(0)))
        .filter(|&(_, times)| times != 1)
        .collect();
    if !wrong.is_empty() {
        failures.push(format!(
            "(order, times shipped) not exactly once: {wrong:?}"
        ));
    }
    if duplicate_handoffs != timeouts {
        failures.push(format!(
            "{duplicate_handoffs} duplicate handoffs to shipments, expected {timeouts}"
        ));
    }
    for (stage, report, expected) in [
        ("orders", &order_report, ORDERS),
        ("payments", &payment_report, ORDERS),
        ("shipments", &shipment_report, ORDERS),
    ] {
        if report.processed != u64::from(expected) || report.dead_lettered != 0 {
            failures.push(format!("{stage}: {report:?}"));
        }
    }
    cleanup::remove_queues(&[
        &format!("orders-{run}"),
        &format!("payments-{run}"),
        &format!("shipments-{run}"),
    ])
    .await;
    if failures.is_empty() {
        println!(
            "ok: {ORDERS} orders went through all three queues, each shipped once; \
             {duplicate_handoffs} retried handoffs deduplicated"
        );
        Ok(())
    } else {
        for failure in &failures {
            eprintln!("FAILED: {failure}");
        }
        std::process::exit(1);
    }
}
