//! The conformance cases, one `pub async fn` each, grouped by what they are about. Every case
//! states in its doc comment the rule it proves; each assertion is one a store that broke the
//! rule would fail. [`crate::store_conformance!`] lists them all (a test of this crate checks
//! that the list and the functions agree).

mod chaining;
mod concurrency;
mod dead_letters;
mod idempotency;
mod kept;
mod leases;
mod limits;
mod lookups;
mod operator;
mod order;
mod queues;
mod schedules;
mod webhooks;

pub use chaining::*;
pub use concurrency::*;
pub use dead_letters::*;
pub use idempotency::*;
pub use kept::*;
pub use leases::*;
pub use limits::*;
pub use lookups::*;
pub use operator::*;
pub use order::*;
pub use queues::*;
pub use schedules::*;
pub use webhooks::*;

#[cfg(test)]
mod tests {
    /// Every case function is in the macro's list, so no case is written and never run.
    #[test]
    fn the_macro_lists_every_case() {
        let sources = [
            include_str!("chaining.rs"),
            include_str!("concurrency.rs"),
            include_str!("dead_letters.rs"),
            include_str!("idempotency.rs"),
            include_str!("kept.rs"),
            include_str!("leases.rs"),
            include_str!("limits.rs"),
            include_str!("lookups.rs"),
            include_str!("operator.rs"),
            include_str!("order.rs"),
            include_str!("queues.rs"),
            include_str!("schedules.rs"),
            include_str!("webhooks.rs"),
        ];
        let lib = include_str!("../lib.rs");
        let listed = lib
            .split("@cases $open;")
            .nth(1)
            .and_then(|rest| rest.split(");").next())
            .expect("the macro's case list");
        let mut count = 0;
        for source in sources {
            for line in source.lines() {
                let Some(rest) = line.strip_prefix("pub async fn ") else {
                    continue;
                };
                let name = rest.split('(').next().unwrap();
                count += 1;
                assert!(
                    listed.contains(&format!("{name},")),
                    "case {name} is not listed in store_conformance!"
                );
            }
        }
        assert_eq!(
            listed.matches(',').count(),
            count,
            "the list names a case twice"
        );
    }
}
