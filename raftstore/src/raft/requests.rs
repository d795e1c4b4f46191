//! Client requests through Raft: proposals (forwarded to the leader from
//! a follower), linearizable reads and the leader's lease queries, each
//! retried while leadership moves, within the request timeout.

use std::time::Duration;

use openraft::async_runtime::watch::WatchReceiver;

use super::{read_index, RaftNode};
use crate::command::{Command, CommandResponse};
use crate::error::{Error, Result};

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
                    // This leader is handing its leadership over. Its
                    // transferee may not lead yet and would send the write
                    // straight back: wait for the hand-over to end (a new
                    // leader, or a new term if it failed), then ask again.
                    Err(RaftError::APIError(ClientWriteError::ForwardToLeader(fwd))) if fwd.reason == openraft::error::ForwardReason::LeadershipTransfer => {
                        self.wait_for_hand_over().await?;
                        None
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

    /// Waits until this member no longer leads in its current term: another
    /// member leads, or the term moved on (an election after a failed
    /// leadership transfer).
    ///
    /// # Errors
    /// [`Error::Stopped`] if Raft shuts down.
    async fn wait_for_hand_over(&self) -> Result<()> {
        let mut rx = self.raft.metrics();
        let term = self.term();
        loop {
            {
                let m = rx.borrow_watched();
                if m.current_term > term || m.current_leader != Some(self.id) {
                    return Ok(());
                }
            }
            if rx.changed().await.is_err() {
                return Err(Error::Stopped);
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
}
