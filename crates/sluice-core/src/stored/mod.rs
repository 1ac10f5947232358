//! Storage formats every store shares: what a queue's settings look like at rest, how a
//! message id carries its sequence number, and a message's push delivery log. They live here,
//! not in one store, so that the SQLite and PostgreSQL stores write the same bytes (one serde
//! type, one id scheme) and a format changes in one place, with its literal-row tests.

pub mod alert_state;
pub mod delivery_log;
pub mod ids;
pub mod queue_config;
pub mod schedule_state;

pub use alert_state::AlertState;
pub use queue_config::StoredQueueConfig;
pub use schedule_state::ScheduleState;
