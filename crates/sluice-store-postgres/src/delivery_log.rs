//! A message's push delivery log (docs/design/postgres-store.md §1.2, §2.12): its last few
//! push attempts in the `deliveries` JSONB column of its row, in the format of
//! `sluice_core::stored::delivery_log` that the SQLite store writes too. An attempt is
//! appended by the statement of the ack or nack it ended with, in the same transaction, so
//! their answer means the attempt is stored; the log follows the row into its dead-letter
//! queue and goes with it.

use sluice_core::message::{DeliveryAttempt, DeliveryLogEntry};
use sluice_core::store::StoreResult;
use sluice_core::stored::delivery_log;

use crate::cached::Cached;

/// The SQL value of `log` (a JSONB column or NULL) with `entry` (JSONB) appended, keeping its
/// last `keep` entries (at least one): a JSON path slice, so the log is never read into Rust.
pub(crate) fn appended(log: &str, entry: &str, keep: &str) -> String {
    format!(
        "jsonb_path_query_array(coalesce({log}, '[]'::jsonb) || jsonb_build_array({entry}), \
                                '$[last - ($keep - 1) to last]', \
                                jsonb_build_object('keep', greatest({keep}, 1)))"
    )
}

/// An attempt and how many the log keeps, as the statements take them: the attempt's JSON
/// text (cast to JSONB in SQL) and the bound.
pub(crate) fn columns(entry: &DeliveryLogEntry) -> (String, i32) {
    (
        delivery_log::encode(entry.attempt.clone()),
        i32::try_from(entry.keep).unwrap_or(i32::MAX),
    )
}

/// Appends `entry` to the log of message `seq` inside `transaction` (a nack's attempt; an ack
/// group appends its own in its statement).
pub(crate) async fn append(
    transaction: &deadpool_postgres::Transaction<'_>,
    seq: i64,
    entry: &DeliveryLogEntry,
) -> StoreResult<()> {
    let (attempt, keep) = columns(entry);
    transaction
        .execute_cached(
            &format!(
                "UPDATE messages SET deliveries = {} WHERE seq = $1",
                appended("deliveries", "$2::text::jsonb", "$3::int")
            ),
            &[&seq, &attempt, &keep],
        )
        .await?;
    Ok(())
}

/// A stored log, oldest first (none when the message was never pushed).
pub(crate) fn read(log: Option<serde_json::Value>) -> Vec<DeliveryAttempt> {
    log.map(delivery_log::decode_log).unwrap_or_default()
}
