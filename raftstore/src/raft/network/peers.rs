//! The gRPC clients to the other members, created lazily and reused, and
//! the requests this member sends the leader on behalf of its clients.

use std::collections::HashMap;

use openraft::raft::AppendEntriesResponse;
use parking_lot::Mutex;
use proto::raftpb::raft_transport_client::RaftTransportClient;
use proto::raftpb::{LeaseRequest, MemberChangeRequest, MembersRequest, RaftMessage, ReadIndexRequest};
use tonic::transport::{Channel, Endpoint};
use tonic::Request;

use super::forward::{ForwardStream, Offer};
use crate::command::{Command, CommandResponse};
use crate::error::{Error, Result};
use crate::raft::{decode, encode, Member, MemberChange, TypeConfig};

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
    tls: Option<PeerTls>,
}

/// How a member dials `https://` peer URLs.
#[derive(Clone)]
pub enum PeerTls {
    /// Verify the other members' certificates against a CA
    /// (`--peer-trusted-ca-file`) and show ours.
    Verified(tonic::transport::ClientTlsConfig),
    /// `--peer-auto-tls`: the other members show self-signed certificates
    /// nobody can verify, so none is verified (etcd skips verification in
    /// this mode too); ours is shown. See [`crate::tls`].
    SelfSigned(std::sync::Arc<rustls::ClientConfig>),
}

/// How often a peer connection is pinged (HTTP/2 PING), and how long the
/// answer may take before the connection is dropped. A connection that went
/// silent without closing (the peer's host vanished, a half-open TCP
/// connection) otherwise stays in use for as long as TCP keeps it: every
/// new stream on it, a forwarded write's too, would wait out its timeout.
const PEER_PING_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);
const PEER_PING_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// A lazily connecting client to a peer URL.
fn dial(url: &str, tls: Option<&PeerTls>) -> Result<RaftTransportClient<Channel>> {
    let endpoint = |url: String| -> Result<Endpoint> {
        Ok(Endpoint::from_shared(url)
            .map_err(Error::internal)?
            .connect_timeout(std::time::Duration::from_secs(1))
            .http2_keep_alive_interval(PEER_PING_INTERVAL)
            .keep_alive_timeout(PEER_PING_TIMEOUT)
            .keep_alive_while_idle(true)
            .tcp_nodelay(true))
    };
    let channel = match url.strip_prefix("https://") {
        None => endpoint(url.to_string())?.connect_lazy(),
        Some(rest) => match tls {
            Some(PeerTls::Verified(tls)) => endpoint(url.to_string())?.tls_config(tls.clone()).map_err(Error::internal)?.connect_lazy(),
            // tonic's TLS always verifies: the channel gets the URL as
            // http and the connector adds the TLS.
            Some(PeerTls::SelfSigned(cfg)) => endpoint(format!("http://{rest}"))?.connect_with_connector_lazy(crate::tls::SelfSignedConnector::new(cfg.clone())),
            None => return Err(Error::InvalidArgument(format!("{url}: https peer URLs need --peer-trusted-ca-file"))),
        },
    };
    Ok(RaftTransportClient::new(channel).max_decoding_message_size(usize::MAX).max_encoding_message_size(usize::MAX))
}

impl PeerClients {
    /// Clients for a cluster whose initial members have these peer URLs.
    pub fn new(initial: HashMap<u64, String>, tls: Option<PeerTls>) -> Self {
        PeerClients {
            clients: Mutex::new(HashMap::new()),
            service_clients: Mutex::new(HashMap::new()),
            forward_streams: Mutex::new(HashMap::new()),
            initial,
            removed: tokio::sync::watch::Sender::new(false),
            tls,
        }
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
    pub(super) fn client(&self, id: u64, node: Option<&Member>) -> Result<RaftTransportClient<Channel>> {
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
    pub async fn members_at(peer_url: &str, tls: Option<PeerTls>) -> Result<(u64, std::collections::BTreeMap<u64, (Member, bool)>)> {
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
