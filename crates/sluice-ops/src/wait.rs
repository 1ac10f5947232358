//! One "claim or wait": look, and if there is nothing yet, sleep until something may have
//! changed, then look again.
//!
//! A receive's long poll (every door's, the embedded SDK's lease too), a push worker's claim
//! and a drain all wait this way; they differ only in their [`Wait`] policy, and on a manual
//! clock in whether they follow the next change ([`Wait::on_manual_clock`]). Each wait registers for its queue's
//! wake-up ([`Notifier`]) before it looks, so a wake-up between an empty look and going to
//! sleep is never lost. It never polls on a timer unless its policy asks to (a drain, whose
//! condition also changes by retention and lease expiry, which wake nobody).

use std::future::Future;
use std::time::Duration;

use sluice_core::message::ClaimedMessage;
use sluice_core::notify::Notifier;
use sluice_core::store::{ClaimParams, StoreResult};
use sluice_core::{Clock, Millis, Store};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// What one look found.
#[derive(Debug, Clone, PartialEq)]
pub enum Look<T> {
    /// Done: the wait returns this.
    Ready(T),
    /// Not yet. `current` is the answer if the wait ends now (its deadline passed, or it was
    /// cancelled); `next_change_at_ms` is when the looked-at thing changes on its own (a delay
    /// or a lease ends), by the clock the look was given.
    Pending {
        /// The answer as of this look.
        current: T,
        /// When something becomes due without anyone's wake-up, if known.
        next_change_at_ms: Option<Millis>,
    },
}

/// Whether a wait sleeps only until the next change a look reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextChange {
    /// The system clock: sleep until the next change, kept within `min..=max`.
    Follow {
        /// Shortest sleep (a next change in the past still sleeps this long).
        min: Duration,
        /// Longest sleep before looking again.
        max: Duration,
    },
    /// A manual clock: nothing becomes due by itself, so only a wake-up (an enqueue, an ack,
    /// moving the clock) or the deadline ends the sleep.
    Ignore,
}

/// Whether the first look is made before registering for wake-ups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirstLook {
    /// Register, then look: for callers that hold the queue's signal anyway (push).
    Registered,
    /// A wait that is over before it starts (a short poll) looks once without registering;
    /// any longer wait registers first, and a look that fails removes the name again, so
    /// neither leaves anything in the notifier for a name a client made up. Registering
    /// first: a first look made before registering would need a second one after it (a
    /// wake-up may fall between the two), and on a shared database each look of a receive
    /// is a claim, so every receive that found nothing cost two.
    Unregistered,
}

/// How one caller waits.
#[derive(Debug, Clone, Copy)]
pub struct Wait<'a> {
    /// When the wait gives up and returns what the last look found; `None`: never.
    pub deadline: Option<Instant>,
    /// Follow the looks' next change, or not.
    pub next_change: NextChange,
    /// Longest sleep without a wake-up: for conditions that change without one.
    pub recheck: Option<Duration>,
    /// A failed look is waited out this long (not cut short by wake-ups) and tried again,
    /// instead of ending the wait. The look reports the failure itself.
    pub error_backoff: Option<Duration>,
    /// Register before or after the first look.
    pub first_look: FirstLook,
    /// Ends the wait at once; the last look's answer is returned.
    pub cancel: Option<&'a CancellationToken>,
}

impl<'a> Wait<'a> {
    /// A long poll (receive): until messages come or `deadline`, following the next delay
    /// or lease end to the millisecond; registered before its first look unless already over.
    pub fn long_poll(deadline: Instant, cancel: &'a CancellationToken) -> Self {
        Self {
            deadline: Some(deadline),
            next_change: NextChange::Follow {
                min: Duration::from_millis(1),
                max: Duration::MAX,
            },
            recheck: None,
            error_backoff: None,
            first_look: FirstLook::Unregistered,
            cancel: Some(cancel),
        }
    }

    /// A push worker: no deadline; sleeps 10 ms to 1 s (at least 10 ms, since on a test clock
    /// time may stand still); a failed claim is tried again after 1 s.
    pub fn push(stop: &'a CancellationToken) -> Self {
        Self {
            deadline: None,
            next_change: NextChange::Follow {
                min: Duration::from_millis(10),
                max: Duration::from_secs(1),
            },
            recheck: Some(Duration::from_secs(1)),
            error_backoff: Some(Duration::from_secs(1)),
            first_look: FirstLook::Registered,
            cancel: Some(stop),
        }
    }

    /// A drain: until the queue is empty or `deadline`, looking again every `recheck` as
    /// well, since retention and lease expiry run in the background without waking waiters.
    pub fn drain(deadline: Instant, recheck: Duration, cancel: &'a CancellationToken) -> Self {
        Self {
            deadline: Some(deadline),
            next_change: NextChange::Ignore,
            recheck: Some(recheck),
            error_backoff: None,
            first_look: FirstLook::Unregistered,
            cancel: Some(cancel),
        }
    }

