//! `apiextensions.k8s.io/v1`: CustomResourceDefinitions, and the strategy
//! of the custom resources they define (kube's apiextensions-apiserver
//! `pkg/registry/customresourcedefinition`, `pkg/apis/apiextensions/validation`
//! and `pkg/registry/customresource`, reduced to conversion strategy None).
//!
//! A CRD is stored like any object. What makes its resources served is the
//! CRD controller (`controllers/crd.rs`): it sets the `NamesAccepted` and
//! `Established` conditions and adds each served version to the registry.
//!
//! Deleting a CRD only marks it: the first delete adds the
//! [`CLEANUP_FINALIZER`] and the `Terminating` condition, the controller
//! deletes every custom resource and then drops the finalizer, and the CRD
//! goes.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};

use super::scale::{ScaleMapping, ScalePaths};
use super::simple::CREATED_AT_COLUMN;
use super::strategy::{Column, NameRule, Strategy, NAME_COLUMN};
use super::{subresources, Resource, ResourceDef};
use crate::errors::Cause;
use crate::meta;
use crate::schema::{field, FieldError};

/// The API group.
pub const GROUP: &str = "apiextensions.k8s.io";
/// The finalizer that holds a CRD until its custom resources are deleted.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// The `apiextensions.k8s.io/v1` resources.
pub fn resources() -> Vec<ResourceDef> {
    let r = Resource::new(GROUP, "v1", "customresourcedefinitions", "customresourcedefinition", "CustomResourceDefinition", false, Arc::new(CrdStrategy));
    vec![ResourceDef::stored(r, vec![subresources::status()]).short_names(&["crd", "crds"]).categories(&["api-extensions"])]
}

/// One served version of a CRD, as read from its spec.
#[derive(Debug, Clone, PartialEq)]
pub struct CrdVersion {
    /// `v1`, `v1beta1`.
    pub name: String,
    /// Whether it is the storage version.
    pub storage: bool,
    /// `schema.openAPIV3Schema`.
    pub schema: Value,
    /// Whether the status subresource is enabled.
    pub status: bool,
    /// The scale subresource's paths, when it is enabled.
    pub scale: Option<ScalePaths>,
}

/// What serving a CRD needs from its spec.
#[derive(Debug, Clone, PartialEq)]
pub struct CrdSpec {
    /// `spec.group`.
    pub group: String,
    /// `spec.names.plural`.
    pub plural: String,
    /// `spec.names.singular` (defaulted to the lowercased kind).
    pub singular: String,
    /// `spec.names.kind`.
    pub kind: String,
    /// `spec.names.listKind` (defaulted to kind + `List`).
    pub list_kind: String,
    /// `spec.names.shortNames`.
    pub short_names: Vec<String>,
    /// `spec.names.categories`.
    pub categories: Vec<String>,
    /// `spec.scope == "Namespaced"`.
    pub namespaced: bool,
    /// The served versions, in spec order.
    pub versions: Vec<CrdVersion>,
    /// The storage version's name.
    pub storage_version: String,
    /// `spec.conversion.strategy == "Webhook"`.
    pub webhook_conversion: bool,
    /// Every version (served or not) as `group/version`, with its spec
    /// replicas path when it has a scale subresource: how managedFields
    /// entries of each version map to a Scale.
    pub replicas_paths: Vec<(String, Option<String>)>,
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().map(|a| a.iter().filter_map(Value::as_str).map(String::from).collect()).unwrap_or_default()
}

