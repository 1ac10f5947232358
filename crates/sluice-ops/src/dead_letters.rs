//! A source queue's dead letters: list (page by page, filtered), show, replay, delete, purge.

use sluice_core::Millis;
use sluice_core::store::{DeadLetter, DeadLetterQuery, DeadLetterSelection, ReplayParams};
use sluice_core::store::{DeadLetterFilter, Seq};
use uuid::Uuid;

use crate::lookups::parse_message_id;
use crate::{Ops, OpsError, OpsResult};

/// What a replay did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replayed {
    /// True when nothing was replayed, only counted.
    pub dry_run: bool,
    /// Entries matching (for a dry run: all of them; otherwise those taken by this call).
    pub matched: u64,
    /// Entries replayed by this call.
    pub replayed: u64,
    /// True when more matching entries are left.
    pub more: bool,
    /// The queue they went to.
    pub target_queue: String,
    /// Per entry replayed: the dead letter's id and the new message's.
    pub results: Vec<(Uuid, Uuid)>,
}

/// Default page size of a listing.
const LIST_LIMIT_DEFAULT: usize = 50;
/// Largest page of a listing.
const LIST_LIMIT_MAX: usize = 1000;
/// Default number of entries one replay call takes.
const REPLAY_LIMIT_DEFAULT: usize = 1000;
/// Largest number of entries (and of ids) one replay call takes.
pub const REPLAY_LIMIT_MAX: usize = 10_000;

/// Which dead letters, by what they say about themselves.
#[derive(Debug, Clone, Default)]
pub struct DeadLetterMatch {
    /// Case-insensitive substring of the last error (empty: any).
    pub error: Option<String>,
    /// RFC 3339: dead-lettered at or after.
    pub since: Option<String>,
    /// RFC 3339: dead-lettered before.
    pub until: Option<String>,
}

/// One page of a listing.
#[derive(Debug, Clone)]
pub struct DeadLetterListRequest {
    /// The source queue.
    pub queue: String,
    /// 1..=1000 (default 50).
    pub limit: Option<usize>,
    /// The previous page's `next_cursor`.
    pub cursor: Option<String>,
    /// Only these.
    pub matching: DeadLetterMatch,
}

/// A page of dead letters, newest first.
#[derive(Debug, Clone)]
pub struct DeadLetterPage {
    /// Where they are.
    pub dead_letter_queue: String,
    /// This page.
    pub entries: Vec<DeadLetter>,
    /// Where the next page starts, if there is one.
    pub next_cursor: Option<String>,
}

/// Replay dead letters into their source queue (or another), by id or by filter.
#[derive(Debug, Clone)]
pub struct ReplayRequest {
    /// The source queue.
    pub queue: String,
    /// These ids (not with filters).
    pub ids: Option<Vec<String>>,
    /// Or those matching (nothing given: all).
    pub matching: DeadLetterMatch,
    /// Most entries to replay (default 1000, at most [`REPLAY_LIMIT_MAX`]).
    pub limit: Option<usize>,
    /// Count, do not replay.
    pub dry_run: bool,
    /// Where to; the source queue when `None`.
    pub target_queue: Option<String>,
}

impl Ops {
    /// One page of a queue's dead letters.
    pub async fn dead_letter_list(
        &self,
        request: DeadLetterListRequest,
    ) -> OpsResult<DeadLetterPage> {
        let limit = request.limit.unwrap_or(LIST_LIMIT_DEFAULT);
        if !(1..=LIST_LIMIT_MAX).contains(&limit) {
            return Err(OpsError::invalid_field(format!(
                "limit must be between 1 and {LIST_LIMIT_MAX}, got {limit}"
            )));
        }
        let before = request.cursor.as_deref().map(parse_cursor).transpose()?;
        let filter = filter(&request.queue, request.matching)?;
        let page = self
            .store
            .dead_letter_list(DeadLetterQuery {
                queue: request.queue,
                filter,
                before,
                limit,
            })
            .await?;
        Ok(DeadLetterPage {
            dead_letter_queue: page.dead_letter_queue,
            entries: page.entries,
            next_cursor: page.next.map(|(at, seq)| format!("{at}.{seq}")),
        })
    }

    /// One dead letter with its body and headers.
    pub async fn dead_letter_get(&self, queue: &str, message_id: &str) -> OpsResult<DeadLetter> {
        let id = parse_message_id(message_id)?;
        self.store.dead_letter_get(queue, id).await?.ok_or_else(|| {
            OpsError::message_not_found(format!("no dead letter {message_id} from queue {queue:?}"))
        })
    }

