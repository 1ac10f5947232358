//! `sluice bench`: starts a server of its own (or uses `--url`), runs fixed scenarios against it
//! over HTTP and prints what it measured, as text or as JSON with `--json`.
//!
//! A crate of its own so the CLI stays thin: the `sluice` binary only wires [`BenchArgs`] in as
//! its `bench` subcommand and calls [`run`] (which starts the server as that binary's `serve`).
//!
//! This file owns the flags, the order of the scenarios and the report. The load itself is in
//! [`load`], the child process in [`server`], the dead-letter scenario in [`dlq`], the webhook
//! scenario in [`webhooks`], the dashboard scenario in [`dashboard`], the SQS scenario in
//! [`sqs`]. Like every client command it reaches the server only through `sluice_client` (the
//! webhook scenario also posts to `/hooks/{name}` as a sender would, and serves a push
//! destination of its own; the dashboard scenario makes the dashboard's GETs, which the client
//! has no methods for; the SQS scenario speaks SQS's JSON protocol with a client of its own); it
//! starts the server as a child process (the current executable with `serve`), never
//! in-process, so the figures include real HTTP over loopback.
//!
//! Every message body is a JSON string whose JSON text is `--body-bytes` long (1024 by default),
//! starting with the time it was sent, so consumers can measure enqueue-to-receive latency.

mod dashboard;
mod depth;
mod dlq;
mod load;
mod nodes;
mod peers;
mod postgres;
mod server;
mod sqs;
mod webhooks;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use serde::Serialize;
use sluice_client::Client;
use sluice_client::wire::QueueSpec;

use self::load::{
    Bodies, Consumers, EndToEndLoad, EndToEndReport, EnqueueLoad, EnqueueReport, LatencyReport,
    LatencySummary, PacedLoad,
};
use self::server::{CpuSample, CpuUse, Memory, ServerProcess, StopOutcome};

