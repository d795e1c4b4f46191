//! Delayed peer traffic (the proxy's delay fault: every chunk, each way)
//! must not cost a three-member cluster its leader. With etcd's default
//! timing (heartbeat 100 ms, election timeout 1000 ms) a 100 ms and then a
//! 200 ms one-way delay on every peer link (round trips of 200 and 400 ms,
//! longer than the heartbeat interval) keep the same leader in the same
//! term on every member, and after an idle spell longer than the leader's
//! lease, writes and a linearizable read on a follower succeed. Run against raftstore
//! and etcd (etcd keeps its leader, so the test asks nothing etcd cannot do).

use std::time::{Duration, Instant};

use chaos::cluster::{connect, Cluster, Options, Target};
use chaos::proxy::{link, Faults};

use crate::common::targets;

/// (leader ID, raft_term) as each member's Status reports them.
async fn leader_and_terms(c: &Cluster) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for i in 0..3 {
        let mut cl = connect(&c.endpoint(i), Duration::from_secs(5)).await.expect("connect");
        let s = cl.status().await.expect("Status");
        out.push((s.leader(), s.raft_term()));
    }
    out
}

async fn delay_keeps_leader(target: Target) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut opts = Options::new(target.clone(), dir.path());
    opts.heartbeat_ms = 100;
    opts.election_ms = 1000;
    let c = Cluster::start(opts).await.expect("cluster starts");
    let leader = c.leader().await.expect("a leader");
    let before = leader_and_terms(&c).await;
    assert!(before.iter().all(|s| *s == before[0] && s.0 != 0), "{}: members agree on one leader before the fault: {before:?}", target.name());

    let mut cl = connect(&c.endpoint(leader), Duration::from_secs(15)).await.expect("connect to the leader");
    let mut reader = connect(&c.endpoint((leader + 1) % 3), Duration::from_secs(15)).await.expect("connect to a follower");
    for delay_ms in [100, 200] {
        let mut f = Faults::default();
        for (a, b) in [(0, 1), (0, 2), (1, 2)] {
            f.delay.insert(link(a, b), Duration::from_millis(delay_ms));
        }
        c.proxy.set(f);
        // Idle longer than the leader's quorum lease (the maximum election
        // timeout, 2 s): only heartbeats can keep it, so they must be
        // acknowledged across the delayed links.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let start = Instant::now();
        let mut n = 0;
        while start.elapsed() < Duration::from_secs(2) {
            cl.put("delayed", format!("{delay_ms}-{n}"), None).await.unwrap_or_else(|e| panic!("{}: put {n} with {delay_ms} ms peer delay failed: {e}", target.name()));
            n += 1;
        }
        assert!(n >= 2, "{}: writes continue with {delay_ms} ms delay ({n} in 2 s)", target.name());
        // A linearizable read on a follower needs the leader to confirm
        // its leadership with a quorum across the same links.
        let got = reader.get("delayed", None).await.unwrap_or_else(|e| panic!("{}: linearizable get with {delay_ms} ms peer delay failed: {e}", target.name()));
        assert_eq!(got.kvs().len(), 1);
        let now = leader_and_terms(&c).await;
        assert_eq!(now, before, "{}: (leader, term) per member changed under {delay_ms} ms peer delay", target.name());
    }
    c.proxy.heal();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_delay_of_100_and_200_ms_keeps_the_leader() {
    for t in targets() {
        delay_keeps_leader(t).await;
    }
}
