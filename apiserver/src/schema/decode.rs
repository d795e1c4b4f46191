//! What kube-apiserver's decoder does to a built-in object, done along its
//! schema: unknown fields dropped and reported for `fieldValidation`
//! (KEP-2885), values of the wrong JSON type refused with Go's wording,
//! empty maps dropped as Go's `omitempty` drops them. kube finds these
//! while decoding into Go structs; here the walk reports each one's path.
//!
//! Paths are written as kube's strict decoder writes them:
//! `spec.template.spec.containers[0].imagePullPolcy`, `metadata.foo`, `bar`.

use serde_json::Value;

use super::compiled::{SchemaRef, Type};
use super::field::child as join;

/// Removes the fields of `obj` that `schema` does not declare, and returns
/// their paths, sorted. Maps (`additionalProperties`) and
/// `x-kubernetes-preserve-unknown-fields` keep any key; object schemas with
/// neither properties nor additionalProperties (RawExtension, FieldsV1)
/// keep anything.
pub fn prune_unknown(schema: SchemaRef<'_>, obj: &mut Value) -> Vec<String> {
    let mut out = Vec::new();
    walk(schema, obj, "", &mut out);
    out.sort();
    out
}

/// [`prune_unknown`] with paths under `prefix` (`metadata`).
pub(crate) fn prune_unknown_at(schema: SchemaRef<'_>, obj: &mut Value, prefix: &str, out: &mut Vec<String>) {
    walk(schema, obj, prefix, out);
}

fn walk(s: SchemaRef<'_>, obj: &mut Value, path: &str, out: &mut Vec<String>) {
    if s.preserve_unknown_fields() {
        return;
    }
    match obj {
        Value::Object(m) => {
            if s.has_properties() {
                let mut unknown = Vec::new();
                for (k, v) in m.iter_mut() {
                    match s.property(k) {
                        Some(ps) => walk(ps, v, &join(path, k), out),
                        None => unknown.push(k.clone()),
                    }
                }
                for k in unknown {
                    m.remove(&k);
                    out.push(join(path, &k));
                }
            } else if let Some(ap) = s.additional_properties() {
                for (k, v) in m.iter_mut() {
                    walk(ap, v, &join(path, k), out);
                }
            }
        }
        Value::Array(items) => {
            if let Some(is) = s.items() {
                for (i, v) in items.iter_mut().enumerate() {
                    walk(is, v, &format!("{path}[{i}]"), out);
                }
            }
        }
        _ => {}
    }
}

/// Leaves `obj` as kube leaves a built-in object it decodes into its Go
/// type and encodes again:
///
/// - a null struct field is dropped (a nil pointer, slice or map that
///   `omitempty` leaves out: `replicas: null` is then defaulted, `env:
///   null` is gone);
/// - a null entry of a map of strings is the empty string (`data: {a:
///   null}` stores `a: ""`, as Go's decoder keeps the zero value); a null
///   entry of another map is dropped;
/// - an empty map field (`additionalProperties` schemas: labels,
///   annotations, a ConfigMap's data, a selector's matchLabels...) is
///   dropped, as `omitempty` drops an empty map: `kubectl label cm x a-` on
///   the last label leaves no `labels: {}`. Struct-typed fields (an
///   `emptyDir: {}`, a `selector: {}`) are kept.
///
/// What the schema preserves unknown fields of (RawExtension) is left as
/// it is.
pub fn as_go_decodes(s: SchemaRef<'_>, obj: &mut Value) {
    if s.preserve_unknown_fields() {
        return;
    }
    let is_map = |ps: SchemaRef<'_>| ps.additional_properties().is_some();
    match obj {
        Value::Object(m) => {
            if s.has_properties() {
                m.retain(|k, v| {
                    let Some(ps) = s.property(k) else { return true };
                    let empty_map = v.as_object().is_some_and(serde_json::Map::is_empty) && is_map(ps);
                    !(v.is_null() || empty_map)
                });
                for (k, v) in m.iter_mut() {
                    if let Some(ps) = s.property(k) {
                        as_go_decodes(ps, v);
                    }
                }
            } else if let Some(ap) = s.additional_properties() {
                if ap.ty() == Some(crate::schema::Type::String) {
                    m.values_mut().filter(|v| v.is_null()).for_each(|v| *v = Value::String(String::new()));
                } else {
                    m.retain(|_, v| !v.is_null());
                }
                for v in m.values_mut() {
                    as_go_decodes(ap, v);
                }
            }
        }
        Value::Array(items) => {
            if let Some(is) = s.items() {
                for v in items.iter_mut() {
                    as_go_decodes(is, v);
                }
            }
        }
        _ => {}
    }
}

/// The definition of resource quantities (`500m`, `1Gi`).
const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";

