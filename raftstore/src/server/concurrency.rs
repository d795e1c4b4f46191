//! What the Lock and Election services share: etcd's recipe for queueing
//! on a key prefix (etcd `client/v3/concurrency`), run inside the member
//! against its own KV and Lease services instead of through a client.
//!
//! A waiter owns the key `<prefix><lease in hex>`, created under its lease;
//! waiters are served in the order of their keys' create revisions, and a
//! waiter is first once every key of the prefix created before its own is
//! gone.

use std::sync::Arc;

use proto::etcdserverpb::server::{Kv, Lease};
use proto::etcdserverpb::{
    compare_result, compare_target, sort_order, sort_target, Compare, DeleteRangeRequest, DeleteRangeResponse, LeaseGrantRequest, RangeRequest, RangeResponse, RequestOp, RequestOpRequest,
    TargetUnion, TxnRequest, TxnResponse,
};
use proto::mvccpb::{event_type, KeyValue};
use tokio::sync::broadcast;
use tonic::{Request, Status};

use super::kv::KvService;
use super::lease::LeaseService;
use super::Ctx;
use crate::mvcc::{prefix_end, RevisionEvents};

/// TTL of the lease granted for a request that names none, in seconds
/// (etcd's default session TTL).
pub const DEFAULT_SESSION_TTL: i64 = 60;

/// The member's own KV and Lease services, called as a client would.
///
/// Their errors come back with code Unknown and the same message: etcd's
/// Lock and Election services call KV through a client, and hand the
/// client's error on as a plain error, which gRPC sends as Unknown.
///
/// Each call carries the metadata and extensions of the client's own
/// request (its auth token, its certificate's name), so the KV and Lease
/// services check the client's permissions, as etcd's services do by
/// passing the caller's token on.
pub struct Local {
    ctx: Ctx,
    kv: KvService,
    lease: LeaseService,
    caller: Caller,
}

/// What identifies the client of a call: its request's metadata and
/// extensions.
#[derive(Clone)]
pub struct Caller(tonic::metadata::MetadataMap, tonic::Extensions);

impl Caller {
    /// The identity `req` carries.
    pub fn of<T>(req: &Request<T>) -> Self {
        Caller(req.metadata().clone(), req.extensions().clone())
    }

    fn request<T>(&self, message: T) -> Request<T> {
        Request::from_parts(self.0.clone(), self.1.clone(), message)
    }
}

impl Local {
    /// Services over the shared context, called as `caller`.
    pub fn new(ctx: Ctx, caller: Caller) -> Self {
        Local { kv: KvService::new(ctx.clone()), lease: LeaseService::new(ctx.clone()), ctx, caller }
    }

    /// A linearizable range.
    pub async fn range(&self, r: RangeRequest) -> Result<RangeResponse, Status> {
        Ok(self.kv.range(self.caller.request(r)).await.map_err(as_client_error)?.into_inner())
    }

    /// A txn, validated as the KV service validates one.
    pub async fn txn(&self, r: TxnRequest) -> Result<TxnResponse, Status> {
        Ok(self.kv.txn(self.caller.request(r)).await.map_err(as_client_error)?.into_inner())
    }

    /// Deletes one key.
    pub async fn delete(&self, key: Vec<u8>) -> Result<DeleteRangeResponse, Status> {
        Ok(self.kv.delete_range(self.caller.request(DeleteRangeRequest { key, ..Default::default() })).await.map_err(as_client_error)?.into_inner())
    }

    /// The lease a request names, or a fresh one of
    /// [`DEFAULT_SESSION_TTL`] when it names none (etcd's `NewSession`
    /// grants one then and does not keep it alive after the call).
    pub async fn session_lease(&self, lease: i64) -> Result<i64, Status> {
        if lease != 0 {
            return Ok(lease);
        }
        let r = LeaseGrantRequest { ttl: DEFAULT_SESSION_TTL, id: 0 };
        Ok(self.lease.lease_grant(self.caller.request(r)).await.map_err(as_client_error)?.into_inner().id)
    }

    /// The key of the oldest waiter under `prefix`, if any (etcd's
    /// `WithFirstCreate`).
    pub async fn first(&self, prefix: &[u8]) -> Result<(RangeResponse, Option<KeyValue>), Status> {
        let mut resp = self.range(first_create(prefix)).await?;
        let kv = resp.kvs.first().cloned();
        resp.kvs.clear();
        Ok((resp, kv))
    }

