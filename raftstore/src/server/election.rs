//! etcd's `v3electionpb.Election` service (etcd `v3election`): leader
//! election on a key prefix, served on the client port for `etcdctl elect`
//! and the etcd-client crate's election calls.
//!
//! A candidate queues under `<name>/` with the key `<name>/<lease hex>`
//! holding its value (see [`super::concurrency`]); the oldest key is the
//! leader. A [`LeaderKey`] names a leadership by its key and that key's
//! create revision, so Proclaim and Resign act only while that same key
//! still exists.

use std::pin::Pin;

use proto::etcdserverpb::{DeleteRangeRequest, PutRequest, RangeRequest, RequestOpRequest, TxnRequest};
use proto::mvccpb::{event_type, KeyValue};
use proto::v3electionpb::election_server::Election;
use proto::v3electionpb::{CampaignRequest, CampaignResponse, LeaderKey, LeaderRequest, LeaderResponse, ProclaimRequest, ProclaimResponse, ResignRequest, ResignResponse};
use tokio::sync::{broadcast, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use super::concurrency::{create_revision_is, name_prefix, op, owner_key, range_of, Caller, Cleanup, Local};
use super::Ctx;

/// etcd's answer to a Proclaim or Resign without a leader key.
const MISSING_LEADER_KEY: &str = "\"leader\" field must be provided";
/// etcd's answer to a Proclaim by a candidate that no longer leads.
const NOT_LEADER: &str = "election: not leader";
/// etcd's answer to Leader when nobody campaigns.
const NO_LEADER: &str = "election: no leader";

/// The Election service.
pub struct ElectionService {
    ctx: Ctx,
}

impl ElectionService {
    /// An election service over the shared context.
    pub fn new(ctx: Ctx) -> Self {
        ElectionService { ctx }
    }
}

/// Replaces the leader's value if `leader` still names the leading key.
async fn proclaim(local: &Local, leader: &LeaderKey, value: Vec<u8>) -> Result<Option<proto::etcdserverpb::ResponseHeader>, Status> {
    let put = op(RequestOpRequest::RequestPut(PutRequest { key: leader.key.clone(), value, ignore_lease: true, ..Default::default() }));
    let txn = TxnRequest { compare: vec![create_revision_is(&leader.key, leader.rev)], success: vec![put], failure: Vec::new() };
    let resp = local.txn(txn).await?;
    if !resp.succeeded {
        return Err(Status::unknown(NOT_LEADER));
    }
    Ok(resp.header)
}

type ObserveStream = Pin<Box<dyn tokio_stream::Stream<Item = Result<LeaderResponse, Status>> + Send>>;

#[tonic::async_trait]
impl Election for ElectionService {
    async fn campaign(&self, req: Request<CampaignRequest>) -> Result<Response<CampaignResponse>, Status> {
        let local = Local::new(self.ctx.clone(), Caller::of(&req));
        let r = req.into_inner();
        let lease = local.session_lease(r.lease).await?;
        let prefix = name_prefix(&r.name);
        let key = owner_key(&prefix, lease);

        let put = op(RequestOpRequest::RequestPut(PutRequest { key: key.clone(), value: r.value.clone(), lease, ..Default::default() }));
        let get = op(RequestOpRequest::RequestRange(RangeRequest { key: key.clone(), ..Default::default() }));
        let txn = TxnRequest { compare: vec![create_revision_is(&key, 0)], success: vec![put], failure: vec![get] };
        let resp = local.txn(txn).await?;
        let mut rev = resp.header.as_ref().map(|h| h.revision).unwrap_or_default();
        let leader = |rev| LeaderKey { name: r.name.clone(), key: key.clone(), rev, lease };
        let mut update = None;
        if !resp.succeeded {
            // This lease already campaigns: keep its place, update its value.
            let existing = range_of(&resp, 0).and_then(|x| x.kvs.first()).cloned().unwrap_or_default();
            rev = existing.create_revision;
            update = (existing.value != r.value).then(|| r.value.clone());
        }
        // A failed or cancelled campaign leaves the queue (etcd resigns).
        let cleanup = Cleanup::new(&local, key.clone(), rev);
        if let Some(value) = update {
            proclaim(&local, &leader(rev), value).await?;
        }
        local.wait_deletes(&prefix, rev - 1).await?;
        cleanup.disarm();
        Ok(Response::new(CampaignResponse { header: resp.header, leader: Some(leader(rev)) }))
    }

    async fn proclaim(&self, req: Request<ProclaimRequest>) -> Result<Response<ProclaimResponse>, Status> {
        let local = Local::new(self.ctx.clone(), Caller::of(&req));
        let r = req.into_inner();
        let leader = r.leader.ok_or_else(|| Status::unknown(MISSING_LEADER_KEY))?;
        let header = proclaim(&local, &leader, r.value).await?;
        Ok(Response::new(ProclaimResponse { header }))
    }

    async fn leader(&self, req: Request<LeaderRequest>) -> Result<Response<LeaderResponse>, Status> {
        let local = Local::new(self.ctx.clone(), Caller::of(&req));
        let r = req.into_inner();
        let (resp, kv) = local.first(&name_prefix(&r.name)).await?;
        let kv = kv.ok_or_else(|| Status::unknown(NO_LEADER))?;
        Ok(Response::new(LeaderResponse { header: resp.header, kv: Some(kv) }))
    }

    type ObserveStream = ObserveStream;

    async fn observe(&self, req: Request<LeaderRequest>) -> Result<Response<Self::ObserveStream>, Status> {
        let caller = Caller::of(&req);
        let prefix = name_prefix(&req.into_inner().name);
        let (tx, rx) = mpsc::channel(16);
        let ctx = self.ctx.clone();
        tokio::spawn(async move {
            tokio::select! {
                r = observe(ctx, caller, prefix, &tx) => {
                    if let Err(e) = r {
                        let _ = tx.send(Err(e)).await;
                    }
                }
                // The client went away while nothing changed.
                _ = tx.closed() => {}
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn resign(&self, req: Request<ResignRequest>) -> Result<Response<ResignResponse>, Status> {
        let local = Local::new(self.ctx.clone(), Caller::of(&req));
        let r = req.into_inner();
        let leader = r.leader.ok_or_else(|| Status::unknown(MISSING_LEADER_KEY))?;
        let del = op(RequestOpRequest::RequestDeleteRange(DeleteRangeRequest { key: leader.key.clone(), ..Default::default() }));
        let txn = TxnRequest { compare: vec![create_revision_is(&leader.key, leader.rev)], success: vec![del], failure: Vec::new() };
        let resp = local.txn(txn).await?;
        Ok(Response::new(ResignResponse { header: resp.header }))
    }
}

/// Sends the leader's key-value each time the leader or its value changes,
/// until the client goes away (etcd's `Election.Observe`): the current
/// leader, or the first candidate once there is one; then each new value of
/// its key, and when that key is deleted, the next leader.
async fn observe(ctx: Ctx, caller: Caller, prefix: Vec<u8>, tx: &mpsc::Sender<Result<LeaderResponse, Status>>) -> Result<(), Status> {
    let local = Local::new(ctx.clone(), caller);
    loop {
        let (mut rx, _) = ctx.hub.subscribe();
        let (resp, kv) = local.first(&prefix).await?;
        let (mut header, kv) = match kv {
            Some(kv) => (resp.header, kv),
            None => {
                // Nobody leads: the first put under the prefix does.
                let read_at = resp.header.as_ref().map(|h| h.revision).unwrap_or_default();
                match next_event(&mut rx, read_at, |e| e.r#type == event_type::PUT && e.kv.as_ref().is_some_and(|kv| kv.key.starts_with(&prefix))).await {
                    Some(kv) => (ctx.header(kv.mod_revision), kv),
                    // Lagged: read again.
                    None => continue,
                }
            }
        };
        let key = kv.key.clone();
        if tx.send(Ok(LeaderResponse { header: header.take(), kv: Some(kv.clone()) })).await.is_err() {
            return Ok(());
        }
        // Follow the leader's key until it is deleted.
        let mut seen = kv.mod_revision;
        loop {
            let Some(next) = next_any(&mut rx, seen, &key).await else { break };
            match next {
                Change::Put(kv) => {
                    seen = kv.mod_revision;
                    if tx.send(Ok(LeaderResponse { header: ctx.header(kv.mod_revision), kv: Some(kv) })).await.is_err() {
                        return Ok(());
                    }
                }
                Change::Deleted => break,
            }
        }
    }
}

/// A change of the followed key.
enum Change {
    Put(KeyValue),
    Deleted,
}

/// The next event after revision `after` that `pick` accepts, or `None`
/// if the receiver lagged or closed.
async fn next_event(rx: &mut broadcast::Receiver<std::sync::Arc<crate::mvcc::RevisionEvents>>, after: i64, pick: impl Fn(&proto::mvccpb::Event) -> bool) -> Option<KeyValue> {
    loop {
        let rev = rx.recv().await.ok()?;
        if rev.revision <= after {
            continue;
        }
        if let Some(e) = rev.events.iter().find(|e| pick(e)) {
            return e.kv.clone();
        }
    }
}

/// The next put or delete of `key` after revision `after`; a lagged
/// receiver counts as a delete, so the caller reads the leader again.
async fn next_any(rx: &mut broadcast::Receiver<std::sync::Arc<crate::mvcc::RevisionEvents>>, after: i64, key: &[u8]) -> Option<Change> {
    loop {
        let rev = match rx.recv().await {
            Ok(rev) => rev,
            Err(broadcast::error::RecvError::Lagged(_)) => return Some(Change::Deleted),
            Err(broadcast::error::RecvError::Closed) => return None,
        };
        if rev.revision <= after {
            continue;
        }
        for e in &rev.events {
            let Some(kv) = &e.kv else { continue };
            if kv.key != key {
                continue;
            }
            return Some(if e.r#type == event_type::DELETE { Change::Deleted } else { Change::Put(kv.clone()) });
        }
    }
}
