//! Who asks for an operation, as the protocol's access control knows them.
//!
//! Whether a caller may call an operation at all is the protocol's decision (the HTTP API's
//! route table carries each route's access rule). What ops needs is narrower: an answer that
//! depends on who asks, such as a list that shows only the queues the caller may read. A
//! protocol passes its caller as `&dyn Caller`; with access control off it passes
//! [`Anyone`].

/// A caller of an operation.
pub trait Caller: Send + Sync {
    /// The caller's name (a token's name), for logs and for protocols that report a sender.
    fn name(&self) -> &str;
    /// True when the caller may see everything (an admin, or access control off).
    fn is_admin(&self) -> bool;
    /// May the caller see `queue` (its settings, stats, messages, dead letters)?
    fn may_read(&self, queue: &str) -> bool;
    /// May the caller define, change and delete `queue`?
    fn may_manage(&self, queue: &str) -> bool;
}

/// The caller when access control is off: anyone may see everything.
#[derive(Debug, Clone, Copy, Default)]
pub struct Anyone;

impl Caller for Anyone {
    fn name(&self) -> &str {
        "anonymous"
    }

    fn is_admin(&self) -> bool {
        true
    }

    fn may_read(&self, _queue: &str) -> bool {
        true
    }

    fn may_manage(&self, _queue: &str) -> bool {
        true
    }
}
