//! etcd's membership changes (MemberAdd, MemberPromote, MemberRemove,
//! MemberUpdate) with etcd's checks, on openraft, and following the
//! membership as it changes.

use std::collections::BTreeMap;
use std::time::Duration;

use openraft::async_runtime::watch::WatchReceiver;
use serde::{Deserialize, Serialize};

use super::{network, Member, RaftNode, TypeConfig};
use crate::error::{Error, Result};

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

/// A learner is "in sync" when it has replicated at least this share of the
/// leader's log (etcd's `readyPercent`).
const LEARNER_READY_PERCENT: f64 = 0.9;

/// A member counts as started when the leader heard from it within this
/// time (etcd's `HealthInterval`).
const ACTIVE_WITHIN: Duration = Duration::from_secs(5);

impl RaftNode {
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
            // openraft answers before it publishes the new membership in
            // its metrics, which MemberList and Status read: wait for it,
            // so a member that has started never lists no members.
            Ok(()) => {
                let mut rx = self.raft.metrics();
                let published = async {
                    while rx.borrow_watched().membership_config.membership().voter_ids().next().is_none() {
                        if rx.changed().await.is_err() {
                            return Err(Error::Stopped);
                        }
                    }
                    Ok(())
                };
                tokio::time::timeout(self.request_timeout, published).await.unwrap_or(Err(Error::Timeout))
            }
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
                    let active = self.active_count(&voters).await;
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
                    if remaining.is_empty() || self.active_count(&remaining).await < remaining.len() / 2 + 1 {
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

    /// How many of `ids` are up: the leader (this member) itself, and each
    /// other member that the leader heard from recently *and* that answers
    /// a message sent now. The heartbeat record alone counted a member
    /// that had just stopped (its last answer was less than
    /// [`ACTIVE_WITHIN`] old), so a removal passed the check with the
    /// remaining voters short of a quorum, and the cluster lost its leader
    /// until the stopped member came back (etcd drops a peer from its
    /// active set as soon as its connection breaks).
    async fn active_count(&self, ids: &[u64]) -> usize {
        use futures::StreamExt as _;
        use openraft::Instant as _;
        let m = self.raft.metrics().borrow_watched().clone();
        let hb = m.heartbeat.clone().unwrap_or_default();
        let recent = |id: &u64| hb.get(id).and_then(|t| t.as_ref()).is_some_and(|t| (*t).into_inner().elapsed() < ACTIVE_WITHIN);
        let rpc = openraft::raft::AppendEntriesRequest::<TypeConfig> { vote: m.vote, prev_log_id: None, leader_commit: None, entries: Vec::new() };
        let Ok(payload) = super::encode(&rpc) else { return 1 };
        let timeout = self.election_timeout.max(Duration::from_millis(200));
        let probes: futures::stream::FuturesUnordered<_> = ids
            .iter()
            .copied()
            .filter(|id| *id != self.id && recent(id))
            .map(|id| {
                let payload = payload.clone();
                async move { self.peers.confirm_vote(id, self.member(id).as_ref(), payload, timeout).await }
            })
            .collect();
        // Any answer but a newer vote: the member is up and follows us.
        let answered = probes.filter(|r| std::future::ready(matches!(r, Ok(a) if !matches!(a, openraft::raft::AppendEntriesResponse::HigherVote(_))))).count().await;
        answered + usize::from(ids.contains(&self.id))
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
}
