//! The scale subresource: an object shown as an `autoscaling/v1` Scale
//! (kube's `ScaleREST` of the apps workloads, and apiextensions-apiserver's
//! `ScaleREST` of custom resources with `subresources.scale`).
//!
//! A [`ScaleMapping`] says where an object keeps what its Scale shows:
//!
//! | Scale            | built-in workload            | custom resource                        |
//! |------------------|------------------------------|----------------------------------------|
//! | `spec.replicas`  | `.spec.replicas`             | the CRD's `specReplicasPath`           |
//! | `status.replicas`| `.status.replicas`           | `statusReplicasPath` (0 when absent)   |
//! | `status.selector`| `.spec.selector`, rendered   | the string at `labelSelectorPath`, if set |
//!
//! For example a CRD with `specReplicasPath: .spec.size` shows the custom
//! resource `{"spec": {"size": 3}, "status": {"count": 2}}` as a Scale with
//! `spec.replicas: 3`; a write of the Scale with `spec.replicas: 5` stores
//! `{"spec": {"size": 5}, …}`, and a managedFields entry of the custom
//! resource that owns `f:spec.f:size` is shown on the Scale as owning
//! `f:spec.f:replicas` (kube's `managedfields.ScaleHandler`), and back.
//!
//! Custom resources follow kube's CR scale REST: a GET of a resource
//! without the spec replicas field is a 500, a Scale is not validated on
//! its own (the custom resource's schema and rules are), and a patch that
//! leaves a missing replicas field unset is a 400.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::rest::{Context, GetOptions, Getter, Gvk, Rest, UpdatedObjectInfo, Updater, WriteOptions};
use super::store::{Part, ShownAs, Store};
use super::subresources::Subresource;
use crate::errors::{go_quote, go_type, go_value, Cause, Status};
use crate::meta;
use crate::selectors::LabelSelector;

/// The replicas kube's CR scale REST shows before an update when the
/// custom resource has none (the smallest int32): an update that leaves it
/// so did not set the field.
const UNSET_REPLICAS: i64 = i32::MIN as i64;

/// Where a custom resource keeps what its Scale shows, as its CRD's
/// `subresources.scale` says: dotted JSON paths (`.spec.replicas`), no
/// array notation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScalePaths {
    /// `specReplicasPath`, under `.spec`.
    pub spec_replicas: String,
    /// `statusReplicasPath`, under `.status`.
    pub status_replicas: String,
    /// `labelSelectorPath`, under `.spec` or `.status`; `None` or empty:
    /// the Scale has no selector.
    pub label_selector: Option<String>,
}

/// A dotted path as its field names (`.spec.replicas` → `spec`,
/// `replicas`), as kube's `splitReplicasPath`.
fn split(path: &str) -> Vec<String> {
    path.strip_prefix('.').unwrap_or(path).split('.').map(String::from).collect()
}

/// Where the Scale's `status.selector` comes from.
#[derive(Debug, Clone)]
enum Selector {
    /// A built-in's `spec.selector` (a LabelSelector), as a string of its
    /// `matchLabels`.
    Structured,
    /// A string field of a custom resource, or none.
    Path(Option<Vec<String>>),
}

/// How an object maps to its Scale: the replicas and selector fields, and
/// for managedFields the replicas field of each apiVersion.
#[derive(Debug, Clone)]
pub struct ScaleMapping {
    custom: bool,
    /// The spec replicas path as written (`.spec.replicas`), for messages.
    spec_path: String,
    spec: Vec<String>,
    status: Vec<String>,
    selector: Selector,
    /// Each apiVersion of the resource (`example.com/v1`) and its replicas
    /// field (`None`: that version has no scale). Empty: every version
    /// keeps it at `spec`.
    versions: Vec<(String, Option<Vec<String>>)>,
}

