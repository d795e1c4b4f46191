//! Privilege-escalation prevention for RBAC objects (kube
//! `pkg/registry/rbac/{role,clusterrole,rolebinding,clusterrolebinding}/policybased`
//! and `pkg/registry/rbac/validation`).
//!
//! A user may create or update a Role or ClusterRole only when one of these
//! holds, checked in this order:
//!
//! 1. the user is in `system:masters`;
//! 2. the authorizer allows the `escalate` verb on that resource (and name,
//!    on updates);
//! 3. the user already has every permission the role grants, in the
//!    role's namespace (cluster-wide for ClusterRoles), as the RBAC rule
//!    resolver lists them. A ClusterRole with an `aggregationRule` (or
//!    losing one) also needs every permission there is.
//!
//! A RoleBinding or ClusterRoleBinding likewise needs `system:masters`, or
//! the `bind` verb on the referenced role (in the binding's namespace), or
//! every permission of the referenced role; a reference to a missing role
//! is 404, as kube's role lookup answers.
//!
//! An update that only changes `ownerReferences` or `finalizers` (what the
//! garbage collector writes) is not checked. The refusal is kube's 403:
//!
//! ```text
//! roles.rbac.authorization.k8s.io "r" is forbidden: user "bob" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:
//! {APIGroups:[""], Resources:["secrets"], Verbs:["get" "list"]}
//! ```
//!
//! The check wraps the generic store of the four resources
//! ([`guard`], a registry [`Decorator`]); it is installed only when RBAC
//! is an authorization mode, since its rule resolver is RBAC's.

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use super::rest::{CollectionDeleter, Context, Creater, Deleter, Getter, Gvk, Lister, Rest, UpdatedObjectInfo, Updater, Watcher, WriteOptions};
use super::Decorator;
use crate::authn::UserInfo;
use crate::authz::always::SYSTEM_MASTERS;
use crate::authz::rbac::rules::{PolicyRule, ALL};
use crate::authz::rbac::{Rbac, GROUP};
use crate::authz::{Attributes, Authorizer, Decision};
use crate::errors::go_quote;
use crate::errors::Status;
use crate::meta;

/// Which of the four RBAC resources a guard protects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Guarded {
    /// `roles`.
    Role,
    /// `clusterroles`.
    ClusterRole,
    /// `rolebindings`.
    RoleBinding,
    /// `clusterrolebindings`.
    ClusterRoleBinding,
}

impl Guarded {
    fn resource(self) -> &'static str {
        match self {
            Guarded::Role => "roles",
            Guarded::ClusterRole => "clusterroles",
            Guarded::RoleBinding => "rolebindings",
            Guarded::ClusterRoleBinding => "clusterrolebindings",
        }
    }

    fn is_role(self) -> bool {
        matches!(self, Guarded::Role | Guarded::ClusterRole)
    }
}

/// What a check needs: the full authorizer (for `escalate` and `bind`)
/// and RBAC's rule resolver.
struct Checker {
    kind: Guarded,
    authorizer: Arc<dyn Authorizer>,
    rbac: Arc<Rbac>,
}

/// The decorator that guards `kind` with `authorizer` and `rbac`.
pub fn guard(kind: Guarded, authorizer: Arc<dyn Authorizer>, rbac: Arc<Rbac>) -> Decorator {
    let checker = Arc::new(Checker { kind, authorizer, rbac });
    Arc::new(move |inner: Arc<dyn Rest>| Arc::new(Policy { inner, checker: checker.clone() }) as Arc<dyn Rest>)
}

/// Every permission there is (kube's `fullAuthority`), which using an
/// aggregationRule requires.
fn full_authority() -> Vec<PolicyRule> {
    let all = vec![ALL.to_string()];
    vec![PolicyRule { verbs: all.clone(), api_groups: all.clone(), resources: all.clone(), ..Default::default() }, PolicyRule { verbs: all.clone(), non_resource_urls: all, ..Default::default() }]
}

