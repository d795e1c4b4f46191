//! etcd `Cluster` service: the member list from Raft membership, and
//! membership changes (MemberAdd, MemberPromote, MemberRemove,
//! MemberUpdate) through openraft's learner and joint-consensus changes,
//! with etcd's checks and error strings (etcd `api/v3rpc/member.go`,
//! `rpctypes/error.go`).

use proto::etcdserverpb::server::Cluster;
use proto::etcdserverpb::{
    Member, MemberAddRequest, MemberAddResponse, MemberListRequest, MemberListResponse, MemberPromoteRequest, MemberPromoteResponse, MemberRemoveRequest, MemberRemoveResponse, MemberUpdateRequest,
    MemberUpdateResponse,
};
use tonic::{Request, Response, Status};

use super::Ctx;
use crate::error::Error;
use crate::raft::MemberChange;

/// Checks peer URLs as etcd does (`types.NewURLs`): each must parse, have
/// an http or https scheme and a host:port.
///
/// # Errors
/// [`Error::MemberBadUrls`].
fn check_peer_urls(urls: &[String]) -> Result<(), Error> {
    if urls.is_empty() {
        return Err(Error::MemberBadUrls);
    }
    for u in urls {
        let parsed = url::Url::parse(u).map_err(|_| Error::MemberBadUrls)?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() || parsed.port().is_none() {
            return Err(Error::MemberBadUrls);
        }
    }
    Ok(())
}

/// A new member ID from its peer URLs and the time (etcd derives it from
/// the peer URLs, the cluster name and the time the same way), never 0.
fn new_member_id(peer_urls: &[String]) -> u64 {
    use sha2::{Digest, Sha256};
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let d = Sha256::digest(format!("{}\n{now}", peer_urls.join(",")).as_bytes());
    let mut b = [0u8; 8];
    b.copy_from_slice(&d[..8]);
    u64::from_be_bytes(b).max(1)
}

/// The Cluster service.
pub struct ClusterService {
    ctx: Ctx,
}

impl ClusterService {
    /// A cluster service over the shared context.
    pub fn new(ctx: Ctx) -> Self {
        ClusterService { ctx }
    }

    fn members(&self) -> Vec<Member> {
        // Peer URLs come from Raft membership; name and client URLs from what
        // each member published at its last start.
        let attrs = self.ctx.store.member_attrs();
        self.ctx
            .node
            .members()
            .into_iter()
            .map(|(id, (m, learner))| {
                let (name, client_urls) = match attrs.get(&id) {
                    Some(a) => (a.name.clone(), a.client_ur_ls.clone()),
                    None => (m.name, m.client_urls),
                };
                Member { id, name, peer_ur_ls: m.peer_urls, client_ur_ls: client_urls, is_learner: learner }
            })
            .collect()
    }
}

type Res<T> = std::result::Result<Response<T>, Status>;

#[tonic::async_trait]
impl Cluster for ClusterService {
    async fn member_add(&self, req: Request<MemberAddRequest>) -> Res<MemberAddResponse> {
        // etcd: membership changes need a root user when auth is on.
        let who = super::auth::caller(&self.ctx, &req).await?;
        self.ctx.auth.check_admin(who.as_ref())?;
        let req = req.into_inner();
        check_peer_urls(&req.peer_ur_ls)?;
        let id = new_member_id(&req.peer_ur_ls);
        self.ctx.node.change_member(MemberChange::Add { id, peer_urls: req.peer_ur_ls.clone(), is_learner: req.is_learner }).await?;
        let member = Member { id, name: String::new(), peer_ur_ls: req.peer_ur_ls, client_ur_ls: Vec::new(), is_learner: req.is_learner };
        let header = self.ctx.header(self.ctx.store.current_revision());
        Ok(Response::new(MemberAddResponse { header, member: Some(member), members: self.members() }))
    }

    async fn member_remove(&self, req: Request<MemberRemoveRequest>) -> Res<MemberRemoveResponse> {
        // etcd: membership changes need a root user when auth is on.
        let who = super::auth::caller(&self.ctx, &req).await?;
        self.ctx.auth.check_admin(who.as_ref())?;
        let id = req.into_inner().id;
        self.ctx.node.change_member(MemberChange::Remove { id }).await?;
        let header = self.ctx.header(self.ctx.store.current_revision());
        Ok(Response::new(MemberRemoveResponse { header, members: self.members() }))
    }

    async fn member_update(&self, req: Request<MemberUpdateRequest>) -> Res<MemberUpdateResponse> {
        // etcd: membership changes need a root user when auth is on.
        let who = super::auth::caller(&self.ctx, &req).await?;
        self.ctx.auth.check_admin(who.as_ref())?;
        let req = req.into_inner();
        check_peer_urls(&req.peer_ur_ls)?;
        self.ctx.node.change_member(MemberChange::Update { id: req.id, peer_urls: req.peer_ur_ls }).await?;
        let header = self.ctx.header(self.ctx.store.current_revision());
        Ok(Response::new(MemberUpdateResponse { header, members: self.members() }))
    }

    async fn member_list(&self, _req: Request<MemberListRequest>) -> Res<MemberListResponse> {
        let header = self.ctx.header(self.ctx.store.current_revision());
        Ok(Response::new(MemberListResponse { header, members: self.members() }))
    }

    async fn member_promote(&self, req: Request<MemberPromoteRequest>) -> Res<MemberPromoteResponse> {
        // etcd: membership changes need a root user when auth is on.
        let who = super::auth::caller(&self.ctx, &req).await?;
        self.ctx.auth.check_admin(who.as_ref())?;
        let id = req.into_inner().id;
        self.ctx.node.change_member(MemberChange::Promote { id }).await?;
        let header = self.ctx.header(self.ctx.store.current_revision());
        Ok(Response::new(MemberPromoteResponse { header, members: self.members() }))
    }
}