impl ScaleMapping {
    /// The apps workloads' mapping: `.spec.replicas`, `.status.replicas`,
    /// the selector from `.spec.selector`; a Scale's replicas must not be
    /// negative (kube's `ValidateScale`).
    pub fn builtin() -> Self {
        ScaleMapping { custom: false, spec_path: ".spec.replicas".into(), spec: split(".spec.replicas"), status: split(".status.replicas"), selector: Selector::Structured, versions: Vec::new() }
    }

    /// A custom resource's mapping: its version's `paths`, and for
    /// managedFields every version of the CRD (`group/version`) with its
    /// spec replicas path (`None`: no scale in that version), as kube's
    /// `ResourcePathMappings`.
    pub fn custom(paths: &ScalePaths, versions: &[(String, Option<String>)]) -> Self {
        let selector = paths.label_selector.as_deref().filter(|p| !p.is_empty()).map(split);
        ScaleMapping {
            custom: true,
            spec_path: paths.spec_replicas.clone(),
            spec: split(&paths.spec_replicas),
            status: split(&paths.status_replicas),
            selector: Selector::Path(selector),
            versions: versions.iter().map(|(v, p)| (v.clone(), p.as_deref().map(split))).collect(),
        }
    }

    /// `obj` as its Scale, and whether it has the spec replicas field
    /// (kube's `scaleFromCustomResource`): absent replicas show as 0, an
    /// absent selector as none.
    ///
    /// # Errors
    /// 500 when a field on a path has another type than the Scale's
    /// (`.spec.replicas accessor error: x is of the type string, expected
    /// int64`).
    pub fn to_scale(&self, obj: &Value) -> Result<(Value, bool), Status> {
        self.read(obj).map_err(Status::internal)
    }

    /// [`Self::to_scale`] with the accessor error as it is.
    fn read(&self, obj: &Value) -> Result<(Value, bool), String> {
        let m = &obj["metadata"];
        let (spec, found) = match nested(obj, &self.spec)? {
            Some(v) => (int64(v, &self.spec)?, true),
            None => (0, false),
        };
        let status = nested(obj, &self.status)?.map(|v| int64(v, &self.status)).transpose()?.unwrap_or(0);
        let mut scale = json!({
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {
                "name": m["name"], "namespace": m["namespace"], "uid": m["uid"],
                "resourceVersion": m["resourceVersion"], "creationTimestamp": m["creationTimestamp"],
            },
            "spec": {"replicas": spec},
            "status": {"replicas": status},
        });
        match &self.selector {
            Selector::Structured => scale["status"]["selector"] = Value::String(structured_selector(obj)),
            Selector::Path(Some(path)) => match nested(obj, path)? {
                Some(Value::String(s)) => scale["status"]["selector"] = Value::String(s.clone()),
                Some(other) => return Err(accessor_error(path, other, "string")),
                None => {}
            },
            Selector::Path(None) => {}
        }
        if let Some(m) = scale["metadata"].as_object_mut() {
            m.retain(|_, v| !v.is_null() && v.as_str() != Some(""));
        }
        Ok((scale, found))
    }

    /// The Scale a GET returns.
    ///
    /// # Errors
    /// As [`Self::to_scale`]; for a custom resource without the spec
    /// replicas field, 500 `the spec replicas field ".spec.replicas" does
    /// not exist` (kube's CR scale REST).
    pub fn scale_of(&self, obj: &Value) -> Result<Value, Status> {
        let (scale, found) = self.to_scale(obj)?;
        if self.custom && !found {
            return Err(Status::internal(format!("the spec replicas field {} does not exist", go_quote(&self.spec_path))));
        }
        Ok(scale)
    }

