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

pub mod validation;

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
        if let Some(svc) = m.get_mut("clientConfig").and_then(|c| c.get_mut("service")).and_then(Value::as_object_mut) {
            svc.entry("port").or_insert_with(|| json!(443));
        }
        for r in m.get_mut("rules").and_then(Value::as_array_mut).into_iter().flatten() {
            if let Some(r) = r.as_object_mut() {
                r.entry("scope").or_insert_with(|| json!("*"));
            }
        }
    }
}

/// A webhook configuration's strategy: [`Simple`] with kube's create
/// checks, relaxed on update for what the stored object already had.
struct WebhookConfigs {
    inner: Simple,
    mutating: bool,
}

impl Strategy for WebhookConfigs {
    fn name_rule(&self) -> NameRule {
        self.inner.name_rule()
    }
    fn default(&self, obj: &mut Value) {
        self.inner.default(obj)
    }
    fn validate(&self, obj: &Value) -> Vec<Cause> {
        validation::webhook_configuration(obj, self.mutating, &validation::WebhookOptions::for_create())
    }
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        validation::webhook_configuration(new, self.mutating, &validation::WebhookOptions::for_update(new, old))
    }
    fn columns(&self) -> Vec<Column> {
        self.inner.columns()
    }
    fn cells(&self, obj: &Value) -> Vec<Value> {
        self.inner.cells(obj)
    }
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
        if let Some(mc) = s.get_mut("matchConstraints") {
            match_resources_defaults(mc);
        }
    }
}

/// `SetDefaults_MatchResources`: Equivalent matching, empty selectors,
/// rules of any scope.
fn match_resources_defaults(mc: &mut Value) {
    let Some(mc) = mc.as_object_mut() else { return };
    mc.entry("matchPolicy").or_insert_with(|| json!("Equivalent"));
    mc.entry("namespaceSelector").or_insert_with(|| json!({}));
    mc.entry("objectSelector").or_insert_with(|| json!({}));
    for list in ["resourceRules", "excludeResourceRules"] {
        for r in mc.get_mut(list).and_then(Value::as_array_mut).into_iter().flatten() {
            if let Some(r) = r.as_object_mut() {
                r.entry("scope").or_insert_with(|| json!("*"));
            }
        }
    }
}

/// A binding's defaults: those of its `matchResources`.
fn binding_defaults(o: &mut Value) {
    if let Some(mr) = o.get_mut("spec").and_then(|s| s.get_mut("matchResources")) {
        match_resources_defaults(mr);
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
            Box::new(Versioned { inner: Simple::new().with_generation().with_defaults(map_defaults).with_validation(validation::mutating_policy).with_table(map_columns, map_cells), version }),
        ),
        def("mutatingadmissionpolicybindings", "mutatingadmissionpolicybinding", "MutatingAdmissionPolicyBinding", false, &[], &["api-extensions"]).build(
            GROUP,
            version,
            Box::new(Versioned {
                inner: Simple::new().with_generation().with_defaults(binding_defaults).with_validation(|o| validation::binding(o, true)).with_table(vapb_columns, vapb_cells),
                version,
            }),
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
            Box::new(WebhookConfigs { inner: Simple::new().with_defaults(|o| webhook_defaults(o, true)).with_table(webhook_columns, webhook_cells), mutating: true }),
        ),
        def("validatingadmissionpolicies", "validatingadmissionpolicy", "ValidatingAdmissionPolicy", false, &[], &["api-extensions"]).build(
            GROUP,
            "v1",
            Box::new(Simple::new().with_status().with_defaults(vap_defaults).with_validation(validation::validating_policy).with_table(vap_columns, vap_cells)),
        ),
        def("validatingadmissionpolicybindings", "validatingadmissionpolicybinding", "ValidatingAdmissionPolicyBinding", false, &[], &["api-extensions"]).build(
            GROUP,
            "v1",
            Box::new(Simple::new().with_generation().with_defaults(binding_defaults).with_validation(|o| validation::binding(o, false)).with_table(vapb_columns, vapb_cells)),
        ),
        def("validatingwebhookconfigurations", "validatingwebhookconfiguration", "ValidatingWebhookConfiguration", false, &[], &["api-extensions"]).build(
            GROUP,
            "v1",
            Box::new(WebhookConfigs { inner: Simple::new().with_defaults(|o| webhook_defaults(o, false)).with_table(webhook_columns, webhook_cells), mutating: false }),
        ),
    ];
    for version in ["v1", "v1beta1", "v1alpha1"] {
        defs.extend(mutating_policies(version));
    }
    defs
}
