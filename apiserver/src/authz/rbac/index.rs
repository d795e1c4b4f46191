//! The RBAC objects an authorizer reads, indexed so that a request costs
//! as much as the bindings of its user, not as all bindings (kube's RBAC
//! walks every ClusterRoleBinding and every RoleBinding of the namespace on
//! each request).
//!
//! Bindings are indexed by (binding namespace, subject), where a subject
//! is a user name or a group name; a ServiceAccount subject is the user
//! `system:serviceaccount:<ns>:<name>`, its namespace defaulting to the
//! binding's. ClusterRoleBindings have namespace `""`. Roles are indexed by
//! namespace and name, ClusterRoles by name, each holding its parsed
//! rules.
//!
//! # Example
//!
//! ```text
//! ClusterRoleBinding cluster-admin  subjects: Group system:masters       → ("", Group system:masters)
//! RoleBinding default/read-pods     subjects: ServiceAccount default     → ("default", User system:serviceaccount:default:default)
//! RoleBinding dev/team              subjects: User alice, Group dev      → ("dev", User alice), ("dev", Group dev)
//! ```
//!
//! A request of user `alice` in groups `dev` and `system:authenticated`
//! for namespace `dev` looks up six keys: `("", User alice)`,
//! `("", Group dev)`, `("", Group system:authenticated)` and the same three
//! with `"dev"`, and finds `dev/team` (once, though two of its subjects
//! match). Each binding found is then checked as kube checks it (its first
//! subject that applies names it in the reason), and its role's rules are
//! read from the role index.
//!
//! An update of a binding removes the entries of its old version and adds
//! the new ones; roles are replaced whole.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::Value;

use super::rules::PolicyRule;
use crate::authn::{service_account_user, UserInfo};
use crate::meta;

/// What a binding's subject matches.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum SubjectKey {
    User(String),
    Group(String),
}

/// A subject of a binding (`rbac/v1` `Subject`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    /// `User`, `Group` or `ServiceAccount`.
    pub kind: String,
    /// Name.
    pub name: String,
    /// Namespace (ServiceAccounts).
    pub namespace: String,
}

impl Subject {
    /// The index key of this subject in a binding of `binding_ns`, if it
    /// can match anyone.
    fn key(&self, binding_ns: &str) -> Option<SubjectKey> {
        match self.kind.as_str() {
            "User" => Some(SubjectKey::User(self.name.clone())),
            "Group" => Some(SubjectKey::Group(self.name.clone())),
            "ServiceAccount" => {
                let ns = if self.namespace.is_empty() { binding_ns } else { &self.namespace };
                (!ns.is_empty()).then(|| SubjectKey::User(service_account_user(ns, &self.name)))
            }
            _ => None,
        }
    }

    /// Whether the subject is `user` (kube `appliesToUser`).
    fn applies_to(&self, user: &UserInfo, binding_ns: &str) -> bool {
        match self.key(binding_ns) {
            Some(SubjectKey::User(n)) => n == user.name,
            Some(SubjectKey::Group(g)) => user.groups.contains(&g),
            None => false,
        }
    }

    /// kube `describeSubject`: `User "alice"`, `ServiceAccount "name/ns"`.
    fn describe(&self, binding_ns: &str) -> String {
        if self.kind == "ServiceAccount" {
            let ns = if self.namespace.is_empty() { binding_ns } else { &self.namespace };
            format!("{} {:?}", self.kind, format!("{}/{ns}", self.name))
        } else {
            format!("{} {:?}", self.kind, self.name)
        }
    }
}

/// A RoleBinding or ClusterRoleBinding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    /// Namespace; `""` for a ClusterRoleBinding.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `roleRef.kind`: `Role` or `ClusterRole`.
    pub role_kind: String,
    /// `roleRef.name`.
    pub role_name: String,
    /// Subjects, in order.
    pub subjects: Vec<Subject>,
}

impl Binding {
    /// A binding from its JSON.
    pub fn from_json(obj: &Value) -> Self {
        let s = |v: &Value| v.as_str().unwrap_or("").to_string();
        Binding {
            namespace: meta::namespace(obj).to_string(),
            name: meta::name(obj).to_string(),
            role_kind: s(&obj["roleRef"]["kind"]),
            role_name: s(&obj["roleRef"]["name"]),
            subjects: obj["subjects"].as_array().into_iter().flatten().map(|x| Subject { kind: s(&x["kind"]), name: s(&x["name"]), namespace: s(&x["namespace"]) }).collect(),
        }
    }

    fn keys(&self) -> Vec<(String, SubjectKey)> {
        let mut keys: Vec<_> = self.subjects.iter().filter_map(|s| s.key(&self.namespace)).map(|k| (self.namespace.clone(), k)).collect();
        keys.sort();
        keys.dedup();
        keys
    }

    /// kube's `clusterRoleBindingDescriber` / `roleBindingDescriber`, for
    /// the subject that applied.
    pub fn describe(&self, subject: &Subject) -> String {
        if self.namespace.is_empty() {
            format!("ClusterRoleBinding {:?} of {} {:?} to {}", self.name, self.role_kind, self.role_name, subject.describe(""))
        } else {
            format!("RoleBinding {:?} of {} {:?} to {}", format!("{}/{}", self.name, self.namespace), self.role_kind, self.role_name, subject.describe(&self.namespace))
        }
    }
}

