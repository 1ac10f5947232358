//! sluice-server: the whole server as a library.
//!
//! [`serve`] is what `sluice serve` calls: load the config, open the store, bind, print the ready
//! line, serve until a signal. [`run`] is the server as one call over a bound listener and a
//! shutdown future, which is what tests and embedders use.
//!
//! Shutdown is one [`CancellationToken`], cancelled when the shutdown future completes (or `run`
//! returns early): the accept loop, long polls, the push supervisor and its workers, the
//! history sampler and maintenance all observe it. Then, in order: requests in progress finish
//! (`listen`), pushes already sent record their answers (`push`), the background tasks end, and
//! the store closes.

pub mod alerts;
pub mod api;
mod auth;
mod body_budget;
mod browser_guard;
pub mod config;
mod dashboard;
mod egress;
pub mod error;
pub mod expr;
mod grpc;
mod history;
mod http_metrics;
mod listen;
mod maintenance;
mod metrics;
mod notifications;
mod process_metrics;
pub mod push;
pub mod push_log;
mod quotas;
mod redact;
mod secrets;
pub mod sqs;
pub mod state;
pub mod store_open;
pub mod telemetry;
pub mod topics;
mod views;
pub mod webhooks;

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use sluice_core::{Clock, ManualClock, SystemClock};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use crate::config::Config;
pub use crate::store_open::{migrate_store, open_store};
/// The PostgreSQL store's database URL, shown without its password (`--store-url`).
pub use sluice_store_postgres::DatabaseUrl;

/// How long shutdown waits for pushes already sent to get their answer recorded.
const PUSH_GRACE: Duration = Duration::from_secs(10);
/// How long shutdown waits for a background task to see the token and end (a maintenance tick
/// or a claim in progress) before it is aborted.
const TASK_GRACE: Duration = Duration::from_secs(5);

/// Options from the command line; each overrides the config file.
#[derive(Debug, Clone, Default)]
pub struct ServeOptions {
    /// `host:port` to listen on (`127.0.0.1:0` picks a free port).
    pub listen: Option<String>,
    /// Data directory.
    pub data_dir: Option<PathBuf>,
    /// TOML config file.
    pub config_path: Option<PathBuf>,
    /// `fsync` or `os`.
    pub durability: Option<String>,
    /// Start with push delivery off (`--no-push`), whatever the config file says.
    pub no_push: bool,
    /// The PostgreSQL store's database (`--store-url`); implies `[store] kind = "postgres"`.
    pub store_url: Option<DatabaseUrl>,
}

/// Boxed error for the binary.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Runs the server until SIGTERM or ctrl-c. Prints `sluice listening on http://ADDR` on stdout
/// once it accepts connections.
pub async fn serve(options: ServeOptions) -> Result<(), BoxError> {
    serve_config(Config::load(&options)?).await
}

