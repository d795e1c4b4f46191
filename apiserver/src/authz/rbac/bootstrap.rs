//! The default RBAC policy and its reconciliation at start (kube
//! `plugin/pkg/auth/authorizer/rbac/bootstrappolicy` and
//! `pkg/registry/rbac/reconciliation`).
//!
//! The roles and bindings are those kube-apiserver 1.33 creates (rules as
//! its `testdata/cluster-roles.yaml` lists them), each labelled
//! `kubernetes.io/bootstrapping: rbac-defaults` and annotated
//! `rbac.authorization.kubernetes.io/autoupdate: "true"`. Reconciling one
//! against what is stored ([`reconcile`]), as kube does on every start:
//!
//! - missing: created;
//! - annotated `autoupdate: "false"`: left alone, whatever it says;
//! - otherwise labels and annotations it lacks are added (its own values
//!   win), rules it lacks are added (as kube's `Covers` breaks them down,
//!   one verb, group and resource each), aggregation selectors it lacks are
//!   added, subjects it lacks are added; nothing is removed;
//! - a binding whose `roleRef` differs is deleted and created again
//!   (`roleRef` cannot be updated).
//!
//! `admin`, `edit` and `view` have no rules of their own: they aggregate
//! the ClusterRoles labelled `rbac.authorization.k8s.io/aggregate-to-*`,
//! among them `system:aggregate-to-{admin,edit,view}`, which hold kube's
//! rules.

use serde_json::{json, Value};

use super::rules::{covers, PolicyRule};
use super::GROUP;

/// The annotation that, set to `"false"`, keeps reconciliation off an
/// object.
pub const AUTOUPDATE: &str = "rbac.authorization.kubernetes.io/autoupdate";
/// The label of every bootstrap object.
pub const BOOTSTRAPPING: (&str, &str) = ("kubernetes.io/bootstrapping", "rbac-defaults");

const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &["create", "delete", "deletecollection", "patch", "update"];
const READ_WRITE: &[&str] = &["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];

fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> Value {
    json!({"apiGroups": groups, "resources": resources, "verbs": verbs})
}

fn urls(verbs: &[&str], urls: &[&str]) -> Value {
    json!({"nonResourceURLs": urls, "verbs": verbs})
}

fn cluster_role(name: &str, labels: &[(&str, &str)], rules: Vec<Value>, aggregate_to: Option<&str>) -> Value {
    let mut l = serde_json::Map::new();
    l.insert(BOOTSTRAPPING.0.into(), json!(BOOTSTRAPPING.1));
    for (k, v) in labels {
        l.insert((*k).into(), json!(v));
    }
    let mut role = json!({
        "apiVersion": format!("{GROUP}/v1"),
        "kind": "ClusterRole",
        "metadata": {"name": name, "labels": l, "annotations": {AUTOUPDATE: "true"}},
    });
    match aggregate_to {
        Some(sel) => role["aggregationRule"] = json!({"clusterRoleSelectors": [{"matchLabels": {format!("rbac.authorization.k8s.io/aggregate-to-{sel}"): "true"}}]}),
        None => role["rules"] = json!(rules),
    }
    role
}

fn cluster_role_binding(name: &str, groups: &[&str]) -> Value {
    let subjects: Vec<Value> = groups.iter().map(|g| json!({"apiGroup": GROUP, "kind": "Group", "name": g})).collect();
    json!({
        "apiVersion": format!("{GROUP}/v1"),
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name, "labels": {BOOTSTRAPPING.0: BOOTSTRAPPING.1}, "annotations": {AUTOUPDATE: "true"}},
        "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": name},
        "subjects": subjects,
    })
}