/// Where a rule came from, or why a binding gave none.
pub enum Visit<'a> {
    /// A rule of the role of `binding`, bound through `subject`.
    Rule {
        /// The binding.
        binding: &'a Binding,
        /// Its first subject that is the user.
        subject: &'a Subject,
        /// The rule.
        rule: &'a PolicyRule,
    },
    /// A binding whose role does not exist (kube's lister error).
    Missing(String),
}

/// The index. Writers replace entries under the authorizer's lock; see the
/// module doc.
#[derive(Debug, Default)]
pub struct Index {
    by_subject: HashMap<(String, SubjectKey), BTreeMap<String, Arc<Binding>>>,
    bindings: HashMap<(String, String), Arc<Binding>>,
    cluster_roles: HashMap<String, Arc<Vec<PolicyRule>>>,
    roles: HashMap<(String, String), Arc<Vec<PolicyRule>>>,
}

impl Index {
    /// Adds or replaces a binding.
    pub fn put_binding(&mut self, b: Binding) {
        self.remove_binding(&b.namespace, &b.name);
        let b = Arc::new(b);
        for key in b.keys() {
            self.by_subject.entry(key).or_default().insert(b.name.clone(), b.clone());
        }
        self.bindings.insert((b.namespace.clone(), b.name.clone()), b);
    }

    /// Removes the binding `namespace/name` (namespace `""`: a
    /// ClusterRoleBinding).
    pub fn remove_binding(&mut self, namespace: &str, name: &str) {
        let Some(old) = self.bindings.remove(&(namespace.to_string(), name.to_string())) else { return };
        for key in old.keys() {
            if let Some(m) = self.by_subject.get_mut(&key) {
                m.remove(name);
                if m.is_empty() {
                    self.by_subject.remove(&key);
                }
            }
        }
    }

    /// Adds or replaces the rules of a role (namespace `""`: a
    /// ClusterRole).
    pub fn put_role(&mut self, namespace: &str, name: &str, rules: Vec<PolicyRule>) {
        if namespace.is_empty() {
            self.cluster_roles.insert(name.to_string(), Arc::new(rules));
        } else {
            self.roles.insert((namespace.to_string(), name.to_string()), Arc::new(rules));
        }
    }

    /// Removes a role (namespace `""`: a ClusterRole).
    pub fn remove_role(&mut self, namespace: &str, name: &str) {
        if namespace.is_empty() {
            self.cluster_roles.remove(name);
        } else {
            self.roles.remove(&(namespace.to_string(), name.to_string()));
        }
    }

    /// How many bindings are indexed.
    pub fn binding_count(&self) -> usize {
        self.bindings.len()
    }

    /// The bindings in `namespace` (`""`: ClusterRoleBindings) that name
    /// `user` or one of its groups, by name.
    fn bindings_of(&self, namespace: &str, user: &UserInfo) -> BTreeMap<String, Arc<Binding>> {
        let mut out = BTreeMap::new();
        let keys = std::iter::once(SubjectKey::User(user.name.clone())).chain(user.groups.iter().map(|g| SubjectKey::Group(g.clone())));
        for key in keys {
            if let Some(m) = self.by_subject.get(&(namespace.to_string(), key)) {
                for (name, b) in m {
                    out.entry(name.clone()).or_insert_with(|| b.clone());
                }
            }
        }
        out
    }

    /// The rules of `binding`'s role, or kube's not-found message.
    fn rules_of(&self, b: &Binding) -> Result<Arc<Vec<PolicyRule>>, String> {
        self.role_rules(&b.role_kind, &b.namespace, &b.role_name)
    }

    /// The rules of the role a binding in `namespace` references by
    /// `roleRef` kind and name (kube `GetRoleReferenceRules`), or kube's
    /// not-found message.
    pub fn role_rules(&self, kind: &str, namespace: &str, name: &str) -> Result<Arc<Vec<PolicyRule>>, String> {
        let found = match kind {
            "ClusterRole" => self.cluster_roles.get(name),
            "Role" if !namespace.is_empty() => self.roles.get(&(namespace.to_string(), name.to_string())),
            _ => None,
        };
        found.cloned().ok_or_else(|| format!("{}.rbac.authorization.k8s.io {:?} not found", kind.to_lowercase(), name))
    }

    /// Calls `visit` with every rule `user` has in `namespace` (`""`:
    /// cluster-wide only), ClusterRoleBindings first, each set in name
    /// order, until `visit` returns false (kube `VisitRulesFor`).
    pub fn visit(&self, user: &UserInfo, namespace: &str, mut visit: impl FnMut(Visit<'_>) -> bool) {
        let mut scopes = vec![""];
        if !namespace.is_empty() {
            scopes.push(namespace);
        }
        for scope in scopes {
            for b in self.bindings_of(scope, user).values() {
                let Some(subject) = b.subjects.iter().find(|s| s.applies_to(user, &b.namespace)) else { continue };
                match self.rules_of(b) {
                    Ok(rules) => {
                        for rule in rules.iter() {
                            if !visit(Visit::Rule { binding: b, subject, rule }) {
                                return;
                            }
                        }
                    }
                    Err(e) => {
                        if !visit(Visit::Missing(e)) {
                            return;
                        }
                    }
                }
            }
        }
    }
}