    /// `old` with the replicas of `scale` written to the spec replicas
    /// field (missing objects on the path are created), under the Scale's
    /// resourceVersion.
    ///
    /// # Errors
    /// Built-ins: 400 for a Scale without `spec.replicas`, 422 Invalid on
    /// the Scale for negative replicas. Custom resources: 400 `the spec
    /// replicas field … cannot be empty` when the replicas are still
    /// [`UNSET_REPLICAS`]; 500 when a field on the path is not an object.
    pub fn from_scale(&self, scale: &Value, old: &Value) -> Result<Value, Status> {
        decode_replicas(&scale["spec"]["replicas"])?;
        let replicas = match scale["spec"]["replicas"].as_i64() {
            Some(r) => r,
            // The Scale's replicas are an int32 without a pointer: a custom
            // resource's Scale without them means 0.
            None if self.custom => 0,
            None => return Err(Status::bad_request("spec.replicas: Required value")),
        };
        if self.custom && replicas == UNSET_REPLICAS {
            return Err(Status::bad_request(format!("the spec replicas field {} cannot be empty", go_quote(&self.spec_path))));
        }
        if !self.custom && replicas < 0 {
            // kube's `ValidateScale`, reported on the Scale, not its object.
            let cause = Cause::invalid("spec.replicas", &Value::from(replicas), "must be greater than or equal to 0");
            return Err(Status::invalid("autoscaling", "Scale", meta::name(old), vec![cause]));
        }
        let mut new = old.clone();
        set_nested(&mut new, &self.spec, Value::from(replicas)).map_err(Status::internal)?;
        let rv = meta::resource_version(scale);
        if !rv.is_empty() {
            new["metadata"]["resourceVersion"] = Value::String(rv.to_string());
        }
        Ok(new)
    }

    /// kube's `ValidateScaleSpec` and `ValidateScaleStatus` of a custom
    /// resource on every write: the replicas fields, when present, are
    /// integers from 0 to 2147483647, and the selector field a string.
    /// Causes are at the CRD's paths (`.spec.replicas: Invalid value: -3:
    /// should be a non-negative integer`).
    pub fn validate_custom(paths: &ScalePaths, obj: &Value) -> Vec<Cause> {
        let mut causes = Vec::new();
        for path in [&paths.spec_replicas, &paths.status_replicas] {
            let fields = split(path);
            let checked = nested(obj, &fields).and_then(|v| v.map_or(Ok(0), |v| int64(v, &fields)));
            match checked {
                Err(e) => causes.push(Cause::invalid(path, &Value::from(0), &e)),
                Ok(r) if r < 0 => causes.push(Cause::invalid(path, &Value::from(r), "should be a non-negative integer")),
                Ok(r) if r > i64::from(i32::MAX) => causes.push(Cause::invalid(path, &Value::from(r), &format!("should be less than or equal to {}", i32::MAX))),
                Ok(_) => {}
            }
        }
        if let Some(path) = paths.label_selector.as_deref().filter(|p| !p.is_empty()) {
            let fields = split(path);
            let checked = nested(obj, &fields).and_then(|v| match v {
                Some(v) if !v.is_string() => Err(accessor_error(&fields, v, "string")),
                _ => Ok(()),
            });
            if let Err(e) = checked {
                causes.push(Cause::invalid(path, &Value::String(String::new()), &e));
            }
        }
        causes
    }

    /// The replicas field of `api_version`'s entries; `None` when that
    /// version has no scale or is not one of the resource's.
    fn replicas_field(&self, api_version: &str) -> Option<&[String]> {
        if self.versions.is_empty() {
            return Some(&self.spec);
        }
        self.versions.iter().find(|(v, _)| v == api_version).and_then(|(_, p)| p.as_deref())
    }

    /// Whether `api_version` is one of the resource's versions.
    fn known_version(&self, api_version: &str) -> bool {
        self.versions.is_empty() || self.versions.iter().any(|(v, _)| v == api_version)
    }
}

