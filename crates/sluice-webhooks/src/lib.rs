//! sluice-webhooks: what webhook ingress and push delivery need that is pure computation:
//! signature schemes of the senders sluice accepts ([`verify`]), the Standard Webhooks signature
//! sluice puts on its own pushes ([`sign`]), and jq expressions for filters and transforms
//! ([`expr`]).
//!
//! Invariant: no IO. Secrets, headers, bodies and the time come in as arguments.

pub mod expr;
pub mod sign;
pub mod verify;
