//! Three raftstore processes forming one cluster from `--initial-cluster`
//! (the start of issue 4's cluster tests): bootstrap when all start at once,
//! writes through any member, linearizable reads on another, and a new
//! leader with writes continuing after the leader is killed.

use std::time::Duration;

use crate::common::cluster::{put_until_ok, start_new};
use crate::common::{block_on, connect};

#[test]
fn three_members_bootstrap_serve_and_survive_leader_loss() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut members = start_new(dir.path(), 3, &[]);
    block_on(async {
        // Bootstrap with all members starting at once; write via member 1.
        let rev = put_until_ok(&members[1].ep(), "a", "v", Duration::from_secs(20)).await;
        // A linearizable read on member 2 sees it.
        let mut c2 = connect(&members[2].ep()).await;
        let got = c2.get("a", None).await.expect("get on a follower");
        assert_eq!(got.kvs().len(), 1);
        assert!(got.header().map(|h| h.revision()).unwrap_or(0) >= rev);
        let status = c2.status().await.expect("status");
        let leader = status.leader();
        assert_ne!(leader, 0, "a leader is known");
        let list = c2.member_list().await.expect("member list");
        assert_eq!(list.members().len(), 3);
        let leader_idx = list
            .members()
            .iter()
            .find(|m| m.id() == leader)
            .and_then(|m| m.name().strip_prefix('m'))
            .and_then(|n| n.parse::<usize>().ok())
            .expect("leader is a member");
        // Kill the leader: the other two elect a new one and take writes.
        members[leader_idx].kill();
        let other = (leader_idx + 1) % 3;
        let rev2 = put_until_ok(&members[other].ep(), "b", "v", Duration::from_secs(10)).await;
        assert!(rev2 > rev, "revisions continue after the leader change");
        let mut c = connect(&members[(leader_idx + 2) % 3].ep()).await;
        let got = c.get("b", None).await.expect("get after failover");
        assert_eq!(got.kvs().len(), 1);
    });
}

/// Writes sent to a follower travel to the leader over one shared forward
/// stream, and answers come back in completion order: each concurrent write
/// must still get its own answer (its own revision and its own previous
/// value), and a forwarded write's etcd error must come back as that error.
#[test]
fn concurrent_writes_through_a_follower_get_their_own_answers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let members = start_new(dir.path(), 3, &[]);
    block_on(async {
        put_until_ok(&members[0].ep(), "warm", "v", Duration::from_secs(20)).await;
        let leader = connect(&members[0].ep()).await.status().await.expect("status").leader();
        let list = connect(&members[0].ep()).await.member_list().await.expect("member list");
        let follower = list
            .members()
            .iter()
            .find(|m| m.id() != leader)
            .and_then(|m| m.name().strip_prefix('m'))
            .and_then(|n| n.parse::<usize>().ok())
            .expect("a follower");
        let client = connect(&members[follower].ep()).await;
        const N: usize = 64;
        // Round 1: distinct keys, each answer has its own revision.
        let first: Vec<i64> = futures::future::join_all((0..N).map(|i| {
            let mut c = client.clone();
            async move { c.put(format!("fw/{i}"), format!("one-{i}"), None).await.expect("forwarded put").header().map(|h| h.revision()).unwrap_or(0) }
        }))
        .await;
        let mut revs = first.clone();
        revs.sort_unstable();
        revs.dedup();
        assert_eq!(revs.len(), N, "every forwarded write took its own revision: {first:?}");
        // Round 2: each answer's prev_kv is the value written to its key.
        let second = futures::future::join_all((0..N).map(|i| {
            let mut c = client.clone();
            async move {
                let r = c.put(format!("fw/{i}"), format!("two-{i}"), Some(etcd_client::PutOptions::new().with_prev_key())).await.expect("forwarded put");
                (i, r.prev_key().map(|kv| (kv.key_str().unwrap_or("").to_string(), kv.value_str().unwrap_or("").to_string())))
            }
        }))
        .await;
        for (i, prev) in second {
            assert_eq!(prev, Some((format!("fw/{i}"), format!("one-{i}"))), "answer {i} belongs to its own request");
        }
        // A forwarded write that fails on the leader fails with etcd's error.
        let mut c = client.clone();
        let err = c.put("fw/lease", "v", Some(etcd_client::PutOptions::new().with_lease(0x1234))).await.expect_err("unknown lease");
        assert!(err.to_string().contains("etcdserver: requested lease not found"), "{err}");
    });
}
