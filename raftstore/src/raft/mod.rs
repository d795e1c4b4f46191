//! Everything that touches openraft lives under this module, so that an
//! openraft version change touches one place.
//!
//! - [`log_store`]: the Raft log and vote on RocksDB (`raft_log`,
//!   `raft_state`); appends are fsynced before openraft is told they are
//!   durable.
//! - [`state_machine`]: applies committed commands to the MVCC store and
//!   builds/installs snapshots from RocksDB checkpoints.
//! - [`network`]: the peer transport (tonic, `proto/raftpb.proto`).
//! - [`RaftNode`]: the small API the gRPC services use.

pub mod log_store;
pub mod network;
pub mod state_machine;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use openraft::async_runtime::watch::WatchReceiver;
use serde::{Deserialize, Serialize};

use crate::command::{Command, CommandResponse};
use crate::error::{Error, Result};

/// A member as Raft knows it: etcd's member name and URLs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    /// `--name`.
    pub name: String,
    /// `--initial-advertise-peer-urls`.
    pub peer_urls: Vec<String>,
    /// `--advertise-client-urls`.
    pub client_urls: Vec<String>,
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Command::Put(_) => "Put",
            Command::DeleteRange(_) => "DeleteRange",
            Command::Txn(_) => "Txn",
            Command::Compact(_) => "Compact",
            Command::LeaseGrant(_) => "LeaseGrant",
            Command::LeaseRevoke(_) => "LeaseRevoke",
            Command::PublishMember(_) => "PublishMember",
        };
        f.write_str(name)
    }
}

openraft::declare_raft_types!(
    /// raftstore's openraft type configuration.
    pub TypeConfig:
        D = Command,
        R = CommandResponse,
        NodeId = u64,
        Node = Member,
);

/// The openraft handle.
pub type Raft = openraft::Raft<TypeConfig, state_machine::StateMachine>;
/// A log id.
pub type LogId = openraft::type_config::alias::LogIdOf<TypeConfig>;
/// Membership as stored in the log and the state machine.
pub type StoredMembership = openraft::type_config::alias::StoredMembershipOf<TypeConfig>;
/// A log entry.
pub type Entry = openraft::type_config::alias::EntryOf<TypeConfig>;
/// A vote.
pub type Vote = openraft::type_config::alias::VoteOf<TypeConfig>;
/// Snapshot metadata.
pub type SnapshotMeta = openraft::SnapshotMeta<openraft::type_config::alias::CommittedLeaderIdOf<TypeConfig>, u64, Member>;
/// A snapshot: metadata plus the checkpoint directory.
pub type Snapshot = openraft::Snapshot<openraft::type_config::alias::CommittedLeaderIdOf<TypeConfig>, u64, Member, state_machine::SnapshotDir>;

/// postcard encoding of openraft's serde types (entries, votes, log ids).
pub(crate) fn encode<T: Serialize>(v: &T) -> std::io::Result<Vec<u8>> {
    postcard::to_allocvec(v).map_err(std::io::Error::other)
}

/// Inverse of [`encode`]; malformed bytes are an I/O error, never a panic.
pub(crate) fn decode<T: for<'de> Deserialize<'de>>(b: &[u8]) -> std::io::Result<T> {
    postcard::from_bytes(b).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// Raft timing, from etcd's `--heartbeat-interval` and `--election-timeout`.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// Heartbeat interval.
    pub heartbeat: Duration,
    /// Election timeout (the lower bound; the upper bound is twice it).
    pub election: Duration,
}

/// Creates the openraft member with etcd-style timing: heartbeat interval,
/// election timeout in `[election, 2 * election)`, and a snapshot every
/// `snapshot_count` applied entries (etcd `--snapshot-count`).
///
/// # Errors
/// [`Error::InvalidArgument`] for inconsistent timing; [`Error::Internal`]
/// if openraft cannot recover its state from storage.
pub async fn create(
    id: u64,
    cluster_name: &str,
    timing: Timing,
    snapshot_count: u64,
    network: network::NetworkFactory,
    log: log_store::LogStore,
    sm: state_machine::StateMachine,
) -> Result<Raft> {
    let heartbeat = timing.heartbeat.as_millis() as u64;
    let election = timing.election.as_millis() as u64;
    let cfg = openraft::Config {
        cluster_name: cluster_name.to_string(),
        heartbeat_interval: heartbeat.max(10),
        election_timeout_min: election.max(heartbeat * 3),
        election_timeout_max: (election * 2).max(heartbeat * 6),
        snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(snapshot_count),
        max_in_snapshot_log_to_keep: 1000,
        ..Default::default()
    };
    let cfg = Arc::new(cfg.validate().map_err(|e| Error::InvalidArgument(e.to_string()))?);
    Raft::new(id, cfg, network, log, sm).await.map_err(Error::internal)
}

