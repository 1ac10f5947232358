//! Accepting and serving connections, bounded in number and in time.
//!
//! - At most `max_connections` connections are served at once; the next is accepted only when
//!   one closes, so more wait in the kernel's listen backlog instead of taking file descriptors.
//! - A client must send a request's headers within `header_read_timeout` of the connection's
//!   start or of its previous response (hyper's header-read timer, which runs while the
//!   connection waits for a request): a half-open or slowloris connection, and an idle
//!   keep-alive one, is closed. A request being answered (a long poll) is not waiting for
//!   headers, so it is never cut. The TLS handshake gets the same time.
//! - HTTP/1.1 and HTTP/2 on the same port: in cleartext a client that starts with the HTTP/2
//!   preface (prior knowledge, as gRPC clients do) gets HTTP/2; over TLS, ALPN offers `h2` and
//!   `http/1.1`. hyper's header-read timer is an HTTP/1 feature, so every connection also has an
//!   idle timer of the same length: a connection with no request open for
//!   `header_read_timeout` is closed (HTTP/2: GOAWAY, then close). An HTTP/2 connection serves
//!   at most `streams_per_connection` requests at once, and its peer must answer pings.
//! - Requests whose content type is `application/grpc` go to the gRPC service, the rest to the
//!   HTTP router: one listener, one port, the same tokens.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use axum_server::accept::Accept;
use axum_server::tls_rustls::{RustlsAcceptor, RustlsConfig};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::Limits;

/// How long shutdown waits for requests in progress before it closes their connections.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);
/// File descriptors kept for everything but client connections (the store's database, WAL and
/// read connections, push requests, logs) when the open-file limit lowers `max_connections`.
const RESERVED_FDS: u64 = 256;
/// Pause after a failed accept (e.g. out of file descriptors), so the loop does not spin.
const ACCEPT_RETRY: Duration = Duration::from_millis(50);
/// How often an HTTP/2 connection is pinged, and how long the peer has to answer.
const HTTP2_PING: Duration = Duration::from_secs(20);
/// Largest header block of an HTTP/2 request (HTTP/1's is bounded by hyper's read buffer).
const HTTP2_HEADER_BYTES_MAX: u32 = 64 * 1024;

/// The gRPC service, as the listener calls it.
pub type Grpc = crate::grpc::Entry;

/// Serves `app` on `listener` until `shutdown` is cancelled, then lets requests in progress
/// finish (for at most [`SHUTDOWN_GRACE`]).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    grpc: Grpc,
    tls: Option<RustlsConfig>,
    limits: &Limits,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let max_connections = connection_limit(limits.max_connections);
    let slots = Arc::new(Semaphore::new(max_connections));
    let mut http = auto::Builder::new(TokioExecutor::new());
    http.http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    http.http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(limits.streams_per_connection)
        .max_header_list_size(HTTP2_HEADER_BYTES_MAX)
        .keep_alive_interval(HTTP2_PING)
        .keep_alive_timeout(HTTP2_PING);
    let http = Arc::new(http);
    let tls = tls.map(|config| {
        RustlsAcceptor::new(with_alpn(config)).handshake_timeout(limits.header_read_timeout)
    });
    let idle_timeout = limits.header_read_timeout;
    let connections = TaskTracker::new();
    loop {
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => slot.expect("the semaphore is never closed"),
            () = shutdown.cancelled() => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    tracing::warn!(%error, "cannot accept a connection");
                    tokio::time::sleep(ACCEPT_RETRY).await;
                    continue;
                }
            },
            () = shutdown.cancelled() => break,
        };
        let _ = stream.set_nodelay(true);
        let connection = Connection {
            app: app.clone(),
            grpc: grpc.clone(),
            peer,
            http: http.clone(),
            shutdown: shutdown.clone(),
            idle_timeout,
        };
        let tls = tls.clone();
        connections.spawn(async move {
            match tls {
                None => connection.serve(stream).await,
                Some(acceptor) => match acceptor.accept(stream, ()).await {
                    Ok((stream, ())) => connection.serve(stream).await,
                    Err(error) => tracing::debug!(%peer, %error, "TLS handshake failed"),
                },
            }
            drop(slot);
        });
    }
    // New connections are refused from here on; those open finish what they are doing (each
    // saw the token: HTTP/1 closes after its request, HTTP/2 sends GOAWAY).
    drop(listener);
    connections.close();
    tokio::select! {
        () = connections.wait() => {}
        () = tokio::time::sleep(SHUTDOWN_GRACE) => {
            tracing::warn!("requests still in progress after {SHUTDOWN_GRACE:?} of shutdown are cut off");
        }
    }
    Ok(())
}