/// Flags of `sluice bench`. The defaults take a few minutes on two cores.
#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// Bench the server at this URL instead of starting one (then the restart scenario and the
    /// memory figure are skipped). The global `--url` and SLUICE_URL count too; unset, the bench
    /// starts its own server.
    // Same id as the global `--url`, so clap hands us its value; the empty default means "unset".
    #[arg(
        long,
        value_name = "URL",
        default_value = "",
        hide_default_value = true
    )]
    url: String,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Durability of the server the bench starts.
    #[arg(long, value_parser = ["fsync", "os"], default_value = "fsync")]
    durability: String,
    /// Scenarios to run, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "single,batch,e2e,latency,sequential,restart"
    )]
    scenarios: Vec<Scenario>,
    /// Size of each message body as JSON text, in bytes.
    #[arg(long, default_value_t = 1024)]
    body_bytes: usize,
    /// Longest any one scenario (or the fill of the restart scenario, or one step of the dlq
    /// scenario) may run.
    #[arg(long, default_value = "120s", value_parser = sluice_client::duration::parse_duration)]
    time_limit: Duration,
    /// Where the server's data directory goes (a fresh temporary directory inside it).
    #[arg(long, value_name = "DIR")]
    work_dir: Option<PathBuf>,
    /// Keep the data directories and server logs instead of deleting them at the end.
    #[arg(long)]
    keep_data: bool,
    /// Start the bench's server on the PostgreSQL store at this URL, in a fresh schema
    /// `sluice_bench_run_*` dropped at the end (kept with --keep-data), instead of on SQLite;
    /// each scenario then also reports the database's WAL and writing transactions. Also the
    /// database of the pg-baseline scenario (default: the test database on 127.0.0.1:5432).
    #[arg(long, value_name = "URL")]
    store_url: Option<String>,
    /// Start this many servers on the one schema of `--store-url` and spread scenarios 1-3
    /// over them round-robin, request by request (the others run on the first node).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=16))]
    nodes: u16,
    /// Scenario 13: messages produced, then consumed.
    #[arg(long, default_value_t = 100_000, help_heading = "Scenario sizes")]
    peers_messages: u64,
    /// Scenario 13: with N > 0, a `per_key` queue and message `seq` under key `k<seq mod N>`
    /// (claims take one message of a key at a time); 0, an unordered queue (the peers' workload).
    #[arg(long, default_value_t = 0, help_heading = "Scenario sizes")]
    peers_keys: u64,
    /// Scenario 13: producers, each keeping --peers-window single-message sends in flight.
    #[arg(long, default_value_t = 4, help_heading = "Scenario sizes")]
    peers_producers: usize,
    /// Scenario 13: sends each producer keeps in flight.
    #[arg(long, default_value_t = 32, help_heading = "Scenario sizes")]
    peers_window: usize,
    /// Scenario 13: consumers.
    #[arg(long, default_value_t = 4, help_heading = "Scenario sizes")]
    peers_consumers: usize,
    /// Scenario 13: messages per receive (gRPC: credit per pull stream), acked together.
    #[arg(long, default_value_t = 32, help_heading = "Scenario sizes")]
    peers_batch: u32,
    /// Scenario 13: messages per second of the latency phase.
    #[arg(long, default_value_t = 2_000, help_heading = "Scenario sizes")]
    peers_rate: u64,
    /// Scenario 13: the protocols to run it over, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "http,grpc",
        help_heading = "Scenario sizes"
    )]
    peers_protocols: Vec<peers::Protocol>,
    /// Scenario 14: the depths to measure at, comma-separated, ascending.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "10000,100000,1000000",
        help_heading = "Scenario sizes"
    )]
    sweep_depths: Vec<u64>,
    /// Scenario 14: body size of the queued messages, as JSON text.
    #[arg(long, default_value_t = 16, help_heading = "Scenario sizes")]
    sweep_body_bytes: usize,
    /// Scenario 14: single-message enqueues, and receive + ack rounds, timed at each depth.
    #[arg(long, default_value_t = 1_000, help_heading = "Scenario sizes")]
    sweep_probes: u64,
    /// Scenario 13: how long the latency phase is measured.
    #[arg(long, default_value = "10s", value_parser = sluice_client::duration::parse_duration, help_heading = "Scenario sizes")]
    peers_latency: Duration,

    /// Scenarios 1 and 11: messages sent one per request.
    #[arg(long, default_value_t = 50_000, help_heading = "Scenario sizes")]
    single_messages: u64,
    /// Scenarios 1 and 11: concurrent clients.
    #[arg(long, default_value_t = 32, help_heading = "Scenario sizes")]
    single_clients: usize,
    /// Scenarios 2 and 11: messages sent in batches.
    #[arg(long, default_value_t = 200_000, help_heading = "Scenario sizes")]
    batch_messages: u64,
    /// Scenarios 2 and 11: concurrent clients.
    #[arg(long, default_value_t = 32, help_heading = "Scenario sizes")]
    batch_clients: usize,
    /// Scenarios 2 and 11: messages per request (at most 10 in scenario 11).
    #[arg(long, default_value_t = 100, help_heading = "Scenario sizes")]
    batch_size: usize,
    /// Scenarios 3 and 11: messages sent and consumed.
    #[arg(long, default_value_t = 200_000, help_heading = "Scenario sizes")]
    e2e_messages: u64,
    /// Scenarios 3 and 11: producer tasks.
    #[arg(long, default_value_t = 4, help_heading = "Scenario sizes")]
    e2e_producers: usize,
    /// Scenarios 3 and 11: requests each producer keeps in flight.
    #[arg(long, default_value_t = 4, help_heading = "Scenario sizes")]
    e2e_inflight: usize,
    /// Scenarios 3 and 11: messages per enqueue request (at most 10 in scenario 11).
    #[arg(long, default_value_t = 10, help_heading = "Scenario sizes")]
    e2e_batch: usize,
    /// Scenarios 3, 4 and 11: consumer tasks.
    #[arg(long, default_value_t = 4, help_heading = "Scenario sizes")]
    consumers: usize,
    /// Scenarios 3, 4 and 11: acks each consumer keeps in flight while receiving the next batch.
    #[arg(long, default_value_t = 4, help_heading = "Scenario sizes")]
    acks_in_flight: usize,
    /// Scenarios 3, 4 and 11: `max` of each receive (at most 10 in scenario 11).
    #[arg(long, default_value_t = 10, help_heading = "Scenario sizes")]
    receive_max: i64,
    /// Scenarios 3, 4 and 11: how long each receive may wait (long polling; whole seconds, at
    /// most 20, in scenario 11).
    #[arg(long, default_value = "1s", value_parser = sluice_client::duration::parse_duration, help_heading = "Scenario sizes")]
    wait: Duration,
    /// Scenario 4: messages per second, one per request.
    #[arg(long, default_value_t = 2_000, help_heading = "Scenario sizes")]
    latency_rate: u64,
    /// Scenario 4: how long it is measured.
    #[arg(long, default_value = "10s", value_parser = sluice_client::duration::parse_duration, help_heading = "Scenario sizes")]
    latency_duration: Duration,
    /// Scenario 4: how long it runs at the same rate, unmeasured, before.
    #[arg(long, default_value = "1s", value_parser = sluice_client::duration::parse_duration, help_heading = "Scenario sizes")]
    latency_warmup: Duration,
    /// Scenario 5: sequential single-message enqueues.
    #[arg(long, default_value_t = 2_000, help_heading = "Scenario sizes")]
    sequential_requests: u64,
    /// Scenario 7: messages queued before the restart.
    #[arg(long, default_value_t = 1_000_000, help_heading = "Scenario sizes")]
    restart_messages: u64,
    /// Scenario 7: concurrent clients filling the queue.
    #[arg(long, default_value_t = 4, help_heading = "Scenario sizes")]
    restart_clients: usize,
    /// Scenario 7: messages per fill request.
    #[arg(long, default_value_t = 1_000, help_heading = "Scenario sizes")]
    restart_batch: usize,
    /// Scenario 7: body size of the queued messages, in bytes of JSON text.
    #[arg(long, default_value_t = 1024, help_heading = "Scenario sizes")]
    restart_body_bytes: usize,
    /// Scenario 8: messages that expire into the dead-letter queue, then are listed, replayed
    /// and purged (bodies of `--body-bytes`).
    #[arg(long, default_value_t = 100_000, help_heading = "Scenario sizes")]
    dlq_messages: u64,
    /// Scenario 9: signed webhook requests (bodies of about `--body-bytes`), then pushed.
    #[arg(long, default_value_t = 50_000, help_heading = "Scenario sizes")]
    webhook_requests: u64,
    /// Scenario 9: concurrent webhook senders.
    #[arg(long, default_value_t = 32, help_heading = "Scenario sizes")]
    webhook_clients: usize,
    /// Scenario 9: a jq transform for the endpoint and the push destination (both see the
    /// body as `.body`), to measure what an expression costs; none by default.
    #[arg(long, value_name = "JQ", help_heading = "Scenario sizes")]
    webhook_transform: Option<String>,
    /// Scenario 10: messages queued while the dashboard's pages are viewed (bodies of
    /// `--body-bytes`).
    #[arg(long, default_value_t = 1_000_000, help_heading = "Scenario sizes")]
    dashboard_messages: u64,
    /// Scenario 12: rows produced and then consumed (bodies of `--body-bytes`).
    #[arg(long, default_value_t = 50_000, help_heading = "Scenario sizes")]
    baseline_messages: u64,
    /// Scenario 12: producer connections, then as many consumer connections.
    #[arg(long, default_value_t = 32, help_heading = "Scenario sizes")]
    baseline_connections: usize,
}

