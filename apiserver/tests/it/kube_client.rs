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

/// Server-side apply through the `kube` crate (`Patch::Apply`), on a
/// Deployment and on a custom resource: creation, a conflict between two
/// managers (409 with kube's message and a `FieldManagerConflict` cause),
/// and `force`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_crate_server_side_apply() {
    use k8s_openapi::api::apps::v1::Deployment;
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind};

    let s = Server::start();
    let c = client(&s).await;
    let deployments: Api<Deployment> = Api::namespaced(c.clone(), "default");
    let mine = serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "kube-ssa"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "k"}},
                 "template": {"metadata": {"labels": {"app": "k"}}, "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]}}},
    });
    let created = deployments.patch("kube-ssa", &PatchParams::apply("operator"), &Patch::Apply(&mine)).await.unwrap();
    let entries = created.metadata.managed_fields.unwrap_or_default();
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!((entries[0].manager.as_deref(), entries[0].operation.as_deref()), (Some("operator"), Some("Apply")));

    let theirs = serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "kube-ssa"}, "spec": {"replicas": 4}});
    let err = deployments.patch("kube-ssa", &PatchParams::apply("autoscaler"), &Patch::Apply(&theirs)).await.unwrap_err();
    let kube::Error::Api(status) = err else { panic!("not an API error: {err:?}") };
    assert_eq!(status.code, 409, "{status:?}");
    assert_eq!(status.message, "Apply failed with 1 conflict: conflict with \"operator\": .spec.replicas");
    let causes = status.details.map(|d| d.causes).unwrap_or_default();
    assert_eq!(causes.len(), 1, "{causes:?}");
    assert_eq!((causes[0].reason.as_str(), causes[0].message.as_str(), causes[0].field.as_str()), ("FieldManagerConflict", "conflict with \"operator\"", ".spec.replicas"));
    let forced = deployments.patch("kube-ssa", &PatchParams::apply("autoscaler").force(), &Patch::Apply(&theirs)).await.unwrap();
    assert_eq!(forced.spec.unwrap().replicas, Some(4));
    let managers: Vec<String> = forced.metadata.managed_fields.unwrap_or_default().into_iter().filter_map(|e| e.manager).collect();
    assert_eq!(managers, ["autoscaler", "operator"]);

    // Through the scale subresource: the Scale's replicas are the
    // Deployment's, owned by the same managers.
    let scale = serde_json::json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "kube-ssa"}, "spec": {"replicas": 6}});
    let err = deployments.patch_scale("kube-ssa", &PatchParams::apply("hpa"), &Patch::Apply(&scale)).await.unwrap_err();
    let kube::Error::Api(status) = err else { panic!("not an API error: {err:?}") };
    assert_eq!((status.code, status.message.as_str()), (409, "Apply failed with 1 conflict: conflict with \"autoscaler\": .spec.replicas"));
    let scaled = deployments.patch_scale("kube-ssa", &PatchParams::apply("hpa").force(), &Patch::Apply(&scale)).await.unwrap();
    assert_eq!(scaled.spec.and_then(|s| s.replicas), Some(6));
    let d = deployments.get("kube-ssa").await.unwrap();
    let owners: Vec<(String, String)> = d.metadata.managed_fields.unwrap_or_default().into_iter().map(|e| (e.manager.unwrap_or_default(), e.subresource.unwrap_or_default())).collect();
    assert_eq!(owners, [("operator".to_string(), String::new()), ("hpa".to_string(), "scale".to_string())], "the autoscaler owned nothing else");

    // Through the status subresource: only status changes, under its own entry.
    let status_cfg = serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "kube-ssa"}, "spec": {"replicas": 1}, "status": {"observedGeneration": 7}});
    let d = deployments.patch_status("kube-ssa", &PatchParams::apply("status-writer"), &Patch::Apply(&status_cfg)).await.unwrap();
    assert_eq!(d.status.and_then(|s| s.observed_generation), Some(7));
    assert_eq!(d.spec.and_then(|s| s.replicas), Some(6), "spec changed through /status");
    let entry = d.metadata.managed_fields.unwrap_or_default().into_iter().find(|e| e.manager.as_deref() == Some("status-writer")).expect("no status-writer entry");
    assert_eq!(entry.subresource.as_deref(), Some("status"));

    // A custom resource, through the dynamic API.
    let crd = serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "gadgets.kube.example.com"},
        "spec": {"group": "kube.example.com", "scope": "Namespaced", "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
                 "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                     "spec": {"type": "object", "properties": {"size": {"type": "integer"}, "color": {"type": "string"}}}}}}}]},
    });
    let crds: Api<DynamicObject> =
        Api::all_with(c.clone(), &ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"), "customresourcedefinitions"));
    crds.patch("gadgets.kube.example.com", &PatchParams::apply("setup"), &Patch::Apply(&crd)).await.unwrap();
    let gadgets: Api<DynamicObject> = Api::namespaced_with(c, "default", &ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("kube.example.com", "v1", "Gadget"), "gadgets"));
    let gadget = |size: i64| serde_json::json!({"apiVersion": "kube.example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}, "spec": {"size": size}});
    let mut created = None;
    for _ in 0..100 {
        match gadgets.patch("g", &PatchParams::apply("one"), &Patch::Apply(&gadget(1))).await {
            Ok(g) => {
                created = Some(g);
                break;
            }
            // Until the CRD is established its resource is not served.
            Err(kube::Error::Api(s)) if s.code == 404 => tokio::time::sleep(Duration::from_millis(100)).await,
            Err(e) => panic!("{e:?}"),
        }
    }
    assert_eq!(created.expect("the CRD was never served").data["spec"]["size"], 1);
    let err = gadgets.patch("g", &PatchParams::apply("two"), &Patch::Apply(&gadget(2))).await.unwrap_err();
    let kube::Error::Api(status) = err else { panic!("not an API error: {err:?}") };
    assert_eq!((status.code, status.message.as_str()), (409, "Apply failed with 1 conflict: conflict with \"one\": .spec.size"));
    let forced = gadgets.patch("g", &PatchParams::apply("two").force(), &Patch::Apply(&gadget(2))).await.unwrap();
    assert_eq!(forced.data["spec"]["size"], 2);
}
