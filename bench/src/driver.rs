//! The closed-loop runner shared by the request/response workloads.
//!
//! `clients` tasks each keep one op in flight: take a ticket, run the op
//! under the request timeout, record its latency or its error, repeat. The
//! run ends when the tickets run out (count or deadline) and every in-flight
//! op has finished or timed out.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinSet;

use crate::error::{Error, Result};
use crate::stats::{Stats, Tickets};

/// Grace period, beyond deadline plus request timeout, before stuck client
/// tasks are aborted.
const JOIN_GRACE: Duration = Duration::from_secs(5);

/// What one successful op observed besides its latency.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// Compare failures retried before the op succeeded (txn-cas).
    pub conflicts: u64,
    /// The read found no key (range).
    pub miss: bool,
}

/// Stats of a whole run and its wall time.
#[derive(Debug, Clone)]
pub struct RunResult {
    /// Merged stats of all clients.
    pub stats: Stats,
    /// From the first op to the end of the last one.
    pub elapsed: Duration,
}

/// Runs `clients` closed-loop clients until `tickets` run out.
///
/// `make_client(i)` builds client `i`'s op factory; each call of the factory
/// returns the future of one op. Per-op setup (choosing a key) happens in
/// the factory, the request in the future.
pub async fn run_closed_loop<M, F, Fut>(clients: usize, tickets: Arc<Tickets>, request_timeout: Duration, mut make_client: M) -> RunResult
where
    M: FnMut(usize) -> F,
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = Result<Outcome>> + Send + 'static,
{
    let started = Instant::now();
    let mut set = JoinSet::new();
    for i in 0..clients {
        let mut op = make_client(i);
        let tickets = Arc::clone(&tickets);
        set.spawn(async move {
            let mut stats = Stats::new();
            while tickets.take() {
                let t0 = Instant::now();
                match tokio::time::timeout(request_timeout, op()).await {
                    Ok(Ok(outcome)) => {
                        stats.record_ok(t0.elapsed());
                        stats.conflicts += outcome.conflicts;
                        stats.misses += u64::from(outcome.miss);
                    }
                    Ok(Err(e)) => stats.record_err(e),
                    Err(_) => stats.record_err(Error::Timeout(request_timeout.as_secs_f64())),
                }
            }
            stats
        });
    }
    let join_deadline = tickets.deadline().max(Instant::now()) + request_timeout + JOIN_GRACE;
    let stats = join_stats(set, join_deadline).await;
    RunResult { stats, elapsed: started.elapsed() }
}

/// Collects the stats of every task in `set`, aborting those still running
/// at `deadline` (each counts as one error).
pub async fn join_stats(mut set: JoinSet<Stats>, deadline: Instant) -> Stats {
    let mut total = Stats::new();
    loop {
        match tokio::time::timeout_at(deadline.into(), set.join_next()).await {
            Ok(Some(Ok(stats))) => total.merge(&stats),
            Ok(Some(Err(e))) => total.record_err(format!("client task failed: {e}")),
            Ok(None) => break,
            Err(_) => {
                let stuck = set.len();
                set.abort_all();
                for _ in 0..stuck {
                    total.record_err("client task did not finish in time; aborted");
                }
                break;
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn runs_exactly_total_ops() {
        let tickets = Arc::new(Tickets::new(50, Instant::now() + Duration::from_secs(30)));
        let r = run_closed_loop(4, tickets, Duration::from_secs(1), |_| || async { Ok(Outcome::default()) }).await;
        assert_eq!(r.stats.ops, 50);
        assert_eq!(r.stats.errors, 0);
    }

    #[tokio::test]
    async fn counts_errors_and_timeouts() {
        let tickets = Arc::new(Tickets::new(4, Instant::now() + Duration::from_secs(30)));
        let mut n = 0;
        let r = run_closed_loop(1, tickets, Duration::from_millis(20), move |_| {
            move || {
                n += 1;
                let this = n;
                async move {
                    match this {
                        1 => Err(Error::Malformed("planted".into())),
                        2 => {
                            tokio::time::sleep(Duration::from_secs(5)).await;
                            Ok(Outcome::default())
                        }
                        _ => Ok(Outcome { conflicts: 1, miss: true }),
                    }
                }
            }
        })
        .await;
        assert_eq!((r.stats.ops, r.stats.errors), (2, 2));
        assert_eq!((r.stats.conflicts, r.stats.misses), (2, 2));
        assert!(r.stats.first_error.as_deref().is_some_and(|e| e.contains("planted")));
    }

    #[tokio::test]
    async fn stops_at_the_deadline() {
        let tickets = Arc::new(Tickets::new(u64::MAX, Instant::now() + Duration::from_millis(100)));
        let t0 = Instant::now();
        let r = run_closed_loop(2, tickets, Duration::from_secs(1), |_| {
            || async {
                tokio::time::sleep(Duration::from_millis(5)).await;
                Ok(Outcome::default())
            }
        })
        .await;
        assert!(t0.elapsed() < Duration::from_secs(2));
        assert!(r.stats.ops > 0);
    }
}
