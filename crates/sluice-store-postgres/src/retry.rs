//! One transaction tried again after a deadlock or serialization failure (§2.0): PostgreSQL
//! rolled all of it back, so a new try is safe. Other errors are answered as they are.

use std::future::Future;

use sluice_core::store::StoreResult;

use crate::error::is_conflict;
use crate::messages::RETRIES;

/// Runs `attempt` until it does not fail with a conflict, at most [`RETRIES`] times more.
pub(crate) async fn retried<T, F, Fut>(mut attempt: F) -> StoreResult<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = StoreResult<T>>,
{
    let mut tries = 0;
    loop {
        match attempt().await {
            Err(error) if is_conflict(&error) && tries < RETRIES => tries += 1,
            outcome => return outcome,
        }
    }
}
