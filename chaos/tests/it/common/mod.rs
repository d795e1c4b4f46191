//! Shared helpers: the two targets.

use std::path::PathBuf;

use chaos::cluster::{find_raftstore, Cluster, Options, Target};

/// Both targets; a missing binary fails the test (CI installs etcd and
/// builds raftstore before running tests).
pub fn targets() -> Vec<Target> {
    vec![raftstore(), etcd()]
}

pub fn raftstore() -> Target {
    Target::Raftstore(find_raftstore().expect("raftstore binary (cargo build --bin raftstore)"))
}

pub fn etcd() -> Target {
    let p = PathBuf::from("/usr/bin/etcd");
    assert!(p.is_file(), "Debian etcd must be installed (.ci/setup)");
    Target::Etcd(p)
}

/// A fresh three-member cluster of `target` in `dir`, the index of its
/// leader, and the index of a member that is not the leader (the next one).
pub async fn cluster_and_follower(target: &Target, dir: &std::path::Path) -> (Cluster, usize, usize) {
    let c = Cluster::start(Options::new(target.clone(), dir)).await.expect("cluster starts");
    let leader = c.leader().await.expect("a leader");
    (c, leader, (leader + 1) % 3)
}
