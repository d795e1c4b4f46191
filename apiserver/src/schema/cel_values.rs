//! A custom resource's values as its CRD rules see them (kube's
//! `UnstructuredToVal` and the CEL types of `model.SchemaDeclType`): the
//! schema, not the JSON, decides a value's CEL type.
//!
//! | schema | CEL value |
//! |---|---|
//! | `type: integer` | `int` |
//! | `type: number` | `double`, also for `1` (a JSON integer) |
//! | `type: string`, `format: date-time` or `date` | `timestamp` |
//! | `type: string`, `format: duration` | `duration` |
//! | `type: string`, `format: byte` | `bytes` (the base64 decoded) |
//! | `x-kubernetes-int-or-string`, no type with `x-kubernetes-preserve-unknown-fields` | as the JSON is (`int` or `string`, …) |
//! | `type: object` with `properties` | a map of the declared fields, by their escaped names ([`escape`]) |
//! | `type: object` with `additionalProperties` | a map keyed by the keys as written |
//! | `type: array` | a list |
//!
//! At a resource's root and at `x-kubernetes-embedded-resource` objects,
//! `apiVersion`, `kind` and `metadata` are there as well, `metadata` with
//! only `name` and `generateName` (kube's `WithTypeAndObjectMeta`).
//!
//! A string that does not parse as its format stays a string (the schema
//! validation reports the format error).

use std::collections::HashMap;
use std::sync::Arc;

use kube_cel::cel::objects::{Key, Map};
use kube_cel::cel::Value as Cel;
use serde_json::Value;

use super::compiled::{Additional, SchemaRef, Type};

/// Words CEL reserves, which a property name must not be as is: kube
/// escapes them to `__{word}__`.
const RESERVED: &[&str] =
    &["true", "false", "null", "in", "as", "break", "const", "continue", "else", "for", "function", "if", "import", "let", "loop", "package", "namespace", "return", "var", "void", "while"];

/// A property name as a CEL field name (kube's `cel.Escape`): reserved
/// words become `__word__`; `__` becomes `__underscores__`, `.` `__dot__`,
/// `-` `__dash__` and `/` `__slash__`. `None` for names CEL cannot reach:
/// empty, starting with a digit, or with any other character outside
/// `[a-zA-Z0-9_]`.
pub(crate) fn escape(name: &str) -> Option<String> {
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    if RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let mut out = String::with_capacity(name.len());
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '_' if chars.peek() == Some(&'_') => {
                chars.next();
                out.push_str("__underscores__");
            }
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            c if c.is_ascii_alphanumeric() || c == '_' => out.push(c),
            _ => return None,
        }
    }
    Some(out)
}

fn key(s: &str) -> Key {
    Key::String(Arc::new(s.to_string()))
}

fn string(s: &str) -> Cel {
    Cel::String(Arc::new(s.to_string()))
}

/// `v`, found at schema `node`, as CEL sees it; `resource_root` at the
/// object's root and at embedded resources.
pub(crate) fn typed(node: SchemaRef<'_>, v: &Value, resource_root: bool) -> Cel {
    if v.is_null() {
        return Cel::Null;
    }
    if node.int_or_string() {
        return crate::cel::to_cel(v);
    }
    match (node.ty(), v) {
        (Some(Type::String), Value::String(s)) => formatted(node.format(), s),
        (Some(Type::Number), Value::Number(n)) => Cel::Float(n.as_f64().unwrap_or(f64::NAN)),
        (_, Value::Array(items)) => match node.items() {
            Some(is) => Cel::List(Arc::new(items.iter().map(|x| typed(is, x, is.embedded_resource())).collect())),
            None => crate::cel::to_cel(v),
        },
        (_, Value::Object(o)) => object(node, o, resource_root),
        _ => crate::cel::to_cel(v),
    }
}

/// A string of a `format` kube gives a CEL type.
fn formatted(format: Option<&str>, s: &str) -> Cel {
    let parsed = match format {
        Some("date-time") => kube_cel::cel::functions::timestamp(Arc::new(s.to_string())).ok(),
        // A date is its midnight, UTC.
        Some("date") if s.len() == 10 => kube_cel::cel::functions::timestamp(Arc::new(format!("{s}T00:00:00Z"))).ok(),
        Some("duration") => kube_cel::cel::functions::duration(Arc::new(s.to_string())).ok(),
        Some("byte") => {
            use base64::Engine as _;
            base64::engine::general_purpose::STANDARD.decode(s).ok().map(|b| Cel::Bytes(Arc::new(b)))
        }
        _ => None,
    };
    parsed.unwrap_or_else(|| string(s))
}