/// A Scale's `spec.replicas` as Go decodes it into an int32: absent, null
/// or an integer in range.
///
/// # Errors
/// 400 with Go's decoding error (`json: cannot unmarshal string into Go
/// struct field ScaleSpec.spec.replicas of type int32`), as kube answers a
/// Scale body it cannot decode.
fn decode_replicas(v: &Value) -> Result<(), Status> {
    let got = match v {
        Value::Null => return Ok(()),
        Value::Number(n) if n.as_i64().is_some_and(|r| i32::try_from(r).is_ok()) => return Ok(()),
        Value::Number(n) => format!("number {n}"),
        Value::String(_) => "string".into(),
        Value::Bool(_) => "bool".into(),
        Value::Array(_) => "array".into(),
        Value::Object(_) => "object".into(),
    };
    Err(Status::bad_request(format!("Scale in version \"v1\" cannot be handled as a Scale: json: cannot unmarshal {got} into Go struct field ScaleSpec.spec.replicas of type int32")))
}

/// kube's unstructured accessor error for the field at `path`.
fn accessor_error(path: &[String], v: &Value, expected: &str) -> String {
    format!(".{} accessor error: {} is of the type {}, expected {expected}", path.join("."), go_value(v), go_type(v))
}

/// The value at `path`, if every object on the way is there.
///
/// # Errors
/// The accessor error when something on the way is not an object.
fn nested<'v>(obj: &'v Value, path: &[String]) -> Result<Option<&'v Value>, String> {
    let mut cur = obj;
    for (i, f) in path.iter().enumerate() {
        let Some(m) = cur.as_object() else {
            return Err(accessor_error(&path[..i], cur, "map[string]interface{}"));
        };
        match m.get(f) {
            Some(v) => cur = v,
            None => return Ok(None),
        }
    }
    Ok(Some(cur))
}

/// An integer field (kube's `NestedInt64`).
fn int64(v: &Value, path: &[String]) -> Result<i64, String> {
    v.as_i64().ok_or_else(|| accessor_error(path, v, "int64"))
}

/// Sets `path` in `obj` to `value`, creating objects on the way (kube's
/// `SetNestedField`).
fn set_nested(obj: &mut Value, path: &[String], value: Value) -> Result<(), String> {
    let mut cur = obj;
    for (i, f) in path.iter().enumerate() {
        if !cur.is_object() {
            return Err(format!("value cannot be set because {}", accessor_error(&path[..i], cur, "map[string]interface{}")));
        }
        let Some(m) = cur.as_object_mut() else { return Ok(()) };
        if i + 1 == path.len() {
            m.insert(f.clone(), value);
            return Ok(());
        }
        cur = m.entry(f.clone()).or_insert_with(|| json!({}));
    }
    Ok(())
}

/// A built-in's `spec.selector` as the Scale's string selector: its
/// `matchLabels`, `k=v` joined by commas.
fn structured_selector(obj: &Value) -> String {
    let sel = LabelSelector::from_object(&obj["spec"]["selector"]);
    let parts: Vec<String> = sel
        .0
        .iter()
        .filter_map(|r| match r {
            crate::selectors::LabelRequirement::Equals(k, v, true) => Some(format!("{k}={v}")),
            _ => None,
        })
        .collect();
    parts.join(",")
}

// ---- managedFields (kube's `managedfields.ScaleHandler`) ----

/// Entries are the same manager when manager, operation and subresource
/// agree (the apiVersions of the two kinds differ).
fn same_manager(a: &Value, b: &Value) -> bool {
    ["manager", "operation", "subresource"].iter().all(|k| a.get(*k).and_then(Value::as_str).unwrap_or("") == b.get(*k).and_then(Value::as_str).unwrap_or(""))
}

/// The `fieldsV1` key of a field name.
fn key(f: &str) -> String {
    format!("f:{f}")
}

/// Whether `entry` owns the field at `path`.
fn owns(entry: &Value, path: &[String]) -> bool {
    let mut cur = &entry["fieldsV1"];
    for f in path {
        match cur.get(key(f)) {
            Some(v) => cur = v,
            None => return false,
        }
    }
    true
}

