//! Command line of `loadgen`.
//!
//! Common flags are global, so they may come before or after the workload:
//! `loadgen --endpoints 127.0.0.1:2379 put --clients 64 --duration 10 --json`.

use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::error::{Error, Result};

/// Load generator for etcd v3-compatible stores.
#[derive(Debug, Clone, Parser)]
#[command(name = "loadgen", version, about)]
pub struct Cli {
    /// Flags shared by every workload.
    #[command(flatten)]
    pub common: CommonArgs,

    /// The workload to run.
    #[command(subcommand)]
    pub workload: Workload,
}

/// Flags shared by every workload.
#[derive(Debug, Clone, Args)]
pub struct CommonArgs {
    /// Comma-separated `host:port` (or `http://host:port`) endpoints.
    /// Connection `i` goes to endpoint `i % len`.
    #[arg(long, global = true, value_delimiter = ',', default_value = "127.0.0.1:2379", env = "LOADGEN_ENDPOINTS")]
    pub endpoints: Vec<String>,

    /// Concurrent clients, each with one request in flight.
    #[arg(long, global = true, default_value_t = 1)]
    pub clients: usize,

    /// gRPC connections the clients are spread over [default: min(clients, 16)].
    #[arg(long, global = true)]
    pub conns: Option<usize>,

    /// Stop after this many operations [default: 10000 if --duration is not given].
    #[arg(long, global = true)]
    pub total: Option<u64>,

    /// Stop after this many seconds.
    #[arg(long, global = true)]
    pub duration: Option<f64>,

    /// Hard time limit in seconds when only --total is given.
    #[arg(long, global = true, default_value_t = 300.0)]
    pub max_seconds: f64,

    /// Number of distinct keys.
    #[arg(long, global = true, default_value_t = 10_000)]
    pub key_space: u64,

    /// Key length in bytes (at least the prefix plus the decimal index).
    #[arg(long, global = true, default_value_t = 32)]
    pub key_size: usize,

    /// Value length in bytes.
    #[arg(long, global = true, default_value_t = 256)]
    pub val_size: usize,

    /// Prefix of every key the tool writes; each workload adds its own sub-prefix.
    #[arg(long, global = true, default_value = "/bench/")]
    pub prefix: String,

    /// Timeout of one request, in seconds.
    #[arg(long, global = true, default_value_t = 10.0)]
    pub timeout: f64,

    /// How long to keep probing endpoints before giving up, in seconds.
    #[arg(long, global = true, default_value_t = 10.0)]
    pub connect_timeout: f64,

    /// Print one JSON line on stdout (the human summary goes to stderr).
    #[arg(long, global = true)]
    pub json: bool,
}

/// Op count used when neither `--total` nor `--duration` is given.
pub const DEFAULT_TOTAL: u64 = 10_000;

/// Op count bound used when only `--duration` is given, so that every loop
/// stays bounded in count as well as in time.
pub const MAX_TOTAL: u64 = 1_000_000_000;

/// Upper bound on `--conns` when it is not given.
pub const DEFAULT_MAX_CONNS: usize = 16;

impl CommonArgs {
    /// Validates the flags.
    ///
    /// # Errors
    /// [`Error::InvalidArgs`] when a count is zero or a duration is not a
    /// positive finite number of seconds.
    pub fn validate(&self) -> Result<()> {
        let bad = |msg: &str| Err(Error::InvalidArgs(msg.to_owned()));
        if self.endpoints.iter().all(|e| e.trim().is_empty()) {
            return bad("--endpoints is empty");
        }
        if self.clients == 0 {
            return bad("--clients must be at least 1");
        }
        if self.conns == Some(0) {
            return bad("--conns must be at least 1");
        }
        if self.total == Some(0) {
            return bad("--total must be at least 1");
        }
        if self.key_space == 0 {
            return bad("--key-space must be at least 1");
        }
        for (name, v) in [("--duration", self.duration.unwrap_or(1.0)), ("--max-seconds", self.max_seconds), ("--timeout", self.timeout), ("--connect-timeout", self.connect_timeout)] {
            if !(v.is_finite() && v > 0.0) {
                return Err(Error::InvalidArgs(format!("{name} must be a positive number of seconds, got {v}")));
            }
        }
        Ok(())
    }

    /// Connections to open for `clients` concurrent users.
    pub fn conns_for(&self, clients: usize) -> usize {
        self.conns.unwrap_or_else(|| clients.min(DEFAULT_MAX_CONNS)).max(1)
    }

    /// The op-count bound of a run.
    pub fn op_limit(&self) -> u64 {
        match (self.total, self.duration) {
            (Some(t), _) => t,
            (None, Some(_)) => MAX_TOTAL,
            (None, None) => DEFAULT_TOTAL,
        }
    }

    /// The time bound of a run: `--duration`, else `--max-seconds`.
    pub fn time_limit(&self) -> Duration {
        secs(self.duration.unwrap_or(self.max_seconds))
    }