/// [`serve`] with the config already loaded (`sluice serve` reads it first for `[tracing]`).
pub async fn serve_config(mut config: Config) -> Result<(), BoxError> {
    // Test-clock mode is for integration tests only, so it has no flag and no config key.
    config.test_clock = std::env::var("SLUICE_TEST_CLOCK").is_ok_and(|v| v == "1");
    // Where the test clock starts (epoch ms), e.g. at the time of recorded webhook signatures.
    config.test_clock_start_ms = std::env::var("SLUICE_TEST_CLOCK_START_MS")
        .ok()
        .and_then(|v| v.parse().ok());
    auth::check_exposure(config.listen, &config.auth, config.allow_unauthenticated)?;
    let listener = TcpListener::bind(config.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", config.listen))?;
    let address = listener.local_addr()?;
    let scheme = if config.tls.is_some() {
        "https"
    } else {
        "http"
    };
    run(config, listener, shutdown_signal(), move || {
        println!("sluice listening on {scheme}://{address}");
    })
    .await
}

/// Serves on `listener` until `shutdown` completes; `on_ready` runs once the store is open.
pub async fn run(
    config: Config,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
    on_ready: impl FnOnce(),
) -> Result<(), BoxError> {
    let (clock, manual_clock): (Arc<dyn Clock>, Option<ManualClock>) = if config.test_clock {
        let manual = ManualClock::new(config.test_clock_start_ms.unwrap_or(SystemClock.now_ms()));
        (Arc::new(manual.clone()), Some(manual))
    } else {
        (Arc::new(SystemClock), None)
    };
    let started = std::time::Instant::now();
    // The address really listened on (`127.0.0.1:0` picks a port): it names this node in a
    // shared store unless `[store] node_name` does.
    let mut config = config;
    config.listen = listener.local_addr()?;
    let store = open_store(&config, clock.now_ms()).await?;
    tracing::info!(store = config.store.kind(), data_dir = %config.data_dir.display(), durability = ?config.durability, elapsed_ms = started.elapsed().as_millis() as u64, "store open");

    let shutdown_token = CancellationToken::new();
    // However `run` ends (an error below, a panic), every task it started sees the token.
    let _cancel_on_return = shutdown_token.clone().drop_guard();
    let expr = expr::ExprPool::new(config.expressions.clone());
    let http_metrics = Arc::new(http_metrics::HttpMetrics::default());
    let shutdown_shared = Arc::new(shutdown_token.clone());
    let quotas = quotas::TenantQuotas::new(config.auth.tenants());
    // From here on the store is reached only through the operations.
    let mut ops = sluice_ops::Ops::new(store, clock.clone(), shutdown_shared.clone());
    if manual_clock.is_some() {
        ops = ops.on_manual_clock();
    }
    // The config file's queues, with the checks every door's queues get.
    for (name, queue_config) in &config.queues {
        ops.queue_put_config(name, queue_config.clone())
            .await
            .map_err(|error| format!("[queues.{name}]: {}", error.message))?;
    }
    // The quotas count through operations without admission (a count enqueues nothing).
    let counting = Arc::new(ops.clone());
    if let Some(quotas) = &quotas {
        quotas.recount(&counting, true).await;
        ops = ops.with_admission(quotas.clone());
    }
    let ops = Arc::new(ops);
    let push = push::Dispatcher::new(
        ops.clone(),
        clock.clone(),
        shutdown_token.child_token(),
        expr.clone(),
        config.push_enabled,
        config.push_delivery_log,
        config.auth.clone(),
    )?;
    let state = api::AppState::new(api::Shared {
        http_metrics: http_metrics.clone(),
        expr,
        ops,
        clock: clock.clone(),
        manual_clock,
        shutdown: shutdown_shared,
        webhooks: Arc::new(webhooks::Registry::default()),
        topics: Arc::new(topics::Registry::default()),
        push: push.clone(),
        auth: config.auth.clone(),
        sessions: Arc::new(auth::Sessions::new(
            counting.session_store(),
            config.limits.sessions_per_token,
            config.limits.max_sessions,
        )),
        tls: config.tls.is_some(),
        body_budget: Arc::new(body_budget::BodyBudget::new(&config.limits)),
        history: history::History::new(config.history.clone()),
        sqs: Arc::new(sqs::SqsState::new(config.sqs.clone())),
        stream_messages_in_flight: config.limits.stream_messages_in_flight,
        stream_unsent_bytes: config.limits.stream_unsent_bytes,
        limits: config.limits.clone(),
        dashboard_url: alerts::dashboard_url(
            &config.public_urls,
            listener.local_addr()?,
            config.tls.is_some(),
        ),
    });
    // Read before the ready line, so a bad certificate stops the start with its reason.
    let tls = match &config.tls {
        Some((cert, key)) => {
            let _ = rustls::crypto::ring::default_provider().install_default();
            Some(
                axum_server::tls_rustls::RustlsConfig::from_pem_file(cert, key)
                    .await
                    .map_err(|e| {
                        format!(
                            "cannot load the TLS certificate {} and key {}: {e}",
                            cert.display(),
                            key.display()
                        )
                    })?,
            )
        }
        None => None,
    };
    state.topics.reconcile(
        state
            .ops
            .definition_list(sluice_ops::Definable::Topic)
            .await?,
    );
    for (name, spec) in &config.topics {
        topics::define(&state, name, spec.clone())
            .await
            .map_err(|e| format!("[topics.{name}]: {}", e.message))?;
    }
    // After the topics: an endpoint may publish to one.
    load_webhooks(&state, &config).await?;
    for (name, spec) in &config.schedules {
        state
            .ops
            .schedule_put(name, spec.clone())
            .await
            .map_err(|e| format!("[schedules.{name}]: {}", e.message))?;
    }
    for (name, spec) in &config.alerts {
        state
            .ops
            .alert_put(
                name,
                spec.clone(),
                sluice_ops::alerts::AlertOrigin::ConfigFile,
                push::validate,
            )
            .await
            .map_err(|e| format!("[alerts.{name}]: {}", e.message))?;
    }
    let definitions_task = tokio::spawn(watch_definitions(
        state.clone(),
        state.ops.definitions_changed(),
    ));
    let push_task = tokio::spawn(push.clone().run());
    let history_task = tokio::spawn(history::run(state.clone()));
    let quotas_task =
        quotas.map(|quotas| tokio::spawn(quotas.run(counting.clone(), shutdown_token.clone())));
    let maintenance = tokio::spawn(maintenance::run(
        state.ops.clone(),
        state.dashboard_url.clone(),
        shutdown_token.clone(),
    ));
    let alert_commands = tokio::spawn(alerts::run_commands(
        state.ops.clone(),
        shutdown_token.clone(),
    ));
    let guard = browser_guard::BrowserGuard::new(
        !config.auth.enabled(),
        listener.local_addr()?,
        config.tls.is_some(),
        config.public_urls.clone(),
    );
    let routes = auth::router()
        .route_layer(axum::middleware::from_fn_with_state(
            state.body_budget.clone(),
            body_budget::hold,
        ))
        .with_state(state.clone())
        .merge(api::router(state.clone()));
    let guard = Arc::new(guard);
    let routes = with_request_ids(browser_guard::layer(routes, guard.clone()));
    // Outermost of each route, so every answer is counted (and traced), whichever layer gave it.
    let routes = http_metrics::layer(routes, http_metrics);
    // The SQS API shares the listener: its requests are taken before routing (a router layer
    // runs after it, and `POST /` has no route), so it wraps the whole router, with the browser
    // guard's checks of its own (a cross-site form must not reach it either). It counts its
    // requests into the same metrics, by operation.
    let grpc = grpc::service(state.clone());
    // Kept to close the store at the end, once every task that uses it has stopped.
    let ops = state.ops.clone();
    let sqs_layer = Arc::new(sqs::Layer { app: state, guard });
    let app =
        axum::Router::new()
            .fallback_service(routes)
            .layer(axum::middleware::from_fn_with_state(
                sqs_layer,
                sqs::intercept,
            ));
    on_ready();
    tracing::info!(listen = %listener.local_addr()?, "listening");

    let trigger = shutdown_token.clone();
    let shutdown_trigger = tokio::spawn(async move {
        tokio::select! {
            () = shutdown => {
                tracing::info!("shutting down");
                trigger.cancel();
            }
            // `run` ended some other way; nothing left to trigger.
            () = trigger.cancelled() => {}
        }
    });
    let served = listen::serve(
        listener,
        app,
        grpc,
        tls,
        &config.limits,
        shutdown_token.clone(),
    )
    .await;
    // Whatever ended the accept loop ends everything else too (and the trigger with it).
    shutdown_token.cancel();
    let _ = shutdown_trigger.await;
    served?;
    // The supervisor stops its workers: no new claims from here on.
    end_task("push supervisor", push_task).await;
    // Pushes already sent get their answer recorded before the store closes.
    push.wait_idle(PUSH_GRACE).await;
    end_task("maintenance", maintenance).await;
    end_task("alert commands", alert_commands).await;
    end_task("history sampler", history_task).await;
    if let Some(task) = quotas_task {
        end_task("tenant quotas", task).await;
    }
    end_task("definitions watcher", definitions_task).await;
    ops.close().await?;
    tracing::info!("stopped");
    Ok(())
}

/// Waits (at most [`TASK_GRACE`]) for a background task that saw the shutdown token to end, and
/// aborts it beyond that, so a store call that cannot finish (a full disk) never holds the stop.
async fn end_task(name: &str, mut task: tokio::task::JoinHandle<()>) {
    match tokio::time::timeout(TASK_GRACE, &mut task).await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => tracing::error!(task = name, %error, "background task failed"),
        Err(_) => {
            tracing::warn!(
                task = name,
                "background task still running at shutdown: aborted"
            );
            task.abort();
        }
    }
}

