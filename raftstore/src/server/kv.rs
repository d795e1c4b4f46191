//! etcd `KV` service: Range, Put, DeleteRange, Txn, Compact.
//!
//! Requests are validated here exactly as etcd's `v3rpc/key.go` does before
//! they reach Raft (empty key, txn size, duplicate keys, ignore_* misuse), so
//! the errors carry etcd's codes and messages.

use std::collections::HashSet;

use proto::etcdserverpb::server::Kv;
use proto::etcdserverpb::{
    CompactionRequest, CompactionResponse, DeleteRangeRequest, DeleteRangeResponse, PutRequest, PutResponse, RangeRequest, RangeResponse, RangeStreamResponse, RequestOp, RequestOpRequest, TxnRequest,
    TxnResponse,
};
use tonic::{Request, Response, Status};

use super::auth::{caller, lease_keys, with_caller};
use super::Ctx;
use crate::auth::perms::Access;
use crate::command::{Command, CommandResponse};
use crate::error::{Error, Result};
use crate::mvcc::{is_point_read, txn_is_read_only, txn_reads_are_point};

/// etcd's default `--max-txn-ops` (the configured value is
/// [`super::Context::max_txn_ops`]).
pub const MAX_TXN_OPS: usize = 128;

/// The KV service.
pub struct KvService {
    ctx: Ctx,
}

impl KvService {
    /// A KV service over the shared context.
    pub fn new(ctx: Ctx) -> Self {
        KvService { ctx }
    }

    async fn propose(&self, cmd: Command) -> Result<CommandResponse> {
        if cmd.encode().len() > self.ctx.max_request_bytes {
            return Err(Error::RequestTooLarge);
        }
        super::quota::check(&self.ctx, &cmd).await?;
        self.ctx.node.propose(cmd).await
    }
}

fn check_range(r: &RangeRequest) -> Result<()> {
    if r.key.is_empty() {
        return Err(Error::EmptyKey);
    }
    Ok(())
}

fn check_put(r: &PutRequest) -> Result<()> {
    if r.key.is_empty() {
        return Err(Error::EmptyKey);
    }
    if r.ignore_value && !r.value.is_empty() {
        return Err(Error::ValueProvided);
    }
    if r.ignore_lease && r.lease != 0 {
        return Err(Error::LeaseProvided);
    }
    Ok(())
}

fn check_delete(r: &DeleteRangeRequest) -> Result<()> {
    if r.key.is_empty() {
        return Err(Error::EmptyKey);
    }
    Ok(())
}

/// etcd `checkTxnRequest`: op counts (compares included) and each op. A
/// nested txn gets what its parent left of the budget (`max_ops` less the
/// parent's own count), so the ops along any path of nested txns add up to
/// at most `max_ops`, and nesting is at most `max_ops + 1` deep.
fn check_txn(r: &TxnRequest, max_ops: usize) -> Result<()> {
    let opc = r.compare.len().max(r.success.len()).max(r.failure.len());
    if opc > max_ops {
        return Err(Error::TooManyOps);
    }
    let max_ops = max_ops - opc;
    for c in &r.compare {
        if c.key.is_empty() {
            return Err(Error::EmptyKey);
        }
    }
    for op in r.success.iter().chain(r.failure.iter()) {
        match &op.request {
            Some(RequestOpRequest::RequestRange(x)) => check_range(x)?,
            Some(RequestOpRequest::RequestPut(x)) => check_put(x)?,
            Some(RequestOpRequest::RequestDeleteRange(x)) => check_delete(x)?,
            Some(RequestOpRequest::RequestTxn(x)) => check_txn(x, max_ops)?,
            None => {}
        }
    }
    Ok(())
}

/// A delete's key interval as etcd's interval tree sees it: a single key, or
/// `[key, end)` compared bytewise.
struct Del {
    key: Vec<u8>,
    end: Vec<u8>,
}

impl Del {
    fn contains(&self, k: &[u8]) -> bool {
        if self.end.is_empty() {
            k == self.key.as_slice()
        } else {
            k >= self.key.as_slice() && k < self.end.as_slice()
        }
    }
}

