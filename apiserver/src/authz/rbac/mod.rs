//! `--authorization-mode=RBAC` (kube `plugin/pkg/auth/authorizer/rbac`):
//! Roles, ClusterRoles, RoleBindings and ClusterRoleBindings decide.
//!
//! - A request is allowed when some rule of some role bound to its user
//!   (by user name, group or ServiceAccount) allows it; otherwise RBAC has
//!   no opinion, which ends in a 403 unless a later mode allows it
//!   (allow wins, implicit deny; RBAC never denies).
//! - ClusterRoleBindings grant everywhere; RoleBindings grant in their
//!   namespace, also when they reference a ClusterRole.
//! - Rules match as [`rules`] describes.
//!
//! The authorizer holds its own copy of the RBAC objects in an [`Index`]
//! of bindings by subject, so a request costs the same however many
//! bindings exist and never reads the store. The copy is fed by informers
//! over the watch cache (`controllers::rbac`) through [`Rbac::apply`];
//! [`bootstrap`] holds the default policy that start-up reconciles.

pub mod bootstrap;
pub mod index;
pub mod rules;

use async_trait::async_trait;
use parking_lot::RwLock;
use serde_json::Value;

use self::index::{Binding, Index, Visit};
use self::rules::PolicyRule;
use super::{Attributes, Authorized, Authorizer, Decision, NonResourceRule, ResourceRule, Result, Rules};
use crate::authn::UserInfo;
use crate::meta;

/// The API group of RBAC objects.
pub const GROUP: &str = "rbac.authorization.k8s.io";

/// The four RBAC kinds, as [`Rbac::apply`] takes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `roles`.
    Role,
    /// `clusterroles`.
    ClusterRole,
    /// `rolebindings`.
    RoleBinding,
    /// `clusterrolebindings`.
    ClusterRoleBinding,
}

impl Kind {
    /// Every kind.
    pub const ALL: [Kind; 4] = [Kind::Role, Kind::ClusterRole, Kind::RoleBinding, Kind::ClusterRoleBinding];

    /// The resource (plural) of the kind.
    pub fn resource(self) -> &'static str {
        match self {
            Kind::Role => "roles",
            Kind::ClusterRole => "clusterroles",
            Kind::RoleBinding => "rolebindings",
            Kind::ClusterRoleBinding => "clusterrolebindings",
        }
    }
}

/// The RBAC authorizer.
#[derive(Default)]
pub struct Rbac {
    index: RwLock<Index>,
}

impl Rbac {
    /// An authorizer with no objects yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that `obj`, of `kind`, now exists as given (`deleted`:
    /// that it is gone).
    pub fn apply(&self, kind: Kind, obj: &Value, deleted: bool) {
        let mut index = self.index.write();
        let (ns, name) = (meta::namespace(obj), meta::name(obj));
        match (kind, deleted) {
            (Kind::Role | Kind::ClusterRole, false) => index.put_role(ns, name, PolicyRule::all_from(obj)),
            (Kind::Role | Kind::ClusterRole, true) => index.remove_role(ns, name),
            (Kind::RoleBinding | Kind::ClusterRoleBinding, false) => index.put_binding(Binding::from_json(obj)),
            (Kind::RoleBinding | Kind::ClusterRoleBinding, true) => index.remove_binding(ns, name),
        }
    }

    /// The rules of the role a binding in `namespace` references (kube
    /// `GetRoleReferenceRules`).
    ///
    /// # Errors
    /// kube's not-found message for a role it does not know.
    pub fn role_rules(&self, kind: &str, namespace: &str, name: &str) -> std::result::Result<Vec<PolicyRule>, String> {
        self.index.read().role_rules(kind, namespace, name).map(|r| r.as_ref().clone())
    }

    /// How many bindings the authorizer knows.
    pub fn binding_count(&self) -> usize {
        self.index.read().binding_count()
    }
}

/// kube's `utilerrors.NewAggregate(errs).Error()`: one message as is,
/// several in brackets; repeats once.
fn aggregate(mut errors: Vec<String>) -> String {
    let mut seen = std::collections::HashSet::new();
    errors.retain(|e| seen.insert(e.clone()));
    match errors.len() {
        1 => errors.remove(0),
        _ => format!("[{}]", errors.join(", ")),
    }
}

