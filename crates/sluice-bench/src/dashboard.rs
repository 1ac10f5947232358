//! Scenario 10 of `sluice bench`: the dashboard's page views with a big queue.
//!
//! A queue is filled with `--dashboard-messages` messages, then some are put in the other
//! states a dashboard shows (50 leased for an hour, 50 dead-lettered by a permanent nack, 1,000
//! more enqueued with a delay of an hour). Then every dashboard page is viewed 100 times, one
//! view after the other, each view being the API calls the page's script (`app.js` of the
//! server) makes when it loads:
//!
//! - every page, on a fresh load, starts the sampler, which calls `GET /v1/queues` at once (and
//!   again every 3 s while the page stays open; those later polls are not part of a view);
//! - overview `#/`: nothing else (it draws from the sampler's answer);
//! - queue `#/queue/Q?state=S`: `GET /v1/queues/Q`, then one `browse` page of the tab in the
//!   URL (`state=S&limit=50`; the other tabs show only the counts of that answer);
//! - dead letters `#/dlq/Q`: `GET /v1/queues/Q/dlq?limit=50`;
//! - message `#/message/Q/ID`: `GET /v1/queues/Q/messages/ID` and `.../body`;
//! - webhooks `#/webhooks`: `GET /v1/webhooks`, after the sampler's answer;
//! - schedules `#/schedules`: `GET /v1/schedules` (again at each poll while open);
//! - topics `#/topics`: `GET /v1/topics` (again at each poll while open);
//! - alerts `#/alerts`: `GET /v1/alerts` (again at each poll while open).
//!
//! Besides, "Load more" on the ready tab deep in the queue: one `browse` page from a cursor
//! about halfway in, reached by paging through the queue beforehand.
//!
//! The calls of a view are made one after another on one keep-alive connection over loopback
//! (the browser overlaps some of them), and each is timed from sending to the last byte of the
//! answer: so a view's time is the server's time for it plus loopback, an upper bound of the
//! server time per page view.
//!
//! `sluice_client` has no methods for the browsing routes or the webhook list, so the page
//! views speak plain HTTP, as the browser does (the schedule, topic and alert lists too, to be
//! timed alike); filling and setting up the queue go through the client. Every loop is bounded
//! by a count and by the time limit, and the scenario stops at the first failure, keeping what it
//! measured so far.

use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;
use sluice_client::wire::{
    BrowseOut, DeadLetterListOut, NackIn, QueueSpec, QueueStatsOut, ReceiveIn,
};
use sluice_client::{Client, DlqListQuery};

use super::load::{self, Bodies, EnqueueLoad, EnqueueReport};
use super::server::{CpuSample, CpuUse, Memory, ServerProcess};
use super::{cpu_use_line, failure_lines, mib, progress, thousands};

/// The queue the scenario uses (its dead letters go to `bench-dash.dlq`).
pub const QUEUE: &str = "bench-dash";

/// What a page view should cost the server at most.
pub const TARGET_MS: f64 = 100.0;

/// Views of each page.
const VIEWS: usize = 100;

/// Concurrent clients of the fill.
const FILL_CLIENTS: usize = 4;

/// Messages per fill request.
const FILL_BATCH: usize = 1_000;

/// Messages leased (and left in flight) for the `in_flight` tab.
const LEASED: usize = 50;

/// Messages dead-lettered for the DLQ page.
const DEAD: usize = 50;

/// Messages enqueued with a delay for the `delayed` tab.
const DELAYED: usize = 1_000;

/// The lease of the leased messages and the delay of the delayed ones: longer than any run.
const LONG_MS: i64 = 3_600_000;

/// The dashboard's page size (`PAGE` in `app.js`).
const PAGE: usize = 50;

/// Page size while walking to the deep cursor (the server's largest).
const WALK_PAGE: usize = 1_000;

/// Timeout of one page-view request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Message ids of each kind the message page cycles through.
const IDS_PER_KIND: usize = 5;

/// How to run [`run`].
#[derive(Debug, Clone, Copy)]
pub struct DashboardLoad {
    /// Messages to fill the queue with.
    pub messages: u64,
    /// Most time of the fill, of the walk to the deep cursor and of each page's views.
    pub time_limit: Duration,
}

