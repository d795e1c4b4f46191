//! The result of a run: a human summary and one JSON line.
//!
//! The JSON always has `workload, endpoints, clients, conns, ops, errors,
//! seconds, ops_per_sec, p50_ms, p99_ms, max_ms`; workload-specific fields
//! are present only for their workload. Latencies are in milliseconds with
//! microsecond precision; `seconds` is wall time of the measured phase.

use std::fmt;
use std::time::Duration;

use serde::Serialize;

use crate::stats::Stats;

/// One run's result.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Report {
    /// `put`, `range`, `txn-cas` or `watch-fanout`.
    pub workload: String,
    /// The endpoints as given, comma-separated.
    pub endpoints: String,
    /// Concurrent clients (watchers for watch-fanout).
    pub clients: usize,
    /// gRPC connections used.
    pub conns: usize,
    /// Successful ops (delivered events for watch-fanout).
    pub ops: u64,
    /// Failed ops; for watch-fanout also watch failures and missing events.
    pub errors: u64,
    /// Wall time of the measured phase, in seconds.
    pub seconds: f64,
    /// `ops / seconds`.
    pub ops_per_sec: f64,
    /// Median latency, in milliseconds.
    pub p50_ms: f64,
    /// 99th percentile latency, in milliseconds.
    pub p99_ms: f64,
    /// Largest latency, in milliseconds.
    pub max_ms: f64,
    /// range: `l` or `s`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consistency: Option<String>,
    /// range: reads that found no key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub misses: Option<u64>,
    /// txn-cas: compare failures that were retried.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conflicts: Option<u64>,
    /// watch-fanout: acknowledged puts by the writer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub puts: Option<u64>,
    /// watch-fanout: achieved put rate, per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub puts_per_sec: Option<f64>,
    /// watch-fanout: events expected (`puts * watchers`) but not delivered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missing_events: Option<u64>,
    /// The first error seen, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
}

impl Report {
    /// A report with the common fields filled from `stats` and `elapsed`.
    pub fn new(workload: &str, endpoints: &[String], clients: usize, conns: usize, stats: &Stats, elapsed: Duration) -> Self {
        let seconds = elapsed.as_secs_f64();
        Self {
            workload: workload.to_owned(),
            endpoints: endpoints.join(","),
            clients,
            conns,
            ops: stats.ops,
            errors: stats.errors,
            seconds,
            ops_per_sec: per_sec(stats.ops, seconds),
            p50_ms: stats.quantile_ms(0.50),
            p99_ms: stats.quantile_ms(0.99),
            max_ms: stats.max_ms(),
            consistency: None,
            misses: None,
            conflicts: None,
            puts: None,
            puts_per_sec: None,
            missing_events: None,
            first_error: stats.first_error.clone(),
        }
    }

    /// The report as one line of JSON.
    ///
    /// # Errors
    /// Only if serde_json fails, which it does not for this type.
    pub fn to_json_line(&self) -> serde_json::Result<String> {
        serde_json::to_string(self)
    }
}

/// `count / seconds`, or 0 when no time passed.
pub fn per_sec(count: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        // Op counts stay far below 2^53, so the conversion is exact.
        count as f64 / seconds
    } else {
        0.0
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} against {} ({} clients, {} conns)", self.workload, self.endpoints, self.clients, self.conns)?;
        writeln!(f, "  ops       {} ok, {} errors in {:.3} s = {:.1} ops/s", self.ops, self.errors, self.seconds, self.ops_per_sec)?;
        writeln!(f, "  latency   p50 {:.3} ms   p99 {:.3} ms   max {:.3} ms", self.p50_ms, self.p99_ms, self.max_ms)?;
        if let Some(c) = &self.consistency {
            writeln!(f, "  consistency {c}")?;
        }
        if let Some(m) = self.misses {
            writeln!(f, "  misses    {m}")?;
        }
        if let Some(c) = self.conflicts {
            writeln!(f, "  conflicts {c}")?;
        }
        if let (Some(p), Some(r)) = (self.puts, self.puts_per_sec) {
            writeln!(f, "  puts      {p} acknowledged ({r:.1}/s)")?;
        }
        if let Some(m) = self.missing_events {
            writeln!(f, "  missing   {m} events")?;
        }
        if let Some(e) = &self.first_error {
            writeln!(f, "  first error: {e}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_has_the_agreed_fields_and_only_relevant_extras() -> serde_json::Result<()> {
        let mut stats = Stats::new();
        stats.record_ok(Duration::from_millis(2));
        let r = Report::new("put", &["http://a:1".into(), "http://b:2".into()], 8, 4, &stats, Duration::from_secs(2));
        let v: serde_json::Value = serde_json::from_str(&r.to_json_line()?)?;
        for field in ["workload", "endpoints", "clients", "ops", "errors", "seconds", "ops_per_sec", "p50_ms", "p99_ms", "max_ms"] {
            assert!(v.get(field).is_some(), "missing {field}");
        }
        assert_eq!(v["endpoints"], "http://a:1,http://b:2");
        assert_eq!(v["ops_per_sec"], 0.5);
        assert!(v.get("conflicts").is_none());
        assert!(v.get("first_error").is_none());
        Ok(())
    }
}
