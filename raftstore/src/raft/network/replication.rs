//! openraft's side of the transport: one [`Network`] per peer sends
//! AppendEntries (pipelined on a stream), votes, snapshots and leadership
//! transfers.

use std::future::Future;

use openraft::error::{NetworkError, RPCError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::{RPCOption, RaftNetworkFactory, RaftNetworkV2};
use openraft::raft::{AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, StreamAppendResult, TransferLeaderRequest, TransferLeaderResponse, VoteRequest, VoteResponse};
use proto::raftpb::raft_transport_client::RaftTransportClient;
use proto::raftpb::{RaftMessage, SnapshotChunk};
use tokio::io::AsyncReadExt;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;
use tonic::transport::Channel;
use tonic::Request;

use super::{PeerClients, CHUNK_BYTES, REMOVED_MESSAGE};
use crate::raft::state_machine::SnapshotDir;
use crate::raft::{decode, encode, Member, Snapshot, TypeConfig, Vote};

/// Least time allowed to open a replication stream (openraft's RPC timeout
/// is the heartbeat interval, too short for a first connection).
const STREAM_SETUP_MIN: std::time::Duration = std::time::Duration::from_millis(500);

/// Least time a replication stream may go without an answer while requests
/// are in flight before it is torn down and re-opened.
const STREAM_IDLE_MIN: std::time::Duration = std::time::Duration::from_secs(2);

/// What [`Network::stream_append`] returns: once the stream is open, the
/// follower's answers in request order.
type AppendStreamFuture<'s> =
    futures::future::BoxFuture<'s, std::result::Result<futures::stream::BoxStream<'s, std::result::Result<StreamAppendResult<TypeConfig>, RPCError<TypeConfig>>>, RPCError<TypeConfig>>>;

/// Creates per-target network clients for openraft.
pub struct NetworkFactory {
    peers: std::sync::Arc<PeerClients>,
}

impl NetworkFactory {
    /// A factory over shared peer clients.
    pub fn new(peers: std::sync::Arc<PeerClients>) -> Self {
        NetworkFactory { peers }
    }
}

/// openraft's connection to one peer.
pub struct Network {
    client: Option<RaftTransportClient<Channel>>,
    peers: std::sync::Arc<PeerClients>,
    /// The peer's member ID in hex, for metric labels.
    target: String,
}

impl Network {
    fn sent(&self, bytes: usize) {
        crate::metrics::metrics().peer_sent_bytes.with_label_values(&[self.target.as_str()]).inc_by(bytes as u64);
    }

    /// A Vote (`pre` false) or Pre-Vote (`pre` true) call. A peer that
    /// answers that it was removed marks this member removed.
    async fn vote_rpc(&mut self, rpc: VoteRequest<TypeConfig>, option: RPCOption, pre: bool) -> std::result::Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        let mut c = self.client()?;
        let payload = encode(&rpc).map_err(network_err)?;
        self.sent(payload.len());
        let mut req = Request::new(RaftMessage { payload });
        req.set_timeout(option.hard_ttl());
        let answer = if pre { c.pre_vote(req).await } else { c.vote(req).await };
        let resp = match answer {
            Ok(r) => r.into_inner(),
            Err(st) => {
                if st.code() == tonic::Code::FailedPrecondition && st.message() == REMOVED_MESSAGE {
                    self.peers.mark_removed();
                }
                return Err(unreachable(st));
            }
        };
        decode(&resp.payload).map_err(network_err)
    }
}

impl RaftNetworkFactory<TypeConfig> for NetworkFactory {
    type Network = Network;

    async fn new_client(&mut self, target: u64, node: &Member) -> Self::Network {
        Network { client: self.peers.client(target, Some(node)).ok(), peers: self.peers.clone(), target: crate::metrics::id_label(target) }
    }
}

fn unreachable(msg: impl std::fmt::Display) -> RPCError<TypeConfig> {
    RPCError::Unreachable(Unreachable::new(&std::io::Error::other(msg.to_string())))
}

fn network_err(msg: impl std::fmt::Display) -> RPCError<TypeConfig> {
    RPCError::Network(NetworkError::new(&std::io::Error::other(msg.to_string())))
}