/// Scenario 10.
#[derive(Debug, Serialize)]
pub struct DashboardReport {
    pub queue: &'static str,
    /// Messages asked for.
    pub messages: u64,
    pub body_bytes: usize,
    pub target_ms: f64,
    pub fill: Option<EnqueueReport>,
    /// The other states, and the queue's stats afterwards.
    pub setup: Option<SetupReport>,
    /// The server's memory before the fill, with the queue set up (before the views), after
    /// the views. The peak covers whatever ran on the server before.
    pub memory_before_fill: Option<Memory>,
    pub memory_with_queue: Option<Memory>,
    pub memory_after_views: Option<Memory>,
    /// How the cursor of the deep page was found.
    pub deep_cursor: Option<DeepCursor>,
    /// Each page's views.
    pub pages: Vec<PageReport>,
    /// CPU use while the pages were viewed (one request at a time, so mostly idle; "anything
    /// else" explains outliers).
    pub views_cpu: Option<CpuUse>,
    /// Why the scenario stopped early; `None` when every step ran.
    pub failure: Option<String>,
}

/// Putting messages in the other states.
#[derive(Debug, Serialize)]
pub struct SetupReport {
    pub leased: usize,
    pub lease_ms: i64,
    pub dead_lettered: usize,
    pub delayed: usize,
    pub delay_ms: i64,
    /// The queue's stats afterwards.
    pub ready: u64,
    pub delayed_now: u64,
    pub in_flight: u64,
    pub dlq_depth: u64,
    /// Queues on the server (`GET /v1/queues` lists them all).
    pub queues_on_server: usize,
    /// Webhook endpoints on the server (`GET /v1/webhooks` lists them all).
    pub webhook_endpoints: usize,
}

/// The cursor of "Load more" deep in the queue.
#[derive(Debug, Serialize)]
pub struct DeepCursor {
    /// Ready messages before the cursor.
    pub position: u64,
    /// `browse` pages of 1,000 walked to get there.
    pub pages_walked: u64,
    pub walk_s: f64,
    /// The median of those pages.
    pub walk_page_p50_ms: f64,
    pub cursor: String,
}

/// The views of one page.
#[derive(Debug, Serialize)]
pub struct PageReport {
    pub page: String,
    /// The dashboard route.
    pub route: String,
    /// What changes from view to view, if anything.
    pub note: Option<String>,
    /// The calls of one view, in order (`{id}` where it changes from view to view).
    pub calls: Vec<CallTimes>,
    pub views: usize,
    /// Time of a view: the sum of its calls' times.
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub mean_ms: f64,
    /// Every view took less than [`TARGET_MS`].
    pub under_target: bool,
}

/// One call of a page, over its views.
#[derive(Debug, Serialize)]
pub struct CallTimes {
    pub call: String,
    pub p50_ms: f64,
    pub max_ms: f64,
    /// Bytes of the answer, the most over the views.
    pub answer_bytes_max: usize,
}

/// Runs scenario 10 against `client`. Deletes the queue and its dead-letter queue before
/// (leftovers of an earlier run) and after.
pub async fn run(
    client: &Client,
    server: Option<&ServerProcess>,
    bodies: &Bodies,
    body_bytes: usize,
    load: DashboardLoad,
) -> DashboardReport {
    let mut report = DashboardReport {
        queue: QUEUE,
        messages: load.messages,
        body_bytes,
        target_ms: TARGET_MS,
        fill: None,
        setup: None,
        memory_before_fill: None,
        memory_with_queue: None,
        memory_after_views: None,
        deep_cursor: None,
        pages: Vec::new(),
        views_cpu: None,
        failure: None,
    };
    delete_queues(client).await;
    if let Err(error) = steps(client, server, bodies, load, &mut report).await {
        progress(&format!("10. failed: {error:#}"));
        report.failure = Some(format!("{error:#}"));
    }
    progress("10. deleting the queue");
    delete_queues(client).await;
    report
}

/// Purges the queue (a purge may take longer than a plain request), deletes it, then its
/// dead-letter queue.
async fn delete_queues(client: &Client) {
    let missing =
        |error: &sluice_client::Error| error.has_code(sluice_client::ErrorCode::QueueNotFound);
    if let Err(error) = client.queue_purge(QUEUE).await
        && !missing(&error)
    {
        progress(&format!("cannot purge queue {QUEUE}: {error}"));
    }
    for name in [QUEUE.to_owned(), format!("{QUEUE}.dlq")] {
        match client.queue_delete(&name).await {
            Ok(_) => {}
            Err(error) if missing(&error) => {}
            Err(error) => progress(&format!("cannot delete queue {name}: {error}")),
        }
    }
}

