//! `sluice bench`: a load generator against a running server.
//!
//! Placeholder so the binary compiles; the real benchmark replaces this file.

/// Flags of `sluice bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {}

/// Runs the benchmark.
pub async fn run(args: BenchArgs) -> anyhow::Result<()> {
    let _ = args;
    anyhow::bail!("bench not built yet")
}
