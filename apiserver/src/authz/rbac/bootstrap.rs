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
const EVENTS: &[&str] = &["create", "patch", "update"];
const CERTS: &str = "certificates.k8s.io";
const READ_WRITE: &[&str] = &["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];

fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> Value {
    json!({"apiGroups": groups, "resources": resources, "verbs": verbs})
}

fn named(verbs: &[&str], groups: &[&str], resources: &[&str], names: &[&str]) -> Value {
    json!({"apiGroups": groups, "resources": resources, "resourceNames": names, "verbs": verbs})
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
    binding_of(name, subjects)
}

/// A bootstrap ClusterRoleBinding of the ClusterRole `name` to users.
fn bind_users(name: &str, users: &[&str]) -> Value {
    binding_of(name, users.iter().map(|u| json!({"apiGroup": GROUP, "kind": "User", "name": u})).collect())
}

/// A bootstrap ClusterRoleBinding of the ClusterRole `name`; no
/// `subjects` field when there are none, as kube writes it.
fn binding_of(name: &str, subjects: Vec<Value>) -> Value {
    let mut b = json!({
        "apiVersion": format!("{GROUP}/v1"),
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name, "labels": {BOOTSTRAPPING.0: BOOTSTRAPPING.1}, "annotations": {AUTOUPDATE: "true"}},
        "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": name},
    });
    if !subjects.is_empty() {
        b["subjects"] = json!(subjects);
    }
    b
}

