//! Integration tests for raftstore, one binary (STYLE.md: one integration test
//! binary per crate).
//!
//! Every suite that checks etcd behaviour runs the same assertions against a
//! real etcd (Debian `etcd` 3.4 on `PATH`) and against the `raftstore` binary,
//! both started as child processes on loopback by [`common::Server`]. A
//! missing `etcd` or `etcdctl` is a test failure, never a skip.
//!
//! `IT_TARGETS=etcd` (or `raftstore`) narrows the servers the two-server
//! suites run against; the default is both. The differential suite always
//! needs two servers; `IT_DIFF_PEER=etcd` makes it compare two real etcds,
//! which proves the script itself is deterministic.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

mod common;

mod auth;
mod cluster;
mod connections;
mod crash;
mod deploy;
mod differential;
mod errors;
mod etcd_snapshots;
mod etcdctl;
mod flags;
mod forward;
mod leader_transfer;
mod lock_election;
mod membership;
mod nested_txn;
mod quota;
mod stream_errors;
mod tls;
mod watch;