fn is_master(user: &UserInfo) -> bool {
    user.groups.iter().any(|g| g == SYSTEM_MASTERS)
}

/// Go's `%q` of a string slice: `["a" "b"]`.
fn go_quoted(list: &[String]) -> String {
    format!("[{}]", list.iter().map(|s| go_quote(s)).collect::<Vec<_>>().join(" "))
}

/// kube's `CompactString` of a rule: the non-empty fields in the order
/// APIGroups, Resources, NonResourceURLs, ResourceNames, Verbs.
fn compact_string(r: &PolicyRule) -> String {
    let mut parts = Vec::new();
    for (name, v) in [("APIGroups", &r.api_groups), ("Resources", &r.resources), ("NonResourceURLs", &r.non_resource_urls), ("ResourceNames", &r.resource_names), ("Verbs", &r.verbs)] {
        if !v.is_empty() {
            parts.push(format!("{name}:{}", go_quoted(v)));
        }
    }
    format!("{{{}}}", parts.join(", "))
}

/// kube's `CompactRules`: rules of one group, one resource, at most one
/// name and nothing else are merged when only their verbs differ.
fn compact(rules: Vec<PolicyRule>) -> Vec<PolicyRule> {
    let mut out: Vec<PolicyRule> = Vec::new();
    let mut simple: Vec<PolicyRule> = Vec::new();
    for r in rules {
        let is_simple = r.resource_names.len() <= 1 && r.non_resource_urls.is_empty() && r.api_groups.len() == 1 && r.resources.len() == 1;
        if !is_simple {
            out.push(r);
            continue;
        }
        match simple.iter_mut().find(|s| s.api_groups == r.api_groups && s.resources == r.resources && s.resource_names == r.resource_names) {
            Some(s) => s.verbs.extend(r.verbs),
            None => simple.push(r),
        }
    }
    out.extend(simple);
    out
}

impl Checker {
    /// The 403 of a refused write of `name`.
    fn forbidden(&self, name: &str, why: &str) -> Status {
        Status::forbidden_because(GROUP, self.kind.resource(), name, why)
    }

    /// Whether the authorizer allows `verb` on `resource`/`name` of the
    /// RBAC group in `namespace` (kube `RoleEscalationAuthorized`,
    /// `BindingAuthorized`).
    async fn authorized(&self, user: &UserInfo, verb: &str, namespace: &str, resource: &str, name: &str) -> bool {
        let attrs = Attributes { user, verb, resource_request: true, path: "", namespace, api_group: GROUP, api_version: "*", resource, subresource: "", name };
        matches!(self.authorizer.authorize(&attrs).await, Ok(a) if a.decision == Decision::Allow)
    }

    /// kube `ConfirmNoEscalation`: `Ok` when `user` holds every rule of
    /// `rules` in `namespace`, else the message naming what it lacks.
    async fn confirm_no_escalation(&self, user: &UserInfo, namespace: &str, rules: &[PolicyRule]) -> Result<(), String> {
        let owned = self.authorizer_rules(user, namespace).await;
        let (ok, missing) = crate::authz::rbac::rules::covers(&owned.0, rules);
        if ok {
            return Ok(());
        }
        let described: BTreeSet<String> = compact(missing).iter().map(compact_string).collect();
        let mut msg =
            format!("user {:?} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}", user.name, go_quoted(&user.groups), described.into_iter().collect::<Vec<_>>().join("\n"));
        if !owned.1.is_empty() {
            msg.push_str(&format!("; resolution errors: [{}]", owned.1));
        }
        Err(msg)
    }

