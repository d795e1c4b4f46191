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
