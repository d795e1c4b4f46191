//! The peer transport: openraft RPCs, snapshot streaming, request forwarding
//! and read index over tonic (`proto/raftpb.proto`).
//!
//! openraft messages travel postcard-encoded inside `RaftMessage.payload`.
//! A snapshot travels as the files of a RocksDB checkpoint, in chunks of at
//! most [`CHUNK_BYTES`].

use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;

use openraft::error::{NetworkError, RPCError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::{RPCOption, RaftNetworkFactory, RaftNetworkV2};
use openraft::raft::{AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, StreamAppendResult, VoteRequest, VoteResponse};
use parking_lot::Mutex;
use proto::raftpb::raft_transport_client::RaftTransportClient;
use proto::raftpb::raft_transport_server::RaftTransport;
use proto::raftpb::{
    ForwardRequest, ForwardResponse, LeaseRequest, LeaseResponse, MemberChangeRequest, MemberChangeResponse, MembersRequest, MembersResponse,
    RaftMessage, ReadIndexRequest, ReadIndexResponse, SnapshotChunk,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;
use tonic::transport::{Channel, Endpoint};
use tonic::{Request, Response, Status, Streaming};

use super::state_machine::SnapshotDir;
use super::{decode, encode, Member, MemberChange, RaftNode, Snapshot, SnapshotMeta, TypeConfig, Vote};
use crate::command::{Command, CommandResponse};
use crate::error::{Error, Result};

/// Largest piece of a snapshot file sent in one message, in bytes.
pub const CHUNK_BYTES: usize = 1 << 20;

/// Least time allowed to open a replication stream (openraft's RPC timeout
/// is the heartbeat interval, too short for a first connection).
const STREAM_SETUP_MIN: std::time::Duration = std::time::Duration::from_millis(500);

/// Least time a replication stream may go without an answer while requests
/// are in flight before it is torn down and re-opened.
const STREAM_IDLE_MIN: std::time::Duration = std::time::Duration::from_secs(2);

/// What [`Network::stream_append`] returns: once the stream is open, the
/// follower's answers in request order.
type AppendStreamFuture<'s> = futures::future::BoxFuture<
    's,
    std::result::Result<futures::stream::BoxStream<'s, std::result::Result<StreamAppendResult<TypeConfig>, RPCError<TypeConfig>>>, RPCError<TypeConfig>>,
>;

/// What a peer answers when a member that was removed from the cluster
/// asks for votes; the removed member then shuts itself down (etcd answers
/// removed members the same way and they stop).
pub const REMOVED_MESSAGE: &str = "the member has been permanently removed from the cluster";

/// gRPC clients to the other members, created lazily and reused.
pub struct PeerClients {
    /// By member ID: the peer URL the client dials, and the client. These
    /// carry Raft's own messages (replication, votes, snapshots); they are
    /// dialled from the Raft thread, so their connections run there.
    clients: Mutex<HashMap<u64, (String, RaftTransportClient<Channel>)>>,
    /// The same for requests that clients wait on (forwarded writes, lease
    /// and read-index queries, membership changes). They are dialled from the
    /// gRPC handlers, so their connections run on the shared runtime and
    /// never wait behind the Raft thread's work (a follower's log fsync).
    service_clients: Mutex<HashMap<u64, (String, RaftTransportClient<Channel>)>>,
    /// By member ID: the open `ForwardStream` to that member (see
    /// [`PeerClients::forward`]).
    forward_streams: Mutex<HashMap<u64, std::sync::Arc<ForwardStream>>>,
    /// Peer URLs known from the initial cluster, by member ID.
    initial: HashMap<u64, String>,
    /// Set once a peer said this member was removed from the cluster.
    removed: tokio::sync::watch::Sender<bool>,
    /// TLS for https peer URLs.
    tls: Option<tonic::transport::ClientTlsConfig>,
}

/// How often a peer connection is pinged (HTTP/2 PING), and how long the
/// answer may take before the connection is dropped. A connection that went
/// silent without closing (the peer's host vanished, a half-open TCP
/// connection) otherwise stays in use for as long as TCP keeps it: every
/// new stream on it, a forwarded write's too, would wait out its timeout.
const PEER_PING_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);
const PEER_PING_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// A lazily connecting client to a peer URL.
fn dial(url: &str, tls: Option<&tonic::transport::ClientTlsConfig>) -> Result<RaftTransportClient<Channel>> {
    let mut ep = Endpoint::from_shared(url.to_string()).map_err(Error::internal)?
        .connect_timeout(std::time::Duration::from_secs(1))
        .http2_keep_alive_interval(PEER_PING_INTERVAL)
        .keep_alive_timeout(PEER_PING_TIMEOUT)
        .keep_alive_while_idle(true)
        .tcp_nodelay(true);
    if url.starts_with("https://") {
        let tls = tls.ok_or_else(|| Error::InvalidArgument(format!("{url}: https peer URLs need --peer-trusted-ca-file")))?;
        ep = ep.tls_config(tls.clone()).map_err(Error::internal)?;
    }
    Ok(RaftTransportClient::new(ep.connect_lazy()).max_decoding_message_size(usize::MAX).max_encoding_message_size(usize::MAX))
}

impl PeerClients {
    /// Clients for a cluster whose initial members have these peer URLs.
    pub fn new(initial: HashMap<u64, String>, tls: Option<tonic::transport::ClientTlsConfig>) -> Self {
        PeerClients { clients: Mutex::new(HashMap::new()), service_clients: Mutex::new(HashMap::new()), forward_streams: Mutex::new(HashMap::new()), initial, removed: tokio::sync::watch::Sender::new(false), tls }
    }

    /// Becomes true once this member learns it was removed from the cluster.
    pub fn removed(&self) -> tokio::sync::watch::Receiver<bool> {
        self.removed.subscribe()
    }

    /// Marks this member as removed from the cluster.
    pub fn mark_removed(&self) {
        self.removed.send_replace(true);
    }

    /// The Raft-message client for member `id`.
    fn client(&self, id: u64, node: Option<&Member>) -> Result<RaftTransportClient<Channel>> {
        self.client_in(&self.clients, id, node).map(|(_, c)| c)
    }

    /// The client-request client for member `id` (see `service_clients`).
    fn service_client(&self, id: u64, node: Option<&Member>) -> Result<RaftTransportClient<Channel>> {
        self.client_in(&self.service_clients, id, node).map(|(_, c)| c)
    }

    /// The client for member `id` in `clients`, and the peer URL it dials.
    fn client_in(&self, clients: &Mutex<HashMap<u64, (String, RaftTransportClient<Channel>)>>, id: u64, node: Option<&Member>) -> Result<(String, RaftTransportClient<Channel>)> {
        let wanted = node.and_then(|n| n.peer_urls.first().cloned());
        if let Some((url, c)) = clients.lock().get(&id) {
            // A MemberUpdate changes a member's URL: dial the new one.
            if wanted.as_ref().is_none_or(|w| w == url) {
                return Ok((url.clone(), c.clone()));
            }
        }
        let url = wanted.or_else(|| self.initial.get(&id).cloned()).ok_or(Error::NoLeader)?;
        let c = dial(&url, self.tls.as_ref())?;
        clients.lock().insert(id, (url.clone(), c.clone()));
        Ok((url, c))
    }

    /// Forwards a membership change to the leader; returns the log index of
    /// the change.
    ///
    /// # Errors
    /// The leader's etcd error, or Unavailable if it cannot be reached.
    pub async fn change_member(&self, leader: u64, node: Option<&Member>, change: &MemberChange) -> Result<u64> {
        let mut c = self.service_client(leader, node)?;
        let req = MemberChangeRequest { change: encode(change).map_err(Error::internal)? };
        let resp = c.change_member(req).await.map_err(|_| Error::LeaderChanged)?.into_inner();
        if !resp.message.is_empty() {
            return Err(Error::from_code_message(resp.code, &resp.message));
        }
        Ok(resp.index)
    }

    /// Asks the member at `peer_url` for the cluster ID and its members (ID
    /// to member and learner flag).
    ///
    /// # Errors
    /// Unavailable if the peer cannot be reached; Internal if it answers
    /// garbage.
    pub async fn members_at(peer_url: &str, tls: Option<tonic::transport::ClientTlsConfig>) -> Result<(u64, std::collections::BTreeMap<u64, (Member, bool)>)> {
        let mut c = dial(peer_url, tls.as_ref())?;
        let mut req = Request::new(MembersRequest {});
        req.set_timeout(std::time::Duration::from_secs(2));
        let resp = c.members(req).await.map_err(|_| Error::NoLeader)?.into_inner();
        Ok((resp.cluster_id, decode(&resp.members).map_err(Error::internal)?))
    }

    /// Forwards a command to the leader and returns its reply.
    ///
    /// # Errors
    /// The leader's error, or Unavailable if it cannot be reached.
    pub async fn forward(&self, leader: u64, node: Option<&Member>, cmd: &Command) -> Result<CommandResponse> {
        let command = cmd.encode();
        // A stream that another write closed (abandoned) between our
        // lookup and our send refuses the write unsent: offer it once to
        // a fresh stream, then report it as never sent.
        let mut offered = 0;
        let resp = loop {
            let stream = self.forward_stream(leader, node)?;
            match stream.call(command.clone()).await? {
                Offer::Answered(resp) => break resp,
                Offer::Refused if offered == 0 => offered += 1,
                Offer::Refused => return Err(Error::NoLeader),
            }
        };
        if !resp.message.is_empty() {
            return Err(Error::from_code_message(resp.code, &resp.message));
        }
        CommandResponse::decode(&resp.response)
    }

    /// The open forward stream to `leader`, or a new one (when there is
    /// none, it broke, or the member's URL changed).
    fn forward_stream(&self, leader: u64, node: Option<&Member>) -> Result<std::sync::Arc<ForwardStream>> {
        let url = node.and_then(|n| n.peer_urls.first().cloned());
        let mut streams = self.forward_streams.lock();
        if let Some(s) = streams.get(&leader) {
            if !s.is_closed() && url.as_ref().is_none_or(|u| *u == s.url) {
                return Ok(s.clone());
            }
        }
        let (url, client) = self.client_in(&self.service_clients, leader, node)?;
        let s = ForwardStream::open(client, url);
        streams.insert(leader, s.clone());
        Ok(s)
    }

    /// Asks the leader to renew a lease (`renew`) or report its remaining
    /// TTL. Returns the TTL in seconds (0 / -1 for an unknown lease, as etcd).
    ///
    /// # Errors
    /// Unavailable if the leader cannot be reached.
    pub async fn lease(&self, leader: u64, node: Option<&Member>, id: i64, renew: bool) -> Result<i64> {
        let mut c = self.service_client(leader, node)?;
        let resp = c.lease(LeaseRequest { id, renew }).await.map_err(|_| Error::LeaderChanged)?.into_inner();
        if !resp.message.is_empty() {
            return Err(Error::from_code_message(resp.code, &resp.message));
        }
        Ok(resp.ttl)
    }

    /// Sends member `id` an entry-less AppendEntries (`payload`, encoded)
    /// that only carries the leader's vote, and returns its answer: how a
    /// leader confirms its term for reads (see [`super::read_index`]). It
    /// travels on the client-request connections, beside the reads that
    /// wait for it.
    ///
    /// # Errors
    /// Unavailable if the member does not answer within `timeout`;
    /// Internal if it answers garbage.
    pub async fn confirm_vote(&self, id: u64, node: Option<&Member>, payload: Vec<u8>, timeout: std::time::Duration) -> Result<AppendEntriesResponse<TypeConfig>> {
        let mut c = self.service_client(id, node)?;
        let mut req = Request::new(RaftMessage { payload });
        req.set_timeout(timeout);
        let resp = c.append_entries(req).await.map_err(|_| Error::NoLeader)?.into_inner();
        decode(&resp.payload).map_err(Error::internal)
    }

    /// Asks the leader for a read index.
    ///
    /// # Errors
    /// Unavailable if the leader cannot be reached or is no longer leader.
    pub async fn read_index(&self, leader: u64, node: Option<&Member>) -> Result<u64> {
        let mut c = self.service_client(leader, node)?;
        let resp = c.read_index(ReadIndexRequest {}).await.map_err(|_| Error::LeaderChanged)?.into_inner();
        if !resp.message.is_empty() {
            return Err(Error::from_code_message(resp.code, &resp.message));
        }
        Ok(resp.index)
    }
}

/// One long-lived `ForwardStream` call to a leader carrying this member's
/// forwarded writes, each tagged with an id that the leader's answer echoes
/// (answers arrive in completion order). A unary call per write paid for a
/// new HTTP/2 stream and a hop through tonic's buffer task each time; etcd
/// likewise forwards proposals over its standing peer stream.
///
/// When the stream fails, every write waiting on it fails: with `no leader`
/// if the connection was never made (nothing was sent, so the caller may
/// send again elsewhere) and `leader changed` otherwise (it may have been
/// applied). A write abandoned while waiting (the request timeout) closes the
/// stream for new writes, so that a stuck stream is replaced by the next
/// write; a connection that went silent is dropped by its PINGs (see
/// `PEER_PING_TIMEOUT`), else the new stream would share it.
pub struct ForwardStream {
    url: String,
    /// Requests not yet written to the stream. Never full: every request in
    /// it holds a permit of `window`.
    tx: tokio::sync::mpsc::Sender<ForwardRequest>,
    /// Room for writes in flight (queued or awaiting their answers); a write
    /// waits here when [`FORWARD_WINDOW`] are already out.
    window: std::sync::Arc<tokio::sync::Semaphore>,
    pending: std::sync::Arc<Mutex<ForwardPending>>,
    next_id: std::sync::atomic::AtomicU64,
}

/// Most forwarded writes one member keeps in flight on one
/// [`ForwardStream`] to a leader, and most the leader works on at once for
/// one stream. Further writes wait for room (backpressure reaches the
/// clients), so neither side's queues grow without bound when the other
/// side is slow. It bounds each stream, not the member: a write given up by
/// its caller frees its room at once although the leader may still apply
/// it, and an abandoned stream (see [`ForwardStream`]) drains while the
/// next one fills, so under heavy cancellation a leader can hold a few
/// windows' worth from one follower, each bounded by the request timeout.
pub const FORWARD_WINDOW: usize = 1024;

/// The waiters of a [`ForwardStream`], by request id, and how it ended.
#[derive(Default)]
struct ForwardPending {
    waiters: HashMap<u64, tokio::sync::oneshot::Sender<ForwardResponse>>,
    /// Set once the stream ended (or was given up): the error for waiters.
    closed: Option<Error>,
}

impl ForwardPending {
    fn close(&mut self, err: Error) {
        if self.closed.is_none() {
            self.closed = Some(err);
        }
        // Dropping the senders wakes every waiter with the error above.
        self.waiters.clear();
    }
}

impl ForwardStream {
    /// Starts the call on `client` (whose peer URL is `url`); the task that
    /// reads the answers runs until the leader ends the stream.
    fn open(mut client: RaftTransportClient<Channel>, url: String) -> std::sync::Arc<Self> {
        let (tx, rx) = tokio::sync::mpsc::channel(FORWARD_WINDOW);
        let pending: std::sync::Arc<Mutex<ForwardPending>> = Default::default();
        let reader = pending.clone();
        tokio::spawn(async move {
            let input = tokio_stream::wrappers::ReceiverStream::new(rx);
            let mut answers = match client.forward_stream(input).await {
                Ok(r) => r.into_inner(),
                Err(st) => {
                    reader.lock().close(if never_connected(&st) { Error::NoLeader } else { Error::LeaderChanged });
                    return;
                }
            };
            while let Some(Ok(resp)) = answers.next().await {
                if let Some(w) = reader.lock().waiters.remove(&resp.id) {
                    let _ = w.send(resp);
                }
            }
            reader.lock().close(Error::LeaderChanged);
        });
        let window = std::sync::Arc::new(tokio::sync::Semaphore::new(FORWARD_WINDOW));
        std::sync::Arc::new(ForwardStream { url, tx, window, pending, next_id: std::sync::atomic::AtomicU64::new(1) })
    }

    fn is_closed(&self) -> bool {
        self.pending.lock().closed.is_some()
    }

    /// Sends one serialised command and waits for the leader's answer.
    async fn call(&self, command: Vec<u8>) -> Result<Offer> {
        // Held until the answer (or the stream's end); waiting here sends
        // nothing, so giving up while waiting is harmless.
        let Ok(_room) = self.window.acquire().await else { return Ok(Offer::Refused) };
        let id = self.next_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (done, answer) = tokio::sync::oneshot::channel();
        {
            let mut p = self.pending.lock();
            if p.closed.is_some() {
                return Ok(Offer::Refused);
            }
            p.waiters.insert(id, done);
        }
        if self.tx.try_send(ForwardRequest { command, id }).is_err() {
            // The request never left this member.
            self.pending.lock().waiters.remove(&id);
            return Err(Error::NoLeader);
        }
        /// Closes the stream if the write is abandoned before its answer.
        struct Abandon<'a>(&'a ForwardStream, bool);
        impl Drop for Abandon<'_> {
            fn drop(&mut self) {
                if !self.1 {
                    let mut p = self.0.pending.lock();
                    if p.closed.is_none() {
                        p.closed = Some(Error::LeaderChanged);
                    }
                }
            }
        }
        let mut guard = Abandon(self, false);
        let out = answer.await;
        guard.1 = true;
        match out {
            Ok(resp) => Ok(Offer::Answered(resp)),
            Err(_) => Err(self.pending.lock().closed.clone().unwrap_or(Error::LeaderChanged)),
        }
    }
}