/// `fields` (a `fieldsV1` object) without the field at `path`; objects
/// left empty on the way go too.
fn remove_field(fields: &mut Value, path: &[String]) {
    let Some((first, rest)) = path.split_first() else { return };
    let Some(m) = fields.as_object_mut() else { return };
    if rest.is_empty() {
        m.remove(&key(first));
        return;
    }
    if let Some(child) = m.get_mut(&key(first)) {
        remove_field(child, rest);
        if child.as_object().is_some_and(serde_json::Map::is_empty) {
            m.remove(&key(first));
        }
    }
}

/// `fields` (a `fieldsV1` object) with the field at `path`.
fn add_field(fields: &mut Value, path: &[String]) {
    let mut cur = fields;
    for f in path {
        if !cur.is_object() {
            *cur = json!({});
        }
        cur = &mut cur[key(f)];
        if cur.is_null() {
            *cur = json!({});
        }
    }
}

/// `entry` owning only the field at `path`, as of `api_version`.
fn only_field(entry: &Value, api_version: &str, path: &[String]) -> Value {
    let mut fields = json!({});
    add_field(&mut fields, path);
    let mut e = json!({"manager": entry["manager"], "operation": entry["operation"], "apiVersion": api_version, "fieldsType": "FieldsV1", "fieldsV1": fields});
    for k in ["time", "subresource"] {
        if let Some(v) = entry.get(k) {
            e[k] = v.clone();
        }
    }
    e
}

fn entries(obj: &Value) -> Vec<Value> {
    obj["metadata"]["managedFields"].as_array().cloned().unwrap_or_default()
}

fn set_entries(obj: &mut Value, list: Vec<Value>) {
    if let Some(m) = meta::meta_mut(obj) {
        if list.is_empty() {
            m.remove("managedFields");
        } else {
            m.insert("managedFields".into(), Value::Array(list));
        }
    }
}

/// The Scale's own replicas field.
fn scale_replicas() -> Vec<String> {
    split(".spec.replicas")
}

/// An object as its Scale, for admission and server-side apply (kube's
/// scale REST and its `managedFields` handler): an entry of the object that
/// owns its replicas field owns the Scale's `.spec.replicas`; after an
/// apply, an entry that no longer owns it there loses it on the object, and
/// a new owner gets an entry on the object (with the object's apiVersion,
/// its replicas field and subresource `scale`). Entries of apiVersions the
/// resource does not have are dropped, as kube does.
impl ShownAs for ScaleMapping {
    fn kind(&self) -> (&'static str, &'static str, &'static str) {
        ("autoscaling", "v1", "Scale")
    }

    fn shown(&self, obj: &Value) -> Value {
        let mut scale = match self.read(obj) {
            Ok((s, _)) => s,
            // A field of the wrong type: the write fails in carry_back.
            Err(_) => json!({"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": {"name": obj["metadata"]["name"]}, "spec": {}, "status": {}}),
        };
        let mapped = entries(obj)
            .iter()
            .filter(|e| self.replicas_field(e["apiVersion"].as_str().unwrap_or("")).is_some_and(|p| owns(e, p)))
            .map(|e| only_field(e, "autoscaling/v1", &scale_replicas()))
            .collect();
        set_entries(&mut scale, mapped);
        scale
    }

    fn carry_back(&self, sub: &Value, obj: &Value) -> Result<Value, Status> {
        let mut new = self.from_scale(sub, obj)?;
        let owners: Vec<Value> = entries(sub).into_iter().filter(|s| owns(s, &scale_replicas())).collect();
        let mut out = Vec::new();
        for mut e in entries(obj) {
            let version = e["apiVersion"].as_str().unwrap_or("").to_string();
            if !self.known_version(&version) {
                continue;
            }
            if let Some(path) = self.replicas_field(&version) {
                if owns(&e, path) && !owners.iter().any(|s| same_manager(s, &e)) {
                    remove_field(&mut e["fieldsV1"], path);
                    if e["fieldsV1"].as_object().is_none_or(serde_json::Map::is_empty) {
                        continue;
                    }
                }
            }
            out.push(e);
        }
        let api_version = obj["apiVersion"].as_str().unwrap_or("");
        for s in &owners {
            match out.iter_mut().find(|e| same_manager(e, s)) {
                Some(e) if !owns(e, &self.spec) => {
                    add_field(&mut e["fieldsV1"], &self.spec);
                    if let Some(t) = s.get("time") {
                        e["time"] = t.clone();
                    }
                }
                Some(_) => {}
                None => out.push(only_field(s, api_version, &self.spec)),
            }
        }
        set_entries(&mut new, out);
        Ok(new)
    }
}

