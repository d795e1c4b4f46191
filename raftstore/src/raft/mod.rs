//! Everything that touches openraft lives under this module, so that an
//! openraft version change touches one place.
//!
//! - [`log_store`]: the Raft log and vote on RocksDB (`raft_log`,
//!   `raft_state`); appends are fsynced before openraft is told they are
//!   durable.
//! - [`state_machine`]: applies committed commands to the MVCC store and
//!   builds/installs snapshots from RocksDB checkpoints.
//! - [`network`]: the peer transport (tonic, `proto/raftpb.proto`).
//! - [`read_index`]: the leader's confirmation of its term for
//!   linearizable reads and lease queries.
//! - [`RaftNode`]: the small API the gRPC services use.

pub mod log_store;
pub mod network;
pub mod read_index;
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

/// Maps an openraft write error of a membership change to etcd's errors.
fn write_err(e: openraft::error::RaftError<TypeConfig, openraft::error::ClientWriteError<TypeConfig>>) -> Error {
    use openraft::error::{ChangeMembershipError, ClientWriteError, RaftError};
    match e {
        // Retried by the caller: another leader, a change still in progress,
        // or a new leader that has not committed in its term yet.
        RaftError::APIError(ClientWriteError::ForwardToLeader(_))
        | RaftError::APIError(ClientWriteError::ChangeMembershipError(ChangeMembershipError::InProgress(_)))
        | RaftError::APIError(ClientWriteError::ChangeMembershipError(ChangeMembershipError::UncommittedLeaderLog(_))) => Error::NotLeader,
        RaftError::APIError(ClientWriteError::LogEntryDiscarded(_)) => Error::LeaderChanged,
        RaftError::APIError(ClientWriteError::ChangeMembershipError(ChangeMembershipError::LearnerNotFound(_))) => Error::MemberNotFound,
        RaftError::APIError(ClientWriteError::ChangeMembershipError(e)) => Error::InvalidArgument(e.to_string()),
        RaftError::Fatal(_) => Error::Stopped,
        RaftError::APIError(e) => Error::internal(e),
    }
}

/// Raft timing, from etcd's `--heartbeat-interval` and `--election-timeout`.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// Heartbeat interval.
    pub heartbeat: Duration,
    /// Election timeout: a follower that hears nothing from the leader for
    /// between 1.3 and 1.7 of it (plus one openraft tick) campaigns; see
    /// [`OpenraftTiming`].
    pub election: Duration,
}

/// openraft's three timing settings, in ms, derived from etcd's election
/// timeout by [`OpenraftTiming::from_etcd`].
///
/// openraft times an election differently from etcd. etcd campaigns after a
/// random `[ET, 2 ET)` without a leader message and, with CheckQuorum,
/// refuses votes for `ET` after one. openraft refuses votes for a lease of
/// `election_timeout_max` after a leader message and campaigns only once
/// that lease *plus* a random `[election_timeout_min,
/// election_timeout_max)` has passed. Mapping ET to `[ET, 2 ET)` directly
/// put the first campaign 3 to 4 ET after the leader died (3.1 to 3.5 s
/// measured with etcd's default ET of 1 s). The values here bring it to
/// 1.3 to 1.7 ET (1.3 to 1.6 s measured from kill -9 of the leader to the
/// next acknowledged put), inside etcd's own `[ET, 2 ET)`
/// bound on the worst case.
///
/// The floor on `election_timeout_min` is the heartbeat deadline:
/// openraft's `heartbeat_interval` is both its heartbeat period and the
/// deadline of every heartbeat round trip, and must be below
/// `election_timeout_min`. A leader whose heartbeats are never answered in
/// time loses its quorum lease and refuses writes, so the deadline must
/// exceed the peer round trip; 0.44 ET allows a 200 ms round trip at the
/// 500 ms ET the chaos harness uses with its 100 ms-per-direction delay
/// fault. etcd's own heartbeat rate is kept by [`send_heartbeats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenraftTiming {
    /// Heartbeat round-trip deadline (openraft `heartbeat_interval`).
    pub heartbeat_deadline: u64,
    /// openraft `election_timeout_min`.
    pub election_min: u64,
    /// openraft `election_timeout_max`, which openraft also uses as the
    /// leader lease.
    pub election_max: u64,
}

