//! Unknown-field detection against a type's schema, for
//! `fieldValidation=Strict|Warn|Ignore` (KEP-2885). kube-apiserver finds
//! them while decoding into Go structs, which drop what they do not know;
//! here the walk reports each one's path and removes it.
//!
//! Paths are written as kube's strict decoder writes them:
//! `spec.template.spec.containers[0].imagePullPolcy`, `metadata.foo`, `bar`.

use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::definitions::Definitions;

/// What the client asked to happen to unknown fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    /// Reject the request (400).
    Strict,
    /// Drop them and warn (the server default).
    Warn,
    /// Drop them silently.
    Ignore,
}

impl FieldValidation {
    /// Parses the `fieldValidation` query parameter; unset is `Warn`.
    ///
    /// # Errors
    /// The value, when it is not one of the three.
    pub fn parse(v: Option<&str>) -> Result<Self, String> {
        match v {
            None | Some("") | Some("Warn") => Ok(FieldValidation::Warn),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some("Ignore") => Ok(FieldValidation::Ignore),
            Some(other) => Err(other.to_string()),
        }
    }
}

/// Removes the fields of `obj` that `schema` does not declare, and returns
/// their paths, sorted. Maps (`additionalProperties`) and
/// `x-kubernetes-preserve-unknown-fields` keep any key; object schemas with
/// neither properties nor additionalProperties (RawExtension, FieldsV1)
/// keep anything.
pub fn prune_unknown(defs: &Definitions, schema: &Value, obj: &mut Value) -> Vec<String> {
    let mut out = Vec::new();
    walk(defs, schema, obj, "", &mut out);
    out.sort();
    out
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn walk(defs: &Definitions, schema: &Value, obj: &mut Value, path: &str, out: &mut Vec<String>) {
    let s = defs.resolve(schema);
    if s.get("x-kubernetes-preserve-unknown-fields").and_then(Value::as_bool) == Some(true) {
        return;
    }
    match obj {
        Value::Object(m) => {
            if let Some(props) = s.get("properties").and_then(Value::as_object) {
                let mut unknown = Vec::new();
                for (k, v) in m.iter_mut() {
                    match props.get(k) {
                        Some(ps) => walk(defs, ps, v, &join(path, k), out),
                        None => unknown.push(k.clone()),
                    }
                }
                for k in unknown {
                    m.remove(&k);
                    out.push(join(path, &k));
                }
            } else if let Some(ap) = s.get("additionalProperties").filter(|a| a.is_object()) {
                for (k, v) in m.iter_mut() {
                    walk(defs, ap, v, &join(path, k), out);
                }
            }
        }
        Value::Array(items) => {
            if let Some(is) = s.get("items") {
                for (i, v) in items.iter_mut().enumerate() {
                    walk(defs, is, v, &format!("{path}[{i}]"), out);
                }
            }
        }
        _ => {}
    }
}

/// Removes the map fields (`additionalProperties` schemas: labels,
/// annotations, a ConfigMap's data, a selector's matchLabels...) of `obj`
/// that are empty or null, as Go's `omitempty` drops an empty map when kube
/// encodes the object: `kubectl label cm x a-` on the last label leaves no
/// `labels: {}`. Struct-typed fields (an `emptyDir: {}`, a `selector: {}`)
/// are kept.
pub fn drop_empty_maps(defs: &Definitions, schema: &Value, obj: &mut Value) {
    let s = defs.resolve(schema);
    if s.get("x-kubernetes-preserve-unknown-fields").and_then(Value::as_bool) == Some(true) {
        return;
    }
    let is_map = |ps: &Value| defs.resolve(ps).get("additionalProperties").is_some_and(Value::is_object);
    match obj {
        Value::Object(m) => {
            if let Some(props) = s.get("properties").and_then(Value::as_object) {
                m.retain(|k, v| {
                    let Some(ps) = props.get(k) else { return true };
                    let empty = v.is_null() || v.as_object().is_some_and(serde_json::Map::is_empty);
                    !(empty && is_map(ps))
                });
                for (k, v) in m.iter_mut() {
                    if let Some(ps) = props.get(k) {
                        drop_empty_maps(defs, ps, v);
                    }
                }
            } else if let Some(ap) = s.get("additionalProperties").filter(|a| a.is_object()) {
                for v in m.values_mut() {
                    drop_empty_maps(defs, ap, v);
                }
            }
        }
        Value::Array(items) => {
            if let Some(is) = s.get("items") {
                for v in items.iter_mut() {
                    drop_empty_maps(defs, is, v);
                }
            }
        }
        _ => {}
    }
}

/// The first value of `obj` whose JSON type its schema does not allow, as
/// Go's decoder words it: `json: cannot unmarshal string into Go struct
/// field DeploymentSpec.spec.replicas of type int32`. kube-apiserver fails
/// such a body with 400 whatever `fieldValidation` says. `null` fits any
/// field; `root` is the kind's definition name.
pub fn type_error(defs: &Definitions, root: &str, schema: &Value, obj: &Value) -> Option<String> {
    let short = root.rsplit('.').next().unwrap_or(root);
    check_type(defs, schema, obj, short, "")
}

/// Go's name for a JSON value's kind in type errors.
fn json_kind(v: &Value) -> String {
    match v {
        Value::String(_) => "string".into(),
        Value::Bool(_) => "bool".into(),
        Value::Number(n) if n.is_f64() => format!("number {n}"),
        Value::Number(_) => "number".into(),
        Value::Array(_) => "array".into(),
        Value::Object(_) => "object".into(),
        Value::Null => "null".into(),
    }
}

/// Go's type name for a schema (`int32`, `string`, `v1.PodSpec`,
/// `[]v1.Container`, `map[string]string`), best effort.
fn go_type(defs: &Definitions, schema: &Value) -> String {
    let (name, s) = defs.resolve_named(schema);
    let ty = s.get("type").and_then(Value::as_str).unwrap_or("");
    let format = s.get("format").and_then(Value::as_str).unwrap_or("");
    match (ty, format) {
        ("integer", "int32") => "int32".into(),
        ("integer", "int64") => "int64".into(),
        ("integer", _) => "int".into(),
        ("number", _) => "float64".into(),
        ("boolean", _) => "bool".into(),
        ("string", "byte") => "[]uint8".into(),
        ("string", _) => match name {
            // Time, MicroTime and other named string types.
            Some(n) => go_name(n),
            None => "string".into(),
        },
        ("array", _) => format!("[]{}", s.get("items").map(|i| go_type(defs, i)).unwrap_or_default()),
        ("object", _) if s.get("properties").is_none() => match s.get("additionalProperties").filter(|a| a.is_object()) {
            Some(ap) => format!("map[string]{}", go_type(defs, ap)),
            None => name.map(go_name).unwrap_or_else(|| "map[string]interface {}".into()),
        },
        _ => name.map(go_name).unwrap_or_default(),
    }
}

/// `io.k8s.api.core.v1.PodSpec` → `v1.PodSpec`.
fn go_name(def: &str) -> String {
    let mut parts = def.rsplit('.');
    let ty = parts.next().unwrap_or(def);
    match parts.next() {
        Some(pkg) => format!("{pkg}.{ty}"),
        None => ty.to_string(),
    }
}

/// Whether a JSON value fits a schema's `type` (or its `oneOf` types;
/// schemas with neither accept anything).
fn fits(s: &Value, v: &Value) -> bool {
    // RawExtension, FieldsV1, Patch: opaque objects whose Go types take any
    // JSON value.
    if s.get("type").and_then(Value::as_str) == Some("object") && s.get("properties").is_none() && s.get("additionalProperties").is_none() {
        return true;
    }
    let allowed: Vec<&str> = match s.get("type").and_then(Value::as_str) {
        Some(t) => vec![t],
        None => match s.get("oneOf").and_then(Value::as_array) {
            Some(alts) => alts.iter().filter_map(|a| a.get("type").and_then(Value::as_str)).collect(),
            None => return true,
        },
    };
    allowed.iter().any(|t| match (*t, v) {
        (_, Value::Null) => true,
        ("string", Value::String(_)) | ("boolean", Value::Bool(_)) | ("array", Value::Array(_)) | ("object", Value::Object(_)) | ("number", Value::Number(_)) => true,
        ("integer", Value::Number(n)) => n.is_i64() || n.is_u64(),
        _ => false,
    })
}

/// The Go struct a value of `schema` decodes into (`Container`), or
/// `parent` for scalars and maps.
fn struct_name<'a>(defs: &'a Definitions, schema: &'a Value, parent: &'a str) -> &'a str {
    match defs.resolve_named(schema) {
        (Some(n), s) if s.get("properties").is_some() => n.rsplit('.').next().unwrap_or(n),
        _ => parent,
    }
}

