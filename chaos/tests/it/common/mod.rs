//! Shared helpers: the two targets.

use std::path::PathBuf;

use chaos::cluster::{find_raftstore, Target};

/// Both targets; a missing binary fails the test (CI installs etcd and
/// builds raftstore before running tests).
pub fn targets() -> Vec<Target> {
    vec![raftstore(), etcd()]
}

pub fn raftstore() -> Target {
    Target::Raftstore(find_raftstore().expect("raftstore binary (cargo build -p raftstore)"))
}

pub fn etcd() -> Target {
    let p = PathBuf::from("/usr/bin/etcd");
    assert!(p.is_file(), "Debian etcd must be installed (.ci/setup)");
    Target::Etcd(p)
}
