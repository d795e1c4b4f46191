//! The harness's short run against a real three-member etcd finds zero
//! violations: the checkers are not biased against etcd. Every fault runs,
//! each held 2 s.

use std::time::Duration;

use chaos::fault::Fault;
use chaos::run::{run_all, PhaseConfig};

use crate::common::etcd;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_short_run_has_no_violations() {
    let mut cfg = PhaseConfig::short();
    cfg.hold = Duration::from_secs(2);
    cfg.recover = Duration::from_secs(1);
    // Kept on failure: the report names the saved history and member logs.
    let out = std::env::temp_dir().join(format!("chaos-it-etcd-{}", std::process::id()));
    let reports = run_all(&etcd(), &Fault::ALL, &cfg, 1, &out).await.expect("every phase runs");
    assert_eq!(reports.len(), Fault::ALL.len());
    for r in &reports {
        let ok: usize = r.counts.values().map(|c| c[0]).sum();
        assert!(ok > 100, "{}: the workload made progress ({ok} ok operations)", r.fault);
        assert!(r.watch_events > 0, "{}: watchers saw events", r.fault);
        assert!(r.violations.is_empty(), "etcd {}: {} violations:\n{r}", r.fault, r.violations.len());
    }
    let _ = std::fs::remove_dir_all(&out);
}
