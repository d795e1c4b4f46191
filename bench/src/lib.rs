//! Load generator for etcd v3-compatible stores.
//!
//! The `loadgen` binary drives the etcd v3 gRPC API through the
//! `etcd-client` crate, so one tool measures real etcd and our `raftstore`
//! side by side. This library holds its parts:
//!
//! - [`cli`]: the command line (`loadgen <workload> [flags]`).
//! - [`conn`]: endpoint parsing and the pool of gRPC connections.
//! - [`keys`]: key names, random values and the send timestamp that
//!   watch-fanout embeds in values.
//! - [`stats`]: run limits (ops and time), latency histograms and counters.
//! - [`driver`]: the closed-loop runner shared by the request/response
//!   workloads.
//! - [`workload`]: one module per workload (`put`, `range`, `txn-cas`,
//!   `watch-fanout`).
//! - [`report`]: the result of a run, printed for humans or as one JSON line.
//!
//! Every request loop is bounded twice: by an op count and by a deadline,
//! and every request has its own timeout, so a run always ends by itself.

pub mod cli;
pub mod conn;
pub mod driver;
pub mod error;
pub mod keys;
pub mod report;
pub mod stats;
pub mod workload;

pub use error::{Error, Result};