impl OpenraftTiming {
    /// The settings for an etcd election timeout of `election` ms and a
    /// heartbeat interval of `heartbeat` ms: a lease of 0.85 ET, a random
    /// part in `[0.45 ET, 0.85 ET)` and a heartbeat deadline of 0.44 ET. An
    /// election timeout below five heartbeats (which the binary's flag
    /// check refuses) is raised to five.
    pub fn from_etcd(heartbeat: u64, election: u64) -> Self {
        let et = election.max(heartbeat.max(10) * 5);
        let election_min = et * 9 / 20;
        let heartbeat_deadline = (et * 11 / 25).min(election_min - 1);
        OpenraftTiming { heartbeat_deadline, election_min, election_max: et * 17 / 20 }
    }
}

/// Creates the openraft member with etcd-style timing (see
/// [`OpenraftTiming`]), and a snapshot every `snapshot_count` applied
/// entries (etcd `--snapshot-count`), keeping `catchup_entries` log entries
/// behind a snapshot (etcd `--experimental-snapshot-catchup-entries`);
/// older entries are purged. Spawns the task that sends heartbeats at
/// etcd's rate on the calling runtime.
///
/// # Errors
/// [`Error::InvalidArgument`] for inconsistent timing; [`Error::Internal`]
/// if openraft cannot recover its state from storage.
#[allow(clippy::too_many_arguments)]
pub async fn create(
    id: u64,
    cluster_name: &str,
    timing: Timing,
    snapshot_count: u64,
    catchup_entries: u64,
    network: network::NetworkFactory,
    log: log_store::LogStore,
    sm: state_machine::StateMachine,
) -> Result<Raft> {
    let heartbeat = timing.heartbeat.as_millis().max(10) as u64;
    let t = OpenraftTiming::from_etcd(heartbeat, timing.election.as_millis() as u64);
    let cfg = openraft::Config {
        cluster_name: cluster_name.to_string(),
        heartbeat_interval: t.heartbeat_deadline,
        election_timeout_min: t.election_min,
        election_timeout_max: t.election_max,
        snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(snapshot_count),
        max_in_snapshot_log_to_keep: catchup_entries,
        // Pre-Vote (etcd 3.5's default) stays off: with openraft
        // 0.10.0-alpha.37's Pre-Vote a chaos pause-follower phase once left
        // the cluster unhealthy for 30 s (not reproduced in five more
        // rounds). The PreVote RPC is served, so turning it on is this line.
        ..Default::default()
    };
    let cfg = Arc::new(cfg.validate().map_err(|e| Error::InvalidArgument(e.to_string()))?);
    let raft = Raft::new(id, cfg, network, log, sm).await.map_err(Error::internal)?;
    tokio::spawn(send_heartbeats(raft.clone(), id, Duration::from_millis(heartbeat)));
    Ok(raft)
}

/// Asks openraft for a heartbeat every `every` (etcd's
/// `--heartbeat-interval`) while this member leads, so that followers hear
/// from the leader (and learn its commit index) at etcd's rate although
/// openraft's own period is longer (see [`OpenraftTiming`]). openraft
/// sends at most one heartbeat at a time to each follower, so with a slow
/// link the rate drops to one per round trip instead of piling up.
async fn send_heartbeats(raft: Raft, id: u64, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if raft.metrics().borrow_watched().current_leader != Some(id) {
            continue;
        }
        if raft.trigger().heartbeat().await.is_err() {
            return;
        }
    }
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
    /// Serialises membership changes on the leader (etcd applies one
    /// configuration change at a time).
    pub membership_lock: Arc<tokio::sync::Mutex<()>>,
    /// etcd cluster ID.
    pub cluster_id: u64,
    /// Members removed from the cluster since this process started; their
    /// vote requests are refused with [`network::REMOVED_MESSAGE`].
    pub removed_ids: Arc<parking_lot::Mutex<std::collections::BTreeSet<u64>>>,
    /// etcd's `--election-timeout`: how long a member goes without hearing
    /// from a quorum (a leader) or from the leader (a follower) before it
    /// reports no leader.
    pub election_timeout: Duration,
    /// When this member last heard from a leader over the replication
    /// transport; see [`RaftNode::effective_leader`].
    pub leader_contact: Arc<parking_lot::Mutex<Option<(u64, std::time::Instant)>>>,
    /// Reads waiting for a confirmation round (see [`read_index`]).
    pub rounds: Arc<read_index::Rounds>,
}