/// The scenarios, in the order they run, except that 11, 8, 9 and 10 run before 7 (on the server
/// of 1-5, which 7 does not use). The server's memory (scenario 6) is read whenever the bench
/// started the server, before scenario 11.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Scenario {
    /// 1: enqueue with single-message requests.
    Single,
    /// 2: enqueue in batches.
    Batch,
    /// 3: producers and consumers at once, every message checked.
    E2e,
    /// 4: enqueue-to-receive latency at a steady rate.
    Latency,
    /// 5: one durable enqueue at a time.
    Sequential,
    /// 7: restart time with many messages queued.
    Restart,
    /// 8: dead letters: expiry, listing, replay, purge (not run by default). Runs on the server
    /// of scenarios 1-5 after its memory is read, in a queue named `bench-dlq` that it deletes
    /// (with `bench-dlq.dlq`) before and after.
    Dlq,
    /// 9: webhooks: signed ingress and push delivery (not run by default). Needs a server of the
    /// bench's own (it hands the server the signing secret); runs on the server of scenarios 1-5
    /// after scenario 8, in a queue named `bench-hooks` with the endpoint `bench`, both deleted
    /// before and after.
    Webhooks,
    /// 10: dashboard page views with many messages queued (not run by default). Runs on the
    /// server of scenarios 1-5 after scenario 9, in a queue named `bench-dash` that it deletes
    /// (with `bench-dash.dlq`) before and after.
    Dashboard,
    /// 11: the loads of scenarios 1-3 through the SQS API (not run by default; add it to
    /// `single,batch,e2e` to see both APIs in one run): SendMessage, SendMessageBatch (at most
    /// 10 per request), and SendMessageBatch with ReceiveMessage + DeleteMessageBatch at once,
    /// sized by the flags of scenarios 1-3 (batches, receives and waits cut to SQS's limits).
    /// Runs on the server of scenarios 1-5 after its memory is read, before scenario 8, in
    /// standard queues `bench-sqs-single`, `bench-sqs-batch` and `bench-sqs-e2e` made with
    /// CreateQueue and deleted before and after. Needs access control off (unsigned requests).
    Sqs,
    /// 12: the yardstick of the PostgreSQL store, no sluice involved (not run by default): a
    /// plain table in a fresh schema of `--store-url`'s database, one `INSERT` per transaction
    /// from each producer connection, then one `DELETE … FOR UPDATE SKIP LOCKED … RETURNING` per
    /// transaction from each consumer connection. Runs first, before the server starts.
    PgBaseline,
    /// 13: the workload of shared/bench-peers (the load generator run against Redis, NATS,
    /// RabbitMQ and PostgreSQL), over HTTP and then over gRPC streams, with the server's CPU
    /// per message (not run by default). Runs on the server of scenarios 1-5 after its memory
    /// is read, each protocol in a fresh queue `bench-peers-*` deleted after.
    Peers,
    /// 14: a deep backlog (not run by default): one queue filled to each depth of
    /// --sweep-depths, with the server's memory per queued message, enqueue and receive + ack
    /// rates and the restart time at each depth. Always on servers of its own (on a data
    /// directory of its own), whatever --url says.
    DepthSweep,
}

