//! The `body_kind` column: a [`BodyKind`] as the integer every database file already holds
//! (0 = JSON, 1 = bytes). The numbers are this store's on-disk format, so they live here, not
//! in the core type; changing them would need a schema migration.

use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSql, ToSqlOutput, ValueRef};
use sluice_core::message::BodyKind;

const JSON: i64 = 0;
const BYTES: i64 = 1;

/// A [`BodyKind`] read from or written to the `body_kind` column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BodyKindColumn(pub BodyKind);

impl ToSql for BodyKindColumn {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::from(match self.0 {
            BodyKind::Json => JSON,
            BodyKind::Bytes => BYTES,
        }))
    }
}

impl FromSql for BodyKindColumn {
    /// A value this build never writes (a newer file, or damage) is an error, not a guess.
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        match value.as_i64()? {
            JSON => Ok(Self(BodyKind::Json)),
            BYTES => Ok(Self(BodyKind::Bytes)),
            other => Err(FromSqlError::OutOfRange(other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each kind is stored as the integer files written before this type already hold, and
    /// reads back as itself; an unknown integer is refused.
    #[test]
    fn kinds_keep_their_integers_on_disk() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        for (kind, stored) in [(BodyKind::Json, 0_i64), (BodyKind::Bytes, 1)] {
            let (as_integer, back): (i64, BodyKindColumn) = conn
                .query_row("SELECT ?1, ?1", [BodyKindColumn(kind)], |row| {
                    Ok((row.get(0)?, row.get(1)?))
                })
                .unwrap();
            assert_eq!((as_integer, back.0), (stored, kind));
        }
        let unknown = conn.query_row("SELECT 7", [], |row| row.get::<_, BodyKindColumn>(0));
        assert!(unknown.is_err(), "{unknown:?}");
    }
}
