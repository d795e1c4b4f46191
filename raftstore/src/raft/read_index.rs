//! Leadership confirmation for linearizable reads (ReadIndex) and for the
//! lease queries a leader answers from its own lessor.
//!
//! A leader may answer a read from its own state only if, at some moment
//! after the read arrived, a quorum of voters still accepted its term (Raft
//! thesis §6.4, etcd's ReadIndex). Otherwise a newer leader may already have
//! acknowledged writes that this one has never seen: the read is stale.
//!
//! openraft 0.10.0-alpha.37's own check (`ensure_linearizable` with
//! `ReadPolicy::ReadIndex`) cannot be trusted with that: it compares the
//! read's arrival time with the send time of the latest RPC a quorum has
//! acknowledged, and on a pipelined replication stream it credits an
//! acknowledgement to the wrong request. When an answer to a request that
//! carried entries up to `X` arrives, every queued request whose last log
//! id is at most `X` is taken as answered, including an entry-less commit
//! update (`prev = last = X`) sent after it. So an answer the follower sent
//! before a pause (or a partition) counts as a quorum acknowledgement of a
//! request sent after the read arrived, although the follower has since
//! voted for a new leader. `raftstore/NOTES.md` tells the whole story and
//! `chaos/tests/it/stale_read.rs` stages it.
//!
//! So a leader confirms its term itself, in rounds that start after the
//! reads they serve arrived: it sends each other voter an entry-less
//! AppendEntries that carries its committed vote and nothing else (no
//! previous log id, no commit index), which the follower's openraft accepts
//! only if that vote is still at least its own, and answers `HigherVote`
//! otherwise. A round succeeds once a quorum of every voter configuration
//! (the leader counting for itself) accepted. Reads that arrive while a
//! round is out wait for the next one, so one round serves a whole batch
//! and at most one is in flight.
//!
//! openraft is still asked for the read log id (its commit index, or its
//! term's first entry if that is later), but with its leader lease, which
//! costs no RPC while heartbeats flow; the round above is what decides.

use std::collections::BTreeSet;
use std::time::Duration;

use futures::stream::{FuturesUnordered, StreamExt};
use openraft::raft::{AppendEntriesRequest, AppendEntriesResponse};
use parking_lot::Mutex;
use tokio::sync::oneshot;

use super::{RaftNode, TypeConfig};
use crate::error::{Error, Result};

/// The outcome of a round: the term a quorum accepted, or why not.
type Outcome = Result<u64>;

/// Reads waiting for a round, and whether one is running.
#[derive(Default)]
pub struct Rounds {
    state: Mutex<RoundsState>,
}

#[derive(Default)]
struct RoundsState {
    running: bool,
    /// Reads that arrived after the running round (if any) started.
    waiting: Vec<oneshot::Sender<Outcome>>,
}

/// Whether `acked` holds a majority of every configuration in `configs`
/// (a joint configuration has two).
fn quorum(configs: &[BTreeSet<u64>], acked: &BTreeSet<u64>) -> bool {
    configs.iter().all(|c| c.iter().filter(|id| acked.contains(id)).count() * 2 > c.len())
}

impl RaftNode {
    /// The index a linearizable read must see applied, when this member
    /// leads: openraft's read log id, confirmed by a round of this module
    /// that started after the call.
    ///
    /// # Errors
    /// [`ReadIndexError`]: not the leader (with the leader to ask, if
    /// known), not confirmed yet, or Raft stopped.
    pub(crate) async fn confirmed_read_index(&self) -> std::result::Result<u64, ReadIndexError> {
        use openraft::error::{LinearizableReadError, RaftError};
        use openraft::LinearizerOption;
        // The lease, with a heartbeat if it is stale: the round decides.
        let lease = LinearizerOption::new(None, true);
        let read = match self.raft.get_read_linearizer(lease).await {
            Ok(l) => *l.read_log_id(),
            Err(RaftError::APIError(LinearizableReadError::ForwardToLeader(fwd))) => return Err(ReadIndexError::Forward(fwd.leader_id, fwd.leader_node)),
            Err(RaftError::APIError(_)) => return Err(ReadIndexError::Retry),
            Err(RaftError::Fatal(_)) => return Err(ReadIndexError::Stopped),
        };
        {
            use openraft::vote::RaftLeaderId as _;
            let leader = read.committed_leader_id();
            if *leader.node_id() != self.id {
                return Err(ReadIndexError::Retry);
            }
            match self.confirm_term().await {
                Ok(term) if term == leader.term() => Ok(read.index()),
                // Another term than the read log id's: this leadership
                // ended (or began) meanwhile; ask again.
                Err(Error::Stopped) => Err(ReadIndexError::Stopped),
                // A voter knows a newer term (this member was deposed and
                // openraft will learn it too), no quorum answered, or the
                // term moved: ask again.
                Ok(_) | Err(_) => Err(ReadIndexError::Retry),
            }
        }
    }

