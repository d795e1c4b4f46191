//! The `kube` crate against a three-node cluster: create and list through
//! one node, and `kube::runtime::watcher` (streaming lists, and the classic
//! list-then-watch with bookmarks) on another node while writes go through
//! a third. Every change is seen exactly once, in order.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::watcher::{self, Event};

use crate::common::{Cluster, Server};

async fn client(s: &Server) -> kube::Client {
    let kc = Kubeconfig::read_from(s.kubeconfig()).expect("kubeconfig");
    let cfg = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await.expect("config");
    kube::Client::try_from(cfg).expect("client")
}

fn cm(name: &str) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(name.to_string());
    c.metadata.labels = Some(BTreeMap::from([("suite".to_string(), "kube".to_string())]));
    c.data = Some(BTreeMap::from([("v".to_string(), "0".to_string())]));
    c
}

/// What a watcher saw: (event, name, data.v) after the initial list.
async fn collect(api: Api<ConfigMap>, cfg: watcher::Config, n: usize, ready: tokio::sync::oneshot::Sender<Vec<String>>) -> Vec<(String, String, String)> {
    let mut stream = watcher::watcher(api, cfg).boxed();
    let mut initial = Vec::new();
    let mut ready = Some(ready);
    let mut seen = Vec::new();
    while seen.len() < n {
        let ev = tokio::time::timeout(Duration::from_secs(20), stream.next()).await.expect("watch event in time").expect("stream open").expect("watch ok");
        let entry = |kind: &str, c: &ConfigMap| (kind.to_string(), c.metadata.name.clone().unwrap_or_default(), c.data.as_ref().and_then(|d| d.get("v").cloned()).unwrap_or_default());
        match ev {
            Event::Init => {
                assert!(ready.is_some(), "the watcher restarted (a re-list): events may be missed or repeated");
            }
            Event::InitApply(c) => initial.push(c.metadata.name.unwrap_or_default()),
            Event::InitDone => {
                if let Some(r) = ready.take() {
                    let _ = r.send(initial.clone());
                }
            }
            Event::Apply(c) => seen.push(entry("apply", &c)),
            Event::Delete(c) => seen.push(entry("delete", &c)),
        }
    }
    // Nothing more arrives: no duplicates.
    if let Ok(Some(ev)) = tokio::time::timeout(Duration::from_millis(1500), stream.next()).await {
        panic!("unexpected extra event {:?}", ev.map(|e| format!("{e:?}")));
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_crate_watchers_on_a_three_node_cluster() {
    let cluster = tokio::task::spawn_blocking(Cluster::start).await.unwrap();
    let (writer, other, reader) = (client(&cluster.nodes[0]).await, client(&cluster.nodes[1]).await, client(&cluster.nodes[2]).await);
    let w_api: Api<ConfigMap> = Api::namespaced(writer, "default");
    let o_api: Api<ConfigMap> = Api::namespaced(other, "default");
    let r_api: Api<ConfigMap> = Api::namespaced(reader, "default");

    w_api.create(&PostParams::default(), &cm("pre")).await.unwrap();
    let listed = r_api.list(&ListParams::default().labels("suite=kube")).await.unwrap();
    assert_eq!(listed.items.iter().filter_map(|c| c.metadata.name.as_deref()).collect::<Vec<_>>(), ["pre"]);

    // 5 creates, 5 updates, 2 deletes = 12 changes after the initial state.
    let expected: Vec<(String, String, String)> = (0..5)
        .map(|i| ("apply".to_string(), format!("k{i}"), "0".to_string()))
        .chain((0..5).map(|i| ("apply".to_string(), format!("k{i}"), "1".to_string())))
        .chain((0..2).map(|i| ("delete".to_string(), format!("k{i}"), "1".to_string())))
        .collect();
    let selector = watcher::Config::default().labels("suite=kube");
    let (tx1, rx1) = tokio::sync::oneshot::channel();
    let (tx2, rx2) = tokio::sync::oneshot::channel();
    let streaming = tokio::spawn(collect(r_api.clone(), selector.clone().streaming_lists(), expected.len(), tx1));
    let classic = tokio::spawn(collect(r_api.clone(), selector, expected.len(), tx2));
    assert_eq!(rx1.await.unwrap(), ["pre"], "streaming list's initial events");
    assert_eq!(rx2.await.unwrap(), ["pre"], "list-then-watch initial list");

    for i in 0..5 {
        w_api.create(&PostParams::default(), &cm(&format!("k{i}"))).await.unwrap();
    }
    for i in 0..5 {
        let api = if i % 2 == 0 { &w_api } else { &o_api };
        let patch = serde_json::json!({"data": {"v": "1"}});
        api.patch(&format!("k{i}"), &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    }
    for i in 0..2 {
        o_api.delete(&format!("k{i}"), &DeleteParams::default()).await.unwrap();
    }
    assert_eq!(streaming.await.unwrap(), expected, "streaming-list watcher");
    assert_eq!(classic.await.unwrap(), expected, "list-then-watch watcher");
}
