//! Prometheus metrics, served as text at `GET /metrics` on the client URLs.
//!
//! Names, types and labels follow etcd's where raftstore has the same thing
//! (etcd `server/etcdserver/metrics.go`, `server/storage/wal/metrics.go`,
//! `server/storage/backend/metrics.go`, `server/storage/mvcc/metrics.go`,
//! `server/etcdserver/api/rafthttp/metrics.go`), so etcd dashboards and
//! alerts work unchanged. One member runs per process, so the metrics are
//! process-wide ([`metrics`]).
//!
//! Counters are bumped where things happen; gauges that mirror Raft or
//! storage state are refreshed at scrape time by the `/metrics` handler
//! ([`crate::server::http`]) before [`render`]. This module imports nothing
//! else of the crate: storage, Raft and the services all count into it.

use std::sync::LazyLock;

use prometheus::{Encoder, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder};

/// Every metric raftstore exports.
pub struct Metrics {
    registry: Registry,
    /// `etcd_server_has_leader`: 1 if a leader is known.
    pub has_leader: IntGauge,
    /// `etcd_server_is_leader`: 1 if this member is the leader.
    pub is_leader: IntGauge,
    /// `etcd_server_is_learner`: 1 if this member is a learner.
    pub is_learner: IntGauge,
    /// `etcd_server_leader_changes_seen_total`: leader changes seen,
    /// the first election included.
    pub leader_changes: IntCounter,
    /// `etcd_server_proposals_committed_total`: the committed Raft index
    /// (a gauge in etcd too).
    pub proposals_committed: IntGauge,
    /// `etcd_server_proposals_applied_total`: the applied Raft index.
    pub proposals_applied: IntGauge,
    /// `etcd_server_proposals_pending`: proposals waiting to be applied.
    pub proposals_pending: IntGauge,
    /// `etcd_server_proposals_failed_total`: proposals that failed with an
    /// Unavailable error (no leader, leader changed, timeout).
    pub proposals_failed: IntCounter,
    /// `etcd_disk_wal_fsync_duration_seconds`: Raft log fsyncs.
    pub wal_fsync: Histogram,
    /// `etcd_disk_backend_commit_duration_seconds`: applying one committed
    /// entry's write batch to RocksDB.
    pub backend_commit: Histogram,
    /// `etcd_mvcc_db_total_size_in_bytes`: SST files plus memtables.
    pub db_total_size: IntGauge,
    /// `etcd_debugging_mvcc_keys_total`: keys in the key index.
    pub keys_total: IntGauge,
    /// `etcd_debugging_mvcc_current_revision`.
    pub current_revision: IntGauge,
    /// `etcd_debugging_mvcc_compact_revision`.
    pub compact_revision: IntGauge,
    /// `raftstore_raft_log_purged_index` (no etcd equivalent): the index
    /// of the last Raft log entry this member has purged after a snapshot,
    /// 0 if none. A member that restarts behind it needs a snapshot.
    pub raft_log_purged: IntGauge,
    /// `etcd_mvcc_put_total`: keys put (each key of a Txn counts).
    pub put_total: IntCounter,
    /// `etcd_mvcc_delete_total`: keys deleted.
    pub delete_total: IntCounter,
    /// `etcd_network_peer_sent_bytes_total{To}`: bytes sent to peers, by
    /// member ID in hex.
    pub peer_sent_bytes: IntCounterVec,
    /// `etcd_network_peer_received_bytes_total{From}`: bytes received from
    /// peers, by member ID in hex.
    pub peer_received_bytes: IntCounterVec,
    /// `etcd_network_snapshot_send_success{To}`: snapshots sent.
    pub snapshot_send_success: IntCounterVec,
    /// `etcd_network_snapshot_receive_success{From}`: snapshots received
    /// and installed.
    pub snapshot_receive_success: IntCounterVec,
    /// `etcd_server_id{server_id}`: 1, labelled with this member's ID.
    pub server_id: IntGaugeVec,
    /// `etcd_server_version{server_version}`: 1, labelled with the etcd
    /// version raftstore reports.
    pub server_version: IntGaugeVec,
}

/// etcd's disk latency buckets: 1 ms doubling to about 8 s.
fn disk_buckets() -> Vec<f64> {
    prometheus::exponential_buckets(0.001, 2.0, 14).unwrap_or_default()
}

