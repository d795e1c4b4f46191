//! Checks of a CRD version's `openAPIV3Schema`, with kube-apiserver's
//! messages (apiextensions-apiserver v1.33: `schema/validation.go` and
//! `schema/complete.go` for "structural", `defaulting/validation.go` for
//! defaults, and the schema part of `apis/apiextensions/validation`).
//!
//! A schema is structural when:
//! - every specified field and array item has a `type` (unless
//!   `x-kubernetes-int-or-string` or `x-kubernetes-preserve-unknown-fields`),
//!   and the root is an object without `additionalProperties`;
//! - `allOf`/`anyOf`/`oneOf`/`not` only validate values: no `type`,
//!   `default`, `description`, `title`, `nullable`, `additionalProperties`
//!   or `x-kubernetes-*` inside them (except the int-or-string `anyOf:
//!   [{type: integer}, {type: string}]`), and every field they name is
//!   also specified outside them;
//! - root `metadata` restricts at most `name` and `generateName`; nested
//!   ones under allOf & co are forbidden;
//! - embedded resources are objects with properties (or preserve unknown
//!   fields).
//!
//! Paths are the schema's own: `spec.versions[0].schema.openAPIV3Schema
//! .properties[spec].properties[replicas].type: Required value: must not
//! be empty for specified object fields`. kube sorts the structural errors
//! by their text, and checks defaults only when there are none; the other
//! checks follow, properties in name order (kube's order varies).
//!
//! `x-kubernetes-validations` rules are checked here for their fields
//! (rule, message, messageExpression, reason, fieldPath) and, once the
//! schema has no other error, compiled and checked by `schema/cel_check.rs`.
//!
//! Not done: the status-subresource root check prints the offending
//! schema as JSON where kube prints a Go struct.

use serde_json::{Map, Value};

use super::compiled::{Compiled, Origin};
use super::field::FieldError;
use super::source::SchemaSource;
use crate::errors::go_quote;

/// Checks `schema`, a CRD version's `openAPIV3Schema` found at `path`
/// (`spec.versions[0].schema.openAPIV3Schema`); `status_enabled` when the
/// version has the status subresource. Returns kube's field errors, empty
/// when the schema is acceptable.
pub fn validate_crd_schema(path: &str, schema: &Value, status_enabled: bool) -> Vec<FieldError> {
    let mut out = Vec::new();
    let Some(root) = schema.as_object() else {
        out.push(FieldError::invalid(path, Value::String(String::new()), "must be an object"));
        return out;
    };
    if status_enabled {
        status_root(path, root, &mut out);
    }
    if root.get("nullable") == Some(&Value::Bool(true)) {
        out.push(FieldError::forbidden(format!("{path}.nullable"), "nullable cannot be true at the root"));
    }
    let mut structural = Vec::new();
    invariants(root, Level::Root, path, &mut structural);
    completeness(root, root, path, path, &mut structural);
    structural.sort_by_key(|e| e.to_string());
    if structural.is_empty() {
        // The root is a resource: its apiVersion, kind and metadata are meta.
        defaults(root, path, true, &mut out);
    } else {
        out.extend(structural);
    }
    openapi(root, path, &Ssv { allow_defaults: true, reason: String::new(), inside_meta: false }, true, &mut out);
    if out.is_empty() {
        // As kube, CEL is checked only on an otherwise valid schema.
        out.extend(super::cel_check::check(path, schema));
    }
    out
}

