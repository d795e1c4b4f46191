//! The server side of the peer transport: every RPC a peer sends this
//! member.

use std::path::PathBuf;
use std::pin::Pin;

use openraft::raft::{AppendEntriesRequest, TransferLeaderRequest, VoteRequest};
use parking_lot::Mutex;
use proto::raftpb::raft_transport_server::RaftTransport;
use proto::raftpb::{
    ForwardRequest, ForwardResponse, LeaseRequest, LeaseResponse, MemberChangeRequest, MemberChangeResponse, MembersRequest, MembersResponse, RaftMessage, ReadIndexRequest, ReadIndexResponse,
    SnapshotChunk,
};
use tokio::io::AsyncWriteExt;
use tokio_stream::StreamExt;
use tonic::{Request, Response, Status, Streaming};

use super::{FORWARD_WINDOW, REMOVED_MESSAGE};
use crate::command::Command;
use crate::raft::state_machine::SnapshotDir;
use crate::raft::{decode, encode, MemberChange, RaftNode, Snapshot, SnapshotMeta, TypeConfig, Vote};

/// The server side of the peer transport.
pub struct TransportService {
    node: RaftNode,
    snapshot_root: PathBuf,
    store: crate::mvcc::SharedStore,
    lessor: std::sync::Arc<crate::lease::Lessor>,
}

impl TransportService {
    /// Serves peer RPCs for `node`; received snapshots land under
    /// `snapshot_root`.
    pub fn new(node: RaftNode, snapshot_root: PathBuf, store: crate::mvcc::SharedStore, lessor: std::sync::Arc<crate::lease::Lessor>) -> Self {
        TransportService { node, snapshot_root, store, lessor }
    }
}

/// Accounts one replication message of `bytes` from `leader`: the peer
/// receive counter, and the leader contact that
/// [`RaftNode::effective_leader`] reads.
fn received_from(node: &RaftNode, leader: u64, bytes: usize) {
    crate::metrics::metrics().peer_received_bytes.with_label_values(&[crate::metrics::id_label(leader).as_str()]).inc_by(bytes as u64);
    node.heard_from_leader(leader);
}

/// Decodes and proposes a forwarded command on this member, and packs the
/// outcome (the command's answer, or its etcd error) as the answer to `id`.
async fn forward_answer(node: &RaftNode, req: ForwardRequest) -> ForwardResponse {
    let id = req.id;
    let result = match Command::decode(&req.command) {
        Ok(cmd) => node.propose(cmd).await,
        Err(e) => Err(e),
    };
    match result {
        Ok(r) => ForwardResponse { response: r.encode(), code: 0, message: String::new(), id },
        Err(e) => ForwardResponse { response: Vec::new(), code: e.code() as i32, message: e.to_string(), id },
    }
}

fn bad(e: impl std::fmt::Display) -> Status {
    Status::invalid_argument(e.to_string())
}

type BoxResult<T> = std::result::Result<Response<T>, Status>;

#[tonic::async_trait]
impl RaftTransport for TransportService {
    async fn vote(&self, req: Request<RaftMessage>) -> BoxResult<RaftMessage> {
        self.answer_vote(req, false).await
    }

    async fn pre_vote(&self, req: Request<RaftMessage>) -> BoxResult<RaftMessage> {
        self.answer_vote(req, true).await
    }

    async fn append_entries(&self, req: Request<RaftMessage>) -> BoxResult<RaftMessage> {
        let payload = req.into_inner().payload;
        let rpc: AppendEntriesRequest<TypeConfig> = decode(&payload).map_err(bad)?;
        {
            use openraft::vote::RaftLeaderId as _;
            received_from(&self.node, *rpc.vote.leader_id().node_id(), payload.len());
        }
        let resp = self.node.raft.append_entries(rpc).await.map_err(|e| Status::unavailable(e.to_string()))?;
        Ok(Response::new(RaftMessage { payload: encode(&resp).map_err(bad)? }))
    }

    type AppendStreamStream = Pin<Box<dyn futures::Stream<Item = std::result::Result<RaftMessage, Status>> + Send + 'static>>;