    /// This wait on a manual clock (the server's test-clock mode, the embedded SDK's test
    /// clock): nothing becomes due by itself there, so only a wake-up (an enqueue, an ack,
    /// moving the clock) or the deadline ends a sleep.
    #[must_use]
    pub fn on_manual_clock(mut self) -> Self {
        self.next_change = NextChange::Ignore;
        self
    }

    fn is_over(&self) -> bool {
        self.deadline
            .is_some_and(|deadline| Instant::now() >= deadline)
            || self.cancel.is_some_and(CancellationToken::is_cancelled)
    }

    /// When to look again without a wake-up; `None`: only a wake-up or cancellation.
    fn wake_at(&self, now_ms: Millis, next_change_at_ms: Option<Millis>) -> Option<Instant> {
        let followed = match (self.next_change, next_change_at_ms) {
            (NextChange::Follow { min, max }, Some(at)) => {
                Some(Duration::from_millis((at - now_ms).max(0) as u64).clamp(min, max))
            }
            _ => None,
        };
        let sleep = match (followed, self.recheck) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let woken_at = sleep.map(|sleep| Instant::now().checked_add(sleep));
        match (woken_at.flatten(), self.deadline) {
            (Some(at), Some(deadline)) => Some(at.min(deadline)),
            (at, deadline) => at.or(deadline),
        }
    }
}

/// Looks at `queue` until a look is [`Look::Ready`], the deadline passes or the wait is
/// cancelled; returns the last look's answer. `look` gets now by `clock`.
///
/// A failed look ends the wait with its error, unless the policy backs off from errors; a
/// wait cancelled during a back-off returns that error.
pub async fn until<T, E, F, Fut>(
    notifier: &Notifier,
    queue: &str,
    clock: &dyn Clock,
    wait: &Wait<'_>,
    mut look: F,
) -> Result<T, E>
where
    F: FnMut(Millis) -> Fut,
    Fut: Future<Output = Result<Look<T>, E>>,
{
    if wait.first_look == FirstLook::Unregistered && wait.is_over() {
        return match look(clock.now_ms()).await? {
            Look::Ready(answer) => Ok(answer),
            Look::Pending { current, .. } => Ok(current),
        };
    }
    let signal = notifier.queue(queue);
    let failed = loop {
        let woken = signal.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        let now_ms = clock.now_ms();
        let (current, next_change_at_ms) = match look(now_ms).await {
            Ok(Look::Ready(answer)) => return Ok(answer),
            Ok(Look::Pending {
                current,
                next_change_at_ms,
            }) => (current, next_change_at_ms),
            Err(error) => {
                let Some(backoff) = wait.error_backoff else {
                    break Err(error);
                };
                if !sleep_or_cancel(Some(Instant::now() + backoff), wait.cancel).await {
                    return Err(error);
                }
                continue;
            }
        };
        if wait.is_over() {
            return Ok(current);
        }
        let wake_at = wait.wake_at(now_ms, next_change_at_ms);
        let was_woken = tokio::select! {
            _ = woken => true,
            _ = sleep_or_cancel(wake_at, wait.cancel) => false,
        };
        // Woken and cancelled at once: cancellation wins, without another look (a stopped
        // push worker must not claim), and the wake-up goes on to another waiter, which a
        // store's `Notifier::wake_for` may have meant for one waiter only.
        if wait.cancel.is_some_and(CancellationToken::is_cancelled) {
            if was_woken {
                signal.notify_one();
            }
            return Ok(current);
        }
    };
    // A failed look (no such queue) keeps nothing for the name: the signal is dropped and its
    // entry removed, unless someone else waits on it.
    drop(signal);
    notifier.release(queue);
    failed
}

/// What a claim takes: up to `max` messages, under a lease of `lease_ms` (the queue's own when
/// `None`), with runs of a lane's messages when `lane_runs` (`ClaimParams::lane_runs`).
#[derive(Debug, Clone, Copy)]
pub struct Take {
    /// Most messages.
    pub max: usize,
    /// The lease's length.
    pub lease_ms: Option<Millis>,
    /// Runs of a lane's messages, in order.
    pub lane_runs: bool,
}