async fn steps(
    client: &Client,
    server: Option<&ServerProcess>,
    bodies: &Bodies,
    load: DashboardLoad,
    report: &mut DashboardReport,
) -> anyhow::Result<()> {
    let n = load.messages;
    anyhow::ensure!(
        n >= (LEASED + DEAD) as u64,
        "--dashboard-messages must be at least {}",
        LEASED + DEAD
    );
    let memory = || server.and_then(ServerProcess::memory);
    report.memory_before_fill = memory();

    // 1. Fill.
    progress(&format!(
        "10. filling {QUEUE} with {} messages",
        thousands(n)
    ));
    client
        .queue_put(QUEUE, &QueueSpec::default())
        .await
        .with_context(|| format!("cannot create queue {QUEUE}"))?;
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
    let (stored, errors) = (fill.messages, fill.errors);
    report.fill = Some(fill);
    anyhow::ensure!(
        stored == n && errors == 0,
        "the fill stored {stored} of {n} messages ({errors} failed requests)"
    );

    // 2. The other states.
    progress("10. leasing, dead-lettering and delaying some");
    let lease = ReceiveIn {
        max: Some(LEASED as i64),
        wait_ms: Some(0),
        visibility_timeout_ms: Some(LONG_MS),
    };
    let leased = client
        .receive(QUEUE, &lease)
        .await
        .context("cannot lease messages")?;
    anyhow::ensure!(
        leased.messages.len() == LEASED,
        "leased {} messages, not {LEASED}",
        leased.messages.len()
    );
    let to_kill = client
        .receive(
            QUEUE,
            &ReceiveIn {
                max: Some(DEAD as i64),
                ..lease
            },
        )
        .await
        .context("cannot receive the messages to dead-letter")?;
    anyhow::ensure!(
        to_kill.messages.len() == DEAD,
        "received {} messages to dead-letter, not {DEAD}",
        to_kill.messages.len()
    );
    for message in &to_kill.messages {
        client
            .nack(
                QUEUE,
                &NackIn {
                    receipt: message.receipt.clone(),
                    error: Some("bench: a permanent failure for the dashboard".into()),
                    delay_ms: None,
                    permanent: Some(true),
                },
            )
            .await
            .context("cannot dead-letter a message")?;
    }
    let delayed = (0..DELAYED as u64)
        .map(|seq| {
            let mut message = bodies.message(n + seq);
            message.delay_ms = Some(LONG_MS);
            message
        })
        .collect();
    client
        .enqueue_batch(QUEUE, delayed)
        .await
        .context("cannot enqueue the delayed messages")?;
    let stats: QueueStatsOut = client
        .queue_stats(QUEUE)
        .await
        .with_context(|| format!("cannot read the stats of {QUEUE}"))?;
    let queues_on_server = client
        .queue_list()
        .await
        .context("cannot list the queues")?
        .queues
        .len();
    let http = reqwest::Client::builder()
        .connect_timeout(sluice_client::CONNECT_TIMEOUT)
        .build()
        .context("cannot build an HTTP client")?;
    let base = client.base_url().as_str().trim_end_matches('/').to_owned();
    let hooks: serde_json::Value = get_json(&http, &base, "/v1/webhooks").await?;
    let webhook_endpoints = hooks["webhooks"].as_array().map_or(0, Vec::len);
    let dlq_depth = stats.dead_lettered.unwrap_or(0);
    report.setup = Some(SetupReport {
        leased: LEASED,
        lease_ms: LONG_MS,
        dead_lettered: DEAD,
        delayed: DELAYED,
        delay_ms: LONG_MS,
        ready: stats.ready,
        delayed_now: stats.delayed,
        in_flight: stats.in_flight,
        dlq_depth,
        queues_on_server,
        webhook_endpoints,
    });
    let ready = n - (LEASED + DEAD) as u64;
    anyhow::ensure!(
        (stats.ready, stats.delayed, stats.in_flight, dlq_depth)
            == (ready, DELAYED as u64, LEASED as u64, DEAD as u64),
        "after the setup: ready {}, delayed {}, in flight {}, dead-lettered {dlq_depth}; expected {ready}, {DELAYED}, {LEASED}, {DEAD}",
        stats.ready,
        stats.delayed,
        stats.in_flight
    );
    report.memory_with_queue = memory();

    // 3. The deep cursor and the message ids of the message page.
    progress("10. paging halfway into the queue for the deep cursor");
    let deep = walk_to(&http, &base, ready / 2, load.time_limit).await?;
    let deep_cursor = deep.cursor.clone();
    report.deep_cursor = Some(deep);
    let mut ids = Vec::new();
    for path in [
        browse_path("ready", None),
        browse_path("ready", Some(&deep_cursor)),
        browse_path("delayed", None),
        browse_path("in_flight", None),
    ] {
        let page: BrowseOut = get_json(&http, &base, &path).await?;
        ids.extend(
            page.messages
                .iter()
                .take(IDS_PER_KIND)
                .map(|m| m.status.message_id),
        );
    }
    let dead: DeadLetterListOut = client
        .dlq_list(
            QUEUE,
            &DlqListQuery {
                limit: Some(IDS_PER_KIND),
                ..DlqListQuery::default()
            },
        )
        .await
        .context("cannot list the dead letters")?;
    ids.extend(dead.entries.iter().map(|entry| entry.message_id));
    anyhow::ensure!(
        ids.len() == 5 * IDS_PER_KIND,
        "found {} message ids for the message page, not {}",
        ids.len(),
        5 * IDS_PER_KIND
    );

    // 4. The page views.
    let queues = "/v1/queues".to_owned();
    let queue = format!("/v1/queues/{QUEUE}");
    let fixed = |calls: Vec<String>| move |_: usize| calls.clone();
    let mut plans: Vec<Plan> = vec![Plan::new(
        "overview",
        "#/".into(),
        vec![queues.clone()],
        fixed(vec![queues.clone()]),
    )];
    for state in ["ready", "waiting", "delayed", "in_flight"] {
        let browse = browse_path(state, None);
        plans.push(Plan::new(
            &format!("queue, {} tab", state.replace('_', " ")),
            format!("#/queue/{QUEUE}?state={state}"),
            vec![queues.clone(), queue.clone(), browse.clone()],
            fixed(vec![queues.clone(), queue.clone(), browse]),
        ));
    }
    let deep_path = browse_path("ready", Some(&deep_cursor));
    plans.push(Plan::new(
        &format!(
            "queue, ready tab, Load more at {} in",
            thousands(report.deep_cursor.as_ref().map_or(0, |deep| deep.position))
        ),
        format!("#/queue/{QUEUE}, the Load more button"),
        vec![format!(
            "/v1/queues/{QUEUE}/browse?state=ready&limit={PAGE}&cursor={{deep}}"
        )],
        fixed(vec![deep_path]),
    ));
    let dlq = format!("/v1/queues/{QUEUE}/dlq?limit={PAGE}");
    plans.push(Plan::new(
        "dead letters",
        format!("#/dlq/{QUEUE}"),
        vec![queues.clone(), dlq.clone()],
        fixed(vec![queues.clone(), dlq]),
    ));
    let message = format!("/v1/queues/{QUEUE}/messages");
    plans.push(Plan::new(
        "message",
        format!("#/message/{QUEUE}/{{id}}"),
        vec![
            queues.clone(),
            format!("{message}/{{id}}"),
            format!("{message}/{{id}}/body"),
        ],
        {
            let (queues, message) = (queues.clone(), message.clone());
            move |view: usize| {
                let id = ids[view % ids.len()];
                vec![
                    queues.clone(),
                    format!("{message}/{id}"),
                    format!("{message}/{id}/body"),
                ]
            }
        },
    )
    .with_note(format!(
        "{{id}} cycles through {IDS_PER_KIND} ready at the head, {IDS_PER_KIND} ready deep in, {IDS_PER_KIND} delayed, {IDS_PER_KIND} in flight, {IDS_PER_KIND} dead"
    )));
    plans.push(Plan::new(
        "webhooks",
        "#/webhooks".into(),
        vec![queues.clone(), "/v1/webhooks".into()],
        fixed(vec![queues.clone(), "/v1/webhooks".into()]),
    ));
    for (name, list) in [
        ("schedules", "/v1/schedules"),
        ("topics", "/v1/topics"),
        ("alerts", "/v1/alerts"),
    ] {
        plans.push(Plan::new(
            name,
            format!("#/{name}"),
            vec![queues.clone(), list.into()],
            fixed(vec![queues.clone(), list.into()]),
        ));
    }
    // One request first, so that the first view does not pay for the connection.
    get_json::<serde_json::Value>(&http, &base, "/healthz").await?;
    let cpu_before = CpuSample::take(server);
    for plan in &plans {
        progress(&format!("10. {VIEWS} views: {}", plan.name));
        let page = views(&http, &base, plan, load.time_limit).await?;
        report.pages.push(page);
    }
    report.views_cpu = Some(CpuSample::take(server).since(&cpu_before));
    report.memory_after_views = memory();
    Ok(())
}

