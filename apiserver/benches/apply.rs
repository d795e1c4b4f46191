//! Criterion benches of server-side apply's core (`fieldmanager::apply`):
//! a first apply (create) and a re-apply with one change, on a Pod with 50
//! containers and on a ConfigMap with 500 keys.
//!
//! `cargo bench --profile dev -p apiserver --bench apply -- --warm-up-time 1 --measurement-time 3`

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::{json, Value};

use apiserver::fieldmanager::{apply, ApplyRequest, Scope};
use apiserver::schema::SchemaStore;

fn pod(image_tag: u32) -> Value {
    let containers: Vec<Value> = (0..50)
        .map(|i| json!({"name": format!("c{i}"), "image": format!("registry.example.com/app:{}", if i == 0 { image_tag } else { 1 }), "ports": [{"containerPort": 8000 + i}], "env": [{"name": "A", "value": "1"}], "args": ["--x", "--y"]}))
        .collect();
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "d", "labels": {"app": "p"}}, "spec": {"containers": containers}})
}

fn configmap(first: &str) -> Value {
    let data: serde_json::Map<String, Value> = (0..500).map(|i| (format!("key{i:03}"), json!(if i == 0 { first.to_string() } else { format!("value{i}") }))).collect();
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d"}, "data": data})
}

fn bench(c: &mut Criterion) {
    let store = SchemaStore::builtin();
    let pod_schema = store.of_kind("", "v1", "Pod");
    let cm_schema = store.of_kind("", "v1", "ConfigMap");
    let req =
        |api: &'static str, kind: &'static str, scope| ApplyRequest { manager: "bench", api_version: api, kind, subresource: "", scope, force: false, now: "2026-01-01T00:00:00Z", versions: None };

    let pr = req("v1", "Pod", Scope::NoStatus);
    let (p1, p2) = (pod(1), pod(2));
    let live_pod = apply(pod_schema.as_ref(), None, &p1, &pr).unwrap();
    c.bench_function("apply/pod-50-containers/create", |b| b.iter(|| apply(pod_schema.as_ref(), None, &p1, &pr).unwrap()));
    c.bench_function("apply/pod-50-containers/reapply-one-change", |b| b.iter(|| apply(pod_schema.as_ref(), Some(&live_pod), &p2, &pr).unwrap()));

    let cr = req("v1", "ConfigMap", Scope::All);
    let (c1, c2) = (configmap("a"), configmap("b"));
    let live_cm = apply(cm_schema.as_ref(), None, &c1, &cr).unwrap();
    c.bench_function("apply/configmap-500-keys/create", |b| b.iter(|| apply(cm_schema.as_ref(), None, &c1, &cr).unwrap()));
    c.bench_function("apply/configmap-500-keys/reapply-one-change", |b| b.iter(|| apply(cm_schema.as_ref(), Some(&live_cm), &c2, &cr).unwrap()));
}

criterion_group!(benches, bench);
criterion_main!(benches);
