//! A leader that was cut off while its followers' answers were in flight
//! must not serve a linearizable read from its old state once those
//! answers arrive (issue 14; the evidence history's failure mode).
//!
//! A pause of the leader creates this by chance: replication answers sent
//! before the pause are read after it, and the followers have meanwhile
//! elected a new leader that took writes. Here the proxy stages it on
//! purpose:
//! 1. the followers' answers to the leader are held, and a write W0 is sent
//!    to the leader (both followers append and acknowledge it; the
//!    acknowledgements wait in the proxy);
//! 2. the leader's requests and the followers' requests to it are held
//!    too: the followers elect a new leader, which commits a write W;
//! 3. a linearizable read R goes to the old leader, which has heard of no
//!    new term;
//! 4. one follower's held answers are released: the old leader commits W0
//!    and, having nothing new to send, queues a commit-only request to the
//!    other follower;
//! 5. the other follower's held answers (its acknowledgement of W0, sent
//!    before the election) are released.
//!
//! openraft 0.10.0-alpha.37 credits that old acknowledgement with the send
//! time of the commit-only request queued in step 4, after R arrived, so it
//! counted as a quorum confirming leadership for R and R returned the state
//! before W.

use std::time::{Duration, Instant};

use chaos::cluster::{connect, Cluster, Options};
use chaos::proxy::Faults;

/// (member ID, leader ID, term) from one member's Status.
async fn status(c: &Cluster, i: usize) -> Option<(u64, u64, u64)> {
    let mut cl = connect(&c.endpoint(i), Duration::from_secs(1)).await.ok()?;
    let s = tokio::time::timeout(Duration::from_millis(500), cl.status()).await.ok()?.ok()?;
    Some((s.header()?.member_id(), s.leader(), s.raft_term()))
}

/// A three-member cluster with a short election timeout (so a staging fits
/// in the two seconds a replication stream may wait for an answer), in
/// `dir`: the cluster, its leader, the followers, and the leader's
/// (member ID, term).
async fn short_timeout_cluster(dir: &std::path::Path) -> (Cluster, usize, Vec<usize>, u64, u64) {
    let mut opts = Options::new(crate::common::raftstore(), dir);
    opts.heartbeat_ms = 30;
    opts.election_ms = 300;
    let c = Cluster::start(opts).await.expect("cluster starts");
    let old = c.leader().await.expect("a leader");
    let followers: Vec<usize> = (0..3).filter(|&i| i != old).collect();
    let (old_id, _, term0) = status(&c, old).await.expect("the leader's status");
    (c, old, followers, old_id, term0)
}