/// etcd `checkIntervals`: within one branch, a key may be put once and may
/// not be put inside a deleted range; a nested txn's success and failure
/// branches may put the same key (only one runs).
fn check_intervals(reqs: &[RequestOp]) -> Result<(HashSet<Vec<u8>>, Vec<Del>)> {
    let mut dels: Vec<Del> = Vec::new();
    for op in reqs {
        if let Some(RequestOpRequest::RequestDeleteRange(d)) = &op.request {
            dels.push(Del { key: d.key.clone(), end: d.range_end.clone() });
        }
    }
    let mut puts: HashSet<Vec<u8>> = HashSet::new();
    for op in reqs {
        let Some(RequestOpRequest::RequestTxn(t)) = &op.request else { continue };
        let (puts_then, dels_then) = check_intervals(&t.success)?;
        let (puts_else, dels_else) = check_intervals(&t.failure)?;
        for k in &puts_then {
            if puts.contains(k) || dels.iter().any(|d| d.contains(k)) {
                return Err(Error::DuplicateKey);
            }
            puts.insert(k.clone());
        }
        for k in &puts_else {
            if puts.contains(k) && !puts_then.contains(k) {
                return Err(Error::DuplicateKey);
            }
            if dels.iter().any(|d| d.contains(k)) {
                return Err(Error::DuplicateKey);
            }
            puts.insert(k.clone());
        }
        dels.extend(dels_then);
        dels.extend(dels_else);
    }
    for op in reqs {
        let Some(RequestOpRequest::RequestPut(p)) = &op.request else { continue };
        if puts.contains(&p.key) || dels.iter().any(|d| d.contains(&p.key)) {
            return Err(Error::DuplicateKey);
        }
        puts.insert(p.key.clone());
    }
    Ok((puts, dels))
}

/// Full etcd validation of a txn before it is proposed, with etcd's
/// default op budget ([`MAX_TXN_OPS`]).
///
/// # Errors
/// etcd's `too many operations`, `key is not provided`, `duplicate key`, ...
pub fn validate_txn(r: &TxnRequest) -> Result<()> {
    validate_txn_within(r, MAX_TXN_OPS)
}

/// [`validate_txn`] with a budget of `max_ops` ops (`--max-txn-ops`).
///
/// # Errors
/// As [`validate_txn`].
pub fn validate_txn_within(r: &TxnRequest, max_ops: usize) -> Result<()> {
    check_txn(r, max_ops)?;
    check_intervals(&r.success)?;
    check_intervals(&r.failure)?;
    Ok(())
}

fn fill_txn(ctx: &Ctx, resp: &mut TxnResponse) {
    ctx.fill(&mut resp.header);
}

type Res<T> = std::result::Result<Response<T>, Status>;

#[tonic::async_trait]
impl Kv for KvService {
    async fn range(&self, req: Request<RangeRequest>) -> Res<RangeResponse> {
        let who = caller(&self.ctx, &req).await?;
        let r = req.into_inner();
        check_range(&r)?;
        // A learner serves serializable reads only (etcd); other calls are
        // refused by the client HTTP layer.
        if !r.serializable && self.ctx.node.is_learner() {
            return Err(Error::NotSupportedForLearner.into());
        }
        if !r.serializable {
            self.ctx.node.linearizable_read().await?;
        }
        self.ctx.auth.check_key(who.as_ref(), Access::Read, &r.key, &r.range_end)?;
        // A single-key get reads at most one value, about what a hop to the
        // blocking pool costs; any other range may read many from RocksDB.
        let mut resp = if is_point_read(&r) {
            self.ctx.store.range(&r)?
        } else {
            let store = self.ctx.store.clone();
            super::blocking(move || store.range(&r)).await?
        };
        self.ctx.fill(&mut resp.header);
        Ok(Response::new(resp))
    }

    type RangeStreamStream = tokio_stream::Empty<std::result::Result<RangeStreamResponse, Status>>;

    async fn range_stream(&self, _req: Request<RangeRequest>) -> Res<Self::RangeStreamStream> {
        // kube-apiserver falls back to Range on Unimplemented.
        Err(Status::unimplemented("RangeStream is not implemented by raftstore"))
    }

    async fn put(&self, req: Request<PutRequest>) -> Res<PutResponse> {
        let who = caller(&self.ctx, &req).await?;
        let r = req.into_inner();
        check_put(&r)?;
        match self.propose(with_caller(&self.ctx, who.as_ref(), Command::Put(r))).await? {
            CommandResponse::Put(mut resp) => {
                self.ctx.fill(&mut resp.header);
                Ok(Response::new(resp))
            }
            other => Err(Status::internal(format!("unexpected reply {other:?}"))),
        }
    }

    async fn delete_range(&self, req: Request<DeleteRangeRequest>) -> Res<DeleteRangeResponse> {
        let who = caller(&self.ctx, &req).await?;
        let r = req.into_inner();
        check_delete(&r)?;
        match self.propose(with_caller(&self.ctx, who.as_ref(), Command::DeleteRange(r))).await? {
            CommandResponse::DeleteRange(mut resp) => {
                self.ctx.fill(&mut resp.header);
                Ok(Response::new(resp))
            }
            other => Err(Status::internal(format!("unexpected reply {other:?}"))),
        }
    }

