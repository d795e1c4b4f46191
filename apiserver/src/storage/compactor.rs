//! Compaction of remote etcd (kube-apiserver `storage/etcd3/compact.go`
//! semantics, `--etcd-compaction-interval`).
//!
//! Every interval, each API server on an etcd runs one step:
//!
//! 1. A txn on the shared key [`COMPACT_REV_KEY`]: if its version is still
//!    the one this server saw last, put the revision it saw last into it
//!    (which bumps the version); else read it.
//! 2. If the txn won and this server had seen a revision, compact etcd to
//!    that revision: the one the store had one interval ago.
//!
//! So however many API servers share an etcd, one of them compacts per
//! interval, and history younger than one interval is kept. A worked
//! example with servers A and B and an interval of 5 minutes:
//!
//! | time | server | seen (version, revision) | txn | action | seen after |
//! |---|---|---|---|---|---|
//! | 0:05 | A | (0, 0) | version 0 = 0: put 0 | none (no revision yet) | (1, 100) |
//! | 0:06 | B | (0, 0) | version 1 ≠ 0: read | none | (1, 120) |
//! | 0:10 | A | (1, 100) | version 1 = 1: put 100 | compact to 100 | (2, 300) |
//! | 0:11 | B | (1, 120) | version 2 ≠ 1: read | none | (2, 320) |
//! | 0:15 | A | (2, 300) | version 2 = 2: put 300 | compact to 300 | (3, 500) |
//!
//! The key sits outside `--etcd-prefix`, as kube's does, so our API servers
//! and kube-apiservers sharing an etcd take turns.

use std::time::Duration;

use etcd_client::{Client, Compare, CompareOp, Txn, TxnOp, TxnOpResponse};

/// The key API servers coordinate compaction through (kube's
/// `compactRevKey`).
pub const COMPACT_REV_KEY: &str = "compact_rev_key";

/// What this server saw at its last step: the key's version and the store's
/// revision.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Seen {
    /// [`COMPACT_REV_KEY`]'s version.
    pub version: i64,
    /// The store's revision then.
    pub revision: i64,
}

/// One compaction step (see the module docs): what this server sees now.
///
/// # Errors
/// etcd errors of the txn; the caller keeps its last [`Seen`] and tries
/// again at the next interval. A failed compaction is logged, not returned.
pub async fn step(client: &mut Client, last: Seen) -> Result<Seen, etcd_client::Error> {
    let txn = Txn::new()
        .when([Compare::version(COMPACT_REV_KEY, CompareOp::Equal, last.version)])
        .and_then([TxnOp::put(COMPACT_REV_KEY, last.revision.to_string(), None)])
        .or_else([TxnOp::get(COMPACT_REV_KEY, None)]);
    let resp = client.txn(txn).await?;
    let revision = resp.header().map_or(0, |h| h.revision());
    if !resp.succeeded() {
        // Another server stepped since: adopt its version, compact later.
        let version = resp
            .op_responses()
            .into_iter()
            .find_map(|r| match r {
                TxnOpResponse::Get(g) => g.kvs().first().map(|kv| kv.version()),
                _ => None,
            })
            .unwrap_or(0);
        return Ok(Seen { version, revision });
    }
    let now = Seen { version: last.version + 1, revision };
    if last.revision == 0 {
        // Nothing seen one interval ago: no compaction at start.
        return Ok(now);
    }
    // This step is taken either way, as in kube: a failed compaction waits
    // for a later turn.
    match client.compact(last.revision, None).await {
        Ok(_) => tracing::debug!("etcd: compacted to revision {}", last.revision),
        // Compacted further already (by etcd's own auto-compaction, say).
        Err(etcd_client::Error::GRpcStatus(s)) if s.message().contains("required revision has been compacted") => {}
        Err(e) => tracing::warn!("etcd: compaction to revision {} failed: {e}", last.revision),
    }
    Ok(now)
}

/// Runs [`step`] every `interval` until the returned handle is aborted
/// (kube's `compactor` loop); failures are logged and retried next time.
pub fn start(client: Client, interval: Duration, endpoints: String) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut client = client;
        let mut seen = Seen::default();
        loop {
            tokio::time::sleep(interval).await;
            match step(&mut client, seen).await {
                Ok(s) => seen = s,
                Err(e) => tracing::warn!("etcd {endpoints}: compaction failed: {e}"),
            }
        }
    })
}
