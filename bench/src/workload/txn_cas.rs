//! `txn-cas`: kube-apiserver's optimistic update (GuaranteedUpdate).
//!
//! One op is one successful compare-and-swap:
//!
//! 1. `Get k` to learn `mod_revision` (0 when the key is absent).
//! 2. `Txn If(mod_revision(k) == rev) Then(Put k v) Else(Get k)`.
//! 3. If the compare failed, take `rev` from the Else branch's Get and go
//!    back to 2, at most `--max-retries` times; each retry is a conflict.
//!
//! The op's latency covers the Get and every Txn attempt. With a small
//! `--key-space` and many clients, conflicts are frequent.

use std::sync::Arc;
use std::time::Instant;

use etcd_client::proto::PbTxnOpResponse;
use etcd_client::{Compare, CompareOp, KvClient, Txn, TxnOp, TxnResponse};
use rand::{rngs::SmallRng, SeedableRng};

use crate::cli::{secs, CommonArgs, TxnCasArgs};
use crate::conn::connect_pool;
use crate::driver::{run_closed_loop, Outcome};
use crate::error::{Error, Result};
use crate::keys::{random_value, KeySpace};
use crate::report::Report;
use crate::stats::Tickets;

/// Runs the `txn-cas` workload on keys of `<prefix>cas/`.
///
/// # Errors
/// Unreachable endpoints; request failures are counted, not returned.
pub async fn run(args: &CommonArgs, cas: &TxnCasArgs, endpoints: &[String]) -> Result<Report> {
    let conns = args.conns_for(args.clients);
    let pool = connect_pool(endpoints, conns, secs(args.connect_timeout)).await?;
    let keys = KeySpace::new(format!("{}cas/", args.prefix), args.key_size, args.key_space);
    let tickets = Arc::new(Tickets::new(args.op_limit(), Instant::now() + args.time_limit()));
    let (val_size, max_retries) = (args.val_size, cas.max_retries);
    let run = run_closed_loop(args.clients, tickets, args.request_timeout(), |i| {
        let kv = pool[i % pool.len()].kv_client();
        let keys = keys.clone();
        let mut rng = SmallRng::from_rng(&mut rand::rng());
        let value = random_value(val_size, &mut rng);
        move || {
            let key = keys.random(&mut rng);
            let value = value.clone();
            let kv = kv.clone();
            compare_and_swap(kv, key, value, max_retries)
        }
    })
    .await;
    let mut report = Report::new("txn-cas", endpoints, args.clients, conns, &run.stats, run.elapsed);
    report.conflicts = Some(run.stats.conflicts);
    Ok(report)
}

/// One optimistic update of `key` to `value`.
///
/// # Errors
/// A failed request, a malformed Txn response, or
/// [`Error::TooManyConflicts`] after `max_retries` retries.
pub async fn compare_and_swap(mut kv: KvClient, key: Vec<u8>, value: Vec<u8>, max_retries: u32) -> Result<Outcome> {
    let resp = kv.get(key.clone(), None).await?;
    let mut rev = resp.kvs().first().map_or(0, |kv| kv.mod_revision());
    for attempt in 0..=max_retries {
        let txn = Txn::new().when([Compare::mod_revision(key.clone(), CompareOp::Equal, rev)]).and_then([TxnOp::put(key.clone(), value.clone(), None)]).or_else([TxnOp::get(key.clone(), None)]);
        let resp = kv.txn(txn).await?;
        if resp.succeeded() {
            return Ok(Outcome { conflicts: u64::from(attempt), miss: false });
        }
        rev = else_mod_revision(&resp)?;
    }
    Err(Error::TooManyConflicts(max_retries.saturating_add(1)))
}

/// The current `mod_revision` from a failed CAS's Else(Get) branch (0 when
/// the key is absent).
///
/// Reads the raw response rather than `TxnResponse::op_responses`, which
/// panics on a response op without a body.
fn else_mod_revision(resp: &TxnResponse) -> Result<i64> {
    match resp.0.responses.first().and_then(|op| op.response.as_ref()) {
        Some(PbTxnOpResponse::ResponseRange(range)) => Ok(range.kvs.first().map_or(0, |kv| kv.mod_revision)),
        Some(other) => Err(Error::Malformed(format!("failed CAS Txn: expected the Else branch's range response, got {other:?}"))),
        None => Err(Error::Malformed("failed CAS Txn has no response for its Else branch".into())),
    }
}
