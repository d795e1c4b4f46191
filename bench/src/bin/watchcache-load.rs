//! Watch cache load test (issue 5), in one process over a real embedded
//! raftstore member (RocksDB on disk), through the apiserver's storage
//! interface (no HTTP):
//!
//! 1. memory: 10k pods are created, then a cache is started on them; the
//!    bytes it holds (counted by a global allocator) per object vs the
//!    objects' JSON size;
//! 2. LIST of the 10k pods from the cache: consistent (resourceVersion
//!    unset) and resourceVersion=0, p50/p99, including assembling the
//!    response body from the cached JSON;
//! 3. delivery: N watchers (default 1000) on the pods while pods are
//!    updated at R writes/s (default 1000) for D seconds; each event carries
//!    its write time, each watcher records now − write time; p50/p99/max.
//!    Sampled watchers also record arrival − the time the write returned to
//!    its client, which leaves out the store's own write latency.
//!
//! `cargo run --profile dev -p bench --bin watchcache-load -- [watchers] [writes/s] [seconds] [pods]`

// `Status` is the apiserver's wire error type, used as is.
#![allow(clippy::result_large_err)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use apiserver::storage::embedded::EmbeddedKv;
use apiserver::storage::{KvStorage, ListOptions, Preconditions, RevisionMatch, Storage, Update, WatchOptions};
use apiserver::watchcache::CachedStorage;
use hdrhistogram::Histogram;
use serde_json::{json, Value};

/// Counts heap bytes (no unsafe code here: the crate wraps the allocator).
#[global_allocator]
static GLOBAL: &stats_alloc::StatsAlloc<std::alloc::System> = &stats_alloc::INSTRUMENTED_SYSTEM;

/// Live heap bytes now.
fn live() -> i64 {
    let s = GLOBAL.stats();
    s.bytes_allocated as i64 - s.bytes_deallocated as i64
}

const PREFIX: &str = "/registry/pods/";

fn pod(i: usize) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("pod-{i:05}"), "namespace": "load", "uid": format!("00000000-0000-4000-8000-{i:012}"),
            "creationTimestamp": "2026-11-30T12:00:00Z", "labels": {"app": "load", "pod-template-hash": "5d8f7c9b6"},
            "annotations": {"ts": "0"}},
        "spec": {"nodeName": format!("node-{}", i % 50), "restartPolicy": "Always", "dnsPolicy": "ClusterFirst", "schedulerName": "default-scheduler",
            "serviceAccountName": "default", "terminationGracePeriodSeconds": 30,
            "containers": [{"name": "app", "image": "registry.example/app:1.2.3", "imagePullPolicy": "IfNotPresent",
                "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "500m", "memory": "256Mi"}},
                "env": [{"name": "MODE", "value": "production"}, {"name": "LOG_LEVEL", "value": "info"}],
                "volumeMounts": [{"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}]}],
            "volumes": [{"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [{"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}]}}]},
        "status": {"phase": "Running", "podIP": format!("10.0.{}.{}", i / 250, i % 250), "hostIP": "192.168.0.10", "startTime": "2026-11-30T12:00:01Z",
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-30T12:00:05Z"}],
            "containerStatuses": [{"name": "app", "ready": true, "restartCount": 0, "image": "registry.example/app:1.2.3", "started": true}]}
    })
}

