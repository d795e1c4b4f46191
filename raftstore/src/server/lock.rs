//! etcd's `v3lockpb.Lock` service (etcd `v3lock`): a distributed mutex
//! that etcd serves on its client port, for `etcdctl lock` and the
//! etcd-client crate's lock calls.
//!
//! Lock queues the caller under `<name>/` with the key `<name>/<lease hex>`
//! (see [`super::concurrency`]) and answers once every older waiter's key is
//! gone; the lock is then held until Unlock deletes the key or the lease
//! ends. A request without a lease gets a fresh one of 60 s, as etcd's does.

use proto::etcdserverpb::{PutRequest, RangeRequest, RequestOpRequest, TxnRequest};
use proto::v3lockpb::lock_server::Lock;
use proto::v3lockpb::{LockRequest, LockResponse, UnlockRequest, UnlockResponse};
use tonic::{Request, Response, Status};

use super::concurrency::{create_revision_is, first_create, name_prefix, op, owner_key, range_of, Caller, Cleanup, Local};
use super::Ctx;

/// The Lock service.
pub struct LockService {
    ctx: Ctx,
}

impl LockService {
    /// A lock service over the shared context.
    pub fn new(ctx: Ctx) -> Self {
        LockService { ctx }
    }
}

#[tonic::async_trait]
impl Lock for LockService {
    async fn lock(&self, req: Request<LockRequest>) -> Result<Response<LockResponse>, Status> {
        let local = Local::new(self.ctx.clone(), Caller::of(&req));
        let r = req.into_inner();
        let lease = local.session_lease(r.lease).await?;
        let prefix = name_prefix(&r.name);
        let key = owner_key(&prefix, lease);

        // Create the key if this lease has none yet, and read the oldest
        // waiter in the same txn.
        let put = op(RequestOpRequest::RequestPut(PutRequest { key: key.clone(), lease, ..Default::default() }));
        let get = op(RequestOpRequest::RequestRange(RangeRequest { key: key.clone(), ..Default::default() }));
        let owner = op(RequestOpRequest::RequestRange(first_create(&prefix)));
        let txn = TxnRequest { compare: vec![create_revision_is(&key, 0)], success: vec![put, owner.clone()], failure: vec![get, owner] };
        let resp = local.txn(txn).await?;
        let header_rev = resp.header.as_ref().map(|h| h.revision).unwrap_or_default();
        let my_rev = if resp.succeeded { header_rev } else { range_of(&resp, 0).and_then(|r| r.kvs.first()).map(|kv| kv.create_revision).unwrap_or(header_rev) };
        let first = range_of(&resp, 1).and_then(|r| r.kvs.first()).map(|kv| kv.create_revision);
        if first.is_none() || first == Some(my_rev) {
            return Ok(Response::new(LockResponse { header: resp.header, key }));
        }

        // Wait for every older waiter; a cancelled call leaves the queue.
        let cleanup = Cleanup::new(&local, key.clone(), my_rev);
        local.wait_deletes(&prefix, my_rev - 1).await?;
        let held = local.range(RangeRequest { key: key.clone(), ..Default::default() }).await?;
        if held.kvs.is_empty() {
            // The lease ended while waiting.
            cleanup.disarm();
            return Err(Status::unknown("mutex: session is expired"));
        }
        cleanup.disarm();
        Ok(Response::new(LockResponse { header: held.header, key }))
    }

    async fn unlock(&self, req: Request<UnlockRequest>) -> Result<Response<UnlockResponse>, Status> {
        let local = Local::new(self.ctx.clone(), Caller::of(&req));
        let resp = local.delete(req.into_inner().key).await?;
        Ok(Response::new(UnlockResponse { header: resp.header }))
    }
}
