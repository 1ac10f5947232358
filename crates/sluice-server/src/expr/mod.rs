//! Where jq expressions run: in worker processes with limits the kernel enforces.
//!
//! jaq (the jq implementation, `sluice_webhooks::expr`) has no fuel counter and cannot be
//! interrupted; it recurses on the native stack, so a program like `def f: [f]; f` overflows any
//! stack, and a stack overflow aborts the whole process; `gsub` on a big body allocates
//! gigabytes. A thread can be neither stopped nor contained, so expressions of webhooks and
//! push transforms run in a few child processes of the server's own binary
//! (`sluice __expr-worker`, [`worker`]), one evaluation at a time each, talking over pipes
//! ([`protocol`]). Every evaluation is bounded:
//!
//! - **time**: the server waits `timeout_ms`; past it, the worker is killed (SIGKILL) and
//!   replaced. The worker also caps its own CPU time (`RLIMIT_CPU`) as a backstop;
//! - **memory**: the worker's address space may grow by `memory_bytes` (`RLIMIT_AS`); past it,
//!   an allocation fails and the worker aborts;
//! - **depth**: a stack overflow ends only the worker; `fromjson` refuses nesting deeper than
//!   128 levels without recursing (`sluice_webhooks::expr`), and so do outputs;
//! - **output**: at most `output_bytes` of serialised outputs per evaluation.
//!
//! Exceeding any of them is an ordinary failure of that evaluation ([`EvalError::Stopped`]): the
//! caller dead-letters the event or message with the reason. A worker that dies is replaced at
//! the next evaluation; the `sluice_expr_workers_stopped_total` metric counts why they ended.
//!
//! Why processes and not an evaluator with a budget: jaq offers no budget hook, a fork of it
//! would have to bound every native function (regex, string repetition, `fromjson`, `tojson`)
//! and its recursion separately, and any miss would again abort the server. A process is
//! bounded by the kernel whatever the program does. The cost is a round trip over pipes per
//! evaluation (the input and outputs serialised once more), measured in BENCHMARKS.md.
//!
//! Compiling stays in the server (at definition time, bounded by the source limits of
//! `sluice_webhooks::expr`), so a bad program is refused before it is stored; workers compile
//! the same source again on first use and keep it.

mod pool;
pub mod protocol;
pub mod worker;

use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

pub use pool::{EvalError, ExprPool, ProgramResult};
pub use protocol::ProgramSpec;
use sluice_webhooks::expr::Expr;

/// Default of `[expressions] timeout_ms`.
pub const TIMEOUT_MS_DEFAULT: u64 = 1_000;
/// Default of `[expressions] memory_bytes`: 512 MiB.
pub const MEMORY_BYTES_DEFAULT: u64 = 512 << 20;
/// Default of `[expressions] output_bytes`: 10 MiB, the largest message body.
pub const OUTPUT_BYTES_DEFAULT: usize = 10 << 20;
/// Default of `[expressions] workers`.
pub const WORKERS_DEFAULT: usize = 4;

/// Default of `[expressions] webhook_workers`: half the workers (at least one).
pub fn webhook_workers_default(workers: usize) -> usize {
    (workers / 2).max(1)
}

/// `[expressions]`: the limits every evaluation runs under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExprLimits {
    /// Wall time per evaluation (all programs of one event or message together).
    pub timeout: Duration,
    /// Bytes a worker's address space may grow by during evaluations.
    pub memory_bytes: u64,
    /// Bytes of serialised outputs per evaluation.
    pub output_bytes: usize,
    /// Worker processes (evaluations at once).
    pub workers: usize,
    /// Of those, the most webhook requests may hold at once: the rest stay free for push
    /// transforms and topic filters, whoever sends webhooks (issue 30, finding 18).
    pub webhook_workers: usize,
    /// The `sluice` binary to start workers from; `None`: this process's own executable.
    pub worker_executable: Option<PathBuf>,
}

impl Default for ExprLimits {
    fn default() -> Self {
        Self {
            timeout: Duration::from_millis(TIMEOUT_MS_DEFAULT),
            memory_bytes: MEMORY_BYTES_DEFAULT,
            output_bytes: OUTPUT_BYTES_DEFAULT,
            workers: WORKERS_DEFAULT,
            webhook_workers: webhook_workers_default(WORKERS_DEFAULT),
            worker_executable: None,
        }
    }
}

/// What the expression workers did since start.
#[derive(Debug, Default)]
pub struct ExprMetrics {
    /// Evaluations sent to a worker.
    pub evaluations: AtomicU64,
    /// Workers started.
    pub started: AtomicU64,
    /// Workers that could not be started.
    pub start_failures: AtomicU64,
    /// Workers killed at the time limit.
    pub killed_timeout: AtomicU64,
    /// Workers that died during an evaluation (stack overflow, memory or CPU limit).
    pub died: AtomicU64,
    /// Workers killed for an answer outside the protocol.
    pub killed_protocol: AtomicU64,
}

/// A compiled expression as a program of an evaluation.
pub fn program(expr: &Expr) -> ProgramSpec {
    ProgramSpec {
        source: expr.source().to_owned(),
        gate: false,
    }
}

/// A compiled expression as a filter: the evaluation stops when its output is nothing, `null`
/// or `false`.
pub fn gate(expr: &Expr) -> ProgramSpec {
    ProgramSpec {
        source: expr.source().to_owned(),
        gate: true,
    }
}