/// What became of a write offered to a [`ForwardStream`].
enum Offer {
    /// The leader's answer.
    Answered(ForwardResponse),
    /// The stream had already ended (or was given up): nothing was sent.
    Refused,
}

/// Whether a failed call never reached the peer: the TCP connection could
/// not be made (refused, or the connect attempt failed or timed out).
/// Anything else (a reset mid-call, a timeout) may have been processed.
fn never_connected(st: &Status) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(st);
    while let Some(e) = cur {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::ConnectionRefused {
                return true;
            }
        }
        if e.to_string().contains("tcp connect error") {
            return true;
        }
        cur = e.source();
    }
    false
}

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

/// Accounts one replication message of `bytes` from `leader`: the peer
/// receive counter, and the leader contact that
/// [`RaftNode::effective_leader`] reads.
fn received_from(node: &RaftNode, leader: u64, bytes: usize) {
    crate::metrics::metrics().peer_received_bytes.with_label_values(&[crate::metrics::id_label(leader).as_str()]).inc_by(bytes as u64);
    node.heard_from_leader(leader);
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

/// Boxed future alias used by the services.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

#[cfg(test)]
mod tests {
    use super::*;

    /// A forward to a member that is not listening is known never to have
    /// been delivered (so it may be sent again to the next leader).
    #[tokio::test]
    async fn forward_to_a_dead_peer_is_never_connected() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).unwrap_or(1);
        let peers = PeerClients::new(HashMap::from([(7, format!("http://127.0.0.1:{port}"))]), None);
        let cmd = Command::Compact(proto::etcdserverpb::CompactionRequest { revision: 1, physical: false });
        assert_eq!(peers.forward(7, None, &cmd).await, Err(Error::NoLeader));
    }
}
