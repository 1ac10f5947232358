//! `--nodes N`: several servers on one PostgreSQL schema, and the load spread over them
//! round-robin, request by request (a receipt from one node is acked on whichever node the next
//! request goes to, as behind a load balancer).

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use sluice_client::Client;

use crate::load::{Api, Bodies, Outcome, Received};

/// The clients of every node, taken in turn.
#[derive(Clone)]
pub struct Nodes {
    clients: Arc<[Client]>,
    next: Arc<AtomicUsize>,
}

impl Nodes {
    /// Round-robin over `clients` (at least one).
    pub fn new(clients: Vec<Client>) -> Self {
        assert!(!clients.is_empty(), "at least one node");
        Self {
            clients: clients.into(),
            next: Arc::new(AtomicUsize::new(0)),
        }
    }

    fn pick(&self) -> &Client {
        let turn = self.next.fetch_add(1, Ordering::Relaxed);
        &self.clients[turn % self.clients.len()]
    }
}

impl Api for Nodes {
    type Error = sluice_client::Error;

    fn own_pool(&self) -> Self {
        Self::new(self.clients.iter().map(Api::own_pool).collect())
    }

    async fn send(
        &self,
        queue: &str,
        bodies: &Bodies,
        seqs: Range<u64>,
        single: bool,
    ) -> Result<Outcome<Self::Error>, Self::Error> {
        Api::send(self.pick(), queue, bodies, seqs, single).await
    }

    async fn receive(
        &self,
        queue: &str,
        max: i64,
        wait_ms: i64,
    ) -> Result<Vec<Received>, Self::Error> {
        Api::receive(self.pick(), queue, max, wait_ms).await
    }

    async fn ack(
        &self,
        queue: &str,
        receipts: Vec<String>,
    ) -> Result<Outcome<Self::Error>, Self::Error> {
        Api::ack(self.pick(), queue, receipts).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_go_to_each_node_in_turn() {
        let clients = [
            "http://127.0.0.1:1",
            "http://127.0.0.1:2",
            "http://127.0.0.1:3",
        ]
        .map(|url| Client::new(url).unwrap());
        let nodes = Nodes::new(clients.to_vec());
        let picked: Vec<String> = (0..6)
            .map(|_| nodes.pick().base_url().port().unwrap().to_string())
            .collect();
        assert_eq!(picked, ["1", "2", "3", "1", "2", "3"]);
    }
}
