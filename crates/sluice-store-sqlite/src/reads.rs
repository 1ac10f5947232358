//! Lookups that read and change nothing: a message's status, a browse page, its body, its push
//! delivery log. The index answers for live messages; rows it no longer holds are read back
//! from disk on the pooled read-only connections.

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};
use sluice_core::Millis;
use sluice_core::message::{DeadLetterInfo, MessageState, MessageStatus, Payload};
use sluice_core::store::LookupStore;
use sluice_core::store::Seq;
use sluice_core::store::{
    AckedSearch, BrowsePage, BrowseQuery, BrowseState, BrowsedMessage, MessageBody,
    MessageGetParams, MessageRef, StoreError, StoreResult,
};
use uuid::Uuid;

use crate::{SharedSqliteStore, body_kind, delivery_log, schema, writer};
use sluice_core::stored::ids;

/// Members a browse of waiting messages looks at per page, so it never holds the index for long.
const BROWSE_SCAN_MAX: usize = 10_000;

impl SharedSqliteStore {
    /// The message a lookup names, resolving an idempotency key through its durable record
    /// (which also remembers the ack and result).
    pub(crate) async fn resolve(
        &self,
        queue: &str,
        by: MessageRef,
        now_ms: Millis,
    ) -> StoreResult<Option<writer::IdempotencyRecord>> {
        match by {
            MessageRef::Id(message_id) => Ok(Some(writer::IdempotencyRecord {
                message_id,
                acked_at_ms: None,
                result: None,
            })),
            MessageRef::IdempotencyKey(key) => {
                let queue = queue.to_owned();
                self.0
                    .read(move |conn| writer::find_idempotent(conn, &queue, &key, now_ms))
                    .await
            }
        }
    }

    /// A message with its body and headers, while it still has them; with `prefix`, only that
    /// many bytes of the body are read (and no headers).
    pub(crate) async fn body(
        &self,
        params: MessageGetParams,
        prefix: Option<usize>,
    ) -> StoreResult<Option<MessageBody>> {
        let now_ms = params.now_ms;
        let Some(status) = self.message_get(params).await? else {
            return Ok(None);
        };
        // Final rows keep no body, except a replayed dead letter's and an acked one's while
        // its queue keeps it.
        let kept = status.kept_until_ms.is_some();
        if status.state.is_final() && status.state != MessageState::Replayed && !kept {
            return Ok(Some(MessageBody {
                status,
                payload: None,
            }));
        }
        let Some(seq) = ids::decode(&status.message_id) else {
            return Ok(Some(MessageBody {
                status,
                payload: None,
            }));
        };
        if kept {
            // Read with its keep: the cleanup may have dropped the body since the status read.
            let payload = self
                .0
                .read(move |conn| read_kept_payload(conn, seq, now_ms, prefix))
                .await?;
            return Ok(Some(MessageBody { status, payload }));
        }
        let cached = self.0.index.lock().payload_of(seq);
        let payload = match (cached, prefix) {
            (Some(payload), None) => Some((*payload).clone()),
            (Some(payload), Some(max)) => Some(Payload {
                body_bytes: payload.body_bytes[..payload.body_bytes.len().min(max)].to_vec(),
                body_kind: payload.body_kind,
                headers: Default::default(),
            }),
            (None, None) => self
                .0
                .read(move |conn| read_payloads(conn, &[seq]))
                .await?
                .pop()
                .map(|(_, payload)| payload),
            (None, Some(max)) => {
                self.0
                    .read(move |conn| read_payload_prefix(conn, seq, max))
                    .await?
            }
        };
        Ok(Some(MessageBody { status, payload }))
    }
}

/// What an idempotency key remembers of a message acked longer ago than its record is kept.
fn remembered_ack(queue: &str, key: &str, record: writer::IdempotencyRecord) -> MessageStatus {
    let acked_at_ms = record.acked_at_ms.unwrap_or_default();
    // Message ids are UUIDv7 stamped at enqueue.
    let enqueued_at_ms = record
        .message_id
        .get_timestamp()
        .map_or(acked_at_ms, |stamp| {
            let (seconds, nanos) = stamp.to_unix();
            seconds as Millis * 1000 + Millis::from(nanos / 1_000_000)
        });
    MessageStatus {
        message_id: record.message_id,
        queue: queue.to_owned(),
        state: MessageState::Acked,
        idempotency_key: Some(key.to_owned()),
        key: None,
        priority: 0,
        attempts: 0,
        enqueued_at_ms,
        first_received_at_ms: None,
        visible_at_ms: enqueued_at_ms,
        lease_expires_at_ms: None,
        last_error: None,
        acked_at_ms: Some(acked_at_ms),
        finished_at_ms: Some(acked_at_ms),
        dead_letter: None,
        result: record.result,
        kept_until_ms: None,
        replayed_as: None,
        failures: Vec::new(),
    }
}