/// `scale` of an apps workload (`autoscaling/v1` Scale of `spec.replicas`).
pub fn scale() -> Arc<dyn Subresource> {
    Arc::new(ScaleSubresource { mapping: ScaleMapping::builtin() })
}

/// `scale` of a custom resource, as its CRD's `subresources.scale` maps it.
pub fn custom_scale(mapping: ScaleMapping) -> Arc<dyn Subresource> {
    Arc::new(ScaleSubresource { mapping })
}

/// The scale subresource over a store, with its mapping.
pub(super) struct ScaleSubresource {
    pub(super) mapping: ScaleMapping,
}

impl Subresource for ScaleSubresource {
    fn name(&self) -> &str {
        "scale"
    }
    fn rest(&self, store: &Arc<Store>) -> Arc<dyn Rest> {
        Arc::new(ScaleRest { store: store.clone(), kind: Gvk::new("autoscaling", "v1", "Scale"), mapping: self.mapping.clone() })
    }
}

/// The scale subresource's REST object: reads and writes a Scale, stored
/// in its object's replicas field.
struct ScaleRest {
    store: Arc<Store>,
    kind: Gvk,
    mapping: ScaleMapping,
}

/// A Scale update as an update of its object.
struct ScaleUpdate<'a> {
    inner: &'a dyn UpdatedObjectInfo,
    mapping: &'a ScaleMapping,
}

#[async_trait]
impl UpdatedObjectInfo for ScaleUpdate<'_> {
    async fn updated_object(&self, current: Option<&Value>) -> Result<Value, Status> {
        let Some(old) = current else { return Err(Status::internal("a scale update without its object")) };
        let (mut scale, found) = self.mapping.to_scale(old)?;
        if self.mapping.custom && !found {
            scale["spec"]["replicas"] = Value::from(UNSET_REPLICAS);
        }
        let scale = self.inner.updated_object(Some(&scale)).await?;
        self.mapping.from_scale(&scale, old)
    }

    fn may_create(&self) -> bool {
        false
    }

    fn apply_config(&self) -> Option<&Value> {
        self.inner.apply_config()
    }

    fn apply_duplicates(&self) -> &[String] {
        self.inner.apply_duplicates()
    }
}

impl Rest for ScaleRest {
    fn kind(&self) -> &Gvk {
        &self.kind
    }
    fn negotiated(&self) -> bool {
        false
    }
    fn getter(&self) -> Option<&dyn Getter> {
        Some(self)
    }
    fn updater(&self) -> Option<&dyn Updater> {
        Some(self)
    }
}

#[async_trait]
impl Getter for ScaleRest {
    async fn get(&self, ctx: &Context<'_>, name: &str, opts: &GetOptions) -> Result<Value, Status> {
        let obj = Getter::get(self.store.as_ref(), ctx, name, opts).await?;
        self.mapping.scale_of(&obj)
    }
}

