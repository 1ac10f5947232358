//! What sluice's test suites share, written once: starting a server ([`server::Launch`] for
//! the `sluice serve` binary, [`server::in_process`] for a server in the test's process),
//! [`eventually`] (wait for a condition, never a fixed sleep before an assert), the test
//! PostgreSQL database with a fresh schema per test ([`postgres`]), and a TCP proxy in front of
//! it that can cut it away ([`proxy::PgProxy`]).
//! A dev-dependency only; nothing here is shipped.

pub mod postgres;
pub mod proxy;
pub mod server;

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

/// How often [`eventually`] looks again.
const POLL_EVERY: Duration = Duration::from_millis(20);

/// Looks at `check` every 20 ms until it holds and returns how long that took; fails the test,
/// naming `what`, when it does not hold within `limit`.
pub async fn eventually<F, Fut>(what: &str, limit: Duration, mut check: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let started = Instant::now();
    while !check().await {
        assert!(started.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(POLL_EVERY).await;
    }
    started.elapsed()
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn eventually_returns_once_the_condition_holds() {
        let looks = AtomicU32::new(0);
        let took = eventually("the third look", Duration::from_secs(1), || async {
            looks.fetch_add(1, Ordering::SeqCst) == 2
        })
        .await;
        assert_eq!(looks.load(Ordering::SeqCst), 3);
        assert_eq!(took, POLL_EVERY * 2);
    }

    #[tokio::test(start_paused = true)]
    #[should_panic(expected = "never: not within")]
    async fn eventually_fails_the_test_past_its_limit() {
        eventually("never", Duration::from_millis(100), || async { false }).await;
    }
}
