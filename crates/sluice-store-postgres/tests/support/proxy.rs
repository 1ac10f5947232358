//! `PgProxy`: a TCP proxy on `127.0.0.1:0` in front of the database, whose [`PgProxy::cut`]
//! closes every connection through it and refuses new ones until [`PgProxy::heal`]
//! (docs/design/postgres-store.md §7.1): what a node sees of a database that went away and came
//! back, without touching a server other tests share.
//!
//! Self-contained (std and tokio only), so tests of other packages can take it with
//! `#[path = "<relative path to this file>"] mod proxy;` (the multi-node tests of
//! `crates/sluice-cli/tests/cluster/` may).
//!
//! A refused connection is accepted and closed at once: the client sees its connection end
//! before the server's first answer, as when a database restarts.

#![allow(
    dead_code,
    reason = "each test binary uses its own part of the support"
)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A proxy to one upstream address; stops (closing every connection) when dropped.
pub struct PgProxy {
    address: SocketAddr,
    /// True while cut.
    is_cut: Arc<watch::Sender<bool>>,
    /// Connections accepted and piped to the upstream, in all.
    piped: Arc<AtomicU64>,
    accept: JoinHandle<()>,
}

impl PgProxy {
    /// Listens on `127.0.0.1:0` and pipes each connection to `upstream`.
    pub async fn start(upstream: SocketAddr) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let is_cut = Arc::new(watch::Sender::new(false));
        let piped = Arc::new(AtomicU64::new(0));
        let accept = tokio::spawn(accept(listener, upstream, is_cut.clone(), piped.clone()));
        Ok(Self {
            address,
            is_cut,
            piped,
            accept,
        })
    }

    /// Where clients connect.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Closes every connection through the proxy and refuses new ones until [`PgProxy::heal`].
    pub fn cut(&self) {
        self.is_cut.send_replace(true);
    }

    /// Lets connections through again.
    pub fn heal(&self) {
        self.is_cut.send_replace(false);
    }

    /// Connections piped to the upstream since the start (refused ones are not counted).
    pub fn connections_piped(&self) -> u64 {
        self.piped.load(Ordering::Relaxed)
    }
}

impl Drop for PgProxy {
    fn drop(&mut self) {
        self.accept.abort();
        // Every pipe ends with it.
        self.is_cut.send_replace(true);
    }
}

async fn accept(
    listener: TcpListener,
    upstream: SocketAddr,
    is_cut: Arc<watch::Sender<bool>>,
    piped: Arc<AtomicU64>,
) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            // Out of file descriptors, say: try again in a moment rather than spin.
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            continue;
        };
        if *is_cut.borrow() {
            drop(client);
            continue;
        }
        piped.fetch_add(1, Ordering::Relaxed);
        let mut cut = is_cut.subscribe();
        tokio::spawn(async move {
            let Ok(mut server) = TcpStream::connect(upstream).await else {
                return;
            };
            let mut client = client;
            // Until either side closes, or the proxy is cut: then both sockets are dropped,
            // which closes them.
            tokio::select! {
                _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                _ = cut.wait_for(|&is_cut| is_cut) => {}
            }
        });
    }
}