/// Holds every message between the leader `old` and its `followers`, both
/// ways, and waits until one follower leads in a term after `term0`;
/// returns it.
async fn cut_off(c: &Cluster, old: usize, followers: &[usize], term0: u64) -> usize {
    let mut f = Faults::default();
    for &o in followers {
        f.hold_requests.insert((old, o));
        f.hold_answers.insert((old, o));
        f.hold_requests.insert((o, old));
        f.hold_answers.insert((o, old));
    }
    c.proxy.set(f);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        for &o in followers {
            if let Some((id, leader, term)) = status(c, o).await {
                if leader == id && term > term0 {
                    return o;
                }
            }
        }
        assert!(Instant::now() < deadline, "the followers did not elect a new leader");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_off_leader_does_not_serve_a_stale_read_when_old_answers_arrive() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (c, old, followers, old_id, term0) = short_timeout_cluster(dir.path()).await;
    let mut on_old = connect(&c.endpoint(old), Duration::from_secs(10)).await.expect("connect to the leader");
    on_old.put("k", "old", None).await.expect("first write");

    // 1. Answers to the leader held; W0 reaches both followers.
    let mut f = Faults::default();
    for &o in &followers {
        f.hold_answers.insert((old, o));
    }
    c.proxy.set(f.clone());
    let mut w0_client = on_old.clone();
    let w0 = tokio::spawn(async move { w0_client.put("w0", "x", None).await });
    tokio::time::sleep(Duration::from_millis(100)).await;

    // 2. The leader cut off in both directions: the followers elect.
    for &o in &followers {
        f.hold_requests.insert((old, o));
        f.hold_requests.insert((o, old));
    }
    c.proxy.set(f.clone());
    let deadline = Instant::now() + Duration::from_secs(5);
    let new = loop {
        let mut found = None;
        for &o in &followers {
            if let Some((id, leader, term)) = status(&c, o).await {
                if leader == id && term > term0 {
                    found = Some(o);
                }
            }
        }
        if let Some(o) = found {
            break o;
        }
        assert!(Instant::now() < deadline, "the followers did not elect a new leader");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let mut on_new = connect(&c.endpoint(new), Duration::from_secs(5)).await.expect("connect to the new leader");
    let w = on_new.put("k", "new", None).await.expect("the new leader takes W");
    let w_rev = w.header().expect("header").revision();
    let (_, _, old_term) = status(&c, old).await.expect("the old leader's status");
    assert_eq!(old_term, term0, "staging: the old leader must not have heard of the new term yet");
    assert_ne!(old_id, 0);

    // 3. R on the old leader.
    let mut r_client = on_old.clone();
    let r = tokio::spawn(async move { r_client.get("k", None).await });
    tokio::time::sleep(Duration::from_millis(20)).await;

    // 4. and 5. The held answers, one follower after the other.
    f.hold_answers.remove(&(old, followers[1]));
    c.proxy.set(f.clone());
    tokio::time::sleep(Duration::from_millis(50)).await;
    f.hold_answers.remove(&(old, followers[0]));
    c.proxy.set(f.clone());

    // Give a stale answer time to appear before the rest is delivered.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    c.proxy.heal();
    let got = tokio::time::timeout(Duration::from_secs(20), r).await.expect("R ends").expect("join");
    if let Ok(resp) = got {
        let rev = resp.header().expect("header").revision();
        let value = resp.kvs().first().map(|kv| kv.value().to_vec());
        assert!(
            rev >= w_rev && value.as_deref() == Some(&b"new"[..]),
            "stale linearizable read: revision {rev}, value {:?}, but W was acknowledged at revision {w_rev} before R was sent",
            value.map(|v| String::from_utf8_lossy(&v).into_owned())
        );
    }
    // W0 was acknowledged by both followers before the election, so
    // whatever its client heard, the new leader kept it.
    let _ = tokio::time::timeout(Duration::from_secs(20), w0).await;
    let kept = on_new.get("w0", None).await.expect("read W0");
    assert_eq!(kept.kvs().len(), 1, "W0 is committed");
    // The old leader, healed, serves linearizable reads again, and they are
    // current: refusing every read would also have passed the check above.
    let after = on_old.get("k", None).await.expect("a linearizable read on the healed member");
    assert_eq!(after.kvs().first().map(|kv| kv.value().to_vec()), Some(b"new".to_vec()), "the healed member's read is not current");
}

/// The same class for leases: a leader cut off from both followers still
/// believes it leads, and must not answer a lease's TTL or renew it from its
/// own lessor once the new leader revoked it (etcd checks its leadership
/// before LeaseRenew for this reason). Either the answer is the truth (the
/// lease is gone) or the call fails; a live TTL is stale.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_off_leader_does_not_answer_lease_queries_from_its_own_lessor() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (c, old, followers, _, term0) = short_timeout_cluster(dir.path()).await;
    let mut on_old = connect(&c.endpoint(old), Duration::from_secs(10)).await.expect("connect to the leader");
    let lease = on_old.lease_grant(600, None).await.expect("grant").id();
    // Every member has applied the grant before the cut.
    for i in 0..3 {
        let mut cl = connect(&c.endpoint(i), Duration::from_secs(5)).await.expect("connect");
        cl.get("sync", None).await.expect("linearizable read");
    }

    let new = cut_off(&c, old, &followers, term0).await;
    let mut on_new = connect(&c.endpoint(new), Duration::from_secs(5)).await.expect("connect to the new leader");
    on_new.lease_revoke(lease).await.expect("the new leader revokes the lease");
    let (_, _, old_term) = status(&c, old).await.expect("the old leader's status");
    assert_eq!(old_term, term0, "staging: the old leader must not have heard of the new term yet");

    let ttl = tokio::time::timeout(Duration::from_secs(3), on_old.lease_time_to_live(lease, None)).await;
    if let Ok(Ok(r)) = ttl {
        assert_eq!(r.ttl(), -1, "a cut-off leader reported a live TTL for a lease its successor revoked");
    }
    let renew = tokio::time::timeout(Duration::from_secs(3), async {
        let (mut keeper, mut answers) = on_old.lease_keep_alive(lease).await?;
        keeper.keep_alive().await?;
        answers.message().await
    })
    .await;
    if let Ok(Ok(Some(r))) = renew {
        assert!(r.ttl() <= 0, "a cut-off leader renewed a lease its successor revoked (TTL {})", r.ttl());
    }
    c.proxy.heal();
    // Healed, the member answers lease queries again, with the truth:
    // refusing every query would also have passed the checks above.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match on_old.lease_time_to_live(lease, None).await {
            Ok(r) => {
                assert_eq!(r.ttl(), -1, "the healed member reports a revoked lease as live");
                break;
            }
            Err(e) => assert!(Instant::now() < deadline, "the healed member still refuses lease queries: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A leader cut off while its lessor's deadlines run out must not revoke
/// leases that clients keep alive through the new leader (etcd-io/etcd#15247
/// is the same hazard in etcd). Found by review: a resumed leader's expiry
/// loop proposed the revoke, and when it learned of the new term the
/// proposal was forwarded to the new leader, which applied it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_off_leader_does_not_revoke_leases_kept_alive_elsewhere() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (c, old, followers, _, term0) = short_timeout_cluster(dir.path()).await;
    let mut on_old = connect(&c.endpoint(old), Duration::from_secs(10)).await.expect("connect to the leader");
    let lease = on_old.lease_grant(2, None).await.expect("grant").id();
    on_old.put("held", "v", Some(etcd_client::PutOptions::new().with_lease(lease))).await.expect("put with the lease");
    for i in 0..3 {
        let mut cl = connect(&c.endpoint(i), Duration::from_secs(5)).await.expect("connect");
        cl.get("sync", None).await.expect("linearizable read");
    }

    // Cut the leader off; the followers elect a new one.
    let new = cut_off(&c, old, &followers, term0).await;
    // The client keeps the lease alive through the new leader, every 500 ms.
    let mut on_new = connect(&c.endpoint(new), Duration::from_secs(5)).await.expect("connect to the new leader");
    let (mut keeper, mut answers) = on_new.lease_keep_alive(lease).await.expect("keep-alive stream");
    let keeping = tokio::spawn(async move {
        loop {
            if keeper.keep_alive().await.is_err() {
                return;
            }
            match answers.message().await {
                Ok(Some(r)) if r.ttl() > 0 => {}
                _ => return,
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });
    // Past the old leader's deadline for the lease (2 s after the grant),
    // then the old leader hears of the new term.
    tokio::time::sleep(Duration::from_secs(4)).await;
    c.proxy.heal();
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(!keeping.is_finished(), "the keep-alive stream ended: the lease was revoked or the new leader refused it");
    let mut check = connect(&c.endpoint(new), Duration::from_secs(5)).await.expect("connect");
    let got = check.get("held", None).await.expect("read the key");
    assert_eq!(got.kvs().len(), 1, "a key on a lease kept alive through the new leader was deleted (the old leader revoked the lease)");
    let ttl = check.lease_time_to_live(lease, None).await.expect("TTL");
    assert!(ttl.ttl() > 0, "the lease kept alive through the new leader was revoked (TTL {})", ttl.ttl());
    keeping.abort();
}
