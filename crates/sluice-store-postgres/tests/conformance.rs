//! The store conformance suite (`sluice-store-tests`) against the PostgreSQL store: one test
//! per case, each on a fresh schema of the test database, dropped after the case (see
//! `support`).
//!
//! Every case of the suite runs, as for the SQLite store. After every case the store's
//! invariants are checked in SQL (`support::broken_invariants`).

use crate::support;

use std::sync::Arc;

use sluice_store_postgres::PgStore;
use sluice_store_tests::{ManualClock, Opened};

async fn open(_clock: ManualClock) -> Opened {
    let url = match support::database_url().await {
        Ok(url) => url,
        Err(why) => return Opened::skipped(why),
    };
    let schema = support::fresh_schema();
    let options = support::options(&url, &schema);
    let store = PgStore::open(options.clone())
        .await
        .expect("the store opens");
    Opened::new(Arc::new(store))
        .reopening(move || {
            let options = options.clone();
            async move {
                Arc::new(PgStore::open(options).await.expect("the store opens again"))
                    as Arc<dyn sluice_store_tests::Store>
            }
        })
        // The store's invariants are checked in SQL after every case (§2.15), then the schema goes.
        .after_close(support::check_and_drop(url, schema))
}

sluice_store_tests::store_conformance!(open);