/// The bootstrap ClusterRoles.
pub fn cluster_roles() -> Vec<Value> {
    const TO_ADMIN: (&str, &str) = ("rbac.authorization.k8s.io/aggregate-to-admin", "true");
    const TO_EDIT: (&str, &str) = ("rbac.authorization.k8s.io/aggregate-to-edit", "true");
    const TO_VIEW: (&str, &str) = ("rbac.authorization.k8s.io/aggregate-to-view", "true");
    vec![
        cluster_role("admin", &[], vec![], Some("admin")),
        cluster_role("cluster-admin", &[], vec![rule(&["*"], &["*"], &["*"]), urls(&["*"], &["*"])], None),
        cluster_role("edit", &[TO_ADMIN], vec![], Some("edit")),
        cluster_role(
            "system:aggregate-to-admin",
            &[TO_ADMIN],
            vec![rule(&["create"], &["authorization.k8s.io"], &["localsubjectaccessreviews"]), rule(READ_WRITE, &[GROUP], &["rolebindings", "roles"])],
            None,
        ),
        cluster_role(
            "system:aggregate-to-edit",
            &[TO_EDIT],
            vec![
                rule(READ, &[""], &["pods/attach", "pods/exec", "pods/portforward", "pods/proxy", "secrets", "services/proxy"]),
                rule(&["impersonate"], &[""], &["serviceaccounts"]),
                rule(WRITE, &[""], &["pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy"]),
                rule(&["create"], &[""], &["pods/eviction"]),
                rule(
                    WRITE,
                    &[""],
                    &["configmaps", "events", "persistentvolumeclaims", "replicationcontrollers", "replicationcontrollers/scale", "secrets", "serviceaccounts", "services", "services/proxy"],
                ),
                rule(&["create"], &[""], &["serviceaccounts/token"]),
                rule(WRITE, &["apps"], &["daemonsets", "deployments", "deployments/rollback", "deployments/scale", "replicasets", "replicasets/scale", "statefulsets", "statefulsets/scale"]),
                rule(WRITE, &["autoscaling"], &["horizontalpodautoscalers"]),
                rule(WRITE, &["batch"], &["cronjobs", "jobs"]),
                rule(
                    WRITE,
                    &["extensions"],
                    &["daemonsets", "deployments", "deployments/rollback", "deployments/scale", "ingresses", "networkpolicies", "replicasets", "replicasets/scale", "replicationcontrollers/scale"],
                ),
                rule(WRITE, &["policy"], &["poddisruptionbudgets"]),
                rule(WRITE, &["networking.k8s.io"], &["ingresses", "networkpolicies"]),
                rule(READ_WRITE, &["coordination.k8s.io"], &["leases"]),
            ],
            None,
        ),
        cluster_role(
            "system:aggregate-to-view",
            &[TO_VIEW],
            vec![
                rule(
                    READ,
                    &[""],
                    &[
                        "configmaps",
                        "endpoints",
                        "persistentvolumeclaims",
                        "persistentvolumeclaims/status",
                        "pods",
                        "replicationcontrollers",
                        "replicationcontrollers/scale",
                        "serviceaccounts",
                        "services",
                        "services/status",
                    ],
                ),
                rule(READ, &[""], &["bindings", "events", "limitranges", "namespaces/status", "pods/log", "pods/status", "replicationcontrollers/status", "resourcequotas", "resourcequotas/status"]),
                rule(READ, &[""], &["namespaces"]),
                rule(READ, &["discovery.k8s.io"], &["endpointslices"]),
                rule(
                    READ,
                    &["apps"],
                    &[
                        "controllerrevisions",
                        "daemonsets",
                        "daemonsets/status",
                        "deployments",
                        "deployments/scale",
                        "deployments/status",
                        "replicasets",
                        "replicasets/scale",
                        "replicasets/status",
                        "statefulsets",
                        "statefulsets/scale",
                        "statefulsets/status",
                    ],
                ),
                rule(READ, &["autoscaling"], &["horizontalpodautoscalers", "horizontalpodautoscalers/status"]),
                rule(READ, &["batch"], &["cronjobs", "cronjobs/status", "jobs", "jobs/status"]),
                rule(
                    READ,
                    &["extensions"],
                    &[
                        "daemonsets",
                        "daemonsets/status",
                        "deployments",
                        "deployments/scale",
                        "deployments/status",
                        "ingresses",
                        "ingresses/status",
                        "networkpolicies",
                        "replicasets",
                        "replicasets/scale",
                        "replicasets/status",
                        "replicationcontrollers/scale",
                    ],
                ),
                rule(READ, &["policy"], &["poddisruptionbudgets", "poddisruptionbudgets/status"]),
                rule(READ, &["networking.k8s.io"], &["ingresses", "ingresses/status", "networkpolicies"]),
            ],
            None,
        ),
        cluster_role(
            "system:auth-delegator",
            &[],
            vec![rule(&["create"], &["authentication.k8s.io"], &["tokenreviews"]), rule(&["create"], &["authorization.k8s.io"], &["subjectaccessreviews"])],
            None,
        ),
        cluster_role(
            "system:basic-user",
            &[],
            vec![rule(&["create"], &["authorization.k8s.io"], &["selfsubjectaccessreviews", "selfsubjectrulesreviews"]), rule(&["create"], &["authentication.k8s.io"], &["selfsubjectreviews"])],
            None,
        ),
        cluster_role("system:discovery", &[], vec![urls(&["get"], &["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz", "/version", "/version/"])], None),
        cluster_role("system:monitoring", &[], vec![urls(&["get"], &["/healthz", "/healthz/*", "/livez", "/livez/*", "/metrics", "/metrics/slis", "/readyz", "/readyz/*"])], None),
        cluster_role("system:public-info-viewer", &[], vec![urls(&["get"], &["/healthz", "/livez", "/readyz", "/version", "/version/"])], None),
        cluster_role("system:service-account-issuer-discovery", &[], vec![urls(&["get"], &["/.well-known/openid-configuration", "/openid/v1/jwks"])], None),
        cluster_role("view", &[TO_EDIT], vec![], Some("view")),
    ]
}