fn object(node: SchemaRef<'_>, o: &serde_json::Map<String, Value>, resource_root: bool) -> Cel {
    let mut map: HashMap<Key, Cel> = HashMap::with_capacity(o.len());
    match node.additional() {
        // A map: its keys are data, not field names.
        Additional::Schema(_) | Additional::Bool(true) if !node.has_properties() => {
            let values = node.additional_properties();
            for (k, v) in o {
                let cv = match values {
                    Some(s) => typed(s, v, s.embedded_resource()),
                    None => crate::cel::to_cel(v),
                };
                map.insert(key(k), cv);
            }
        }
        _ if !node.has_properties() && (node.preserve_unknown_fields() || node.ty().is_none()) => {
            // Untyped: everything, as it is.
            for (k, v) in o {
                map.insert(key(k), crate::cel::to_cel(v));
            }
        }
        _ => {
            for (k, v) in o {
                let Some(p) = node.property(k) else { continue };
                let Some(name) = escape(k) else { continue };
                map.insert(key(&name), typed(p, v, p.embedded_resource()));
            }
        }
    }
    if resource_root || node.embedded_resource() {
        for f in ["apiVersion", "kind"] {
            if let Some(Value::String(s)) = o.get(f) {
                map.insert(key(f), string(s));
            }
        }
        if let Some(Value::Object(m)) = o.get("metadata") {
            let mut meta: HashMap<Key, Cel> = HashMap::new();
            for f in ["name", "generateName"] {
                if let Some(Value::String(s)) = m.get(f) {
                    meta.insert(key(f), string(s));
                }
            }
            map.insert(key("metadata"), Cel::Map(Map { map: Arc::new(meta) }));
        }
    }
    Cel::Map(Map { map: Arc::new(map) })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::schema::compile_crd;

    #[test]
    fn names_escape_as_kube_escapes_them() {
        let cases = [
            ("replicas", Some("replicas")),
            ("namespace", Some("__namespace__")),
            ("foo-bar", Some("foo__dash__bar")),
            ("a.b/c", Some("a__dot__b__slash__c")),
            ("x__y", Some("x__underscores__y")),
            ("_x", Some("_x")),
            ("1st", None),
            ("a b", None),
            ("", None),
        ];
        for (name, want) in cases {
            assert_eq!(escape(name).as_deref(), want, "{name}");
        }
    }

    #[test]
    fn values_take_their_schema_types() {
        let schema = json!({"type": "object", "properties": {
            "n": {"type": "number"}, "i": {"type": "integer"}, "t": {"type": "string", "format": "date-time"},
            "d": {"type": "string", "format": "duration"}, "b": {"type": "string", "format": "byte"},
            "ios": {"x-kubernetes-int-or-string": true}, "m": {"type": "object", "additionalProperties": {"type": "integer"}},
            "foo-bar": {"type": "string"}
        }});
        let s = compile_crd("g.example.com", "v1", "K", &schema);
        let obj = json!({"apiVersion": "g.example.com/v1", "kind": "K", "metadata": {"name": "x", "labels": {"a": "b"}},
            "n": 1, "i": 2, "t": "2024-01-02T03:04:05Z", "d": "1h30m", "b": "QUI=", "ios": "50%", "m": {"a-b": 1}, "foo-bar": "v", "extra": 1});
        let Cel::Map(m) = typed(s.root(), &obj, true) else { panic!("not a map") };
        let get = |k: &str| m.map.get(&key(k)).cloned();
        assert_eq!(get("n"), Some(Cel::Float(1.0)));
        assert_eq!(get("i"), Some(Cel::Int(2)));
        assert!(matches!(get("t"), Some(Cel::Timestamp(_))));
        assert!(matches!(get("d"), Some(Cel::Duration(d)) if d.num_minutes() == 90));
        assert_eq!(get("b"), Some(Cel::Bytes(Arc::new(b"AB".to_vec()))));
        assert_eq!(get("ios"), Some(string("50%")));
        assert_eq!(get("foo__dash__bar"), Some(string("v")));
        assert_eq!(get("extra"), None);
        let Some(Cel::Map(mm)) = get("m") else { panic!("m") };
        assert_eq!(mm.map.get(&key("a-b")), Some(&Cel::Int(1)));
        let Some(Cel::Map(meta)) = get("metadata") else { panic!("metadata") };
        assert_eq!(meta.map.len(), 1, "only name and generateName");
        assert_eq!(get("kind"), Some(string("K")));
    }
}
