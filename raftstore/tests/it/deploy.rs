//! `deploy/local-cluster.sh`: `stop` returns only once every member process
//! is gone (so their ports are free), and an immediate `start` on the same
//! ports brings the cluster back with its data, members added with `join`
//! included; a start where every member comes up warns of nothing.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::server::raftstore_bin;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/local-cluster.sh")
}

fn run(dir: &Path, base: u16, args: &[&str]) -> Output {
    let out = Command::new("bash").arg(script()).args(args).env("CLUSTER_DIR", dir).env("BASE_PORT", base.to_string()).env("RAFTSTORE_BIN", raftstore_bin()).output().expect("run local-cluster.sh");
    assert!(out.status.success(), "local-cluster.sh {args:?}: {}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    out
}

/// The script's ports for `base`: clients on base+{0,10,20}, peers +1, and
/// the slot of a fourth (joined) member at +30.
fn ports(base: u16) -> Vec<u16> {
    [0, 1, 10, 11, 20, 21, 30, 31].iter().map(|o| base + o).collect()
}

fn all_free(base: u16) -> bool {
    ports(base).into_iter().all(|p| TcpListener::bind(("127.0.0.1", p)).is_ok())
}

/// A base whose six ports are free now (the script takes fixed offsets, so
/// binding port 0 cannot pick them).
fn free_base() -> u16 {
    for _ in 0..50 {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let p = l.local_addr().expect("addr").port();
        drop(l);
        if p < 65000 && all_free(p) {
            return p;
        }
    }
    panic!("no free base port found");
}

fn pids(dir: &Path) -> Vec<u32> {
    ["m1", "m2", "m3"].iter().map(|n| std::fs::read_to_string(dir.join(format!("{n}.pid"))).expect("pid file")).map(|s| s.trim().parse().expect("pid")).collect()
}

fn alive(pid: u32) -> bool {
    // An exited member that its new parent (init here) has not reaped yet
    // is a zombie (`Z`): gone, its ports closed.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map(|s| s.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))).unwrap_or(false)
}

#[test]
fn stop_waits_for_the_members_and_start_reuses_the_ports() {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = free_base();
    let out = run(dir.path(), base, &["start"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("warning") && !err.contains("still starting"), "a clean start warned: {err}");
    let first = pids(dir.path());
    assert!(first.iter().all(|p| alive(*p)));

    let out = run(dir.path(), base, &["stop"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("all members stopped"), "{text}");
    for n in ["m1", "m2", "m3"] {
        assert!(text.contains(&format!("stopped {n}")), "{text}");
    }
    // Right after stop returns: processes gone, ports free.
    assert!(first.iter().all(|p| !alive(*p)), "members still running after stop: {first:?}");
    assert!(all_free(base), "ports of {base} still bound after stop");

    // An immediate start on the same ports comes up healthy.
    let out = run(dir.path(), base, &["start"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("endpoints:"));
    let second = pids(dir.path());
    assert!(second.iter().all(|p| alive(*p)));

    // A joined member comes back with the others after stop and start.
    run(dir.path(), base, &["join", "m4"]);
    run(dir.path(), base, &["stop"]);
    let out = run(dir.path(), base, &["start"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("started m4"), "{text}");
    let m4: u32 = std::fs::read_to_string(dir.path().join("m4.pid")).expect("m4 pid file").trim().parse().expect("pid");
    assert!(alive(m4));
    let client = format!("127.0.0.1:{}", base + 30);
    let mut healthy = false;
    for _ in 0..100 {
        let h = Command::new("etcdctl").args(["--endpoints", &client, "--dial-timeout=1s", "--command-timeout=1s", "endpoint", "health"]).env("ETCDCTL_API", "3").output().expect("etcdctl");
        if h.status.success() {
            healthy = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert!(healthy, "the joined member m4 does not serve after start");
    let third = pids(dir.path());
    run(dir.path(), base, &["clean"]);
    assert!(third.iter().all(|p| !alive(*p)) && !alive(m4));
}
