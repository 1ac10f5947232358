//! Scenario 8 of `sluice bench`: dead letters at scale. A queue whose messages expire after one
//! second into its dead-letter queue is filled; then the bench times how long retention takes to
//! move them all, how fast the dead letters can be listed (a plain page, and a filter that
//! matches nothing), replayed back into the queue, and purged from it.
//!
//! Every step is timed with [`Instant`], bounded by a count and by the time limit, and stops the
//! scenario at the first failure: the figures gathered so far are kept with the failure in words.

use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;
use sluice_client::wire::{QueueSpec, QueueStatsOut, ReplayIn};
use sluice_client::{Client, DlqListQuery};

use super::load::{self, Bodies, EnqueueLoad, EnqueueReport};
use super::server::{CpuSample, CpuUse, Memory, ServerProcess};
use super::{failure_lines, mib, progress, thousands};

/// The queue the scenario uses (its dead letters go to `bench-dlq.dlq`).
pub const QUEUE: &str = "bench-dlq";

/// Retention of the queue while it fills, so every message expires soon after its enqueue.
const FILL_MAX_AGE_MS: i64 = 1_000;

/// Retention of the queue while replaying, so replayed messages do not expire again.
const REPLAY_MAX_AGE_MS: i64 = 86_400_000;

/// Concurrent clients of the fill.
const FILL_CLIENTS: usize = 4;

/// Messages per fill request.
const FILL_BATCH: usize = 1_000;

/// Pause between two stats requests while waiting for the expiry.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// Calls of the plain listing.
const PAGE_CALLS: usize = 50;

/// `limit` of the plain listing.
const PAGE_LIMIT: usize = 50;

/// Calls of the listing with a filter that matches nothing.
const NO_MATCH_CALLS: usize = 20;

/// The `error` filter that matches nothing.
const NO_MATCH_ERROR: &str = "no-such-error";

/// Dead letters per replay call.
const REPLAY_LIMIT: usize = 1_000;

/// Messages retention looks at per maintenance tick and the tick (docs/http-api.md, "Flow
/// control and lifecycle"): the designed expiry rate.
const RETENTION_PER_TICK: u64 = 5_000;
const RETENTION_TICK_MS: u64 = 500;

/// How to run [`run`].
#[derive(Debug, Clone, Copy)]
pub struct DlqLoad {
    /// Messages to fill the queue with.
    pub messages: u64,
    /// Most time of each step (the fill, the expiry wait, the listing, the replay).
    pub time_limit: Duration,
}

/// Scenario 8.
#[derive(Debug, Serialize)]
pub struct DlqReport {
    pub queue: &'static str,
    /// Messages asked for.
    pub messages: u64,
    pub body_bytes: usize,
    /// `max_age_ms` of the queue during the fill.
    pub max_age_ms: i64,
    pub fill: Option<EnqueueReport>,
    pub fill_cpu: Option<CpuUse>,
    pub expiry: Option<ExpiryReport>,
    pub listing: Option<ListingReport>,
    pub replay: Option<ReplayReport>,
    pub purge: Option<PurgeReport>,
    /// Of the server, read at the end (the peak covers the scenario and whatever ran before).
    pub server_memory_after: Option<Memory>,
    /// Why the scenario stopped early; `None` when every step ran and every check held.
    pub failure: Option<String>,
}

/// Step 2: retention moving the messages to the dead-letter queue.
#[derive(Debug, Serialize)]
pub struct ExpiryReport {
    /// DLQ depth at the first stats answer after the fill (retention runs during the fill).
    pub dead_lettered_at_fill_end: u64,
    /// From the end of the fill until the DLQ depth reached all messages (to within one poll).
    pub after_fill_s: f64,
    /// Messages moved after the fill ended, per second of `after_fill_s`.
    pub msgs_per_s: f64,
    /// After the fill, the last stats answer that still showed `dead_lettered_at_fill_end`
    /// (0 when the first answer after it already showed more): the DLQ was not growing yet.
    pub idle_until_s: f64,
    /// Messages moved after the fill ended, per second from `idle_until_s` to `after_fill_s`:
    /// the rate while retention was moving messages, without the wait for the first ones to
    /// be old enough.
    pub msgs_per_s_while_moving: f64,
    /// What retention may look at per second by design.
    pub designed_msgs_per_s: u64,
    /// Stats requests made while waiting.
    pub polls: u64,
    /// Stats requests that failed meanwhile (the wait goes on).
    pub poll_errors: u64,
    pub cpu: CpuUse,
}