impl Network {
    fn client(&self) -> std::result::Result<RaftTransportClient<Channel>, RPCError<TypeConfig>> {
        self.client.clone().ok_or_else(|| unreachable("no peer URL"))
    }
}

impl RaftNetworkV2<TypeConfig> for Network {
    type SnapshotData = SnapshotDir;

    async fn append_entries(&mut self, rpc: AppendEntriesRequest<TypeConfig>, option: RPCOption) -> std::result::Result<AppendEntriesResponse<TypeConfig>, RPCError<TypeConfig>> {
        let mut c = self.client()?;
        let payload = encode(&rpc).map_err(network_err)?;
        self.sent(payload.len());
        let mut req = Request::new(RaftMessage { payload });
        req.set_timeout(option.hard_ttl());
        let resp = c.append_entries(req).await.map_err(unreachable)?.into_inner();
        decode(&resp.payload).map_err(network_err)
    }

    /// Replicates over one long-lived `AppendStream` call: requests are
    /// written as openraft produces them, without waiting for the previous
    /// answer, and answers come back in request order. This keeps several
    /// AppendEntries in flight per follower (etcd pipelines MsgApp the same
    /// way) and saves an HTTP/2 stream setup per request.
    ///
    /// The first request is taken from `input` before the connection is
    /// opened. openraft sleeps out its replication backoff inside `input`
    /// (before each request it yields), and tonic does not poll a request
    /// body when the connection cannot be made, so without this a member
    /// that is down was re-dialled in a tight loop (tens of thousands of
    /// attempts and warnings a second). An `input` that ends at once gets an
    /// empty answer stream and no connection.
    fn stream_append<'s, S>(&'s mut self, mut input: S, option: RPCOption) -> AppendStreamFuture<'s>
    where
        S: futures::Stream<Item = AppendEntriesRequest<TypeConfig>> + openraft::OptionalSend + Unpin + 'static,
    {
        Box::pin(async move {
            let mut c = self.client()?;
            let Some(first) = input.next().await else {
                return Ok(Box::pin(futures::stream::empty()) as futures::stream::BoxStream<'s, _>);
            };
            let input = futures::stream::once(std::future::ready(first)).chain(input);
            let sent = crate::metrics::metrics().peer_sent_bytes.with_label_values(&[self.target.as_str()]);
            let inflight = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let counter = inflight.clone();
            let outbound = input.map(move |rpc| {
                // postcard cannot fail on these types; an empty payload
                // would be refused by the follower and end the stream.
                let payload = encode(&rpc).unwrap_or_default();
                sent.inc_by(payload.len() as u64);
                counter.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
                RaftMessage { payload }
            });
            // Only the setup is bounded by the RPC timeout: a grpc-timeout
            // header would end the whole stream.
            let setup = option.hard_ttl().max(STREAM_SETUP_MIN);
            let resp = match tokio::time::timeout(setup, c.append_stream(Request::new(outbound))).await {
                Ok(Ok(r)) => r.into_inner(),
                Ok(Err(st)) => return Err(unreachable(st)),
                Err(_) => return Err(unreachable(format!("append stream not set up within {setup:?}"))),
            };
            let idle = option.hard_ttl().saturating_mul(3).max(STREAM_IDLE_MIN);
            let answers = futures::stream::unfold(Some(resp), move |state| {
                let inflight = inflight.clone();
                async move {
                    let mut resp = state?;
                    loop {
                        match tokio::time::timeout(idle, resp.message()).await {
                            Ok(Ok(Some(m))) => {
                                inflight.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
                                let item = decode::<StreamAppendResult<TypeConfig>>(&m.payload).map_err(network_err);
                                let go_on = matches!(item, Ok(Ok(_)));
                                return Some((item, go_on.then_some(resp)));
                            }
                            Ok(Ok(None)) => return None,
                            Ok(Err(st)) => return Some((Err(unreachable(st)), None)),
                            // Nothing asked: an idle stream is fine.
                            Err(_) if inflight.load(std::sync::atomic::Ordering::Acquire) == 0 => continue,
                            Err(_) => return Some((Err(unreachable(format!("no append answer within {idle:?}"))), None)),
                        }
                    }
                }
            });
            Ok(Box::pin(answers) as futures::stream::BoxStream<'s, _>)
        })
    }

    async fn vote(&mut self, rpc: VoteRequest<TypeConfig>, option: RPCOption) -> std::result::Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        self.vote_rpc(rpc, option, false).await
    }

    async fn pre_vote(&mut self, rpc: VoteRequest<TypeConfig>, option: RPCOption) -> std::result::Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        self.vote_rpc(rpc, option, true).await
    }

    /// Carries a leadership transfer to this peer. Without it openraft's
    /// default answers Unreachable and the transferee never campaigns: the
    /// old leader just stops heartbeating and the others elect a leader
    /// after an election timeout.
    async fn transfer_leader(&mut self, req: TransferLeaderRequest<TypeConfig>, option: RPCOption) -> std::result::Result<TransferLeaderResponse<TypeConfig>, RPCError<TypeConfig>> {
        let mut c = self.client()?;
        let payload = encode(&req).map_err(network_err)?;
        self.sent(payload.len());
        let mut req = Request::new(RaftMessage { payload });
        req.set_timeout(option.hard_ttl());
        let resp = c.transfer_leader(req).await.map_err(unreachable)?.into_inner();
        decode(&resp.payload).map_err(network_err)
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote,
        snapshot: Snapshot,
        cancel: impl Future<Output = ReplicationClosed> + openraft::OptionalSend + 'static,
        _option: RPCOption,
    ) -> std::result::Result<SnapshotResponse<TypeConfig>, StreamingError<TypeConfig>> {
        let mut c = self.client()?;
        let meta = serde_json::to_vec(&(vote, snapshot.meta.clone())).map_err(network_err)?;
        // The reader owns the snapshot (and so keeps its directory) until
        // it has read every file, even if a newer snapshot replaces it.
        let dir = snapshot.snapshot;
        let (tx, rx) = tokio::sync::mpsc::channel::<SnapshotChunk>(4);
        let target = self.target.clone();
        let reader = tokio::spawn(async move { send_files(dir, meta, tx, target).await });
        let call = c.install_snapshot(ReceiverStream::new(rx));
        let resp = tokio::select! {
            r = call => r.map_err(unreachable)?,
            closed = cancel => return Err(StreamingError::Closed(closed)),
        };
        match reader.await {
            Ok(Ok(())) => crate::metrics::metrics().snapshot_send_success.with_label_values(&[self.target.as_str()]).inc(),
            Ok(Err(e)) => return Err(network_err(e).into()),
            Err(e) => return Err(network_err(e).into()),
        }
        decode(&resp.into_inner().payload).map_err(|e| network_err(e).into())
    }
}