    /// The rules RBAC gives `user` in `namespace`, and its evaluation
    /// errors.
    async fn authorizer_rules(&self, user: &UserInfo, namespace: &str) -> (Vec<PolicyRule>, String) {
        let rules = self.rbac.rules_for(user, namespace).await.unwrap_or_default();
        let mut out: Vec<PolicyRule> = rules
            .resource_rules
            .into_iter()
            .map(|r| PolicyRule { verbs: r.verbs, api_groups: r.api_groups, resources: r.resources, resource_names: r.resource_names, non_resource_urls: Vec::new() })
            .collect();
        out.extend(rules.non_resource_rules.into_iter().map(|r| PolicyRule { verbs: r.verbs, non_resource_urls: r.non_resource_urls, ..Default::default() }));
        (out, rules.evaluation_error)
    }

    /// Checks a write of `obj` (replacing `old`, on updates) by `user` in
    /// `namespace`.
    async fn check(&self, user: &UserInfo, namespace: &str, obj: &Value, old: Option<&Value>) -> Result<(), Status> {
        if is_master(user) {
            return Ok(());
        }
        if let Some(old) = old {
            if only_gc_fields_change(obj, old) {
                return Ok(());
            }
        }
        let name = meta::name(obj);
        if self.kind.is_role() {
            // The name of the request: none on a create (kube asks with the
            // request's attributes).
            let asked_name = if old.is_some() { name } else { "" };
            if self.authorized(user, "escalate", namespace, self.kind.resource(), asked_name).await {
                return Ok(());
            }
            let rules = PolicyRule::all_from(obj);
            self.confirm_no_escalation(user, namespace, &rules).await.map_err(|why| self.forbidden(name, &why))?;
            let aggregates = |o: &Value| o.get("aggregationRule").is_some_and(|a| !a.is_null());
            if self.kind == Guarded::ClusterRole && (aggregates(obj) || old.is_some_and(aggregates)) && self.confirm_no_escalation(user, namespace, &full_authority()).await.is_err() {
                return Err(self.forbidden(name, "must have cluster-admin privileges to use the aggregationRule"));
            }
            return Ok(());
        }
        let role_kind = obj["roleRef"]["kind"].as_str().unwrap_or("");
        let role_name = obj["roleRef"]["name"].as_str().unwrap_or("");
        let role_resource = match role_kind {
            "ClusterRole" => "clusterroles",
            "Role" => "roles",
            // Validation refuses it with kube's message.
            _ => return Ok(()),
        };
        if self.authorized(user, "bind", namespace, role_resource, role_name).await {
            return Ok(());
        }
        let rules = self.rbac.role_rules(role_kind, namespace, role_name).map_err(|_| Status::not_found(GROUP, &role_kind.to_lowercase(), role_name))?;
        self.confirm_no_escalation(user, namespace, &rules).await.map_err(|why| self.forbidden(name, &why))
    }
}

/// Whether `new` differs from `old` only in what the garbage collector
/// writes (kube `IsOnlyMutatingGCFields`).
fn only_gc_fields_change(new: &Value, old: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(m) = v["metadata"].as_object_mut() {
            for f in ["ownerReferences", "finalizers", "resourceVersion", "managedFields", "generation"] {
                m.remove(f);
            }
        }
        v
    };
    strip(new) == strip(old)
}

/// The guarded REST object: the store, with checks before creates and
/// inside updates.
struct Policy {
    inner: Arc<dyn Rest>,
    checker: Arc<Checker>,
}

impl Rest for Policy {
    fn kind(&self) -> &Gvk {
        self.inner.kind()
    }
    fn negotiated(&self) -> bool {
        self.inner.negotiated()
    }
    fn getter(&self) -> Option<&dyn Getter> {
        self.inner.getter()
    }
    fn lister(&self) -> Option<&dyn Lister> {
        self.inner.lister()
    }
    fn watcher(&self) -> Option<&dyn Watcher> {
        self.inner.watcher()
    }
    fn creater(&self) -> Option<&dyn Creater> {
        self.inner.creater().map(|_| self as &dyn Creater)
    }
    fn updater(&self) -> Option<&dyn Updater> {
        self.inner.updater().map(|_| self as &dyn Updater)
    }
    fn deleter(&self) -> Option<&dyn Deleter> {
        self.inner.deleter()
    }
    fn collection_deleter(&self) -> Option<&dyn CollectionDeleter> {
        self.inner.collection_deleter()
    }
}