impl CrdSpec {
    /// Reads a (valid, defaulted) CRD object.
    pub fn of(crd: &Value) -> Self {
        let spec = &crd["spec"];
        let names = &spec["names"];
        let s = |v: &Value| v.as_str().unwrap_or("").to_string();
        let kind = s(&names["kind"]);
        let singular = names["singular"].as_str().filter(|x| !x.is_empty()).map_or_else(|| kind.to_lowercase(), String::from);
        let list_kind = names["listKind"].as_str().filter(|x| !x.is_empty()).map_or_else(|| format!("{kind}List"), String::from);
        let all: &[Value] = spec["versions"].as_array().map_or(&[], Vec::as_slice);
        let storage_version = all.iter().find(|v| v["storage"] == json!(true)).map(|v| s(&v["name"])).unwrap_or_default();
        let versions = all
            .iter()
            .filter(|v| v["served"] == json!(true))
            .map(|v| CrdVersion {
                name: s(&v["name"]),
                storage: v["storage"] == json!(true),
                schema: v["schema"]["openAPIV3Schema"].clone(),
                status: v["subresources"]["status"].is_object(),
                scale: scale_paths(&v["subresources"]["scale"]),
            })
            .collect();
        let group = s(&spec["group"]);
        let replicas_paths = all.iter().map(|v| (format!("{group}/{}", s(&v["name"])), scale_paths(&v["subresources"]["scale"]).map(|p| p.spec_replicas))).collect();
        CrdSpec {
            group,
            plural: s(&names["plural"]),
            singular,
            kind,
            list_kind,
            short_names: strings(&names["shortNames"]),
            categories: strings(&names["categories"]),
            namespaced: spec["scope"] == json!("Namespaced"),
            versions,
            storage_version,
            webhook_conversion: spec["conversion"]["strategy"] == json!("Webhook"),
            replicas_paths,
        }
    }

    /// The registry entries of every served version: the storage version's
    /// first, the others stored as it, with conversion None. Creates are
    /// refused while `terminating` is set (the CRD is being deleted).
    pub fn resource_defs(&self, terminating: &Arc<AtomicBool>) -> Vec<ResourceDef> {
        let mut defs = Vec::new();
        let mut ordered: Vec<&CrdVersion> = self.versions.iter().filter(|v| v.storage).collect();
        ordered.extend(self.versions.iter().filter(|v| !v.storage));
        for v in ordered {
            let storage = if v.storage { None } else { Some((self.group.clone(), self.storage_version.clone())) };
            let strategy = CustomStrategy { status: v.status, storage, terminating: terminating.clone(), scale: v.scale.clone() };
            let mut r = Resource::new(&self.group, &v.name, &self.plural, &self.singular, &self.kind, self.namespaced, Arc::new(strategy));
            r.converter = if self.webhook_conversion && !v.storage { Arc::new(WebhookPending) } else { Arc::new(super::conversion::NoConversion) };
            r.short_names = self.short_names.clone();
            r.categories = self.categories.clone();
            let mut subs = if v.status { vec![subresources::status()] } else { Vec::new() };
            if let Some(paths) = &v.scale {
                subs.push(super::scale::custom_scale(ScaleMapping::custom(paths, &self.replicas_paths)));
            }
            defs.push(ResourceDef::stored(r, subs));
        }
        defs
    }
}

/// A version's `subresources.scale`, if set.
fn scale_paths(scale: &Value) -> Option<ScalePaths> {
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    scale.is_object().then(|| ScalePaths {
        spec_replicas: s(&scale["specReplicasPath"]),
        status_replicas: s(&scale["statusReplicasPath"]),
        label_selector: scale["labelSelectorPath"].as_str().map(String::from),
    })
}

/// The condition of `type_` in a CRD's status, if set.
pub fn condition<'a>(crd: &'a Value, type_: &str) -> Option<&'a Value> {
    crd["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == json!(type_))
}

/// Whether the condition `type_` is `True`.
pub fn condition_true(crd: &Value, type_: &str) -> bool {
    condition(crd, type_).is_some_and(|c| c["status"] == json!("True"))
}

/// Sets a condition in `status.conditions` (kube's `SetCRDCondition`): the
/// transition time changes only when the status does.
pub fn set_condition(crd: &mut Value, type_: &str, status: &str, reason: &str, message: &str) {
    let Some(o) = crd.as_object_mut() else { return };
    let st = o.entry("status").or_insert_with(|| json!({}));
    if !st.is_object() {
        *st = json!({});
    }
    let conds = st.as_object_mut().map(|m| m.entry("conditions").or_insert_with(|| json!([])));
    let Some(conds) = conds else { return };
    if !conds.is_array() {
        *conds = json!([]);
    }
    let Some(list) = conds.as_array_mut() else { return };
    let new = |time: String| json!({"type": type_, "status": status, "lastTransitionTime": time, "reason": reason, "message": message});
    match list.iter_mut().find(|c| c["type"] == json!(type_)) {
        Some(c) => {
            let time = if c["status"] == json!(status) { c["lastTransitionTime"].as_str().map_or_else(meta::now, String::from) } else { meta::now() };
            *c = new(time);
        }
        None => list.push(new(meta::now())),
    }
}

