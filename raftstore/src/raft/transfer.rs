//! Leadership transfer: etcd's MoveLeader, and the hand-over a leader makes
//! before it stops (etcd's `EtcdServer.TransferLeadership` on shutdown).
//!
//! openraft runs the protocol (`Trigger::transfer_leader`). The leader
//! stops accepting writes and stops heartbeating, and sends every voter a
//! TransferLeader message (`RaftTransport/TransferLeader`). The transferee
//! waits until its log holds the leader's last entry (at most openraft's
//! `election_timeout_min`) and campaigns at once; the other voters drop the
//! old leader's lease, so they grant it their votes without waiting for the
//! lease to run out. A transferee that does not win leaves the old leader
//! silent, and the cluster elects a leader the ordinary way after an
//! election timeout. The calls here wait a bounded time for the new leader
//! and report a transfer that did not finish as
//! [`Error::LeaderTransferTimeout`].
//!
//! Writes that reach the old leader while it hands over wait for the new
//! leader and go there (see `RaftNode::propose`).

use std::cmp::Reverse;
use std::time::Duration;

use openraft::async_runtime::watch::WatchReceiver;

use super::RaftNode;
use crate::error::{Error, Result};

impl RaftNode {
    /// Stops the member as etcd stops a server: a leader first hands its
    /// leadership to the most caught-up voter that answers it
    /// ([`RaftNode::transfer_leadership`]), so that the cluster does not go
    /// without a leader for an election timeout; then Raft shuts down. A
    /// hand-over that fails is logged and the member stops anyway.
    ///
    /// The hand-over is given two election timeouts. One that takes longer
    /// has failed: openraft's transferee gives up waiting for the leader's
    /// log within one, as etcd's raft aborts a transfer after one. etcd
    /// waits out its request timeout all the same, which only delays a
    /// stop, e.g. when every member is stopped at once and the transferee
    /// is going away too.
    pub async fn stop(&self) {
        match self.transfer_leadership(self.election_timeout * 2).await {
            Ok(Some(leader)) => tracing::info!(new_leader = %crate::metrics::id_label(leader), "stopping: leadership handed over"),
            Ok(None) => {}
            Err(e) => tracing::warn!("stopping without handing leadership over: {e}"),
        }
        if let Err(e) = self.raft.shutdown().await {
            tracing::warn!("raft shutdown: {e}");
        }
    }

    /// etcd's MoveLeader: makes voter `to` the leader and waits until this
    /// member sees it lead. Only the leader accepts it; moving to the
    /// leader itself succeeds at once (etcd: raft ignores it and the wait
    /// ends at once).
    ///
    /// # Errors
    /// - [`Error::NotLeader`] when this member is not the leader;
    /// - [`Error::BadLeaderTransferee`] when `to` is not a member, or is a
    ///   learner;
    /// - [`Error::LeaderTransferTimeout`] when `to` does not lead within
    ///   `timeout` (another member may have won the election instead);
    /// - [`Error::Stopped`] when Raft shuts down.
    pub async fn move_leader(&self, to: u64, timeout: Duration) -> Result<()> {
        if !self.is_leader() {
            return Err(Error::NotLeader);
        }
        let voter = {
            let rx = self.raft.metrics();
            let m = rx.borrow_watched();
            let voter = m.membership_config.membership().voter_ids().any(|v| v == to);
            voter
        };
        if !voter {
            return Err(Error::BadLeaderTransferee);
        }
        if to == self.id {
            return Ok(());
        }
        self.hand_over(to, timeout, |leader| leader == to).await.map(|_| ())
    }

    /// Hands this member's leadership to another voter and waits until a
    /// leader other than this member is established, as etcd's leader does
    /// when it stops. The transferee is the voter that has the most of the
    /// leader's log (highest matched log index), among those that answered
    /// the leader within the last election timeout; ties go to the lowest
    /// member ID.
    ///
    /// Returns the new leader's member ID, or `None` when there was nothing
    /// to hand over: this member is not the leader, it is the only voter, or
    /// no other voter answered it lately (a transfer to it would only delay
    /// the election the remaining members hold anyway).
    ///
    /// `timeout` bounds the whole call; etcd uses its request timeout
    /// ([`RaftNode::request_timeout`]).
    ///
    /// # Errors
    /// [`Error::LeaderTransferTimeout`] when no other member leads within
    /// `timeout`; [`Error::Stopped`] when Raft shuts down.
    pub async fn transfer_leadership(&self, timeout: Duration) -> Result<Option<u64>> {
        let to = match self.transferee() {
            Ok(to) => to,
            Err(why) => {
                tracing::info!("skipped leadership transfer: {why}");
                return Ok(None);
            }
        };
        let me = self.id;
        self.hand_over(to, timeout, |leader| leader != me).await.map(Some)
    }

    /// The voter [`RaftNode::transfer_leadership`] hands over to, or why
    /// there is none.
    fn transferee(&self) -> std::result::Result<u64, &'static str> {
        use openraft::Instant as _;
        let rx = self.raft.metrics();
        let m = rx.borrow_watched();
        let (Some(matched), Some(acked)) = (m.replication.as_ref(), m.heartbeat.as_ref()) else { return Err("this member is not the leader") };
        if m.current_leader != Some(self.id) {
            return Err("this member is not the leader");
        }
        let membership = m.membership_config.membership();
        if !membership.voter_ids().any(|v| v != self.id) {
            return Err("this member is the only voter");
        }
        let answered = |v: &u64| acked.get(v).and_then(|t| t.as_ref()).is_some_and(|t| t.elapsed() <= self.election_timeout);
        let matched_index = |v: &u64| matched.get(v).and_then(|l| l.as_ref()).map(|l| l.index()).unwrap_or(0);
        let best = membership.voter_ids().filter(|v| *v != self.id).filter(answered).max_by_key(|v| (matched_index(v), Reverse(*v)));
        best.ok_or("no other voter answered within the election timeout")
    }

    /// Triggers openraft's transfer to `to` and waits up to `timeout` for a
    /// leader that `done` accepts.
    async fn hand_over(&self, to: u64, timeout: Duration, done: impl Fn(u64) -> bool) -> Result<u64> {
        let began = std::time::Instant::now();
        tracing::info!(transferee = %crate::metrics::id_label(to), "leadership transfer starting");
        let mut rx = self.raft.server_metrics();
        self.raft.trigger().transfer_leader(to).await.map_err(|_| Error::Stopped)?;
        let wait = async {
            loop {
                if let Some(leader) = rx.borrow_watched().current_leader.filter(|l| done(*l)) {
                    return Ok(leader);
                }
                if rx.changed().await.is_err() {
                    return Err(Error::Stopped);
                }
            }
        };
        let out = tokio::time::timeout(timeout, wait).await.unwrap_or(Err(Error::LeaderTransferTimeout));
        match &out {
            Ok(leader) => tracing::info!(new_leader = %crate::metrics::id_label(*leader), took = ?began.elapsed(), "leadership transfer finished"),
            Err(e) => tracing::warn!(transferee = %crate::metrics::id_label(to), "leadership transfer failed: {e}"),
        }
        out
    }
}
