//! `loadgen` workloads against a real etcd.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::etcd::Etcd;
use crate::common::loadgen::{run, run_json};

/// One loadgen run and the op count it must report.
struct Case {
    workload: &'static str,
    args: &'static [&'static str],
    /// `ops` in the report: requested ops, or for watch-fanout puts x watchers.
    ops: u64,
}

const CASES: &[Case] = &[
    Case { workload: "put", args: &["put", "--total", "200"], ops: 200 },
    Case { workload: "put", args: &["put", "--total", "300", "--clients", "8", "--conns", "3"], ops: 300 },
    Case { workload: "range", args: &["range", "--total", "200", "--clients", "4", "--key-space", "50"], ops: 200 },
    Case { workload: "range", args: &["range", "--total", "200", "--clients", "4", "--key-space", "50", "--consistency", "s"], ops: 200 },
    // Two keys, eight clients: conflicts are all but certain.
    Case { workload: "txn-cas", args: &["txn-cas", "--total", "100", "--clients", "8", "--key-space", "2"], ops: 100 },
    Case { workload: "watch-fanout", args: &["watch-fanout", "--watchers", "4", "--conns", "2", "--total", "50", "--rate", "200"], ops: 200 },
];

fn field_u64(report: &Value, name: &str) -> u64 {
    report[name].as_u64().unwrap_or_else(|| panic!("{name} missing or not an integer in {report}"))
}

fn field_f64(report: &Value, name: &str) -> f64 {
    report[name].as_f64().unwrap_or_else(|| panic!("{name} missing or not a number in {report}"))
}

#[test]
fn workloads_report_exact_counts_against_etcd() {
    let etcd = Etcd::start();
    for case in CASES {
        let report = run_json(&etcd.endpoint, case.args);
        let ctx = format!("{:?} -> {report}\netcd log:\n{}", case.args, etcd.log_tail());
        assert_eq!(report["workload"], case.workload, "{ctx}");
        assert_eq!(report["endpoints"], format!("http://{}", etcd.endpoint), "{ctx}");
        assert_eq!(field_u64(&report, "ops"), case.ops, "{ctx}");
        assert_eq!(field_u64(&report, "errors"), 0, "{ctx}");
        for name in ["seconds", "ops_per_sec", "p50_ms", "p99_ms", "max_ms"] {
            assert!(field_f64(&report, name) > 0.0, "{name} not > 0: {ctx}");
        }
        assert!(field_f64(&report, "p50_ms") <= field_f64(&report, "p99_ms") && field_f64(&report, "p99_ms") <= field_f64(&report, "max_ms"), "quantiles out of order: {ctx}");
        match case.workload {
            "txn-cas" => assert!(field_u64(&report, "conflicts") > 0, "{ctx}"),
            "range" => assert_eq!(field_u64(&report, "misses"), 0, "{ctx}"),
            "watch-fanout" => {
                assert_eq!(field_u64(&report, "puts"), 50, "{ctx}");
                assert_eq!(field_u64(&report, "missing_events"), 0, "{ctx}");
            }
            _ => {}
        }
    }
}

#[test]
fn duration_bounds_a_run() {
    let etcd = Etcd::start();
    let t0 = Instant::now();
    let report = run_json(&etcd.endpoint, &["put", "--clients", "4", "--duration", "1"]);
    assert!(t0.elapsed() < Duration::from_secs(30), "took {:?}", t0.elapsed());
    let seconds = field_f64(&report, "seconds");
    assert!((0.9..5.0).contains(&seconds), "seconds {seconds} in {report}");
    assert!(field_u64(&report, "ops") > 0, "{report}");
}

#[test]
fn unreachable_endpoint_fails_fast_with_a_message() {
    // Nothing listens on a port we just released.
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).unwrap_or_else(|e| panic!("finding a free port: {e}"));
    let t0 = Instant::now();
    let out = run(&format!("127.0.0.1:{port}"), &["put", "--total", "10", "--connect-timeout", "1"]);
    assert!(!out.status.success(), "loadgen succeeded against nothing");
    assert!(t0.elapsed() < Duration::from_secs(20), "took {:?}", t0.elapsed());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("did not answer"), "stderr: {stderr}");
    assert!(out.stdout.is_empty(), "stdout: {:?}", out.stdout);
}
