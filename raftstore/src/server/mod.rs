//! etcd's gRPC services (etcd `server/etcdserver/api/v3rpc`): KV, Watch,
//! Lease, Maintenance, Cluster and Auth, and the Lock and Election services
//! etcd serves beside them (`v3lock`, `v3election`), each in its own file,
//! sharing one [`Context`].

pub mod auth;
pub mod cluster;
pub mod concurrency;
pub mod election;
pub mod http;
pub mod kv;
pub mod kv_txn;
pub mod lease;
pub mod lock;
pub mod maintenance;
pub mod quota;
pub mod require_leader;
pub mod watch;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use proto::etcdserverpb::ResponseHeader;

use crate::error::{Error, Result};
use crate::lease::Lessor;
use crate::mvcc::{SharedStore, WatchHub};
use crate::raft::RaftNode;

/// What every service needs.
pub struct Context {
    /// The Raft member.
    pub node: RaftNode,
    /// The MVCC store.
    pub store: SharedStore,
    /// The watch event hub.
    pub hub: Arc<WatchHub>,
    /// Lease deadlines (leader only).
    pub lessor: Arc<Lessor>,
    /// etcd cluster ID.
    pub cluster_id: u64,
    /// This member's etcd member ID (also its Raft node ID).
    pub member_id: u64,
    /// `--max-request-bytes`.
    pub max_request_bytes: usize,
    /// `--max-txn-ops`: the most ops (compares, or ops of one branch) a txn
    /// may hold, nested txns included (see [`kv::validate_txn_within`]).
    pub max_txn_ops: usize,
    /// `--quota-backend-bytes`: the most the database may hold, in bytes;
    /// `None` for no quota (see [`quota`]).
    pub quota_backend_bytes: Option<u64>,
    /// Interval of progress notifications for watchers that asked for them.
    pub progress_notify_interval: Duration,
    /// `--data-dir`.
    pub data_dir: PathBuf,
    /// Users, roles and tokens (see [`crate::auth`]).
    pub auth: Arc<crate::auth::AuthStore>,
    /// `--client-cert-auth`: a request without a token is made by the user
    /// its client certificate's common name names.
    pub client_cert_auth: bool,
}

/// Shared context handle.
pub type Ctx = Arc<Context>;

/// The status a client stream (Watch, LeaseKeepAlive) ends with when its
/// next request fails to arrive. A frame that does not decode ends the
/// stream with INTERNAL, as grpc-go does for etcd (tonic reports it as
/// INTERNAL too); the client then knows that the stream broke and did not
/// close cleanly. Any other failure (the client reset the stream) is passed
/// on as it is; nobody reads it.
fn inbound_error(status: tonic::Status) -> tonic::Status {
    if status.code() == tonic::Code::Internal {
        tonic::Status::internal(format!("grpc: error unmarshalling request: {}", status.message()))
    } else {
        status
    }
}

impl Context {
    /// A response header at `revision` with this member's IDs and term.
    pub fn header(&self, revision: i64) -> Option<ResponseHeader> {
        Some(ResponseHeader { cluster_id: self.cluster_id, member_id: self.member_id, revision, raft_term: self.node.term() })
    }

    /// Fills the IDs and term into a header that carries only a revision.
    pub fn fill(&self, h: &mut Option<ResponseHeader>) {
        let rev = h.as_ref().map(|h| h.revision).unwrap_or_else(|| self.store.current_revision());
        *h = self.header(rev);
    }
}

/// Runs `f`, which reads RocksDB for longer than an async thread should
/// block, on tokio's blocking pool and waits for it.
///
/// # Errors
/// `f`'s error, or [`Error::Internal`] if it panicked.
pub(crate) async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f).await.map_err(Error::internal)?
}
