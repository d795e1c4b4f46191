//! Watch cache metrics, named like kube-apiserver's (`apiserver_watch_cache_*`,
//! `apiserver_terminated_watchers_total`), served at `/metrics` in the
//! Prometheus text format.

use std::sync::OnceLock;

use prometheus::{IntCounterVec, IntGaugeVec, Opts, Registry};

/// The metrics of every cache (label `resource`: the cache's key prefix).
pub struct Metrics {
    registry: Registry,
    /// Events received from the store, per cache.
    pub events_received: IntCounterVec,
    /// Events sent to watchers (one per watcher and event).
    pub events_dispatched: IntCounterVec,
    /// Watchers closed because they fell behind the ring.
    pub terminated_watchers: IntCounterVec,
    /// The revision each cache has reached.
    pub resource_version: IntGaugeVec,
    /// Cache re-initialisations (a list after the store watch failed).
    pub initializations: IntCounterVec,
}

fn counter(registry: &Registry, name: &str, help: &str) -> IntCounterVec {
    let c = IntCounterVec::new(Opts::new(name, help), &["resource"]).unwrap_or_else(|e| unreachable!("metric {name}: {e}"));
    let _ = registry.register(Box::new(c.clone()));
    c
}

/// The process-wide metrics.
pub fn metrics() -> &'static Metrics {
    static M: OnceLock<Metrics> = OnceLock::new();
    M.get_or_init(|| {
        let registry = Registry::new();
        let events_received = counter(&registry, "apiserver_watch_cache_events_received_total", "Counter of events received in watch cache broken by resource type.");
        let events_dispatched = counter(&registry, "apiserver_watch_cache_events_dispatched_total", "Counter of events dispatched in watch cache broken by resource type.");
        let terminated_watchers = counter(&registry, "apiserver_terminated_watchers_total", "Counter of watchers closed due to unresponsiveness broken by resource type.");
        let initializations = counter(&registry, "apiserver_watch_cache_initializations_total", "Counter of watch cache initializations broken by resource type.");
        let resource_version = IntGaugeVec::new(Opts::new("apiserver_watch_cache_resource_version", "Current resource version of watch cache broken by resource type."), &["resource"])
            .unwrap_or_else(|e| unreachable!("metric: {e}"));
        let _ = registry.register(Box::new(resource_version.clone()));
        Metrics { registry, events_received, events_dispatched, terminated_watchers, resource_version, initializations }
    })
}

/// The metrics in the Prometheus text exposition format (version 0.0.4).
pub fn render() -> String {
    use prometheus::Encoder as _;
    let mut buf = Vec::new();
    let _ = prometheus::TextEncoder::new().encode(&metrics().registry.gather(), &mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}