/// `JSONSchemaProps` fields in Go's order, with their JSON keys.
const FIELDS: &[(&str, &str)] = &[
    ("ID", "id"),
    ("Schema", "$schema"),
    ("Ref", "$ref"),
    ("Description", "description"),
    ("Type", "type"),
    ("Format", "format"),
    ("Title", "title"),
    ("Default", "default"),
    ("Maximum", "maximum"),
    ("ExclusiveMaximum", "exclusiveMaximum"),
    ("Minimum", "minimum"),
    ("ExclusiveMinimum", "exclusiveMinimum"),
    ("MaxLength", "maxLength"),
    ("MinLength", "minLength"),
    ("Pattern", "pattern"),
    ("MaxItems", "maxItems"),
    ("MinItems", "minItems"),
    ("UniqueItems", "uniqueItems"),
    ("MultipleOf", "multipleOf"),
    ("Enum", "enum"),
    ("MaxProperties", "maxProperties"),
    ("MinProperties", "minProperties"),
    ("Required", "required"),
    ("Items", "items"),
    ("AllOf", "allOf"),
    ("OneOf", "oneOf"),
    ("AnyOf", "anyOf"),
    ("Not", "not"),
    ("Properties", "properties"),
    ("AdditionalProperties", "additionalProperties"),
    ("PatternProperties", "patternProperties"),
    ("Dependencies", "dependencies"),
    ("AdditionalItems", "additionalItems"),
    ("Definitions", "definitions"),
    ("ExternalDocs", "externalDocs"),
    ("Example", "example"),
    ("Nullable", "nullable"),
    ("XPreserveUnknownFields", "x-kubernetes-preserve-unknown-fields"),
    ("XEmbeddedResource", "x-kubernetes-embedded-resource"),
    ("XIntOrString", "x-kubernetes-int-or-string"),
    ("XListMapKeys", "x-kubernetes-list-map-keys"),
    ("XListType", "x-kubernetes-list-type"),
    ("XMapType", "x-kubernetes-map-type"),
    ("XValidations", "x-kubernetes-validations"),
];

const ROOT_WITH_STATUS: &[&str] = &[
    "Description",
    "Type",
    "Format",
    "Title",
    "Maximum",
    "ExclusiveMaximum",
    "Minimum",
    "ExclusiveMinimum",
    "MaxLength",
    "MinLength",
    "Pattern",
    "MaxItems",
    "MinItems",
    "UniqueItems",
    "MultipleOf",
    "Required",
    "Items",
    "Properties",
    "ExternalDocs",
    "Example",
    "XPreserveUnknownFields",
    "XValidations",
];

/// Whether a JSON value is Go's zero value of its field.
fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
        Value::Number(_) => false,
    }
}

fn status_root(path: &str, root: &Map<String, Value>, out: &mut Vec<FieldError>) {
    for (go, key) in FIELDS {
        let Some(v) = root.get(*key).filter(|v| !is_zero(v)) else { continue };
        if *go == "Type" {
            if v.as_str() != Some("object") {
                out.push(FieldError::invalid(format!("{path}.type"), v.clone(), r#"only "object" is allowed as the type at the root of the schema if the status subresource is enabled"#));
                break;
            }
            continue;
        }
        if !ROOT_WITH_STATUS.contains(go) {
            let detail = format!("only [{}] fields are allowed at the root of the schema if the status subresource is enabled", ROOT_WITH_STATUS.join(" "));
            out.push(FieldError::invalid(path, Value::Object(root.clone()), detail));
            break;
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Item,
    Field,
}

fn str_of<'a>(m: &'a Map<String, Value>, k: &str) -> &'a str {
    m.get(k).and_then(Value::as_str).unwrap_or("")
}

fn flag(m: &Map<String, Value>, k: &str) -> bool {
    m.get(k).and_then(Value::as_bool).unwrap_or(false)
}

fn obj<'a>(m: &'a Map<String, Value>, k: &str) -> Option<&'a Map<String, Value>> {
    m.get(k).and_then(Value::as_object)
}

fn list<'a>(m: &'a Map<String, Value>, k: &str) -> &'a [Value] {
    m.get(k).and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[])
}

/// `properties` in name order.
fn props(m: &Map<String, Value>) -> Vec<(&String, &Map<String, Value>)> {
    let mut v: Vec<_> = obj(m, "properties").map(|p| p.iter().filter_map(|(k, s)| s.as_object().map(|s| (k, s))).collect()).unwrap_or_default();
    v.sort_by(|a, b| a.0.cmp(b.0));
    v
}

/// Whether `anyOf` is exactly `[{type: integer}, {type: string}]`.
fn int_or_string_any_of(v: &[Value]) -> bool {
    v.len() == 2 && v[0] == serde_json::json!({"type": "integer"}) && v[1] == serde_json::json!({"type": "string"})
}

