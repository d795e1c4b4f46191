//! etcd's require-leader metadata (`hasleader: true`, clientv3
//! `WithRequireLeader`; kube-apiserver sets it on its watches): a member
//! cut off from the others, once it knows no leader, answers such a
//! request at once with `etcdserver: no leader` (Unavailable) instead of
//! waiting out its request timeout. Run against raftstore and etcd.

use std::time::{Duration, Instant};

use chaos::cluster::{connect, Target};
use chaos::proxy::Faults;
use etcd_client::{Client, ConnectOptions};

use crate::common::targets;

async fn no_leader_at_once(target: Target) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (c, _, cut) = crate::common::cluster_and_follower(&target, dir.path()).await;
    let mut f = Faults::default();
    f.isolate(&[cut], 3);
    c.proxy.set(f);

    // The cut member gives up on its leader after an election timeout.
    let mut plain = connect(&c.endpoint(cut), Duration::from_secs(5)).await.expect("connect");
    let start = Instant::now();
    loop {
        let s = plain.status().await.expect("Status");
        if s.leader() == 0 {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "{}: the cut member still names leader {:x}", target.name(), s.leader());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // A client deadline below the members' request timeout (about 6 s for
    // raftstore here, 7 s for etcd): the answer must come from the
    // require-leader check, not from a request that waited and gave up.
    let opts = ConnectOptions::new().with_require_leader(true).with_timeout(Duration::from_secs(3));
    let mut cl = Client::connect([c.endpoint(cut)], Some(opts)).await.expect("connect with require-leader");
    let err = cl.put("k", "v", None).await.expect_err("a put on a member with no leader fails");
    let etcd_client::Error::GRpcStatus(st) = err else {
        panic!("{}: not a gRPC status: {err:?}", target.name());
    };
    assert_eq!((st.code(), st.message()), (tonic::Code::Unavailable, "etcdserver: no leader"), "{}: not `request timed out` after the request timeout", target.name());
    c.proxy.heal();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn require_leader_on_a_member_without_one_is_no_leader() {
    for t in targets() {
        no_leader_at_once(t).await;
    }
}

/// etcd's `monitorLeader`: a require-leader watch open on a member that
/// then loses its leader ends with `Unavailable` and `etcdserver: no
/// leader` after a few election timeouts (so the client can move on),
/// while a watch without the metadata on the same member stays open.
async fn watch_ends_on_leader_loss(target: Target) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (c, _, cut) = crate::common::cluster_and_follower(&target, dir.path()).await;
    let opts = ConnectOptions::new().with_require_leader(true);
    let mut rl = Client::connect([c.endpoint(cut)], Some(opts)).await.expect("connect with require-leader");
    let mut plain = connect(&c.endpoint(cut), Duration::from_secs(5)).await.expect("connect");
    let mut required = rl.watch("k", None).await.expect("require-leader watch");
    let mut open = plain.watch("k", None).await.expect("plain watch");
    for s in [&mut required, &mut open] {
        let created = tokio::time::timeout(Duration::from_secs(10), s.message()).await.expect("created in time").expect("created").expect("open");
        assert!(created.created(), "{}", target.name());
    }

    let mut f = Faults::default();
    f.isolate(&[cut], 3);
    c.proxy.set(f);
    let ended = tokio::time::timeout(Duration::from_secs(30), required.message()).await;
    let plain_open = tokio::time::timeout(Duration::from_secs(1), open.message()).await.is_err();
    c.proxy.heal();
    let ended = ended.unwrap_or_else(|_| panic!("{}: the require-leader watch is still open 30 s after its member lost the leader", target.name()));
    let err = ended.expect_err("the stream ends with an error");
    let etcd_client::Error::GRpcStatus(st) = err else {
        panic!("{}: not a gRPC status: {err:?}", target.name());
    };
    assert_eq!((st.code(), st.message()), (tonic::Code::Unavailable, "etcdserver: no leader"), "{}", target.name());
    assert!(plain_open, "{}: the watch without require-leader ended too", target.name());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn require_leader_watch_ends_when_its_member_loses_the_leader() {
    for t in targets() {
        watch_ends_on_leader_loss(t).await;
    }
}