    /// Waits until no key under `prefix` with a create revision at or below
    /// `max_create_revision` is left (etcd's `waitDeletes`).
    pub async fn wait_deletes(&self, prefix: &[u8], max_create_revision: i64) -> Result<(), Status> {
        loop {
            // Subscribed before the read, so no delete after it is missed.
            let (rx, _) = self.ctx.hub.subscribe();
            let mut r = first_create(prefix);
            r.sort_order = sort_order::DESCEND;
            r.max_create_revision = max_create_revision;
            let resp = self.range(r).await?;
            let Some(last) = resp.kvs.first() else { return Ok(()) };
            wait_delete(rx, &last.key).await?;
        }
    }
}

/// An error of a call through [`Local`] as etcd's services pass it on.
fn as_client_error(s: Status) -> Status {
    Status::unknown(s.message().to_owned())
}

/// A range over `prefix`, oldest create revision first, one key.
pub fn first_create(prefix: &[u8]) -> RangeRequest {
    RangeRequest { key: prefix.to_vec(), range_end: prefix_end(prefix), limit: 1, sort_order: sort_order::ASCEND, sort_target: sort_target::CREATE, ..Default::default() }
}

/// Waits for a DELETE of `key` among the revisions `rx` yields. When the
/// receiver lagged, returns so the caller reads the state again.
async fn wait_delete(mut rx: broadcast::Receiver<Arc<RevisionEvents>>, key: &[u8]) -> Result<(), Status> {
    loop {
        match rx.recv().await {
            Ok(rev) => {
                if rev.events.iter().any(|e| e.r#type == event_type::DELETE && e.kv.as_ref().is_some_and(|kv| kv.key == key)) {
                    return Ok(());
                }
            }
            Err(broadcast::error::RecvError::Lagged(_)) => return Ok(()),
            Err(broadcast::error::RecvError::Closed) => return Err(Status::unavailable("etcdserver: server stopped")),
        }
    }
}

/// The key a waiter owns: `<prefix><lease in lower-case hex>`.
pub fn owner_key(prefix: &[u8], lease: i64) -> Vec<u8> {
    let mut k = prefix.to_vec();
    k.extend_from_slice(format!("{lease:x}").as_bytes());
    k
}

/// `prefix` for a lock or election name: the name and a slash.
pub fn name_prefix(name: &[u8]) -> Vec<u8> {
    let mut p = name.to_vec();
    p.push(b'/');
    p
}

/// A compare on a key's create revision.
pub fn create_revision_is(key: &[u8], revision: i64) -> Compare {
    Compare { result: compare_result::EQUAL, target: compare_target::CREATE, key: key.to_vec(), range_end: Vec::new(), target_union: Some(TargetUnion::CreateRevision(revision)) }
}

/// A txn op.
pub fn op(r: RequestOpRequest) -> RequestOp {
    RequestOp { request: Some(r) }
}

/// The range response of a txn's `i`-th op.
pub fn range_of(resp: &TxnResponse, i: usize) -> Option<&RangeResponse> {
    match resp.responses.get(i).and_then(|r| r.response.as_ref()) {
        Some(proto::etcdserverpb::ResponseOpResponse::ResponseRange(r)) => Some(r),
        _ => None,
    }
}

/// Deletes a waiter's key when a call is given up before it finished
/// (the client cancelled it), as etcd's mutex and election clean up after
/// a cancelled wait. [`Cleanup::disarm`] keeps the key.
pub struct Cleanup {
    key: Option<(Ctx, Caller, Vec<u8>, i64)>,
}

impl Cleanup {
    /// Deletes `key` on drop, as the caller of `local`, if its create
    /// revision is still `revision`.
    pub fn new(local: &Local, key: Vec<u8>, revision: i64) -> Self {
        Cleanup { key: Some((local.ctx.clone(), local.caller.clone(), key, revision)) }
    }

    /// The call finished: keep the key.
    pub fn disarm(mut self) {
        self.key = None;
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let Some((ctx, caller, key, revision)) = self.key.take() else { return };
        tokio::spawn(async move {
            let del = op(RequestOpRequest::RequestDeleteRange(DeleteRangeRequest { key: key.clone(), ..Default::default() }));
            let txn = TxnRequest { compare: vec![create_revision_is(&key, revision)], success: vec![del], failure: Vec::new() };
            if let Err(e) = Local::new(ctx, caller).txn(txn).await {
                tracing::debug!("removing the key of a cancelled waiter: {e}");
            }
        });
    }
}
