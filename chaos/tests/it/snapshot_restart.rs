//! The snapshot-restart fault against raftstore really makes the restarted
//! member install a snapshot (the issue's "restarting a member whose peers
//! have compacted their log"), not catch up from a log its peers kept.

use std::time::Duration;

use chaos::fault::Fault;
use chaos::run::{run_phase, PhaseConfig};

use crate::common::raftstore;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raftstore_snapshot_restart_installs_a_snapshot() {
    let mut cfg = PhaseConfig::short();
    cfg.hold = Duration::from_secs(2);
    cfg.recover = Duration::from_secs(1);
    let out = std::env::temp_dir().join(format!("chaos-it-snap-{}", std::process::id()));
    let r = run_phase(&raftstore(), Fault::SnapshotRestart, &cfg, &out).await.expect("the phase runs");
    assert!(r.violations.is_empty(), "{} violations:\n{r}", r.violations.len());
    assert!(r.action.contains("by installing a snapshot"), "the restarted member caught up without a snapshot: {}", r.action);
    let _ = std::fs::remove_dir_all(&out);
}
