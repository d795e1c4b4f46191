//! etcd `Lease` service: grant, revoke, keep-alive, time-to-live, list.

use std::time::Duration;

use proto::etcdserverpb::server::Lease;
use proto::etcdserverpb::{
    LeaseGrantRequest, LeaseGrantResponse, LeaseKeepAliveRequest, LeaseKeepAliveResponse, LeaseLeasesRequest, LeaseLeasesResponse, LeaseRevokeRequest, LeaseRevokeResponse, LeaseStatus,
    LeaseTimeToLiveRequest, LeaseTimeToLiveResponse,
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;
use tonic::{Request, Response, Status, Streaming};

use super::Ctx;
use crate::command::{Command, CommandResponse};
use crate::error::Error;

/// The Lease service.
pub struct LeaseService {
    ctx: Ctx,
}

impl LeaseService {
    /// A lease service over the shared context.
    pub fn new(ctx: Ctx) -> Self {
        LeaseService { ctx }
    }
}

/// A fresh positive lease ID (etcd IDs are positive int64).
fn new_lease_id() -> i64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0));
    (h.finish() >> 1) as i64 | 1
}

/// Revokes expired leases while this member is leader (etcd's lessor
/// `revokeExpiredLeases`, every 500 ms).
///
/// A leader back from a pause still believes the expiry times it had before
/// it, while clients kept their leases alive through the new leader. So
/// expired leases are revoked only after a confirmation round that started
/// now ([`crate::raft::RaftNode::leader_barrier`]), and the revoke is
/// proposed on this member only, never forwarded: a deposed leader's revoke
/// cannot commit (etcd-io/etcd#15247 is the same hazard in etcd).
pub async fn expiry_loop(ctx: Ctx) {
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    loop {
        tick.tick().await;
        if !ctx.node.is_leader() {
            continue;
        }
        if ctx.lessor.expired(&ctx.store.leases(), ctx.node.term()).is_empty() {
            continue;
        }
        if let Err(e) = ctx.node.leader_barrier().await {
            tracing::debug!("not revoking expired leases: leadership not confirmed: {e}");
            continue;
        }
        let expired = ctx.lessor.expired(&ctx.store.leases(), ctx.node.term());
        for id in expired {
            match ctx.node.propose_as_leader(Command::LeaseRevoke(LeaseRevokeRequest { id })).await {
                Ok(_) | Err(Error::LeaseNotFound) => ctx.lessor.forget(id),
                Err(e) => tracing::warn!(lease = id, "revoking expired lease failed: {e}"),
            }
        }
    }
}

type Res<T> = std::result::Result<Response<T>, Status>;

#[tonic::async_trait]
impl Lease for LeaseService {
    async fn lease_grant(&self, req: Request<LeaseGrantRequest>) -> Res<LeaseGrantResponse> {
        // etcd 3.4 grants leases to anyone, but refuses an invalid token.
        super::auth::caller(&self.ctx, &req).await?;
        let mut r = req.into_inner();
        let pick = r.id == 0;
        super::quota::check(&self.ctx, &Command::LeaseGrant(r)).await?;
        loop {
            if pick {
                r.id = new_lease_id();
            }
            match self.ctx.node.propose(Command::LeaseGrant(r)).await {
                Ok(CommandResponse::LeaseGrant(mut resp)) => {
                    self.ctx.lessor.renew(resp.id, resp.ttl);
                    self.ctx.fill(&mut resp.header);
                    return Ok(Response::new(resp));
                }
                Err(Error::LeaseExist) if pick => continue,
                Err(e) => return Err(e.into()),
                Ok(other) => return Err(Status::internal(format!("unexpected reply {other:?}"))),
            }
        }
    }

    async fn lease_revoke(&self, req: Request<LeaseRevokeRequest>) -> Res<LeaseRevokeResponse> {
        // Whoever revokes a lease must be able to write all its keys
        // (checked when applied).
        let who = super::auth::caller(&self.ctx, &req).await?;
        let r = req.into_inner();
        match self.ctx.node.propose(super::auth::with_caller(&self.ctx, who.as_ref(), Command::LeaseRevoke(r))).await? {
            CommandResponse::LeaseRevoke(mut resp) => {
                self.ctx.lessor.forget(r.id);
                self.ctx.fill(&mut resp.header);
                Ok(Response::new(resp))
            }
            other => Err(Status::internal(format!("unexpected reply {other:?}"))),
        }
    }

    type LeaseKeepAliveStream = ReceiverStream<Result<LeaseKeepAliveResponse, Status>>;

    async fn lease_keep_alive(&self, req: Request<Streaming<LeaseKeepAliveRequest>>) -> Res<Self::LeaseKeepAliveStream> {
        let mut inbound = req.into_inner();
        let (tx, rx) = mpsc::channel(16);
        let ctx = self.ctx.clone();
        tokio::spawn(async move {
            while let Some(r) = inbound.next().await {
                let r = match r {
                    Ok(r) => r,
                    Err(status) => {
                        let _ = tx.send(Err(super::inbound_error(status))).await;
                        break;
                    }
                };
                // A leader answers from its own lessor only once a quorum
                // confirmed it still leads (a deposed leader's renewal would
                // be lost); otherwise the leader is asked.
                let ttl = if ctx.node.leader_barrier().await.is_ok() {
                    ctx.lessor.keep_alive(&ctx.store, r.id)
                } else {
                    match ctx.node.leader_lease(r.id, true).await {
                        Ok(t) => t,
                        Err(e) => {
                            let _ = tx.send(Err(e.into())).await;
                            break;
                        }
                    }
                };
                let resp = LeaseKeepAliveResponse { header: ctx.header(ctx.store.current_revision()), id: r.id, ttl };
                if tx.send(Ok(resp)).await.is_err() {
                    break;
                }
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn lease_time_to_live(&self, req: Request<LeaseTimeToLiveRequest>) -> Res<LeaseTimeToLiveResponse> {
        let r = req.into_inner();
        let ttl = if self.ctx.node.leader_barrier().await.is_ok() {
            self.ctx.lessor.time_to_live(&self.ctx.store, r.id)
        } else {
            // The TTL is the leader's; whether the lease exists, its granted
            // TTL and keys come from this member's store, once it has caught
            // up with what the leader had committed when it answered (a
            // lagging member would report a live lease as expired).
            let ttl = self.ctx.node.leader_lease(r.id, false).await?;
            self.ctx.node.linearizable_read().await?;
            ttl
        };
        let header = self.ctx.header(self.ctx.store.current_revision());
        let resp = match self.ctx.store.lease(r.id) {
            Some(l) if ttl >= 0 => LeaseTimeToLiveResponse { header, id: r.id, ttl, granted_ttl: l.ttl, keys: if r.keys { l.keys.into_iter().collect() } else { Vec::new() } },
            // etcd: an unknown lease reports TTL -1.
            _ => LeaseTimeToLiveResponse { header, id: r.id, ttl: -1, granted_ttl: 0, keys: Vec::new() },
        };
        Ok(Response::new(resp))
    }

    async fn lease_leases(&self, _req: Request<LeaseLeasesRequest>) -> Res<LeaseLeasesResponse> {
        // The list as of now, not as this member last saw it (a leader back
        // from a pause would list leases the new leader revoked).
        self.ctx.node.linearizable_read().await?;
        let leases = self.ctx.store.leases().into_iter().map(|(id, _)| LeaseStatus { id }).collect();
        Ok(Response::new(LeaseLeasesResponse { header: self.ctx.header(self.ctx.store.current_revision()), leases }))
    }
}
