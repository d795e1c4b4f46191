//! `NodeRestriction` (kube `plugin/pkg/admission/noderestriction`): what a
//! kubelet (`system:node:<name>` in `system:nodes`) may write, narrowed to
//! its own node. Other users pass untouched.
//!
//! - Nodes: only its own Node; no change of taints; no label it sets or
//!   changes in the `kubernetes.io` / `k8s.io` namespaces outside the
//!   kubelet's own (`kubernetes.io/hostname`, `kubernetes.io/arch`,
//!   `kubernetes.io/os`, instance type, zone and region labels, and
//!   anything under `kubelet.kubernetes.io/` or `node.kubernetes.io/`),
//!   and none under `node-restriction.kubernetes.io/`.
//! - Pods: create only mirror pods (annotated `kubernetes.io/config.mirror`)
//!   bound to itself that reference no ServiceAccount, Secret, ConfigMap or
//!   PersistentVolumeClaim; delete and evict only pods bound to itself;
//!   update the status only of pods bound to itself; no other update.
//! - Leases in `kube-node-lease` and CSINodes: only of its own name.
//!
//! Refusals are kube's 403s, `<resource> "<name>" is forbidden: <why>`.

use async_trait::async_trait;
use serde_json::Value;

use super::{Attributes, Operation, Validating};
use crate::authz::node::{node_name, NODE_LEASE_NAMESPACE};
use crate::errors::Status;
use crate::meta;

/// The annotation of mirror pods (`kubernetes.io/config.mirror`).
pub const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// Labels a kubelet may set on its Node in the kube namespaces.
const KUBELET_LABELS: &[&str] = &[
    "kubernetes.io/hostname",
    "kubernetes.io/arch",
    "kubernetes.io/os",
    "beta.kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type",
    "failure-domain.beta.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone",
];

/// The plugin.
pub struct NodeRestriction;

/// Whether a kubelet may not set or change the label `key`.
fn forbidden_label(key: &str) -> bool {
    let Some((prefix, _)) = key.split_once('/') else { return false };
    let in_ns = |ns: &str| prefix == ns || prefix.ends_with(&format!(".{ns}"));
    if in_ns("node-restriction.kubernetes.io") {
        return true;
    }
    if in_ns("kubelet.kubernetes.io") || in_ns("node.kubernetes.io") || KUBELET_LABELS.contains(&key) {
        return false;
    }
    in_ns("kubernetes.io") || in_ns("k8s.io")
}

/// The labels of `new` added or changed from `old`, and those removed,
/// that a kubelet may not touch, sorted.
fn forbidden_labels(new: &Value, old: Option<&Value>) -> Vec<String> {
    let labels = |o: Option<&Value>| o.and_then(|o| o["metadata"]["labels"].as_object().cloned()).unwrap_or_default();
    let (new, old) = (labels(Some(new)), labels(old));
    let mut touched: Vec<String> = new.iter().filter(|(k, v)| old.get(*k) != Some(v)).map(|(k, _)| k.clone()).collect();
    touched.extend(old.keys().filter(|k| !new.contains_key(*k)).cloned());
    let mut out: Vec<String> = touched.into_iter().filter(|k| forbidden_label(k)).collect();
    out.sort();
    out.dedup();
    out
}

/// Whether a pod spec names a Secret, ConfigMap or PVC (image pull
/// secrets, volumes, env and envFrom of every container).
fn pod_references(pod: &Value) -> (bool, bool, bool) {
    let spec = &pod["spec"];
    let mut secrets = spec["imagePullSecrets"].as_array().is_some_and(|a| !a.is_empty());
    let mut configmaps = false;
    let mut claims = false;
    for v in spec["volumes"].as_array().into_iter().flatten() {
        secrets |= v["secret"].is_object();
        configmaps |= v["configMap"].is_object();
        claims |= v["persistentVolumeClaim"].is_object();
        for src in v["projected"]["sources"].as_array().into_iter().flatten() {
            secrets |= src["secret"].is_object();
            configmaps |= src["configMap"].is_object();
        }
    }
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        for c in spec[list].as_array().into_iter().flatten() {
            for e in c["envFrom"].as_array().into_iter().flatten() {
                secrets |= e["secretRef"].is_object();
                configmaps |= e["configMapRef"].is_object();
            }
            for e in c["env"].as_array().into_iter().flatten() {
                secrets |= e["valueFrom"]["secretKeyRef"].is_object();
                configmaps |= e["valueFrom"]["configMapKeyRef"].is_object();
            }
        }
    }
    (secrets, configmaps, claims)
}

impl NodeRestriction {
    fn forbid(attrs: &Attributes<'_>, name: &str, why: &str) -> Status {
        Status::forbidden_because(attrs.resource.group, attrs.resource.resource, name, why)
    }

