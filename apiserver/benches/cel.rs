//! Criterion benches of one CEL evaluation through `apiserver::cel`
//! (`Program::eval` with a fresh per-call budget, as admission policies and
//! CRD rules evaluate): a comparison on an object field, a string
//! function, an `all()` over a 100-item list and a quantity comparison on
//! a 100-container Deployment bound as `object`, a constant on the same
//! binding (the floor: `cel` converts every bound variable into its own
//! value representation on each evaluation), and CRD rules on a small
//! `self`/`oldSelf`. Compiling is not measured (it happens once per policy
//! or CRD generation).
//!
//! `cargo bench --profile dev -p apiserver --bench cel -- --warm-up-time 1 --measurement-time 3`

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::json;

use apiserver::cel::{Activation, Budget, Program, PER_CALL_LIMIT};

/// A Deployment with 100 containers, bound as `object` (what admission
/// policies see).
fn deployment() -> Activation {
    let containers: Vec<serde_json::Value> =
        (0..100).map(|i| json!({"name": format!("c{i}"), "image": format!("registry.example.com/app:{i}"), "resources": {"limits": {"memory": "512Mi"}}})).collect();
    let object = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web", "team": "platform"}},
        "spec": {"replicas": 3, "template": {"spec": {"containers": containers}}, "memory": "2Gi"}
    });
    let mut a = Activation::new();
    a.bind_json("object", &object);
    a
}

/// A CRD rule's node: a small `spec` as `self` and `oldSelf`.
fn spec_node() -> Activation {
    let spec = json!({"replicas": 3, "model": {"name": "m"}, "memory": "2Gi"});
    let mut a = Activation::new();
    a.bind_json("self", &spec);
    a.bind_json("oldSelf", &spec);
    a
}

fn eval(c: &mut Criterion) {
    let (big, small) = (deployment(), spec_node());
    let cases = [
        // The floor: binding the 100-container object for one evaluation.
        ("constant_with_deployment_bound", "true", &big),
        ("field_comparison", "object.spec.replicas <= 5", &big),
        ("string_function", "object.metadata.name.startsWith('we') && object.metadata.labels.team.matches('^plat')", &big),
        ("all_over_100_items", "object.spec.template.spec.containers.all(c, c.image.startsWith('registry.example.com/'))", &big),
        ("quantity_comparison", "quantity(object.spec.memory).isLessThan(quantity('4Gi'))", &big),
        ("crd_field_comparison", "self.replicas <= 8", &small),
        ("crd_transition_rule", "self.model.name == oldSelf.model.name && self.replicas <= 8", &small),
        ("crd_quantity_comparison", "quantity(self.memory).isLessThan(quantity('4Gi'))", &small),
    ];
    let mut g = c.benchmark_group("cel_eval");
    for (name, src, vars) in cases {
        let p = Program::compile(src).unwrap();
        // Every case is true: the measured path is a full evaluation, not
        // an early error.
        assert_eq!(p.eval_bool(vars, &mut Budget::new(PER_CALL_LIMIT)), Ok(true), "{name}");
        g.bench_function(name, |b| b.iter(|| p.eval_bool(vars, &mut Budget::new(PER_CALL_LIMIT))));
    }
    g.finish();
}

criterion_group!(benches, eval);
criterion_main!(benches);