/// The failure log as stored (a JSON array); an unreadable one is treated as empty.
fn parse_failures(text: Option<String>) -> Vec<sluice_core::message::Failure> {
    text.and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default()
}

/// The failure log of a message the index holds (it lives on disk only).
fn read_failures(
    conn: &Connection,
    id: Uuid,
) -> rusqlite::Result<Vec<sluice_core::message::Failure>> {
    let Some(seq) = ids::decode(&id) else {
        return Ok(Vec::new());
    };
    let text: Option<Option<String>> = conn
        .prepare_cached("SELECT failures FROM messages WHERE seq = ?1")?
        .query_row(params![seq as i64], |row| row.get(0))
        .optional()?;
    Ok(parse_failures(text.flatten()))
}

/// Bodies and headers of the rows `seqs` still holding one (cache misses).
pub(crate) fn read_payloads(
    conn: &Connection,
    seqs: &[Seq],
) -> rusqlite::Result<Vec<(Seq, Payload)>> {
    let mut statement =
        conn.prepare_cached("SELECT body, body_kind, headers FROM messages WHERE seq = ?1")?;
    let mut payloads = Vec::with_capacity(seqs.len());
    for &seq in seqs {
        let row = statement
            .query_row(params![seq as i64], |row| payload_at(row, 0))
            .optional()?;
        if let Some(payload) = row {
            payloads.push((seq, payload));
        }
    }
    Ok(payloads)
}

/// The first `max` bytes of row `seq`'s body, and its kind, while `condition` holds (`?2` is
/// `now_ms`). The body is read through SQLite's incremental blob I/O, which follows its chain
/// of overflow pages only as far as the bytes read (a query of the column, `substr` too, loads
/// the whole value first), and `length` reads the length from the row's header alone.
fn read_prefix(
    conn: &Connection,
    seq: Seq,
    max: usize,
    condition: &str,
    now_ms: Millis,
) -> rusqlite::Result<Option<Payload>> {
    let found = conn
        .prepare_cached(&format!(
            "SELECT body_kind, length(body) FROM messages WHERE seq = ?1 AND {condition}"
        ))?
        .query_row(params![seq as i64, now_ms], |row| {
            Ok((
                row.get::<_, body_kind::BodyKindColumn>(0)?,
                row.get::<_, Option<i64>>(1)?,
            ))
        })
        .optional()?;
    let Some((kind, Some(length))) = found else {
        return Ok(None);
    };
    let mut body = vec![0u8; max.min(usize::try_from(length).unwrap_or(0))];
    if !body.is_empty() {
        let blob = conn.blob_open(rusqlite::MAIN_DB, c"messages", c"body", seq as i64, true)?;
        blob.read_at_exact(&mut body, 0)?;
    }
    Ok(Some(Payload {
        body_bytes: body,
        body_kind: kind.0,
        headers: Default::default(),
    }))
}

/// The first `max` bytes of row `seq`'s body (see [`read_prefix`]).
fn read_payload_prefix(
    conn: &Connection,
    seq: Seq,
    max: usize,
) -> rusqlite::Result<Option<Payload>> {
    read_prefix(conn, seq, max, "?2 = ?2", 0)
}

/// The body and headers of kept acked row `seq` while its keep lasts at `now_ms` (with
/// `prefix`, only that many bytes of the body and no headers).
fn read_kept_payload(
    conn: &Connection,
    seq: Seq,
    now_ms: Millis,
    prefix: Option<usize>,
) -> rusqlite::Result<Option<Payload>> {
    match prefix {
        None => conn
            .prepare_cached(
                "SELECT body, body_kind, headers FROM messages
                 WHERE seq = ?1 AND kept_until > ?2 AND body IS NOT NULL",
            )?
            .query_row(params![seq as i64, now_ms], |row| payload_at(row, 0))
            .optional(),
        Some(max) => read_prefix(conn, seq, max, "kept_until > ?2", now_ms),
    }
}