/// Runs the selected scenarios and prints the report on stdout (progress goes to stderr).
pub async fn run(args: BenchArgs) -> anyhow::Result<()> {
    let time_limit = args.time_limit;
    let bodies = Bodies::new(args.body_bytes);
    let work_parent = args.work_dir.clone().unwrap_or_else(std::env::temp_dir);
    let work = tempfile::Builder::new()
        .prefix("sluice-bench-")
        .tempdir_in(&work_parent)
        .with_context(|| format!("cannot create a directory in {}", work_parent.display()))?;
    let exe = std::env::current_exe().context("cannot find the sluice executable")?;
    let spawned = args.url.is_empty();

    let mut report = Report {
        sluice_version: env!("CARGO_PKG_VERSION"),
        cores: std::thread::available_parallelism().map_or(0, usize::from),
        server: if spawned {
            "started by the bench"
        } else {
            "external"
        },
        store: match (&args.store_url, spawned) {
            (_, false) => "the server's own",
            (Some(_), true) => "postgres",
            (None, true) => "sqlite",
        },
        url: String::new(),
        durability: spawned.then(|| args.durability.clone()),
        body: format!("a JSON string of {} bytes as JSON text", args.body_bytes),
        body_bytes: args.body_bytes,
        server_ready_s: None,
        single: None,
        batch: None,
        end_to_end: None,
        latency: None,
        sequential: None,
        server_memory: None,
        server_stop: None,
        restart: None,
        dlq: None,
        webhooks: None,
        dashboard: None,
        sqs: None,
        pg_baseline: None,
        peers: Vec::new(),
        depth_sweep: None,
        nodes: 1,
        notes: Vec::new(),
    };
    let selected = |scenario| args.scenarios.contains(&scenario);
    if selected(Scenario::PgBaseline) {
        progress("12. PostgreSQL baseline: a plain SKIP LOCKED table");
        let url = args.store_url.as_deref().unwrap_or(postgres::DEFAULT_URL);
        let load = postgres::BaselineLoad {
            messages: args.baseline_messages,
            producers: args.baseline_connections,
            consumers: args.baseline_connections,
            body_bytes: args.body_bytes,
            time_limit,
        };
        report.pg_baseline = Some(postgres::baseline(url, load).await?);
    }
    let store_schema = match (&args.store_url, spawned) {
        (Some(url), true) => Some(postgres::BenchSchema::new(url, "run")),
        _ => None,
    };
    // The database whose WAL and commits each scenario reports: the store's, when the bench's
    // server is on PostgreSQL.
    let store_url = store_schema
        .as_ref()
        .map(|_| args.store_url.as_deref().unwrap_or(postgres::DEFAULT_URL));
    let store_config = match &store_schema {
        Some(schema) => Some(schema.write_config(work.path())?),
        None => None,
    };
    anyhow::ensure!(
        args.nodes == 1 || (spawned && args.store_url.is_some()),
        "--nodes needs --store-url and a server of the bench's own: several nodes share a PostgreSQL store"
    );
    let webhook_secret = webhooks::new_secret();
    let server = if spawned {
        progress("starting the server");
        let server = ServerProcess::start(
            &exe,
            &work.path().join("data"),
            &args.durability,
            store_config.as_deref(),
            &work.path().join("server.log"),
            Some(&webhook_secret),
        )
        .await?;
        report.server_ready_s = Some(server.ready_after.as_secs_f64());
        Some(server)
    } else {
        None
    };
    report.url = server
        .as_ref()
        .map_or_else(|| args.url.clone(), |server| server.url.clone());
    let client = Client::new(&report.url)?;
    client
        .healthz()
        .await
        .with_context(|| format!("the server at {} does not answer", report.url))?;
    let mut other_nodes = Vec::new();
    for node in 2..=args.nodes {
        progress(&format!("starting node {node}"));
        other_nodes.push(
            ServerProcess::start(
                &exe,
                &work.path().join(format!("data-node{node}")),
                &args.durability,
                store_config.as_deref(),
                &work.path().join(format!("server-node{node}.log")),
                None,
            )
            .await?,
        );
    }
    let nodes = nodes::Nodes::new(
        std::iter::once(Ok(client.clone()))
            .chain(other_nodes.iter().map(|node| Client::new(&node.url)))
            .collect::<Result<_, _>>()?,
    );
    report.nodes = args.nodes;
    if args.nodes > 1 {
        report.notes.push(format!(
            "scenarios 1-3 ran over {} nodes round-robin; \"server\" CPU is the first node's, the others count under \"anything else\"",
            args.nodes
        ));
    }

    if selected(Scenario::Single) {
        progress("1. enqueue, single-message requests");
        let load = EnqueueLoad {
            messages: args.single_messages,
            clients: args.single_clients,
            batch_size: 1,
            time_limit,
        };
        report.single = Some(
            scenario(
                &client,
                server.as_ref(),
                store_url,
                "single",
                async |queue| load::enqueue_load(&nodes, queue, &bodies, load).await,
            )
            .await?,
        );
    }
    if selected(Scenario::Batch) {
        progress("2. enqueue, batches");
        let load = EnqueueLoad {
            messages: args.batch_messages,
            clients: args.batch_clients,
            batch_size: args.batch_size,
            time_limit,
        };
        report.batch = Some(
            scenario(
                &client,
                server.as_ref(),
                store_url,
                "batch",
                async |queue| load::enqueue_load(&nodes, queue, &bodies, load).await,
            )
            .await?,
        );
    }
    let consumers = Consumers {
        count: args.consumers,
        acks_in_flight: args.acks_in_flight,
        receive_max: args.receive_max,
        wait_ms: sluice_client::duration::millis(args.wait),
    };
    if selected(Scenario::E2e) {
        progress("3. end to end");
        let load = EndToEndLoad {
            messages: args.e2e_messages,
            producers: args.e2e_producers,
            inflight: args.e2e_inflight,
            batch_size: args.e2e_batch,
            consumers,
            time_limit,
        };
        report.end_to_end = Some(
            scenario(&client, server.as_ref(), store_url, "e2e", async |queue| {
                load::end_to_end(&nodes, queue, &bodies, load).await
            })
            .await?,
        );
    }
    if selected(Scenario::Latency) {
        progress("4. latency at a steady rate");
        let load = PacedLoad {
            rate: args.latency_rate,
            duration: args.latency_duration,
            warmup: args.latency_warmup,
            consumers,
            time_limit,
        };
        report.latency = Some(
            scenario(
                &client,
                server.as_ref(),
                store_url,
                "latency",
                async |queue| load::paced_latency(&client, queue, &bodies, load).await,
            )
            .await?,
        );
    }
    if selected(Scenario::Sequential) {
        progress("5. one durable enqueue at a time");
        let load = EnqueueLoad {
            messages: args.sequential_requests,
            clients: 1,
            batch_size: 1,
            time_limit,
        };
        report.sequential = Some(
            scenario(
                &client,
                server.as_ref(),
                store_url,
                "sequential",
                async |queue| load::enqueue_load(&client, queue, &bodies, load).await,
            )
            .await?,
        );
    }
    if let Some(server) = &server {
        report.server_memory = server.memory();
    }
    if selected(Scenario::Peers) {
        let load = peers::PeersLoad {
            messages: args.peers_messages,
            keys: args.peers_keys,
            producers: args.peers_producers,
            window: args.peers_window,
            consumers: args.peers_consumers,
            batch: args.peers_batch,
            rate: args.peers_rate,
            latency: args.peers_latency,
            time_limit,
        };
        for &protocol in &args.peers_protocols {
            progress(&format!("13. the peers' workload over {protocol:?}"));
            report
                .peers
                .push(peers::run(&report.url, server.as_ref(), &bodies, protocol, load).await);
        }
    }
    if selected(Scenario::Sqs) {
        progress("11. the SQS API");
        let batch_max = sqs::BATCH_MAX;
        let loads = sqs::SqsLoads {
            single: EnqueueLoad {
                messages: args.single_messages,
                clients: args.single_clients,
                batch_size: 1,
                time_limit,
            },
            batch: EnqueueLoad {
                messages: args.batch_messages,
                clients: args.batch_clients,
                batch_size: args.batch_size.clamp(1, batch_max),
                time_limit,
            },
            end_to_end: EndToEndLoad {
                messages: args.e2e_messages,
                producers: args.e2e_producers,
                inflight: args.e2e_inflight,
                batch_size: args.e2e_batch.clamp(1, batch_max),
                consumers: Consumers {
                    receive_max: consumers.receive_max.clamp(1, batch_max as i64),
                    wait_ms: sqs::wait_seconds(consumers.wait_ms) * 1000,
                    ..consumers
                },
                time_limit,
            },
        };
        report.sqs = Some(sqs::run(&report.url, server.as_ref(), &bodies, loads).await);
    }
    if selected(Scenario::Dlq) {
        progress("8. dead letters: expiry, listing, replay, purge");
        let load = dlq::DlqLoad {
            messages: args.dlq_messages,
            time_limit,
        };
        report.dlq = Some(dlq::run(&client, server.as_ref(), &bodies, args.body_bytes, load).await);
    }
    if selected(Scenario::Webhooks) {
        match &server {
            Some(server) => {
                progress("9. webhooks: signed ingress and push delivery");
                let load = webhooks::WebhooksLoad {
                    requests: args.webhook_requests,
                    clients: args.webhook_clients,
                    transform: args.webhook_transform.clone(),
                    time_limit,
                };
                report.webhooks = Some(
                    webhooks::run(&client, server, &webhook_secret, args.body_bytes, load).await,
                );
            }
            None => report.notes.push(
                "the webhooks scenario needs a server of the bench's own (it hands the server the signing secret); skipped"
                    .into(),
            ),
        }
    }
    if selected(Scenario::Dashboard) {
        progress("10. dashboard page views with many messages queued");
        let load = dashboard::DashboardLoad {
            messages: args.dashboard_messages,
            time_limit,
        };
        report.dashboard =
            Some(dashboard::run(&client, server.as_ref(), &bodies, args.body_bytes, load).await);
    }
    for node in other_nodes {
        node.stop().await?;
    }
    if let Some(server) = server {
        progress("stopping the server");
        report.server_stop = Some(server.stop().await?);
    } else {
        report
            .notes
            .push("the server's memory is not measured for an external server".into());
    }
    if selected(Scenario::DepthSweep) {
        let mut depths = args.sweep_depths.clone();
        depths.sort_unstable();
        depths.dedup();
        let load = depth::DepthLoad {
            depths,
            body_bytes: args.sweep_body_bytes,
            probes: args.sweep_probes,
            time_limit,
        };
        report.depth_sweep = Some(depth::run(&exe, work.path(), &args.durability, load).await);
    }
    if selected(Scenario::Restart) {
        if spawned {
            progress("7. restart with a full queue");
            report.restart = Some(
                restart(
                    &args,
                    &exe,
                    work.path(),
                    store_config.as_deref(),
                    time_limit,
                )
                .await?,
            );
        } else {
            report
                .notes
                .push("the restart scenario needs a server of the bench's own; skipped".into());
        }
    }

    if let Some(schema) = store_schema {
        if args.keep_data {
            report
                .notes
                .push(format!("PostgreSQL schema {} kept", schema.name));
        } else if let Err(error) = schema.drop().await {
            report.notes.push(format!("{error:#}"));
        }
    }
    if args.keep_data {
        let kept = work.keep();
        report.notes.push(format!(
            "data directories and server logs kept in {}",
            kept.display()
        ));
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.text());
    }
    if let Some(failure) = report.dlq.as_ref().and_then(|dlq| dlq.failure.as_ref()) {
        anyhow::bail!("the dlq scenario failed: {failure}");
    }
    if let Some(failure) = report
        .webhooks
        .as_ref()
        .and_then(|webhooks| webhooks.failure.as_ref())
    {
        anyhow::bail!("the webhooks scenario failed: {failure}");
    }
    if let Some(failure) = report
        .dashboard
        .as_ref()
        .and_then(|dashboard| dashboard.failure.as_ref())
    {
        anyhow::bail!("the dashboard scenario failed: {failure}");
    }
    if let Some(failure) = report.sqs.as_ref().and_then(|sqs| sqs.failure.as_ref()) {
        anyhow::bail!("the sqs scenario failed: {failure}");
    }
    if let Some(failure) = report
        .depth_sweep
        .as_ref()
        .and_then(|sweep| sweep.failure.as_ref())
    {
        anyhow::bail!("the depth-sweep scenario failed: {failure}");
    }
    if let Some(failure) = report.peers.iter().find_map(|peers| peers.failure.as_ref()) {
        anyhow::bail!("the peers scenario failed: {failure}");
    }
    Ok(())
}

