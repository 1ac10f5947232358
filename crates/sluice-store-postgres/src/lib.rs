//! The PostgreSQL store of sluice (issue 15): several `sluice serve` nodes on one database.
//! Its design is docs/design/postgres-store.md; the crate is built in the steps of its §8.