/// The payload in the columns `body, body_kind, headers` of `row`, from column `first` on.
pub(crate) fn payload_at(row: &rusqlite::Row<'_>, first: usize) -> rusqlite::Result<Payload> {
    let body: Option<Vec<u8>> = row.get(first)?;
    let kind: body_kind::BodyKindColumn = row.get(first + 1)?;
    let headers: Option<String> = row.get(first + 2)?;
    Ok(Payload {
        body_bytes: body.unwrap_or_default(),
        body_kind: kind.0,
        headers: headers
            .and_then(|h| serde_json::from_str(&h).ok())
            .unwrap_or_default(),
    })
}

/// The dead-letter record in the columns `dead_source_queue, dead_last_error, dead_attempts,
/// dead_first_seen_at, dead_last_seen_at` of `row`, from column `first` on; `None` for a
/// message that is not a dead letter.
pub(crate) fn dead_letter_at(
    row: &rusqlite::Row<'_>,
    first: usize,
) -> rusqlite::Result<Option<DeadLetterInfo>> {
    let Some(source_queue) = row.get::<_, Option<String>>(first)? else {
        return Ok(None);
    };
    Ok(Some(DeadLetterInfo {
        source_queue,
        last_error: row.get(first + 1)?,
        attempts: row.get(first + 2)?,
        first_seen_at_ms: row.get(first + 3)?,
        last_seen_at_ms: row.get(first + 4)?,
    }))
}

/// The columns [`status_at`] reads, in its order.
const STATUS_COLUMNS: &str = "queue, state, idempotency_key, msg_key, priority, attempts, enqueued_at, first_received_at, visible_at, last_error, acked_at,
    dead_source_queue, dead_last_error, dead_attempts, dead_first_seen_at, dead_last_seen_at, result, replayed_as, failures, kept_until";

/// Status of a message as stored: for one the index does not hold, in a final state (or gone).
/// Its `kept_until_ms` is as stored, also once past.
pub(crate) fn read_status(conn: &Connection, id: Uuid) -> rusqlite::Result<Option<MessageStatus>> {
    conn.prepare_cached(&format!(
        "SELECT {STATUS_COLUMNS} FROM messages WHERE seq = ?1 AND id = ?2"
    ))?
    .query_row(
        params![ids::decode(&id).map_or(-1, |seq| seq as i64), id.as_bytes()],
        |row| status_at(row, id),
    )
    .optional()
}

/// The status in the columns [`STATUS_COLUMNS`] of `row`, for message `id`.
fn status_at(row: &rusqlite::Row<'_>, id: Uuid) -> rusqlite::Result<MessageStatus> {
    let state: i64 = row.get(1)?;
    let dead_letter = dead_letter_at(row, 11)?;
    let state = schema::message_state(state);
    let finished_at_ms: Option<Millis> = row.get(10)?;
    let replayed_as: Option<Vec<u8>> = row.get(17)?;
    Ok(MessageStatus {
        message_id: id,
        queue: row.get(0)?,
        state,
        idempotency_key: row.get(2)?,
        key: row.get(3)?,
        priority: row.get(4)?,
        attempts: row.get(5)?,
        enqueued_at_ms: row.get(6)?,
        first_received_at_ms: row.get(7)?,
        visible_at_ms: row.get(8)?,
        lease_expires_at_ms: None,
        last_error: row.get(9)?,
        acked_at_ms: finished_at_ms.filter(|_| state == MessageState::Acked),
        finished_at_ms: finished_at_ms.filter(|_| state.is_final()),
        dead_letter,
        result: row.get(16)?,
        kept_until_ms: row.get(19)?,
        replayed_as: replayed_as.and_then(|bytes| Uuid::from_slice(&bytes).ok()),
        failures: parse_failures(row.get(18)?),
    })
}

