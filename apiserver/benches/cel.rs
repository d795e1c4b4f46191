//! Criterion benches of one CEL evaluation through `apiserver::cel`
//! (`Program::eval` with a fresh per-call budget, as admission policies and
//! CRD rules evaluate): a comparison on an object field, a string
//! function, an `all()` over a 100-item list, a quantity comparison, and a
//! CRD transition rule. The object is bound once; compiling is not
//! measured (it happens once per policy or CRD generation).
//!
//! `cargo bench --profile dev -p apiserver --bench cel -- --warm-up-time 1 --measurement-time 3`

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::json;

use apiserver::cel::{Activation, Budget, Program, PER_CALL_LIMIT};

fn vars() -> Activation {
    let containers: Vec<serde_json::Value> =
        (0..100).map(|i| json!({"name": format!("c{i}"), "image": format!("registry.example.com/app:{i}"), "resources": {"limits": {"memory": "512Mi"}}})).collect();
    let object = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web", "team": "platform"}},
        "spec": {"replicas": 3, "template": {"spec": {"containers": containers}}, "memory": "2Gi"}
    });
    let old = json!({"spec": {"replicas": 3, "model": {"name": "m"}}});
    let mut a = Activation::new();
    a.bind_json("object", &object);
    a.bind_json("self", &json!({"replicas": 3, "model": {"name": "m"}}));
    a.bind_json("oldSelf", &old["spec"]);
    a
}

fn eval(c: &mut Criterion) {
    let vars = vars();
    let cases = [
        ("field_comparison", "object.spec.replicas <= 5"),
        ("string_function", "object.metadata.name.startsWith('we') && object.metadata.labels.team.matches('^plat')"),
        ("all_over_100_items", "object.spec.template.spec.containers.all(c, c.image.startsWith('registry.example.com/'))"),
        ("quantity_comparison", "quantity(object.spec.memory).isLessThan(quantity('4Gi'))"),
        ("transition_rule", "self.model.name == oldSelf.model.name && self.replicas <= 8"),
    ];
    let mut g = c.benchmark_group("cel_eval");
    for (name, src) in cases {
        let p = Program::compile(src).unwrap();
        // Every case is true on the object: the measured path is a full
        // evaluation, not an early error.
        assert_eq!(p.eval_bool(&vars, &mut Budget::new(PER_CALL_LIMIT)), Ok(true), "{name}");
        g.bench_function(name, |b| b.iter(|| p.eval_bool(&vars, &mut Budget::new(PER_CALL_LIMIT))));
    }
    g.finish();
}

criterion_group!(benches, eval);
criterion_main!(benches);
