//! `chaos`: runs the fault phases against a three-member raftstore or etcd
//! cluster and checks the histories; `chaos check --history FILE` re-checks
//! a saved history. Exits 1 on any violation.
//!
//! ```text
//! chaos --mode short                      # every fault, ~10 s each, raftstore
//! chaos --mode long --target etcd         # every fault, ~50 s each, 3 rounds
//! chaos --faults kill-leader,partition-leader --hold 10
//! chaos check --history chaos-out/raftstore-kill-leader.json
//! ```

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use chaos::check::check_all;
use chaos::cluster::{find_raftstore, Target};
use chaos::fault::Fault;
use chaos::history::History;
use chaos::run::{run_all, PhaseConfig};
use clap::{Parser, Subcommand, ValueEnum};

#[derive(Parser, Debug)]
#[command(name = "chaos", about = "Fault-injection harness for raftstore and etcd", args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Cmd>,
    /// short: every fault once, ~10 s each (CI). long: every fault, ~50 s each, 3 rounds.
    #[arg(long, value_enum, default_value = "short")]
    mode: Mode,
    /// The server to test.
    #[arg(long, value_enum, default_value = "raftstore")]
    target: TargetKind,
    /// Path of the raftstore binary (default: next to this binary).
    #[arg(long = "raftstore-bin", env = "RAFTSTORE_BIN")]
    raftstore_bin: Option<PathBuf>,
    /// Path of the etcd binary.
    #[arg(long = "etcd-bin", default_value = "etcd")]
    etcd_bin: PathBuf,
    /// Comma-separated faults to run (default: all).
    #[arg(long, value_delimiter = ',')]
    faults: Vec<Fault>,
    /// Seconds each fault is held (overrides the mode's value).
    #[arg(long)]
    hold: Option<u64>,
    /// Rounds over the fault list (default: 1 short, 3 long).
    #[arg(long)]
    rounds: Option<usize>,
    /// Where failing histories and member logs are saved.
    #[arg(long, default_value = "chaos-out")]
    out: PathBuf,
    /// Save every history (and member logs) to --out, not only failing ones.
    #[arg(long = "save-all")]
    save_all: bool,
    /// Whether watchers send RequestProgress every 300 ms (default: yes for
    /// raftstore, no for etcd 3.4.23, which has etcd-io/etcd#15220).
    #[arg(long = "request-progress")]
    request_progress: Option<bool>,
    /// Workload seed; several, comma-separated, run the whole schedule
    /// once per seed, one after another.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    seed: Vec<u64>,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Re-check a saved history and print its violations.
    Check {
        /// The JSON file a failing run saved.
        #[arg(long)]
        history: PathBuf,
    },
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum Mode {
    Short,
    Long,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum TargetKind {
    Raftstore,
    Etcd,
}

fn main() -> ExitCode {
    match real_main() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("chaos: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn real_main() -> Result<bool> {
    let cli = Cli::parse();
    if let Some(Cmd::Check { history }) = cli.command {
        let h: History = serde_json::from_slice(&std::fs::read(&history)?)?;
        let v = check_all(&h);
        println!("{} {}: {} operations, {} watchers, {} violations", h.target, h.fault, h.operations.len(), h.watchers.len(), v.len());
        for x in &v {
            println!("VIOLATION {x}");
        }
        return Ok(v.is_empty());
    }
    let target = match cli.target {
        TargetKind::Raftstore => Target::Raftstore(match cli.raftstore_bin {
            Some(p) => p,
            None => find_raftstore()?,
        }),
        TargetKind::Etcd => Target::Etcd(cli.etcd_bin),
    };
    let (mut cfg, rounds) = match cli.mode {
        Mode::Short => (PhaseConfig::short(), 1),
        Mode::Long => (PhaseConfig::long(), 3),
    };
    if let Some(h) = cli.hold {
        cfg.hold = Duration::from_secs(h);
    }
    cfg.save_all = cli.save_all;
    cfg.request_progress = cli.request_progress;
    let faults = if cli.faults.is_empty() { Fault::ALL.to_vec() } else { cli.faults };
    let rt = tokio::runtime::Runtime::new()?;
    let started = std::time::Instant::now();
    let (mut phases, mut bad) = (0, 0);
    for &seed in &cli.seed {
        cfg.seed = seed;
        let reports = rt.block_on(run_all(&target, &faults, &cfg, cli.rounds.unwrap_or(rounds), &cli.out))?;
        let seed_bad: usize = reports.iter().map(|r| r.violations.len()).sum();
        println!("chaos {} {:?} seed {seed}: {} phases, {seed_bad} violations", target.name(), cli.mode, reports.len());
        phases += reports.len();
        bad += seed_bad;
    }
    let minutes = started.elapsed().as_secs() / 60;
    println!("chaos {} {:?}: {} seeds, {phases} phases, {bad} violations, {minutes} min", target.name(), cli.mode, cli.seed.len());
    Ok(bad == 0)
}
