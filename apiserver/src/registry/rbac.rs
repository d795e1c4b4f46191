//! `rbac.authorization.k8s.io/v1`: Roles, ClusterRoles and their bindings,
//! stored and served; with RBAC on, writes are guarded against privilege
//! escalation ([`super::escalation`]).

use std::sync::Arc;

use serde_json::{json, Value};

use super::escalation::{guard, Guarded};
use super::printers::{age, created_at};
use super::simple::{def, Simple, CREATED_AT_COLUMN};
use super::strategy::{Column, NameRule, AGE_COLUMN, NAME_COLUMN};
use super::ResourceDef;
use crate::authz::rbac::Rbac;
use crate::authz::Authorizer;
use crate::errors::Cause;
use crate::meta;

const GROUP: &str = "rbac.authorization.k8s.io";

fn role_columns() -> Vec<Column> {
    vec![NAME_COLUMN, CREATED_AT_COLUMN]
}

fn role_cells(o: &Value) -> Vec<Value> {
    vec![json!(meta::name(o)), created_at(o)]
}

fn binding_columns() -> Vec<Column> {
    vec![
        NAME_COLUMN,
        Column::new("Role", "string", "RoleRef is the reference to the role."),
        AGE_COLUMN,
        Column::wide("Users", "string", "Users in the binding"),
        Column::wide("Groups", "string", "Groups in the binding"),
        Column::wide("ServiceAccounts", "string", "ServiceAccounts in the binding"),
    ]
}

fn binding_cells(o: &Value) -> Vec<Value> {
    let role = format!("{}/{}", o["roleRef"]["kind"].as_str().unwrap_or(""), o["roleRef"]["name"].as_str().unwrap_or(""));
    let (mut users, mut groups, mut sas) = (Vec::new(), Vec::new(), Vec::new());
    for s in o["subjects"].as_array().into_iter().flatten() {
        let n = s["name"].as_str().unwrap_or("").to_string();
        match s["kind"].as_str().unwrap_or("") {
            "User" => users.push(n),
            "Group" => groups.push(n),
            "ServiceAccount" => sas.push(format!("{}/{n}", s["namespace"].as_str().unwrap_or(""))),
            _ => {}
        }
    }
    vec![json!(meta::name(o)), json!(role), json!(age(o)), json!(users.join(", ")), json!(groups.join(", ")), json!(sas.join(", "))]
}

fn binding_defaults(o: &mut Value) {
    for s in o["subjects"].as_array_mut().into_iter().flatten() {
        let kind = s["kind"].as_str().unwrap_or("").to_string();
        if let Some(m) = s.as_object_mut() {
            if matches!(kind.as_str(), "User" | "Group") {
                m.entry("apiGroup").or_insert_with(|| json!(GROUP));
            }
        }
    }
}

fn binding_validate(o: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let r = &o["roleRef"];
    if r["name"].as_str().is_none_or(str::is_empty) {
        causes.push(Cause::required("roleRef.name", ""));
    }
    match r["kind"].as_str() {
        Some("Role" | "ClusterRole") => {}
        _ => causes.push(Cause {
            reason: "FieldValueNotSupported".into(),
            message: format!("Unsupported value: {}: supported values: \"Role\", \"ClusterRole\"", r["kind"]),
            field: "roleRef.kind".into(),
        }),
    }
    for (i, s) in o["subjects"].as_array().into_iter().flatten().enumerate() {
        if s["name"].as_str().is_none_or(str::is_empty) {
            causes.push(Cause::required(&format!("subjects[{i}].name"), ""));
        }
    }
    causes
}

/// A binding's `roleRef` cannot change (kube's `ValidateRoleBindingUpdate`).
fn binding_validate_update(new: &Value, old: &Value) -> Vec<Cause> {
    if new["roleRef"] != old["roleRef"] {
        return vec![Cause::invalid("roleRef", &new["roleRef"], "cannot change roleRef")];
    }
    Vec::new()
}

/// rbac.authorization.k8s.io/v1 resources; with `rbac` (RBAC is an
/// authorization mode), writes are checked against escalation with
/// `authorizer` and RBAC's rules.
pub fn resources(authorizer: &Arc<dyn Authorizer>, rbac: Option<&Arc<Rbac>>) -> Vec<ResourceDef> {
    let role = || Box::new(Simple::new().with_names(NameRule::PathSegment).with_table(role_columns, role_cells));
    let binding = || {
        Box::new(
            Simple::new()
                .with_names(NameRule::PathSegment)
                .with_defaults(binding_defaults)
                .with_validation(binding_validate)
                .with_update_validation(binding_validate_update)
                .with_table(binding_columns, binding_cells),
        )
    };
    let guarded = |d: ResourceDef, kind: Guarded| match rbac {
        Some(rbac) => d.decorated(guard(kind, authorizer.clone(), rbac.clone())),
        None => d,
    };
    vec![
        guarded(def("clusterrolebindings", "clusterrolebinding", "ClusterRoleBinding", false, &[], &[]).build(GROUP, "v1", binding()), Guarded::ClusterRoleBinding),
        guarded(def("clusterroles", "clusterrole", "ClusterRole", false, &[], &[]).build(GROUP, "v1", role()), Guarded::ClusterRole),
        guarded(def("rolebindings", "rolebinding", "RoleBinding", true, &[], &[]).build(GROUP, "v1", binding()), Guarded::RoleBinding),
        guarded(def("roles", "role", "Role", true, &[], &[]).build(GROUP, "v1", role()), Guarded::Role),
    ]
}
