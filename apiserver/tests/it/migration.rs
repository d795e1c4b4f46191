//! A user's path from an external etcd to the embedded store (issue 16,
//! "Migration"): the apiserver runs on a real etcd (`--etcd-servers`) and
//! takes writes; it stops; a snapshot of that etcd is taken, either with
//! etcd's own `etcdctl snapshot save` or with `raftstore snapshot save`
//! (through the client API), and `raftstore snapshot restore` makes the
//! embedded store's data dir from it; the apiserver then serves the same
//! objects, with the same resourceVersions and UIDs, from its embedded
//! store, with the real etcd gone. (The library calls below are what the
//! raftstore commands run; raftstore's own tests drive the commands.)

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

/// How the etcd's data is carried to the embedded store.
#[derive(Clone, Copy, Debug)]
enum Via {
    /// `etcdctl snapshot save`: etcd's own file, with its history since
    /// the last compaction.
    EtcdSnapshot,
    /// `raftstore snapshot save`: every key read through the client API.
    ClientApi,
}

#[test]
fn objects_move_from_a_real_etcd_to_the_embedded_store_with_their_resource_versions() {
    migrate(Via::ClientApi);
}

#[test]
fn objects_move_by_an_etcdctl_snapshot_to_the_embedded_store_with_their_resource_versions() {
    migrate(Via::EtcdSnapshot);
}

fn migrate(via: Via) {
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

    // A snapshot of the real etcd, `snapshot restore` into the new server's
    // store; then the real etcd goes away.
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("from-etcd.snap");
    let moved_at = match via {
        Via::ClientApi => {
            let export = rt.block_on(async {
                let mut client = etcd_client::Client::connect([etcd.url.as_str()], None).await.expect("connect to etcd");
                raftstore::import::export(&mut client).await.expect("export")
            });
            raftstore::import::write_snapshot(&export, &file).expect("write the snapshot");
            export.revision
        }
        Via::EtcdSnapshot => {
            let out = std::process::Command::new("etcdctl").env("ETCDCTL_API", "3").args(["--endpoints", &etcd.url, "snapshot", "save"]).arg(&file).output().expect("run etcdctl (Debian etcd-client)");
            assert!(out.status.success(), "etcdctl snapshot save: {}", String::from_utf8_lossy(&out.stderr));
            let out = std::process::Command::new("etcdctl").env("ETCDCTL_API", "3").args(["snapshot", "status", "-w", "json"]).arg(&file).output().expect("run etcdctl");
            let status: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
            status["revision"].as_i64().unwrap_or(0)
        }
    };
    assert!(moved_at >= newest, "{via:?}: read at {moved_at} before the newest object {newest}");
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
    assert!(rv > moved_at, "a new write at {rv}, not after the revision moved ({moved_at})");
    // Events reach a watch within a moment; give kubectl a few seconds.
    std::thread::sleep(Duration::from_secs(3));
    let (events, raw) = crate::common::stop_watch(watch);
    assert_eq!(events, vec![("ADDED".to_string(), "after-move".to_string())], "{raw}");
    let from_old_rv = new.kubectl(33, &["get", "--raw", &format!("/api/v1/namespaces/migrate/configmaps?resourceVersion={newest}&resourceVersionMatch=NotOlderThan")]);
    assert!(from_old_rv.ok().contains("after-move"), "{from_old_rv:?}");
}
