//! etcd's gRPC services (etcd `server/etcdserver/api/v3rpc`): KV, Watch,
//! Lease, Maintenance and Cluster, each in its own file, sharing one
//! [`Context`].

pub mod cluster;
pub mod kv;
pub mod lease;
pub mod maintenance;
pub mod watch;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use proto::etcdserverpb::ResponseHeader;

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
    /// Interval of progress notifications for watchers that asked for them.
    pub progress_notify_interval: Duration,
    /// `--data-dir`.
    pub data_dir: PathBuf,
}

/// Shared context handle.
pub type Ctx = Arc<Context>;

impl Context {
    /// A response header at `revision` with this member's IDs and term.
    pub fn header(&self, revision: i64) -> Option<ResponseHeader> {
        Some(ResponseHeader {
            cluster_id: self.cluster_id,
            member_id: self.member_id,
            revision,
            raft_term: self.node.term(),
        })
    }

    /// Fills the IDs and term into a header that carries only a revision.
    pub fn fill(&self, h: &mut Option<ResponseHeader>) {
        let rev = h.as_ref().map(|h| h.revision).unwrap_or_else(|| self.store.current_revision());
        *h = self.header(rev);
    }
}

/// Rewrites tonic's status for an oversized request into grpc-go's, which is
/// what etcd clients see from etcd: `ResourceExhausted` and
/// `grpc: received message larger than max (N vs. M)` (tonic says
/// `OutOfRange`).
pub fn grpc_limit_status(mut resp: http::Response<tonic::body::Body>) -> http::Response<tonic::body::Body> {
    const PREFIX: &str = "Error, decoded message length too large: found ";
    let msg = resp.headers().get("grpc-message").and_then(|v| v.to_str().ok()).map(str::to_string);
    let Some(msg) = msg else { return resp };
    let decoded = percent_decode(&msg);
    let Some(rest) = decoded.strip_prefix(PREFIX) else { return resp };
    let nums: Vec<&str> = rest.split(|c: char| !c.is_ascii_digit()).filter(|s| !s.is_empty()).collect();
    if let [found, limit, ..] = nums.as_slice() {
        let text = format!("grpc: received message larger than max ({found} vs. {limit})");
        let h = resp.headers_mut();
        h.insert("grpc-status", http::HeaderValue::from_static("8"));
        if let Ok(v) = http::HeaderValue::from_str(&text.replace(' ', "%20")) {
            h.insert("grpc-message", v);
        }
    }
    resp
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
