//! `admissionregistration.k8s.io`: webhook configurations,
//! ValidatingAdmissionPolicies and MutatingAdmissionPolicies with their
//! bindings, enforced by the admission plugins (`crate::admission`).
//!
//! Everything is served as v1. MutatingAdmissionPolicy and its binding are
//! also served as v1beta1 and v1alpha1 for older clients (kube 1.32 and
//! 1.33 serve those): the same objects, stored once as v1; the versions
//! differ only in `apiVersion`.

use serde_json::{json, Value};

use super::printers::{age, str_cell};
use super::simple::{def, Simple};
use super::strategy::{Column, NameRule, Strategy, AGE_COLUMN, NAME_COLUMN};
use super::ResourceDef;
use crate::errors::Cause;
use crate::meta;

const GROUP: &str = "admissionregistration.k8s.io";

fn webhook_columns() -> Vec<Column> {
    vec![NAME_COLUMN, Column::new("Webhooks", "integer", "Webhooks indicates the number of webhooks in this configuration"), AGE_COLUMN]
}

fn webhook_cells(o: &Value) -> Vec<Value> {
    vec![json!(meta::name(o)), json!(o["webhooks"].as_array().map_or(0, Vec::len)), json!(age(o))]
}

/// Webhook defaults of admissionregistration/v1 (`SetDefaults_*Webhook`).
fn webhook_defaults(o: &mut Value, mutating: bool) {
    for w in o["webhooks"].as_array_mut().into_iter().flatten() {
        let Some(m) = w.as_object_mut() else { continue };
        m.entry("failurePolicy").or_insert_with(|| json!("Fail"));
        m.entry("matchPolicy").or_insert_with(|| json!("Equivalent"));
        m.entry("namespaceSelector").or_insert_with(|| json!({}));
        m.entry("objectSelector").or_insert_with(|| json!({}));
        m.entry("timeoutSeconds").or_insert_with(|| json!(10));
        if mutating {
            m.entry("reinvocationPolicy").or_insert_with(|| json!("Never"));
        }
        for r in m.get_mut("rules").and_then(Value::as_array_mut).into_iter().flatten() {
            if let Some(r) = r.as_object_mut() {
                r.entry("scope").or_insert_with(|| json!("*"));
            }
        }
    }
}

fn webhook_validate(o: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    for (i, w) in o["webhooks"].as_array().into_iter().flatten().enumerate() {
        causes.extend(cel_causes(&format!("webhooks[{i}]."), w, &[("matchConditions", "expression")]));
        if w["name"].as_str().is_none_or(str::is_empty) {
            causes.push(Cause::required(&format!("webhooks[{i}].name"), ""));
        }
        if w["sideEffects"].is_null() {
            causes.push(Cause {
                reason: "FieldValueNotSupported".into(),
                message: "Unsupported value: \"\": supported values: \"None\", \"NoneOnDryRun\"".into(),
                field: format!("webhooks[{i}].sideEffects"),
            });
        }
        if w["admissionReviewVersions"].as_array().is_none_or(Vec::is_empty) {
            causes.push(Cause::required(&format!("webhooks[{i}].admissionReviewVersions"), "must specify one of \"v1\", \"v1beta1\""));
        }
    }
    causes
}

/// The CEL expressions of a policy or webhook, compiled as their plugins
/// will compile them: one 422 cause per expression that does not parse
/// (kube: `spec.validations[0].expression: Invalid value: "…": compilation
/// failed: …`). Type checking is left to the policy's `status.typeChecking`.
fn cel_causes(base: &str, o: &Value, paths: &[(&str, &str)]) -> Vec<Cause> {
    let mut causes = Vec::new();
    for (list, field) in paths {
        let mut node = o;
        for part in list.split('.') {
            node = &node[part];
        }
        for (i, item) in node.as_array().into_iter().flatten().enumerate() {
            let mut expr = item;
            for part in field.split('.') {
                expr = &expr[part];
            }
            let Some(src) = expr.as_str() else { continue };
            if let Err(e) = crate::cel::Program::compile(src) {
                causes.push(Cause::invalid(&format!("{base}{list}[{i}].{field}"), &Value::String(src.to_string()), &e.to_string()));
            }
        }
    }
    causes
}

