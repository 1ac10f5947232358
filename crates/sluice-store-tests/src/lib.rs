//! The store conformance suite: what every backend of [`Store`] must do the same way.
//!
//! The cases speak only to `Arc<dyn Store>` and move time with a [`ManualClock`], so they hold
//! for any backend: the embedded SQLite store runs them in its `cargo test`, and a new store
//! (PostgreSQL, ...) is done when it passes them too. One macro call in a backend's test file
//! generates one `#[test]` per case, named after the case, so a failure names the rule broken:
//!
//! ```ignore
//! use sluice_store_tests::{ManualClock, Opened, store_conformance};
//!
//! async fn open(clock: ManualClock) -> Opened {
//!     let dir = tempfile::tempdir().unwrap();
//!     let store = MyStore::open(dir.path(), clock.now_ms()).unwrap();
//!     Opened::new(std::sync::Arc::new(store)).keeping(dir)
//! }
//!
//! store_conformance!(open);
//! ```
//!
//! While a new backend is brought up, `store_conformance!(open; cases = [case, ...])` runs only
//! the cases it lists; a backend is done when it runs the macro without a list.
//!
//! The factory is called once per case and must return an empty store (no queues). Each case
//! runs on its own multi-threaded runtime, within [`CASE_TIME_LIMIT`], and closes the store at
//! the end. The same shape as river's `riverdrivertest` and ripgrep's one body run against
//! every engine: the rules are written once, the backends are listed once.

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

pub use sluice_core::clock::{Clock, ManualClock, Millis};
pub use sluice_core::store::Store;

pub mod cases;
mod harness;
pub mod sessions;

pub use harness::{Harness, bodies};

/// The time every case starts at (a Tuesday in November 2023, in epoch milliseconds).
pub const T0: Millis = 1_700_000_000_000;

/// The longest a case may take: a store call that stalls fails its case instead of hanging the
/// test run.
pub const CASE_TIME_LIMIT: Duration = Duration::from_secs(60);

/// Work to do once a case's store is closed (a check of the database, dropping its schema).
type AfterClose = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Opens the case's store again on what it keeps (its directory, its schema).
pub(crate) type Reopen =
    Arc<dyn Fn() -> Pin<Box<dyn Future<Output = Arc<dyn Store>> + Send>> + Send + Sync>;

/// A freshly opened store, with whatever must live as long as it (a temporary directory, a
/// database guard) and what must run after it closed; or the reason there is none here.
pub struct Opened {
    store: Result<Arc<dyn Store>, String>,
    keep: Vec<Box<dyn Any + Send>>,
    after_close: Vec<AfterClose>,
    reopen: Option<Reopen>,
}

impl Opened {
    /// A store that needs nothing kept alive.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self {
            store: Ok(store),
            keep: Vec::new(),
            after_close: Vec::new(),
            reopen: None,
        }
    }

    /// No store on this machine (a database server that is not there): the case says it is
    /// skipped and passes. A backend decides itself when that is allowed (never in CI).
    pub fn skipped(reason: impl Into<String>) -> Self {
        Self {
            store: Err(reason.into()),
            keep: Vec::new(),
            after_close: Vec::new(),
            reopen: None,
        }
    }

    /// Keeps `guard` until the case is over and the store closed.
    pub fn keeping(mut self, guard: impl Any + Send) -> Self {
        self.keep.push(Box::new(guard));
        self
    }

    /// Runs `work` once the case is over and the store closed (what cannot happen in a
    /// `Drop`: an async check of what the store left, dropping a database schema). A panic in
    /// it fails the case.
    pub fn after_close(mut self, work: impl Future<Output = ()> + Send + 'static) -> Self {
        self.after_close.push(Box::pin(work));
        self
    }

    /// How to open the store again on what it keeps, once the case closed it: the cases that
    /// check what survives a restart call it through [`Harness::reopen`] (and fail, naming
    /// this method, when a backend does not give it).
    pub fn reopening<F, Fut>(mut self, reopen: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Arc<dyn Store>> + Send + 'static,
    {
        self.reopen = Some(Arc::new(move || Box::pin(reopen())));
        self
    }
}

