//! Scenario 14: what a deep backlog costs. One queue is filled step by step to each depth of
//! `--sweep-depths` (small messages, in batches); at each depth the bench reads the server's
//! memory (bytes per queued message over an empty server), times single-message enqueues and
//! receive + ack rounds against that depth, and restarts the server on the same data to time
//! its start with that many messages queued.
//!
//! Issue 16's targets are read off this table: at most 150 bytes per queued message in memory,
//! enqueue and receive + ack within 20% of each other from the smallest depth to the largest,
//! and a restart within 2 s at 10,000,000 queued.

use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;
use sluice_client::Client;
use sluice_client::wire::{QueueSpec, ReceiveIn};

use crate::load::{self, Bodies, EnqueueLoad};
use crate::server::ServerProcess;

/// The sizes of the sweep.
#[derive(Debug, Clone)]
pub struct DepthLoad {
    /// Depths to measure at, ascending.
    pub depths: Vec<u64>,
    /// Body size of the filling messages and of the timed ones.
    pub body_bytes: usize,
    /// Single-message enqueues, and receive + ack rounds, timed at each depth.
    pub probes: u64,
    pub time_limit: Duration,
}

/// One depth's figures.
#[derive(Debug, Serialize)]
pub struct DepthPoint {
    pub depth: u64,
    /// The server's RSS with `depth` messages queued.
    pub rss_mib: f64,
    /// RSS over the empty server's, per queued message.
    pub bytes_per_message: f64,
    /// Messages the server's dispatch index held in memory (`sluice_storage_index_messages`).
    pub index_messages: u64,
    /// Messages waiting on disk only (`sluice_storage_paged_out_messages`).
    pub paged_out: u64,
    /// Single-message enqueues, 8 clients, against this depth.
    pub enqueue_per_s: f64,
    /// One message received and acked at a time, against this depth.
    pub receive_ack_per_s: f64,
    /// Start of a server on the same data, to its ready line.
    pub restart_s: f64,
    /// The restarted server's RSS once ready.
    pub rss_after_restart_mib: f64,
}

/// Scenario 14's report.
#[derive(Debug, Serialize)]
pub struct DepthReport {
    pub body_bytes: usize,
    pub empty_rss_mib: f64,
    pub points: Vec<DepthPoint>,
    pub failure: Option<String>,
}

const QUEUE: &str = "bench-depth";