/// A membership change requested through etcd's Cluster service. The ID of
/// an added member is chosen by the member that received the request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum MemberChange {
    /// etcd `MemberAdd`: a new member with these peer URLs, as a learner or
    /// a voter.
    Add {
        /// The new member's ID.
        id: u64,
        /// Its peer URLs.
        peer_urls: Vec<String>,
        /// Added as a non-voting learner.
        is_learner: bool,
    },
    /// etcd `MemberPromote`: a learner becomes a voter.
    Promote {
        /// The learner's ID.
        id: u64,
    },
    /// etcd `MemberRemove`.
    Remove {
        /// The member's ID.
        id: u64,
    },
    /// etcd `MemberUpdate`: new peer URLs for a member.
    Update {
        /// The member's ID.
        id: u64,
        /// Its new peer URLs.
        peer_urls: Vec<String>,
    },
}

/// Pause before asking again when a read or lease query met a dead or
/// deposed leader.
const LEADER_RETRY: Duration = Duration::from_millis(50);

/// Pause before a write that could not reach the leader at all (so it
/// never left) is sent to the same leader again, when no other leader
/// became known meanwhile.
const UNREACHABLE_RETRY: Duration = Duration::from_millis(100);

/// Whether an idempotent query to the leader (read index, lease TTL or
/// renewal) failed only because leadership is moving, so that asking again
/// once a leader is known is safe.
fn retry_on_new_leader(e: &Error) -> bool {
    matches!(e, Error::NoLeader | Error::NotLeader | Error::LeaderChanged)
}

/// A learner is "in sync" when it has replicated at least this share of the
/// leader's log (etcd's `readyPercent`).
const LEARNER_READY_PERCENT: f64 = 0.9;

/// A member counts as started when the leader heard from it within this
/// time (etcd's `HealthInterval`).
const ACTIVE_WITHIN: Duration = Duration::from_secs(5);

impl RaftNode {
    /// Proposes a command and waits until it is applied locally, returning
    /// the state machine's reply. On a follower the command is forwarded to
    /// the leader.
    ///
    /// # Errors
    /// etcd's `no leader`, `leader changed`, `request timed out` or `server
    /// stopped` (Unavailable), or the command's own apply-time error.
    pub async fn propose(&self, cmd: Command) -> Result<CommandResponse> {
        let m = crate::metrics::metrics();
        m.proposals_pending.inc();
        let fut = self.propose_inner(cmd);
        let out = match tokio::time::timeout(self.request_timeout, fut).await {
            Ok(r) => r,
            Err(_) => Err(Error::Timeout),
        };
        m.proposals_pending.dec();
        if matches!(out, Err(Error::NoLeader | Error::LeaderChanged | Error::Timeout | Error::Stopped)) {
            m.proposals_failed.inc();
        }
        out
    }

