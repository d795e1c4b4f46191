//! etcd's Lock and Election services through the etcd-client crate and
//! etcdctl, against real etcd first and then raftstore.

use std::time::Duration;

use etcd_client::{Client, LeaseGrantOptions, LockOptions, ProclaimOptions, ResignOptions};
use tonic::Code;

use crate::common::{block_on, etcdctl, for_each_kind, status_of, within, Server};

const WAIT: Duration = Duration::from_secs(10);

async fn lease(c: &mut Client, ttl: i64) -> i64 {
    c.lease_grant(ttl, None::<LeaseGrantOptions>).await.expect("lease grant").id()
}

/// Whether `fut` is still pending after `d`.
async fn still_waiting<F: std::future::Future>(fut: &mut std::pin::Pin<Box<F>>, d: Duration) -> bool {
    tokio::time::timeout(d, fut.as_mut()).await.is_err()
}

#[test]
fn lock_queues_waiters_until_unlock_or_lease_end() {
    for_each_kind(|kind| {
        let s = Server::start(kind);
        block_on(async {
            let mut a = s.client().await;
            let mut b = s.client().await;
            let mut c = s.client().await;
            let (la, lb, lc) = (lease(&mut a, 60).await, lease(&mut a, 60).await, lease(&mut a, 60).await);

            let held = a.lock("l", Some(LockOptions::new().with_lease(la))).await.expect("first lock");
            assert_eq!(held.key(), format!("l/{la:x}").as_bytes());

            // B queues behind A; C behind B.
            let mut wait_b = Box::pin(async move { b.lock("l", Some(LockOptions::new().with_lease(lb))).await });
            assert!(still_waiting(&mut wait_b, Duration::from_millis(800)).await, "B got a held lock");
            let mut wait_c = Box::pin(async move { c.lock("l", Some(LockOptions::new().with_lease(lc))).await });
            assert!(still_waiting(&mut wait_c, Duration::from_millis(300)).await, "C got a held lock");

            // Unlock hands the lock to B, not C.
            a.unlock(held.key()).await.expect("unlock");
            let got_b = within(WAIT, "B's lock after unlock", wait_b).await.expect("B's lock");
            assert_eq!(got_b.key(), format!("l/{lb:x}").as_bytes());
            assert!(still_waiting(&mut wait_c, Duration::from_millis(500)).await, "C got the lock B holds");

            // The end of B's lease releases it.
            a.lease_revoke(lb).await.expect("revoke B's lease");
            let got_c = within(WAIT, "C's lock after B's lease ended", wait_c).await.expect("C's lock");
            assert_eq!(got_c.key(), format!("l/{lc:x}").as_bytes());
        });
    });
}

#[test]
fn lock_without_a_lease_gets_one_and_an_unknown_lease_is_refused() {
    for_each_kind(|kind| {
        let s = Server::start(kind);
        block_on(async {
            let mut c = s.client().await;
            let held = c.lock("nolease", None).await.expect("lock without a lease");
            let kv = c.get(held.key(), None).await.expect("get the lock key");
            let lease = kv.kvs()[0].lease();
            assert_ne!(lease, 0, "the lock key has no lease");
            let ttl = c.lease_time_to_live(lease, None).await.expect("ttl");
            assert!(ttl.granted_ttl() == 60, "granted TTL {}", ttl.granted_ttl());

            let err = c.lock("unknown", Some(LockOptions::new().with_lease(0x1234))).await.expect_err("a lock on an unknown lease");
            let (code, msg) = status_of(&err);
            // etcd's lock service calls its KV through a client, and passes
            // the client's error on as a plain error: code Unknown.
            assert_eq!((code, msg.as_str()), (Code::Unknown, "etcdserver: requested lease not found"));
        });
    });
}