/// The Raft member plus what the services need to serve requests.
#[derive(Clone)]
pub struct RaftNode {
    /// openraft handle.
    pub raft: Raft,
    /// This member's ID.
    pub id: u64,
    /// Client request timeout (etcd: about 5 s plus election time).
    pub request_timeout: Duration,
    /// Peer clients, for forwarding to the leader.
    pub peers: Arc<network::PeerClients>,
}

impl RaftNode {
    /// Proposes a command and waits until it is applied locally, returning
    /// the state machine's reply. On a follower the command is forwarded to
    /// the leader.
    ///
    /// # Errors
    /// etcd's `no leader`, `leader changed`, `request timed out` or `server
    /// stopped` (Unavailable), or the command's own apply-time error.
    pub async fn propose(&self, cmd: Command) -> Result<CommandResponse> {
        let fut = self.propose_inner(cmd);
        match tokio::time::timeout(self.request_timeout, fut).await {
            Ok(r) => r,
            Err(_) => Err(Error::Timeout),
        }
    }

    async fn propose_inner(&self, cmd: Command) -> Result<CommandResponse> {
        use openraft::error::{ClientWriteError, RaftError};
        loop {
            // A follower that knows the leader forwards at once, skipping a
            // round trip through its own Raft core just to learn that.
            let remote_leader = {
                let m = self.raft.metrics();
                let m = m.borrow_watched();
                m.current_leader.filter(|l| *l != self.id).map(|l| (l, m.membership_config.membership().get_node(&l).cloned()))
            };
            if let Some((leader, node)) = remote_leader {
                return self.peers.forward(leader, node.as_ref(), &cmd).await;
            }
            match self.raft.client_write(cmd.clone()).await {
                Ok(resp) => {
                    return match resp.data {
                        CommandResponse::Error(e) => Err(e),
                        other => Ok(other),
                    };
                }
                Err(RaftError::APIError(ClientWriteError::ForwardToLeader(fwd))) => {
                    let Some(leader) = fwd.leader_id else {
                        // No leader known yet: wait for an election.
                        self.wait_for_leader().await?;
                        continue;
                    };
                    return self.peers.forward(leader, fwd.leader_node.as_ref(), &cmd).await;
                }
                Err(RaftError::APIError(ClientWriteError::ChangeMembershipError(e))) => {
                    return Err(Error::InvalidArgument(e.to_string()))
                }
                Err(RaftError::Fatal(_)) => return Err(Error::Stopped),
                Err(e) => return Err(Error::internal(e)),
            }
        }
    }

    /// Renews a lease (`renew`) or reads its remaining TTL on the leader,
    /// locally or through the peer transport.
    ///
    /// # Errors
    /// Unavailable errors when no leader can answer.
    pub async fn leader_lease(&self, id: i64, renew: bool) -> Result<i64> {
        let leader = self.wait_for_leader().await?;
        let node = self.members().get(&leader).map(|(m, _)| m.clone());
        self.peers.lease(leader, node.as_ref(), id, renew).await
    }

    /// Forms a new cluster from `members` unless this member's storage
    /// already belongs to one (`--initial-cluster-state new`).
    ///
    /// # Errors
    /// [`Error::Internal`] if openraft rejects the initial membership.
    pub async fn bootstrap(&self, members: BTreeMap<u64, Member>) -> Result<()> {
        use openraft::error::{InitializeError, RaftError};
        if self.raft.is_initialized().await.map_err(Error::internal)? {
            return Ok(());
        }
        match self.raft.initialize(members).await {
            Ok(()) => Ok(()),
            // Every member of a new cluster initializes with the same
            // membership; one that has already heard from a member that
            // went first (a vote or log) is joining that cluster: fine.
            Err(RaftError::APIError(InitializeError::NotAllowed(e))) => {
                tracing::info!("cluster already forming: {e}");
                Ok(())
            }
            Err(e) => Err(Error::internal(e)),
        }
    }