    /// The timeout of one request.
    pub fn request_timeout(&self) -> Duration {
        secs(self.timeout)
    }
}

/// Converts validated seconds to a [`Duration`], saturating at about 30 years.
pub fn secs(s: f64) -> Duration {
    Duration::try_from_secs_f64(s.clamp(0.0, 1e9)).unwrap_or(Duration::ZERO)
}

/// The workloads.
#[derive(Debug, Clone, Subcommand)]
pub enum Workload {
    /// Put random keys from the key space.
    Put,
    /// Single-key Range (Get) over keys the tool pre-populates.
    Range(RangeArgs),
    /// kube-apiserver's optimistic update: Get, then
    /// Txn If(mod_revision == rev) Then(Put) Else(Get), retried on conflict.
    TxnCas(TxnCasArgs),
    /// Watchers on one prefix and one writer; measures delivery latency.
    WatchFanout(WatchArgs),
}

impl Workload {
    /// The workload's name as printed in reports, e.g. `txn-cas`.
    pub fn name(&self) -> &'static str {
        match self {
            Workload::Put => "put",
            Workload::Range(_) => "range",
            Workload::TxnCas(_) => "txn-cas",
            Workload::WatchFanout(_) => "watch-fanout",
        }
    }
}

/// Read consistency of a Range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Consistency {
    /// Linearizable: goes through the leader's read index (etcd's default).
    #[value(name = "l", alias = "linearizable")]
    Linearizable,
    /// Serializable: served from the member's local state, may be stale.
    #[value(name = "s", alias = "serializable")]
    Serializable,
}

/// Flags of the `range` workload.
#[derive(Debug, Clone, Args)]
pub struct RangeArgs {
    /// `l` (linearizable) or `s` (serializable).
    #[arg(long, value_enum, default_value = "l")]
    pub consistency: Consistency,

    /// Skip pre-populating the key space (when a previous run already did).
    #[arg(long)]
    pub no_populate: bool,
}

/// Flags of the `txn-cas` workload.
#[derive(Debug, Clone, Args)]
pub struct TxnCasArgs {
    /// Conflicting attempts allowed per op before it counts as an error.
    #[arg(long, default_value_t = 100)]
    pub max_retries: u32,
}

/// Flags of the `watch-fanout` workload.
#[derive(Debug, Clone, Args)]
pub struct WatchArgs {
    /// Number of watchers, all on the same prefix, each on its own watch stream.
    #[arg(long, default_value_t = 16)]
    pub watchers: usize,

    /// Puts per second issued by the writer.
    #[arg(long, default_value_t = 1000.0)]
    pub rate: f64,

    /// Puts the writer may have in flight at once.
    #[arg(long, default_value_t = 64)]
    pub writer_inflight: usize,

    /// After the last put, how long to wait for missing events, in seconds.
    #[arg(long, default_value_t = 5.0)]
    pub drain: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> std::result::Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("loadgen").chain(args.iter().copied()))
    }

    #[test]
    fn global_flags_work_after_the_subcommand() -> std::result::Result<(), clap::Error> {
        let cli = parse(&["put", "--total", "200", "--json", "--endpoints", "a:1,b:2"])?;
        assert_eq!(cli.common.total, Some(200));
        assert!(cli.common.json);
        assert_eq!(cli.common.endpoints, vec!["a:1", "b:2"]);
        assert_eq!(cli.workload.name(), "put");
        Ok(())
    }

    #[test]
    fn consistency_accepts_short_and_long_names() -> std::result::Result<(), clap::Error> {
        for (arg, want) in [("l", Consistency::Linearizable), ("s", Consistency::Serializable), ("serializable", Consistency::Serializable)] {
            let cli = parse(&["range", "--consistency", arg])?;
            match cli.workload {
                Workload::Range(r) => assert_eq!(r.consistency, want),
                other => panic!("parsed {other:?}"),
            }
        }
        Ok(())
    }

    #[test]
    fn limits_default_sensibly() -> std::result::Result<(), clap::Error> {
        let cli = parse(&["put"])?;
        assert_eq!(cli.common.op_limit(), DEFAULT_TOTAL);
        assert_eq!(cli.common.time_limit(), Duration::from_secs(300));
        let cli = parse(&["put", "--duration", "2", "--clients", "64"])?;
        assert_eq!(cli.common.op_limit(), MAX_TOTAL);
        assert_eq!(cli.common.time_limit(), Duration::from_secs(2));
        assert_eq!(cli.common.conns_for(64), 16);
        assert_eq!(cli.common.conns_for(3), 3);
        Ok(())
    }

    #[test]
    fn validate_rejects_zero_and_nonsense() -> std::result::Result<(), clap::Error> {
        for args in [&["put", "--clients", "0"][..], &["put", "--total", "0"], &["put", "--duration=-1"], &["put", "--timeout", "NaN"], &["put", "--key-space", "0"]] {
            let cli = parse(args)?;
            assert!(cli.common.validate().is_err(), "{args:?} accepted");
        }
        Ok(())
    }
}