/// The strategy of CustomResourceDefinitions.
pub struct CrdStrategy;

impl Strategy for CrdStrategy {
    fn has_status(&self) -> bool {
        true
    }

    fn has_generation(&self) -> bool {
        true
    }

    /// v1 defaults: singular, listKind, conversion strategy None.
    fn default(&self, obj: &mut Value) {
        let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else { return };
        if let Some(names) = spec.get_mut("names").and_then(Value::as_object_mut) {
            let kind = names.get("kind").and_then(Value::as_str).unwrap_or("").to_string();
            if !kind.is_empty() {
                if names.get("singular").and_then(Value::as_str).is_none_or(str::is_empty) {
                    names.insert("singular".into(), json!(kind.to_lowercase()));
                }
                if names.get("listKind").and_then(Value::as_str).is_none_or(str::is_empty) {
                    names.insert("listKind".into(), json!(format!("{kind}List")));
                }
            }
        }
        let conv = spec.entry("conversion").or_insert_with(|| json!({}));
        if let Some(c) = conv.as_object_mut() {
            c.entry("strategy").or_insert_with(|| json!("None"));
        }
    }

    /// Status starts empty but for the storage version in
    /// `storedVersions` (kube's PrepareForCreate).
    fn prepare_for_create(&self, obj: &mut Value) {
        let stored: Vec<Value> = storage_versions(obj).into_iter().map(Value::String).collect();
        if let Some(o) = obj.as_object_mut() {
            o.insert("status".into(), json!({"acceptedNames": {"plural": "", "kind": ""}, "storedVersions": stored}));
        }
    }

    /// Status is kept; a new storage version joins `storedVersions`.
    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        super::strategy::keep_status(new, old);
        let add = storage_versions(new);
        let Some(st) = new.get_mut("status").and_then(Value::as_object_mut) else { return };
        let list = st.entry("storedVersions").or_insert_with(|| json!([]));
        if let Some(list) = list.as_array_mut() {
            for v in add {
                if !list.iter().any(|x| x == &json!(v)) {
                    list.push(json!(v));
                }
            }
        }
    }

    fn validate(&self, obj: &Value) -> Vec<Cause> {
        field::to_causes(&validate_crd(obj))
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        let mut errs = validate_crd(new);
        let (ns, os) = (&new["spec"]["scope"], &old["spec"]["scope"]);
        if ns != os && !os.is_null() {
            errs.push(FieldError::invalid("spec.scope", ns.clone(), "field is immutable"));
        }
        let served: Vec<&str> = new["spec"]["versions"].as_array().map(|a| a.iter().filter_map(|v| v["name"].as_str()).collect()).unwrap_or_default();
        for (i, v) in strings(&new["status"]["storedVersions"]).iter().enumerate() {
            if !served.contains(&v.as_str()) {
                errs.push(FieldError::invalid(format!("status.storedVersions[{i}]"), json!(v), "must appear in spec.versions"));
            }
        }
        field::to_causes(&errs)
    }

    /// The first delete only marks the CRD (and adds the cleanup
    /// finalizer); it stays while finalizers remain.
    fn held_by_finalizers(&self, obj: &Value) -> bool {
        !meta::is_deleting(obj) || meta::has_finalizers(obj)
    }

    fn prepare_for_delete(&self, obj: &mut Value) {
        if let Some(m) = meta::meta_mut(obj) {
            let f = m.entry("finalizers").or_insert_with(|| json!([]));
            if let Some(list) = f.as_array_mut() {
                if !list.iter().any(|x| x == &json!(CLEANUP_FINALIZER)) {
                    list.push(json!(CLEANUP_FINALIZER));
                }
            }
        }
        set_condition(obj, "Terminating", "True", "InstanceDeletionPending", "CustomResourceDefinition marked for deletion; instance deletion pending");
    }

    fn columns(&self) -> Vec<Column> {
        vec![NAME_COLUMN, CREATED_AT_COLUMN]
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        vec![json!(meta::name(obj)), obj["metadata"]["creationTimestamp"].clone()]
    }
}