/// Runs one case against a store from `open`: the body of every test [`store_conformance!`]
/// generates.
pub fn run<F, Fut, C, CaseFut>(open: F, case: C)
where
    F: FnOnce(ManualClock) -> Fut,
    Fut: Future<Output = Opened>,
    C: FnOnce(Harness) -> CaseFut,
    CaseFut: Future<Output = ()>,
{
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("a tokio runtime for the case");
    runtime.block_on(async move {
        let clock = ManualClock::new(T0);
        let Opened {
            store,
            keep,
            after_close,
            reopen,
        } = open(clock.clone()).await;
        let store = match store {
            Ok(store) => store,
            Err(reason) => {
                eprintln!("skipped: {reason}");
                return;
            }
        };
        let harness = Harness::new(store.clone(), clock, reopen);
        if tokio::time::timeout(CASE_TIME_LIMIT, case(harness))
            .await
            .is_err()
        {
            panic!("the case took longer than {CASE_TIME_LIMIT:?}: a store call stalled");
        }
        store.close().await.expect("the store closes");
        drop(store);
        for work in after_close {
            work.await;
        }
        drop(keep);
    });
}

/// Generates one `#[test]` per conformance case, each opening a fresh store with `$open`
/// (an `async fn(ManualClock) -> Opened`, or a closure returning such a future).
#[macro_export]
macro_rules! store_conformance {
    ($open:expr) => {
        $crate::store_conformance!(@cases $open;
            queue_put_creates_the_dead_letter_queue_and_guards_it,
            unknown_queues_are_refused,
            claimed_messages_are_leased_until_acked,
            a_lease_that_runs_out_makes_the_message_claimable_again,
            extend_pushes_the_lease_deadline_out,
            give_back_returns_a_lease_without_a_failure,
            an_unstarted_give_back_counts_no_attempt,
            stale_receipts_are_fenced,
            nack_retries_after_its_delay_or_the_backoff,
            exhausted_attempts_dead_letter_with_metadata,
            permanent_nack_dead_letters_at_once,
            fifo_delivers_one_at_a_time_in_enqueue_order,
            per_key_orders_within_a_key_and_runs_keys_in_parallel,
            lane_runs_take_a_keys_messages_in_order_and_hold_the_key,
            priorities_go_first_then_enqueue_order,
            delayed_messages_stay_hidden_until_visible,
            idempotency_keys_answer_with_the_first_message_within_the_window,
            idempotency_keys_are_free_again_after_the_window,
            dead_letters_are_listed_and_read_with_their_payload,
            replay_sends_dead_letters_back_as_new_messages,
            dead_letter_delete_removes_entries,
            purge_removes_everything_but_leased_messages,
            purging_everything_takes_leased_messages_and_forgets_ids,
            cancel_reports_each_outcome,
            a_paused_queue_delivers_nothing,
            retention_drops_old_messages_but_not_leased_ones,
            retention_can_dead_letter_old_messages,
            retention_counts_from_the_end_of_a_delay,
            max_depth_refuses_whole_batches,
            max_in_flight_caps_the_leases_out,
            rate_limits_pace_deliveries_as_a_token_bucket,
            lookups_find_messages_by_id_and_idempotency_key,
            acks_keep_their_result,
            browse_pages_each_state_in_dispatch_order,
            concurrent_claimers_never_share_a_lease,
            a_dead_lettered_lane_head_lets_its_key_go_on,
            a_given_back_receipt_acks_until_the_next_claim,
            ordering_changes_are_refused_while_messages_are_queued,
            purging_a_per_key_queue_leaves_no_lane_stuck,
            queue_definitions_are_kept_whole,
            pauses_are_kept_and_reported,
            push_pauses_are_kept_reported_and_survive_a_reopen,
            webhook_definitions_are_kept_by_name,
            schedules_keep_their_progress_across_redefinitions,
            a_pass_advances_a_schedule_only_from_the_run_it_read,
            a_definition_swaps_only_from_the_text_it_read,
            an_ack_enqueues_its_next_steps_in_the_same_commit,
            batches_enqueued_together_are_stored_all_or_none,
            acked_messages_keep_their_body_until_the_keep_ends,
            a_search_of_kept_acked_messages_matches_every_condition,
            a_deleted_queue_takes_its_kept_messages_with_it,
            a_body_prefix_is_the_bodys_first_bytes,
            queue_bytes_count_held_and_kept_bodies,
        );
    };
    // Bring-up only: a backend that does not yet pass every case runs the cases it lists. The
    // list goes once the backend is whole; the full list above is what a store must pass.
    ($open:expr; cases = [$($case:ident),* $(,)?]) => {
        $crate::store_conformance!(@cases $open; $($case),*);
    };
    (@cases $open:expr; $($case:ident),* $(,)?) => {
        $(
            #[test]
            fn $case() {
                $crate::run($open, $crate::cases::$case);
            }
        )*
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A backend with no store here (no database server) passes its cases without running
    /// them, saying why.
    #[test]
    fn a_skipped_store_runs_no_case() {
        run(
            |_clock| async { Opened::skipped("no database here") },
            |_harness| async { panic!("a skipped store ran its case") },
        );
    }
}