/// Step 3: listing the dead letters.
#[derive(Debug, Serialize)]
pub struct ListingReport {
    /// Entries in the DLQ while listing.
    pub dlq_entries: u64,
    /// `limit=50`, no filter.
    pub page: ListCalls,
    /// `error=no-such-error`.
    pub no_match: ListCalls,
}

/// Timings of repeated identical list calls.
#[derive(Debug, Serialize)]
pub struct ListCalls {
    pub calls: usize,
    /// The `limit` sent; `None` for the server default.
    pub limit: Option<usize>,
    pub error_filter: Option<String>,
    pub p50_ms: f64,
    pub max_ms: f64,
    /// Entries in each answer, the least and the most.
    pub entries_min: usize,
    pub entries_max: usize,
    /// Answers that carried a `next_cursor`.
    pub with_cursor: usize,
}

/// Step 4: replaying every dead letter into the queue.
#[derive(Debug, Serialize)]
pub struct ReplayReport {
    /// The `PUT` raising `max_age_ms` again first (not in `elapsed_s`).
    pub raise_max_age_s: f64,
    pub calls: u64,
    pub limit_per_call: usize,
    pub replayed: u64,
    /// From the first replay call to the last answer.
    pub elapsed_s: f64,
    pub entries_per_s: f64,
    /// The slowest call.
    pub max_call_ms: f64,
    pub ready_after: u64,
    pub dead_lettered_after: u64,
    pub cpu: CpuUse,
}

/// Step 5: purging the replayed messages.
#[derive(Debug, Serialize)]
pub struct PurgeReport {
    /// `ready` just before.
    pub ready_before: u64,
    /// `purged` in the answer.
    pub purged: u64,
    pub elapsed_s: f64,
    pub msgs_per_s: f64,
    pub ready_after: u64,
    pub cpu: CpuUse,
}

/// Runs scenario 8 against `client`, with `server` for the CPU figures. Deletes the queue and its
/// dead-letter queue before (leftovers of an earlier run) and after.
pub async fn run(
    client: &Client,
    server: Option<&ServerProcess>,
    bodies: &Bodies,
    body_bytes: usize,
    load: DlqLoad,
) -> DlqReport {
    let mut report = DlqReport {
        queue: QUEUE,
        messages: load.messages,
        body_bytes,
        max_age_ms: FILL_MAX_AGE_MS,
        fill: None,
        fill_cpu: None,
        expiry: None,
        listing: None,
        replay: None,
        purge: None,
        server_memory_after: None,
        failure: None,
    };
    delete_queues(client).await;
    if let Err(error) = steps(client, server, bodies, load, &mut report).await {
        progress(&format!("8. failed: {error:#}"));
        report.failure = Some(format!("{error:#}"));
    }
    report.server_memory_after = server.and_then(ServerProcess::memory);
    delete_queues(client).await;
    report
}

/// Deletes the queue, and with it its dead-letter queue.
async fn delete_queues(client: &Client) {
    match client.queue_delete(QUEUE).await {
        Ok(_) => {}
        Err(error) if error.has_code(sluice_client::ErrorCode::QueueNotFound) => {}
        Err(error) => progress(&format!("cannot delete queue {QUEUE}: {error}")),
    }
}

