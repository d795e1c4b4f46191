//! Three raftstore processes forming one cluster from `--initial-cluster`
//! (the start of issue 4's cluster tests): bootstrap when all start at once,
//! writes through any member, linearizable reads on another, and a new
//! leader with writes continuing after the leader is killed.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::server::{free_port, raftstore_bin};
use crate::common::{block_on, connect};

struct Member {
    child: Child,
    client: String,
}

impl Drop for Member {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_cluster(dir: &std::path::Path) -> Vec<Member> {
    let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
    let initial: Vec<String> = ports.iter().enumerate().map(|(i, (_, p))| format!("m{i}=http://127.0.0.1:{p}")).collect();
    let initial = initial.join(",");
    ports
        .iter()
        .enumerate()
        .map(|(i, (c, p))| {
            let child = Command::new(raftstore_bin())
                .args(["--name", &format!("m{i}")])
                .arg("--data-dir")
                .arg(dir.join(format!("m{i}")))
                .args(["--listen-client-urls", &format!("http://127.0.0.1:{c}")])
                .args(["--listen-peer-urls", &format!("http://127.0.0.1:{p}")])
                .args(["--initial-advertise-peer-urls", &format!("http://127.0.0.1:{p}")])
                .args(["--initial-cluster", &initial])
                .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start raftstore");
            Member { child, client: format!("127.0.0.1:{c}") }
        })
        .collect()
}

async fn put_until_ok(ep: &str, key: &str, deadline: Duration) -> i64 {
    let start = Instant::now();
    loop {
        let attempt = async {
            let mut c = connect(ep).await;
            c.put(key, "v", None).await
        };
        match tokio::time::timeout(Duration::from_secs(3), attempt).await {
            Ok(Ok(r)) => return r.header().map(|h| h.revision()).unwrap_or(0),
            _ if start.elapsed() < deadline => tokio::time::sleep(Duration::from_millis(100)).await,
            other => panic!("put {key} via {ep} did not succeed within {deadline:?}: {other:?}"),
        }
    }
}

#[test]
fn three_members_bootstrap_serve_and_survive_leader_loss() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut members = start_cluster(dir.path());
    block_on(async {
        // Bootstrap with all members starting at once; write via member 1.
        let rev = put_until_ok(&members[1].client, "a", Duration::from_secs(20)).await;
        // A linearizable read on member 2 sees it.
        let mut c2 = connect(&members[2].client).await;
        let got = c2.get("a", None).await.expect("get on a follower");
        assert_eq!(got.kvs().len(), 1);
        assert!(got.header().map(|h| h.revision()).unwrap_or(0) >= rev);
        let status = c2.status().await.expect("status");
        let leader = status.leader();
        assert_ne!(leader, 0, "a leader is known");
        let list = c2.member_list().await.expect("member list");
        assert_eq!(list.members().len(), 3);
        let leader_idx = list.members().iter().find(|m| m.id() == leader).and_then(|m| m.name().strip_prefix('m')).and_then(|n| n.parse::<usize>().ok()).expect("leader is a member");
        // Kill the leader: the other two elect a new one and take writes.
        let _ = members[leader_idx].child.kill();
        let _ = members[leader_idx].child.wait();
        let other = (leader_idx + 1) % 3;
        let rev2 = put_until_ok(&members[other].client, "b", Duration::from_secs(10)).await;
        assert!(rev2 > rev, "revisions continue after the leader change");
        let mut c = connect(&members[(leader_idx + 2) % 3].client).await;
        let got = c.get("b", None).await.expect("get after failover");
        assert_eq!(got.kvs().len(), 1);
    });
    members.clear();
}