#[async_trait]
impl Updater for ScaleRest {
    async fn update(&self, ctx: &Context<'_>, name: &str, info: &dyn UpdatedObjectInfo, opts: &WriteOptions) -> Result<(Value, bool), Status> {
        let part = Part { subresource: "scale", status_only: false, shown_as: Some(&self.mapping) };
        let (obj, _) = self.store.update_part(ctx, name, &ScaleUpdate { inner: info, mapping: &self.mapping }, opts, part).await?;
        // kube answers with the Scale of what was written; a field of the
        // wrong type there is a 400.
        let (scale, _) = self.mapping.read(&obj).map_err(Status::bad_request)?;
        Ok((scale, false))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn custom() -> ScaleMapping {
        let paths = ScalePaths { spec_replicas: ".spec.size.count".into(), status_replicas: ".status.ready".into(), label_selector: Some(".status.selector".into()) };
        ScaleMapping::custom(&paths, &[("example.com/v1".into(), Some(".spec.size.count".into())), ("example.com/v2".into(), None)])
    }

    fn widget(spec: Value, status: Value, managed: Value) -> Value {
        json!({"apiVersion": "example.com/v1", "kind": "Widget",
               "metadata": {"name": "w", "namespace": "ns", "uid": "u1", "resourceVersion": "7", "creationTimestamp": "2024-01-01T00:00:00Z", "labels": {"a": "b"}, "managedFields": managed},
               "spec": spec, "status": status})
    }

    #[test]
    fn custom_paths_show_as_a_scale() {
        let m = custom();
        let w = widget(json!({"size": {"count": 3}}), json!({"ready": 2, "selector": "app=w"}), json!([]));
        let (scale, found) = m.to_scale(&w).unwrap();
        assert!(found);
        assert_eq!(
            scale,
            json!({"kind": "Scale", "apiVersion": "autoscaling/v1",
                   "metadata": {"name": "w", "namespace": "ns", "uid": "u1", "resourceVersion": "7", "creationTimestamp": "2024-01-01T00:00:00Z"},
                   "spec": {"replicas": 3}, "status": {"replicas": 2, "selector": "app=w"}})
        );
    }

    #[test]
    fn absent_fields_show_as_zero_and_a_get_is_a_500() {
        let m = custom();
        let w = widget(json!({}), json!({}), json!([]));
        let (scale, found) = m.to_scale(&w).unwrap();
        assert!(!found);
        assert_eq!((scale["spec"]["replicas"].clone(), scale["status"]["replicas"].clone()), (json!(0), json!(0)));
        assert!(scale["status"].get("selector").is_none(), "{scale}");
        let e = m.scale_of(&w).unwrap_err();
        assert_eq!((e.code, e.message.as_str()), (500, r#"Internal error occurred: the spec replicas field ".spec.size.count" does not exist"#));
        // Built-ins show 0.
        assert_eq!(ScaleMapping::builtin().scale_of(&w).unwrap()["spec"]["replicas"], 0);
    }

    #[test]
    fn fields_of_the_wrong_type_are_accessor_errors() {
        let m = custom();
        let e = m.to_scale(&widget(json!({"size": {"count": "three"}}), json!({}), json!([]))).unwrap_err();
        assert_eq!(e.message, "Internal error occurred: .spec.size.count accessor error: three is of the type string, expected int64");
        let e = m.to_scale(&widget(json!({"size": 4}), json!({}), json!([]))).unwrap_err();
        assert_eq!(e.message, "Internal error occurred: .spec.size accessor error: 4 is of the type int64, expected map[string]interface{}");
        let e = m.to_scale(&widget(json!({"size": {"count": 1}}), json!({"selector": {"a": "b"}}), json!([]))).unwrap_err();
        assert!(e.message.contains(".status.selector accessor error") && e.message.ends_with("expected string"), "{}", e.message);
    }

    #[test]
    fn a_scale_writes_the_custom_replicas_path() {
        let m = custom();
        let old = widget(json!({"other": 1}), json!({}), json!([]));
        let scale = json!({"metadata": {"resourceVersion": "5"}, "spec": {"replicas": 4}});
        let new = m.from_scale(&scale, &old).unwrap();
        assert_eq!(new["spec"], json!({"other": 1, "size": {"count": 4}}));
        assert_eq!(new["metadata"]["resourceVersion"], "5");
        // Negative replicas are the custom resource's schema's business.
        assert_eq!(m.from_scale(&json!({"spec": {"replicas": -1}}), &old).unwrap()["spec"]["size"]["count"], -1);
        let e = m.from_scale(&json!({"spec": {"replicas": UNSET_REPLICAS}}), &old).unwrap_err();
        assert_eq!((e.code, e.message.as_str()), (400, r#"the spec replicas field ".spec.size.count" cannot be empty"#));
        let e = m.from_scale(&scale, &widget(json!({"size": "x"}), json!({}), json!([]))).unwrap_err();
        assert_eq!(e.code, 500);
        // Built-ins validate the Scale.
        let e = ScaleMapping::builtin().from_scale(&json!({"spec": {"replicas": -1}}), &old).unwrap_err();
        assert_eq!((e.code, e.message.as_str()), (422, r#"Scale.autoscaling "w" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0"#));
    }

    #[test]
    fn ownership_of_the_custom_path_is_the_scales_replicas() {
        let m = custom();
        let managed = json!([
            {"manager": "a", "operation": "Apply", "apiVersion": "example.com/v1", "fieldsType": "FieldsV1", "time": "t1",
             "fieldsV1": {"f:spec": {"f:size": {"f:count": {}}, "f:other": {}}}},
            {"manager": "c", "operation": "Update", "apiVersion": "example.com/v1", "fieldsType": "FieldsV1", "time": "t2",
             "fieldsV1": {"f:spec": {"f:size": {"f:count": {}}}}},
            {"manager": "old", "operation": "Update", "apiVersion": "example.com/v2", "fieldsType": "FieldsV1", "time": "t3",
             "fieldsV1": {"f:spec": {"f:size": {"f:count": {}}}}},
            {"manager": "gone", "operation": "Update", "apiVersion": "other.io/v1", "fieldsType": "FieldsV1", "time": "t4",
             "fieldsV1": {"f:spec": {"f:x": {}}}},
        ]);
        let w = widget(json!({"size": {"count": 3}, "other": 1}), json!({}), managed);
        let shown = m.shown(&w);
        let scale_entries = shown["metadata"]["managedFields"].as_array().unwrap();
        // v2 has no scale: its entry is not shown.
        assert_eq!(scale_entries.len(), 2, "{shown}");
        assert_eq!(scale_entries[0], json!({"manager": "a", "operation": "Apply", "apiVersion": "autoscaling/v1", "fieldsType": "FieldsV1", "time": "t1", "fieldsV1": {"f:spec": {"f:replicas": {}}}}));

        // b takes the replicas from a (force) and c: a keeps its other
        // field, c goes, b gets an entry on the custom resource.
        let mut sub = shown.clone();
        sub["spec"]["replicas"] = json!(6);
        sub["metadata"]["managedFields"] =
            json!([{"manager": "b", "operation": "Apply", "apiVersion": "autoscaling/v1", "fieldsType": "FieldsV1", "time": "t9", "subresource": "scale", "fieldsV1": {"f:spec": {"f:replicas": {}}}}]);
        let back = m.carry_back(&sub, &w).unwrap();
        assert_eq!(back["spec"]["size"]["count"], 6);
        assert_eq!(
            back["metadata"]["managedFields"],
            json!([
                {"manager": "a", "operation": "Apply", "apiVersion": "example.com/v1", "fieldsType": "FieldsV1", "time": "t1", "fieldsV1": {"f:spec": {"f:other": {}}}},
                {"manager": "old", "operation": "Update", "apiVersion": "example.com/v2", "fieldsType": "FieldsV1", "time": "t3", "fieldsV1": {"f:spec": {"f:size": {"f:count": {}}}}},
                {"manager": "b", "operation": "Apply", "apiVersion": "example.com/v1", "fieldsType": "FieldsV1", "time": "t9", "subresource": "scale",
                 "fieldsV1": {"f:spec": {"f:size": {"f:count": {}}}}},
            ])
        );
        // The round trip without a change keeps every known entry.
        let same = m.carry_back(&shown, &w).unwrap();
        assert_eq!(same["metadata"]["managedFields"].as_array().unwrap().len(), 3);
    }
}