/// Everything measured, as printed with `--json`.
#[derive(Debug, Serialize)]
struct Report {
    sluice_version: &'static str,
    /// CPUs this process may use.
    cores: usize,
    /// `started by the bench` or `external`.
    server: &'static str,
    /// `sqlite` or `postgres` for a server of the bench's own.
    store: &'static str,
    /// Servers the load of scenarios 1-3 was spread over.
    nodes: u16,
    url: String,
    durability: Option<String>,
    body: String,
    body_bytes: usize,
    /// From spawning the server (empty data dir) to its ready line.
    server_ready_s: Option<f64>,
    single: Option<Measured<EnqueueReport>>,
    batch: Option<Measured<EnqueueReport>>,
    end_to_end: Option<Measured<EndToEndReport>>,
    latency: Option<Measured<LatencyReport>>,
    sequential: Option<Measured<EnqueueReport>>,
    /// Of the server that ran scenarios 1-5, read just before it was stopped.
    server_memory: Option<Memory>,
    server_stop: Option<StopOutcome>,
    restart: Option<RestartReport>,
    dlq: Option<dlq::DlqReport>,
    webhooks: Option<webhooks::WebhooksReport>,
    dashboard: Option<dashboard::DashboardReport>,
    sqs: Option<sqs::SqsReport>,
    pg_baseline: Option<postgres::BaselineReport>,
    /// Scenario 13, once per protocol.
    peers: Vec<peers::PeersReport>,
    /// Scenario 14.
    depth_sweep: Option<depth::DepthReport>,
    notes: Vec<String>,
}

/// A scenario's figures plus the CPU used meanwhile.
#[derive(Debug, Serialize)]
struct Measured<T> {
    #[serde(flatten)]
    result: T,
    queue: String,
    wall_s: f64,
    cpu: CpuUse,
    /// WAL and writing transactions of the PostgreSQL store's database over the scenario.
    #[serde(skip_serializing_if = "Option::is_none")]
    database: Option<postgres::DatabaseWork>,
}

/// Scenario 7.
#[derive(Debug, Serialize)]
struct RestartReport {
    body_bytes: usize,
    fill: EnqueueReport,
    /// Of the server that took the fill, read before SIGTERM.
    fill_server_memory: Option<Memory>,
    /// SIGTERM to exit, for the server holding the fill.
    stop: StopOutcome,
    /// After that stop.
    data_dir_bytes: u64,
    /// The files in it.
    data_dir_files: BTreeMap<String, u64>,
    /// From spawning the second server on the same data dir to its ready line.
    ready_s: f64,
    /// `ready` in the queue's stats after the restart.
    ready_after_restart: Option<u64>,
    /// Of the restarted server, once ready.
    memory_after_restart: Option<Memory>,
    second_stop: StopOutcome,
}

/// Runs one load against a fresh queue, measures CPU meanwhile, then deletes the queue (and its
/// dead-letter queue) so the next scenario starts from the same state.
async fn scenario<T>(
    client: &Client,
    server: Option<&ServerProcess>,
    store_url: Option<&str>,
    name: &str,
    load: impl AsyncFnOnce(&str) -> T,
) -> anyhow::Result<Measured<T>> {
    let queue = format!("bench-{name}-{:08x}", rand::random::<u32>());
    client
        .queue_put(&queue, &QueueSpec::default())
        .await
        .with_context(|| format!("cannot create queue {queue}"))?;
    let database_before = match store_url {
        Some(url) => postgres::DatabaseCounters::read(url).await,
        None => None,
    };
    let cpu_before = CpuSample::take(server);
    let started = std::time::Instant::now();
    let result = load(&queue).await;
    let wall = started.elapsed();
    let cpu = CpuSample::take(server).since(&cpu_before);
    let database = match (store_url, database_before) {
        (Some(url), Some(before)) => postgres::DatabaseCounters::read(url)
            .await
            .map(|after| after.since(&before)),
        _ => None,
    };
    // Its dead-letter queue goes with it.
    if let Err(error) = client.queue_delete(&queue).await {
        progress(&format!("cannot delete queue {queue}: {error}"));
    }
    Ok(Measured {
        result,
        queue,
        wall_s: wall.as_secs_f64(),
        cpu,
        database,
    })
}