/// The expressions of ValidatingAdmissionPolicy and MutatingAdmissionPolicy.
fn policy_validate(o: &Value) -> Vec<Cause> {
    cel_causes(
        "",
        o,
        &[
            ("spec.validations", "expression"),
            ("spec.validations", "messageExpression"),
            ("spec.auditAnnotations", "valueExpression"),
            ("spec.matchConditions", "expression"),
            ("spec.variables", "expression"),
            ("spec.mutations", "applyConfiguration.expression"),
            ("spec.mutations", "jsonPatch.expression"),
        ],
    )
}

fn vap_columns() -> Vec<Column> {
    vec![
        NAME_COLUMN,
        Column::new("Validations", "integer", "Validations indicates the number of validation rules defined in this configuration"),
        Column::new("ParamKind", "string", "ParamKind specifies the kind of resources used to parameterize this policy"),
        AGE_COLUMN,
    ]
}

fn vap_cells(o: &Value) -> Vec<Value> {
    let pk = &o["spec"]["paramKind"];
    let param = if pk.is_object() { format!("{} {}", pk["apiVersion"].as_str().unwrap_or(""), pk["kind"].as_str().unwrap_or("")) } else { "<unset>".into() };
    vec![json!(meta::name(o)), json!(o["spec"]["validations"].as_array().map_or(0, Vec::len)), json!(param), json!(age(o))]
}

fn vap_defaults(o: &mut Value) {
    if let Some(s) = o.get_mut("spec").and_then(Value::as_object_mut) {
        s.entry("failurePolicy").or_insert_with(|| json!("Fail"));
        if let Some(mc) = s.get_mut("matchConstraints").and_then(Value::as_object_mut) {
            mc.entry("matchPolicy").or_insert_with(|| json!("Equivalent"));
            mc.entry("namespaceSelector").or_insert_with(|| json!({}));
            mc.entry("objectSelector").or_insert_with(|| json!({}));
        }
    }
}

fn map_columns() -> Vec<Column> {
    vec![
        NAME_COLUMN,
        Column::new("Mutations", "integer", "Mutation indicates the number of mutations rules defined in this configuration"),
        Column::new("ParamKind", "string", "ParamKind specifies the kind of resources used to parameterize this policy"),
        AGE_COLUMN,
    ]
}

fn map_cells(o: &Value) -> Vec<Value> {
    let mut cells = vap_cells(o);
    cells[1] = json!(o["spec"]["mutations"].as_array().map_or(0, Vec::len));
    cells
}

/// MutatingAdmissionPolicy defaults (as ValidatingAdmissionPolicy's, plus
/// `reinvocationPolicy: Never`).
fn map_defaults(o: &mut Value) {
    vap_defaults(o);
    if let Some(s) = o.get_mut("spec").and_then(Value::as_object_mut) {
        s.entry("reinvocationPolicy").or_insert_with(|| json!("Never"));
    }
}

fn vapb_columns() -> Vec<Column> {
    vec![
        NAME_COLUMN,
        Column::new("PolicyName", "string", "PolicyName indicates the policy definition which the policy binding binded to"),
        Column::new("ParamRef", "string", "ParamRef indicates the param resource which sets the configration param"),
        AGE_COLUMN,
    ]
}

fn vapb_cells(o: &Value) -> Vec<Value> {
    let pr = &o["spec"]["paramRef"];
    let param = if pr.is_object() {
        match pr["namespace"].as_str().filter(|n| !n.is_empty()) {
            Some(ns) => format!("{ns}/{}", pr["name"].as_str().unwrap_or("*")),
            None => format!("*/{}", pr["name"].as_str().unwrap_or("*")),
        }
    } else {
        "<unset>".into()
    };
    vec![json!(meta::name(o)), str_cell(&o["spec"]["policyName"]), json!(param), json!(age(o))]
}

/// One served version of a resource whose versions share one shape,
/// stored as v1: `apiVersion` is all a conversion changes.
struct Versioned {
    inner: Simple,
    version: &'static str,
}