    /// Keeps the log store's inline-sync switch (see
    /// [`log_store::LogStore::inline_sync_switch`]) off while this member
    /// leads other voters, and on otherwise. Runs until Raft shuts down.
    pub async fn drive_inline_sync(self, switch: Arc<std::sync::atomic::AtomicBool>) {
        let mut rx = self.raft.metrics();
        loop {
            let on = {
                let m = rx.borrow_watched();
                let leads = m.current_leader == Some(self.id);
                !(leads && m.membership_config.membership().voter_ids().any(|v| v != self.id))
            };
            switch.store(on, std::sync::atomic::Ordering::Relaxed);
            if rx.changed().await.is_err() {
                return;
            }
        }
    }

    /// Waits until a leader is known.
    ///
    /// # Errors
    /// [`Error::NoLeader`] after the request timeout.
    pub async fn wait_for_leader(&self) -> Result<u64> {
        let mut rx = self.raft.metrics();
        let wait = async {
            loop {
                if let Some(l) = rx.borrow_watched().current_leader {
                    return Ok(l);
                }
                if rx.changed().await.is_err() {
                    return Err(Error::Stopped);
                }
            }
        };
        match tokio::time::timeout(self.request_timeout, wait).await {
            Ok(r) => r,
            Err(_) => Err(Error::NoLeader),
        }
    }

    /// Makes the next local read linearizable: confirms leadership with a
    /// quorum (ReadIndex) and waits until the state machine has applied the
    /// read index. On a follower, asks the leader for its read index.
    ///
    /// # Errors
    /// Unavailable errors as for [`RaftNode::propose`].
    pub async fn linearizable_read(&self) -> Result<()> {
        use openraft::error::{LinearizableReadError, RaftError};
        use openraft::ReadPolicy;
        let fut = async {
            loop {
                match self.raft.ensure_linearizable(ReadPolicy::ReadIndex).await {
                    Ok(_) => return Ok(()),
                    Err(RaftError::APIError(LinearizableReadError::ForwardToLeader(fwd))) => {
                        let Some(leader) = fwd.leader_id else {
                            self.wait_for_leader().await?;
                            continue;
                        };
                        let index = self.peers.read_index(leader, fwd.leader_node.as_ref()).await?;
                        return self.wait_applied(index).await;
                    }
                    Err(RaftError::APIError(_)) => return Err(Error::NoLeader),
                    Err(RaftError::Fatal(_)) => return Err(Error::Stopped),
                }
            }
        };
        match tokio::time::timeout(self.request_timeout, fut).await {
            Ok(r) => r,
            Err(_) => Err(Error::Timeout),
        }
    }

    /// Leader side of a follower's read: confirm leadership, return the
    /// index the follower must apply before reading.
    ///
    /// # Errors
    /// [`Error::NoLeader`] if this member is not the leader.
    pub async fn read_index(&self) -> Result<u64> {
        use openraft::ReadPolicy;
        match self.raft.ensure_linearizable(ReadPolicy::ReadIndex).await {
            Ok(read) => Ok(read.log_id().index()),
            Err(_) => Err(Error::NoLeader),
        }
    }

    /// Waits until the local state machine has applied log `index`.
    ///
    /// # Errors
    /// [`Error::Stopped`] if Raft shuts down.
    pub async fn wait_applied(&self, index: u64) -> Result<()> {
        let mut rx = self.raft.metrics();
        loop {
            let applied = rx.borrow_watched().last_applied.as_ref().map(|l| l.index()).unwrap_or(0);
            if applied >= index {
                return Ok(());
            }
            if rx.changed().await.is_err() {
                return Err(Error::Stopped);
            }
        }
    }

    /// (leader ID, current term, last log index, last applied index).
    pub fn status(&self) -> (Option<u64>, u64, u64, u64) {
        let m = self.raft.metrics().borrow_watched().clone();
        (
            m.current_leader,
            m.current_term,
            m.last_log_index.unwrap_or(0),
            m.last_applied.as_ref().map(|l| l.index()).unwrap_or(0),
        )
    }

    /// The current term.
    pub fn term(&self) -> u64 {
        self.raft.metrics().borrow_watched().current_term
    }

    /// Whether this member is the leader.
    pub fn is_leader(&self) -> bool {
        self.raft.metrics().borrow_watched().current_leader == Some(self.id)
    }

    /// Members from the current membership: ID → (member, is_learner).
    pub fn members(&self) -> BTreeMap<u64, (Member, bool)> {
        let m = self.raft.metrics().borrow_watched().clone();
        let mem = m.membership_config.membership();
        let voters: std::collections::BTreeSet<u64> = mem.voter_ids().collect();
        mem.nodes().map(|(id, n)| (*id, (n.clone(), !voters.contains(id)))).collect()
    }
}