/// The bootstrap ClusterRoleBindings (each binds the ClusterRole of its
/// name).
pub fn cluster_role_bindings() -> Vec<Value> {
    vec![
        cluster_role_binding("cluster-admin", &["system:masters"]),
        cluster_role_binding("system:basic-user", &["system:authenticated"]),
        cluster_role_binding("system:discovery", &["system:authenticated"]),
        cluster_role_binding("system:monitoring", &["system:monitoring"]),
        cluster_role_binding("system:public-info-viewer", &["system:authenticated", "system:unauthenticated"]),
        cluster_role_binding("system:service-account-issuer-discovery", &["system:serviceaccounts"]),
    ]
}

/// What to do with one bootstrap object.
#[derive(Debug, Clone, PartialEq)]
pub enum Reconcile {
    /// It is as it should be, or annotated `autoupdate: "false"`.
    Keep,
    /// It is missing: create this.
    Create(Value),
    /// Update it to this (based on the stored object, resourceVersion
    /// kept).
    Update(Value),
    /// A binding with another `roleRef`: delete it and create this.
    Recreate(Value),
}

/// Whether `obj` is annotated `autoupdate: "false"`.
pub fn is_protected(obj: &Value) -> bool {
    obj["metadata"]["annotations"][AUTOUPDATE].as_str() == Some("false")
}

/// Adds to `existing[metadata][field]` the keys of `expected`'s that it
/// lacks; whether it changed.
fn merge_map(existing: &mut Value, expected: &Value, field: &str) -> bool {
    let Some(want) = expected["metadata"][field].as_object() else { return false };
    let mut changed = false;
    if !existing["metadata"][field].is_object() {
        existing["metadata"][field] = json!({});
    }
    if let Some(have) = existing["metadata"][field].as_object_mut() {
        for (k, v) in want {
            if !have.contains_key(k) {
                have.insert(k.clone(), v.clone());
                changed = true;
            }
        }
    }
    changed
}

