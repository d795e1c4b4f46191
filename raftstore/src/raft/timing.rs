//! etcd's timing flags mapped onto openraft's, creating the openraft
//! member, and heartbeats at etcd's rate.

use std::sync::Arc;
use std::time::Duration;

use openraft::async_runtime::watch::WatchReceiver;

use super::{log_store, network, state_machine, Raft};
use crate::error::{Error, Result};

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
        // Pre-Vote, etcd 3.5's default: a member that cannot win an
        // election (a resumed or partitioned follower) does not bump the
        // term and unseat a leader that has its quorum.
        enable_pre_vote: Some(true),
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
        for (hb, et) in [(10, 50), (50, 500), (100, 1000), (100, 500), (250, 5000), (10, 10_000)] {
            let t = OpenraftTiming::from_etcd(hb, et);
            let cfg = openraft::Config { heartbeat_interval: t.heartbeat_deadline, election_timeout_min: t.election_min, election_timeout_max: t.election_max, ..Default::default() };
            assert!(cfg.validate().is_ok(), "{hb}/{et}: {t:?}");
            let tick = t.heartbeat_deadline * 13 / 64;
            let earliest = t.election_max + t.election_min;
            let latest = 2 * t.election_max + tick;
            assert!(earliest >= et, "{hb}/{et}: campaigns at {earliest} ms, before one ET");
            assert!(latest < 2 * et, "{hb}/{et}: campaigns as late as {latest} ms");
            assert!(t.heartbeat_deadline * 5 >= et * 2, "{hb}/{et}: deadline {} ms", t.heartbeat_deadline);
        }
    }
}
