//! The one place where what PostgreSQL, the driver and the pool report becomes a
//! [`StoreError`] by meaning (docs/design/postgres-store.md §5.1), so no caller matches on
//! SQLSTATEs or driver types.
//!
//! | Cause | `StoreError` |
//! |---|---|
//! | the TLS handshake refused (a certificate not trusted), connection refused, reset or closed, a pool wait that timed out, SQLSTATE class `08`, `57P01`/`57P02`/`57P03`, `53300`, `25006`, class `58` | `Unavailable` |
//! | `40P01` (deadlock), `40001` (serialization), once the store's retries are spent | `Unavailable` |
//! | `57014` (statement timeout), `55P03` (lock timeout) | `Unavailable` |
//! | `53100` (disk full on the database server) | `DiskFull` |
//! | anything else | `Other`, with its source |

use std::error::Error as _;

use deadpool_postgres::PoolError;
use sluice_core::store::{StoreError, StoreResult};
use tokio_postgres::error::SqlState;

/// What a call into the database can fail with, before it is sorted by meaning. Code uses
/// [`Db::db`] to turn it into a [`StoreError`] on the spot.
#[derive(Debug)]
pub(crate) enum DbError {
    /// The driver or the database.
    Postgres(tokio_postgres::Error),
    /// The pool (which may carry a driver error).
    Pool(PoolError),
}

impl From<tokio_postgres::Error> for DbError {
    fn from(error: tokio_postgres::Error) -> Self {
        DbError::Postgres(error)
    }
}

impl From<PoolError> for DbError {
    fn from(error: PoolError) -> Self {
        DbError::Pool(error)
    }
}

impl From<DbError> for StoreError {
    fn from(error: DbError) -> Self {
        match error {
            DbError::Postgres(error) => classify(error),
            DbError::Pool(PoolError::Backend(error)) => classify(error),
            DbError::Pool(PoolError::PostCreateHook(deadpool_postgres::HookError::Backend(
                error,
            ))) => classify(error),
            DbError::Pool(PoolError::Closed) => {
                StoreError::Unavailable("the PostgreSQL store is closed".into())
            }
            DbError::Pool(error @ PoolError::Timeout(_)) => StoreError::Unavailable(format!(
                "no database connection within the connect timeout: {error}"
            )),
            DbError::Pool(error) => StoreError::Other(Box::new(error)),
        }
    }
}

/// `.db()?` on a driver or pool result: its error sorted by meaning.
pub(crate) trait Db<T> {
    /// The result with its error as a [`StoreError`].
    fn db(self) -> StoreResult<T>;
}

impl<T, E: Into<DbError>> Db<T> for Result<T, E> {
    fn db(self) -> StoreResult<T> {
        self.map_err(|error| StoreError::from(error.into()))
    }
}

/// A driver error by meaning (the table of the module doc).
pub fn classify(error: tokio_postgres::Error) -> StoreError {
    if let Some(code) = error.code().cloned() {
        return classify_code(&code, error);
    }
    // No SQLSTATE: the TLS handshake refused the server (its certificate, the URL's sslmode),
    // which an operator must fix and is said so; ...
    if crate::tls::is_handshake_error(&error) {
        return StoreError::Unavailable(format!(
            "the TLS handshake with PostgreSQL failed ({}); check the URL's sslmode and [store] ca_file",
            describe(&error)
        ));
    }
    // ... or the connection itself failed (refused, reset, closed, timed out), or the driver
    // refused something of ours (a type, a parameter count), which is a bug.
    let mut io = false;
    let mut source = error.source();
    while let Some(cause) = source {
        io |= cause.is::<std::io::Error>();
        source = cause.source();
    }
    let timed_out = error.to_string().starts_with("timeout");
    if error.is_closed() || io || timed_out {
        return StoreError::Unavailable(describe(&error));
    }
    StoreError::Other(Box::new(error))
}

fn classify_code(code: &SqlState, error: tokio_postgres::Error) -> StoreError {
    let code_text = code.code();
    let unavailable = code_text.starts_with("08")
        || code_text.starts_with("58")
        || [
            SqlState::ADMIN_SHUTDOWN,
            SqlState::CRASH_SHUTDOWN,
            SqlState::CANNOT_CONNECT_NOW,
            SqlState::TOO_MANY_CONNECTIONS,
            SqlState::READ_ONLY_SQL_TRANSACTION,
            SqlState::T_R_DEADLOCK_DETECTED,
            SqlState::T_R_SERIALIZATION_FAILURE,
            SqlState::QUERY_CANCELED,
            SqlState::LOCK_NOT_AVAILABLE,
        ]
        .contains(code);
    if unavailable {
        return StoreError::Unavailable(describe(&error));
    }
    if *code == SqlState::DISK_FULL {
        return StoreError::DiskFull(describe(&error));
    }
    StoreError::Other(Box::new(error))
}

/// Whether `error` is a deadlock or serialization failure, which a transaction that committed
/// nothing may simply try again (§2.0). Read from the text [`describe`] gives it, the one
/// place that writes the SQLSTATE into an `Unavailable`.
pub(crate) fn is_conflict(error: &StoreError) -> bool {
    matches!(error, StoreError::Unavailable(text)
        if text.contains(&format!("({})", SqlState::T_R_DEADLOCK_DETECTED.code()))
            || text.contains(&format!("({})", SqlState::T_R_SERIALIZATION_FAILURE.code())))
}

/// The error with its cause and, for a database error, its SQLSTATE and message: the driver's
/// own `Display` says only "db error" or "error connecting to server".
fn describe(error: &tokio_postgres::Error) -> String {
    match error.as_db_error() {
        Some(db) => format!("{} ({}): {}", error, db.code().code(), db.message()),
        None => match error.source() {
            Some(source) => format!("{error}: {source}"),
            None => error.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deadlock or serialization failure is told apart by the SQLSTATE [`describe`] writes
    /// (the text below is what a real deadlock between two stores produced); other
    /// unavailability and other errors are not retried.
    #[test]
    fn only_deadlocks_and_serialization_failures_are_conflicts() {
        let check = |error: StoreError, expected: bool| {
            assert_eq!(is_conflict(&error), expected, "{error:?}");
        };
        check(
            StoreError::Unavailable("db error (40P01): deadlock detected".into()),
            true,
        );
        check(
            StoreError::Unavailable(
                "db error (40001): could not serialize access due to concurrent update".into(),
            ),
            true,
        );
        check(
            StoreError::Unavailable("db error (57P01): terminating connection".into()),
            false,
        );
        check(StoreError::Conflict("(40P01)".into()), false);
    }
}
