//! `--authorization-mode=Node` (kube `plugin/pkg/auth/authorizer/node`):
//! what a kubelet may do, narrowed to the objects of its own node.
//!
//! A node is the user `system:node:<name>` in the group `system:nodes`
//! (kube's `nodeidentifier`); other users get no opinion. For a node:
//!
//! | request | allowed when |
//! |---|---|
//! | get secrets, configmaps, persistentvolumeclaims, persistentvolumes | a pod bound to the node uses the object (a PV through a PVC the pod uses) |
//! | create serviceaccounts/token | a pod bound to the node runs as that ServiceAccount |
//! | leases in `kube-node-lease` | the Lease has the node's name |
//! | csinodes | the CSINode has the node's name |
//! | get volumeattachments | the attachment is for the node |
//! | anything else | the rules of the `system:node` ClusterRole allow it |
//!
//! A refusal is "no opinion" with kube's reason, so a later mode (RBAC)
//! may still allow it, as in kube. What a node may write to Nodes and Pods
//! is narrowed further by the NodeRestriction admission plugin.
//!
//! The relationships come from a [`Graph`] of pods (and PVCs and
//! VolumeAttachments) by node, fed by informers (`controllers::node`), so
//! a request reads no storage.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use async_trait::async_trait;
use parking_lot::RwLock;
use serde_json::Value;

use super::rbac::rules::PolicyRule;
use super::{Attributes, Authorized, Authorizer, Decision, Result};
use crate::meta;

/// The user name prefix of nodes (`user.NodeUserNamePrefix`).
pub const NODE_USER_PREFIX: &str = "system:node:";
/// The group of nodes (`user.NodesGroup`).
pub const NODES_GROUP: &str = "system:nodes";
/// The namespace of node Leases.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

/// The node a user is, if it is one (kube `NodeIdentity`): a name with
/// the node prefix and membership in `system:nodes`.
pub fn node_name(user: &crate::authn::UserInfo) -> Option<&str> {
    let name = user.name.strip_prefix(NODE_USER_PREFIX)?;
    (user.groups.iter().any(|g| g == NODES_GROUP) && !name.is_empty()).then_some(name)
}

/// What a pod uses that its node may read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct PodRefs {
    node: String,
    namespace: String,
    service_account: String,
    secrets: HashSet<String>,
    configmaps: HashSet<String>,
    claims: HashSet<String>,
}

impl PodRefs {
    /// The references of a pod object (volumes, env and envFrom of every
    /// container, image pull secrets, its ServiceAccount).
    fn of(pod: &Value) -> Self {
        let spec = &pod["spec"];
        let mut r = PodRefs {
            node: spec["nodeName"].as_str().unwrap_or("").to_string(),
            namespace: meta::namespace(pod).to_string(),
            service_account: spec["serviceAccountName"].as_str().unwrap_or("").to_string(),
            ..Default::default()
        };
        let s = |v: &Value| v.as_str().filter(|x| !x.is_empty()).map(String::from);
        for p in spec["imagePullSecrets"].as_array().into_iter().flatten() {
            r.secrets.extend(s(&p["name"]));
        }
        for v in spec["volumes"].as_array().into_iter().flatten() {
            r.secrets.extend(s(&v["secret"]["secretName"]));
            r.configmaps.extend(s(&v["configMap"]["name"]));
            r.claims.extend(s(&v["persistentVolumeClaim"]["claimName"]));
            for src in v["projected"]["sources"].as_array().into_iter().flatten() {
                r.secrets.extend(s(&src["secret"]["name"]));
                r.configmaps.extend(s(&src["configMap"]["name"]));
            }
            for key in ["azureFile", "cephfs", "cinder", "flexVolume", "rbd", "scaleIO", "storageos", "iscsi", "csi"] {
                let v = &v[key];
                r.secrets.extend(s(&v["secretName"]));
                r.secrets.extend(s(&v["secretRef"]["name"]));
                r.secrets.extend(s(&v["nodePublishSecretRef"]["name"]));
            }
        }
        for list in ["initContainers", "containers", "ephemeralContainers"] {
            for c in spec[list].as_array().into_iter().flatten() {
                for e in c["envFrom"].as_array().into_iter().flatten() {
                    r.secrets.extend(s(&e["secretRef"]["name"]));
                    r.configmaps.extend(s(&e["configMapRef"]["name"]));
                }
                for e in c["env"].as_array().into_iter().flatten() {
                    r.secrets.extend(s(&e["valueFrom"]["secretKeyRef"]["name"]));
                    r.configmaps.extend(s(&e["valueFrom"]["configMapKeyRef"]["name"]));
                }
            }
        }
        r
    }
}