/// The names of the versions marked `storage`.
fn storage_versions(crd: &Value) -> Vec<String> {
    crd["spec"]["versions"].as_array().map(|a| a.iter().filter(|v| v["storage"] == json!(true)).filter_map(|v| v["name"].as_str().map(String::from)).collect()).unwrap_or_default()
}

/// `IsDNS1035Label` as kube words it.
fn dns1035(path: &str, value: &str, errs: &mut Vec<FieldError>) {
    for msg in super::validation::name_errors(value, NameRule::Dns1035) {
        errs.push(FieldError::invalid(path, json!(value), msg));
    }
}

/// Checks a CRD as kube-apiserver does (`ValidateCustomResourceDefinition`,
/// for what this server supports): its name, group, names, scope,
/// versions (exactly one storage version), conversion, and each served
/// version's structural schema.
pub fn validate_crd(crd: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let spec = &crd["spec"];
    let str_of = |v: &Value| v.as_str().unwrap_or("").to_string();
    let group = str_of(&spec["group"]);
    let names = &spec["names"];
    let plural = str_of(&names["plural"]);
    let name = meta::name(crd);
    if !name.is_empty() && name != format!("{plural}.{group}") {
        errs.push(FieldError::invalid("metadata.name", json!(name), "must be spec.names.plural+\".\"+spec.group"));
    }
    if group.is_empty() {
        errs.push(FieldError::required("spec.group", ""));
    } else {
        for msg in super::validation::name_errors(&group, NameRule::Subdomain) {
            errs.push(FieldError::invalid("spec.group", json!(group), msg));
        }
        if group.split('.').count() < 2 {
            errs.push(FieldError::invalid("spec.group", json!(group), "should be a domain with at least one dot"));
        }
    }
    // Groups under k8s.io and kubernetes.io belong to the Kubernetes
    // project: a CRD there needs its API review's approval annotation.
    let protected = ["k8s.io", "kubernetes.io"].iter().any(|p| group == *p || group.ends_with(&format!(".{p}")));
    if protected && crd["metadata"]["annotations"]["api-approved.kubernetes.io"].as_str().is_none_or(str::is_empty) {
        errs.push(FieldError::required(
            "metadata.annotations[api-approved.kubernetes.io]",
            "protected groups must have approval annotation \"api-approved.kubernetes.io\", see https://github.com/kubernetes/enhancements/pull/1111",
        ));
    }
    match spec["scope"].as_str().unwrap_or("") {
        "Cluster" | "Namespaced" => {}
        "" => errs.push(FieldError::required("spec.scope", "")),
        other => errs.push(FieldError::not_supported("spec.scope", json!(other), &["Cluster".into(), "Namespaced".into()])),
    }
    validate_names(names, &mut errs);
    validate_versions(spec, &mut errs);
    match spec["conversion"]["strategy"].as_str().unwrap_or("None") {
        "None" => {}
        "Webhook" => {
            if !spec["conversion"]["webhook"]["clientConfig"].is_object() {
                errs.push(FieldError::required("spec.conversion.webhook.clientConfig", "required when strategy is set to Webhook"));
            }
        }
        other => errs.push(FieldError::not_supported("spec.conversion.strategy", json!(other), &["None".into(), "Webhook".into()])),
    }
    if spec["preserveUnknownFields"] == json!(true) {
        errs.push(FieldError::invalid("spec.preserveUnknownFields", json!(true), "must be false in order to use defaults in the schema"));
    }
    errs
}