/// Runs the sweep on servers of its own over `data` (started with `exe`).
pub async fn run(exe: &Path, work: &Path, durability: &str, load: DepthLoad) -> DepthReport {
    let mut report = DepthReport {
        body_bytes: load.body_bytes,
        empty_rss_mib: 0.0,
        points: Vec::new(),
        failure: None,
    };
    if let Err(error) = sweep(exe, work, durability, &load, &mut report).await {
        report.failure = Some(format!("{error:#}"));
    }
    report
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

async fn sweep(
    exe: &Path,
    work: &Path,
    durability: &str,
    load: &DepthLoad,
    report: &mut DepthReport,
) -> anyhow::Result<()> {
    let data = work.join("depth-data");
    let log = work.join("depth-server.log");
    let mut server = ServerProcess::start(exe, &data, durability, None, &log, None).await?;
    Client::new(&server.url)?
        .queue_put(QUEUE, &QueueSpec::default())
        .await?;
    let empty_kib = server.memory().map_or(0, |memory| memory.rss_kib);
    report.empty_rss_mib = mib(empty_kib);
    let bodies = Bodies::new(load.body_bytes);
    let mut queued = 0;
    for &depth in &load.depths {
        // Each restart below starts the server on a new port.
        let client = Client::new(&server.url)?;
        crate::progress(&format!("14. filling to {depth} queued"));
        let fill = EnqueueLoad {
            messages: depth.saturating_sub(queued),
            clients: 4,
            batch_size: 1000,
            time_limit: load.time_limit,
        };
        let filled = load::enqueue_load(&client, QUEUE, &bodies, fill).await;
        anyhow::ensure!(
            filled.errors == 0 && !filled.hit_time_limit,
            "filling to {depth} failed: {:?}",
            filled.first_error
        );
        queued = depth;
        let rss_kib = server.memory().map_or(0, |memory| memory.rss_kib);
        let (index_messages, paged_out) = index_gauges(&server.url).await;
        let probe = EnqueueLoad {
            messages: load.probes,
            clients: 8,
            batch_size: 1,
            time_limit: load.time_limit,
        };
        let enqueued = load::enqueue_load(&client, QUEUE, &bodies, probe).await;
        // As many taken as were added, so the depth stays where it is.
        let started = Instant::now();
        for _ in 0..load.probes {
            let request = ReceiveIn {
                max: Some(1),
                wait_ms: Some(1000),
                visibility_timeout_ms: None,
            };
            let taken = client.receive(QUEUE, &request).await?.messages;
            let message = taken
                .into_iter()
                .next()
                .ok_or_else(|| anyhow::anyhow!("a receive at depth {depth} found nothing"))?;
            client.ack(QUEUE, vec![message.receipt]).await?;
        }
        let receive_ack_per_s = load.probes as f64 / started.elapsed().as_secs_f64();
        crate::progress(&format!("14. restarting with {depth} queued"));
        server.stop().await?;
        server = ServerProcess::start(exe, &data, durability, None, &log, None).await?;
        report.points.push(DepthPoint {
            depth,
            rss_mib: mib(rss_kib),
            bytes_per_message: (rss_kib.saturating_sub(empty_kib) * 1024) as f64 / depth as f64,
            index_messages,
            paged_out,
            enqueue_per_s: enqueued.msgs_per_s,
            receive_ack_per_s,
            restart_s: server.ready_after.as_secs_f64(),
            rss_after_restart_mib: mib(server.memory().map_or(0, |memory| memory.rss_kib)),
        });
    }
    server.stop().await?;
    Ok(())
}

/// The server's `sluice_storage_index_messages` and `sluice_storage_paged_out_messages` (0 when
/// it does not report them).
async fn index_gauges(url: &str) -> (u64, u64) {
    let text = match reqwest::get(format!("{url}/metrics")).await {
        Ok(response) => response.text().await.unwrap_or_default(),
        Err(_) => String::new(),
    };
    let gauge = |name: &str| {
        text.lines()
            .find_map(|line| {
                line.strip_prefix(name)?
                    .strip_prefix(' ')?
                    .trim()
                    .parse()
                    .ok()
            })
            .unwrap_or(0)
    };
    (
        gauge("sluice_storage_index_messages"),
        gauge("sluice_storage_paged_out_messages"),
    )
}

/// The table of scenario 14.
pub fn text_lines(out: &mut Vec<String>, report: &DepthReport) {
    out.push(String::new());
    out.push(format!(
        "14. depth sweep: one queue filled with bodies of {} bytes; empty server RSS {:.1} MiB",
        report.body_bytes, report.empty_rss_mib
    ));
    out.push(
        "   | queued | in memory | paged out | RSS MiB | bytes per queued msg | enqueue msgs/s (8 clients) | receive+ack msgs/s (1 at a time) | restart s | RSS after restart MiB |"
            .into(),
    );
    out.push("   |---:|---:|---:|---:|---:|---:|---:|---:|---:|".into());
    for point in &report.points {
        out.push(format!(
            "   | {} | {} | {} | {:.1} | {:.0} | {:.0} | {:.0} | {:.2} | {:.1} |",
            point.depth,
            point.index_messages,
            point.paged_out,
            point.rss_mib,
            point.bytes_per_message,
            point.enqueue_per_s,
            point.receive_ack_per_s,
            point.restart_s,
            point.rss_after_restart_mib
        ));
    }
    if let Some(failure) = &report.failure {
        out.push(format!("   failed: {failure}"));
    }
}
