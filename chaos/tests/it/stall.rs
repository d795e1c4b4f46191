//! A follower's connection to the leader goes silent but stays open (a
//! half-open TCP connection: the proxy's stall fault), while the leader's
//! own connections to the follower keep working, so the follower keeps its
//! leader. Writes through the follower travel on that connection; once the
//! first of them has failed, later ones must succeed again on a new
//! connection, not time out for as long as the dead one stays open.
//! raftstore only: etcd forwards proposals over its Raft peer streams.

use std::time::{Duration, Instant};

use chaos::cluster::connect;
use chaos::proxy::Faults;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follower_writes_recover_from_a_silent_connection_to_the_leader() {
    let dir = tempfile::tempdir().expect("tempdir");
    let target = crate::common::raftstore();
    let (c, leader, f) = crate::common::cluster_and_follower(&target, dir.path()).await;
    let mut cl = connect(&c.endpoint(f), Duration::from_secs(30)).await.expect("connect to the follower");
    cl.put("warm", "v", None).await.expect("a write through the follower opens its connection to the leader");

    let mut stall = Faults::default();
    stall.stall.insert((f, leader));
    c.proxy.set(stall);

    let start = Instant::now();
    let mut failures = Vec::new();
    loop {
        match cl.put("k", "v", None).await {
            Ok(_) => break,
            Err(e) => failures.push(format!("{:?}: {e}", start.elapsed())),
        }
        assert!(start.elapsed() < Duration::from_secs(20), "writes through the follower still fail {:?} after its connection to the leader went silent: {failures:?}", start.elapsed());
    }
    assert_eq!(c.leader().await, Some(leader), "the leader stayed (the fault only silenced the follower's connection)");
}
