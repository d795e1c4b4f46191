//! Writes a follower forwards to the leader: one that provably never left
//! (the leader's port refused it) is sent again as soon as a leader can
//! take it, even when that leader is the same member back at its URL.

use std::time::{Duration, Instant};

use crate::common::cluster::{put_until_ok, start_new, Proc};
use crate::common::{block_on, connect, within};

/// Index of the leader and of one follower, by member name `m<i>`.
async fn leader_and_follower(members: &[Proc]) -> (usize, usize) {
    let mut c = connect(&members[0].ep()).await;
    let leader = c.status().await.expect("status").leader();
    let list = c.member_list().await.expect("member list");
    let idx = |id: u64| {
        list.members()
            .iter()
            .find(|m| m.id() == id)
            .and_then(|m| m.name().strip_prefix('m'))
            .and_then(|n| n.parse::<usize>().ok())
            .expect("a member")
    };
    let l = idx(leader);
    (l, (l + 1) % members.len())
}

/// A write a follower could not deliver because its leader was down (the
/// connection was refused, so it provably never left) is sent again. The
/// leader killed and restarted at the same URL resumes its leadership in
/// the same term (openraft's leader restore), so the follower never sees
/// another leader: the write must still reach it promptly, not wait out
/// the request timeout for a leader change that never comes.
#[test]
fn undelivered_forward_reaches_the_leader_restarted_at_its_url() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut members = start_new(dir.path(), 3, &[]);
    let initial = members.iter().map(Proc::cluster_entry).collect::<Vec<_>>().join(",");
    block_on(async {
        put_until_ok(&members[0].ep(), "warm", "v", Duration::from_secs(20)).await;
        let (l, f) = leader_and_follower(&members).await;
        let m = 3 - l - f;
        // The follower comes back with a long election timeout: it never
        // campaigns (and its leader lease makes it refuse votes), so with
        // the third member down only the old leader can lead again.
        members[f].kill();
        members[f].extra = vec!["--election-timeout".into(), "10000".into()];
        members[f].start(&initial, "existing");
        put_until_ok(&members[f].ep(), "warm", "v", Duration::from_secs(20)).await;
        assert_eq!(leader_and_follower(&members).await.0, l, "the leader stayed");
        members[l].kill();
        members[m].kill();
        // Let the follower's stream to the dead leader end first.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let ep = members[f].ep();
        let start = Instant::now();
        let gap = tokio::spawn(async move {
            let mut c = connect(&ep).await;
            c.put("gap", "v", None).await.map(|_| start.elapsed())
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        // The old leader comes back and leads again at once.
        members[l].start(&initial, "existing");
        let took = within(Duration::from_secs(40), "the forwarded write", gap).await.expect("join");
        let took = took.unwrap_or_else(|e| panic!("the write failed although a leader serves: {e}"));
        assert!(took < Duration::from_secs(8), "the write waited {took:?} although its leader was back");
    });
}
