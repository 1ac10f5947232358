//! `PgProxy`: a TCP proxy on `127.0.0.1:0` in front of the database, whose [`PgProxy::cut`]
//! closes every connection through it and refuses new ones until [`PgProxy::heal`]
//! (docs/design/postgres-store.md §7.1): what a node sees of a database that went away and came
//! back, without touching a database other tests share. A refused connection is accepted and
//! closed at once: the client sees its connection end before the server's first answer, as when
//! a database restarts.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::{AbortHandle, JoinHandle};

/// A TCP proxy on `127.0.0.1:0` in front of the database. [`PgProxy::cut`] closes every
/// connection through it and refuses new ones (accepted, then closed at once) until
/// [`PgProxy::heal`]: what the nodes see of a database that went away, without touching the
/// database other tests share.
pub struct PgProxy {
    address: SocketAddr,
    state: Arc<ProxyState>,
    accept: JoinHandle<()>,
}

#[derive(Default)]
struct ProxyState {
    is_cut: AtomicBool,
    next_link: AtomicU64,
    /// The connections open now: how to end each one, and its upstream local port (the
    /// `client_port` the database sees).
    links: std::sync::Mutex<HashMap<u64, (AbortHandle, u16)>>,
}

impl PgProxy {
    /// Listens on a free loopback port and forwards to `upstream`.
    pub async fn start(upstream: SocketAddr) -> PgProxy {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the proxy");
        let address = listener.local_addr().expect("the proxy's address");
        let state = Arc::new(ProxyState::default());
        let accept = tokio::spawn(accept_links(listener, upstream, Arc::clone(&state)));
        PgProxy {
            address,
            state,
            accept,
        }
    }

    /// Where clients connect instead of the database.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Closes every connection through the proxy and refuses new ones until [`Self::heal`].
    pub fn cut(&self) {
        self.state.is_cut.store(true, Ordering::SeqCst);
        let links = std::mem::take(&mut *lock(&self.state.links));
        for (abort, _) in links.into_values() {
            // Dropping the link's task drops both sockets: each side sees its peer close.
            abort.abort();
        }
    }

    /// Lets connections through again.
    pub fn heal(&self) {
        self.state.is_cut.store(false, Ordering::SeqCst);
    }

    /// The upstream local ports of the connections open now.
    pub fn upstream_ports(&self) -> Vec<u16> {
        lock(&self.state.links)
            .values()
            .map(|(_, port)| *port)
            .collect()
    }

    /// Connections open now.
    pub fn link_count(&self) -> usize {
        lock(&self.state.links).len()
    }

    /// Stops listening and closes every connection (as dropping it does).
    pub fn close(&self) {
        self.accept.abort();
        self.cut();
    }
}

impl Drop for PgProxy {
    fn drop(&mut self) {
        self.close();
    }
}

async fn accept_links(listener: TcpListener, upstream: SocketAddr, state: Arc<ProxyState>) {
    loop {
        let Ok((downstream, _)) = listener.accept().await else {
            continue;
        };
        if state.is_cut.load(Ordering::SeqCst) {
            drop(downstream);
            continue;
        }
        let Ok(upstream_stream) = TcpStream::connect(upstream).await else {
            continue;
        };
        let Ok(local) = upstream_stream.local_addr() else {
            continue;
        };
        // The database's protocol is many small messages: without this, Nagle's algorithm
        // holds each behind the peer's delayed ACK (40 ms), which the nodes' own sockets avoid.
        if downstream.set_nodelay(true).is_err() || upstream_stream.set_nodelay(true).is_err() {
            continue;
        }
        let id = state.next_link.fetch_add(1, Ordering::Relaxed);
        let links = Arc::clone(&state);
        // The link is registered before it can end, so its own removal always finds it.
        let mut registry = lock(&state.links);
        let task = tokio::spawn(async move {
            let (mut down, mut up) = (downstream, upstream_stream);
            let _ = tokio::io::copy_bidirectional(&mut down, &mut up).await;
            lock(&links.links).remove(&id);
        });
        registry.insert(id, (task.abort_handle(), local.port()));
    }
}

/// The guarded value; a panic elsewhere while it was held leaves it usable (the links map
/// stays consistent between statements).
fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Where the URL's database listens (the proxy's upstream).
pub fn upstream_address(url: &str) -> SocketAddr {
    let config: tokio_postgres::Config = url.parse().expect("a PostgreSQL URL");
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(host)) => host.clone(),
        other => panic!("the proxy needs a TCP host in {url}, not {other:?}"),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let host = if host == "localhost" {
        "127.0.0.1".to_owned()
    } else {
        host
    };
    format!("{host}:{port}")
        .parse()
        .unwrap_or_else(|e| panic!("the proxy needs an IP address in {url}: {e}"))
}