    /// Proposes `cmd` on this member only if it is the leader, never
    /// forwarding it: for what only a leader decides on its own (revoking
    /// expired leases). A deposed leader that has not heard of the new term
    /// yet appends the entry in its old term, where it cannot commit.
    ///
    /// # Errors
    /// [`Error::NotLeader`] when this member is not the leader;
    /// [`Error::LeaderChanged`] when the entry was overwritten; the
    /// command's own error; [`Error::Timeout`].
    pub async fn propose_as_leader(&self, cmd: Command) -> Result<CommandResponse> {
        use openraft::error::{ClientWriteError, RaftError};
        if !self.is_leader() {
            return Err(Error::NotLeader);
        }
        match tokio::time::timeout(self.request_timeout, self.raft.client_write(cmd)).await {
            Err(_) => Err(Error::Timeout),
            Ok(Ok(resp)) => match resp.data {
                CommandResponse::Error(e) => Err(e),
                other => Ok(other),
            },
            Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(_)))) => Err(Error::NotLeader),
            Ok(Err(RaftError::APIError(ClientWriteError::LogEntryDiscarded(_)))) => Err(Error::LeaderChanged),
            Ok(Err(RaftError::Fatal(_))) => Err(Error::Stopped),
            Ok(Err(e)) => Err(Error::internal(e)),
        }
    }

    async fn propose_inner(&self, cmd: Command) -> Result<CommandResponse> {
        use openraft::error::{ClientWriteError, RaftError};
        loop {
            // A follower that knows the leader forwards at once, skipping a
            // round trip through its own Raft core just to learn that.
            let leader = self.raft.metrics().borrow_watched().current_leader;
            let remote_leader = leader.filter(|l| *l != self.id).map(|l| (l, self.member(l)));
            let forwarded = match remote_leader {
                Some((leader, node)) => Some((leader, self.peers.forward(leader, node.as_ref(), &cmd).await)),
                None => match self.raft.client_write(cmd.clone()).await {
                    Ok(resp) => {
                        return match resp.data {
                            CommandResponse::Error(e) => Err(e),
                            other => Ok(other),
                        };
                    }
                    Err(RaftError::APIError(ClientWriteError::ForwardToLeader(fwd))) => match fwd.leader_id {
                        Some(leader) => Some((leader, self.peers.forward(leader, fwd.leader_node.as_ref(), &cmd).await)),
                        None => {
                            // No leader known yet: wait for an election.
                            // A leader whose quorum lease ran out (no
                            // follower acknowledged it for an election
                            // timeout) refuses with no leader named and
                            // still calls itself leader: pause instead of
                            // spinning until the lease is renewed or
                            // another member wins.
                            if self.wait_for_leader().await? == self.id {
                                tokio::time::sleep(LEADER_RETRY).await;
                            }
                            None
                        }
                    },
                    Err(RaftError::APIError(ClientWriteError::ChangeMembershipError(e))) => return Err(Error::InvalidArgument(e.to_string())),
                    // The entry was overwritten by a new leader: it never
                    // takes effect (etcd: leader changed).
                    Err(RaftError::APIError(ClientWriteError::LogEntryDiscarded(_))) => return Err(Error::LeaderChanged),
                    Err(RaftError::Fatal(_)) => return Err(Error::Stopped),
                    Err(e) => return Err(Error::internal(e)),
                },
            };
            match forwarded {
                // The leader could not be reached at all (it died): the
                // write never left, so wait for another leader and send
                // again. Or send to the same one after a pause: restarted
                // at its URL, it resumes its leadership in the same term
                // (openraft's leader restore), and no other leader comes.
                Some((leader, Err(Error::NoLeader))) => {
                    tokio::select! {
                        other = self.wait_for_other_leader(leader) => {
                            other?;
                        }
                        () = tokio::time::sleep(UNREACHABLE_RETRY) => {}
                    }
                }
                Some((_, other)) => return other,
                None => {}
            }
        }
    }

    /// Renews a lease (`renew`) or reads its remaining TTL on the leader,
    /// locally or through the peer transport.
    ///
    /// # Errors
    /// Unavailable errors when no leader can answer.
    pub async fn leader_lease(&self, id: i64, renew: bool) -> Result<i64> {
        let fut = async {
            loop {
                let leader = self.wait_for_leader().await?;
                let node = self.member(leader);
                match self.peers.lease(leader, node.as_ref(), id, renew).await {
                    // The leader died or lost its leadership (an election is
                    // on): renewing or reading a TTL twice is harmless, so
                    // ask again until the new leader answers, as etcd's
                    // LeaseRenew/LeaseTimeToLive do within the request timeout.
                    Err(e) if retry_on_new_leader(&e) => tokio::time::sleep(LEADER_RETRY).await,
                    other => return other,
                }
            }
        };
        match tokio::time::timeout(self.request_timeout, fut).await {
            Ok(r) => r,
            Err(_) => Err(Error::Timeout),
        }
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

    /// Applies an etcd membership change with etcd's checks, on the leader
    /// (forwarded there from a follower), and waits until this member has
    /// applied it. Returns the log index of the change.
    ///
    /// # Errors
    /// etcd's membership errors ([`Error::MemberNotFound`],
    /// [`Error::PeerUrlExist`], [`Error::MemberNotLearner`],
    /// [`Error::LearnerNotReady`], [`Error::MemberNotEnoughStarted`],
    /// [`Error::TooManyLearners`], [`Error::MemberExist`]) or Unavailable
    /// errors as for [`RaftNode::propose`].
    pub async fn change_member(&self, change: MemberChange) -> Result<u64> {
        let fut = async {
            loop {
                let leader = self.wait_for_leader().await?;
                let r = if leader == self.id {
                    self.change_member_as_leader(&change).await
                } else {
                    let node = self.member(leader);
                    self.peers.change_member(leader, node.as_ref(), &change).await
                };
                match r {
                    // Leadership moved, a previous change is still being
                    // committed, or a new leader has not committed in its
                    // term: try again shortly.
                    Err(Error::NotLeader) => tokio::time::sleep(Duration::from_millis(50)).await,
                    other => return other,
                }
            }
        };
        let index = match tokio::time::timeout(self.request_timeout, fut).await {
            Ok(r) => r?,
            Err(_) => return Err(Error::Timeout),
        };
        // A member that removed itself may never apply the change.
        let _ = tokio::time::timeout(Duration::from_secs(2), self.wait_applied(index)).await;
        Ok(index)
    }

    /// Leader side of [`RaftNode::change_member`].
    ///
    /// # Errors
    /// As [`RaftNode::change_member`]; [`Error::NotLeader`] when this member
    /// is not the leader.
    pub async fn change_member_as_leader(&self, change: &MemberChange) -> Result<u64> {
        use openraft::ChangeMembers;
        let _guard = self.membership_lock.lock().await;
        if !self.is_leader() {
            return Err(Error::NotLeader);
        }
        let members = self.members();
        let voters: Vec<u64> = members.iter().filter(|(_, (_, l))| !*l).map(|(id, _)| *id).collect();
        let url_taken = |id: u64, urls: &[String]| members.iter().any(|(other, (m, _))| *other != id && m.peer_urls.iter().any(|u| urls.contains(u)));
        let resp = match change {
            MemberChange::Add { id, peer_urls, is_learner } => {
                if members.contains_key(id) {
                    return Err(Error::MemberExist);
                }
                if url_taken(*id, peer_urls) {
                    return Err(Error::PeerUrlExist);
                }
                if *is_learner {
                    if members.values().filter(|(_, l)| *l).count() >= 1 {
                        return Err(Error::TooManyLearners);
                    }
                } else {
                    // The new voter has not started: the others must still
                    // form a quorum of the grown cluster.
                    let active = self.active_count(&voters);
                    if active < voters.len().div_ceil(2) + 1 {
                        return Err(Error::MemberNotEnoughStarted);
                    }
                }
                let node = Member { name: String::new(), peer_urls: peer_urls.clone(), client_urls: Vec::new() };
                let r = self.raft.add_learner(*id, node, false).await.map_err(write_err)?;
                if *is_learner {
                    r
                } else {
                    self.raft.change_membership(ChangeMembers::AddVoterIds([*id].into()), false).await.map_err(write_err)?
                }
            }
            MemberChange::Promote { id } => {
                let Some((_, learner)) = members.get(id) else { return Err(Error::MemberNotFound) };
                if !*learner {
                    return Err(Error::MemberNotLearner);
                }
                if !self.learner_ready(*id) {
                    return Err(Error::LearnerNotReady);
                }
                self.raft.change_membership(ChangeMembers::AddVoterIds([*id].into()), false).await.map_err(write_err)?
            }
            MemberChange::Remove { id } => {
                let Some((_, learner)) = members.get(id) else { return Err(Error::MemberNotFound) };
                if *learner {
                    self.raft.change_membership(ChangeMembers::RemoveNodes([*id].into()), false).await.map_err(write_err)?
                } else {
                    let remaining: Vec<u64> = voters.iter().copied().filter(|v| v != id).collect();
                    if remaining.is_empty() || self.active_count(&remaining) < remaining.len() / 2 + 1 {
                        return Err(Error::MemberNotEnoughStarted);
                    }
                    self.raft.change_membership(ChangeMembers::RemoveVoters([*id].into()), false).await.map_err(write_err)?
                }
            }
            MemberChange::Update { id, peer_urls } => {
                let Some((m, _)) = members.get(id) else { return Err(Error::MemberNotFound) };
                if url_taken(*id, peer_urls) {
                    return Err(Error::PeerUrlExist);
                }
                let node = Member { peer_urls: peer_urls.clone(), ..m.clone() };
                self.raft.change_membership(ChangeMembers::SetNodes([(*id, node)].into()), false).await.map_err(write_err)?
            }
        };
        Ok(resp.log_id.index())
    }

    /// How many of `ids` the leader (this member) heard from recently; the
    /// leader itself counts.
    fn active_count(&self, ids: &[u64]) -> usize {
        use openraft::Instant as _;
        let m = self.raft.metrics().borrow_watched().clone();
        let hb = m.heartbeat.unwrap_or_default();
        ids.iter()
            .filter(|id| **id == self.id || hb.get(id).and_then(|t| t.as_ref()).is_some_and(|t| (*t).into_inner().elapsed() < ACTIVE_WITHIN))
            .count()
    }

    /// Whether learner `id` has replicated at least 90% of the leader's log.
    fn learner_ready(&self, id: u64) -> bool {
        let m = self.raft.metrics().borrow_watched().clone();
        let leader_last = m.last_log_index.unwrap_or(0);
        let matched = m.replication.as_ref().and_then(|r| r.get(&id).cloned()).flatten().map(|l| l.index()).unwrap_or(0);
        matched as f64 >= leader_last as f64 * LEARNER_READY_PERCENT
    }

    /// Whether member `id` was removed from the cluster (and not re-added).
    pub fn was_removed(&self, id: u64) -> bool {
        self.removed_ids.lock().contains(&id)
    }

    /// Follows membership changes for as long as Raft runs: remembers
    /// removed members, and marks this member removed (see
    /// [`network::PeerClients::removed`]) once a membership that had it no
    /// longer does.
    pub async fn watch_membership(self) {
        // The server metrics change only with the vote, the leader or the
        // membership; the full metrics change with every entry, and watching
        // them woke this task (and the two below) on every write.
        let mut rx = self.raft.server_metrics();
        let mut seen_self = false;
        let mut committed_prev: Option<std::collections::BTreeSet<u64>> = None;
        loop {
            let (effective, committed) = {
                let m = rx.borrow_watched();
                (m.membership_config.clone(), m.committed_membership_config.clone())
            };
            let committed_nodes: std::collections::BTreeSet<u64> = committed.membership().nodes().map(|(id, _)| *id).collect();
            if let Some(prev) = &committed_prev {
                let mut removed = self.removed_ids.lock();
                for id in prev.difference(&committed_nodes) {
                    removed.insert(*id);
                }
                for id in &committed_nodes {
                    removed.remove(id);
                }
            }
            if !committed_nodes.is_empty() {
                committed_prev = Some(committed_nodes);
            }
            // The leader goes by the committed membership, so that it
            // commits (and answers) its own removal first; a follower may
            // never hear of that commit, so it goes by what it appended.
            let leading = rx.borrow_watched().current_leader == Some(self.id);
            let mem = if leading { committed.membership() } else { effective.membership() };
            let has_self = mem.nodes().any(|(id, _)| *id == self.id);
            if has_self {
                seen_self = true;
            } else if seen_self && mem.get_joint_config().len() == 1 {
                tracing::warn!("{}", network::REMOVED_MESSAGE);
                // Let replies to requests in flight (the MemberRemove
                // itself, perhaps) go out first.
                tokio::time::sleep(Duration::from_secs(1)).await;
                self.peers.mark_removed();
                return;
            }
            if rx.changed().await.is_err() {
                return;
            }
        }
    }

    /// Keeps the log store's inline-sync switch (see
    /// [`log_store::LogStore::inline_sync_switch`]) on while this member is
    /// the only voter, and off as soon as there are others (leader or
    /// follower). Runs until Raft shuts down.
    pub async fn drive_inline_sync(self, switch: Arc<std::sync::atomic::AtomicBool>) {
        let mut rx = self.raft.server_metrics();
        loop {
            let on = {
                let m = rx.borrow_watched();
                let alone = !m.membership_config.membership().voter_ids().any(|v| v != self.id);
                alone
            };
            switch.store(on, std::sync::atomic::Ordering::Relaxed);
            if rx.changed().await.is_err() {
                return;
            }
        }
    }

    /// Counts leader changes (`etcd_server_leader_changes_seen_total`) for
    /// as long as Raft runs.
    pub async fn count_leader_changes(self) {
        let mut rx = self.raft.server_metrics();
        let mut last = None;
        loop {
            let leader = rx.borrow_watched().current_leader;
            if leader.is_some() && leader != last {
                crate::metrics::metrics().leader_changes.inc();
                last = leader;
            }
            if rx.changed().await.is_err() {
                return;
            }
        }
    }

    /// Waits until a leader other than `old` is known (an election after
    /// `old` died), or until the request timeout.
    ///
    /// # Errors
    /// [`Error::NoLeader`] after the request timeout.
    pub async fn wait_for_other_leader(&self, old: u64) -> Result<u64> {
        let mut rx = self.raft.server_metrics();
        let wait = async {
            loop {
                match rx.borrow_watched().current_leader {
                    Some(l) if l != old => return Ok(l),
                    _ => {}
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

    /// Waits until a leader is known.
    ///
    /// # Errors
    /// [`Error::NoLeader`] after the request timeout.
    pub async fn wait_for_leader(&self) -> Result<u64> {
        let mut rx = self.raft.server_metrics();
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

    /// Makes the next local read linearizable: on the leader, confirms its
    /// term with a quorum after this call (see [`read_index`]); on a
    /// follower, asks the leader for such a read index. Then waits until the
    /// state machine has applied that index.
    ///
    /// # Errors
    /// Unavailable errors as for [`RaftNode::propose`].
    pub async fn linearizable_read(&self) -> Result<()> {
        use read_index::ReadIndexError;
        let fut = async {
            loop {
                match self.confirmed_read_index().await {
                    Ok(index) => return self.wait_applied(index).await,
                    Err(ReadIndexError::Forward(Some(leader), node)) => {
                        match self.peers.read_index(leader, node.as_ref()).await {
                            Ok(index) => return self.wait_applied(index).await,
                            // The leader died or was deposed: a read index
                            // is only a question, so ask again (the next
                            // round finds the new leader), as etcd retries
                            // ReadIndex until its request timeout.
                            Err(e) if retry_on_new_leader(&e) => tokio::time::sleep(LEADER_RETRY).await,
                            Err(e) => return Err(e),
                        }
                    }
                    Err(ReadIndexError::Forward(None, _)) => {
                        self.wait_for_leader().await?;
                    }
                    // This leader could not confirm its term (yet): retry
                    // until the request timeout.
                    Err(ReadIndexError::Retry) => tokio::time::sleep(LEADER_RETRY).await,
                    Err(ReadIndexError::Stopped) => return Err(Error::Stopped),
                }
            }
        };
        match tokio::time::timeout(self.request_timeout, fut).await {
            Ok(r) => r,
            Err(_) => Err(Error::Timeout),
        }
    }

    /// Leader side of a follower's read: confirm the term with a quorum,
    /// return the index the follower must apply before reading.
    ///
    /// # Errors
    /// [`Error::NoLeader`] if this member does not lead or cannot confirm
    /// that it does.
    pub async fn read_index(&self) -> Result<u64> {
        self.confirmed_read_index().await.map_err(|_| Error::NoLeader)
    }

    /// Whether this member may answer from its own lessor as the leader
    /// (etcd's `ensureLeadership` before LeaseRenew): it leads, a quorum
    /// confirmed its term after this call, and it has applied everything
    /// committed before. A leader back from a pause is refused here until
    /// it learns it was deposed.
    ///
    /// # Errors
    /// [`Error::NotLeader`] otherwise; [`Error::Stopped`] if Raft stopped.
    pub async fn leader_barrier(&self) -> Result<()> {
        if !self.is_leader() {
            return Err(Error::NotLeader);
        }
        match self.confirmed_read_index().await {
            Ok(index) => self.wait_applied(index).await,
            Err(read_index::ReadIndexError::Stopped) => Err(Error::Stopped),
            Err(_) => Err(Error::NotLeader),
        }
    }

    /// Waits until the local state machine has applied log `index`.
    ///
    /// # Errors
    /// [`Error::Stopped`] if Raft shuts down.
    pub async fn wait_applied(&self, index: u64) -> Result<()> {
        let mut rx = self.raft.data_metrics();
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
            self.effective_leader(&m),
            m.current_term,
            m.last_log_index.unwrap_or(0),
            m.last_applied.as_ref().map(|l| l.index()).unwrap_or(0),
        )
    }

    /// The leader as etcd reports it in Status, `/health` and
    /// `etcd_server_has_leader`: openraft's current leader, except that a
    /// leader that has had no quorum acknowledgement, and a follower that
    /// has heard nothing from its leader, for an election timeout report
    /// none (etcd's leader steps down on lost quorum with CheckQuorum, and
    /// its follower drops the leader when it starts a (pre-)campaign). A
    /// one-voter cluster always has its leader.
    pub fn effective_leader(&self, m: &openraft::RaftMetrics<TypeConfig>) -> Option<u64> {
        use openraft::Instant as _;
        let leader = m.current_leader?;
        if m.membership_config.membership().voter_ids().count() <= 1 {
            return Some(leader);
        }
        let fresh = if leader == self.id {
            m.last_quorum_acked.as_ref().is_some_and(|acked| acked.elapsed() <= self.election_timeout)
        } else {
            self.leader_contact.lock().is_some_and(|(from, at)| from == leader && at.elapsed() <= self.election_timeout)
        };
        fresh.then_some(leader)
    }

    /// Records that `leader` was heard from just now (an AppendEntries or
    /// a message on the replication stream naming it as leader).
    pub fn heard_from_leader(&self, leader: u64) {
        *self.leader_contact.lock() = Some((leader, std::time::Instant::now()));
    }

    /// The leader this member reports, if any: see
    /// [`RaftNode::effective_leader`]. An isolated follower can keep
    /// openraft's `current_leader` (always, with Pre-Vote), so a
    /// require-leader request is checked against this instead.
    pub fn leader(&self) -> Option<u64> {
        let rx = self.raft.metrics();
        let m = rx.borrow_watched();
        self.effective_leader(&m)
    }

    /// The current term.
    pub fn term(&self) -> u64 {
        self.raft.metrics().borrow_watched().current_term
    }

    /// Whether this member is the leader.
    pub fn is_leader(&self) -> bool {
        self.raft.metrics().borrow_watched().current_leader == Some(self.id)
    }

    /// Whether this member is a learner (a non-voting member).
    pub fn is_learner(&self) -> bool {
        let m = self.raft.metrics();
        let r = m.borrow_watched();
        let learner = r.membership_config.membership().learner_ids().any(|id| id == self.id);
        learner
    }

    /// Member `id` of the current membership, if it is one.
    pub fn member(&self, id: u64) -> Option<Member> {
        self.raft.metrics().borrow_watched().membership_config.membership().get_node(&id).cloned()
    }

    /// Members from the current membership: ID → (member, is_learner).
    pub fn members(&self) -> BTreeMap<u64, (Member, bool)> {
        let config = self.raft.metrics().borrow_watched().membership_config.clone();
        let mem = config.membership();
        let voters: std::collections::BTreeSet<u64> = mem.voter_ids().collect();
        mem.nodes().map(|(id, n)| (*id, (n.clone(), !voters.contains(id)))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::OpenraftTiming;

    /// For etcd's flag range, openraft accepts the derived settings, the
    /// first campaign after the last leader message (lease plus the random
    /// part, plus one openraft tick of 13/64 of its heartbeat period) comes
    /// before two election timeouts, and the heartbeat deadline stays above
    /// 0.4 ET so a slow peer round trip still keeps the leader's lease.
    #[test]
    fn derived_timing_campaigns_within_two_election_timeouts() {
        for (hb, et) in [
            (10, 50),
            (50, 500),
            (100, 1000),
            (100, 500),
            (250, 5000),
            (10, 10_000),
        ] {
            let t = OpenraftTiming::from_etcd(hb, et);
            let cfg = openraft::Config {
                heartbeat_interval: t.heartbeat_deadline,
                election_timeout_min: t.election_min,
                election_timeout_max: t.election_max,
                ..Default::default()
            };
            assert!(cfg.validate().is_ok(), "{hb}/{et}: {t:?}");
            let tick = t.heartbeat_deadline * 13 / 64;
            let earliest = t.election_max + t.election_min;
            let latest = 2 * t.election_max + tick;
            assert!(
                earliest >= et,
                "{hb}/{et}: campaigns at {earliest} ms, before one ET"
            );
            assert!(
                latest < 2 * et,
                "{hb}/{et}: campaigns as late as {latest} ms"
            );
            assert!(
                t.heartbeat_deadline * 5 >= et * 2,
                "{hb}/{et}: deadline {} ms",
                t.heartbeat_deadline
            );
        }
    }
}