/// One accepted connection.
struct Connection {
    app: Router,
    grpc: Grpc,
    peer: SocketAddr,
    http: Arc<auto::Builder<TokioExecutor>>,
    shutdown: CancellationToken,
    idle_timeout: Duration,
}

impl Connection {
    async fn serve<I: AsyncRead + AsyncWrite + Unpin + Send + 'static>(self, io: I) {
        let Connection {
            app,
            grpc,
            peer,
            http,
            shutdown,
            idle_timeout,
        } = self;
        let activity = Arc::new(Activity::new());
        let counted = activity.clone();
        let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
            request.extensions_mut().insert(ConnectInfo(peer));
            let open = counted.open();
            let app = app.clone();
            let grpc = grpc.clone();
            async move {
                let response = if is_grpc(&request) {
                    grpc.call(request).await
                } else {
                    let Ok(response) = tower::ServiceExt::oneshot(app, request).await;
                    response
                };
                // The request counts as open until its answer's body is sent (a stream's too).
                Ok::<_, Infallible>(response.map(|body| open.hold(body)))
            }
        });
        let connection = http.serve_connection(TokioIo::new(io), service);
        tokio::pin!(connection);
        let mut closing = false;
        // An idle connection told to go (HTTP/2: GOAWAY, then a ping the peer must answer)
        // gets this long to close; then it is dropped.
        let cut_off = tokio::time::sleep(Duration::MAX);
        tokio::pin!(cut_off);
        loop {
            tokio::select! {
                ended = connection.as_mut() => {
                    if let Err(error) = ended {
                        // Timeouts and clients going away end connections all the time.
                        tracing::debug!(%peer, %error, "connection ended");
                    }
                    return;
                }
                () = shutdown.cancelled(), if !closing => {
                    connection.as_mut().graceful_shutdown();
                    closing = true;
                }
                () = activity.idle_for(idle_timeout), if !closing => {
                    tracing::debug!(%peer, "idle connection closed");
                    connection.as_mut().graceful_shutdown();
                    closing = true;
                    cut_off.as_mut().reset(Instant::now() + idle_timeout);
                }
                () = cut_off.as_mut() => return,
            }
        }
    }
}

/// A gRPC request: its content type is `application/grpc` (or `application/grpc+proto`).
fn is_grpc<B>(request: &hyper::Request<B>) -> bool {
    request
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .is_some_and(|value| value.as_bytes().starts_with(b"application/grpc"))
}

/// Requests open on one connection, and since when none has been.
struct Activity {
    open: AtomicUsize,
    idle_since: Mutex<Instant>,
}

/// One open request; closed when dropped (with its answer's body).
struct Open(Arc<Activity>);

impl Activity {
    fn new() -> Self {
        Self {
            open: AtomicUsize::new(0),
            idle_since: Mutex::new(Instant::now()),
        }
    }

    fn open(self: &Arc<Self>) -> Open {
        self.open.fetch_add(1, Ordering::SeqCst);
        Open(self.clone())
    }

    /// Completes once no request has been open for `timeout`.
    async fn idle_for(&self, timeout: Duration) {
        loop {
            let since = *self.idle_since.lock();
            if self.open.load(Ordering::SeqCst) > 0 {
                tokio::time::sleep(timeout).await;
                continue;
            }
            let until = since + timeout;
            if Instant::now() >= until {
                return;
            }
            tokio::time::sleep_until(until).await;
        }
    }
}

impl Open {
    /// The body, holding this request open until it is sent or dropped.
    fn hold(self, body: axum::body::Body) -> axum::body::Body {
        use http_body_util::BodyExt;
        axum::body::Body::new(body.map_frame(move |frame| {
            let _open = &self;
            frame
        }))
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        if self.0.open.fetch_sub(1, Ordering::SeqCst) == 1 {
            *self.0.idle_since.lock() = Instant::now();
        }
    }
}

/// Offers HTTP/2 and HTTP/1.1 in ALPN.
fn with_alpn(config: RustlsConfig) -> RustlsConfig {
    let mut server_config = (*config.get_inner()).clone();
    server_config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    RustlsConfig::from_config(Arc::new(server_config))
}

/// `configured`, lowered to what the open-file limit leaves after [`RESERVED_FDS`].
fn connection_limit(configured: usize) -> usize {
    let Some(open_files) = open_file_limit() else {
        return configured;
    };
    let fitting = open_files.saturating_sub(RESERVED_FDS).max(1);
    if (configured as u64) > fitting {
        tracing::warn!(
            max_connections = configured,
            open_file_limit = open_files,
            serving = fitting,
            "[limits] max_connections is lowered to fit the open-file limit (ulimit -n)"
        );
        fitting as usize
    } else {
        configured
    }
}

#[cfg(unix)]
fn open_file_limit() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Nofile).current
}

#[cfg(not(unix))]
fn open_file_limit() -> Option<u64> {
    None
}