async fn steps(
    client: &Client,
    server: Option<&ServerProcess>,
    bodies: &Bodies,
    load: DlqLoad,
    report: &mut DlqReport,
) -> anyhow::Result<()> {
    let n = load.messages;
    anyhow::ensure!(n > 0, "--dlq-messages must be at least 1");

    // 1. Fill.
    progress("8. filling the queue");
    client
        .queue_put(
            QUEUE,
            &QueueSpec {
                max_age_ms: Some(FILL_MAX_AGE_MS),
                on_expire: Some("dead_letter".into()),
                ..QueueSpec::default()
            },
        )
        .await
        .with_context(|| format!("cannot create queue {QUEUE}"))?;
    let cpu_before = CpuSample::take(server);
    let fill = load::enqueue_load(
        client,
        QUEUE,
        bodies,
        EnqueueLoad {
            messages: n,
            clients: FILL_CLIENTS,
            batch_size: FILL_BATCH,
            time_limit: load.time_limit,
        },
    )
    .await;
    let fill_ended = Instant::now();
    let cpu_after_fill = CpuSample::take(server);
    report.fill_cpu = Some(cpu_after_fill.since(&cpu_before));
    let (stored, errors) = (fill.messages, fill.errors);
    report.fill = Some(fill);
    anyhow::ensure!(
        stored == n && errors == 0,
        "the fill stored {stored} of {n} messages ({errors} failed requests)"
    );

    // 2. Expiry into the dead-letter queue.
    progress("8. waiting for retention to dead-letter every message");
    let deadline = fill_ended + load.time_limit;
    let (mut polls, mut poll_errors) = (0u64, 0u64);
    let mut at_fill_end = None;
    let mut idle_until = Duration::ZERO;
    let mut last_error = None;
    let mut dead = 0;
    loop {
        polls += 1;
        match client.queue_stats(QUEUE).await {
            Ok(stats) => {
                dead = stats.dead_lettered.unwrap_or(0);
                if *at_fill_end.get_or_insert(dead) == dead && polls > 1 {
                    idle_until = fill_ended.elapsed();
                }
                if dead >= n {
                    break;
                }
            }
            Err(error) => {
                poll_errors += 1;
                last_error = Some(error.to_string());
            }
        }
        if Instant::now() + POLL_INTERVAL > deadline {
            anyhow::bail!(
                "expiry: {dead} of {n} messages dead-lettered {:.1} s after the fill (time limit){}",
                fill_ended.elapsed().as_secs_f64(),
                last_error.map_or_else(String::new, |error| format!(
                    "; {poll_errors} stats requests failed, the last: {error}"
                ))
            );
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
    let after_fill_s = fill_ended.elapsed().as_secs_f64();
    let cpu_after_expiry = CpuSample::take(server);
    let at_fill_end = at_fill_end.unwrap_or(0);
    let moved = n.saturating_sub(at_fill_end) as f64;
    let idle_until_s = idle_until.as_secs_f64();
    report.expiry = Some(ExpiryReport {
        dead_lettered_at_fill_end: at_fill_end,
        after_fill_s,
        msgs_per_s: moved / after_fill_s.max(1e-9),
        idle_until_s,
        msgs_per_s_while_moving: moved / (after_fill_s - idle_until_s).max(1e-9),
        designed_msgs_per_s: RETENTION_PER_TICK * 1_000 / RETENTION_TICK_MS,
        polls,
        poll_errors,
        cpu: cpu_after_expiry.since(&cpu_after_fill),
    });
    anyhow::ensure!(
        dead == n,
        "expiry: the dead-letter queue holds {dead} entries, not {n}"
    );

    // 3. Listing.
    progress("8. listing the dead letters");
    let page = list_calls(
        client,
        PAGE_CALLS,
        DlqListQuery {
            limit: Some(PAGE_LIMIT),
            ..DlqListQuery::default()
        },
        load.time_limit,
    )
    .await?;
    let no_match = list_calls(
        client,
        NO_MATCH_CALLS,
        DlqListQuery {
            error: Some(NO_MATCH_ERROR.into()),
            ..DlqListQuery::default()
        },
        load.time_limit,
    )
    .await?;
    report.listing = Some(ListingReport {
        dlq_entries: dead,
        page,
        no_match,
    });

    // 4. Replay.
    progress("8. replaying every dead letter");
    let raise_started = Instant::now();
    client
        .queue_put(
            QUEUE,
            &QueueSpec {
                max_age_ms: Some(REPLAY_MAX_AGE_MS),
                ..QueueSpec::default()
            },
        )
        .await
        .context("cannot raise max_age_ms before the replay")?;
    let raise_max_age_s = raise_started.elapsed().as_secs_f64();
    let cpu_before = CpuSample::take(server);
    let started = Instant::now();
    let deadline = started + load.time_limit;
    // Enough calls for every entry twice over, in case some call replays fewer than its limit.
    let max_calls = 2 * n.div_ceil(REPLAY_LIMIT as u64) + 10;
    let (mut calls, mut replayed, mut max_call) = (0u64, 0u64, Duration::ZERO);
    loop {
        anyhow::ensure!(
            calls < max_calls && Instant::now() < deadline,
            "replay: {replayed} of {n} replayed in {calls} calls, {:.1} s, and the server still says `more`",
            started.elapsed().as_secs_f64()
        );
        let sent = Instant::now();
        let out = client
            .dlq_replay(
                QUEUE,
                &ReplayIn {
                    limit: Some(REPLAY_LIMIT),
                    ..ReplayIn::default()
                },
            )
            .await
            .with_context(|| format!("replay call {} failed", calls + 1))?;
        max_call = max_call.max(sent.elapsed());
        calls += 1;
        replayed += out.replayed;
        if !out.more {
            break;
        }
    }
    let elapsed_s = started.elapsed().as_secs_f64();
    let cpu_after = CpuSample::take(server);
    let stats = queue_stats(client).await?;
    let dead_after = stats.dead_lettered.unwrap_or(0);
    report.replay = Some(ReplayReport {
        raise_max_age_s,
        calls,
        limit_per_call: REPLAY_LIMIT,
        replayed,
        elapsed_s,
        entries_per_s: replayed as f64 / elapsed_s.max(1e-9),
        max_call_ms: max_call.as_secs_f64() * 1e3,
        ready_after: stats.ready,
        dead_lettered_after: dead_after,
        cpu: cpu_after.since(&cpu_before),
    });
    anyhow::ensure!(
        stats.ready == n && dead_after == 0,
        "after the replay: ready {}, dead_lettered {dead_after}; expected ready {n}, dead_lettered 0 ({replayed} replayed)",
        stats.ready
    );

    // 5. Purge.
    progress("8. purging the queue");
    let ready_before = stats.ready;
    let cpu_before = CpuSample::take(server);
    let started = Instant::now();
    let out = client
        .queue_purge(QUEUE)
        .await
        .context("the purge failed")?;
    let elapsed_s = started.elapsed().as_secs_f64();
    let cpu = CpuSample::take(server).since(&cpu_before);
    let stats = queue_stats(client).await?;
    report.purge = Some(PurgeReport {
        ready_before,
        purged: out.purged,
        elapsed_s,
        msgs_per_s: out.purged as f64 / elapsed_s.max(1e-9),
        ready_after: stats.ready,
        cpu,
    });
    anyhow::ensure!(
        stats.ready == 0,
        "after the purge: ready {} (purged {})",
        stats.ready,
        out.purged
    );
    Ok(())
}

async fn queue_stats(client: &Client) -> anyhow::Result<QueueStatsOut> {
    client
        .queue_stats(QUEUE)
        .await
        .with_context(|| format!("cannot read the stats of {QUEUE}"))
}

/// Makes `calls` identical list calls one after the other and times each; fails on the first
/// failed call or when `time_limit` runs out first.
async fn list_calls(
    client: &Client,
    calls: usize,
    query: DlqListQuery,
    time_limit: Duration,
) -> anyhow::Result<ListCalls> {
    let deadline = Instant::now() + time_limit;
    let mut times = Vec::with_capacity(calls);
    let (mut entries_min, mut entries_max, mut with_cursor) = (usize::MAX, 0, 0);
    for call in 0..calls {
        anyhow::ensure!(
            Instant::now() < deadline,
            "listing: only {call} of {calls} calls ({query:?}) within the time limit"
        );
        let sent = Instant::now();
        let page = client
            .dlq_list(QUEUE, &query)
            .await
            .with_context(|| format!("list call {} ({query:?}) failed", call + 1))?;
        times.push(sent.elapsed().as_secs_f64() * 1e3);
        entries_min = entries_min.min(page.entries.len());
        entries_max = entries_max.max(page.entries.len());
        with_cursor += usize::from(page.next_cursor.is_some());
    }
    times.sort_by(f64::total_cmp);
    Ok(ListCalls {
        calls,
        limit: query.limit,
        error_filter: query.error,
        // Nearest rank.
        p50_ms: times[(times.len().div_ceil(2)).saturating_sub(1)],
        max_ms: times.last().copied().unwrap_or(0.0),
        entries_min: if times.is_empty() { 0 } else { entries_min },
        entries_max,
        with_cursor,
    })
}

/// The lines of scenario 8 in the text report.
pub fn text_lines(out: &mut Vec<String>, r: &DlqReport) {
    out.push(format!(
        "8. dead letters: {} msgs ({}-byte bodies) in {}, max_age_ms {}, on_expire dead_letter",
        thousands(r.messages),
        r.body_bytes,
        r.queue,
        r.max_age_ms
    ));
    if let Some(fill) = &r.fill {
        out.push(format!(
            "   fill: {} clients, batches of {}: {} msgs in {:.2} s = {} msgs/s{}",
            fill.clients,
            fill.batch_size,
            thousands(fill.messages),
            fill.elapsed_s,
            thousands(fill.msgs_per_s as u64),
            server_cpu(r.fill_cpu.as_ref())
        ));
        failure_lines(
            out,
            fill.errors,
            fill.first_error.as_deref(),
            fill.hit_time_limit,
        );
    }
    if let Some(expiry) = &r.expiry {
        out.push(format!(
            "   expiry: all {} in the DLQ {:.2} s after the fill ended ({} were already there): {} msgs/s{}",
            thousands(r.messages),
            expiry.after_fill_s,
            thousands(expiry.dead_lettered_at_fill_end),
            thousands(expiry.msgs_per_s as u64),
            server_cpu(Some(&expiry.cpu))
        ));
        out.push(format!(
            "     the DLQ did not grow until {:.2} s after the fill (messages younger than max_age_ms), then {} msgs/s (polled every 100 ms)",
            expiry.idle_until_s,
            thousands(expiry.msgs_per_s_while_moving as u64)
        ));
        out.push(format!(
            "     retention looks at {} messages per {} ms tick by design (at most {} msgs/s), so this is a designed rate, not a limit of the disk",
            thousands(RETENTION_PER_TICK),
            RETENTION_TICK_MS,
            thousands(expiry.designed_msgs_per_s)
        ));
        if expiry.poll_errors > 0 {
            out.push(format!(
                "     {} of {} stats requests failed while waiting",
                expiry.poll_errors, expiry.polls
            ));
        }
    }
    if let Some(listing) = &r.listing {
        out.push(format!(
            "   listing with {} entries in the DLQ:",
            thousands(listing.dlq_entries)
        ));
        out.push(format!(
            "     limit={}: p50 {:.2} ms, max {:.2} ms ({} calls, {} entries each{})",
            listing.page.limit.unwrap_or(50),
            listing.page.p50_ms,
            listing.page.max_ms,
            listing.page.calls,
            entries_text(&listing.page),
            cursor_text(&listing.page)
        ));
        out.push(format!(
            "     error={} (matches nothing; the server looks at up to 100,000 entries per call): p50 {:.2} ms, max {:.2} ms ({} calls, {} entries each{})",
            listing.no_match.error_filter.as_deref().unwrap_or("?"),
            listing.no_match.p50_ms,
            listing.no_match.max_ms,
            listing.no_match.calls,
            entries_text(&listing.no_match),
            cursor_text(&listing.no_match)
        ));
    }
    if let Some(replay) = &r.replay {
        out.push(format!(
            "   replay (after raising max_age_ms to 1 day in {:.3} s): {} entries in {} calls of limit {}, {:.2} s = {} entries/s (slowest call {:.0} ms){}",
            replay.raise_max_age_s,
            thousands(replay.replayed),
            replay.calls,
            replay.limit_per_call,
            replay.elapsed_s,
            thousands(replay.entries_per_s as u64),
            replay.max_call_ms,
            server_cpu(Some(&replay.cpu))
        ));
        out.push(format!(
            "     then: ready {}, dead_lettered {}",
            thousands(replay.ready_after),
            thousands(replay.dead_lettered_after)
        ));
    }
    if let Some(purge) = &r.purge {
        out.push(format!(
            "   purge: {} msgs ({} ready before) in {:.2} s = {} msgs/s{}; ready after: {}",
            thousands(purge.purged),
            thousands(purge.ready_before),
            purge.elapsed_s,
            thousands(purge.msgs_per_s as u64),
            server_cpu(Some(&purge.cpu)),
            thousands(purge.ready_after)
        ));
    }
    if let Some(memory) = &r.server_memory_after {
        out.push(format!(
            "   server memory at the end: peak RSS (VmHWM) {}, RSS now {}",
            mib(memory.peak_rss_kib),
            mib(memory.rss_kib)
        ));
    }
    if let Some(failure) = &r.failure {
        out.push(format!("   FAILED: {failure}"));
    }
}

fn entries_text(calls: &ListCalls) -> String {
    if calls.entries_min == calls.entries_max {
        calls.entries_min.to_string()
    } else {
        format!("{} to {}", calls.entries_min, calls.entries_max)
    }
}

fn cursor_text(calls: &ListCalls) -> String {
    match calls.with_cursor {
        0 => ", no cursor".into(),
        n if n == calls.calls => ", with a cursor".into(),
        n => format!(", {n} with a cursor"),
    }
}

fn server_cpu(cpu: Option<&CpuUse>) -> String {
    cpu.and_then(|cpu| cpu.server_percent)
        .map_or_else(String::new, |percent| {
            format!(" (server CPU {percent:.0}%)")
        })
}