/// The reconciliation of the bootstrap object `expected` (a ClusterRole or
/// ClusterRoleBinding) with the stored `existing`.
pub fn reconcile(existing: Option<&Value>, expected: &Value) -> Reconcile {
    let Some(existing) = existing else { return Reconcile::Create(expected.clone()) };
    if is_protected(existing) {
        return Reconcile::Keep;
    }
    let mut out = existing.clone();
    let mut changed = merge_map(&mut out, expected, "annotations") | merge_map(&mut out, expected, "labels");
    if expected["kind"] == "ClusterRoleBinding" {
        if existing["roleRef"] != expected["roleRef"] {
            return Reconcile::Recreate(expected.clone());
        }
        let have = existing["subjects"].as_array().cloned().unwrap_or_default();
        let same = |a: &Value, b: &Value| a["kind"] == b["kind"] && a["name"] == b["name"] && a["namespace"] == b["namespace"];
        let missing: Vec<Value> = expected["subjects"].as_array().into_iter().flatten().filter(|s| !have.iter().any(|h| same(h, s))).cloned().collect();
        if !missing.is_empty() {
            out["subjects"] = json!(have.into_iter().chain(missing).collect::<Vec<_>>());
            changed = true;
        }
    } else {
        let (_, missing) = covers(&PolicyRule::all_from(existing), &PolicyRule::all_from(expected));
        if !missing.is_empty() {
            let mut rules = existing["rules"].as_array().cloned().unwrap_or_default();
            rules.extend(missing.iter().map(PolicyRule::to_json));
            out["rules"] = json!(rules);
            changed = true;
        }
        let want = &expected["aggregationRule"]["clusterRoleSelectors"];
        if let Some(want) = want.as_array() {
            let have = existing["aggregationRule"]["clusterRoleSelectors"].as_array().cloned().unwrap_or_default();
            let missing: Vec<Value> = want.iter().filter(|w| !have.contains(w)).cloned().collect();
            if !missing.is_empty() {
                out["aggregationRule"] = json!({"clusterRoleSelectors": have.into_iter().chain(missing).collect::<Vec<_>>()});
                changed = true;
            }
        } else if existing.get("aggregationRule").is_some_and(|a| !a.is_null()) {
            if let Some(m) = out.as_object_mut() {
                m.remove("aggregationRule");
            }
            changed = true;
        }
    }
    if changed {
        Reconcile::Update(out)
    } else {
        Reconcile::Keep
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find<'a>(objs: &'a [Value], name: &str) -> &'a Value {
        objs.iter().find(|o| o["metadata"]["name"] == name).unwrap_or(&Value::Null)
    }

    #[test]
    fn policy_has_kube_roles_and_bindings() {
        let roles = cluster_roles();
        for name in ["cluster-admin", "admin", "edit", "view", "system:discovery", "system:basic-user", "system:public-info-viewer"] {
            assert_eq!(find(&roles, name)["metadata"]["annotations"][AUTOUPDATE], "true", "{name}");
        }
        assert_eq!(find(&roles, "edit")["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-admin"], "true");
        assert_eq!(find(&roles, "view")["aggregationRule"]["clusterRoleSelectors"][0]["matchLabels"]["rbac.authorization.k8s.io/aggregate-to-view"], "true");
        let bindings = cluster_role_bindings();
        assert_eq!(find(&bindings, "cluster-admin")["subjects"], json!([{"apiGroup": GROUP, "kind": "Group", "name": "system:masters"}]));
        assert_eq!(find(&bindings, "system:public-info-viewer")["subjects"].as_array().map(Vec::len), Some(2));
    }

    #[test]
    fn reconciles_as_kube() {
        let expected = find(&cluster_roles(), "system:basic-user").clone();
        assert_eq!(reconcile(None, &expected), Reconcile::Create(expected.clone()));
        assert_eq!(reconcile(Some(&expected), &expected), Reconcile::Keep);

        // A user removed a rule and added a label: the rule comes back
        // (broken down), the label stays.
        let mut edited = expected.clone();
        edited["rules"] = json!([expected["rules"][0].clone()]);
        edited["metadata"]["labels"]["mine"] = json!("x");
        let Reconcile::Update(got) = reconcile(Some(&edited), &expected) else { panic!("no update") };
        assert_eq!(got["metadata"]["labels"]["mine"], "x");
        assert_eq!(got["rules"][1], json!({"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]}));

        // autoupdate: "false" keeps it as it is.
        edited["metadata"]["annotations"][AUTOUPDATE] = json!("false");
        assert_eq!(reconcile(Some(&edited), &expected), Reconcile::Keep);

        // Bindings: subjects added, another roleRef recreated.
        let b = find(&cluster_role_bindings(), "system:public-info-viewer").clone();
        let mut fewer = b.clone();
        fewer["subjects"] = json!([b["subjects"][1].clone()]);
        let Reconcile::Update(got) = reconcile(Some(&fewer), &b) else { panic!("no update") };
        assert_eq!(got["subjects"].as_array().map(Vec::len), Some(2));
        let mut other = b.clone();
        other["roleRef"]["name"] = json!("view");
        assert_eq!(reconcile(Some(&other), &b), Reconcile::Recreate(b.clone()));
    }
}