impl Strategy for Versioned {
    fn name_rule(&self) -> NameRule {
        self.inner.name_rule()
    }
    fn has_status(&self) -> bool {
        self.inner.has_status()
    }
    fn has_generation(&self) -> bool {
        self.inner.has_generation()
    }
    fn default(&self, obj: &mut Value) {
        self.inner.default(obj)
    }
    fn validate(&self, obj: &Value) -> Vec<Cause> {
        self.inner.validate(obj)
    }
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        self.inner.validate_update(new, old)
    }
    fn selectable_fields(&self) -> &'static [&'static str] {
        self.inner.selectable_fields()
    }
    fn storage_version(&self) -> Option<(&str, &str)> {
        (self.version != "v1").then_some((GROUP, "v1"))
    }
    fn convert_to_hub(&self, mut obj: Value) -> Value {
        if let Some(o) = obj.as_object_mut() {
            o.insert("apiVersion".into(), json!(format!("{GROUP}/v1")));
        }
        obj
    }
    fn convert_from_hub(&self, mut obj: Value) -> Value {
        if let Some(o) = obj.as_object_mut() {
            o.insert("apiVersion".into(), json!(format!("{GROUP}/{}", self.version)));
        }
        obj
    }
    fn columns(&self) -> Vec<Column> {
        self.inner.columns()
    }
    fn cells(&self, obj: &Value) -> Vec<Value> {
        self.inner.cells(obj)
    }
}

/// MutatingAdmissionPolicy and its binding in `version`.
fn mutating_policies(version: &'static str) -> Vec<ResourceDef> {
    vec![
        def("mutatingadmissionpolicies", "mutatingadmissionpolicy", "MutatingAdmissionPolicy", false, &[], &["api-extensions"]).build(
            GROUP,
            version,
            Box::new(Versioned { inner: Simple::new().with_generation().with_defaults(map_defaults).with_validation(policy_validate).with_table(map_columns, map_cells), version }),
        ),
        def("mutatingadmissionpolicybindings", "mutatingadmissionpolicybinding", "MutatingAdmissionPolicyBinding", false, &[], &["api-extensions"]).build(
            GROUP,
            version,
            Box::new(Versioned { inner: Simple::new().with_generation().with_table(vapb_columns, vapb_cells), version }),
        ),
    ]
}

/// admissionregistration.k8s.io resources: v1, then the older versions of
/// MutatingAdmissionPolicy.
pub fn resources() -> Vec<ResourceDef> {
    let mut defs = vec![
        def("mutatingwebhookconfigurations", "mutatingwebhookconfiguration", "MutatingWebhookConfiguration", false, &[], &["api-extensions"]).build(
            GROUP,
            "v1",
            Box::new(Simple::new().with_defaults(|o| webhook_defaults(o, true)).with_validation(webhook_validate).with_table(webhook_columns, webhook_cells)),
        ),
        def("validatingadmissionpolicies", "validatingadmissionpolicy", "ValidatingAdmissionPolicy", false, &[], &["api-extensions"]).build(
            GROUP,
            "v1",
            Box::new(Simple::new().with_status().with_defaults(vap_defaults).with_validation(policy_validate).with_table(vap_columns, vap_cells)),
        ),
        def("validatingadmissionpolicybindings", "validatingadmissionpolicybinding", "ValidatingAdmissionPolicyBinding", false, &[], &["api-extensions"]).build(
            GROUP,
            "v1",
            Box::new(Simple::new().with_generation().with_table(vapb_columns, vapb_cells)),
        ),
        def("validatingwebhookconfigurations", "validatingwebhookconfiguration", "ValidatingWebhookConfiguration", false, &[], &["api-extensions"]).build(
            GROUP,
            "v1",
            Box::new(Simple::new().with_defaults(|o| webhook_defaults(o, false)).with_validation(webhook_validate).with_table(webhook_columns, webhook_cells)),
        ),
    ];
    for version in ["v1", "v1beta1", "v1alpha1"] {
        defs.extend(mutating_policies(version));
    }
    defs
}
