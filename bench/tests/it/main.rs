//! Integration tests: the `loadgen` binary against a real etcd.
//!
//! They need Debian's `etcd` (package `etcd-server`) on `PATH`, or `ETCD_BIN`
//! pointing at an etcd binary, and fail with a clear message otherwise.

mod common;
mod loadgen;