fn ms(h: &Histogram<u64>, q: f64) -> f64 {
    h.value_at_quantile(q) as f64 / 1000.0
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args: Vec<usize> = std::env::args().skip(1).map(|a| a.parse()).collect::<Result<_, _>>()?;
    let watchers = args.first().copied().unwrap_or(1000);
    let rate = args.get(1).copied().unwrap_or(1000);
    let secs = args.get(2).copied().unwrap_or(10);
    let pods = args.get(3).copied().unwrap_or(10_000);

    let dir = tempfile::tempdir()?;
    let cfg = raftstore::node::Config {
        data_dir: dir.path().to_path_buf(),
        listen_client_urls: vec!["http://127.0.0.1:0".into()],
        listen_peer_urls: vec!["http://127.0.0.1:0".into()],
        ..Default::default()
    };
    let h = raftstore::node::start(cfg).await?;
    h.node.wait_for_leader().await?;
    let inner: Arc<dyn Storage> = Arc::new(KvStorage::new(Arc::new(EmbeddedKv::new(h.ctx.clone()))));

    // Objects first, straight to the store.
    let mut json_bytes = 0usize;
    let sem = Arc::new(tokio::sync::Semaphore::new(64));
    let mut tasks = Vec::new();
    for i in 0..pods {
        let p = pod(i);
        json_bytes += serde_json::to_vec(&p)?.len();
        let s = inner.clone();
        let permit = sem.clone().acquire_owned().await?;
        tasks.push(tokio::spawn(async move {
            let _permit = permit;
            s.create(&format!("{PREFIX}load/pod-{i:05}"), p).await
        }));
    }
    for t in tasks {
        t.await??;
    }
    println!("created {pods} pods, {} bytes of JSON ({} per pod)", json_bytes, json_bytes / pods.max(1));

    // 1. memory of the cached objects.
    let cached = Arc::new(CachedStorage::new(inner.clone(), [PREFIX.to_string()], apiserver::watchcache::DEFAULT_CAPACITY));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = live();
    let cacher = cached.cacher(PREFIX).ok_or_else(|| anyhow::anyhow!("no cache"))?;
    cacher.wait_fresh(1).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let held = live() - before;
    println!(
        "memory: cache holds {held} bytes for {pods} objects = {} bytes/object; JSON {} bytes/object; ratio {:.2}",
        held / pods.max(1) as i64,
        json_bytes / pods.max(1),
        held as f64 / json_bytes.max(1) as f64
    );

    // The cache's own structure alone (the figure above also counts what the
    // store's read path keeps): the same map built here.
    let before = live();
    let mut snap = apiserver::watchcache::cacher::Snapshot::default();
    for i in 0..pods {
        let mut p = pod(i);
        p["metadata"]["resourceVersion"] = json!("1234567");
        let mut v = serde_json::to_vec(&p)?;
        v.shrink_to_fit();
        snap.objects.insert(Arc::from(format!("{PREFIX}load/pod-{i:05}").as_str()), apiserver::watchcache::cacher::CachedObject { encoded: bytes::Bytes::from(v) });
    }
    let structure = live() - before;
    println!("memory: the cache's object map alone: {structure} bytes = {} bytes/object; ratio to JSON {:.2}", structure / pods.max(1) as i64, structure as f64 / json_bytes.max(1) as f64);
    drop(snap);

    // 2. LIST latency.
    for (label, opts) in [
        ("consistent (resourceVersion unset)", ListOptions { allow_encoded: true, ..Default::default() }),
        ("resourceVersion=0", ListOptions { allow_encoded: true, revision_match: RevisionMatch::NotOlderThan, ..Default::default() }),
    ] {
        let mut hist = Histogram::<u64>::new(3)?;
        for _ in 0..100 {
            let t = Instant::now();
            let r = cached.list("/registry/pods/load/", &opts).await?;
            let mut body = Vec::with_capacity(r.encoded.iter().map(|b| b.len() + 1).sum::<usize>() + 128);
            body.extend_from_slice(b"{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{},\"items\":[");
            for (i, b) in r.encoded.iter().enumerate() {
                if i > 0 {
                    body.push(b',');
                }
                body.extend_from_slice(b);
            }
            body.extend_from_slice(b"]}");
            assert_eq!(r.encoded.len(), pods);
            hist.record(t.elapsed().as_micros() as u64)?;
        }
        println!("LIST {pods} pods from the cache, {label}: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms", ms(&hist, 0.5), ms(&hist, 0.99), hist.max() as f64 / 1000.0);
    }
    // The same consistent LIST from the store directly, for comparison.
    let mut hist = Histogram::<u64>::new(3)?;
    for _ in 0..20 {
        let t = Instant::now();
        let r = inner.list("/registry/pods/load/", &ListOptions::default()).await?;
        assert_eq!(r.items.len(), pods);
        hist.record(t.elapsed().as_micros() as u64)?;
    }
    println!("LIST {pods} pods from the store (no cache), consistent: p50 {:.2} ms, p99 {:.2} ms", ms(&hist, 0.5), ms(&hist, 0.99));

    // 3. delivery delay to many watchers.
    let start = Instant::now();
    let from = inner.current_revision().await?;
    let total = rate * secs;
    let mut handles = Vec::new();
    for k in 0..watchers {
        let mut w = cached.watch("/registry/pods/load/", &WatchOptions { revision: from, recursive: true, ..Default::default() }).await?;
        let mut hist = Histogram::<u64>::new(3)?;
        // Every 10th watcher also keeps (revision, arrival) to compare with
        // the time each write returned.
        let sample = k % 10 == 0;
        handles.push(tokio::spawn(async move {
            let mut n = 0;
            let mut arrivals = Vec::new();
            while n < total {
                let Some(Ok(ev)) = w.recv().await else { break };
                let sent: u64 = ev.object["metadata"]["annotations"]["ts"].as_str().and_then(|s| s.parse().ok()).unwrap_or(0);
                let now = start.elapsed().as_micros() as u64;
                let _ = hist.record(now.saturating_sub(sent));
                if sample {
                    let rv: i64 = apiserver::meta::resource_version(&ev.object).parse().unwrap_or(0);
                    arrivals.push((rv, now));
                }
                n += 1;
            }
            (hist, n, arrivals)
        }));
    }
    let writer_sem = Arc::new(tokio::sync::Semaphore::new(256));
    let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / rate.max(1) as u64));
    let mut writes = Vec::new();
    for i in 0..total {
        tick.tick().await;
        let s = inner.clone();
        let permit = writer_sem.clone().acquire_owned().await?;
        writes.push(tokio::spawn(async move {
            let _permit = permit;
            let ts = start.elapsed().as_micros().to_string();
            let mut f = |cur: Option<Value>| -> Result<Update, apiserver::errors::Status> {
                let mut o = cur.unwrap_or_else(|| pod(i % 100));
                o["metadata"]["annotations"]["ts"] = json!(ts);
                Ok(Update::Put(o))
            };
            let t = Instant::now();
            s.guaranteed_update(&format!("{PREFIX}load/pod-{:05}", i % 100), &Preconditions::default(), &mut f)
                .await
                .map(|o| (t.elapsed(), apiserver::meta::resource_version(&o).parse::<i64>().unwrap_or(0), start.elapsed().as_micros() as u64))
        }));
    }
    let write_time = start.elapsed();
    let mut write_hist = Histogram::<u64>::new(3)?;
    let mut acked = std::collections::HashMap::new();
    for w in writes {
        let (lat, rev, at) = w.await??;
        write_hist.record(lat.as_micros() as u64)?;
        acked.insert(rev, at);
    }
    println!("writes: latency of the store write itself p50 {:.2} ms, p99 {:.2} ms", ms(&write_hist, 0.5), ms(&write_hist, 0.99));
    let mut all = Histogram::<u64>::new(3)?;
    let mut complete = 0;
    let mut after_ack = Histogram::<u64>::new(3)?;
    for h in handles {
        let (hist, n, arrivals) = h.await?;
        for (rev, at) in arrivals {
            if let Some(acked_at) = acked.get(&rev) {
                after_ack.record(at.saturating_sub(*acked_at))?;
            }
        }
        all.add(&hist)?;
        if n == total {
            complete += 1;
        }
    }
    let closed = apiserver::watchcache::metrics::metrics().terminated_watchers.with_label_values(&[PREFIX]).get();
    println!(
        "delivery: {watchers} watchers, {total} writes in {:.1} s ({:.0}/s): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms; {complete} watchers got every event, {closed} closed as too slow",
        write_time.as_secs_f64(),
        total as f64 / write_time.as_secs_f64(),
        ms(&all, 0.5),
        ms(&all, 0.99),
        all.max() as f64 / 1000.0
    );
    println!(
        "delivery after the write returned to its client (100 sampled watchers; 0 when the event arrived first): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        ms(&after_ack, 0.5),
        ms(&after_ack, 0.99),
        after_ack.max() as f64 / 1000.0
    );
    Ok(())
}