fn build() -> Result<Metrics, prometheus::Error> {
    let r = Registry::new();
    fn reg<T: prometheus::core::Collector + Clone + 'static>(r: &Registry, m: T) -> Result<T, prometheus::Error> {
        r.register(Box::new(m.clone()))?;
        Ok(m)
    }
    let gauge = |name: &str, help: &str| reg(&r, IntGauge::new(name, help)?);
    let counter = |name: &str, help: &str| reg(&r, IntCounter::new(name, help)?);
    let counter_vec = |name: &str, help: &str, label: &str| reg(&r, IntCounterVec::new(Opts::new(name, help), &[label])?);
    let hist = |name: &str, help: &str| reg(&r, Histogram::with_opts(HistogramOpts::new(name, help).buckets(disk_buckets()))?);
    let m = Metrics {
        has_leader: gauge("etcd_server_has_leader", "Whether or not a leader exists. 1 is existence, 0 is not.")?,
        is_leader: gauge("etcd_server_is_leader", "Whether or not this member is a leader. 1 if is, 0 otherwise.")?,
        is_learner: gauge("etcd_server_is_learner", "Whether or not this member is a learner. 1 if is, 0 otherwise.")?,
        leader_changes: counter("etcd_server_leader_changes_seen_total", "The number of leader changes seen.")?,
        proposals_committed: gauge("etcd_server_proposals_committed_total", "The total number of consensus proposals committed.")?,
        proposals_applied: gauge("etcd_server_proposals_applied_total", "The total number of consensus proposals applied.")?,
        proposals_pending: gauge("etcd_server_proposals_pending", "The current number of pending proposals to commit.")?,
        proposals_failed: counter("etcd_server_proposals_failed_total", "The total number of failed proposals seen.")?,
        wal_fsync: hist("etcd_disk_wal_fsync_duration_seconds", "The latency distributions of fsync called by WAL.")?,
        backend_commit: hist("etcd_disk_backend_commit_duration_seconds", "The latency distributions of commit called by backend.")?,
        db_total_size: gauge("etcd_mvcc_db_total_size_in_bytes", "Total size of the underlying database physically allocated in bytes.")?,
        keys_total: gauge("etcd_debugging_mvcc_keys_total", "Total number of keys.")?,
        current_revision: gauge("etcd_debugging_mvcc_current_revision", "The current revision of store.")?,
        compact_revision: gauge("etcd_debugging_mvcc_compact_revision", "The revision of the last compaction in store.")?,
        raft_log_purged: gauge("raftstore_raft_log_purged_index", "Index of the last Raft log entry purged after a snapshot, 0 if none.")?,
        put_total: counter("etcd_mvcc_put_total", "Total number of puts seen by this member.")?,
        delete_total: counter("etcd_mvcc_delete_total", "Total number of deletes seen by this member.")?,
        peer_sent_bytes: counter_vec("etcd_network_peer_sent_bytes_total", "The total number of bytes sent to peers.", "To")?,
        peer_received_bytes: counter_vec("etcd_network_peer_received_bytes_total", "The total number of bytes received from peers.", "From")?,
        snapshot_send_success: counter_vec("etcd_network_snapshot_send_success", "Total number of successful snapshot sends", "To")?,
        snapshot_receive_success: counter_vec("etcd_network_snapshot_receive_success", "Total number of successful snapshot receives", "From")?,
        server_id: reg(&r, IntGaugeVec::new(Opts::new("etcd_server_id", "Server or member ID in hexadecimal format. 1 for 'server_id' label with current ID."), &["server_id"])?)?,
        server_version: reg(&r, IntGaugeVec::new(Opts::new("etcd_server_version", "Which version is running. 1 for 'server_version' label with current version."), &["server_version"])?)?,
        registry: r,
    };
    // Process CPU, memory and file descriptor metrics (Linux only).
    #[cfg(target_os = "linux")]
    m.registry.register(Box::new(prometheus::process_collector::ProcessCollector::for_self()))?;
    Ok(m)
}

static METRICS: LazyLock<Metrics> = LazyLock::new(|| match build() {
    Ok(m) => m,
    // Only reachable through a duplicate name in `build`, a programming
    // error caught by the unit test below.
    Err(e) => panic!("metric registration: {e}"),
});

/// The process-wide metrics.
pub fn metrics() -> &'static Metrics {
    &METRICS
}

/// A member ID as etcd prints it in labels: lowercase hex.
pub fn id_label(id: u64) -> String {
    format!("{id:x}")
}

/// Renders every metric in the Prometheus text format (version 0.0.4).
/// The gauges that mirror Raft and storage state are refreshed by the
/// caller first (the `/metrics` handler in [`crate::server::http`]), so that
/// this module depends on nothing else in the crate and every layer may
/// count into it.
pub fn render() -> String {
    let mut out = Vec::new();
    if let Err(e) = TextEncoder::new().encode(&metrics().registry.gather(), &mut out) {
        tracing::warn!("encoding metrics: {e}");
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_metric_registers_once() {
        assert!(super::build().is_ok());
    }
}