/// Claims what `take` says from `queue`, waiting as `wait` says while there is nothing: the
/// claim-or-wait of a consumer (a receive by any door, the embedded SDK's lease among them).
/// Push workers claim with the attempt recorded and hold delivery slots, so they call
/// [`until`] with their own look.
pub async fn claim(
    store: &dyn Store,
    clock: &dyn Clock,
    wait: &Wait<'_>,
    queue: &str,
    take: Take,
) -> StoreResult<Vec<ClaimedMessage>> {
    let look = |now_ms| async move {
        let claim = store
            .message_claim(ClaimParams {
                queue: queue.to_owned(),
                max: take.max,
                lease_ms: take.lease_ms,
                lane_runs: take.lane_runs,
                now_ms,
            })
            .await?;
        Ok(if claim.messages.is_empty() {
            Look::Pending {
                current: claim.messages,
                next_change_at_ms: claim.next_change_at_ms,
            }
        } else {
            Look::Ready(claim.messages)
        })
    };
    until(&store.notifier(), queue, clock, wait, look).await
}

/// Sleeps until `at` (forever when `None`); false when `cancel` fired first.
async fn sleep_or_cancel(at: Option<Instant>, cancel: Option<&CancellationToken>) -> bool {
    let sleep = async {
        match at {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
    };
    let cancelled = async {
        match cancel {
            Some(cancel) => cancel.cancelled().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        () = sleep => true,
        () = cancelled => false,
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};

    use sluice_core::ManualClock;

    use super::*;

    /// A look that is ready once `ready` is set, counting its calls, with a fixed next change.
    struct Probe {
        ready: AtomicI64,
        looks: AtomicUsize,
        next_change_at_ms: Option<Millis>,
    }

    impl Probe {
        fn new(next_change_at_ms: Option<Millis>) -> Arc<Self> {
            Arc::new(Self {
                ready: AtomicI64::new(0),
                looks: AtomicUsize::new(0),
                next_change_at_ms,
            })
        }

        async fn look(&self, now_ms: Millis) -> Result<Look<&'static str>, Infallible> {
            self.looks.fetch_add(1, Ordering::SeqCst);
            let ready = self.ready.load(Ordering::SeqCst);
            Ok(if ready != 0 && now_ms >= ready {
                Look::Ready("ready")
            } else {
                Look::Pending {
                    current: "pending",
                    next_change_at_ms: self.next_change_at_ms,
                }
            })
        }
    }

    fn hour() -> Instant {
        Instant::now() + Duration::from_secs(3600)
    }

    /// A long poll on "q" in a task of its own, returned once it has looked and gone to sleep.
    async fn sleeping_long_poll(
        notifier: &Arc<Notifier>,
        clock: &ManualClock,
        probe: &Arc<Probe>,
        cancel: &CancellationToken,
    ) -> tokio::task::JoinHandle<Result<&'static str, Infallible>> {
        let (notifier, clock, looker, cancel) = (
            notifier.clone(),
            clock.clone(),
            probe.clone(),
            cancel.clone(),
        );
        let waiter = tokio::spawn(async move {
            let wait = Wait::long_poll(hour(), &cancel);
            until(&notifier, "q", &clock, &wait, |now| looker.look(now)).await
        });
        // A long poll registers, looks once and sleeps.
        while probe.looks.load(Ordering::SeqCst) < 1 {
            tokio::task::yield_now().await;
        }
        waiter
    }

    #[tokio::test(start_paused = true)]
    async fn a_wake_up_ends_the_sleep() {
        let notifier = Arc::new(Notifier::default());
        let clock = ManualClock::new(1_000);
        let probe = Probe::new(None);
        let never = CancellationToken::new();
        let waiter = sleeping_long_poll(&notifier, &clock, &probe, &never).await;
        probe.ready.store(1, Ordering::SeqCst);
        notifier.wake("q");
        let started = Instant::now();
        assert_eq!(waiter.await.unwrap(), Ok("ready"));
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "woken, not timed out"
        );
    }

    /// A clock that follows tokio's (paused) time, as the system clock follows real time.
    #[derive(Debug)]
    struct TokioClock(Instant);

    impl Clock for TokioClock {
        fn now_ms(&self) -> Millis {
            1_000 + self.0.elapsed().as_millis() as Millis
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_next_change_ends_the_sleep_on_the_system_clock() {
        let notifier = Notifier::default();
        let clock = TokioClock(Instant::now());
        // The thing looked at becomes ready at 1,250 ms, and says so.
        let probe = Probe::new(Some(1_250));
        probe.ready.store(1_250, Ordering::SeqCst);
        let never = CancellationToken::new();
        let wait = Wait::long_poll(hour(), &never);
        let started = Instant::now();
        let answer = until(&notifier, "q", &clock, &wait, |now| probe.look(now)).await;
        assert_eq!(answer, Ok("ready"));
        assert_eq!(started.elapsed(), Duration::from_millis(250));
    }

    #[tokio::test(start_paused = true)]
    async fn a_manual_clock_policy_ignores_the_next_change() {
        let notifier = Notifier::default();
        let clock = ManualClock::new(1_000);
        let probe = Probe::new(Some(1_250));
        let deadline = Instant::now() + Duration::from_secs(5);
        let never = CancellationToken::new();
        let wait = Wait::long_poll(deadline, &never).on_manual_clock();
        let answer = until(&notifier, "q", &clock, &wait, |now| probe.look(now)).await;
        assert_eq!(answer, Ok("pending"));
        assert_eq!(Instant::now(), deadline, "slept to the deadline in one go");
        assert_eq!(probe.looks.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn the_deadline_ends_the_wait_with_the_last_answer() {
        let notifier = Notifier::default();
        let clock = ManualClock::new(1_000);
        let probe = Probe::new(None);
        let never = CancellationToken::new();
        let deadline = Instant::now() + Duration::from_millis(300);
        let wait = Wait::long_poll(deadline, &never);
        let answer = until(&notifier, "q", &clock, &wait, |now| probe.look(now)).await;
        assert_eq!(answer, Ok("pending"));
        assert_eq!(Instant::now(), deadline);
        // One look before sleeping (registered first), one when the deadline came.
        assert_eq!(probe.looks.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_deadline_already_past_answers_after_one_unregistered_look() {
        let notifier = Notifier::default();
        let clock = ManualClock::new(1_000);
        let probe = Probe::new(None);
        let never = CancellationToken::new();
        let wait = Wait::long_poll(Instant::now(), &never);
        let answer = until(&notifier, "q", &clock, &wait, |now| probe.look(now)).await;
        assert_eq!(answer, Ok("pending"));
        assert_eq!(probe.looks.load(Ordering::SeqCst), 1);
        assert!(notifier.is_empty(), "nothing kept for the name");
    }

    #[tokio::test(start_paused = true)]
    async fn cancellation_ends_the_wait_at_once() {
        let notifier = Arc::new(Notifier::default());
        let clock = ManualClock::new(1_000);
        let probe = Probe::new(None);
        let cancel = CancellationToken::new();
        let waiter = sleeping_long_poll(&notifier, &clock, &probe, &cancel).await;
        let started = Instant::now();
        cancel.cancel();
        assert_eq!(waiter.await.unwrap(), Ok("pending"));
        assert_eq!(started.elapsed(), Duration::ZERO);
        assert_eq!(
            probe.looks.load(Ordering::SeqCst),
            1,
            "no look after cancelling"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_wake_up_that_meets_a_cancelled_waiter_goes_on_to_another() {
        // Which branch a woken and cancelled waiter sees first is up to `select!`: rounds.
        for round in 0..16 {
            let notifier = Arc::new(Notifier::default());
            let clock = ManualClock::new(1_000);
            let (first, second) = (Probe::new(None), Probe::new(None));
            let cancel = CancellationToken::new();
            let never = CancellationToken::new();
            let cancelled = sleeping_long_poll(&notifier, &clock, &first, &cancel).await;
            let other = sleeping_long_poll(&notifier, &clock, &second, &never).await;
            second.ready.store(1, Ordering::SeqCst);
            let started = Instant::now();
            // One message for two waiters: the wake-up goes to the first, which is cancelled.
            cancel.cancel();
            notifier.wake_for("q", 1);
            assert_eq!(cancelled.await.unwrap(), Ok("pending"));
            assert_eq!(other.await.unwrap(), Ok("ready"));
            assert!(
                started.elapsed() < Duration::from_secs(1),
                "round {round}: the wake-up was lost"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_drain_looks_again_on_its_recheck_interval() {
        let notifier = Notifier::default();
        let clock = ManualClock::new(1_000);
        let probe = Probe::new(None);
        let never = CancellationToken::new();
        let deadline = Instant::now() + Duration::from_millis(1_000);
        let wait = Wait::drain(deadline, Duration::from_millis(100), &never);
        let answer = until(&notifier, "q", &clock, &wait, |now| probe.look(now)).await;
        assert_eq!(answer, Ok("pending"));
        // One look at 0 ms (registered first, so no second one), then every 100 ms up to
        // the deadline.
        assert_eq!(probe.looks.load(Ordering::SeqCst), 11);
    }

    #[tokio::test(start_paused = true)]
    async fn a_push_wait_backs_off_from_a_failed_look() {
        let notifier = Notifier::default();
        let clock = ManualClock::new(1_000);
        let failures = AtomicUsize::new(0);
        let stop = CancellationToken::new();
        let wait = Wait::push(&stop);
        let started = Instant::now();
        let answer = until(&notifier, "q", &clock, &wait, |_| {
            let failed = failures.fetch_add(1, Ordering::SeqCst);
            async move {
                if failed < 2 {
                    Err("store down")
                } else {
                    Ok(Look::Ready("claimed"))
                }
            }
        })
        .await;
        assert_eq!(answer, Ok("claimed"));
        assert_eq!(started.elapsed(), Duration::from_secs(2));
    }
}