async fn send_files(dir: SnapshotDir, meta: Vec<u8>, tx: tokio::sync::mpsc::Sender<SnapshotChunk>, target: String) -> std::io::Result<()> {
    let sent = crate::metrics::metrics().peer_sent_bytes.with_label_values(&[target.as_str()]);
    let mut first = Some(meta);
    let mut entries: Vec<_> = std::fs::read_dir(dir.path())?.filter_map(|e| e.ok()).collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        if !entry.file_type()?.is_file() {
            continue;
        }
        let name = entry.file_name().to_string_lossy().to_string();
        let mut f = tokio::fs::File::open(entry.path()).await?;
        let mut offset = 0u64;
        loop {
            let mut buf = vec![0u8; CHUNK_BYTES];
            let n = f.read(&mut buf).await?;
            buf.truncate(n);
            sent.inc_by(n as u64);
            let chunk = SnapshotChunk { meta: first.take().unwrap_or_default(), file: name.clone(), offset, data: buf, done: false };
            if tx.send(chunk).await.is_err() {
                return Err(std::io::Error::other("snapshot receiver went away"));
            }
            offset += n as u64;
            if n == 0 {
                break;
            }
        }
    }
    let last = SnapshotChunk { meta: first.take().unwrap_or_default(), file: String::new(), offset: 0, data: Vec::new(), done: true };
    tx.send(last).await.map_err(|_| std::io::Error::other("snapshot receiver went away"))
}
