//! Type checking of ValidatingAdmissionPolicies for
//! `status.typeChecking.expressionWarnings` (kube
//! `policy/validating/typechecking.go`).
//!
//! As kube does, the kinds checked are those the policy's
//! `matchConstraints.resourceRules` name without wildcards (at most ten,
//! sorted by group, version, kind); each of `spec.validations[i].expression`
//! and `.messageExpression` is checked against each kind, and a warning
//! names the kind: `apps/v1, Kind=Deployment: ERROR: <input>:1:12:
//! undefined field 'replica'` followed by the line and a caret. A policy
//! whose kinds are all unknown (or wildcards) gets no warnings.
//!
//! What is checked, with the `cel` crate's parser and this server's
//! schemas:
//!
//! - syntax errors;
//! - field paths written out from `object` or `oldObject`
//!   (`object.spec.replicas`, `has(object.spec.x)`): each field must be
//!   declared by the kind's schema. The check stops where the schema stops
//!   (maps, free-form objects, preserve-unknown-fields, int-or-string,
//!   lists) and accepts `apiVersion`, `kind` and `metadata` at the root.
//!
//! What cannot be checked here (the `cel` crate has no type checker): the
//! types of operands and of results (comparing a string with an int,
//! `must evaluate to bool`), function overloads, paths reached through
//! variables, macros' iteration variables, `params` (its kind's schema) or
//! `request`, and anything indexed (`object["spec"]`).

use std::collections::BTreeSet;

use kube_cel::cel::common::ast::Expr;
use serde_json::{json, Value};

use super::compile::visit;
use crate::schema::{SchemaRef, SchemaStore, Type};

/// kube's limit on the kinds checked per policy.
const MAX_KINDS: usize = 10;

/// A (group, version, kind).
pub type Gvk = (String, String, String);

/// The kinds to check for `policy` (kube's `typesToCheck`): the
/// `resourceRules` without wildcards in groups or versions, their resources
/// without `*` or `/`, mapped to kinds by `kind_of(group, version,
/// resource)`, sorted, at most ten.
pub fn kinds_to_check(policy: &Value, kind_of: impl Fn(&str, &str, &str) -> Option<String>) -> Vec<Gvk> {
    let strings = |v: &Value| -> Vec<String> { v.as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect() };
    let mut out: BTreeSet<Gvk> = BTreeSet::new();
    for rule in policy["spec"]["matchConstraints"]["resourceRules"].as_array().into_iter().flatten() {
        let mut groups = strings(&rule["apiGroups"]);
        let mut versions = strings(&rule["apiVersions"]);
        if groups.iter().chain(&versions).any(|s| s.contains('*')) {
            continue;
        }
        let mut resources: Vec<String> = strings(&rule["resources"]).into_iter().filter(|r| !r.contains('*') && !r.contains('/')).collect();
        groups.sort();
        versions.sort();
        resources.sort();
        for g in &groups {
            for v in &versions {
                for r in &resources {
                    if let Some(k) = kind_of(g, v, r) {
                        out.insert((g.clone(), v.clone(), k));
                        if out.len() == MAX_KINDS {
                            return out.into_iter().collect();
                        }
                    }
                }
            }
        }
    }
    out.into_iter().collect()
}

/// Go's `GroupVersionKind.String()`: `apps/v1, Kind=Deployment`,
/// `/v1, Kind=Pod`.
fn gvk_string(k: &Gvk) -> String {
    format!("{}/{}, Kind={}", k.0, k.1, k.2)
}

/// The `expressionWarnings` of `policy` for `kinds`, as
/// `[{fieldRef, warning}]` (empty: nothing found).
pub fn expression_warnings(policy: &Value, kinds: &[Gvk], schemas: &SchemaStore) -> Vec<Value> {
    let mut out = Vec::new();
    if kinds.is_empty() {
        return out;
    }
    for (i, v) in policy["spec"]["validations"].as_array().into_iter().flatten().enumerate() {
        for field in ["expression", "messageExpression"] {
            let Some(source) = v[field].as_str().filter(|s| !s.is_empty()) else { continue };
            let results: Vec<String> = kinds.iter().filter_map(|k| check(source, k, schemas).map(|issue| format!("{}: {issue}\n", gvk_string(k)))).collect();
            if !results.is_empty() {
                out.push(json!({"fieldRef": format!("spec.validations[{i}].{field}"), "warning": results.join("\n")}));
            }
        }
    }
    out
}

/// The issues of `source` against kind `k`, in cel-go's display form;
/// `None` when none is found.
fn check(source: &str, k: &Gvk, schemas: &SchemaStore) -> Option<String> {
    let ast = match kube_cel::cel::parser::Parser::default().parse(source) {
        Ok(a) => a,
        Err(e) => return Some(e.to_string().replace("\n| ", "\n | ")),
    };
    let schema = schemas.of_kind(&k.0, &k.1, &k.2)?;
    let mut paths: Vec<(String, Vec<String>)> = Vec::new();
    visit(&ast, &mut |e| {
        if let Some(p) = select_path(e) {
            if !paths.contains(&p) {
                paths.push(p);
            }
        }
    });
    let mut issues = Vec::new();
    let mut reported = BTreeSet::new();
    for (root, fields) in paths {
        if let Some(bad) = undeclared(schema.root(), &fields) {
            let prefix = format!("{root}.{}", fields[..bad].join("."));
            if reported.insert(prefix.clone()) {
                issues.push(render(source, &prefix, &fields[bad]));
            }
        }
    }
    if issues.is_empty() {
        None
    } else {
        Some(issues.join("\n"))
    }
}

