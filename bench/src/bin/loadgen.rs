//! `loadgen`: load generator for etcd v3-compatible stores.
//!
//! See `bench/README.md`. Exits non-zero only when a run cannot be carried
//! out (bad flags, unreachable endpoints, failed setup); failed requests
//! are counted in the report.

use anyhow::Context;
use bench::cli::Cli;
use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let name = cli.workload.name();
    let report = bench::workload::run(&cli).await.with_context(|| format!("loadgen {name}"))?;
    if cli.common.json {
        eprint!("{report}");
        println!("{}", report.to_json_line()?);
    } else {
        print!("{report}");
    }
    Ok(())
}
