//! [`RaftNode`]: the Raft member as the gRPC services see it, and what it
//! reports about the cluster (leader, term, members, applied index).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use openraft::async_runtime::watch::WatchReceiver;

use super::{network, read_index, Member, Raft, TypeConfig};
use crate::error::{Error, Result};

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

impl RaftNode {
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
        (self.effective_leader(&m), m.current_term, m.last_log_index.unwrap_or(0), m.last_applied.as_ref().map(|l| l.index()).unwrap_or(0))
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
