//! A single member cut off by the proxy (a minority partition) answers
//! linearizable reads and writes with gRPC Unavailable, while the majority
//! keeps accepting writes; after healing, Maintenance.HashKV at one
//! revision is equal on all members. Run against raftstore and etcd.

use std::time::Duration;

use chaos::cluster::{connect, Target};
use chaos::proxy::Faults;
use etcd_client::GetOptions;

use crate::common::targets;

/// Long enough for etcd's own "request timed out" (about 7 s).
const CLIENT_TIMEOUT: Duration = Duration::from_secs(20);

fn assert_unavailable(what: &str, target: &Target, r: Result<Result<(), etcd_client::Error>, tokio::time::error::Elapsed>) {
    match r {
        Ok(Err(etcd_client::Error::GRpcStatus(s))) => assert_eq!(s.code(), tonic::Code::Unavailable, "{}: {what} on the minority: {s:?}", target.name()),
        other => panic!("{}: {what} on the minority should fail with Unavailable, got {other:?}", target.name()),
    }
}

async fn minority_refuses_majority_serves(target: Target) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (c, leader, cut) = crate::common::cluster_and_follower(&target, dir.path()).await;
    let mut get_client = connect(&c.endpoint(cut), CLIENT_TIMEOUT).await.expect("connect to the minority");
    let mut put_client = get_client.clone();
    let mut f = Faults::default();
    f.isolate(&[cut], 3);
    c.proxy.set(f);

    let get = tokio::spawn(async move { get_client.get("k", None).await.map(|_| ()) });
    let put = tokio::spawn(async move { put_client.put("k", "from-minority", None).await.map(|_| ()) });

    // The majority keeps taking writes meanwhile.
    let mut maj = connect(&c.endpoint(leader), Duration::from_secs(5)).await.expect("connect to the leader");
    let mut last = 0;
    for i in 0..20 {
        let r = maj.put("k", format!("majority-{i}"), None).await.expect("the majority accepts writes");
        last = r.header().map(|h| h.revision()).unwrap_or(0);
    }
    assert!(last > 20, "revisions advance on the majority");

    let outer = CLIENT_TIMEOUT + Duration::from_secs(5);
    assert_unavailable("linearizable get", &target, tokio::time::timeout(outer, async { get.await.expect("join") }).await);
    assert_unavailable("put", &target, tokio::time::timeout(outer, async { put.await.expect("join") }).await);

    // Heal: the cut member catches up and all members hash equal.
    c.proxy.heal();
    c.wait_healthy(Duration::from_secs(30)).await.expect("healthy after healing");
    let mut cl = connect(&c.endpoint(cut), Duration::from_secs(10)).await.expect("connect");
    let rev = cl.put("after-heal", "x", None).await.expect("write via the healed member").header().map(|h| h.revision()).unwrap_or(0);
    let mut hashes = Vec::new();
    for i in 0..3 {
        let mut cl = connect(&c.endpoint(i), Duration::from_secs(10)).await.expect("connect");
        let mut applied = 0;
        for _ in 0..100 {
            applied = cl.get("after-heal", Some(GetOptions::new().with_serializable())).await.ok().and_then(|r| r.header().map(|h| h.revision())).unwrap_or(0);
            if applied >= rev {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(applied >= rev, "{}: m{i} applied {applied} < {rev}", target.name());
        hashes.push(cl.maintenance_client().hash_kv(rev).await.expect("HashKV").hash());
    }
    assert!(hashes.iter().all(|h| *h == hashes[0]), "{}: HashKV at revision {rev} differs: {hashes:?}", target.name());
    // The minority's write, if it was applied at all, is in every member the same way; the value is
    // one of the majority's or the minority's.
    let v = cl.get("k", None).await.expect("get");
    assert_eq!(v.kvs().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitioned_minority_answers_unavailable_and_heals_to_equal_hashes() {
    for t in targets() {
        minority_refuses_majority_serves(t).await;
    }
}