    /// Deletes one dead letter; returns how many went (1).
    pub async fn dead_letter_delete(&self, queue: &str, message_id: &str) -> OpsResult<u64> {
        let id = parse_message_id(message_id)?;
        let deleted = self
            .store
            .dead_letter_delete(queue, DeadLetterSelection::Ids(vec![id]), self.now_ms())
            .await?;
        if deleted == 0 {
            return Err(OpsError::message_not_found(format!(
                "no dead letter {message_id} from queue {queue:?} (or it is in flight)"
            )));
        }
        Ok(deleted)
    }

    /// Deletes every dead letter from `queue`; returns how many went.
    pub async fn dead_letter_purge(&self, queue: &str) -> OpsResult<u64> {
        let everything = DeadLetterSelection::Matching(DeadLetterFilter {
            source_queue: queue.to_owned(),
            ..DeadLetterFilter::default()
        });
        Ok(self
            .store
            .dead_letter_delete(queue, everything, self.now_ms())
            .await?)
    }

    /// Replays dead letters by id or by filter.
    pub async fn dead_letter_replay(&self, request: ReplayRequest) -> OpsResult<Replayed> {
        let limit = request.limit.unwrap_or(REPLAY_LIMIT_DEFAULT);
        if !(1..=REPLAY_LIMIT_MAX).contains(&limit) {
            return Err(OpsError::invalid_field(format!(
                "limit must be between 1 and {REPLAY_LIMIT_MAX}, got {limit}"
            )));
        }
        let selection = match request.ids {
            Some(ids) => {
                let matching = &request.matching;
                if matching.error.is_some() || matching.since.is_some() || matching.until.is_some()
                {
                    return Err(OpsError::invalid_field(
                        "ids: give ids or filters (error, since, until), not both",
                    ));
                }
                if ids.is_empty() || ids.len() > limit {
                    return Err(OpsError::invalid_field(format!(
                        "ids: give 1 to {limit} ids"
                    )));
                }
                let ids = ids
                    .iter()
                    .map(|id| {
                        Uuid::try_parse(id).map_err(|_| {
                            OpsError::invalid_field(format!("ids: {id:?} is not a message id"))
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                DeadLetterSelection::Ids(ids)
            }
            None => DeadLetterSelection::Matching(filter(&request.queue, request.matching)?),
        };
        self.replay(
            request.queue,
            selection,
            limit,
            request.dry_run,
            request.target_queue,
        )
        .await
    }

    /// Replays one dead letter; a letter that is not there (replayed already, deleted, in
    /// flight) is not found.
    pub async fn dead_letter_replay_one(
        &self,
        queue: String,
        message_id: &str,
        target_queue: Option<String>,
    ) -> OpsResult<Replayed> {
        let id = parse_message_id(message_id)?;
        let out = self
            .replay(
                queue.clone(),
                DeadLetterSelection::Ids(vec![id]),
                1,
                false,
                target_queue,
            )
            .await?;
        if out.replayed == 0 {
            return Err(OpsError::message_not_found(format!(
                "no dead letter {message_id} from queue {queue:?} to replay (replayed already, deleted, or in flight)"
            )));
        }
        Ok(out)
    }

    async fn replay(
        &self,
        queue: String,
        selection: DeadLetterSelection,
        limit: usize,
        dry_run: bool,
        target_queue: Option<String>,
    ) -> OpsResult<Replayed> {
        let target = target_queue.clone().unwrap_or_else(|| queue.clone());
        let replay = self
            .store
            .dead_letter_replay(ReplayParams {
                queue,
                selection,
                limit,
                dry_run,
                target_queue,
                now_ms: self.now_ms(),
            })
            .await?;
        Ok(Replayed {
            dry_run,
            matched: replay.matched,
            replayed: replay.replayed.len() as u64,
            more: replay.more,
            target_queue: target,
            results: replay.replayed,
        })
    }
}

fn filter(queue: &str, matching: DeadLetterMatch) -> OpsResult<DeadLetterFilter> {
    Ok(DeadLetterFilter {
        source_queue: queue.to_owned(),
        error_contains: matching.error.filter(|e| !e.is_empty()),
        since_ms: crate::parse_time("since", matching.since.as_deref())?,
        until_ms: crate::parse_time("until", matching.until.as_deref())?,
    })
}

/// A cursor is the position of the next entry: `<dead-letter time ms>.<seq>`.
fn parse_cursor(text: &str) -> OpsResult<(Millis, Seq)> {
    let invalid = || {
        OpsError::invalid_field(format!(
            "cursor: {text:?} is not a cursor from a previous page"
        ))
    };
    let (at, seq) = text.split_once('.').ok_or_else(invalid)?;
    Ok((
        at.parse().map_err(|_| invalid())?,
        seq.parse().map_err(|_| invalid())?,
    ))
}