    fn pod(node: &str, attrs: &Attributes<'_>) -> Result<(), Status> {
        let name = if attrs.name.is_empty() { attrs.object.as_ref().map(meta::name).unwrap_or("") } else { attrs.name };
        let bound_here = |o: Option<&Value>| o.is_some_and(|p| p["spec"]["nodeName"].as_str() == Some(node));
        let fail = |why: String| Err(Self::forbid(attrs, name, &why));
        match (attrs.subresource, attrs.operation) {
            ("", Operation::Create) => {
                let Some(pod) = attrs.object.as_ref() else { return Ok(()) };
                if pod["metadata"]["annotations"][MIRROR_POD_ANNOTATION].is_null() {
                    return fail(format!("pod does not have {MIRROR_POD_ANNOTATION:?} annotation, node {node:?} can only create mirror pods"));
                }
                if !bound_here(Some(pod)) {
                    return fail(format!("node {node:?} can only create pods with spec.nodeName set to itself"));
                }
                if pod["spec"]["serviceAccountName"].as_str().is_some_and(|s| !s.is_empty()) {
                    return fail(format!("node {node:?} can not create pods that reference a service account"));
                }
                let (secrets, configmaps, claims) = pod_references(pod);
                for (uses, what) in [(secrets, "secrets"), (configmaps, "configmaps"), (claims, "persistentvolumeclaims")] {
                    if uses {
                        return fail(format!("node {node:?} can not create pods that reference {what}"));
                    }
                }
                Ok(())
            }
            ("", Operation::Delete) => {
                if bound_here(attrs.old_object) {
                    Ok(())
                } else {
                    fail(format!("node {node:?} can only delete pods with spec.nodeName set to itself"))
                }
            }
            ("", op) => fail(format!("unexpected operation {:?}, node {node:?} can only create and delete mirror pods", op.as_str())),
            ("status", Operation::Update) => {
                if bound_here(attrs.old_object) {
                    Ok(())
                } else {
                    fail(format!("node {node:?} can only update pod status for pods with spec.nodeName set to itself"))
                }
            }
            ("eviction", Operation::Create) => {
                if bound_here(attrs.old_object) {
                    Ok(())
                } else {
                    fail(format!("node {node:?} can only evict pods with spec.nodeName set to itself"))
                }
            }
            _ => Ok(()),
        }
    }

