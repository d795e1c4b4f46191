//! Every storage key of the API server, built in one place (kube-apiserver's
//! `--etcd-prefix` layout, `pkg/registry/generic/registry.NamespaceKeyFunc`
//! and `NoNamespaceKeyFunc`).
//!
//! | what | key |
//! |---|---|
//! | a namespaced object of the core group | `/registry/<resource>/<namespace>/<name>` |
//! | a namespaced object of a named group | `/registry/<group>/<resource>/<namespace>/<name>` |
//! | a cluster-scoped object | `/registry/[<group>/]<resource>/<name>` |
//! | every object of a resource (list, watch, watch cache) | `/registry/[<group>/]<resource>/` |
//! | every object of a resource in one namespace | `/registry/[<group>/]<resource>/<namespace>/` |
//!
//! Values are the objects' JSON. Prefixes end with `/`, so the prefix of
//! `deployments` never matches `deploymentsfoo`. A resource served in several
//! versions is stored once, under its storage version's group (events.k8s.io
//! events live under the core `events/`).

/// The root of every key: what a store-wide read (the current revision)
/// ranges over. It is the logical root: `--etcd-prefix` stores the keys
/// under another one ([`super::prefixed`]).
pub const ROOT: &str = "/registry/";

/// The prefix of one resource, or of one namespace of it when `namespace` is
/// given (and not empty): `/registry/configmaps/`,
/// `/registry/apps/deployments/default/`.
pub fn prefix(group: &str, resource: &str, namespace: Option<&str>) -> String {
    let mut p = String::with_capacity(ROOT.len() + group.len() + resource.len() + namespace.map_or(0, str::len) + 3);
    p.push_str(ROOT);
    if !group.is_empty() {
        p.push_str(group);
        p.push('/');
    }
    p.push_str(resource);
    p.push('/');
    if let Some(ns) = namespace.filter(|n| !n.is_empty()) {
        p.push_str(ns);
        p.push('/');
    }
    p
}

/// The key of one object; `namespace` is `None` for cluster-scoped
/// resources.
pub fn object(group: &str, resource: &str, namespace: Option<&str>, name: &str) -> String {
    let mut k = prefix(group, resource, namespace);
    k.push_str(name);
    k
}

/// The key of the object `name` (in `namespace`, if not empty) under a
/// resource's `prefix` (as [`prefix`] returns it): what the watch cache files
/// an object under.
pub fn under(prefix: &str, namespace: &str, name: &str) -> String {
    let mut k = String::with_capacity(prefix.len() + namespace.len() + name.len() + 1);
    k.push_str(prefix);
    if !namespace.is_empty() {
        k.push_str(namespace);
        k.push('/');
    }
    k.push_str(name);
    k
}

/// The key of a namespace object (`/registry/namespaces/<name>`), which
/// admission and the namespace controller read directly.
pub fn namespace(name: &str) -> String {
    object("", "namespaces", None, name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_kubes() {
        let cases = [
            (prefix("", "configmaps", None), "/registry/configmaps/"),
            (prefix("", "configmaps", Some("default")), "/registry/configmaps/default/"),
            (prefix("", "configmaps", Some("")), "/registry/configmaps/"),
            (prefix("apps", "deployments", Some("ns")), "/registry/apps/deployments/ns/"),
            (object("apps", "deployments", Some("ns"), "web"), "/registry/apps/deployments/ns/web"),
            (object("", "nodes", None, "n1"), "/registry/nodes/n1"),
            (object("rbac.authorization.k8s.io", "clusterroles", None, "system:x"), "/registry/rbac.authorization.k8s.io/clusterroles/system:x"),
            (namespace("default"), "/registry/namespaces/default"),
            (under("/registry/apps/deployments/", "ns", "web"), "/registry/apps/deployments/ns/web"),
            (under("/registry/nodes/", "", "n1"), "/registry/nodes/n1"),
        ];
        for (got, want) in cases {
            assert_eq!(got, want);
            assert!(got.starts_with(ROOT));
        }
    }
}
