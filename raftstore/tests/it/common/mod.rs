//! Helpers shared by the suites: servers, etcdctl, clients.

pub mod cluster;
pub mod etcdctl;
pub mod pki;
pub mod server;

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

pub use etcdctl::{etcdctl, etcdctl_stdin, Background};
pub use server::{Kind, Options, Server};

/// The servers two-server suites run against: `IT_TARGETS` (comma-separated
/// `etcd`, `raftstore`), both by default.
pub fn kinds() -> Vec<Kind> {
    match std::env::var("IT_TARGETS") {
        Ok(list) if !list.trim().is_empty() => list.split(',').map(Kind::parse).collect(),
        _ => vec![Kind::Etcd, Kind::Raftstore],
    }
}

/// Runs `case` once per server kind, each run isolated, and fails naming
/// every kind it failed against. Real etcd runs first: if it fails there,
/// the test itself is wrong.
#[track_caller]
pub fn for_each_kind(case: impl Fn(Kind)) {
    let mut failures = Vec::new();
    for kind in kinds() {
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| case(kind))) {
            failures.push(format!("against {kind}: {}", panic_message(&*panic)));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The text of a caught panic.
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic".to_owned()
    }
}

/// Runs `f` to completion on a fresh multi-thread Tokio runtime.
pub fn block_on<F: Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("tokio runtime").block_on(f)
}

/// `f`, or a failure saying what hung.
pub async fn within<F: Future>(limit: Duration, what: &str, f: F) -> F::Output {
    match tokio::time::timeout(limit, f).await {
        Ok(out) => out,
        Err(_) => panic!("{what}: no answer within {limit:?} (a hang)"),
    }
}

/// An etcd-client for `endpoint`, with timeouts so a dead server fails fast.
pub async fn connect(endpoint: &str) -> etcd_client::Client {
    let opts = etcd_client::ConnectOptions::new().with_connect_timeout(Duration::from_secs(5)).with_timeout(Duration::from_secs(15));
    within(Duration::from_secs(20), &format!("connect to {endpoint}"), etcd_client::Client::connect([endpoint], Some(opts))).await.unwrap_or_else(|e| panic!("connect to {endpoint}: {e}"))
}

/// gRPC code and message of an etcd-client error, or its text if it is not a
/// gRPC status.
pub fn status_of(err: &etcd_client::Error) -> (tonic::Code, String) {
    match err {
        etcd_client::Error::GRpcStatus(s) => (s.code(), s.message().to_owned()),
        other => (tonic::Code::Unknown, format!("not a gRPC status: {other}")),
    }
}