    async fn txn(&self, req: Request<TxnRequest>) -> Res<TxnResponse> {
        let who = caller(&self.ctx, &req).await?;
        let r = req.into_inner();
        validate_txn_within(&r, self.ctx.max_txn_ops)?;
        if txn_is_read_only(&r) {
            self.ctx.node.linearizable_read().await?;
            self.ctx.auth.check_txn(who.as_ref(), &r, &lease_keys(&self.ctx))?;
            let mut resp = if txn_reads_are_point(&r) {
                self.ctx.store.read_txn(&r)?
            } else {
                let store = self.ctx.store.clone();
                super::blocking(move || store.read_txn(&r)).await?
            };
            fill_txn(&self.ctx, &mut resp);
            return Ok(Response::new(resp));
        }
        match self.propose(with_caller(&self.ctx, who.as_ref(), Command::Txn(r))).await? {
            CommandResponse::Txn(mut resp) => {
                fill_txn(&self.ctx, &mut resp);
                Ok(Response::new(resp))
            }
            other => Err(Status::internal(format!("unexpected reply {other:?}"))),
        }
    }

    async fn compact(&self, req: Request<CompactionRequest>) -> Res<CompactionResponse> {
        // etcd checks no permission for a compaction, but refuses an
        // invalid token.
        let who = caller(&self.ctx, &req).await?;
        let r = req.into_inner();
        let (revision, physical) = (r.revision, r.physical);
        match self.propose(with_caller(&self.ctx, who.as_ref(), Command::Compact(r))).await? {
            CommandResponse::Compact(mut resp) => {
                // etcd's `physical`: answer once the compacted history is
                // gone from this member's disk, not only from its index.
                if physical {
                    self.ctx.store.wait_physically_compacted(revision).await;
                }
                self.ctx.fill(&mut resp.header);
                Ok(Response::new(resp))
            }
            other => Err(Status::internal(format!("unexpected reply {other:?}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::etcdserverpb::PutRequest;

    fn put(k: &str) -> RequestOp {
        RequestOp { request: Some(RequestOpRequest::RequestPut(PutRequest { key: k.into(), ..Default::default() })) }
    }
    fn del(k: &str, end: &str) -> RequestOp {
        RequestOp { request: Some(RequestOpRequest::RequestDeleteRange(DeleteRangeRequest { key: k.into(), range_end: end.into(), prev_kv: false })) }
    }
    fn txn(success: Vec<RequestOp>, failure: Vec<RequestOp>) -> RequestOp {
        RequestOp { request: Some(RequestOpRequest::RequestTxn(TxnRequest { compare: vec![], success, failure })) }
    }

    #[test]
    fn duplicate_key_rules_follow_etcd() {
        let cases: Vec<(&str, Vec<RequestOp>, bool)> = vec![
            ("two puts", vec![put("a"), put("a")], false),
            ("distinct puts", vec![put("a"), put("b")], true),
            ("put in deleted range", vec![del("a", "c"), put("b")], false),
            ("put beside deleted range", vec![del("a", "c"), put("c")], true),
            ("overlapping deletes", vec![del("a", "c"), del("b", "d")], true),
            ("then/else may share", vec![txn(vec![put("a")], vec![put("a")])], true),
            ("nested put and outer put", vec![txn(vec![put("a")], vec![]), put("a")], false),
            ("nested put in outer delete", vec![del("a", ""), txn(vec![put("a")], vec![])], false),
        ];
        for (name, ops, ok) in cases {
            let r = TxnRequest { compare: vec![], success: ops, failure: vec![] };
            assert_eq!(validate_txn(&r).is_ok(), ok, "{name}");
        }
        let many = TxnRequest { compare: vec![], success: (0..129).map(|i| put(&format!("k{i}"))).collect(), failure: vec![] };
        assert_eq!(validate_txn(&many), Err(Error::TooManyOps));
        // A nested txn spends what its parent left: 100 + 28 fits, 100 + 29
        // does not.
        let nested = |inner: usize| {
            let mut ops: Vec<RequestOp> = (0..99).map(|i| put(&format!("o{i}"))).collect();
            ops.push(txn((0..inner).map(|i| put(&format!("i{i}"))).collect(), vec![]));
            TxnRequest { compare: vec![], success: ops, failure: vec![] }
        };
        assert_eq!(validate_txn(&nested(28)), Ok(()));
        assert_eq!(validate_txn(&nested(29)), Err(Error::TooManyOps));
    }
}
