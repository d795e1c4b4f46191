//! etcd `Maintenance` service: Status, Snapshot, Defragment, Alarm, Hash,
//! HashKV, MoveLeader.

use proto::etcdserverpb::server::Maintenance;
use proto::etcdserverpb::{
    AlarmRequest, AlarmResponse, DefragmentRequest, DefragmentResponse, DowngradeRequest, DowngradeResponse, HashKvRequest, HashKvResponse, HashRequest, HashResponse, MoveLeaderRequest,
    MoveLeaderResponse, SnapshotRequest, SnapshotResponse, StatusRequest, StatusResponse,
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use super::Ctx;
use crate::command::{Command, CommandResponse};
use crate::error::Error;
use crate::storage::{self, keys};

/// The etcd version raftstore reports. kube-apiserver enables watch progress
/// requests (consistent reads from its cache) only from 3.5.13 on.
pub const ETCD_VERSION: &str = "3.5.16";

/// Bytes of snapshot data per `SnapshotResponse`.
const SNAPSHOT_CHUNK: usize = 32 * 1024;

/// The Maintenance service.
pub struct MaintenanceService {
    ctx: Ctx,
}

impl MaintenanceService {
    /// A maintenance service over the shared context.
    pub fn new(ctx: Ctx) -> Self {
        MaintenanceService { ctx }
    }

    /// etcd 3.4's `authMaintenanceServer`: Defragment, Snapshot, Hash and
    /// HashKV need a root user when auth is on, and its errors reach the
    /// client unconverted (see [`Error::unconverted_auth_status`]).
    async fn admin_only<T>(&self, req: &Request<T>) -> Result<(), Status> {
        let who = super::auth::caller(&self.ctx, req).await.map_err(|e| e.unconverted_auth_status())?;
        self.ctx.auth.check_admin(who.as_ref()).map_err(|e| e.unconverted_auth_status())
    }
}

type Res<T> = std::result::Result<Response<T>, Status>;

/// Sends the etcd db at `file` on `tx` as etcd's Snapshot stream does: the
/// db in chunks, each with the bytes still to come after it, then one last
/// message whose blob is the SHA-256 of the db (etcd's
/// `maintenanceServer.Snapshot`; `etcdctl snapshot restore` checks it).
fn stream_db(file: &std::path::Path, tx: &mpsc::Sender<Result<SnapshotResponse, Status>>, header: Option<proto::etcdserverpb::ResponseHeader>) -> Result<(), Error> {
    use sha2::Digest as _;
    use std::io::Read as _;
    let gone = |_| Error::internal("client went away");
    let mut f = std::fs::File::open(file).map_err(Error::internal)?;
    let total = f.metadata().map_err(Error::internal)?.len();
    let mut digest = sha2::Sha256::new();
    let mut sent = 0u64;
    while sent < total {
        let mut blob = vec![0u8; SNAPSHOT_CHUNK.min((total - sent) as usize)];
        f.read_exact(&mut blob).map_err(Error::internal)?;
        digest.update(&blob);
        sent += blob.len() as u64;
        tx.blocking_send(Ok(SnapshotResponse { header, remaining_bytes: total - sent, blob, version: ETCD_VERSION.into() })).map_err(gone)?;
    }
    let blob = digest.finalize().to_vec();
    tx.blocking_send(Ok(SnapshotResponse { header, remaining_bytes: 0, blob, version: ETCD_VERSION.into() })).map_err(gone)
}

#[tonic::async_trait]
impl Maintenance for MaintenanceService {
    async fn alarm(&self, req: Request<AlarmRequest>) -> Res<AlarmResponse> {
        // A token must be valid, though none is needed (etcd 3.4 checks
        // the caller's token when it proposes the request, and nothing more).
        super::auth::caller(&self.ctx, &req).await.map_err(|e| e.unconverted_auth_status())?;
        // Every action goes through the log, as in etcd (see mvcc::alarm).
        match self.ctx.node.propose(Command::Alarm(req.into_inner())).await? {
            CommandResponse::Alarm(mut resp) => {
                self.ctx.fill(&mut resp.header);
                Ok(Response::new(resp))
            }
            other => Err(Status::internal(format!("unexpected reply {other:?}"))),
        }
    }

    async fn status(&self, _req: Request<StatusRequest>) -> Res<StatusResponse> {
        let (leader, term, index, applied) = self.ctx.node.status();
        let db_size = storage::db_size(self.ctx.store.db());
        let is_learner = self.ctx.node.members().get(&self.ctx.member_id).map(|(_, l)| *l).unwrap_or(false);
        Ok(Response::new(StatusResponse {
            header: self.ctx.header(self.ctx.store.current_revision()),
            version: ETCD_VERSION.into(),
            db_size,
            leader: leader.unwrap_or(0),
            raft_index: index,
            raft_term: term,
            raft_applied_index: applied,
            // etcd lists "etcdserver: no leader" when the member has none,
            // then every raised alarm.
            errors: leader.is_none().then(|| Error::NoLeader.to_string()).into_iter().chain(self.ctx.store.alarms().iter().map(crate::mvcc::alarm::describe)).collect(),
            db_size_in_use: db_size,
            is_learner,
            storage_version: "3.5.0".into(),
            // `--quota-backend-bytes` in effect; 0 when there is no quota.
            db_size_quota: self.ctx.quota_backend_bytes.map_or(0, |q| i64::try_from(q).unwrap_or(i64::MAX)),
            downgrade_info: None,
        }))
    }

    async fn defragment(&self, req: Request<DefragmentRequest>) -> Res<DefragmentResponse> {
        self.admin_only(&req).await?;
        let store = self.ctx.store.clone();
        tokio::task::spawn_blocking(move || {
            let db = store.db();
            for name in keys::ALL_CFS {
                if let Some(cf) = db.cf_handle(name) {
                    db.compact_range_cf(cf, None::<&[u8]>, None::<&[u8]>);
                }
            }
        })
        .await
        .map_err(|e| Status::internal(e.to_string()))?;
        // etcd answers a defragment without a response header.
        Ok(Response::new(DefragmentResponse { header: None }))
    }

    async fn hash(&self, req: Request<HashRequest>) -> Res<HashResponse> {
        self.admin_only(&req).await?;
        let store = self.ctx.store.clone();
        let (hash, _, _) = super::blocking(move || store.hash_kv(0)).await?;
        Ok(Response::new(HashResponse { header: self.ctx.header(self.ctx.store.current_revision()), hash }))
    }

    async fn hash_kv(&self, req: Request<HashKvRequest>) -> Res<HashKvResponse> {
        self.admin_only(&req).await?;
        let (store, revision) = (self.ctx.store.clone(), req.into_inner().revision);
        let (hash, hash_revision, compact_revision) = super::blocking(move || store.hash_kv(revision)).await?;
        Ok(Response::new(HashKvResponse { header: self.ctx.header(self.ctx.store.current_revision()), hash, compact_revision, hash_revision }))
    }

    type SnapshotStream = ReceiverStream<Result<SnapshotResponse, Status>>;

    /// The store in etcd's own format (a bbolt db, see [`crate::etcd_db`]),
    /// written from one RocksDB snapshot to a file under the data dir's
    /// `tmp/`, streamed with its digest, and removed.
    async fn snapshot(&self, req: Request<SnapshotRequest>) -> Res<Self::SnapshotStream> {
        self.admin_only(&req).await?;
        let (tx, rx) = mpsc::channel(8);
        let ctx = self.ctx.clone();
        let file = ctx.data_dir.join("tmp").join(format!("client-snapshot-{}.db", std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)));
        let header = ctx.header(ctx.store.current_revision());
        tokio::task::spawn_blocking(move || {
            let result = (|| -> Result<(), Error> {
                if let Some(parent) = file.parent() {
                    std::fs::create_dir_all(parent).map_err(Error::internal)?;
                }
                crate::etcd_db::write_db(ctx.store.db(), &file)?;
                stream_db(&file, &tx, header)
            })();
            let _ = std::fs::remove_file(&file);
            if let Err(e) = result {
                let _ = tx.blocking_send(Err(e.into()));
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    /// etcd's MoveLeader (`maintenanceServer.MoveLeader`): only the leader
    /// accepts it, and it answers once the transferee leads; see
    /// [`crate::raft::RaftNode::move_leader`] for the errors. The wait is
    /// bounded by the request timeout, and by the client's deadline, whose
    /// cancellation ends the call.
    async fn move_leader(&self, req: Request<MoveLeaderRequest>) -> Res<MoveLeaderResponse> {
        let to = req.into_inner().target_id;
        self.ctx.node.move_leader(to, self.ctx.node.request_timeout).await?;
        Ok(Response::new(MoveLeaderResponse { header: self.ctx.header(self.ctx.store.current_revision()) }))
    }

    async fn downgrade(&self, _req: Request<DowngradeRequest>) -> Res<DowngradeResponse> {
        Err(Error::Unimplemented("Downgrade").into())
    }
}
