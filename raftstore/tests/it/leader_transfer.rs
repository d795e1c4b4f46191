//! Leadership transfer: etcd's MoveLeader (driven with `etcdctl
//! move-leader`), its errors, and the hand-over a leader makes when it is
//! stopped with SIGTERM.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tonic::Code;

use crate::common::cluster::{leader_id, leader_proc, member_ids, put_until_ok, start_new, Proc};
use crate::common::server::free_port;
use crate::common::{block_on, connect, etcdctl, for_each_kind, status_of, Server};

/// Every member's client endpoint, comma-separated, as etcdctl's
/// `--endpoints` (move-leader finds the leader among them). Without a
/// scheme: etcdctl 3.4's move-leader dials each endpoint with the URL as
/// the HTTP/2 `:authority`, which the h2 crate refuses as malformed
/// (see NOTES.md).
fn all_endpoints(procs: &[Proc]) -> String {
    procs.iter().map(Proc::ep).collect::<Vec<_>>().join(",")
}

/// Waits until `ep` reports `want` as its leader.
async fn until_leader_is(ep: &str, want: u64) {
    let start = Instant::now();
    loop {
        let seen = leader_id(ep).await;
        if seen == want {
            return;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "{ep} reports leader {seen:x}, not {want:x}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The leader once every member names it: then each has heard from it
/// lately, so none is still campaigning from the start-up election (a
/// member that started late can otherwise depose the first leader a few
/// seconds in, under load).
async fn settled_leader(procs: &[Proc]) -> (u64, usize) {
    let start = Instant::now();
    loop {
        let (leader, li) = leader_proc(procs, 0).await;
        let mut agree = true;
        for p in procs {
            agree &= leader_id(&p.ep()).await == leader;
        }
        if agree {
            return (leader, li);
        }
        assert!(start.elapsed() < Duration::from_secs(30), "the members never agreed on a leader");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// MoveLeader's refusals on a single member, against real etcd too (which
/// proves the strings): a transferee that is no member, and a move to the
/// leader itself, which succeeds without a change.
#[test]
fn move_leader_on_a_single_member() {
    for_each_kind(|kind| {
        let server = Server::start(kind);
        block_on(async {
            let mut c = server.client().await;
            let me = c.status().await.expect("status").header().expect("header").member_id();
            let err = c.move_leader(0x1234).await.expect_err("a transferee that is not a member");
            assert_eq!(status_of(&err), (Code::FailedPrecondition, "etcdserver: bad leader transferee".to_owned()));
            c.move_leader(me).await.expect("moving to the leader itself succeeds");
            assert_eq!(c.status().await.expect("status").leader(), me);
        });
        let out = etcdctl(server.endpoint().trim_start_matches("http://"), &["move-leader", "1234"]);
        assert!(out.err().contains("etcdserver: bad leader transferee"), "{out}");
    });
}

/// `etcdctl move-leader` on three members: the named follower leads
/// afterwards, writes through the old leader that overlap the transfer all
/// succeed, and each of etcd's refusals comes with etcd's code and message.
#[test]
fn etcdctl_move_leader_on_three_members() {
    let dir = tempfile::tempdir().expect("tempdir");
    let procs = start_new(dir.path(), 3, &[]);
    block_on(async {
        put_until_ok(&procs[0].ep(), "warm", "1", Duration::from_secs(60)).await;
        let (leader, li) = settled_leader(&procs).await;
        let ids = member_ids(&procs[li].ep()).await;
        let fi = (li + 1) % procs.len();
        let follower = ids.iter().find(|(n, _, _)| *n == procs[fi].name).expect("follower listed").1;
        let eps = all_endpoints(&procs);

        // Only the leader accepts MoveLeader.
        let mut on_follower = connect(&procs[fi].ep()).await;
        let err = on_follower.move_leader(leader).await.expect_err("MoveLeader on a follower");
        assert_eq!(status_of(&err), (Code::FailedPrecondition, "etcdserver: not leader".to_owned()));

        // A learner is no transferee (it cannot campaign); neither is an ID
        // that is not a member.
        let mut on_leader = connect(&procs[li].ep()).await;
        let learner_url = format!("http://127.0.0.1:{}", free_port());
        let added = on_leader.member_add([learner_url.as_str()], Some(etcd_client::MemberAddOptions::new().with_is_learner())).await.expect("add a learner");
        let learner = added.member().expect("added member").id();
        for bad in [learner, 0x1234] {
            let out = etcdctl(&eps, &["move-leader", &format!("{bad:x}")]);
            assert!(out.err().contains("etcdserver: bad leader transferee"), "transferee {bad:x}: {out}");
        }
        assert_eq!(leader_id(&procs[li].ep()).await, leader, "a refused MoveLeader moves nothing");

        // Writes to the old leader while it hands over: they wait for the
        // new leader and go there, none fails.
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let (ep, stop) = (procs[li].ep(), stop.clone());
            tokio::spawn(async move {
                let mut c = connect(&ep).await;
                let mut n = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    c.put(format!("during/{n}"), "v", None).await.unwrap_or_else(|e| panic!("put {n} during the transfer: {e}"));
                    n += 1;
                }
                n
            })
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        let out = tokio::task::spawn_blocking({
            let eps = eps.clone();
            move || etcdctl(&eps, &["move-leader", &format!("{follower:x}")])
        })
        .await
        .expect("etcdctl");
        assert!(out.ok().contains(&format!("Leadership transferred from {leader:x} to {follower:x}")), "{out}");
        tokio::time::sleep(Duration::from_millis(300)).await;
        stop.store(true, Ordering::Relaxed);
        let written = writer.await.expect("writer");
        assert!(written > 0, "the writer ran");

        // MoveLeader answers once the old leader sees the transferee lead;
        // the others follow.
        assert_eq!(leader_id(&procs[li].ep()).await, follower);
        for p in &procs {
            until_leader_is(&p.ep(), follower).await;
        }
        put_until_ok(&procs[li].ep(), "after", "1", Duration::from_secs(10)).await;
        let got = on_follower.get("during/", Some(etcd_client::GetOptions::new().with_prefix().with_count_only())).await.expect("count the writes");
        assert_eq!(got.count(), i64::from(written), "every acknowledged write is there");
    });
}

/// SIGTERM on the leader: it hands its leadership over before it exits, as
/// etcd's leader does, so the others do not wait out an election. The
/// election timeout is 5 s here: members left without a leader would first
/// campaign about 6.5 s after they last heard from it, so a write with a
/// 3 s deadline right after the exit succeeds only because of the hand-over.
#[test]
fn sigterm_on_the_leader_hands_leadership_over() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut procs = start_new(dir.path(), 3, &["--election-timeout", "5000"]);
    block_on(async {
        put_until_ok(&procs[0].ep(), "warm", "1", Duration::from_secs(60)).await;
        let (old, li) = settled_leader(&procs).await;
        procs[li].signal("TERM");
        let status = procs[li].wait_exit(Duration::from_secs(30)).unwrap_or_else(|| panic!("the leader did not exit on SIGTERM:\n{}", procs[li].log()));
        assert!(status.success(), "exit status {status:?}:\n{}", procs[li].log());
        assert!(procs[li].log().contains("leadership transfer finished"), "no hand-over in the log:\n{}", procs[li].log());

        let rest: Vec<&Proc> = procs.iter().enumerate().filter(|(i, _)| *i != li).map(|(_, p)| p).collect();
        for p in &rest {
            let out = etcdctl(&p.client_url(), &["--command-timeout=3s", "put", &format!("after-{}", p.name), "v"]);
            out.ok();
        }
        let mut c = connect(&rest[0].ep()).await;
        let leader = c.status().await.expect("status").leader();
        assert!(leader != 0 && leader != old, "leader after the exit: {leader:x} (old {old:x})");
    });
}