    fn node(node: &str, attrs: &Attributes<'_>) -> Result<(), Status> {
        let name = if attrs.name.is_empty() { attrs.object.as_ref().map(meta::name).unwrap_or("") } else { attrs.name };
        if name != node {
            return Err(Self::forbid(attrs, name, &format!("node {node:?} is not allowed to modify node {name:?}")));
        }
        let Some(new) = attrs.object.as_ref() else { return Ok(()) };
        match attrs.operation {
            Operation::Create => {
                let bad = forbidden_labels(new, None);
                if !bad.is_empty() {
                    return Err(Self::forbid(attrs, name, &format!("node {node:?} is not allowed to set the following labels: {}", bad.join(", "))));
                }
            }
            Operation::Update => {
                let old = attrs.old_object;
                if old.is_some_and(|o| o["spec"]["taints"] != new["spec"]["taints"]) {
                    return Err(Self::forbid(attrs, name, &format!("node {node:?} is not allowed to modify taints")));
                }
                let bad = forbidden_labels(new, old);
                if !bad.is_empty() {
                    return Err(Self::forbid(attrs, name, &format!("is not allowed to modify labels: {}", bad.join(", "))));
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn own_name(node: &str, attrs: &Attributes<'_>, what: &str) -> Result<(), Status> {
        let name = if attrs.name.is_empty() { attrs.object.as_ref().map(meta::name).unwrap_or("") } else { attrs.name };
        if name != node {
            return Err(Self::forbid(attrs, name, &format!("can only access {what} with the same name as the requesting node")));
        }
        Ok(())
    }
}

#[async_trait]
impl Validating for NodeRestriction {
    fn name(&self) -> &'static str {
        "NodeRestriction"
    }

    fn handles(&self, op: Operation) -> bool {
        matches!(op, Operation::Create | Operation::Update | Operation::Delete)
    }

    async fn validate(&self, attrs: &Attributes<'_>) -> Result<(), Status> {
        let Some(node) = node_name(attrs.user) else { return Ok(()) };
        match (attrs.resource.group, attrs.resource.resource) {
            ("", "pods") => Self::pod(node, attrs),
            ("", "nodes") => Self::node(node, attrs),
            ("coordination.k8s.io", "leases") if attrs.namespace == NODE_LEASE_NAMESPACE => Self::own_name(node, attrs, "node lease"),
            ("storage.k8s.io", "csinodes") => Self::own_name(node, attrs, "CSINode"),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::admission::{Kind, Resource};
    use crate::authn::UserInfo;

    fn node_user(n: &str) -> UserInfo {
        UserInfo { name: format!("system:node:{n}"), groups: vec!["system:nodes".into()], ..Default::default() }
    }

    fn run(user: &UserInfo, op: Operation, resource: &str, sub: &str, name: &str, obj: Option<Value>, old: Option<&Value>) -> Result<(), String> {
        let opts = json!({});
        let warnings = crate::warning::Warnings::default();
        let attrs = Attributes {
            operation: op,
            name,
            namespace: "default",
            resource: Resource { group: "", version: "v1", resource },
            subresource: sub,
            kind: Kind { group: "", version: "v1", kind: "X" },
            request_kind: Kind { group: "", version: "v1", kind: "X" },
            object: obj,
            old_object: old,
            options: &opts,
            user,
            dry_run: false,
            warnings: &warnings,
            audit: None,
            reinvocation: false,
        };
        futures::executor::block_on(NodeRestriction.validate(&attrs)).map_err(|s| s.message)
    }

    #[test]
    fn kubelets_write_only_their_own_objects() {
        let n1 = node_user("n1");
        let mirror = json!({"metadata": {"name": "m", "annotations": {MIRROR_POD_ANNOTATION: "x"}}, "spec": {"nodeName": "n1", "containers": [{"name": "c"}]}});
        assert_eq!(run(&n1, Operation::Create, "pods", "", "m", Some(mirror.clone()), None), Ok(()));
        let plain = json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n1"}});
        assert_eq!(
            run(&n1, Operation::Create, "pods", "", "p", Some(plain), None),
            Err("pods \"p\" is forbidden: pod does not have \"kubernetes.io/config.mirror\" annotation, node \"n1\" can only create mirror pods".into())
        );
        let mut elsewhere = mirror.clone();
        elsewhere["spec"]["nodeName"] = json!("n2");
        assert!(run(&n1, Operation::Create, "pods", "", "m", Some(elsewhere.clone()), None).is_err_and(|e| e.ends_with("can only create pods with spec.nodeName set to itself")));
        let mut with_secret = mirror.clone();
        with_secret["spec"]["volumes"] = json!([{"name": "s", "secret": {"secretName": "x"}}]);
        assert!(run(&n1, Operation::Create, "pods", "", "m", Some(with_secret), None).is_err_and(|e| e.ends_with("can not create pods that reference secrets")));
        assert_eq!(run(&n1, Operation::Delete, "pods", "", "m", None, Some(&mirror)), Ok(()));
        assert!(run(&n1, Operation::Delete, "pods", "", "m", None, Some(&elsewhere)).is_err());
        assert_eq!(run(&n1, Operation::Update, "pods", "status", "m", Some(mirror.clone()), Some(&mirror)), Ok(()));
        assert!(run(&n1, Operation::Update, "pods", "", "m", Some(mirror.clone()), Some(&mirror)).is_err_and(|e| e.contains("unexpected operation \"UPDATE\"")));
        // Nodes: its own, no new kube labels, no taint changes.
        let node = json!({"metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1", "example.com/x": "y"}}});
        assert_eq!(run(&n1, Operation::Create, "nodes", "", "n1", Some(node.clone()), None), Ok(()));
        assert_eq!(run(&n1, Operation::Update, "nodes", "", "n2", Some(node.clone()), Some(&node)), Err("nodes \"n2\" is forbidden: node \"n1\" is not allowed to modify node \"n2\"".into()));
        let mut labelled = node.clone();
        labelled["metadata"]["labels"]["node-role.kubernetes.io/control-plane"] = json!("");
        labelled["metadata"]["labels"]["node.kubernetes.io/exclude"] = json!("");
        assert_eq!(
            run(&n1, Operation::Update, "nodes", "", "n1", Some(labelled), Some(&node)),
            Err("nodes \"n1\" is forbidden: is not allowed to modify labels: node-role.kubernetes.io/control-plane".into())
        );
        let mut tainted = node.clone();
        tainted["spec"]["taints"] = json!([{"key": "k", "effect": "NoSchedule"}]);
        assert!(run(&n1, Operation::Update, "nodes", "", "n1", Some(tainted), Some(&node)).is_err_and(|e| e.ends_with("is not allowed to modify taints")));
        // Anyone else is not this plugin's business.
        let admin = UserInfo { name: "admin".into(), ..Default::default() };
        assert_eq!(run(&admin, Operation::Update, "nodes", "", "n2", Some(node.clone()), Some(&node)), Ok(()));
    }
}