    async fn append_stream(&self, req: Request<Streaming<RaftMessage>>) -> BoxResult<Self::AppendStreamStream> {
        // A malformed request ends the input; its error is then the last
        // message of the answer stream.
        let failed: std::sync::Arc<Mutex<Option<Status>>> = Default::default();
        let failed_in = failed.clone();
        let node = self.node.clone();
        let input = req.into_inner().map_while(move |m| {
            let decoded = m.and_then(|m| {
                let rpc: AppendEntriesRequest<TypeConfig> = decode(&m.payload).map_err(bad)?;
                use openraft::vote::RaftLeaderId as _;
                received_from(&node, *rpc.vote.leader_id().node_id(), m.payload.len());
                Ok(rpc)
            });
            match decoded {
                Ok(rpc) => Some(rpc),
                Err(st) => {
                    *failed_in.lock() = Some(st);
                    None
                }
            }
        });
        let answers = self.node.raft.stream_append(input).map(|r| match r {
            Ok(result) => encode(&result).map(|payload| RaftMessage { payload }).map_err(|e| Status::internal(e.to_string())),
            Err(fatal) => Err(Status::unavailable(fatal.to_string())),
        });
        let tail = futures::stream::once(async move { failed.lock().take() }).filter_map(|st: Option<Status>| st.map(Err));
        Ok(Response::new(Box::pin(answers.chain(tail))))
    }

    async fn install_snapshot(&self, req: Request<Streaming<SnapshotChunk>>) -> BoxResult<RaftMessage> {
        let mut stream = req.into_inner();
        let dir = self.snapshot_root.join(format!("recv-{}", std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)));
        tokio::fs::create_dir_all(&dir).await.map_err(|e| Status::internal(e.to_string()))?;
        let mut meta: Option<(Vote, SnapshotMeta)> = None;
        let mut open: Option<(String, tokio::fs::File)> = None;
        let mut done = false;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk?;
            if !chunk.meta.is_empty() {
                meta = Some(serde_json::from_slice(&chunk.meta).map_err(bad)?);
            }
            if chunk.done {
                done = true;
                break;
            }
            let name = chunk.file.clone();
            if name.is_empty() || name.contains('/') || name.contains("..") {
                return Err(bad("bad snapshot file name"));
            }
            if open.as_ref().map(|(n, _)| n != &name).unwrap_or(true) {
                if let Some((_, mut f)) = open.take() {
                    f.flush().await.map_err(|e| Status::internal(e.to_string()))?;
                }
                let f = tokio::fs::File::create(dir.join(&name)).await.map_err(|e| Status::internal(e.to_string()))?;
                open = Some((name, f));
            }
            if let Some((_, f)) = open.as_mut() {
                f.write_all(&chunk.data).await.map_err(|e| Status::internal(e.to_string()))?;
            }
        }
        if let Some((_, mut f)) = open.take() {
            f.flush().await.map_err(|e| Status::internal(e.to_string()))?;
            f.sync_all().await.map_err(|e| Status::internal(e.to_string()))?;
        }
        let (Some((vote, meta)), true) = (meta, done) else {
            let _ = tokio::fs::remove_dir_all(&dir).await;
            return Err(bad("incomplete snapshot stream"));
        };
        let snap = Snapshot { meta, snapshot: SnapshotDir::unmanaged(dir) };
        let from = {
            use openraft::vote::RaftLeaderId as _;
            crate::metrics::id_label(*vote.leader_id().node_id())
        };
        let resp = self.node.raft.install_full_snapshot(vote, snap).await.map_err(|e| Status::unavailable(e.to_string()))?;
        crate::metrics::metrics().snapshot_receive_success.with_label_values(&[from.as_str()]).inc();
        Ok(Response::new(RaftMessage { payload: encode(&resp).map_err(bad)? }))
    }

    type ForwardStreamStream = Pin<Box<dyn futures::Stream<Item = std::result::Result<ForwardResponse, Status>> + Send + 'static>>;

    /// Proposes each forwarded command as it arrives, concurrently, and
    /// answers each (tagged with its id) when it is applied. The answers end
    /// after the follower ends its side and every proposal is answered; a
    /// request that is not a ForwardRequest at all (tonic reads nothing
    /// after it) ends them with InvalidArgument, once the requests before
    /// it are answered.
    async fn forward_stream(&self, req: Request<Streaming<ForwardRequest>>) -> BoxResult<Self::ForwardStreamStream> {
        let mut input = req.into_inner();
        let (tx, rx) = tokio::sync::mpsc::channel(FORWARD_WINDOW);
        let node = self.node.clone();
        tokio::spawn(async move {
            // Every proposal holds a clone; recv() ends when all are done.
            let (busy, mut idle) = tokio::sync::mpsc::channel::<()>(1);
            // A proposal holds a permit until its answer is queued: with
            // FORWARD_WINDOW proposals out, or answers the follower does not
            // read, no more requests are read (HTTP/2 flow control then
            // holds the follower back).
            let window = std::sync::Arc::new(tokio::sync::Semaphore::new(FORWARD_WINDOW));
            let bad = loop {
                let Ok(room) = window.clone().acquire_owned().await else { break None };
                let msg = match input.next().await {
                    Some(Ok(msg)) => msg,
                    Some(Err(st)) => break Some(st),
                    None => break None,
                };
                let (node, tx, busy) = (node.clone(), tx.clone(), busy.clone());
                tokio::spawn(async move {
                    let _ = tx.send(Ok(forward_answer(&node, msg).await)).await;
                    drop((room, busy));
                });
            };
            if let Some(st) = bad {
                drop(busy);
                let _ = idle.recv().await;
                let _ = tx.send(Err(Status::invalid_argument(format!("malformed ForwardRequest: {}", st.message())))).await;
            }
        });
        Ok(Response::new(Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))))
    }

    async fn lease(&self, req: Request<LeaseRequest>) -> BoxResult<LeaseResponse> {
        Ok(Response::new(self.lease_answer(req.into_inner()).await))
    }

    async fn transfer_leader(&self, req: Request<RaftMessage>) -> BoxResult<RaftMessage> {
        let rpc: TransferLeaderRequest<TypeConfig> = decode(&req.into_inner().payload).map_err(bad)?;
        let resp = self.node.raft.handle_transfer_leader(rpc).await.map_err(|e| Status::unavailable(e.to_string()))?;
        Ok(Response::new(RaftMessage { payload: encode(&resp).map_err(bad)? }))
    }

    async fn change_member(&self, req: Request<MemberChangeRequest>) -> BoxResult<MemberChangeResponse> {
        let change: MemberChange = decode(&req.into_inner().change).map_err(bad)?;
        let out = match self.node.change_member_as_leader(&change).await {
            Ok(index) => MemberChangeResponse { index, code: 0, message: String::new() },
            Err(e) => MemberChangeResponse { index: 0, code: e.code() as i32, message: e.to_string() },
        };
        Ok(Response::new(out))
    }

    async fn members(&self, _req: Request<MembersRequest>) -> BoxResult<MembersResponse> {
        let members = encode(&self.node.members()).map_err(bad)?;
        Ok(Response::new(MembersResponse { cluster_id: self.node.cluster_id, members }))
    }

    async fn read_index(&self, _req: Request<ReadIndexRequest>) -> BoxResult<ReadIndexResponse> {
        let out = match self.node.read_index().await {
            Ok(index) => ReadIndexResponse { index, code: 0, message: String::new() },
            Err(e) => ReadIndexResponse { index: 0, code: e.code() as i32, message: e.to_string() },
        };
        Ok(Response::new(out))
    }
}