fn invariants(s: &Map<String, Value>, lvl: Level, p: &str, out: &mut Vec<FieldError>) {
    let ty = str_of(s, "type");
    let items = obj(s, "items");
    if ty == "array" && items.is_none() {
        out.push(FieldError::required(format!("{p}.items"), "must be specified"));
    }
    if let Some(items) = items {
        invariants(items, Level::Item, &format!("{p}.items"), out);
    }
    for (k, ps) in props(s) {
        invariants(ps, Level::Field, &format!("{p}.properties[{k}]"), out);
    }
    let additional = s.get("additionalProperties").filter(|a| !a.is_null());
    if let Some(ap) = additional {
        if lvl == Level::Root {
            out.push(FieldError::forbidden(format!("{p}.additionalProperties"), "must not be used at the root"));
        }
        if let Some(ap) = ap.as_object() {
            invariants(ap, Level::Field, &format!("{p}.additionalProperties"), out);
        }
    }
    let ios = flag(s, "x-kubernetes-int-or-string");
    let preserve = flag(s, "x-kubernetes-preserve-unknown-fields");
    let embedded = flag(s, "x-kubernetes-embedded-resource");
    if ios && preserve {
        out.push(FieldError::invalid(format!("{p}.x-kubernetes-preserve-unknown-fields"), Value::Bool(true), "must be false if x-kubernetes-int-or-string is true"));
    }
    if ios && embedded {
        out.push(FieldError::invalid(format!("{p}.x-kubernetes-embedded-resource"), Value::Bool(true), "must be false if x-kubernetes-int-or-string is true"));
    }
    let skip_any_of = int_or_string_any_of(list(s, "anyOf"));
    let skip_first_all_of_any_of = list(s, "allOf").first().and_then(Value::as_object).is_some_and(|a| int_or_string_any_of(list(a, "anyOf")));
    value_validation(s, skip_any_of, skip_first_all_of_any_of, p, out);
    let check_metadata = lvl == Level::Root || embedded;
    if embedded && ty != "object" {
        if ty.is_empty() {
            out.push(FieldError::required(format!("{p}.type"), "must be object if x-kubernetes-embedded-resource is true"));
        } else {
            out.push(FieldError::invalid(format!("{p}.type"), Value::String(ty.into()), "must be object if x-kubernetes-embedded-resource is true"));
        }
    } else if ty.is_empty() && !ios && !preserve {
        let detail = match lvl {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        out.push(FieldError::required(format!("{p}.type"), detail));
    }
    if embedded && additional.is_some() {
        out.push(FieldError::forbidden(format!("{p}.additionalProperties"), "must not be used if x-kubernetes-embedded-resource is set"));
    }
    if lvl == Level::Root && !ty.is_empty() && ty != "object" {
        out.push(FieldError::invalid(format!("{p}.type"), Value::String(ty.into()), "must be object at the root"));
    }
    let properties = obj(s, "properties");
    for f in ["kind", "apiVersion"] {
        if let Some(fs) = properties.and_then(|ps| obj(ps, f)).filter(|_| check_metadata) {
            let t = str_of(fs, "type");
            if t != "string" {
                out.push(FieldError::invalid(format!("{p}.properties[{f}].type"), Value::String(t.into()), "must be string"));
            }
        }
    }
    if let Some(meta) = properties.and_then(|ps| obj(ps, "metadata")) {
        metadata(meta, check_metadata, lvl, &format!("{p}.properties[metadata]"), out);
    }
    if embedded && !preserve && properties.is_none_or(Map::is_empty) {
        out.push(FieldError::required(format!("{p}.properties"), "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields"));
    }
}

fn metadata(s: &Map<String, Value>, check: bool, lvl: Level, p: &str, out: &mut Vec<FieldError>) {
    let ty = str_of(s, "type");
    if check && ty != "object" {
        out.push(FieldError::invalid(format!("{p}.type"), Value::String(ty.into()), "must be object"));
    }
    if lvl != Level::Root {
        return;
    }
    // Root metadata may restrict name and generateName, nothing else.
    let mut rest = s.clone();
    rest.remove("type");
    rest.remove("default");
    if let Some(ps) = obj(s, "properties") {
        let only_names = !ps.is_empty() && ps.keys().all(|k| k == "name" || k == "generateName");
        if only_names {
            rest.remove("properties");
        }
    }
    if rest.iter().any(|(_, v)| !is_zero(v)) {
        out.push(FieldError::forbidden(p, "must not specify anything other than name and generateName, but metadata is implicitly specified"));
    }
}

fn value_validation(s: &Map<String, Value>, skip_any_of: bool, skip_first_all_of_any_of: bool, p: &str, out: &mut Vec<FieldError>) {
    if !skip_any_of {
        for (i, v) in list(s, "anyOf").iter().enumerate() {
            nested(v, false, false, &format!("{p}.anyOf[{i}]"), out);
        }
    }
    for (i, v) in list(s, "allOf").iter().enumerate() {
        nested(v, skip_first_all_of_any_of && i == 0, false, &format!("{p}.allOf[{i}]"), out);
    }
    for (i, v) in list(s, "oneOf").iter().enumerate() {
        nested(v, false, false, &format!("{p}.oneOf[{i}]"), out);
    }
    if let Some(not) = s.get("not").filter(|n| n.is_object()) {
        nested(not, false, false, &format!("{p}.not"), out);
    }
    let pattern = str_of(s, "pattern");
    if !pattern.is_empty() {
        if let Err(e) = regex::Regex::new(pattern) {
            out.push(FieldError::invalid(format!("{p}.pattern"), Value::String(pattern.into()), format!("must be a valid regular expression, but isn't: {e}")));
        }
    }
}

/// A schema under allOf/anyOf/oneOf/not: value validations only.
fn nested(v: &Value, skip_any_of: bool, skip_all_of_any_of: bool, p: &str, out: &mut Vec<FieldError>) {
    let Some(s) = v.as_object() else { return };
    value_validation(s, skip_any_of, skip_all_of_any_of, p, out);
    if let Some(items) = s.get("items").filter(|i| i.is_object()) {
        nested(items, false, false, &format!("{p}.items"), out);
    }
    for (k, ps) in props(s) {
        nested(&Value::Object(ps.clone()), false, false, &format!("{p}.properties[{k}]"), out);
    }
    let forbidden = |key: &str, detail: &str, out: &mut Vec<FieldError>| out.push(FieldError::forbidden(format!("{p}.{key}"), detail));
    if !str_of(s, "type").is_empty() {
        forbidden("type", "must be empty to be structural", out);
    }
    if s.get("additionalProperties").is_some_and(|a| !a.is_null()) {
        forbidden("additionalProperties", "must be undefined to be structural", out);
    }
    if s.get("default").is_some_and(|d| !d.is_null()) {
        forbidden("default", "must be undefined to be structural", out);
    }
    if !str_of(s, "title").is_empty() {
        forbidden("title", "must be empty to be structural", out);
    }
    if !str_of(s, "description").is_empty() {
        forbidden("description", "must be empty to be structural", out);
    }
    if flag(s, "nullable") {
        forbidden("nullable", "must be false to be structural", out);
    }
    for key in ["x-kubernetes-preserve-unknown-fields", "x-kubernetes-embedded-resource", "x-kubernetes-int-or-string"] {
        if flag(s, key) {
            forbidden(key, "must be false to be structural", out);
        }
    }
    if !list(s, "x-kubernetes-list-map-keys").is_empty() {
        forbidden("x-kubernetes-list-map-keys", "must be empty to be structural", out);
    }
    if s.get("x-kubernetes-list-type").is_some_and(|x| !x.is_null()) {
        forbidden("x-kubernetes-list-type", "must be undefined to be structural", out);
    }
    if s.get("x-kubernetes-map-type").is_some_and(|x| !x.is_null()) {
        forbidden("x-kubernetes-map-type", "must be undefined to be structural", out);
    }
    if !list(s, "x-kubernetes-validations").is_empty() {
        forbidden("x-kubernetes-validations", "must be empty to be structural", out);
    }
    if obj(s, "properties").is_some_and(|ps| ps.contains_key("metadata")) {
        forbidden("properties[metadata]", "must not be specified in a nested context", out);
    }
}

/// Every field an allOf/anyOf/oneOf/not at the root names must be
/// specified structurally too (kube checks the root's only).
fn completeness(v: &Map<String, Value>, s: &Map<String, Value>, sp: &str, vp: &str, out: &mut Vec<FieldError>) {
    let each = |key: &str, out: &mut Vec<FieldError>| {
        for (i, x) in list(v, key).iter().enumerate() {
            if let Some(x) = x.as_object() {
                nested_complete(x, Some(s), sp, &format!("{vp}.{key}[{i}]"), out);
            }
        }
    };
    if let Some(not) = obj(v, "not") {
        nested_complete(not, Some(s), sp, &format!("{vp}.not"), out);
    }
    each("allOf", out);
    each("anyOf", out);
    each("oneOf", out);
}

fn nested_complete(v: &Map<String, Value>, s: Option<&Map<String, Value>>, sp: &str, vp: &str, out: &mut Vec<FieldError>) {
    let Some(s) = s else {
        out.push(FieldError::required(sp, format!("because it is defined in {vp}")));
        return;
    };
    completeness(v, s, sp, vp, out);
    if let Some(items) = obj(v, "items") {
        nested_complete(items, obj(s, "items"), &format!("{sp}.items"), &format!("{vp}.items"), out);
    }
    for (k, vf) in props(v) {
        match obj(s, "properties").and_then(|ps| obj(ps, k)) {
            Some(sf) => nested_complete(vf, Some(sf), &format!("{sp}.properties[{k}]"), &format!("{vp}.properties[{k}]"), out),
            None => out.push(FieldError::required(format!("{sp}.properties[{k}]"), format!("because it is defined in {vp}.properties[{k}]"))),
        }
    }
}

/// Compiles one schema on its own, to validate or prune a default with it.
fn compile_one(s: &Map<String, Value>) -> Compiled {
    Compiled::compile(SchemaSource::crd("default.check", "v1", "Default", &Value::Object(s.clone())), Origin::Custom)
}

/// Defaults must be pruned and valid against their own schema.
fn defaults(s: &Map<String, Value>, p: &str, resource: bool, out: &mut Vec<FieldError>) {
    if let Some(d) = s.get("default").filter(|d| !d.is_null()) {
        let c = compile_one(s);
        if let Some(root) = c.kind_node("default.check", "v1", "Default").map(|id| c.at(id)) {
            let mut pruned = d.clone();
            super::pruning::prune_with(root, &mut pruned, resource, None);
            if &pruned != d {
                out.push(FieldError::invalid(format!("{p}.default"), d.clone(), "must not have unknown fields"));
            }
            out.extend(super::validation::validate(root, d, Some(&format!("{p}.default"))));
        }
    }
    if let Some(items) = obj(s, "items") {
        defaults(items, &format!("{p}.items"), flag(items, "x-kubernetes-embedded-resource"), out);
    }
    for (k, ps) in props(s) {
        // Defaults in resource meta are refused by the API checks.
        if resource && ["apiVersion", "kind", "metadata"].contains(&k.as_str()) {
            continue;
        }
        defaults(ps, &format!("{p}.properties[{k}]"), flag(ps, "x-kubernetes-embedded-resource"), out);
    }
}

/// What the API-level checks carry down (kube's `specStandardValidatorV3`).
#[derive(Clone)]
struct Ssv {
    allow_defaults: bool,
    reason: String,
    inside_meta: bool,
}

impl Ssv {
    fn forbid_defaults(&self, reason: &str) -> Ssv {
        Ssv { allow_defaults: false, reason: reason.to_string(), ..self.clone() }
    }
}

const OPENAPI_TYPES: &[&str] = &["array", "boolean", "integer", "number", "object", "string"];

/// Go's `%#v` of a `[]string`.
fn go_strings(v: &[Value]) -> String {
    format!("[]string{{{}}}", v.iter().map(|x| go_quote(x.as_str().unwrap_or(""))).collect::<Vec<_>>().join(", "))
}

fn standard(s: &Map<String, Value>, p: &str, ssv: &Ssv, out: &mut Vec<FieldError>) {
    let ty = str_of(s, "type");
    if !ty.is_empty() && !OPENAPI_TYPES.contains(&ty) {
        let supported: Vec<String> = OPENAPI_TYPES.iter().map(|t| t.to_string()).collect();
        out.push(FieldError::not_supported(format!("{p}.type"), Value::String(ty.into()), &supported));
    }
    if s.get("default").is_some_and(|d| !d.is_null()) && !ssv.allow_defaults {
        let detail = if ssv.reason.is_empty() { "must not be set".to_string() } else { format!("must not be set {}", ssv.reason) };
        out.push(FieldError::forbidden(format!("{p}.default"), detail));
    }
    let forbid = |key: &str, detail: &str, out: &mut Vec<FieldError>| out.push(FieldError::forbidden(format!("{p}.{key}"), detail));
    if !str_of(s, "id").is_empty() {
        forbid("id", "id is not supported", out);
    }
    if s.get("additionalItems").is_some_and(|x| !x.is_null()) {
        forbid("additionalItems", "additionalItems is not supported", out);
    }
    if obj(s, "patternProperties").is_some_and(|x| !x.is_empty()) {
        forbid("patternProperties", "patternProperties is not supported", out);
    }
    if obj(s, "definitions").is_some_and(|x| !x.is_empty()) {
        forbid("definitions", "definitions is not supported", out);
    }
    if s.get("dependencies").is_some_and(|x| !x.is_null()) {
        forbid("dependencies", "dependencies is not supported", out);
    }
    if s.get("$ref").is_some_and(|x| !x.is_null()) {
        forbid("$ref", "$ref is not supported", out);
    }
    if ty == "null" {
        forbid("type", "type cannot be set to null, use nullable as an alternative", out);
    }
    if s.get("items").is_some_and(Value::is_array) {
        forbid("items", "items must be a schema object and not an array", out);
    }
    if ssv.inside_meta && flag(s, "x-kubernetes-embedded-resource") {
        forbid("x-kubernetes-embedded-resource", "must not be used inside of resource meta", out);
    }
}

fn openapi(s: &Map<String, Value>, p: &str, ssv: &Ssv, is_root: bool, out: &mut Vec<FieldError>) {
    standard(s, p, ssv, out);
    if flag(s, "uniqueItems") {
        out.push(FieldError::forbidden(format!("{p}.uniqueItems"), "uniqueItems cannot be set to true since the runtime complexity becomes quadratic"));
    }
    let embedded = flag(s, "x-kubernetes-embedded-resource");
    if let Some(ap) = s.get("additionalProperties").filter(|a| !a.is_null()) {
        if obj(s, "properties").is_some_and(|ps| !ps.is_empty()) && ap != &Value::Bool(true) {
            out.push(FieldError::forbidden(format!("{p}.additionalProperties"), "additionalProperties and properties are mutual exclusive"));
        }
        if let Some(ap) = ap.as_object() {
            let sub = if ssv.inside_meta { ssv.forbid_defaults("inside additionalProperties applying to object metadata") } else { ssv.clone() };
            openapi(ap, &format!("{p}.additionalProperties"), &sub, false, out);
        }
    }
    for (k, ps) in props(s) {
        let mut sub = ssv.clone();
        if (is_root || embedded) && ["metadata", "kind", "apiVersion"].contains(&k.as_str()) {
            sub.inside_meta = true;
            if is_root {
                sub = sub.forbid_defaults(&format!("in top-level {k}"));
            }
        }
        openapi(ps, &format!("{p}.properties[{k}]"), &sub, false, out);
    }
    if let Some(not) = obj(s, "not") {
        openapi(not, &format!("{p}.not"), ssv, false, out);
    }
    for key in ["allOf", "oneOf", "anyOf"] {
        for (i, x) in list(s, key).iter().enumerate() {
            if let Some(x) = x.as_object() {
                openapi(x, &format!("{p}.{key}[{i}]"), ssv, false, out);
            }
        }
    }
    match s.get("items") {
        Some(Value::Object(items)) => openapi(items, &format!("{p}.items"), ssv, false, out),
        Some(Value::Array(items)) => {
            for (i, x) in items.iter().enumerate() {
                if let Some(x) = x.as_object() {
                    openapi(x, &format!("{p}.items[{i}]"), ssv, false, out);
                }
            }
        }
        _ => {}
    }
    extensions(s, p, out);
}

fn extensions(s: &Map<String, Value>, p: &str, out: &mut Vec<FieldError>) {
    let ty = str_of(s, "type");
    if s.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(false)) {
        out.push(FieldError::invalid(format!("{p}.x-kubernetes-preserve-unknown-fields"), Value::Bool(false), "must be true or undefined"));
    }
    let map_type = s.get("x-kubernetes-map-type").and_then(Value::as_str);
    if map_type.is_some() && ty != "object" {
        if ty.is_empty() {
            out.push(FieldError::required(format!("{p}.type"), "must be object if x-kubernetes-map-type is specified"));
        } else {
            out.push(FieldError::invalid(format!("{p}.type"), Value::String(ty.into()), "must be object if x-kubernetes-map-type is specified"));
        }
    }
    if let Some(mt) = map_type.filter(|m| *m != "atomic" && *m != "granular") {
        out.push(FieldError::not_supported(format!("{p}.x-kubernetes-map-type"), Value::String(mt.into()), &["atomic".into(), "granular".into()]));
    }
    let list_type = s.get("x-kubernetes-list-type").and_then(Value::as_str);
    let items = obj(s, "items");
    if list_type.is_some() && ty != "array" {
        if ty.is_empty() {
            out.push(FieldError::required(format!("{p}.type"), "must be array if x-kubernetes-list-type is specified"));
        } else {
            out.push(FieldError::invalid(format!("{p}.type"), Value::String(ty.into()), "must be array if x-kubernetes-list-type is specified"));
        }
    } else if let (Some("set"), Some(is)) = (list_type, items) {
        let item_list_type = is.get("x-kubernetes-list-type").cloned().unwrap_or(Value::Null);
        match str_of(is, "type") {
            "array" if item_list_type.as_str().is_some_and(|t| t != "atomic") => {
                out.push(FieldError::invalid(format!("{p}.items.x-kubernetes-list-type"), item_list_type, "must be atomic as item of a list with x-kubernetes-list-type=set"));
            }
            // kube names the items' list type here, not their map type.
            "object" if str_of(is, "x-kubernetes-map-type") != "atomic" => {
                out.push(FieldError::invalid(format!("{p}.items.x-kubernetes-map-type"), item_list_type, "must be atomic as item of a list with x-kubernetes-list-type=set"));
            }
            _ => {}
        }
    }
    if let Some(lt) = list_type.filter(|l| !["atomic", "set", "map"].contains(l)) {
        out.push(FieldError::not_supported(format!("{p}.x-kubernetes-list-type"), Value::String(lt.into()), &["atomic".into(), "set".into(), "map".into()]));
    }
    let keys = list(s, "x-kubernetes-list-map-keys");
    if !keys.is_empty() {
        match list_type {
            None => out.push(FieldError::required(format!("{p}.x-kubernetes-list-type"), "must be map if x-kubernetes-list-map-keys is non-empty")),
            Some(lt) if lt != "map" => out.push(FieldError::invalid(format!("{p}.x-kubernetes-list-type"), Value::String(lt.into()), "must be map if x-kubernetes-list-map-keys is non-empty")),
            _ => {}
        }
    }
    if list_type == Some("map") {
        if keys.is_empty() {
            out.push(FieldError::required(format!("{p}.x-kubernetes-list-map-keys"), "must not be empty if x-kubernetes-list-type is map"));
        }
        match s.get("items") {
            None | Some(Value::Null) => out.push(FieldError::required(format!("{p}.items"), "must have a schema if x-kubernetes-list-type is map")),
            Some(v @ Value::Array(_)) => out.push(FieldError::invalid(format!("{p}.items"), v.clone(), "must only have a single schema if x-kubernetes-list-type is map")),
            _ => {}
        }
        if let Some(is) = items {
            let ity = str_of(is, "type");
            if ity != "object" {
                out.push(FieldError::invalid(format!("{p}.items.type"), Value::String(ity.into()), "must be object if parent array's x-kubernetes-list-type is map"));
            } else {
                let mut seen = Vec::new();
                for k in keys.iter().filter_map(Value::as_str) {
                    match obj(is, "properties").and_then(|ps| obj(ps, k)) {
                        Some(ks) => {
                            if matches!(str_of(ks, "type"), "array" | "object") {
                                // kube prints the items' type here.
                                out.push(FieldError::invalid(
                                    format!("{p}.items.properties[{k}].type"),
                                    Value::String(ity.into()),
                                    "must be a scalar type if parent array's x-kubernetes-list-type is map",
                                ));
                            }
                        }
                        None => out.push(FieldError {
                            value: super::field::BadValue::Go(go_strings(keys)),
                            ..FieldError::invalid(format!("{p}.x-kubernetes-list-map-keys"), Value::Null, "entries must all be names of item properties")
                        }),
                    }
                    if seen.contains(&k) {
                        out.push(FieldError {
                            value: super::field::BadValue::Go(go_strings(keys)),
                            ..FieldError::invalid(format!("{p}.x-kubernetes-list-map-keys"), Value::Null, "must not contain duplicate entries")
                        });
                    }
                    seen.push(k);
                }
            }
        }
    }
    if let (Some(is), Some(lt @ ("set" | "map"))) = (items, list_type) {
        if flag(is, "nullable") {
            out.push(FieldError::forbidden(format!("{p}.items.nullable"), format!("cannot be nullable when x-kubernetes-list-type is {lt}")));
        }
        if lt == "map" {
            let required: Vec<&str> = list(is, "required").iter().filter_map(Value::as_str).collect();
            for k in keys.iter().filter_map(Value::as_str) {
                let Some(ks) = obj(is, "properties").and_then(|ps| obj(ps, k)) else { continue };
                if !required.contains(&k) && ks.get("default").is_none_or(Value::is_null) {
                    out.push(FieldError::required(format!("{p}.items.properties[{k}].default"), "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property"));
                }
                if flag(ks, "nullable") {
                    out.push(FieldError::forbidden(format!("{p}.items.properties[{k}].nullable"), "this property is in x-kubernetes-list-map-keys, so it cannot be nullable"));
                }
            }
        }
    }
    for (i, rule) in list(s, "x-kubernetes-validations").iter().enumerate() {
        let r = str_of(rule.as_object().unwrap_or(&Map::new()), "rule").trim().to_string();
        let msg = rule.get("message").and_then(Value::as_str).unwrap_or("");
        let at = format!("{p}.x-kubernetes-validations[{i}]");
        if r.is_empty() {
            out.push(FieldError::required(format!("{at}.rule"), "rule is not specified"));
        } else if !msg.is_empty() && msg.trim().is_empty() {
            out.push(FieldError::invalid(format!("{at}.message"), Value::String(msg.into()), "message must be non-empty if specified"));
        } else if msg.trim().contains(['\n', '\r']) {
            out.push(FieldError::invalid(format!("{at}.message"), Value::String(msg.into()), "message must not contain line breaks"));
        } else if r.contains(['\n', '\r']) && msg.trim().is_empty() {
            out.push(FieldError::required(format!("{at}.message"), "message must be specified if rule contains line breaks"));
        }
        let msg_expr = rule.get("messageExpression").and_then(Value::as_str).unwrap_or("");
        if !msg_expr.is_empty() && msg_expr.trim().is_empty() {
            out.push(FieldError::required(format!("{at}.messageExpression"), "messageExpression must be non-empty if specified"));
        }
        if let Some(reason) = rule.get("reason").filter(|r| !r.is_null()) {
            const REASONS: [&str; 4] = ["FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired"];
            if !reason.as_str().is_some_and(|r| REASONS.contains(&r)) {
                out.push(FieldError::not_supported(format!("{at}.reason"), reason.clone(), &REASONS.map(String::from)));
            }
        }
        let field_path = rule.get("fieldPath").and_then(Value::as_str).unwrap_or("");
        if !field_path.is_empty() {
            let fp = Value::String(field_path.into());
            if field_path.trim().is_empty() {
                out.push(FieldError::invalid(format!("{at}.fieldPath"), fp.clone(), "fieldPath must be non-empty if specified"));
            }
            if field_path.contains(['\n', '\r']) {
                out.push(FieldError::invalid(format!("{at}.fieldPath"), fp.clone(), "fieldPath must not contain line breaks"));
            }
            if super::field_path::normalize(field_path, &Value::Object(s.clone())).is_err() {
                out.push(FieldError::invalid(format!("{at}.fieldPath"), fp, "fieldPath must be a valid path"));
            }
        }
    }
}