/// Gives every request an id (`x-request-id`, kept when the client sent one), returns it on the
/// response, and runs the request in a span carrying it, so every log line of the request has
/// it. Requests themselves are logged at debug level only: no bodies, no headers.
fn with_request_ids(app: axum::Router) -> axum::Router {
    use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
    use tower_http::trace::{DefaultOnResponse, TraceLayer};
    let trace = TraceLayer::new_for_http()
        .make_span_with(|request: &axum::http::Request<_>| {
            let id = request
                .headers()
                .get("x-request-id")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("-");
            tracing::info_span!("request", request_id = id)
        })
        .on_request(())
        .on_response(DefaultOnResponse::new().level(tracing::Level::DEBUG));
    app.layer(PropagateRequestIdLayer::x_request_id())
        .layer(trace)
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
}

/// Serves the stored webhook endpoints, then defines (and stores) the config file's, which win.
/// A stored endpoint that no longer compiles (a secret's variable is gone) is skipped with an
/// error in the log; a config file endpoint that does not compile stops the start.
async fn load_webhooks(state: &api::AppState, config: &Config) -> Result<(), BoxError> {
    state.webhooks.reconcile(
        state
            .ops
            .definition_list(sluice_ops::Definable::WebhookEndpoint)
            .await?,
    );
    for (name, spec) in &config.webhooks {
        api::webhooks::define(state, name, spec.clone())
            .await
            .map_err(|e| format!("[webhooks.{name}]: {}", e.message))?;
    }
    Ok(())
}

/// Follows definitions changed on other nodes of a shared store: the webhook endpoints are
/// served as stored, and the push supervisor looks at the queues again. Ends at shutdown, or at
/// once for a store that never reports a change.
async fn watch_definitions(state: api::AppState, mut changed: tokio::sync::watch::Receiver<u64>) {
    loop {
        tokio::select! {
            moved = changed.changed() => {
                if moved.is_err() {
                    return;
                }
            }
            () = state.shutdown.cancelled() => return,
        }
        match state
            .ops
            .definition_list(sluice_ops::Definable::WebhookEndpoint)
            .await
        {
            Ok(stored) => state.webhooks.reconcile(stored),
            // The next change, or the next start, loads them; what is served stays.
            Err(error) => tracing::warn!(%error, "webhook endpoints not reloaded"),
        }
        match state
            .ops
            .definition_list(sluice_ops::Definable::Topic)
            .await
        {
            Ok(stored) => state.topics.reconcile(stored),
            Err(error) => tracing::warn!(%error, "topics not reloaded"),
        }
        state.push.refresh();
    }
}

/// Completes on SIGTERM or ctrl-c.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = terminate => {}
    }
}