#[async_trait]
impl Authorizer for Rbac {
    async fn authorize(&self, attrs: &Attributes<'_>) -> Result<Authorized> {
        let mut allowed_by = None;
        let mut errors = Vec::new();
        self.index.read().visit(attrs.user, attrs.namespace, |v| match v {
            Visit::Rule { binding, subject, rule } => {
                if rule.allows(attrs) {
                    allowed_by = Some(binding.describe(subject));
                    return false;
                }
                true
            }
            Visit::Missing(e) => {
                errors.push(e);
                true
            }
        });
        if let Some(source) = allowed_by {
            return Ok(Authorized { decision: Decision::Allow, reason: format!("RBAC: allowed by {source}") });
        }
        let reason = if errors.is_empty() { String::new() } else { format!("RBAC: {}", aggregate(errors)) };
        Ok(Authorized { decision: Decision::NoOpinion, reason })
    }

    async fn rules_for(&self, user: &UserInfo, namespace: &str) -> Result<Rules> {
        let mut out = Rules::default();
        let mut errors = Vec::new();
        self.index.read().visit(user, namespace, |v| {
            match v {
                Visit::Rule { rule, .. } => {
                    if !rule.resources.is_empty() {
                        out.resource_rules.push(ResourceRule {
                            verbs: rule.verbs.clone(),
                            api_groups: rule.api_groups.clone(),
                            resources: rule.resources.clone(),
                            resource_names: rule.resource_names.clone(),
                        });
                    }
                    if !rule.non_resource_urls.is_empty() {
                        out.non_resource_rules.push(NonResourceRule { verbs: rule.verbs.clone(), non_resource_urls: rule.non_resource_urls.clone() });
                    }
                }
                Visit::Missing(e) => errors.push(e),
            }
            true
        });
        if !errors.is_empty() {
            out.evaluation_error = aggregate(errors);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn user(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo { name: name.into(), groups: groups.iter().map(|g| g.to_string()).collect(), ..Default::default() }
    }

    /// The policy of the tests: the fixtures' pod reader for the default
    /// ServiceAccount and deployment creator for alice, a ClusterRole bound
    /// in one namespace, a cluster-wide group binding and a binding to a
    /// missing role.
    fn rbac() -> Rbac {
        let r = Rbac::new();
        let role = |kind, ns: &str, name: &str, rules: Value| r.apply(kind, &json!({"metadata": {"namespace": ns, "name": name}, "rules": rules}), false);
        let bind = |kind, ns: &str, name: &str, role_kind: &str, role: &str, subjects: Value| {
            r.apply(kind, &json!({"metadata": {"namespace": ns, "name": name}, "roleRef": {"kind": role_kind, "name": role}, "subjects": subjects}), false)
        };
        role(Kind::Role, "default", "pod-reader", json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]));
        bind(Kind::RoleBinding, "default", "read-pods", "Role", "pod-reader", json!([{"kind": "ServiceAccount", "name": "default", "namespace": "default"}]));
        role(Kind::Role, "default", "vllm-deployment-creator", json!([{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["create"]}]));
        bind(Kind::RoleBinding, "default", "alice-vllm-deployment-creator", "Role", "vllm-deployment-creator", json!([{"kind": "User", "name": "alice@example.com"}]));
        role(
            Kind::ClusterRole,
            "",
            "secret-reader",
            json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": ["s1"]}, {"nonResourceURLs": ["/logs/*"], "verbs": ["get"]}]),
        );
        bind(Kind::RoleBinding, "dev", "secrets", "ClusterRole", "secret-reader", json!([{"kind": "ServiceAccount", "name": "ci"}]));
        bind(Kind::ClusterRoleBinding, "", "ops", "ClusterRole", "secret-reader", json!([{"kind": "Group", "name": "ops"}]));
        bind(Kind::ClusterRoleBinding, "", "dangling", "ClusterRole", "nope", json!([{"kind": "Group", "name": "system:authenticated"}]));
        r
    }

    fn decide(r: &Rbac, u: &UserInfo, verb: &str, ns: &str, group: &str, resource: &str, name: &str) -> (Decision, String) {
        let a = Attributes { user: u, verb, resource_request: true, path: "", namespace: ns, api_group: group, api_version: "v1", resource, subresource: "", name };
        let fut = r.authorize(&a);
        let got = futures::executor::block_on(fut).unwrap_or(Authorized::new(Decision::Deny));
        (got.decision, got.reason)
    }

    #[test]
    fn bindings_grant_as_kube() {
        let r = rbac();
        let sa = user("system:serviceaccount:default:default", &["system:serviceaccounts", "system:authenticated"]);
        let alice = user("alice@example.com", &["system:authenticated"]);
        let ci = user("system:serviceaccount:dev:ci", &[]);
        let ops = user("bob", &["ops"]);
        use Decision::*;
        // (user, verb, namespace, group, resource, name, decision)
        let cases: Vec<(&UserInfo, &str, &str, &str, &str, &str, Decision)> = vec![
            (&sa, "list", "default", "", "pods", "", Allow),
            (&sa, "get", "default", "", "pods", "p", Allow),
            (&sa, "delete", "default", "", "pods", "p", NoOpinion),
            (&sa, "list", "kube-system", "", "pods", "", NoOpinion),
            (&sa, "list", "", "", "pods", "", NoOpinion),
            (&alice, "create", "default", "apps", "deployments", "", Allow),
            (&alice, "create", "default", "", "deployments", "", NoOpinion),
            (&alice, "list", "default", "apps", "deployments", "", NoOpinion),
            (&alice, "create", "other", "apps", "deployments", "", NoOpinion),
            // A RoleBinding to a ClusterRole grants in its namespace only; its
            // ServiceAccount subject defaults to the binding's namespace.
            (&ci, "get", "dev", "", "secrets", "s1", Allow),
            (&ci, "get", "dev", "", "secrets", "s2", NoOpinion),
            (&ci, "get", "default", "", "secrets", "s1", NoOpinion),
            // A ClusterRoleBinding grants everywhere.
            (&ops, "get", "a", "", "secrets", "s1", Allow),
            (&ops, "get", "", "", "secrets", "s1", Allow),
        ];
        for (u, verb, ns, group, res, name, want) in cases {
            assert_eq!(decide(&r, u, verb, ns, group, res, name).0, want, "{} {verb} {ns}/{group}/{res}/{name}", u.name);
        }
        assert_eq!(decide(&r, &ops, "get", "a", "", "secrets", "s1").1, r#"RBAC: allowed by ClusterRoleBinding "ops" of ClusterRole "secret-reader" to Group "ops""#);
        assert_eq!(decide(&r, &ci, "get", "dev", "", "secrets", "s1").1, r#"RBAC: allowed by RoleBinding "secrets/dev" of ClusterRole "secret-reader" to ServiceAccount "ci/dev""#);
        // A binding to a missing role is reported, as kube's RBAC does.
        assert_eq!(decide(&r, &alice, "list", "default", "", "pods", "").1, r#"RBAC: clusterrole.rbac.authorization.k8s.io "nope" not found"#);
    }

    #[test]
    fn updates_and_deletes_reindex() {
        let r = rbac();
        let ops = user("bob", &["ops"]);
        assert_eq!(decide(&r, &ops, "get", "a", "", "secrets", "s1").0, Decision::Allow);
        // The binding now names another group: bob loses it.
        r.apply(Kind::ClusterRoleBinding, &json!({"metadata": {"name": "ops"}, "roleRef": {"kind": "ClusterRole", "name": "secret-reader"}, "subjects": [{"kind": "Group", "name": "sre"}]}), false);
        assert_eq!(decide(&r, &ops, "get", "a", "", "secrets", "s1").0, Decision::NoOpinion);
        assert_eq!(decide(&r, &user("carol", &["sre"]), "get", "a", "", "secrets", "s1").0, Decision::Allow);
        r.apply(Kind::ClusterRole, &json!({"metadata": {"name": "secret-reader"}}), true);
        assert_eq!(decide(&r, &user("carol", &["sre"]), "get", "a", "", "secrets", "s1").0, Decision::NoOpinion);
        let before = r.binding_count();
        r.apply(Kind::ClusterRoleBinding, &json!({"metadata": {"name": "ops"}}), true);
        assert_eq!(r.binding_count(), before - 1);
    }

    #[test]
    fn rules_for_lists_the_bound_rules() {
        let r = rbac();
        let ci = user("system:serviceaccount:dev:ci", &[]);
        let rules = futures::executor::block_on(r.rules_for(&ci, "dev")).unwrap_or_default();
        assert_eq!(rules.resource_rules.len(), 1);
        assert_eq!(rules.resource_rules[0].resource_names, vec!["s1".to_string()]);
        assert_eq!(rules.non_resource_rules.len(), 1);
        assert_eq!(rules.non_resource_rules[0].non_resource_urls, vec!["/logs/*".to_string()]);
        assert!(futures::executor::block_on(r.rules_for(&ci, "default")).unwrap_or_default().resource_rules.is_empty());
        let alice = user("alice@example.com", &["system:authenticated"]);
        let rules = futures::executor::block_on(r.rules_for(&alice, "default")).unwrap_or_default();
        assert_eq!(rules.evaluation_error, r#"clusterrole.rbac.authorization.k8s.io "nope" not found"#);
    }
}