/// `(root, [field, …])` of a select chain from `object` or `oldObject`.
fn select_path(e: &kube_cel::cel::common::ast::IdedExpr) -> Option<(String, Vec<String>)> {
    let mut fields = Vec::new();
    let mut cur = e;
    loop {
        match &cur.expr {
            Expr::Select(s) => {
                fields.push(s.field.clone());
                cur = &s.operand;
            }
            Expr::Ident(root) if (root == "object" || root == "oldObject") && !fields.is_empty() => {
                fields.reverse();
                return Some((root.clone(), fields));
            }
            _ => return None,
        }
    }
}

/// The index of the first field of `fields` the schema does not declare.
fn undeclared(root: SchemaRef<'_>, fields: &[String]) -> Option<usize> {
    let mut s = root;
    for (i, f) in fields.iter().enumerate() {
        if s.preserve_unknown_fields() || s.int_or_string() || s.ty() == Some(Type::Array) {
            return None;
        }
        if let Some(child) = s.property(f) {
            s = child;
            continue;
        }
        if let Some(values) = s.additional_properties() {
            s = values;
            continue;
        }
        if i == 0 && matches!(f.as_str(), "apiVersion" | "kind" | "metadata") {
            return None;
        }
        if !s.has_properties() || s.additional_properties_bool() == Some(true) {
            return None;
        }
        return Some(i);
    }
    None
}

/// cel-go's display of `undefined field` at the `.` before `field` of the
/// first `prefix.field` in `source`.
fn render(source: &str, prefix: &str, field: &str) -> String {
    let needle = format!("{prefix}.{field}");
    let at = source.find(&needle).map(|p| p + prefix.len()).or_else(|| source.find(&format!(".{field}"))).unwrap_or(0);
    let line_start = source[..at].rfind('\n').map_or(0, |p| p + 1);
    let line_no = source[..at].matches('\n').count() + 1;
    let line = source[line_start..].lines().next().unwrap_or("");
    let col = source[line_start..at].chars().count();
    format!("ERROR: <input>:{line_no}:{}: undefined field '{field}'\n | {}\n | {}^", col + 1, line.replace('\t', " "), ".".repeat(col))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment() -> Vec<Gvk> {
        vec![("apps".into(), "v1".into(), "Deployment".into())]
    }

    #[test]
    fn kinds_come_from_rules_without_wildcards() {
        let p = json!({"spec": {"matchConstraints": {"resourceRules": [
            {"apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments", "deployments/scale", "*"]},
            {"apiGroups": ["*"], "apiVersions": ["v1"], "resources": ["pods"]},
            {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods", "nope"]},
        ]}}});
        let kinds = kinds_to_check(&p, |g, _, r| match (g, r) {
            ("apps", "deployments") => Some("Deployment".into()),
            ("", "pods") => Some("Pod".into()),
            _ => None,
        });
        assert_eq!(kinds, [("".into(), "v1".into(), "Pod".into()), ("apps".into(), "v1".into(), "Deployment".into())]);
        assert_eq!(gvk_string(&kinds[0]), "/v1, Kind=Pod");
    }

    #[test]
    fn undefined_fields_and_syntax_errors_are_warned() {
        let schemas = SchemaStore::builtin();
        let p = json!({"spec": {"validations": [
            {"expression": "object.spec.replicas <= 5 && object.metadata.labels.app == 'x'"},
            {"expression": "object.spec.replica > 1 && has(oldObject.spec.replica)", "messageExpression": "'n: ' + object.spec.template.spec.containers[0].nam"},
            {"expression": "object.spec.replicas <="},
        ]}});
        let w = expression_warnings(&p, &deployment(), &schemas);
        let refs: Vec<&str> = w.iter().filter_map(|x| x["fieldRef"].as_str()).collect();
        assert_eq!(refs, ["spec.validations[1].expression", "spec.validations[2].expression"], "{w:#?}");
        assert_eq!(
            w[0]["warning"],
            "apps/v1, Kind=Deployment: ERROR: <input>:1:12: undefined field 'replica'\n | object.spec.replica > 1 && has(oldObject.spec.replica)\n | ...........^\nERROR: <input>:1:46: undefined field 'replica'\n | object.spec.replica > 1 && has(oldObject.spec.replica)\n | .............................................^\n"
        );
        assert!(w[1]["warning"].as_str().is_some_and(|s| s.starts_with("apps/v1, Kind=Deployment: ERROR: <input>:1:")), "{w:#?}");
        assert!(expression_warnings(&p, &[], &schemas).is_empty());
    }
}
