//! The store conformance suite (`sluice-store-tests`) against the PostgreSQL store: one test
//! per case, each on a fresh schema of the test database, dropped after the case (see
//! `support`).
//!
//! Bring-up: only the cases of what is built so far run (build step 2: queue and webhook
//! definitions). Steps 3 and 4 of docs/design/postgres-store.md §8 grow the list; step 4
//! removes it, and the store then passes every case.

mod support;

use std::sync::Arc;

use sluice_store_postgres::PgStore;
use sluice_store_tests::{ManualClock, Opened};

async fn open(_clock: ManualClock) -> Opened {
    let url = match support::database_url().await {
        Ok(url) => url,
        Err(why) => return Opened::skipped(why),
    };
    let schema = support::fresh_schema();
    let store = PgStore::open(support::options(&url, &schema))
        .await
        .expect("the store opens");
    Opened::new(Arc::new(store)).after_close(support::drop_schema(url, schema))
}

sluice_store_tests::store_conformance!(open; cases = [
    unknown_queues_are_refused,
    queue_definitions_are_kept_whole,
    pauses_are_kept_and_reported,
    webhook_definitions_are_kept_by_name,
]);
