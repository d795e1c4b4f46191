//! Run limits, latency histograms and counters.

use std::fmt::Display;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

/// Largest latency the histograms track exactly, in microseconds (1 hour).
/// Larger samples are clamped to it.
pub const MAX_LATENCY_US: u64 = 3_600_000_000;

/// Hands out at most `total` op tickets, and none after `deadline`.
///
/// Clients take a ticket before each op, so the ops issued by all clients
/// together never exceed `total`, and no op starts after the deadline.
#[derive(Debug)]
pub struct Tickets {
    issued: AtomicU64,
    total: u64,
    deadline: Instant,
}

impl Tickets {
    /// Tickets for `total` ops until `deadline`.
    pub fn new(total: u64, deadline: Instant) -> Self {
        Self { issued: AtomicU64::new(0), total, deadline }
    }

    /// Takes one ticket; `false` once the count or the time is used up.
    pub fn take(&self) -> bool {
        if Instant::now() >= self.deadline {
            return false;
        }
        // fetch_update rather than fetch_add so the counter never runs past
        // `total` and `issued()` stays exact.
        self.issued.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| (n < self.total).then_some(n + 1)).is_ok()
    }

    /// Tickets handed out so far.
    pub fn issued(&self) -> u64 {
        self.issued.load(Ordering::Relaxed)
    }

    /// When the last ticket may be taken.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }
}

/// Latencies and counters of one client, merged into a run total at the end.
#[derive(Debug, Clone)]
pub struct Stats {
    /// Latency of each successful op, in microseconds.
    pub hist: Histogram<u64>,
    /// Successful ops.
    pub ops: u64,
    /// Failed ops (errors and timeouts).
    pub errors: u64,
    /// txn-cas: compare failures that were retried.
    pub conflicts: u64,
    /// range: reads that found no key.
    pub misses: u64,
    /// The first error seen, for the report.
    pub first_error: Option<String>,
}

impl Default for Stats {
    fn default() -> Self {
        Self::new()
    }
}

impl Stats {
    /// Empty stats.
    pub fn new() -> Self {
        // The bounds are constants that hdrhistogram accepts (low >= 1,
        // high >= 2 * low, sigfig <= 5), so construction cannot fail.
        #[allow(clippy::expect_used)]
        let hist = Histogram::new_with_bounds(1, MAX_LATENCY_US, 3).expect("constant histogram bounds are valid");
        Self { hist, ops: 0, errors: 0, conflicts: 0, misses: 0, first_error: None }
    }

    /// Records one successful op that took `latency`.
    pub fn record_ok(&mut self, latency: Duration) {
        self.ops += 1;
        self.record_latency(latency);
    }

    /// Records a latency sample without counting an op (watch deliveries
    /// count their own ops).
    pub fn record_latency(&mut self, latency: Duration) {
        let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.hist.saturating_record(us.clamp(1, MAX_LATENCY_US));
    }

    /// Records one failed op.
    pub fn record_err(&mut self, err: impl Display) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(err.to_string());
        }
    }

    /// Adds `other` into `self`.
    pub fn merge(&mut self, other: &Stats) {
        self.ops += other.ops;
        self.errors += other.errors;
        self.conflicts += other.conflicts;
        self.misses += other.misses;
        if self.first_error.is_none() {
            self.first_error.clone_from(&other.first_error);
        }
        // Both histograms have the same bounds, so this cannot fail; if it
        // ever did, the report must not silently lose samples.
        if let Err(e) = self.hist.add(&other.hist) {
            self.record_err(format!("merging latency histograms: {e}"));
        }
    }

    /// The latency at quantile `q` (0..=1), in milliseconds; 0 when empty.
    pub fn quantile_ms(&self, q: f64) -> f64 {
        if self.hist.is_empty() {
            return 0.0;
        }
        us_to_ms(self.hist.value_at_quantile(q))
    }

    /// The largest latency, in milliseconds; 0 when empty.
    pub fn max_ms(&self) -> f64 {
        if self.hist.is_empty() {
            return 0.0;
        }
        us_to_ms(self.hist.max())
    }
}

fn us_to_ms(us: u64) -> f64 {
    // Latencies are at most MAX_LATENCY_US, well inside f64's exact range.
    us as f64 / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tickets_stop_at_total() {
        let t = Tickets::new(3, Instant::now() + Duration::from_secs(60));
        let taken = (0..10).filter(|_| t.take()).count();
        assert_eq!(taken, 3);
        assert_eq!(t.issued(), 3);
    }

    #[test]
    fn tickets_stop_at_deadline() {
        let t = Tickets::new(u64::MAX, Instant::now());
        assert!(!t.take());
        assert_eq!(t.issued(), 0);
    }

    #[test]
    fn quantiles_are_in_milliseconds() {
        let mut s = Stats::new();
        for ms in 1..=100 {
            s.record_ok(Duration::from_millis(ms));
        }
        assert_eq!(s.ops, 100);
        let p50 = s.quantile_ms(0.5);
        let p99 = s.quantile_ms(0.99);
        assert!((49.0..=51.0).contains(&p50), "p50 {p50}");
        assert!((98.0..=100.0).contains(&p99), "p99 {p99}");
        assert!((99.9..=100.1).contains(&s.max_ms()), "max {}", s.max_ms());
    }

    #[test]
    fn sub_microsecond_samples_still_count() {
        let mut s = Stats::new();
        s.record_ok(Duration::from_nanos(10));
        assert!(s.max_ms() > 0.0);
    }

    #[test]
    fn merge_adds_everything() {
        let mut a = Stats::new();
        a.record_ok(Duration::from_millis(1));
        let mut b = Stats::new();
        b.record_ok(Duration::from_millis(3));
        b.record_err("boom");
        b.conflicts = 2;
        a.merge(&b);
        assert_eq!((a.ops, a.errors, a.conflicts), (2, 1, 2));
        assert_eq!(a.first_error.as_deref(), Some("boom"));
        assert_eq!(a.hist.len(), 2);
    }
}