#[test]
fn a_cancelled_lock_waiter_leaves_the_queue() {
    for_each_kind(|kind| {
        let s = Server::start(kind);
        block_on(async {
            let mut a = s.client().await;
            let mut b = s.client().await;
            let (la, lb) = (lease(&mut a, 60).await, lease(&mut a, 60).await);
            a.lock("q", Some(LockOptions::new().with_lease(la))).await.expect("lock");
            let gave_up = tokio::time::timeout(Duration::from_millis(500), b.lock("q", Some(LockOptions::new().with_lease(lb)))).await;
            assert!(gave_up.is_err(), "B got a held lock");
            let key = format!("q/{lb:x}");
            let deadline = tokio::time::Instant::now() + WAIT;
            loop {
                let left = a.get(key.as_str(), None).await.expect("get").kvs().len();
                if left == 0 {
                    break;
                }
                assert!(tokio::time::Instant::now() < deadline, "the cancelled waiter's key {key} is still there");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
    });
}

#[test]
fn election_campaign_proclaim_observe_resign() {
    for_each_kind(|kind| {
        let s = Server::start(kind);
        block_on(async {
            let mut a = s.client().await;
            let mut b = s.client().await;
            let (la, lb) = (lease(&mut a, 60).await, lease(&mut a, 60).await);

            let err = a.leader("e").await.expect_err("a leader of an election nobody runs");
            assert_eq!(status_of(&err), (Code::Unknown, "election: no leader".to_owned()));

            let won = a.campaign("e", "a1", la).await.expect("campaign A");
            // Observed once there is a leader: etcd sends the stream's
            // headers with its first message.
            let mut obs = a.observe("e").await.expect("observe");
            let leader_a = won.leader().expect("leader key").clone();
            assert_eq!(leader_a.key(), format!("e/{la:x}").as_bytes());
            assert_eq!(leader_a.lease(), la);
            let seen = within(WAIT, "observe A", obs.message()).await.expect("observe").expect("observed");
            assert_eq!(seen.kv().expect("kv").value(), b"a1");

            let mut wait_b = Box::pin(async move { b.campaign("e", "b1", lb).await });
            assert!(still_waiting(&mut wait_b, Duration::from_millis(800)).await, "B won while A leads");

            a.proclaim("a2", Some(ProclaimOptions::new().with_leader(leader_a.clone()))).await.expect("proclaim");
            let now = a.leader("e").await.expect("leader");
            assert_eq!(now.kv().expect("kv").value(), b"a2");
            let seen = within(WAIT, "observe a2", obs.message()).await.expect("observe").expect("observed");
            assert_eq!(seen.kv().expect("kv").value(), b"a2");

            a.resign(Some(ResignOptions::new().with_leader(leader_a.clone()))).await.expect("resign");
            let won_b = within(WAIT, "B's campaign after A resigned", wait_b).await.expect("campaign B");
            assert_eq!(won_b.leader().expect("leader key").key(), format!("e/{lb:x}").as_bytes());
            let seen = within(WAIT, "observe B", obs.message()).await.expect("observe").expect("observed");
            assert_eq!(seen.kv().expect("kv").value(), b"b1");

            // A's leader key is stale now.
            let err = a.proclaim("late", Some(ProclaimOptions::new().with_leader(leader_a))).await.expect_err("proclaim after resigning");
            assert_eq!(status_of(&err), (Code::Unknown, "election: not leader".to_owned()));
        });
    });
}

#[test]
fn etcdctl_lock_runs_a_command_under_the_lock() {
    for_each_kind(|kind| {
        let s = Server::start(kind);
        let out = etcdctl(s.endpoint(), &["lock", "ctl", "echo", "under-the-lock"]);
        assert!(out.ok().contains("under-the-lock"), "{out}");
        // The lock was released after the command.
        block_on(async {
            let mut c = s.client().await;
            let left = c.get("ctl/", Some(etcd_client::GetOptions::new().with_prefix())).await.expect("get");
            assert!(left.kvs().is_empty(), "the lock key is still there: {:?}", left.kvs());
        });
    });
}

/// With auth on, Lock and Election act with the caller's permissions: a
/// user who may write `ok/` locks `ok`, and is refused `no` with etcd's
/// error (passed on from KV, so code Unknown).
#[test]
fn lock_and_election_act_with_the_callers_permissions() {
    use etcd_client::{ConnectOptions, Permission};
    for_each_kind(|kind| {
        let s = Server::start(kind);
        block_on(async {
            let c = s.client().await;
            let mut a = c.auth_client();
            a.user_add("root", "rootpw", None).await.expect("user add root");
            a.role_add("root").await.expect("role add root");
            a.user_grant_role("root", "root").await.expect("grant root");
            a.user_add("u", "upw", None).await.expect("user add u");
            a.role_add("ok-writer").await.expect("role add");
            a.role_grant_permission("ok-writer", Permission::read_write("ok/").with_prefix()).await.expect("grant permission");
            a.user_grant_role("u", "ok-writer").await.expect("grant role");
            a.auth_enable().await.expect("auth enable");

            let opts = ConnectOptions::new().with_user("u", "upw").with_connect_timeout(Duration::from_secs(5)).with_timeout(Duration::from_secs(15));
            let mut u = within(WAIT, "connect as u", Client::connect([s.endpoint()], Some(opts))).await.expect("connect as u");
            let l = lease(&mut u, 60).await;
            let held = u.lock("ok", Some(LockOptions::new().with_lease(l))).await.expect("lock under ok/");
            u.unlock(held.key()).await.expect("unlock");
            let denied = (Code::Unknown, "etcdserver: permission denied".to_owned());
            let err = u.lock("no", Some(LockOptions::new().with_lease(l))).await.expect_err("lock under no/");
            assert_eq!(status_of(&err), denied);
            let err = u.campaign("no", "v", l).await.expect_err("campaign under no/");
            assert_eq!(status_of(&err), denied);
            u.campaign("ok", "v", l).await.expect("campaign under ok/");
        });
    });
}