/// The objects each node may read, kept from pods, PVCs and
/// VolumeAttachments (kube's node graph, as plain indexes).
#[derive(Default)]
pub struct Graph {
    inner: RwLock<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Pods by `namespace/name`.
    pods: HashMap<String, PodRefs>,
    /// The PV of each PVC, by `namespace/name`.
    claim_volumes: HashMap<String, String>,
    /// The node of each VolumeAttachment, by name.
    attachments: HashMap<String, String>,
}

/// The object kinds the graph follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `pods`.
    Pod,
    /// `persistentvolumeclaims`.
    PersistentVolumeClaim,
    /// `storage.k8s.io` `volumeattachments`.
    VolumeAttachment,
}

impl Graph {
    /// An empty graph.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that `obj` of `source` now exists as given (`deleted`: that
    /// it is gone).
    pub fn apply(&self, source: Source, obj: &Value, deleted: bool) {
        let key = format!("{}/{}", meta::namespace(obj), meta::name(obj));
        let mut g = self.inner.write();
        match (source, deleted) {
            (Source::Pod, false) => {
                let refs = PodRefs::of(obj);
                if refs.node.is_empty() {
                    g.pods.remove(&key);
                } else {
                    g.pods.insert(key, refs);
                }
            }
            (Source::Pod, true) => {
                g.pods.remove(&key);
            }
            (Source::PersistentVolumeClaim, false) => {
                let pv = obj["spec"]["volumeName"].as_str().unwrap_or("").to_string();
                g.claim_volumes.insert(key, pv);
            }
            (Source::PersistentVolumeClaim, true) => {
                g.claim_volumes.remove(&key);
            }
            (Source::VolumeAttachment, false) => {
                g.attachments.insert(meta::name(obj).to_string(), obj["spec"]["nodeName"].as_str().unwrap_or("").to_string());
            }
            (Source::VolumeAttachment, true) => {
                g.attachments.remove(meta::name(obj));
            }
        }
    }

    /// Whether a pod bound to `node` in `namespace` matches `uses`.
    fn any_pod(&self, node: &str, namespace: &str, uses: impl Fn(&PodRefs) -> bool) -> bool {
        self.inner.read().pods.values().any(|p| p.node == node && p.namespace == namespace && uses(p))
    }

    /// Whether `node` has a pod using the PersistentVolume `pv` through a
    /// claim.
    fn uses_volume(&self, node: &str, pv: &str) -> bool {
        let g = self.inner.read();
        g.pods.values().filter(|p| p.node == node).any(|p| p.claims.iter().any(|c| g.claim_volumes.get(&format!("{}/{c}", p.namespace)).is_some_and(|v| v == pv)))
    }
}

/// The Node authorizer.
pub struct NodeAuthorizer {
    graph: Arc<Graph>,
    rules: Vec<PolicyRule>,
}

impl NodeAuthorizer {
    /// An authorizer over `graph`, with the `system:node` rules for what
    /// the graph does not decide.
    pub fn new(graph: Arc<Graph>) -> Self {
        let rules = super::rbac::bootstrap::node_rules().iter().map(PolicyRule::from_json).collect();
        NodeAuthorizer { graph, rules }
    }
}

fn no_opinion(reason: &str) -> Result<Authorized> {
    Ok(Authorized { decision: Decision::NoOpinion, reason: reason.into() })
}

fn allow() -> Result<Authorized> {
    Ok(Authorized::new(Decision::Allow))
}