/// Scenario 7: fill a queue on a fresh server, stop it with SIGTERM, start it again on the same
/// data dir and time that start.
async fn restart(
    args: &BenchArgs,
    exe: &std::path::Path,
    work: &std::path::Path,
    store_config: Option<&std::path::Path>,
    time_limit: Duration,
) -> anyhow::Result<RestartReport> {
    let data = work.join("restart-data");
    let log = work.join("restart-server.log");
    let first =
        ServerProcess::start(exe, &data, &args.durability, store_config, &log, None).await?;
    let client = Client::new(&first.url)?;
    let queue = "bench-restart";
    client
        .queue_put(queue, &QueueSpec::default())
        .await
        .context("cannot create the restart queue")?;
    let load = EnqueueLoad {
        messages: args.restart_messages,
        clients: args.restart_clients,
        batch_size: args.restart_batch,
        time_limit,
    };
    let fill =
        load::enqueue_load(&client, queue, &Bodies::new(args.restart_body_bytes), load).await;
    let fill_server_memory = first.memory();
    progress("7. stopping the filled server");
    let stop = first.stop().await?;
    let data_dir_files = server::file_sizes(&data)?;
    let data_dir_bytes = data_dir_files.values().sum();

    progress("7. starting it again");
    let second =
        ServerProcess::start(exe, &data, &args.durability, store_config, &log, None).await?;
    let ready_s = second.ready_after.as_secs_f64();
    let memory_after_restart = second.memory();
    let stats = Client::new(&second.url)?.queue_stats(queue).await;
    let second_stop = second.stop().await?;
    Ok(RestartReport {
        body_bytes: args.restart_body_bytes,
        fill,
        fill_server_memory,
        stop,
        data_dir_bytes,
        data_dir_files,
        ready_s,
        ready_after_restart: stats.ok().map(|stats| stats.ready),
        memory_after_restart,
        second_stop,
    })
}

fn progress(what: &str) {
    eprintln!("bench: {what}");
}

impl Report {
    /// The human-readable report.
    fn text(&self) -> String {
        let mut out = Vec::new();
        let server = match (&self.durability, self.server_ready_s) {
            (Some(durability), Some(ready_s)) => {
                format!(
                    "{} started by the bench ({} store, durability {durability}, ready in {ready_s:.2} s)",
                    if self.nodes > 1 {
                        format!("{} servers", self.nodes)
                    } else {
                        "a server".to_owned()
                    },
                    self.store
                )
            }
            _ => format!("the server at {}", self.url),
        };
        out.push(format!(
            "sluice bench {}: {server}, {} cores",
            self.sluice_version, self.cores
        ));
        out.push(format!("message bodies: {}", self.body));
        if let Some(baseline) = &self.pg_baseline {
            out.push(String::new());
            out.push(format!(
                "12. PostgreSQL baseline: a plain SKIP LOCKED table, one row per transaction, {} producer then {} consumer connections",
                baseline.producers, baseline.consumers
            ));
            out.push(format!(
                "   produce {} rows in {:.2} s: {} msgs/s",
                thousands(baseline.produced),
                baseline.produce_wall_s,
                thousands(baseline.produce_rate as u64)
            ));
            cpu_use_line(&mut out, &baseline.produce_cpu);
            out.push(format!(
                "   consume {} rows in {:.2} s: {} msgs/s",
                thousands(baseline.consumed),
                baseline.consume_wall_s,
                thousands(baseline.consume_rate as u64)
            ));
            cpu_use_line(&mut out, &baseline.consume_cpu);
            if baseline.hit_time_limit {
                out.push("   stopped by --time-limit".into());
            }
        }
        if let Some(single) = &self.single {
            out.push(String::new());
            out.push(format!(
                "1. enqueue, one message per request, {} clients",
                single.result.clients
            ));
            enqueue_lines(&mut out, single);
        }
        if let Some(batch) = &self.batch {
            out.push(String::new());
            out.push(format!(
                "2. enqueue, batches of {}, {} clients",
                batch.result.batch_size, batch.result.clients
            ));
            enqueue_lines(&mut out, batch);
        }
        if let Some(e2e) = &self.end_to_end {
            let r = &e2e.result;
            out.push(String::new());
            out.push(format!(
                "3. end to end: {} producers (batches of {}, {} in flight each), {} consumers (receive max {}, wait_ms {}, one ack per batch, up to {} acks in flight each)",
                r.producers, r.batch_size, r.inflight_per_producer, r.consumers, r.receive_max, r.wait_ms, r.acks_in_flight
            ));
            end_to_end_lines(&mut out, e2e);
        }
        if let Some(latency) = &self.latency {
            let r = &latency.result;
            out.push(String::new());
            out.push(format!(
                "4. latency at {} msgs/s, one message per request, {} s measured after {} s warm-up, {} long-polling consumers",
                thousands(r.target_rate),
                r.duration_s,
                r.warmup_s,
                r.consumers
            ));
            out.push(format!("   achieved rate {:.0} msgs/s", r.achieved_rate));
            match &r.enqueue_to_receive {
                Some(summary) => {
                    out.push(format!("   enqueue-to-receive: {}", latency_text(summary)))
                }
                None => out.push("   enqueue-to-receive: no samples".into()),
            }
            if let Some(summary) = &r.enqueue_request {
                out.push(format!("   enqueue request: {}", latency_text(summary)));
            }
            consumer_lines(&mut out, &r.consumer_requests);
            delivery_line(&mut out, r.enqueued, &r.delivery);
            failure_lines(
                &mut out,
                r.errors,
                r.first_error.as_deref(),
                r.hit_time_limit,
            );
            cpu_line(&mut out, latency);
        }
        if let Some(sequential) = &self.sequential {
            out.push(String::new());
            out.push("5. one durable enqueue at a time (single client, sequential)".into());
            enqueue_lines(&mut out, sequential);
        }
        if let Some(memory) = &self.server_memory {
            out.push(String::new());
            out.push(format!(
                "6. server memory after the scenarios above: peak RSS (VmHWM) {}, RSS now {}",
                mib(memory.peak_rss_kib),
                mib(memory.rss_kib)
            ));
        }
        if let Some(stop) = &self.server_stop {
            out.push(format!("   stopped {}", stop_text(stop)));
        }
        if let Some(restart) = &self.restart {
            out.push(String::new());
            out.push(format!(
                "7. restart with {} messages queued ({}-byte bodies)",
                thousands(restart.fill.messages),
                restart.body_bytes
            ));
            out.push(format!(
                "   fill: {} clients, batches of {}: {} msgs in {:.2} s = {} msgs/s",
                restart.fill.clients,
                restart.fill.batch_size,
                thousands(restart.fill.messages),
                restart.fill.elapsed_s,
                thousands(restart.fill.msgs_per_s as u64)
            ));
            failure_lines(
                &mut out,
                restart.fill.errors,
                restart.fill.first_error.as_deref(),
                restart.fill.hit_time_limit,
            );
            if let Some(memory) = &restart.fill_server_memory {
                out.push(format!(
                    "   server peak RSS with the queue full: {}",
                    mib(memory.peak_rss_kib)
                ));
            }
            out.push(format!("   stopped {}", stop_text(&restart.stop)));
            let files: Vec<String> = restart
                .data_dir_files
                .iter()
                .map(|(name, bytes)| format!("{name} {}", bytes_text(*bytes)))
                .collect();
            out.push(format!(
                "   data dir: {} ({})",
                bytes_text(restart.data_dir_bytes),
                files.join(", ")
            ));
            out.push(format!(
                "   restart: spawn to ready line in {:.2} s",
                restart.ready_s
            ));
            match restart.ready_after_restart {
                Some(ready) => out.push(format!(
                    "   ready after the restart: {}{}",
                    thousands(ready),
                    if ready == restart.fill.messages {
                        " (all of them)"
                    } else {
                        " (NOT all of them)"
                    }
                )),
                None => out.push("   ready after the restart: the stats request failed".into()),
            }
            if let Some(memory) = &restart.memory_after_restart {
                out.push(format!(
                    "   RSS of the restarted server once ready: {}",
                    mib(memory.rss_kib)
                ));
            }
            out.push(format!(
                "   restarted server stopped {}",
                stop_text(&restart.second_stop)
            ));
        }
        if let Some(dlq) = &self.dlq {
            out.push(String::new());
            dlq::text_lines(&mut out, dlq);
        }
        if let Some(webhooks) = &self.webhooks {
            out.push(String::new());
            webhooks::text_lines(&mut out, webhooks);
        }
        if let Some(dashboard) = &self.dashboard {
            out.push(String::new());
            dashboard::text_lines(&mut out, dashboard);
        }
        if let Some(report) = &self.sqs {
            out.push(String::new());
            let native = sqs::Native {
                single: self.single.as_ref().map(|single| single.result.msgs_per_s),
                batch: self.batch.as_ref(),
                end_to_end: self.end_to_end.as_ref().map(|e2e| e2e.result.msgs_per_s),
            };
            sqs::text_lines(&mut out, report, native);
        }
        if !self.peers.is_empty() {
            peers::text_lines(&mut out, &self.peers);
        }
        if let Some(sweep) = &self.depth_sweep {
            depth::text_lines(&mut out, sweep);
        }
        for note in &self.notes {
            out.push(format!("note: {note}"));
        }
        out.push(String::new());
        out.join("\n")
    }
}

