//! Accepting and serving connections, bounded in number and in time.
//!
//! - At most `max_connections` connections are served at once; the next is accepted only when
//!   one closes, so more wait in the kernel's listen backlog instead of taking file descriptors.
//! - A client must send a request's headers within `header_read_timeout` of the connection's
//!   start or of its previous response (hyper's header-read timer, which runs while the
//!   connection waits for a request): a half-open or slowloris connection, and an idle
//!   keep-alive one, is closed. A request being answered (a long poll) is not waiting for
//!   headers, so it is never cut. The TLS handshake gets the same time.
//! - HTTP/1.1 only, over plain TCP and TLS alike (ALPN offers `http/1.1`): hyper's header-read
//!   timer is an HTTP/1 feature, and an HTTP/2 connection would be held without one.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use axum_server::accept::Accept;
use axum_server::tls_rustls::{RustlsAcceptor, RustlsConfig};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::config::Limits;

/// How long shutdown waits for requests in progress before it closes their connections.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);
/// File descriptors kept for everything but client connections (the store's database, WAL and
/// read connections, push requests, logs) when the open-file limit lowers `max_connections`.
const RESERVED_FDS: u64 = 256;
/// Pause after a failed accept (e.g. out of file descriptors), so the loop does not spin.
const ACCEPT_RETRY: Duration = Duration::from_millis(50);

/// Serves `app` on `listener` until `shutdown` is cancelled, then lets requests in progress
/// finish (for at most [`SHUTDOWN_GRACE`]).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    tls: Option<RustlsConfig>,
    limits: &Limits,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let max_connections = connection_limit(limits.max_connections);
    let slots = Arc::new(Semaphore::new(max_connections));
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let http = Arc::new(http);
    let tls = tls.map(|config| {
        RustlsAcceptor::new(http1_only(config)).handshake_timeout(limits.header_read_timeout)
    });
    let graceful = GracefulShutdown::new();
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
            peer,
            http: http.clone(),
            watcher: graceful.watcher(),
        };
        let tls = tls.clone();
        tokio::spawn(async move {
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
    // New connections are refused from here on; those open finish what they are doing.
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(SHUTDOWN_GRACE) => {
            tracing::warn!("requests still in progress after {SHUTDOWN_GRACE:?} of shutdown are cut off");
        }
    }
    Ok(())
}

/// One accepted connection.
struct Connection {
    app: Router,
    peer: SocketAddr,
    http: Arc<hyper::server::conn::http1::Builder>,
    watcher: Watcher,
}

impl Connection {
    async fn serve<I: AsyncRead + AsyncWrite + Unpin + Send + 'static>(self, io: I) {
        let Connection {
            app,
            peer,
            http,
            watcher,
        } = self;
        let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
            request.extensions_mut().insert(ConnectInfo(peer));
            tower::ServiceExt::oneshot(app.clone(), request)
        });
        let connection = http.serve_connection(TokioIo::new(io), service);
        if let Err(error) = watcher.watch(connection).await {
            // Timeouts and clients going away end connections all the time.
            tracing::debug!(%peer, %error, "connection ended");
        }
    }
}

/// Offers only HTTP/1.1 in ALPN, as only HTTP/1.1 is served.
fn http1_only(config: RustlsConfig) -> RustlsConfig {
    let mut server_config = (*config.get_inner()).clone();
    server_config.alpn_protocols = vec![b"http/1.1".to_vec()];
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