#[async_trait]
impl Creater for Policy {
    async fn create(&self, ctx: &Context<'_>, obj: Value, opts: &WriteOptions) -> Result<Value, Status> {
        let Some(inner) = self.inner.creater() else { return Err(Status::method_not_allowed()) };
        self.checker.check(ctx.user, ctx.namespace, &obj, None).await?;
        inner.create(ctx, obj, opts).await
    }
}

/// An update's new object, checked against the current one before the
/// store writes it (kube wraps `UpdatedObjectInfo` the same way).
struct CheckedUpdate<'a> {
    info: &'a dyn UpdatedObjectInfo,
    checker: &'a Checker,
    user: &'a UserInfo,
    namespace: &'a str,
}

#[async_trait]
impl UpdatedObjectInfo for CheckedUpdate<'_> {
    async fn updated_object(&self, current: Option<&Value>) -> Result<Value, Status> {
        let obj = self.info.updated_object(current).await?;
        self.checker.check(self.user, self.namespace, &obj, current).await?;
        Ok(obj)
    }

    fn may_create(&self) -> bool {
        self.info.may_create()
    }
}

#[async_trait]
impl Updater for Policy {
    async fn update(&self, ctx: &Context<'_>, name: &str, info: &dyn UpdatedObjectInfo, opts: &WriteOptions) -> Result<(Value, bool), Status> {
        let Some(inner) = self.inner.updater() else { return Err(Status::method_not_allowed()) };
        let checked = CheckedUpdate { info, checker: &self.checker, user: ctx.user, namespace: ctx.namespace };
        inner.update(ctx, name, &checked, opts).await
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rule(verbs: &[&str], groups: &[&str], resources: &[&str], names: &[&str]) -> PolicyRule {
        let v = |x: &[&str]| x.iter().map(|s| s.to_string()).collect();
        PolicyRule { verbs: v(verbs), api_groups: v(groups), resources: v(resources), resource_names: v(names), non_resource_urls: Vec::new() }
    }

    #[test]
    fn missing_rules_read_as_kube_writes_them() {
        let missing = vec![
            rule(&["get"], &[""], &["secrets"], &[]),
            rule(&["list"], &[""], &["secrets"], &[]),
            rule(&["get"], &["apps"], &["deployments"], &["d"]),
            PolicyRule { verbs: vec!["get".into()], non_resource_urls: vec!["/metrics".into()], ..Default::default() },
        ];
        let got: Vec<String> = compact(missing).iter().map(compact_string).collect();
        assert_eq!(
            got,
            vec![
                r#"{NonResourceURLs:["/metrics"], Verbs:["get"]}"#.to_string(),
                r#"{APIGroups:[""], Resources:["secrets"], Verbs:["get" "list"]}"#.to_string(),
                r#"{APIGroups:["apps"], Resources:["deployments"], ResourceNames:["d"], Verbs:["get"]}"#.to_string(),
            ]
        );
        assert_eq!(go_quoted(&["dev".to_string(), "system:authenticated".to_string()]), r#"["dev" "system:authenticated"]"#);
        assert_eq!(go_quoted(&[]), "[]");
    }

    #[test]
    fn garbage_collector_writes_are_not_checked() {
        let old = json!({"metadata": {"name": "r", "resourceVersion": "1"}, "rules": []});
        let gc = json!({"metadata": {"name": "r", "resourceVersion": "1", "finalizers": ["x"], "ownerReferences": [{"uid": "u"}]}, "rules": []});
        let grant = json!({"metadata": {"name": "r", "resourceVersion": "1"}, "rules": [{"verbs": ["*"]}]});
        assert!(only_gc_fields_change(&gc, &old));
        assert!(!only_gc_fields_change(&grant, &old));
    }

    fn user(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo { name: name.into(), groups: groups.iter().map(|g| g.to_string()).collect(), ..Default::default() }
    }

    /// bob may read pods in `default` and bind `view` there; carol may
    /// escalate roles in `default`.
    fn checker(kind: Guarded) -> Checker {
        use crate::authz::rbac::Kind;
        let rbac = Arc::new(Rbac::new());
        rbac.apply(Kind::Role, &json!({"metadata": {"namespace": "default", "name": "pod-reader"}, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]}), false);
        rbac.apply(Kind::ClusterRole, &json!({"metadata": {"name": "binder"}, "rules": [{"apiGroups": [GROUP], "resources": ["clusterroles"], "verbs": ["bind"], "resourceNames": ["view"]}, {"apiGroups": [GROUP], "resources": ["roles"], "verbs": ["escalate"]}]}), false);
        rbac.apply(Kind::ClusterRole, &json!({"metadata": {"name": "secret-admin"}, "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["*"]}]}), false);
        rbac.apply(Kind::ClusterRole, &json!({"metadata": {"name": "view"}, "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}), false);
        rbac.apply(
            Kind::RoleBinding,
            &json!({"metadata": {"namespace": "default", "name": "b1"}, "roleRef": {"kind": "Role", "name": "pod-reader"}, "subjects": [{"kind": "User", "name": "bob"}]}),
            false,
        );
        rbac.apply(
            Kind::RoleBinding,
            &json!({"metadata": {"namespace": "default", "name": "b2"}, "roleRef": {"kind": "ClusterRole", "name": "binder"}, "subjects": [{"kind": "User", "name": "bob"}]}),
            false,
        );
        Checker { kind, authorizer: rbac.clone(), rbac }
    }

    fn check(c: &Checker, u: &UserInfo, obj: Value) -> Result<(), String> {
        futures::executor::block_on(c.check(u, "default", &obj, None)).map_err(|s| s.message)
    }

    #[test]
    fn roles_need_the_permissions_they_grant_or_escalate() {
        let roles = checker(Guarded::Role);
        let bob = user("bob", &["system:authenticated"]);
        assert_eq!(check(&roles, &bob, json!({"metadata": {"name": "r"}, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]})), Ok(()));
        let err =
            check(&roles, &user("dave", &["system:authenticated"]), json!({"metadata": {"name": "r"}, "rules": [{"apiGroups": [""], "resources": ["pods", "secrets"], "verbs": ["get", "list"]}]}));
        assert_eq!(
            err,
            Err("roles.rbac.authorization.k8s.io \"r\" is forbidden: user \"dave\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"get\" \"list\"]}\n{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"list\"]}".to_string())
        );
        // bob has `escalate` on roles in default.
        assert_eq!(check(&roles, &bob, json!({"metadata": {"name": "r"}, "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]})), Ok(()));
        assert_eq!(check(&roles, &user("root", &["system:masters"]), json!({"metadata": {"name": "r"}, "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]})), Ok(()));
    }

    #[test]
    fn bindings_need_bind_or_the_role_s_permissions() {
        let bindings = checker(Guarded::RoleBinding);
        let bob = user("bob", &[]);
        let binding = |kind: &str, role: &str| json!({"metadata": {"name": "x"}, "roleRef": {"kind": kind, "name": role}, "subjects": [{"kind": "User", "name": "eve"}]});
        // bob holds pod-reader's rules himself, and may bind view.
        assert_eq!(check(&bindings, &bob, binding("Role", "pod-reader")), Ok(()));
        assert_eq!(check(&bindings, &bob, binding("ClusterRole", "view")), Ok(()));
        assert_eq!(
            check(&bindings, &bob, binding("ClusterRole", "secret-admin")),
            Err("rolebindings.rbac.authorization.k8s.io \"x\" is forbidden: user \"bob\" (groups=[]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"*\"]}".to_string())
        );
        assert_eq!(check(&bindings, &bob, binding("ClusterRole", "missing")), Err("clusterrole.rbac.authorization.k8s.io \"missing\" not found".to_string()));
    }
}
