//! etcd `Cluster` service: the member list from Raft membership.

use proto::etcdserverpb::server::Cluster;
use proto::etcdserverpb::{
    Member, MemberAddRequest, MemberAddResponse, MemberListRequest, MemberListResponse,
    MemberPromoteRequest, MemberPromoteResponse, MemberRemoveRequest, MemberRemoveResponse,
    MemberUpdateRequest, MemberUpdateResponse,
};
use tonic::{Request, Response, Status};

use super::Ctx;
use crate::error::Error;

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
    async fn member_add(&self, _req: Request<MemberAddRequest>) -> Res<MemberAddResponse> {
        Err(Error::Unimplemented("MemberAdd").into())
    }

    async fn member_remove(&self, _req: Request<MemberRemoveRequest>) -> Res<MemberRemoveResponse> {
        Err(Error::Unimplemented("MemberRemove").into())
    }

    async fn member_update(&self, _req: Request<MemberUpdateRequest>) -> Res<MemberUpdateResponse> {
        Err(Error::Unimplemented("MemberUpdate").into())
    }

    async fn member_list(&self, _req: Request<MemberListRequest>) -> Res<MemberListResponse> {
        let header = self.ctx.header(self.ctx.store.current_revision());
        Ok(Response::new(MemberListResponse { header, members: self.members() }))
    }

    async fn member_promote(&self, _req: Request<MemberPromoteRequest>) -> Res<MemberPromoteResponse> {
        Err(Error::Unimplemented("MemberPromote").into())
    }
}
