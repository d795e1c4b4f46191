//! One storage conformance suite (after kube's `storage/testing/store_tests.go`)
//! run against the embedded raftstore and against real etcd.

use std::sync::Arc;
use std::time::Duration;

use apiserver::errors::Status;
use apiserver::storage::embedded::EmbeddedKv;
use apiserver::storage::{Error, EventType, KvStorage, ListOptions, Preconditions, Storage, Update, WatchOptions};
use serde_json::{json, Value};

fn cm(name: &str, v: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ns"}, "data": {"v": v}})
}

fn rv(o: &Value) -> i64 {
    o["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap()
}

async fn suite(s: Arc<dyn Storage>) {
    let p = "/registry/configmaps/ns/";
    // create / get / already exists
    let a = s.create(&format!("{p}a"), cm("a", "1")).await.unwrap();
    assert!(rv(&a) > 0);
    assert_eq!(s.get(&format!("{p}a")).await.unwrap(), a);
    assert!(matches!(s.create(&format!("{p}a"), cm("a", "2")).await, Err(Error::AlreadyExists)));
    assert!(matches!(s.get(&format!("{p}zz")).await, Err(Error::NotFound)));

    // guaranteed update: the update function sees the current object and
    // the result carries a newer resourceVersion
    let mut f = |cur: Option<Value>| -> Result<Update, Status> {
        let mut o = cur.unwrap();
        o["data"]["v"] = json!("2");
        Ok(Update::Put(o))
    };
    let a2 = s.guaranteed_update(&format!("{p}a"), &Preconditions::default(), &mut f).await.unwrap();
    assert!(rv(&a2) > rv(&a));
    assert_eq!(a2["data"]["v"], "2");
    let stale = Preconditions { resource_version: Some(rv(&a).to_string()), ..Default::default() };
    let mut g = |cur: Option<Value>| -> Result<Update, Status> { Ok(Update::Put(cur.unwrap())) };
    assert!(matches!(s.guaranteed_update(&format!("{p}a"), &stale, &mut g).await, Err(Error::PreconditionFailed(_))));
    let mut unchanged = |_cur: Option<Value>| -> Result<Update, Status> { Ok(Update::Unchanged) };
    assert_eq!(rv(&s.guaranteed_update(&format!("{p}a"), &Preconditions::default(), &mut unchanged).await.unwrap()), rv(&a2));

    // list with limit and continue at a pinned revision
    for n in ["b", "c", "d"] {
        s.create(&format!("{p}{n}"), cm(n, "1")).await.unwrap();
    }
    s.create("/registry/configmaps/other/x", cm("x", "1")).await.unwrap();
    let page1 = s.list(p, &ListOptions { limit: 2, ..Default::default() }).await.unwrap();
    assert_eq!(page1.items.iter().map(|o| o["metadata"]["name"].as_str().unwrap()).collect::<Vec<_>>(), ["a", "b"]);
    s.create(&format!("{p}e"), cm("e", "1")).await.unwrap();
    let page2 = s.list(p, &ListOptions { limit: 2, continue_token: page1.continue_token.clone(), ..Default::default() }).await.unwrap();
    assert_eq!(page2.items.iter().map(|o| o["metadata"]["name"].as_str().unwrap()).collect::<Vec<_>>(), ["c", "d"]);
    assert_eq!(page2.revision, page1.revision, "continue pins the revision");
    assert!(page2.continue_token.is_none(), "e was created after the snapshot");
    let filtered = s.list(p, &ListOptions { predicate: Some(Arc::new(|o: &Value| o["metadata"]["name"] == "d")), limit: 1, ..Default::default() }).await.unwrap();
    assert_eq!(filtered.items.len(), 1);
    assert!(matches!(s.list(p, &ListOptions { continue_token: Some("garbage".into()), ..Default::default() }).await, Err(Error::InvalidContinue(_))));

    // watch from a revision sees later changes in order, deletes with the last state
    let from = s.current_revision().await.unwrap();
    let mut w = s.watch(p, &WatchOptions { revision: from, recursive: true, ..Default::default() }).await.unwrap();
    let mut up = |cur: Option<Value>| -> Result<Update, Status> {
        let mut o = cur.unwrap();
        o["data"]["v"] = json!("3");
        Ok(Update::Put(o))
    };
    s.create(&format!("{p}f"), cm("f", "1")).await.unwrap();
    s.guaranteed_update(&format!("{p}f"), &Preconditions::default(), &mut up).await.unwrap();
    let deleted = s.delete(&format!("{p}f"), &Preconditions::default()).await.unwrap();
    s.create("/registry/configmaps/other/y", cm("y", "1")).await.unwrap();
    let mut got = Vec::new();
    for _ in 0..3 {
        let e = tokio::time::timeout(Duration::from_secs(10), w.recv()).await.unwrap().unwrap().unwrap();
        got.push((e.kind, e.object["data"]["v"].as_str().unwrap().to_string(), rv(&e.object)));
    }
    assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), [EventType::Added, EventType::Modified, EventType::Deleted]);
    assert_eq!(got[2].1, "3", "a delete carries the last state");
    assert_eq!(got[2].2, rv(&deleted), "at the delete's revision");
    assert!(got.windows(2).all(|w| w[0].2 < w[1].2));

    // watch from 0 starts with the current state
    let mut w0 = s.watch(p, &WatchOptions { revision: 0, recursive: true, ..Default::default() }).await.unwrap();
    let first = tokio::time::timeout(Duration::from_secs(10), w0.recv()).await.unwrap().unwrap().unwrap();
    assert_eq!(first.kind, EventType::Added);
    assert_eq!(first.object["metadata"]["name"], "a");

    assert!(matches!(s.delete(&format!("{p}f"), &Preconditions::default()).await, Err(Error::NotFound)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_conformance_embedded() {
    let (h, _dir) = crate::common::embedded_member().await;
    suite(Arc::new(KvStorage::new(Arc::new(EmbeddedKv::new(h.ctx.clone()))))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_conformance_etcd() {
    // A missing etcd fails the test: the suite must run against real etcd.
    let etcd = crate::common::RealEtcd::start().await;
    suite(Arc::new(KvStorage::new(Arc::new(etcd.kv.clone())))).await;
}
