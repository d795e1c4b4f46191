//! A user's path from an external etcd to the embedded store (issue 16,
//! "Migration"): the apiserver runs on a real etcd (`--etcd-servers`) and
//! takes writes; it stops; `raftstore snapshot save` reads that etcd into a
//! snapshot file and `raftstore snapshot restore` makes the embedded
//! store's data dir from it; the apiserver then serves the same objects,
//! with the same resourceVersions and UIDs, from its embedded store, with
//! the real etcd gone. (The library calls below are what those two
//! commands run; raftstore's own tests drive the commands.)

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use crate::common::{RealEtcd, Server};

const OBJECTS: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: migrate}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cm-a, namespace: migrate, labels: {tier: one}}
data: {k: a}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cm-b, namespace: migrate}
data: {k: b}
---
apiVersion: v1
kind: Secret
metadata: {name: sec, namespace: migrate}
stringData: {password: hunter2}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: migrate}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: nginx:1.27}]
"#;

/// The objects of namespace `migrate` (and the namespace), by kind and
/// name, as the server returns them; and the list's resourceVersion.
fn objects(s: &Server) -> (BTreeMap<String, Value>, i64) {
    let out = s.kubectl(33, &["get", "configmaps,secrets,deployments", "-n", "migrate", "-o", "json"]);
    let list: Value = serde_json::from_str(out.ok()).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    let ns = s.kubectl(33, &["get", "namespace", "migrate", "-o", "json"]);
    let ns: Value = serde_json::from_str(ns.ok()).unwrap_or_else(|e| panic!("{e}: {ns:?}"));
    let mut by_name = BTreeMap::new();
    for item in list["items"].as_array().cloned().unwrap_or_default().into_iter().chain([ns]) {
        let key = format!("{}/{}", item["kind"].as_str().unwrap_or(""), item["metadata"]["name"].as_str().unwrap_or(""));
        // The root CA ConfigMap is the new server's own.
        if key != "ConfigMap/kube-root-ca.crt" {
            by_name.insert(key, item);
        }
    }
    let rv = by_name.values().map(|o| o["metadata"]["resourceVersion"].as_str().and_then(|r| r.parse::<i64>().ok()).unwrap_or(0)).max().unwrap_or(0);
    (by_name, rv)
}

#[test]
fn objects_move_from_a_real_etcd_to_the_embedded_store_with_their_resource_versions() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let etcd = rt.block_on(RealEtcd::start());
    let mut old = Server::start_with(&["--etcd-servers".into(), etcd.url.clone()]);
    old.kubectl_stdin(33, &["apply", "-f", "-"], Some(OBJECTS)).ok();
    // Some history: an update and a delete.
    old.kubectl(33, &["label", "configmap", "cm-b", "-n", "migrate", "changed=yes"]).ok();
    old.kubectl(27, &["create", "configmap", "gone", "-n", "migrate"]).ok();
    old.kubectl(27, &["delete", "configmap", "gone", "-n", "migrate"]).ok();
    let (before, newest) = objects(&old);
    assert_eq!(before.len(), 5, "{:?}", before.keys().collect::<Vec<_>>());
    old.terminate();
    assert!(old.wait_exit(Duration::from_secs(60)).is_some_and(|s| s.success()), "the old server stops cleanly");

    // `raftstore snapshot save` from the real etcd, `snapshot restore` into
    // the new server's store; then the real etcd goes away.
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("from-etcd.snap");
    let export = rt.block_on(async {
        let mut client = etcd_client::Client::connect([etcd.url.as_str()], None).await.expect("connect to etcd");
        raftstore::import::export(&mut client).await.expect("export")
    });
    assert!(export.revision >= newest, "read at {} before the newest object {newest}", export.revision);
    raftstore::import::write_snapshot(&export, &file).expect("write the snapshot");
    drop(etcd);
    let data = tempfile::tempdir().expect("tempdir");
    raftstore::snapshot::restore(&file, &data.path().join("store")).expect("restore");
    let new = Server::spawn_in(data, &[]).wait();

    // The same objects, byte for byte: names, UIDs, resourceVersions,
    // creation times, contents.
    let (after, _) = objects(&new);
    assert_eq!(after, before);
    // Reads by the old resourceVersion work: a watch from it sees the next
    // write and nothing before.
    let watch = new.kubectl_spawn(33, &["get", "configmaps", "-n", "migrate", "-w", "--output-watch-events", "--watch-only"]);
    std::thread::sleep(Duration::from_secs(2));
    let created = new.kubectl(33, &["create", "configmap", "after-move", "-n", "migrate", "-o", "jsonpath={.metadata.resourceVersion}"]);
    let rv: i64 = created.ok().trim().parse().unwrap_or_else(|_| panic!("{created:?}"));
    assert!(rv > export.revision, "a new write at {rv}, not after the revision moved ({})", export.revision);
    // Events reach a watch within a moment; give kubectl a few seconds.
    std::thread::sleep(Duration::from_secs(3));
    let (events, raw) = crate::common::stop_watch(watch);
    assert_eq!(events, vec![("ADDED".to_string(), "after-move".to_string())], "{raw}");
    let from_old_rv = new.kubectl(33, &["get", "--raw", &format!("/api/v1/namespaces/migrate/configmaps?resourceVersion={newest}&resourceVersionMatch=NotOlderThan")]);
    assert!(from_old_rv.ok().contains("after-move"), "{from_old_rv:?}");
}