fn check_type(defs: &Definitions, schema: &Value, v: &Value, parent: &str, path: &str) -> Option<String> {
    let s = defs.resolve(schema);
    if s.get("x-kubernetes-preserve-unknown-fields").and_then(Value::as_bool) == Some(true) {
        return None;
    }
    if !fits(s, v) {
        return Some(format!("json: cannot unmarshal {} into Go struct field {parent}.{path} of type {}", json_kind(v), go_type(defs, schema)));
    }
    if let (Value::String(text), Some("byte")) = (v, s.get("format").and_then(Value::as_str)) {
        if let Err(at) = go_base64(text) {
            return Some(format!("illegal base64 data at input byte {at}"));
        }
    }
    // Fields below this value belong to its own struct, if it is one.
    let own = struct_name(defs, schema, parent);
    match v {
        Value::Object(m) => {
            if let Some(props) = s.get("properties").and_then(Value::as_object) {
                for (k, x) in m {
                    if let Some(ps) = props.get(k) {
                        if let Some(e) = check_type(defs, ps, x, own, &join(path, k)) {
                            return Some(e);
                        }
                    }
                }
            } else if let Some(ap) = s.get("additionalProperties").filter(|a| a.is_object()) {
                for (k, x) in m {
                    if let Some(e) = check_type(defs, ap, x, own, &join(path, k)) {
                        return Some(e);
                    }
                }
            }
            None
        }
        Value::Array(items) => {
            let is = s.get("items")?;
            items.iter().find_map(|x| check_type(defs, is, x, parent, path))
        }
        _ => None,
    }
}