/// The statement of a page of kept acked messages for the search conditions given: only those
/// conditions, on the index that serves them (schema version 8), so each search reads the
/// index range it names, not every kept row of the queue: a message id by primary key, an
/// idempotency key or an ordering key by its partial index, else the queue's kept rows by ack
/// time. Each index holds (.., acked_at, seq) last, so pages come in order from the cursor.
/// Named parameters: `:queue`, `:now`, `:limit`, and `:seq`, `:idempotency_key`, `:key`,
/// `:since`, `:until`, `:after_at`, `:after_seq` when used.
pub(crate) fn acked_page_sql(search: &AckedSearch, after: bool) -> String {
    let (index, mut conditions) = if search.message_id.is_some() {
        ("", vec!["seq = :seq"])
    } else if search.idempotency_key.is_some() {
        ("INDEXED BY messages_kept_idempotency", Vec::new())
    } else if search.key.is_some() {
        ("INDEXED BY messages_kept_key", Vec::new())
    } else {
        ("INDEXED BY messages_kept", Vec::new())
    };
    conditions.push("queue = :queue AND kept_until IS NOT NULL AND kept_until > :now");
    for (given, condition) in [
        (
            search.idempotency_key.is_some(),
            "idempotency_key = :idempotency_key",
        ),
        (search.key.is_some(), "msg_key = :key"),
        (search.since_ms.is_some(), "acked_at >= :since"),
        (search.until_ms.is_some(), "acked_at < :until"),
        (after, "(acked_at, seq) < (:after_at, :after_seq)"),
    ] {
        if given {
            conditions.push(condition);
        }
    }
    format!(
        "SELECT {STATUS_COLUMNS}, id, length(body) FROM messages {index}
         WHERE {} ORDER BY acked_at DESC, seq DESC LIMIT :limit",
        conditions.join(" AND ")
    )
}

/// Up to `limit` acked messages of `query.queue` still keeping their body at `query.now_ms`,
/// newest ack first from `query.after`, narrowed by `query.search`.
fn read_acked(
    conn: &Connection,
    query: &BrowseQuery,
    limit: usize,
) -> rusqlite::Result<Vec<BrowsedMessage>> {
    let search = &query.search;
    let mut statement = conn.prepare_cached(&acked_page_sql(search, query.after.is_some()))?;
    let seq = search
        .message_id
        .map(|id| ids::decode(&id).map_or(-1, |seq| seq as i64));
    let after = query
        .after
        .map(|(at, seq)| (at, seq.min(i64::MAX as u64) as i64));
    let limit = limit as i64;
    let mut named: Vec<(&str, &dyn rusqlite::ToSql)> = vec![
        (":queue", &query.queue),
        (":now", &query.now_ms),
        (":limit", &limit),
    ];
    let optional: [(&str, Option<&dyn rusqlite::ToSql>); 7] = [
        (":seq", seq.as_ref().map(|v| v as _)),
        (
            ":idempotency_key",
            search.idempotency_key.as_ref().map(|v| v as _),
        ),
        (":key", search.key.as_ref().map(|v| v as _)),
        (":since", search.since_ms.as_ref().map(|v| v as _)),
        (":until", search.until_ms.as_ref().map(|v| v as _)),
        (":after_at", after.as_ref().map(|(at, _)| at as _)),
        (":after_seq", after.as_ref().map(|(_, seq)| seq as _)),
    ];
    named.extend(
        optional
            .into_iter()
            .filter_map(|(name, value)| Some((name, value?))),
    );
    let rows = statement.query_map(named.as_slice(), |row| {
        let id_bytes: Vec<u8> = row.get(20)?;
        let id = Uuid::from_slice(&id_bytes).unwrap_or_default();
        let body_bytes: Option<i64> = row.get(21)?;
        Ok(BrowsedMessage {
            status: status_at(row, id)?,
            leased_at_ms: None,
            body_bytes: body_bytes.map(|bytes| bytes as u64),
        })
    })?;
    let messages: Vec<BrowsedMessage> = rows.collect::<rusqlite::Result<_>>()?;
    // A message id names one row: one whose id is not the one asked for is not it.
    Ok(messages
        .into_iter()
        .filter(|message| {
            search
                .message_id
                .is_none_or(|id| id == message.status.message_id)
        })
        .collect())
}

#[async_trait]
impl LookupStore for SharedSqliteStore {
    async fn message_body(&self, params: MessageGetParams) -> StoreResult<Option<MessageBody>> {
        self.body(params, None).await
    }

    async fn message_body_prefix(
        &self,
        params: MessageGetParams,
        max_bytes: usize,
    ) -> StoreResult<Option<MessageBody>> {
        self.body(params, Some(max_bytes)).await
    }