fn enqueue_lines(out: &mut Vec<String>, measured: &Measured<EnqueueReport>) {
    let r = &measured.result;
    out.push(format!(
        "   {} msgs in {} requests, {:.2} s: {} msgs/s",
        thousands(r.messages),
        thousands(r.requests),
        r.elapsed_s,
        thousands(r.msgs_per_s as u64)
    ));
    if let Some(latency) = &r.request_latency {
        out.push(format!("   request: {}", latency_text(latency)));
    }
    failure_lines(out, r.errors, r.first_error.as_deref(), r.hit_time_limit);
    cpu_line(out, measured);
}

/// The figures of an end-to-end load, under its heading.
fn end_to_end_lines(out: &mut Vec<String>, e2e: &Measured<EndToEndReport>) {
    let r = &e2e.result;
    out.push(format!(
        "   {} msgs sent, received and acked in {:.2} s: {} msgs/s (producers alone: {} msgs/s over {:.2} s)",
        thousands(r.delivery.distinct),
        r.elapsed_s,
        thousands(r.msgs_per_s as u64),
        thousands(r.produce_msgs_per_s as u64),
        r.produce_elapsed_s
    ));
    delivery_line(out, r.enqueued, &r.delivery);
    if let Some(latency) = &r.enqueue_to_receive {
        out.push(format!(
            "   enqueue-to-receive under this load: {}",
            latency_text(latency)
        ));
    }
    consumer_lines(out, &r.consumer_requests);
    failure_lines(out, r.errors, r.first_error.as_deref(), r.hit_time_limit);
    cpu_line(out, e2e);
}

fn consumer_lines(out: &mut Vec<String>, requests: &load::ConsumerRequests) {
    if let Some(summary) = &requests.receive_request {
        out.push(format!(
            "   receive request (non-empty): {}",
            latency_text(summary)
        ));
    }
    if let Some(summary) = &requests.ack_request {
        out.push(format!("   ack request: {}", latency_text(summary)));
    }
}

fn delivery_line(out: &mut Vec<String>, enqueued: u64, delivery: &load::Delivery) {
    out.push(format!(
        "   {} enqueued, {} distinct received, {} duplicates, {} missing, {} acked",
        thousands(enqueued),
        thousands(delivery.distinct),
        thousands(delivery.duplicates),
        thousands(delivery.missing),
        thousands(delivery.acked)
    ));
}

fn failure_lines(out: &mut Vec<String>, errors: u64, first: Option<&str>, hit_time_limit: bool) {
    if errors > 0 {
        out.push(format!(
            "   FAILED REQUESTS: {errors}, the first: {}",
            first.unwrap_or("?")
        ));
    }
    if hit_time_limit {
        out.push("   stopped by the time limit before finishing".into());
    }
}

fn cpu_line<T>(out: &mut Vec<String>, measured: &Measured<T>) {
    cpu_use_line(out, &measured.cpu);
    if let Some(work) = measured.database {
        let seconds = measured.wall_s.max(f64::EPSILON);
        out.push(format!(
            "   database: {:.1} MB of WAL ({:.1} MB/s), {} transactions that wrote ({:.0}/s)",
            work.wal_bytes as f64 / 1e6,
            work.wal_bytes as f64 / 1e6 / seconds,
            work.write_transactions,
            work.write_transactions as f64 / seconds
        ));
    }
}

fn cpu_use_line(out: &mut Vec<String>, cpu: &CpuUse) {
    let percent =
        |value: Option<f64>| value.map_or_else(|| "?".to_owned(), |value| format!("{value:.0}%"));
    let threads: Vec<String> = cpu
        .server_threads_percent
        .iter()
        .map(|(name, value)| format!("{name} {value:.0}%"))
        .collect();
    let threads = if threads.is_empty() {
        String::new()
    } else {
        format!(" ({})", threads.join(", "))
    };
    out.push(format!(
        "   CPU (100% = one core): server {}{threads}, bench {}, postgres {}, anything else {}",
        percent(cpu.server_percent),
        percent(cpu.bench_percent),
        percent(cpu.database_percent),
        percent(cpu.other_percent)
    ));
}