fn validate_names(names: &Value, errs: &mut Vec<FieldError>) {
    let str_of = |v: &Value| v.as_str().unwrap_or("").to_string();
    let (plural, singular, kind, list_kind) = (str_of(&names["plural"]), str_of(&names["singular"]), str_of(&names["kind"]), str_of(&names["listKind"]));
    if plural.is_empty() {
        errs.push(FieldError::required("spec.names.plural", ""));
    } else {
        dns1035("spec.names.plural", &plural, errs);
    }
    if !singular.is_empty() {
        dns1035("spec.names.singular", &singular, errs);
    }
    for (i, s) in strings(&names["shortNames"]).iter().enumerate() {
        dns1035(&format!("spec.names.shortNames[{i}]"), s, errs);
    }
    for (i, s) in strings(&names["categories"]).iter().enumerate() {
        dns1035(&format!("spec.names.categories[{i}]"), s, errs);
    }
    let kind_check = |path: &str, k: &str, errs: &mut Vec<FieldError>| {
        if k.is_empty() {
            errs.push(FieldError::required(path, ""));
        } else if !super::validation::name_errors(&k.to_lowercase(), NameRule::Dns1035).is_empty() {
            errs.push(FieldError::invalid(path, json!(k), format!("may have mixed case, but should otherwise match: {}", k.to_lowercase())));
        }
    };
    kind_check("spec.names.kind", &kind, errs);
    kind_check("spec.names.listKind", &list_kind, errs);
    if !kind.is_empty() && kind == list_kind {
        errs.push(FieldError::invalid("spec.names.listKind", json!(list_kind), "kind and listKind may not be the same or parameters can't be unmarshalled"));
    }
}

/// Versions: present, DNS-1035 names, unique, exactly one storage, each
/// with a structural schema (whose rules compile). A schema all versions
/// share is checked once, at `spec.validation.openAPIV3Schema`, as kube
/// reports it; different schemas at `spec.versions[i].schema.openAPIV3Schema`.
fn validate_versions(spec: &Value, errs: &mut Vec<FieldError>) {
    let empty = Vec::new();
    let versions = spec["versions"].as_array().unwrap_or(&empty);
    if versions.is_empty() {
        errs.push(FieldError::invalid("spec.versions", json!([]), "must have exactly one version marked as storage version"));
        return;
    }
    let storage = versions.iter().filter(|v| v["storage"] == json!(true)).count();
    if storage != 1 {
        errs.push(FieldError::invalid("spec.versions", Value::Array(versions.clone()), "must have exactly one version marked as storage version"));
    }
    if !versions.iter().any(|v| v["served"] == json!(true)) {
        errs.push(FieldError::invalid("spec.versions", Value::Array(versions.clone()), "must have at least one version marked as served"));
    }
    // kube's internal version of a CRD moves a schema that every version
    // shares to `spec.validation`, and words its errors there.
    let shared = versions.iter().all(|v| v["schema"] == versions[0]["schema"]) && !versions[0]["schema"]["openAPIV3Schema"].is_null();
    let mut seen: Vec<&str> = Vec::new();
    for (i, v) in versions.iter().enumerate() {
        let path = format!("spec.versions[{i}]");
        let name = v["name"].as_str().unwrap_or("");
        if name.is_empty() {
            errs.push(FieldError::required(format!("{path}.name"), ""));
        } else {
            dns1035(&format!("{path}.name"), name, errs);
            if seen.contains(&name) {
                errs.push(FieldError::invalid(format!("{path}.name"), json!(name), "must be unique"));
            }
            seen.push(name);
        }
        let status = v["subresources"]["status"].is_object();
        let schema = &v["schema"]["openAPIV3Schema"];
        if schema.is_null() {
            errs.push(FieldError::required(format!("{path}.schema.openAPIV3Schema"), "schemas are required"));
        } else if !shared {
            errs.extend(crate::schema::validate_crd_schema(&format!("{path}.schema.openAPIV3Schema"), schema, status));
        }
    }
    // Subresources all versions share are checked once, at
    // `spec.subresources`, as kube's internal version holds them.
    let same_subresources = versions.iter().all(|v| v["subresources"] == versions[0]["subresources"]);
    if same_subresources {
        validate_subresources(&versions[0]["subresources"], "spec.subresources", errs);
    } else {
        for (i, v) in versions.iter().enumerate() {
            validate_subresources(&v["subresources"], &format!("spec.versions[{i}].subresources"), errs);
        }
    }
    if shared {
        let status = versions.iter().any(|v| v["subresources"]["status"].is_object());
        errs.extend(crate::schema::validate_crd_schema("spec.validation.openAPIV3Schema", &versions[0]["schema"]["openAPIV3Schema"], status));
    }
}