/// The rules of `system:node`, what a kubelet may do (the Node authorizer
/// narrows the object-level ones to the objects of its own node).
pub fn node_rules() -> Vec<Value> {
    vec![
        rule(&["create"], &["authentication.k8s.io"], &["tokenreviews"]),
        rule(&["create"], &["authorization.k8s.io"], &["localsubjectaccessreviews", "subjectaccessreviews"]),
        rule(READ, &[""], &["services"]),
        rule(&["create", "get", "list", "watch"], &[""], &["nodes"]),
        rule(&["patch", "update"], &[""], &["nodes/status"]),
        rule(&["patch", "update"], &[""], &["nodes"]),
        rule(EVENTS, &[""], &["events"]),
        rule(READ, &[""], &["pods"]),
        rule(&["create", "delete"], &[""], &["pods"]),
        rule(&["patch", "update"], &[""], &["pods/status"]),
        rule(&["create"], &[""], &["pods/eviction"]),
        rule(READ, &[""], &["configmaps", "secrets"]),
        rule(&["get"], &[""], &["persistentvolumeclaims", "persistentvolumes"]),
        rule(&["get"], &[""], &["endpoints"]),
        rule(&["create", "get", "list", "watch"], &[CERTS], &["certificatesigningrequests"]),
        rule(&["create", "delete", "get", "patch", "update"], &["coordination.k8s.io"], &["leases"]),
        rule(&["get"], &["storage.k8s.io"], &["volumeattachments"]),
        rule(&["create"], &[""], &["serviceaccounts/token"]),
        rule(&["get", "patch", "update"], &[""], &["persistentvolumeclaims/status"]),
        rule(READ, &["storage.k8s.io"], &["csidrivers"]),
        rule(&["create", "delete", "get", "patch", "update"], &["storage.k8s.io"], &["csinodes"]),
        rule(READ, &["node.k8s.io"], &["runtimeclasses"]),
    ]
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
        cluster_role("system:certificates.k8s.io:certificatesigningrequests:nodeclient", &[], vec![rule(&["create"], &[CERTS], &["certificatesigningrequests/nodeclient"])], None),
        cluster_role("system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", &[], vec![rule(&["create"], &[CERTS], &["certificatesigningrequests/selfnodeclient"])], None),
        cluster_role("system:certificates.k8s.io:kube-apiserver-client-approver", &[], vec![named(&["approve"], &[CERTS], &["signers"], &["kubernetes.io/kube-apiserver-client"])], None),
        cluster_role(
            "system:certificates.k8s.io:kube-apiserver-client-kubelet-approver",
            &[],
            vec![named(&["approve"], &[CERTS], &["signers"], &["kubernetes.io/kube-apiserver-client-kubelet"])],
            None,
        ),
        cluster_role("system:certificates.k8s.io:kubelet-serving-approver", &[], vec![named(&["approve"], &[CERTS], &["signers"], &["kubernetes.io/kubelet-serving"])], None),
        cluster_role("system:certificates.k8s.io:legacy-unknown-approver", &[], vec![named(&["approve"], &[CERTS], &["signers"], &["kubernetes.io/legacy-unknown"])], None),
        cluster_role("system:heapster", &[], vec![rule(READ, &[""], &["events", "namespaces", "nodes", "pods"]), rule(READ, &["extensions"], &["deployments"])], None),
        cluster_role("system:kube-aggregator", &[], vec![rule(READ, &[""], &["endpoints", "services"])], None),
        cluster_role(
            "system:kube-controller-manager",
            &[],
            vec![
                rule(EVENTS, &["", "events.k8s.io"], &["events"]),
                rule(&["create"], &["coordination.k8s.io"], &["leases"]),
                named(&["get", "update"], &["coordination.k8s.io"], &["leases"], &["kube-controller-manager"]),
                rule(&["create"], &[""], &["secrets", "serviceaccounts"]),
                rule(&["delete"], &[""], &["secrets"]),
                rule(&["get"], &[""], &["configmaps", "namespaces", "secrets", "serviceaccounts"]),
                rule(&["update"], &[""], &["secrets", "serviceaccounts"]),
                rule(&["create"], &["authentication.k8s.io"], &["tokenreviews"]),
                rule(&["create"], &["authorization.k8s.io"], &["subjectaccessreviews"]),
                rule(&["list", "watch"], &["*"], &["*"]),
                rule(&["create"], &[""], &["serviceaccounts/token"]),
            ],
            None,
        ),
        cluster_role("system:kube-dns", &[], vec![rule(&["list", "watch"], &[""], &["endpoints", "services"])], None),
        cluster_role(
            "system:kube-scheduler",
            &[],
            vec![
                rule(EVENTS, &["", "events.k8s.io"], &["events"]),
                rule(&["create"], &["coordination.k8s.io"], &["leases"]),
                named(&["get", "update"], &["coordination.k8s.io"], &["leases"], &["kube-scheduler"]),
                rule(READ, &[""], &["nodes"]),
                rule(&["delete", "get", "list", "watch"], &[""], &["pods"]),
                rule(&["create"], &[""], &["bindings", "pods/binding"]),
                rule(&["patch", "update"], &[""], &["pods/status"]),
                rule(READ, &[""], &["replicationcontrollers", "services"]),
                rule(READ, &["apps", "extensions"], &["replicasets"]),
                rule(READ, &["apps"], &["statefulsets"]),
                rule(READ, &["policy"], &["poddisruptionbudgets"]),
                rule(READ, &[""], &["persistentvolumeclaims", "persistentvolumes"]),
                rule(&["create"], &["authentication.k8s.io"], &["tokenreviews"]),
                rule(&["create"], &["authorization.k8s.io"], &["subjectaccessreviews"]),
                rule(READ, &["storage.k8s.io"], &["csinodes"]),
                rule(READ, &[""], &["namespaces"]),
                rule(READ, &["storage.k8s.io"], &["csidrivers"]),
                rule(READ, &["storage.k8s.io"], &["csistoragecapacities"]),
            ],
            None,
        ),
        cluster_role(
            "system:kubelet-api-admin",
            &[],
            vec![rule(READ, &[""], &["nodes"]), rule(&["proxy"], &[""], &["nodes"]), rule(&["*"], &[""], &["nodes/log", "nodes/metrics", "nodes/proxy", "nodes/stats"])],
            None,
        ),
        cluster_role("system:monitoring", &[], vec![urls(&["get"], &["/healthz", "/healthz/*", "/livez", "/livez/*", "/metrics", "/metrics/slis", "/readyz", "/readyz/*"])], None),
        cluster_role("system:node", &[], node_rules(), None),
        cluster_role("system:node-bootstrapper", &[], vec![rule(&["create", "get", "list", "watch"], &[CERTS], &["certificatesigningrequests"])], None),
        cluster_role("system:node-problem-detector", &[], vec![rule(&["get"], &[""], &["nodes"]), rule(&["patch"], &[""], &["nodes/status"]), rule(EVENTS, &["", "events.k8s.io"], &["events"])], None),
        cluster_role(
            "system:node-proxier",
            &[],
            vec![
                rule(&["list", "watch"], &[""], &["endpoints", "services"]),
                rule(READ, &[""], &["nodes"]),
                rule(EVENTS, &["", "events.k8s.io"], &["events"]),
                rule(&["list", "watch"], &["discovery.k8s.io"], &["endpointslices"]),
            ],
            None,
        ),
        cluster_role(
            "system:persistent-volume-provisioner",
            &[],
            vec![
                rule(&["create", "delete", "get", "list", "watch"], &[""], &["persistentvolumes"]),
                rule(&["get", "list", "update", "watch"], &[""], &["persistentvolumeclaims"]),
                rule(READ, &["storage.k8s.io"], &["storageclasses"]),
                rule(&["watch"], &[""], &["events"]),
                rule(EVENTS, &["", "events.k8s.io"], &["events"]),
            ],
            None,
        ),
        cluster_role("system:public-info-viewer", &[], vec![urls(&["get"], &["/healthz", "/livez", "/readyz", "/version", "/version/"])], None),
        cluster_role("system:service-account-issuer-discovery", &[], vec![urls(&["get"], &["/.well-known/openid-configuration", "/openid/v1/jwks"])], None),
        cluster_role(
            "system:volume-scheduler",
            &[],
            vec![
                rule(&["get", "list", "patch", "update", "watch"], &[""], &["persistentvolumes"]),
                rule(READ, &["storage.k8s.io"], &["storageclasses"]),
                rule(&["get", "list", "patch", "update", "watch"], &[""], &["persistentvolumeclaims"]),
            ],
            None,
        ),
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
        bind_users("system:kube-controller-manager", &["system:kube-controller-manager"]),
        binding_of("system:kube-dns", vec![json!({"kind": "ServiceAccount", "name": "kube-dns", "namespace": "kube-system"})]),
        bind_users("system:kube-scheduler", &["system:kube-scheduler"]),
        cluster_role_binding("system:monitoring", &["system:monitoring"]),
        // Nodes get their rights from the Node authorizer; kube keeps the
        // binding, without subjects.
        binding_of("system:node", Vec::new()),
        bind_users("system:node-proxier", &["system:kube-proxy"]),
        cluster_role_binding("system:public-info-viewer", &["system:authenticated", "system:unauthenticated"]),
        cluster_role_binding("system:service-account-issuer-discovery", &["system:serviceaccounts"]),
        binding_of("system:volume-scheduler", vec![json!({"apiGroup": GROUP, "kind": "User", "name": "system:kube-scheduler"})]),
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