/// `GET {path}` of one page, `limit=50`, from `cursor` if given.
fn browse_path(state: &str, cursor: Option<&str>) -> String {
    let mut path = format!("/v1/queues/{QUEUE}/browse?state={state}&limit={PAGE}");
    if let Some(cursor) = cursor {
        path.push_str("&cursor=");
        path.push_str(&query_value(cursor));
    }
    path
}

/// Percent-encodes a query value as `encodeURIComponent` does.
fn query_value(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-_.!~*'()".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// One GET whose answer must be 2xx JSON of type `T`.
async fn get_json<T: serde::de::DeserializeOwned>(
    http: &reqwest::Client,
    base: &str,
    path: &str,
) -> anyhow::Result<T> {
    let (_, bytes) = get(http, base, path).await?;
    serde_json::from_slice(&bytes).with_context(|| format!("GET {path}: not the expected JSON"))
}

/// One GET as the dashboard sends it, timed from sending to the last byte of a 2xx answer.
async fn get(
    http: &reqwest::Client,
    base: &str,
    path: &str,
) -> anyhow::Result<(Duration, Vec<u8>)> {
    let sent = Instant::now();
    let response = http
        .get(format!("{base}{path}"))
        .header("accept", "application/json")
        .timeout(REQUEST_TIMEOUT)
        .send()
        .await
        .with_context(|| format!("GET {path}"))?;
    let status = response.status();
    let bytes = response
        .bytes()
        .await
        .with_context(|| format!("GET {path}: reading the answer"))?;
    let took = sent.elapsed();
    anyhow::ensure!(
        status.is_success(),
        "GET {path}: {status}: {}",
        String::from_utf8_lossy(&bytes[..bytes.len().min(300)])
    );
    Ok((took, bytes.to_vec()))
}

/// Pages through the ready messages, 1,000 at a time, until at least `position` are behind,
/// and returns the cursor there.
async fn walk_to(
    http: &reqwest::Client,
    base: &str,
    position: u64,
    time_limit: Duration,
) -> anyhow::Result<DeepCursor> {
    let started = Instant::now();
    let deadline = started + time_limit;
    let max_pages = position.div_ceil(WALK_PAGE as u64) + 2;
    let (mut behind, mut pages, mut cursor) = (0u64, 0u64, None::<String>);
    let mut times = Vec::new();
    while behind < position {
        anyhow::ensure!(
            pages < max_pages && Instant::now() < deadline,
            "walking to {position}: {behind} messages behind after {pages} pages, {:.1} s",
            started.elapsed().as_secs_f64()
        );
        let mut path = format!("/v1/queues/{QUEUE}/browse?state=ready&limit={WALK_PAGE}");
        if let Some(cursor) = &cursor {
            path.push_str("&cursor=");
            path.push_str(&query_value(cursor));
        }
        let (took, bytes) = get(http, base, &path).await?;
        times.push(took.as_secs_f64() * 1e3);
        let page: BrowseOut = serde_json::from_slice(&bytes)
            .with_context(|| format!("GET {path}: not a browse page"))?;
        pages += 1;
        behind += page.messages.len() as u64;
        cursor = Some(page.next_cursor.with_context(|| {
            format!("walking to {position}: the queue ended after {behind} ready messages")
        })?);
    }
    times.sort_by(f64::total_cmp);
    Ok(DeepCursor {
        position: behind,
        pages_walked: pages,
        walk_s: started.elapsed().as_secs_f64(),
        walk_page_p50_ms: rank(&times, 0.5),
        cursor: cursor.unwrap_or_default(),
    })
}

/// A page: its calls.
struct Plan {
    name: String,
    route: String,
    note: Option<String>,
    /// The calls as reported.
    labels: Vec<String>,
    /// The paths of view `i`, in the order of `labels`.
    paths: Box<dyn Fn(usize) -> Vec<String>>,
}

impl Plan {
    fn new(
        name: &str,
        route: String,
        labels: Vec<String>,
        paths: impl Fn(usize) -> Vec<String> + 'static,
    ) -> Self {
        Self {
            name: name.to_owned(),
            route,
            note: None,
            labels,
            paths: Box::new(paths),
        }
    }

    fn with_note(self, note: String) -> Self {
        Self {
            note: Some(note),
            ..self
        }
    }
}

/// [`VIEWS`] views of a page, one after the other.
async fn views(
    http: &reqwest::Client,
    base: &str,
    plan: &Plan,
    time_limit: Duration,
) -> anyhow::Result<PageReport> {
    let deadline = Instant::now() + time_limit;
    let mut view_ms = Vec::with_capacity(VIEWS);
    let mut call_ms = vec![Vec::with_capacity(VIEWS); plan.labels.len()];
    let mut answer_bytes = vec![0usize; plan.labels.len()];
    for view in 0..VIEWS {
        anyhow::ensure!(
            Instant::now() < deadline,
            "{}: only {view} of {VIEWS} views within the time limit",
            plan.name
        );
        let paths = (plan.paths)(view);
        debug_assert_eq!(paths.len(), plan.labels.len());
        let mut total = 0.0;
        for (index, path) in paths.iter().enumerate() {
            let (took, bytes) = get(http, base, path)
                .await
                .with_context(|| format!("{}, view {}", plan.name, view + 1))?;
            let ms = took.as_secs_f64() * 1e3;
            total += ms;
            call_ms[index].push(ms);
            answer_bytes[index] = answer_bytes[index].max(bytes.len());
        }
        view_ms.push(total);
    }
    view_ms.sort_by(f64::total_cmp);
    let calls = plan
        .labels
        .iter()
        .zip(call_ms.iter_mut())
        .zip(answer_bytes)
        .map(|((label, times), answer_bytes_max)| {
            times.sort_by(f64::total_cmp);
            CallTimes {
                call: format!("GET {label}"),
                p50_ms: rank(times, 0.5),
                max_ms: rank(times, 1.0),
                answer_bytes_max,
            }
        })
        .collect();
    let max_ms = rank(&view_ms, 1.0);
    Ok(PageReport {
        page: plan.name.clone(),
        route: plan.route.clone(),
        note: plan.note.clone(),
        calls,
        views: view_ms.len(),
        p50_ms: rank(&view_ms, 0.5),
        p99_ms: rank(&view_ms, 0.99),
        max_ms,
        mean_ms: view_ms.iter().sum::<f64>() / view_ms.len().max(1) as f64,
        under_target: max_ms < TARGET_MS,
    })
}

/// The nearest-rank `quantile` of sorted `values` (0 when empty).
fn rank(values: &[f64], quantile: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let index = ((quantile * values.len() as f64).ceil() as usize).clamp(1, values.len()) - 1;
    values[index]
}

/// The lines of scenario 10 in the text report.
pub fn text_lines(out: &mut Vec<String>, r: &DashboardReport) {
    out.push(format!(
        "10. dashboard page views with {} messages ({}-byte bodies) in {}",
        thousands(r.messages),
        r.body_bytes,
        r.queue
    ));
    if let Some(fill) = &r.fill {
        out.push(format!(
            "   fill: {} clients, batches of {}: {} msgs in {:.2} s = {} msgs/s",
            fill.clients,
            fill.batch_size,
            thousands(fill.messages),
            fill.elapsed_s,
            thousands(fill.msgs_per_s as u64)
        ));
        failure_lines(
            out,
            fill.errors,
            fill.first_error.as_deref(),
            fill.hit_time_limit,
        );
    }
    if let Some(s) = &r.setup {
        out.push(format!(
            "   then {} leased for {} h, {} dead-lettered (nack permanent), {} more enqueued with a delay of {} h",
            s.leased,
            s.lease_ms / 3_600_000,
            s.dead_lettered,
            thousands(s.delayed as u64),
            s.delay_ms / 3_600_000
        ));
        out.push(format!(
            "   queue: ready {}, delayed {}, in flight {}, DLQ {}; {} queues and {} webhook endpoints on the server",
            thousands(s.ready),
            thousands(s.delayed_now),
            thousands(s.in_flight),
            thousands(s.dlq_depth),
            s.queues_on_server,
            s.webhook_endpoints
        ));
    }
    let rss = |memory: &Option<Memory>| memory.map_or_else(|| "?".to_owned(), |m| mib(m.rss_kib));
    if r.memory_with_queue.is_some() {
        out.push(format!(
            "   server RSS: {} before the fill, {} with the queue set up, {} after the page views (peak RSS {} so far, earlier scenarios included)",
            rss(&r.memory_before_fill),
            rss(&r.memory_with_queue),
            rss(&r.memory_after_views),
            r.memory_after_views
                .or(r.memory_with_queue)
                .map_or_else(|| "?".to_owned(), |m| mib(m.peak_rss_kib))
        ));
    }
    if let Some(deep) = &r.deep_cursor {
        out.push(format!(
            "   deep cursor: {} ready messages in, reached by {} browse pages of {} in {:.2} s (p50 {:.2} ms a page)",
            thousands(deep.position),
            deep.pages_walked,
            thousands(WALK_PAGE as u64),
            deep.walk_s,
            deep.walk_page_p50_ms
        ));
    }
    if !r.pages.is_empty() {
        out.push(format!(
            "   {VIEWS} views of each page, one after another; target: under {TARGET_MS:.0} ms of server time per page view (ok/OVER: by the max)"
        ));
        out.push(
            "   a view = the API calls app.js makes when the page loads (the sampler's GET /v1/queues included), made one after"
                .into(),
        );
        out.push(
            "   another on one keep-alive loopback connection, its time = the sum of the calls' client-observed times (send to last"
                .into(),
        );
        out.push(
            "   byte), i.e. server time plus loopback; the browser overlaps some of the calls, so it waits less than that"
                .into(),
        );
        let width = r.pages.iter().map(|p| p.page.len()).max().unwrap_or(0);
        for page in &r.pages {
            out.push(format!(
                "   {:width$}  p50 {:>6.2} ms, p99 {:>6.2} ms, max {:>6.2} ms  {}  {}",
                page.page,
                page.p50_ms,
                page.p99_ms,
                page.max_ms,
                if page.under_target { "ok  " } else { "OVER" },
                page.route
            ));
            if let Some(note) = &page.note {
                out.push(format!("     ({note})"));
            }
            for c in &page.calls {
                out.push(format!(
                    "     {} (p50 {:.2} ms, max {:.2} ms, answer {})",
                    c.call,
                    c.p50_ms,
                    c.max_ms,
                    answer_size(c.answer_bytes_max)
                ));
            }
        }
        if let Some(cpu) = &r.views_cpu {
            cpu_use_line(out, cpu);
        }
        let worst = r.pages.iter().map(|p| p.max_ms).fold(0.0, f64::max);
        out.push(format!(
            "   slowest page view of all: {worst:.2} ms: {}",
            if r.pages.iter().all(|p| p.under_target) {
                "every page view under the target"
            } else {
                "SOME PAGE VIEWS OVER THE TARGET"
            }
        ));
    }
    if let Some(failure) = &r.failure {
        out.push(format!("   FAILED: {failure}"));
    }
}

fn answer_size(bytes: usize) -> String {
    if bytes >= 1024 {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    } else {
        format!("{bytes} B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_are_nearest_rank() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(rank(&values, 0.5), 50.0);
        assert_eq!(rank(&values, 0.99), 99.0);
        assert_eq!(rank(&values, 1.0), 100.0);
        assert_eq!(rank(&[], 0.5), 0.0);
        assert_eq!(rank(&[3.0], 0.99), 3.0);
    }

    #[test]
    fn cursors_are_encoded_like_encode_uri_component() {
        assert_eq!(query_value("-5.42"), "-5.42");
        assert_eq!(query_value("a b/c"), "a%20b%2Fc");
    }
}
