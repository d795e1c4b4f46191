//! Integration tests for the chaos harness: real three-member clusters
//! (raftstore and the Debian etcd) as processes on loopback, with peer
//! traffic through the harness's proxy.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

mod common;
mod delay;
mod etcd_short_run;
mod partition;
mod require_leader;
mod snapshot_restart;
mod stale_read;
mod stall;
