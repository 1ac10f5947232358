//! Every test of the PostgreSQL store, in one test binary: one link instead of one per file
//! (the files keep their names; `cargo test -p sluice-store-postgres --test postgres outage::`
//! runs one of them). Each file's own doc says what it covers.

mod support;

mod conformance;
mod crash;
mod enqueue_sql;
mod nodes;
mod operations;
mod outage;
mod payloads;
mod plans;
mod races;
mod rules_sql;
mod sessions;
mod store;
mod tls;
mod upkeep;
