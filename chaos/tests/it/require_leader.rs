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
