//! criterion bench of RBAC authorization per request as the number of
//! bindings grows (issue 18): 10, 1,000 and 10,000 RoleBindings spread
//! over 100 namespaces, each granting one user a Role, plus kube's
//! bootstrap ClusterRoles and ClusterRoleBindings.
//!
//! Each size asks three questions of the authorizer, as the HTTP filter
//! does for every request:
//! - `allowed`: a bound user reads pods in its namespace;
//! - `denied`: the same user deletes a secret (RBAC has no opinion, after
//!   looking at every binding that names the user or one of its groups);
//! - `unbound`: a user no binding names lists pods.
//!
//! kube's RBAC authorizer walks every ClusterRoleBinding and every
//! RoleBinding of the namespace on each request; this one looks bindings
//! up by subject, so the figures should not grow with the count.
//!
//! Run: `cargo bench -p bench --bench authz`.

use apiserver::authn::UserInfo;
use apiserver::authz::rbac::{bootstrap, Kind, Rbac};
use apiserver::authz::{Attributes, Authorizer, Decision};
use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::json;

const NAMESPACES: usize = 100;

/// An authorizer with `bindings` RoleBindings (user `user-i` in namespace
/// `ns-(i % 100)` bound to that namespace's `pod-reader`) and the
/// bootstrap policy.
fn authorizer(bindings: usize) -> Rbac {
    let r = Rbac::new();
    for role in bootstrap::cluster_roles() {
        r.apply(Kind::ClusterRole, &role, false);
    }
    for binding in bootstrap::cluster_role_bindings() {
        r.apply(Kind::ClusterRoleBinding, &binding, false);
    }
    for n in 0..NAMESPACES {
        let role = json!({"metadata": {"namespace": format!("ns-{n}"), "name": "pod-reader"}, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]});
        r.apply(Kind::Role, &role, false);
    }
    for i in 0..bindings {
        let b = json!({
            "metadata": {"namespace": format!("ns-{}", i % NAMESPACES), "name": format!("read-pods-{i}")},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
            "subjects": [{"kind": "User", "name": format!("user-{i}")}, {"kind": "Group", "name": format!("team-{}", i % 50)}],
        });
        r.apply(Kind::RoleBinding, &b, false);
    }
    r
}

fn user(name: &str) -> UserInfo {
    UserInfo { name: name.into(), groups: vec!["team-7".into(), "system:authenticated".into()], ..Default::default() }
}

fn attrs<'a>(u: &'a UserInfo, verb: &'a str, resource: &'a str, ns: &'a str) -> Attributes<'a> {
    Attributes { user: u, verb, resource_request: true, path: "", namespace: ns, api_group: "", api_version: "v1", resource, subresource: "", name: "" }
}

fn decide(r: &Rbac, a: &Attributes<'_>) -> Decision {
    futures::executor::block_on(r.authorize(a)).map(|d| d.decision).unwrap_or(Decision::Deny)
}

fn bench_authorize(c: &mut Criterion) {
    let mut g = c.benchmark_group("rbac_authorize");
    for bindings in [10usize, 1_000, 10_000] {
        let r = authorizer(bindings);
        // user-3 is bound in ns-3 (every size has at least 10 bindings).
        let bound = user("user-3");
        let unbound = user("nobody");
        let allowed = attrs(&bound, "list", "pods", "ns-3");
        let denied = attrs(&bound, "delete", "secrets", "ns-3");
        let stranger = attrs(&unbound, "list", "pods", "ns-3");
        assert_eq!(decide(&r, &allowed), Decision::Allow);
        assert_eq!(decide(&r, &denied), Decision::NoOpinion);
        // nobody is in team-7, which is bound in ns-7, not ns-3.
        assert_eq!(decide(&r, &stranger), Decision::NoOpinion);
        g.bench_function(format!("allowed/{bindings}_bindings"), |b| b.iter(|| decide(&r, &allowed)));
        g.bench_function(format!("denied/{bindings}_bindings"), |b| b.iter(|| decide(&r, &denied)));
        g.bench_function(format!("unbound/{bindings}_bindings"), |b| b.iter(|| decide(&r, &stranger)));
    }
    g.finish();
}

criterion_group!(benches, bench_authorize);
criterion_main!(benches);