/// Decodes a `format: byte` string as Go's `encoding/json` does for
/// `[]byte` (`base64.StdEncoding`: padded, trailing bits allowed, CR and LF
/// skipped).
///
/// # Errors
/// The offset of the first byte Go reports as illegal.
pub fn go_base64(text: &str) -> Result<Vec<u8>, usize> {
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    use base64::{DecodeError, Engine as _};
    const GO_STD: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new().with_decode_allow_trailing_bits(true).with_decode_padding_mode(DecodePaddingMode::RequireCanonical),
    );
    let clean: String = text.chars().filter(|c| *c != '\r' && *c != '\n').collect();
    GO_STD.decode(&clean).map_err(|e| match e {
        DecodeError::InvalidByte(at, _) | DecodeError::InvalidLastSymbol(at, _) => at,
        DecodeError::InvalidLength(_) | DecodeError::InvalidPadding => clean.len() / 4 * 4,
    })
}

/// The paths of keys that occur more than once in one JSON object of
/// `body`, in document order (`metadata.name`, `data.a`). serde_json keeps
/// the last value of a duplicate, as kube's decoder does; this finds them
/// for `fieldValidation`. Malformed JSON yields what was found before the
/// error (the caller reports the error when it decodes the body).
pub fn duplicate_fields(body: &[u8]) -> Vec<String> {
    let out = RefCell::new(Vec::new());
    let mut de = serde_json::Deserializer::from_slice(body);
    let _ = Dup { path: String::new(), out: &out }.deserialize(&mut de);
    out.into_inner()
}

/// Walks a JSON document recording duplicate keys under `path`.
struct Dup<'a> {
    path: String,
    out: &'a RefCell<Vec<String>>,
}

impl<'de> DeserializeSeed<'de> for Dup<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Dup<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0usize;
        while seq.next_element_seed(Dup { path: format!("{}[{i}]", self.path), out: self.out })?.is_some() {
            i += 1;
        }
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = HashSet::new();
        while let Some(k) = map.next_key::<String>()? {
            let path = join(&self.path, &k);
            if !seen.insert(k) {
                self.out.borrow_mut().push(path.clone());
            }
            map.next_value_seed(Dup { path, out: self.out })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finds_and_drops_unknown_fields() {
        let d = super::super::definitions::builtin();
        let schema = d.of_kind("apps", "v1", "Deployment").cloned().unwrap_or_default();
        let mut obj = json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "bogus": 1,
            "metadata": {"name": "x", "labels": {"a": "b"}, "nope": true},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i", "imagePullPolcy": "x", "resources": {"limits": {"cpu": "1"}}}]}},
                     "strategy": {"rollingUpdate": {"maxSurge": "25%"}}},
        });
        let unknown = prune_unknown(d, &schema, &mut obj);
        assert_eq!(unknown, ["bogus", "metadata.nope", "spec.template.spec.containers[0].imagePullPolcy"]);
        assert!(obj.get("bogus").is_none());
        assert_eq!(obj["spec"]["template"]["spec"]["containers"][0], json!({"name": "c", "image": "i", "resources": {"limits": {"cpu": "1"}}}));
        assert_eq!(FieldValidation::parse(None), Ok(FieldValidation::Warn));
        let root = "io.k8s.api.apps.v1.Deployment";
        let type_cases = [
            (json!({"spec": {"replicas": "3"}}), Some("json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32")),
            (json!({"spec": {"replicas": 1.5}}), Some("json: cannot unmarshal number 1.5 into Go struct field DeploymentSpec.spec.replicas of type int32")),
            (json!({"metadata": {"labels": {"a": 1}}}), Some("json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels.a of type string")),
            (json!({"spec": {"template": {"spec": {"containers": [{"name": 1}]}}}}), Some("json: cannot unmarshal number into Go struct field Container.spec.template.spec.containers.name of type string")),
            (json!({"spec": {"template": {"spec": {"containers": {}}}}}), Some("json: cannot unmarshal object into Go struct field PodSpec.spec.template.spec.containers of type []v1.Container")),
            (json!({"spec": "x"}), Some("json: cannot unmarshal string into Go struct field Deployment.spec of type v1.DeploymentSpec")),
            (json!({"spec": {"replicas": null, "strategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": "25%"}}}}), None),
            (json!({"spec": {"template": {"spec": {"containers": [{"resources": {"limits": {"cpu": 0.5, "memory": "1Gi"}}}]}}}}), None),
        ];
        for (obj, want) in type_cases {
            assert_eq!(type_error(d, root, &schema, &obj).as_deref(), want, "{obj}");
        }
        let dups = duplicate_fields(br#"{"a":1,"m":{"x":[{"n":1,"n":2}],"y":1,"y":{"z":1}},"a":2}"#);
        assert_eq!(dups, ["m.x[0].n", "m.y", "a"]);
        assert!(duplicate_fields(b"{\"a\": 1, ").is_empty());
        assert!(FieldValidation::parse(Some("strict")).is_err());
    }
}