    /// Waits for a round that starts after this call and returns the term
    /// it confirmed.
    ///
    /// # Errors
    /// [`Error::NotLeader`] if this member does not lead or a voter knows
    /// a newer term; [`Error::NoLeader`] if no quorum answered within an
    /// election timeout.
    async fn confirm_term(&self) -> Outcome {
        let (tx, rx) = oneshot::channel();
        let start = {
            let mut s = self.rounds.state.lock();
            s.waiting.push(tx);
            !std::mem::replace(&mut s.running, true)
        };
        if start {
            tokio::spawn(self.clone().drive_rounds());
        }
        rx.await.unwrap_or(Err(Error::Stopped))
    }

    /// Runs rounds while reads wait for one, each for the reads that
    /// arrived before it started.
    async fn drive_rounds(self) {
        loop {
            let waiting = {
                let mut s = self.rounds.state.lock();
                if s.waiting.is_empty() {
                    s.running = false;
                    return;
                }
                std::mem::take(&mut s.waiting)
            };
            let outcome = self.round().await;
            for w in waiting {
                let _ = w.send(outcome.clone());
            }
        }
    }

    /// One round: this member's committed vote sent to every other voter.
    async fn round(&self) -> Outcome {
        use openraft::async_runtime::watch::WatchReceiver as _;
        use openraft::vote::RaftLeaderId as _;
        let (vote, configs) = {
            let rx = self.raft.metrics();
            let m = rx.borrow_watched();
            (m.vote, m.membership_config.membership().get_joint_config().clone())
        };
        if !vote.is_committed() || *vote.leader_id().node_id() != self.id {
            return Err(Error::NotLeader);
        }
        let term = vote.leader_id().term();
        let mut acked = BTreeSet::from([self.id]);
        if quorum(&configs, &acked) {
            return Ok(term);
        }
        let rpc = AppendEntriesRequest::<TypeConfig> { vote, prev_log_id: None, leader_commit: None, entries: Vec::new() };
        let payload = super::encode(&rpc).map_err(Error::internal)?;
        let others: BTreeSet<u64> = configs.iter().flatten().copied().filter(|id| *id != self.id).collect();
        let mut answers: FuturesUnordered<_> = others
            .into_iter()
            .map(|id| {
                let payload = payload.clone();
                async move { (id, self.peers.confirm_vote(id, self.member(id).as_ref(), payload, self.election_timeout).await) }
            })
            .collect();
        let collect = async {
            while let Some((id, answer)) = answers.next().await {
                match answer {
                    Ok(AppendEntriesResponse::HigherVote(_)) => return Err(Error::NotLeader),
                    // The vote was accepted; a log mismatch cannot happen
                    // without a previous log id, and would not matter.
                    Ok(_) => {
                        acked.insert(id);
                        if quorum(&configs, &acked) {
                            return Ok(term);
                        }
                    }
                    Err(_) => {}
                }
            }
            Err(Error::NoLeader)
        };
        tokio::time::timeout(self.election_timeout.max(Duration::from_millis(100)), collect).await.unwrap_or(Err(Error::NoLeader))
    }
}

/// Why [`RaftNode::confirmed_read_index`] gave no index.
#[derive(Debug)]
pub(crate) enum ReadIndexError {
    /// This member does not lead: ask this leader (if known), or wait for
    /// one.
    Forward(Option<u64>, Option<super::Member>),
    /// This member could not confirm that it leads (no quorum answered, a
    /// voter knows a newer term, or the term moved); asking again finds
    /// out more.
    Retry,
    /// Raft shut down.
    Stopped,
}

#[cfg(test)]
mod tests {
    use super::quorum;
    use std::collections::BTreeSet;

    #[test]
    fn quorum_needs_a_majority_of_every_configuration() {
        let set = |v: &[u64]| v.iter().copied().collect::<BTreeSet<u64>>();
        // (voter configurations, voters that acknowledged, quorum?)
        type Case<'a> = (&'a [&'a [u64]], &'a [u64], bool);
        let cases: &[Case] = &[
            (&[&[1]], &[1], true),
            (&[&[1, 2, 3]], &[1], false),
            (&[&[1, 2, 3]], &[1, 3], true),
            (&[&[1, 2, 3, 4]], &[1, 2], false),
            (&[&[1, 2, 3, 4]], &[1, 2, 4], true),
            // Joint: {1,2,3} and {3,4,5}.
            (&[&[1, 2, 3], &[3, 4, 5]], &[1, 2], false),
            (&[&[1, 2, 3], &[3, 4, 5]], &[1, 2, 4, 5], true),
            (&[&[1, 2, 3], &[3, 4, 5]], &[1, 3, 4], true),
        ];
        for (configs, acked, want) in cases {
            let configs: Vec<BTreeSet<u64>> = configs.iter().map(|c| set(c)).collect();
            assert_eq!(quorum(&configs, &set(acked)), *want, "{configs:?} acked by {acked:?}");
        }
    }
}