    /// Where a message is now, named by id or idempotency key (`Store::message_get`).
    async fn message_get(&self, params: MessageGetParams) -> StoreResult<Option<MessageStatus>> {
        let store = &self.0;
        if store.index.lock().queue_config(&params.queue).is_none() {
            return Err(StoreError::QueueNotFound(params.queue));
        }
        let Some(record) = self
            .resolve(&params.queue, params.by.clone(), params.now_ms)
            .await?
        else {
            return Ok(None);
        };
        let id = record.message_id;
        let belongs = |status: &MessageStatus| {
            status.queue == params.queue
                || status
                    .dead_letter
                    .as_ref()
                    .is_some_and(|d| d.source_queue == params.queue)
        };
        let live = store.index.lock().status(&id);
        if let Some(mut status) = live {
            if !belongs(&status) {
                return Ok(None);
            }
            // Failed attempts are only on disk; messages that never failed need no read. The
            // latest failure may still be queued for the writer (the index changes first), so
            // wait for what is queued to be committed before reading.
            if status.last_error.is_some() {
                store.flush().await?;
                status.failures = store.read(move |conn| read_failures(conn, id)).await?;
            }
            return Ok(Some(status));
        }
        let mut status = store.read(move |conn| read_status(conn, id)).await?;
        if status
            .as_ref()
            .is_some_and(|status| !status.state.is_final())
        {
            // A live row the index no longer holds: its final state (an ack, expiry, cancel,
            // purge) is on its way to disk. Wait for the writer, then read what it wrote.
            store.flush().await?;
            status = store.read(move |conn| read_status(conn, id)).await?;
        }
        if status.is_none()
            && let (Some(_), MessageRef::IdempotencyKey(key)) = (record.acked_at_ms, &params.by)
        {
            // The acked record is gone but the key's window is open: it remembers the outcome.
            return Ok(Some(remembered_ack(&params.queue, key, record)));
        }
        Ok(status
            .map(|status| status.kept_as_of(params.now_ms))
            .filter(belongs))
    }

    /// A page of one state's messages in dispatch order, from the index (the acked ones kept
    /// with their body from disk).
    async fn message_browse(&self, query: BrowseQuery) -> StoreResult<BrowsePage> {
        if query.state == BrowseState::Acked {
            let counts = self
                .0
                .index
                .lock()
                .browse_counts(&query.queue)
                .ok_or_else(|| StoreError::QueueNotFound(query.queue.clone()))?;
            let limit = query.limit;
            // One more than the page tells whether another page follows.
            let mut messages = self
                .0
                .read(move |conn| read_acked(conn, &query, limit + 1))
                .await?;
            let more = messages.len() > limit;
            messages.truncate(limit);
            let next = messages.last().filter(|_| more).and_then(|last| {
                Some((
                    last.status.acked_at_ms?,
                    ids::decode(&last.status.message_id)?,
                ))
            });
            return Ok(BrowsePage {
                messages,
                next,
                counts,
            });
        }
        let index = self.0.index.lock();
        let (entries, next) = index
            .browse(
                &query.queue,
                query.state,
                query.after,
                query.limit,
                BROWSE_SCAN_MAX,
            )
            .ok_or_else(|| StoreError::QueueNotFound(query.queue.clone()))?;
        let messages = entries
            .into_iter()
            .filter_map(|entry| {
                Some(BrowsedMessage {
                    status: index.status(&entry.id)?,
                    leased_at_ms: index.leased_at(entry.seq),
                    body_bytes: entry.payload.as_ref().map(|p| p.body_bytes.len() as u64),
                })
            })
            .collect();
        Ok(BrowsePage {
            messages,
            next,
            counts: index.browse_counts(&query.queue).unwrap_or_default(),
        })
    }

    /// A message's push delivery log.
    async fn message_deliveries(
        &self,
        params: MessageGetParams,
    ) -> StoreResult<Option<(MessageStatus, Vec<sluice_core::message::DeliveryAttempt>)>> {
        let Some(status) = self.message_get(params).await? else {
            return Ok(None);
        };
        let Some(seq) = ids::decode(&status.message_id) else {
            return Ok(Some((status, Vec::new())));
        };
        // The latest attempt may still be on its way to the writer.
        self.0.flush().await?;
        let deliveries = self
            .0
            .read(move |conn| delivery_log::read(conn, seq))
            .await?;
        Ok(Some((status, deliveries)))
    }
}