/// Checks `subresources.scale` as kube's
/// `ValidateCustomResourceDefinitionSubresources`: the spec replicas path
/// is required and under `.spec.`, the status replicas path required and
/// under `.status.`, a label selector path under either; each a simple
/// dotted JSON path.
fn validate_subresources(subresources: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let scale = &subresources["scale"];
    if !scale.is_object() {
        return;
    }
    let check = |field: &str, under: &[&str], message: &str, required: bool, errs: &mut Vec<FieldError>| {
        let at = format!("{path}.scale.{field}");
        let value = scale[field].as_str().unwrap_or("");
        if value.is_empty() {
            if required {
                errs.push(FieldError::required(at, ""));
            }
            return;
        }
        if !value.starts_with('.') {
            errs.push(FieldError::invalid(at, json!(value), "must be a simple json path starting with ."));
        } else if !under.iter().any(|p| value.starts_with(p)) {
            errs.push(FieldError::invalid(at, json!(value), message));
        }
    };
    check("specReplicasPath", &[".spec."], "should be a json path under .spec", true, errs);
    check("statusReplicasPath", &[".status."], "should be a json path under .status", true, errs);
    check("labelSelectorPath", &[".spec.", ".status."], "should be a json path under either .spec or .status", false, errs);
}

/// The strategy of custom resources: generation always, status if the
/// version enables it, stored as the CRD's storage version.
pub struct CustomStrategy {
    status: bool,
    storage: Option<(String, String)>,
    /// Set by the CRD controller once the CRD is being deleted.
    terminating: Arc<AtomicBool>,
    /// The version's scale subresource paths, whose fields every write
    /// checks.
    scale: Option<ScalePaths>,
}

/// The content of a custom resource that its generation follows: all but
/// metadata and the type meta, and but status when the status subresource
/// owns it.
fn generation_content(obj: &Value, status: bool) -> impl Iterator<Item = (&String, &Value)> {
    obj.as_object().into_iter().flatten().filter(move |(k, _)| match k.as_str() {
        "metadata" | "apiVersion" | "kind" => false,
        "status" => !status,
        _ => true,
    })
}

impl Strategy for CustomStrategy {
    fn has_status(&self) -> bool {
        self.status
    }

    fn has_generation(&self) -> bool {
        true
    }

    /// Any change but to metadata bumps the generation (kube's custom
    /// resource strategy); with a status subresource, status changes do
    /// not.
    fn generation_changed(&self, new: &Value, old: &Value) -> bool {
        let (a, b): (BTreeMap<_, _>, BTreeMap<_, _>) = (generation_content(new, self.status).collect(), generation_content(old, self.status).collect());
        a != b
    }

    fn create_refused(&self) -> Option<String> {
        self.terminating.load(Ordering::Acquire).then(|| "create not allowed while custom resource definition is terminating".to_string())
    }

    fn validate(&self, obj: &Value) -> Vec<Cause> {
        self.scale.as_ref().map(|p| ScaleMapping::validate_custom(p, obj)).unwrap_or_default()
    }

    fn storage_version(&self) -> Option<(&str, &str)> {
        self.storage.as_ref().map(|(g, v)| (g.as_str(), v.as_str()))
    }
}

/// The converter of a non-storage version of a CRD with conversion strategy
/// Webhook: webhook conversion is not implemented yet, so every object
/// read or written through such a version fails with a 500, as kube answers
/// when the conversion webhook cannot be reached. The storage version is
/// served normally.
struct WebhookPending;

impl super::conversion::Converter for WebhookPending {
    fn convert_local(&self, _obj: Value, from: &Resource, to: &Resource) -> Option<Result<Value, crate::errors::Status>> {
        Some(Err(crate::errors::Status::internal(format!(
            "conversion webhook for {}, Kind={} failed: conversion webhooks are not supported by this server yet (from {})",
            to.api_version(),
            to.kind,
            from.api_version()
        ))))
    }
}
