//! Lease expiry (etcd `lease/lessor.go`, reduced to what the leader decides).
//!
//! The state machine knows which leases exist, their granted TTL and their
//! keys. Only the leader tracks deadlines: a lease's deadline is set to
//! `now + TTL` when the leader first sees it (after a grant, or after becoming
//! leader, which renews every lease as etcd's `Promote` does) and on each
//! keep-alive. When a deadline passes, the leader proposes a `LeaseRevoke`
//! through the Raft log, so every member deletes the lease's keys at the same
//! revision.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// Deadlines of leases, kept by the leader.
#[derive(Default)]
pub struct Lessor {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    deadlines: HashMap<i64, Instant>,
    /// The term in which the deadlines were set; a new term resets them.
    term: u64,
}

impl Lessor {
    /// Renews a lease: deadline = now + `ttl` seconds. Returns the TTL.
    pub fn renew(&self, id: i64, ttl: i64) -> i64 {
        let mut inner = self.inner.lock();
        inner.deadlines.insert(id, Instant::now() + Duration::from_secs(ttl.max(0) as u64));
        ttl
    }

    /// Remaining seconds of a lease (rounded up), given its granted TTL; a
    /// lease without a deadline yet has its full TTL.
    pub fn remaining(&self, id: i64, ttl: i64) -> i64 {
        let inner = self.inner.lock();
        match inner.deadlines.get(&id) {
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                let secs = left.as_secs() as i64 + i64::from(left.subsec_nanos() > 0);
                secs.min(ttl)
            }
            None => ttl,
        }
    }

    /// Given every lease that exists `(id, ttl)` and the current term,
    /// returns the leases whose deadline has passed. Leases seen for the first
    /// time (or all of them, in a new term) get a fresh deadline.
    pub fn expired(&self, leases: &[(i64, i64)], term: u64) -> Vec<i64> {
        let mut inner = self.inner.lock();
        if inner.term != term {
            inner.deadlines.clear();
            inner.term = term;
        }
        let now = Instant::now();
        let live: std::collections::HashSet<i64> = leases.iter().map(|(id, _)| *id).collect();
        inner.deadlines.retain(|id, _| live.contains(id));
        let mut out = Vec::new();
        for (id, ttl) in leases {
            let d = *inner.deadlines.entry(*id).or_insert_with(|| now + Duration::from_secs((*ttl).max(0) as u64));
            if d <= now {
                out.push(*id);
            }
        }
        out
    }

    /// Leader side of a keep-alive: renews the lease and returns its TTL, or
    /// 0 if it does not exist (etcd answers an unknown lease with TTL 0).
    pub fn keep_alive(&self, store: &crate::mvcc::MvccStore, id: i64) -> i64 {
        match store.lease(id) {
            Some(l) => self.renew(id, l.ttl),
            None => 0,
        }
    }

    /// Leader side of time-to-live: remaining seconds, or -1 if the lease
    /// does not exist (etcd's answer for an unknown lease).
    pub fn time_to_live(&self, store: &crate::mvcc::MvccStore, id: i64) -> i64 {
        match store.lease(id) {
            Some(l) => self.remaining(id, l.ttl),
            None => -1,
        }
    }

    /// Forgets a lease (after it is revoked).
    pub fn forget(&self, id: i64) {
        self.inner.lock().deadlines.remove(&id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_start_on_first_sight_and_reset_on_new_term() {
        let l = Lessor::default();
        assert!(l.expired(&[(1, 0), (2, 100)], 1).contains(&1));
        assert!(!l.expired(&[(1, 0), (2, 100)], 1).contains(&2));
        assert_eq!(l.remaining(2, 100), 100);
        l.renew(2, 0);
        assert!(l.expired(&[(2, 0)], 1).contains(&2));
        // New term: every lease gets its full TTL again.
        assert!(l.expired(&[(2, 100)], 2).is_empty());
    }
}
