//! The writer's inbox and its bound.
//!
//! Requests reach the writer thread over a channel. What could make that channel grow without
//! limit is new data: a stalled or slow writer (a lock held by another connection, a slow disk)
//! while producers keep sending. So the bound is on the bytes of new messages waiting to be
//! stored (`[store] writer_queue_bytes`): an enqueue charges its messages' size before it is
//! sent, and the charge travels with it until its caller is answered (stored and published, or
//! failed), so a caller that gives up does not free room its messages still take.
//!
//! The rule for which writes may be refused:
//! - **New messages (enqueues) are refused** when the charge would pass the bound: nothing has
//!   changed yet (an enqueue enters the index only once stored), so the caller can try again
//!   (`StoreError::Overloaded`, 503 `overloaded` with `Retry-After`). A charge is always taken
//!   while nothing is charged, so a batch bigger than the bound still goes, alone.
//! - **Everything else bypasses the bound**: acks, nacks, claim records, retries, dead-letter
//!   moves, cancels, purges, queue and webhook definitions, replays. Each records a change the
//!   index has already made (or, for definitions and replays, one the caller waits for under
//!   its own limits); refusing or dropping it would leave memory and disk disagreeing, and
//!   waiting for room would hold the index lock on an async thread. They are small (tens of
//!   bytes per message, no bodies: a replay copies bodies on disk) and they keep consumers
//!   draining while producers are held back, as on a full disk.
//!
//! Counting is a relaxed atomic add per request, never a lock.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use sluice_core::message::{NewMessage, Payload};
use sluice_core::store::StoreError;

/// What `Retry-After` says to an enqueue refused because the inbox is full: the writer
/// commits a group in milliseconds when it is not stalled.
const RETRY_AFTER_S: u64 = 1;

/// The inbox's gauges and bound, shared by the senders and the writer.
#[derive(Debug)]
pub struct Inbox {
    /// Most bytes of new messages charged at once.
    max_bytes: u64,
    /// Bytes of new messages charged now (sent, not yet answered).
    bytes: AtomicU64,
    /// Requests of every kind sent and not yet taken by the writer thread.
    ops: AtomicU64,
}

impl Inbox {
    /// An inbox holding at most `max_bytes` of new messages.
    pub fn new(max_bytes: u64) -> Self {
        Self {
            max_bytes,
            bytes: AtomicU64::new(0),
            ops: AtomicU64::new(0),
        }
    }

    /// Charges `messages`, or refuses them if that would pass the bound (nothing charged then).
    pub fn charge(self: &Arc<Self>, messages: &[NewMessage]) -> Result<Charge, StoreError> {
        let bytes = messages.iter().map(message_bytes).sum::<u64>();
        let mut held = self.bytes.load(Ordering::Relaxed);
        loop {
            if held > 0 && held.saturating_add(bytes) > self.max_bytes {
                return Err(StoreError::Overloaded {
                    pending_bytes: held,
                    max_bytes: self.max_bytes,
                    retry_after_s: RETRY_AFTER_S,
                });
            }
            match self.bytes.compare_exchange_weak(
                held,
                held + bytes,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    return Ok(Charge {
                        inbox: self.clone(),
                        bytes,
                    });
                }
                Err(now) => held = now,
            }
        }
    }

    /// A request of any kind was sent.
    pub fn sent(&self) {
        self.ops.fetch_add(1, Ordering::Relaxed);
    }

    /// The writer took a request from the channel.
    pub fn taken(&self) {
        self.ops.fetch_sub(1, Ordering::Relaxed);
    }

    /// Bytes of new messages charged now.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Requests waiting in the channel now.
    pub fn ops(&self) -> u64 {
        self.ops.load(Ordering::Relaxed)
    }
}

/// The room an enqueue holds in the inbox; given back when dropped (its caller answered).
#[derive(Debug)]
pub struct Charge {
    inbox: Arc<Inbox>,
    bytes: u64,
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.inbox.bytes.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

/// Memory a message holds while it waits: its body, headers and keys, and its structs.
fn message_bytes(message: &NewMessage) -> u64 {
    let keys = message.key.as_ref().map_or(0, String::len)
        + message.idempotency_key.as_ref().map_or(0, String::len);
    let structs = std::mem::size_of::<NewMessage>() + std::mem::size_of::<Payload>();
    (message.payload.weight_bytes() + keys + structs) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(body_bytes: usize) -> NewMessage {
        NewMessage {
            idempotency_key: None,
            payload: Arc::new(Payload {
                body_bytes: vec![0; body_bytes],
                body_kind: sluice_core::message::BodyKind::Bytes,
                headers: Default::default(),
            }),
            key: None,
            priority: 0,
            visible_at_ms: 0,
            dead_letter: None,
        }
    }

    #[test]
    fn charges_up_to_the_bound_and_gives_back_on_drop() {
        let inbox = Arc::new(Inbox::new(10_000));
        let first = inbox.charge(&[message(4_000)]).expect("fits");
        let second = inbox.charge(&[message(4_000)]).expect("fits");
        let held = inbox.bytes();
        assert!(held > 8_000 && held <= 10_000, "{held}");
        let refused = inbox.charge(&[message(4_000)]).unwrap_err();
        assert!(
            matches!(refused, StoreError::Overloaded { pending_bytes, max_bytes: 10_000, retry_after_s: 1 } if pending_bytes == held),
            "{refused:?}"
        );
        assert_eq!(inbox.bytes(), held, "a refusal charges nothing");
        drop(first);
        let third = inbox.charge(&[message(4_000)]).expect("room again");
        drop((second, third));
        assert_eq!(inbox.bytes(), 0);
    }

    #[test]
    fn a_batch_bigger_than_the_bound_goes_alone() {
        let inbox = Arc::new(Inbox::new(1_000));
        let big = inbox.charge(&[message(5_000)]).expect("nothing else waits");
        assert!(inbox.charge(&[message(1)]).is_err());
        drop(big);
        assert!(inbox.charge(&[message(1)]).is_ok());
    }
}