/// kube's reason for an object the node has no pod for.
fn no_relationship(node: &str) -> String {
    format!("no relationship found between node '{node}' and this object")
}

#[async_trait]
impl Authorizer for NodeAuthorizer {
    /// Nodes' rules depend on their pods: listed as incomplete, with kube's
    /// reason; other users get none from this mode (complete).
    async fn rules_for(&self, user: &crate::authn::UserInfo, _namespace: &str) -> Result<super::Rules> {
        if node_name(user).is_some() {
            return Ok(super::Rules { incomplete: true, evaluation_error: "node authorizer does not support user rule resolution".into(), ..Default::default() });
        }
        Ok(super::Rules::default())
    }

    async fn authorize(&self, a: &Attributes<'_>) -> Result<Authorized> {
        let Some(node) = node_name(a.user) else { return no_opinion("") };
        if !a.resource_request {
            return if self.rules.iter().any(|r| r.allows(a)) { allow() } else { no_opinion("") };
        }
        let graph_read = |uses: &dyn Fn(&PodRefs) -> bool| -> Result<Authorized> {
            if a.verb != "get" {
                return no_opinion("can only get individual resources of this type");
            }
            if a.name.is_empty() {
                return no_opinion("No Object name found");
            }
            if !a.subresource.is_empty() {
                return no_opinion(&format!("cannot get subresource {}", a.subresource));
            }
            if self.graph.any_pod(node, a.namespace, uses) {
                allow()
            } else {
                no_opinion(&no_relationship(node))
            }
        };
        match (a.api_group, a.resource) {
            ("", "secrets") => graph_read(&|p| p.secrets.contains(a.name)),
            ("", "configmaps") => graph_read(&|p| p.configmaps.contains(a.name)),
            ("", "persistentvolumeclaims") if a.subresource.is_empty() => graph_read(&|p| p.claims.contains(a.name)),
            ("", "persistentvolumes") => {
                if a.verb != "get" {
                    return no_opinion("can only get individual resources of this type");
                }
                if self.graph.uses_volume(node, a.name) {
                    allow()
                } else {
                    no_opinion(&no_relationship(node))
                }
            }
            ("", "serviceaccounts") if a.subresource == "token" => {
                if a.verb != "create" {
                    return no_opinion("can only create tokens for individual service accounts");
                }
                if self.graph.any_pod(node, a.namespace, |p| p.service_account == a.name) {
                    allow()
                } else {
                    no_opinion(&no_relationship(node))
                }
            }
            ("coordination.k8s.io", "leases") => {
                if !matches!(a.verb, "get" | "create" | "update" | "patch" | "delete") {
                    return no_opinion("can only get, create, update, patch, or delete a node lease");
                }
                if a.namespace != NODE_LEASE_NAMESPACE {
                    return no_opinion(&format!("can only access leases in the {NODE_LEASE_NAMESPACE} system namespace"));
                }
                // A create names the object in its body; NodeRestriction
                // checks it there.
                if a.verb != "create" && a.name != node {
                    return no_opinion("can only access node lease with the same name as the requesting node");
                }
                allow()
            }
            ("storage.k8s.io", "csinodes") => {
                if !matches!(a.verb, "get" | "create" | "update" | "patch" | "delete") {
                    return no_opinion("can only get, create, update, patch, or delete a CSINode");
                }
                if a.verb != "create" && a.name != node {
                    return no_opinion("can only access CSINode with the same name as the requesting node");
                }
                allow()
            }
            ("storage.k8s.io", "volumeattachments") => {
                if a.verb != "get" {
                    return no_opinion("can only get individual resources of this type");
                }
                if self.graph.inner.read().attachments.get(a.name).is_some_and(|n| n == node) {
                    allow()
                } else {
                    no_opinion(&no_relationship(node))
                }
            }
            _ => {
                if self.rules.iter().any(|r| r.allows(a)) {
                    allow()
                } else {
                    no_opinion("")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::authn::UserInfo;

    fn node(name: &str) -> UserInfo {
        UserInfo { name: format!("system:node:{name}"), groups: vec![NODES_GROUP.into(), "system:authenticated".into()], ..Default::default() }
    }

    /// The decision for `u` doing `[verb, namespace, group, resource,
    /// subresource, name]`.
    fn decide(z: &NodeAuthorizer, u: &UserInfo, req: [&str; 6]) -> (Decision, String) {
        let [verb, ns, group, resource, sub, name] = req;
        let a = Attributes { user: u, verb, resource_request: true, path: "", namespace: ns, api_group: group, api_version: "v1", resource, subresource: sub, name };
        let got = futures::executor::block_on(z.authorize(&a)).unwrap_or(Authorized::new(Decision::Deny));
        (got.decision, got.reason)
    }

    #[test]
    fn nodes_read_what_their_pods_use() {
        let g = Arc::new(Graph::new());
        g.apply(
            Source::Pod,
            &json!({"metadata": {"namespace": "default", "name": "web"}, "spec": {"nodeName": "n1", "serviceAccountName": "app",
                "volumes": [{"name": "a", "secret": {"secretName": "tls"}}, {"name": "b", "persistentVolumeClaim": {"claimName": "data"}}],
                "containers": [{"name": "c", "envFrom": [{"configMapRef": {"name": "settings"}}]}]}}),
            false,
        );
        g.apply(Source::PersistentVolumeClaim, &json!({"metadata": {"namespace": "default", "name": "data"}, "spec": {"volumeName": "pv-1"}}), false);
        let z = NodeAuthorizer::new(g.clone());
        let (n1, n2) = (node("n1"), node("n2"));
        use Decision::*;
        assert_eq!(decide(&z, &n1, ["get", "default", "", "secrets", "", "tls"]).0, Allow);
        assert_eq!(decide(&z, &n1, ["get", "default", "", "configmaps", "", "settings"]).0, Allow);
        assert_eq!(decide(&z, &n1, ["get", "default", "", "persistentvolumeclaims", "", "data"]).0, Allow);
        assert_eq!(decide(&z, &n1, ["get", "", "", "persistentvolumes", "", "pv-1"]).0, Allow);
        assert_eq!(decide(&z, &n1, ["create", "default", "", "serviceaccounts", "token", "app"]).0, Allow);
        assert_eq!(decide(&z, &n2, ["get", "default", "", "secrets", "", "tls"]), (NoOpinion, "no relationship found between node 'n2' and this object".into()));
        assert_eq!(decide(&z, &n1, ["get", "default", "", "secrets", "", "other"]).0, NoOpinion);
        assert_eq!(decide(&z, &n1, ["list", "default", "", "secrets", "", ""]).0, NoOpinion);
        // Leases and CSINodes of its own name only.
        assert_eq!(decide(&z, &n1, ["update", NODE_LEASE_NAMESPACE, "coordination.k8s.io", "leases", "", "n1"]).0, Allow);
        assert_eq!(decide(&z, &n1, ["update", NODE_LEASE_NAMESPACE, "coordination.k8s.io", "leases", "", "n2"]).0, NoOpinion);
        assert_eq!(decide(&z, &n1, ["get", "default", "coordination.k8s.io", "leases", "", "n1"]).0, NoOpinion);
        // The rest by the system:node rules.
        assert_eq!(decide(&z, &n1, ["list", "", "", "pods", "", ""]).0, Allow);
        assert_eq!(decide(&z, &n1, ["update", "default", "", "pods", "status", "web"]).0, Allow);
        assert_eq!(decide(&z, &n1, ["delete", "", "", "namespaces", "", "default"]).0, NoOpinion);
        // Not a node: no opinion; a node name without the group neither.
        let fake = UserInfo { name: "system:node:n1".into(), ..Default::default() };
        assert_eq!(decide(&z, &fake, ["list", "", "", "pods", "", ""]).0, NoOpinion);
        // The pod is gone: so is the access.
        g.apply(Source::Pod, &json!({"metadata": {"namespace": "default", "name": "web"}}), true);
        assert_eq!(decide(&z, &n1, ["get", "default", "", "secrets", "", "tls"]).0, NoOpinion);
    }
}