fn latency_text(summary: &LatencySummary) -> String {
    format!(
        "p50 {}, p90 {}, p99 {}, p99.9 {}, max {} ({} samples)",
        ms(summary.p50_us),
        ms(summary.p90_us),
        ms(summary.p99_us),
        ms(summary.p999_us),
        ms(summary.max_us),
        thousands(summary.count)
    )
}

fn stop_text(stop: &StopOutcome) -> String {
    let how = match (stop.killed, stop.exit_code) {
        (true, _) => "killed after ignoring SIGTERM".to_owned(),
        (false, Some(code)) => format!("exit code {code}"),
        (false, None) => "ended by a signal".to_owned(),
    };
    format!("{:.2} s after SIGTERM ({how})", stop.elapsed_s)
}

fn ms(us: u64) -> String {
    format!("{:.2} ms", us as f64 / 1000.0)
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

fn bytes_text(bytes: u64) -> String {
    if bytes >= 1 << 30 {
        format!("{:.2} GiB", bytes as f64 / (1u64 << 30) as f64)
    } else {
        format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
    }
}

/// `1234567` as `1,234,567`.
fn thousands(value: u64) -> String {
    let digits = value.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser, Subcommand};

    use super::*;

    /// The globals of the real `Cli` in main.rs, which `BenchArgs` must get along with.
    #[derive(Debug, Parser)]
    struct Cli {
        #[arg(
            long,
            global = true,
            env = "SLUICE_BENCH_TEST_URL_UNSET",
            default_value = "http://127.0.0.1:7566"
        )]
        url: String,
        #[arg(long, global = true)]
        json: bool,
        #[command(subcommand)]
        command: Command,
    }

    #[derive(Debug, Subcommand)]
    enum Command {
        Bench(BenchArgs),
    }

    fn parse(args: &[&str]) -> BenchArgs {
        let Command::Bench(args) = Cli::try_parse_from(args).unwrap().command;
        args
    }

    #[test]
    fn the_bench_flags_fit_under_the_global_ones() {
        Cli::command().debug_assert();
    }

    #[test]
    fn url_is_unset_unless_given_before_or_after_the_subcommand() {
        assert_eq!(parse(&["sluice", "bench"]).url, "");
        assert_eq!(
            parse(&["sluice", "bench", "--url", "http://h:1"]).url,
            "http://h:1"
        );
        assert_eq!(
            parse(&["sluice", "--url", "http://h:1", "bench"]).url,
            "http://h:1"
        );
        assert!(parse(&["sluice", "--json", "bench"]).json);
        assert!(parse(&["sluice", "bench", "--json"]).json);
        assert!(!parse(&["sluice", "bench"]).json);
    }

    #[test]
    fn scenarios_are_a_comma_separated_list() {
        assert_eq!(parse(&["sluice", "bench"]).scenarios.len(), 6);
        assert_eq!(
            parse(&["sluice", "bench", "--scenarios", "e2e,latency"]).scenarios,
            [Scenario::E2e, Scenario::Latency]
        );
        assert!(
            !parse(&["sluice", "bench"])
                .scenarios
                .contains(&Scenario::Dlq)
        );
        let dlq = parse(&[
            "sluice",
            "bench",
            "--scenarios",
            "dlq",
            "--dlq-messages",
            "5000",
        ]);
        assert_eq!(
            (dlq.scenarios, dlq.dlq_messages),
            (vec![Scenario::Dlq], 5_000)
        );
        assert!(
            !parse(&["sluice", "bench"])
                .scenarios
                .contains(&Scenario::Webhooks)
        );
        let defaults = parse(&["sluice", "bench"]);
        assert_eq!(
            (defaults.webhook_requests, defaults.webhook_clients),
            (50_000, 32)
        );
        let hooks = parse(&[
            "sluice",
            "bench",
            "--scenarios",
            "webhooks",
            "--webhook-requests",
            "2000",
            "--webhook-clients",
            "8",
        ]);
        assert_eq!(
            (
                hooks.scenarios,
                hooks.webhook_requests,
                hooks.webhook_clients
            ),
            (vec![Scenario::Webhooks], 2_000, 8)
        );
        assert!(
            !parse(&["sluice", "bench"])
                .scenarios
                .contains(&Scenario::Dashboard)
        );
        assert_eq!(parse(&["sluice", "bench"]).dashboard_messages, 1_000_000);
        let dash = parse(&[
            "sluice",
            "bench",
            "--scenarios",
            "dashboard",
            "--dashboard-messages",
            "20000",
        ]);
        assert_eq!(
            (dash.scenarios, dash.dashboard_messages),
            (vec![Scenario::Dashboard], 20_000)
        );
    }

    #[test]
    fn the_postgres_store_and_its_baseline_are_chosen_by_flags() {
        let default = parse(&["sluice", "bench"]);
        assert!(default.store_url.is_none());
        assert!(!default.scenarios.contains(&Scenario::PgBaseline));
        let chosen = parse(&[
            "sluice",
            "bench",
            "--store-url",
            "postgres://postgres@127.0.0.1/test",
            "--scenarios",
            "pg-baseline,e2e",
        ]);
        assert_eq!(
            chosen.store_url.as_deref(),
            Some("postgres://postgres@127.0.0.1/test")
        );
        assert_eq!(chosen.scenarios, [Scenario::PgBaseline, Scenario::E2e]);
    }

    #[test]
    fn the_sqs_scenario_is_chosen_beside_the_native_ones() {
        assert!(
            !parse(&["sluice", "bench"])
                .scenarios
                .contains(&Scenario::Sqs)
        );
        assert_eq!(
            parse(&["sluice", "bench", "--scenarios", "single,batch,e2e,sqs"]).scenarios,
            [
                Scenario::Single,
                Scenario::Batch,
                Scenario::E2e,
                Scenario::Sqs
            ]
        );
    }

    #[test]
    fn thousands_are_separated() {
        for (value, text) in [
            (0, "0"),
            (999, "999"),
            (1_000, "1,000"),
            (1_234_567, "1,234,567"),
        ] {
            assert_eq!(thousands(value), text);
        }
    }
}
