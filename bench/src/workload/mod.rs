//! The workloads, one module each, and the dispatcher.

pub mod populate;
pub mod put;
pub mod range;
pub mod txn_cas;
pub mod watch_fanout;

use crate::cli::{Cli, Workload};
use crate::conn::normalize_endpoints;
use crate::error::{Error, Result};
use crate::report::Report;

/// Validates the flags, runs the chosen workload and returns its report.
///
/// # Errors
/// Bad flags, unreachable endpoints or a failed setup phase. Failures of
/// individual requests are not errors: they are counted in the report.
pub async fn run(cli: &Cli) -> Result<Report> {
    cli.common.validate()?;
    let endpoints = normalize_endpoints(&cli.common.endpoints);
    if endpoints.is_empty() {
        return Err(Error::InvalidArgs("--endpoints is empty".into()));
    }
    match &cli.workload {
        Workload::Put => put::run(&cli.common, &endpoints).await,
        Workload::Range(args) => range::run(&cli.common, args, &endpoints).await,
        Workload::TxnCas(args) => txn_cas::run(&cli.common, args, &endpoints).await,
        Workload::WatchFanout(args) => watch_fanout::run(&cli.common, args, &endpoints).await,
    }
}