/// The first value of `obj` whose JSON type its schema does not allow, as
/// Go's decoder words it: `json: cannot unmarshal string into Go struct
/// field DeploymentSpec.spec.replicas of type int32`. kube-apiserver fails
/// such a body with 400 whatever `fieldValidation` says. A quantity that
/// does not parse fails the same way, with the parser's message (`quantities
/// must match the regular expression …`). `null` fits any field; `schema` is
/// the kind's (its definition names the root struct).
pub fn type_error(schema: SchemaRef<'_>, obj: &Value) -> Option<String> {
    let root = schema.definition_name().unwrap_or("");
    let short = root.rsplit('.').next().unwrap_or(root);
    check_type(schema, obj, short, "")
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
fn go_type(s: SchemaRef<'_>) -> String {
    let name = s.definition_name();
    let format = s.format().unwrap_or("");
    match (s.ty(), format) {
        (Some(Type::Integer), "int32") => "int32".into(),
        (Some(Type::Integer), "int64") => "int64".into(),
        (Some(Type::Integer), _) => "int".into(),
        (Some(Type::Number), _) => "float64".into(),
        (Some(Type::Boolean), _) => "bool".into(),
        (Some(Type::String), "byte") => "[]uint8".into(),
        (Some(Type::String), _) => match name {
            // Time, MicroTime and other named string types.
            Some(n) => go_name(n),
            None => "string".into(),
        },
        (Some(Type::Array), _) => format!("[]{}", s.items().map(go_type).unwrap_or_default()),
        (Some(Type::Object), _) if !s.has_properties() => match s.additional_properties() {
            Some(ap) => format!("map[string]{}", go_type(ap)),
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
fn fits(s: SchemaRef<'_>, v: &Value) -> bool {
    // RawExtension, FieldsV1, Patch: opaque objects whose Go types take any
    // JSON value.
    if s.ty() == Some(Type::Object) && !s.has_properties() && !s.has_additional_properties() {
        return true;
    }
    let allowed: Vec<Type> = match s.ty() {
        Some(t) => vec![t],
        None => {
            let alts: Vec<Type> = s.one_of().filter_map(|a| a.ty()).collect();
            if s.one_of().next().is_none() {
                return true;
            }
            alts
        }
    };
    allowed.iter().any(|t| match (t, v) {
        (_, Value::Null) => true,
        (Type::String, Value::String(_)) | (Type::Boolean, Value::Bool(_)) | (Type::Array, Value::Array(_)) | (Type::Object, Value::Object(_)) | (Type::Number, Value::Number(_)) => true,
        (Type::Integer, Value::Number(n)) => n.is_i64() || n.is_u64(),
        _ => false,
    })
}

/// The Go struct a value of `schema` decodes into (`Container`), or
/// `parent` for scalars and maps.
fn struct_name<'a>(s: SchemaRef<'a>, parent: &'a str) -> &'a str {
    match s.definition_name() {
        Some(n) if s.has_properties() => n.rsplit('.').next().unwrap_or(n),
        _ => parent,
    }
}

fn check_type(s: SchemaRef<'_>, v: &Value, parent: &str, path: &str) -> Option<String> {
    if s.preserve_unknown_fields() {
        return None;
    }
    if !fits(s, v) {
        return Some(format!("json: cannot unmarshal {} into Go struct field {parent}.{path} of type {}", json_kind(v), go_type(s)));
    }
    if s.definition_name() == Some(QUANTITY) && matches!(v, Value::String(_) | Value::Number(_)) {
        // kube's `Quantity.UnmarshalJSON` fails the decode with the parse
        // error, unwrapped.
        if let Err(e) = crate::quantity::Quantity::from_json(v) {
            return Some(e.to_string());
        }
    }
    if let (Value::String(text), Some("byte")) = (v, s.format()) {
        if let Err(at) = go_base64(text) {
            return Some(format!("illegal base64 data at input byte {at}"));
        }
    }
    // Fields below this value belong to its own struct, if it is one.
    let own = struct_name(s, parent);
    match v {
        Value::Object(m) => {
            if s.has_properties() {
                for (k, x) in m {
                    if let Some(ps) = s.property(k) {
                        if let Some(e) = check_type(ps, x, own, &join(path, k)) {
                            return Some(e);
                        }
                    }
                }
            } else if let Some(ap) = s.additional_properties() {
                for (k, x) in m {
                    if let Some(e) = check_type(ap, x, own, &join(path, k)) {
                        return Some(e);
                    }
                }
            }
            None
        }
        Value::Array(items) => {
            let is = s.items()?;
            items.iter().find_map(|x| check_type(is, x, parent, path))
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
    const GO_STD: GeneralPurpose =
        GeneralPurpose::new(&base64::alphabet::STANDARD, GeneralPurposeConfig::new().with_decode_allow_trailing_bits(true).with_decode_padding_mode(DecodePaddingMode::RequireCanonical));
    let clean: String = text.chars().filter(|c| *c != '\r' && *c != '\n').collect();
    GO_STD.decode(&clean).map_err(|e| match e {
        DecodeError::InvalidByte(at, _) | DecodeError::InvalidLastSymbol(at, _) => at,
        DecodeError::InvalidLength(_) | DecodeError::InvalidPadding => clean.len() / 4 * 4,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finds_and_drops_unknown_fields() {
        let store = crate::schema::SchemaStore::builtin();
        let Some(dep) = store.of_kind("apps", "v1", "Deployment") else { panic!("no Deployment schema") };
        let schema = dep.root();
        let mut obj = json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "bogus": 1,
            "metadata": {"name": "x", "labels": {"a": "b"}, "nope": true},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i", "imagePullPolcy": "x", "resources": {"limits": {"cpu": "1"}}}]}},
                     "strategy": {"rollingUpdate": {"maxSurge": "25%"}}},
        });
        let unknown = prune_unknown(schema, &mut obj);
        assert_eq!(unknown, ["bogus", "metadata.nope", "spec.template.spec.containers[0].imagePullPolcy"]);
        assert!(obj.get("bogus").is_none());
        assert_eq!(obj["spec"]["template"]["spec"]["containers"][0], json!({"name": "c", "image": "i", "resources": {"limits": {"cpu": "1"}}}));
        let type_cases = [
            (json!({"spec": {"replicas": "3"}}), Some("json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32")),
            (json!({"spec": {"replicas": 1.5}}), Some("json: cannot unmarshal number 1.5 into Go struct field DeploymentSpec.spec.replicas of type int32")),
            (json!({"metadata": {"labels": {"a": 1}}}), Some("json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels.a of type string")),
            (
                json!({"spec": {"template": {"spec": {"containers": [{"name": 1}]}}}}),
                Some("json: cannot unmarshal number into Go struct field Container.spec.template.spec.containers.name of type string"),
            ),
            (json!({"spec": {"template": {"spec": {"containers": {}}}}}), Some("json: cannot unmarshal object into Go struct field PodSpec.spec.template.spec.containers of type []v1.Container")),
            (json!({"spec": "x"}), Some("json: cannot unmarshal string into Go struct field Deployment.spec of type v1.DeploymentSpec")),
            (json!({"spec": {"replicas": null, "strategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": "25%"}}}}), None),
            (json!({"spec": {"template": {"spec": {"containers": [{"resources": {"limits": {"cpu": 0.5, "memory": "1Gi"}}}]}}}}), None),
            (
                json!({"spec": {"template": {"spec": {"containers": [{"resources": {"limits": {"cpu": "abc"}}}]}}}}),
                Some("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"),
            ),
            (json!({"spec": {"template": {"spec": {"containers": [{"resources": {"requests": {"memory": "1K"}}}]}}}}), Some("unable to parse quantity's suffix")),
        ];
        for (obj, want) in type_cases {
            assert_eq!(type_error(schema, &obj).as_deref(), want, "{obj}");
        }
        let Some(cm) = store.of_kind("", "v1", "ConfigMap") else { panic!("no ConfigMap schema") };
        let mut obj = json!({"metadata": {"name": "c", "labels": {}, "annotations": null}, "data": {}});
        as_go_decodes(cm.root(), &mut obj);
        assert_eq!(obj, json!({"metadata": {"name": "c"}}));
        let mut obj = json!({"metadata": {"name": "c", "labels": {"a": null}}, "data": {"x": null, "y": "1"}, "binaryData": null});
        as_go_decodes(cm.root(), &mut obj);
        assert_eq!(obj, json!({"metadata": {"name": "c", "labels": {"a": ""}}, "data": {"x": "", "y": "1"}}));
        let Some(dep) = store.of_kind("apps", "v1", "Deployment") else { panic!("no Deployment schema") };
        let mut obj = json!({"spec": {"replicas": null, "template": {"spec": {"containers": [{"name": "c", "env": null, "resources": null}]}}}});
        as_go_decodes(dep.root(), &mut obj);
        assert_eq!(obj, json!({"spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}}));
        assert_eq!(go_base64("aGk="), Ok(b"hi".to_vec()));
        assert_eq!(go_base64("a!=="), Err(1));
    }
}

/// Rewrites floats with an integral value as integers (`1.0` and `1e2`
/// become `1` and `100`), as a custom resource reads back from kube: its
/// unstructured decoding keeps `1.0` as a float64, which Go's encoder then
/// writes as `1`. Floats outside the i64 range stay floats.
pub fn integral_floats(v: &mut Value) {
    let mut stack: Vec<&mut Value> = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::Number(n) if n.is_f64() => {
                if let Some(f) = n.as_f64() {
                    // i64::MAX as f64 rounds up to 2^63, which is out of
                    // range: the bound is exclusive.
                    if f.fract() == 0.0 && (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&f) {
                        *v = Value::from(f as i64);
                    }
                }
            }
            Value::Array(a) => stack.extend(a.iter_mut()),
            Value::Object(o) => stack.extend(o.values_mut()),
            _ => {}
        }
    }
}

#[cfg(test)]
mod integral_float_tests {
    use serde_json::json;

    #[test]
    fn integral_floats_become_integers() {
        let mut v: serde_json::Value = serde_json::from_str(r#"{"a": 1.0, "b": [1e2, 2.5, -0.0], "c": {"d": 3}, "e": 1e300}"#).unwrap_or_default();
        super::integral_floats(&mut v);
        assert_eq!(v, json!({"a": 1, "b": [100, 2.5, 0], "c": {"d": 3}, "e": 1e300}));
        assert_eq!(serde_json::to_string(&v["a"]).unwrap_or_default(), "1");
    }
}