impl TransportService {
    /// Answers a Vote (`pre` false) or Pre-Vote (`pre` true); a removed
    /// member's request is refused with [`REMOVED_MESSAGE`].
    async fn answer_vote(&self, req: Request<RaftMessage>, pre: bool) -> BoxResult<RaftMessage> {
        let rpc: VoteRequest<TypeConfig> = decode(&req.into_inner().payload).map_err(bad)?;
        {
            use openraft::vote::RaftLeaderId as _;
            let candidate = *rpc.vote.leader_id().node_id();
            if self.node.was_removed(candidate) {
                return Err(Status::failed_precondition(REMOVED_MESSAGE));
            }
        }
        let resp = if pre { self.node.raft.pre_vote(rpc).await } else { self.node.raft.vote(rpc).await };
        let resp = resp.map_err(|e| Status::unavailable(e.to_string()))?;
        Ok(Response::new(RaftMessage { payload: encode(&resp).map_err(bad)? }))
    }

    async fn lease_answer(&self, r: LeaseRequest) -> LeaseResponse {
        if let Err(e) = self.node.leader_barrier().await {
            return LeaseResponse { ttl: 0, code: e.code() as i32, message: e.to_string() };
        }
        let ttl = if r.renew { self.lessor.keep_alive(&self.store, r.id) } else { self.lessor.time_to_live(&self.store, r.id) };
        LeaseResponse { ttl, code: 0, message: String::new() }
    }
}
