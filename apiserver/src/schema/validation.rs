//! Validation of a value against its schema, with the messages
//! kube-apiserver gives custom resources (kube-openapi's `validate`
//! package as apiextensions-apiserver converts its results to field
//! errors, Kubernetes v1.33).
//!
//! Each schema node runs its checks in kube-openapi's order: type, then
//! allOf/anyOf/oneOf/not, string (maxLength, minLength, pattern: the first
//! failure only), format, number (multipleOf, minimum, maximum), array
//! (items, minItems, maxItems, uniqueItems), enum, object (min/max
//! properties, additionalProperties, properties, required). A type error
//! does not stop the others: `"x"` for an integer enum reports both the
//! type and the enum. `null` is checked only for type and enum.
//!
//! Names in messages are the value's path from where validation started
//! (`spec.replicas in body should be greater than or equal to 0`); the
//! error's field is that path under an optional prefix: the status
//! subresource validates `status` with its own schema and prefix
//! `status`, so `status.num: Invalid value: 15: num in body should be less
//! than or equal to 10`. Messages about no single value (anyOf failed)
//! have field `<nil>` (or the prefix): `<nil>: Invalid value: "":
//! "spec.x" must validate at least one schema (anyOf)`.
//!
//! Properties are checked in name order (kube walks a Go map, so its order
//! varies from call to call). anyOf and oneOf report the failures of the
//! alternative with the fewest errors (kube-openapi: the one with the most
//! matched checks), the first on a tie.

use serde_json::Value;

use super::compiled::{Additional, ListType, SchemaRef};
use super::field::{self, go_float, FieldError};
use super::formats;
use crate::errors::go_quote;

/// What went wrong, before it becomes a [`FieldError`]: kube-openapi's
/// `errors.Validation` (name, value, code) or a composite message.
#[derive(Debug)]
enum Raw {
    /// A check on the value at `name`.
    Check { name: String, value: Value, code: Code, message: String },
    /// allOf/anyOf/oneOf/not: no value of its own.
    Composite(String),
}

#[derive(Debug)]
enum Code {
    Required,
    Enum(Vec<Value>),
    TooLong(i64),
    TooMany(i64, i64),
    Type,
    Other,
}

fn check(name: &str, value: Value, code: Code, message: String) -> Raw {
    Raw::Check { name: name.to_string(), value, code, message }
}

/// Validates `value` against `schema`, names starting at the root (`""`),
/// fields under `prefix` (`None`: kube's nil path). Returns every error,
/// in kube-openapi's order.
pub fn validate(schema: SchemaRef<'_>, value: &Value, prefix: Option<&str>) -> Vec<FieldError> {
    let mut raw = Vec::new();
    node(schema, value, "", &mut raw);
    raw.into_iter().map(|r| to_field_error(r, prefix)).collect()
}

fn to_field_error(r: Raw, prefix: Option<&str>) -> FieldError {
    let base = || prefix.map(str::to_string).unwrap_or_else(|| "<nil>".to_string());
    match r {
        Raw::Composite(message) => FieldError::invalid(base(), Value::String(String::new()), message),
        Raw::Check { name, value, code, message } => {
            let path = if name.is_empty() || name == "." {
                base()
            } else {
                let n = name.strip_prefix('.').unwrap_or(&name);
                match prefix {
                    Some(p) => field::child(p, n),
                    None => n.to_string(),
                }
            };
            match code {
                Code::Required => FieldError::required(path, ""),
                Code::Enum(values) => {
                    let supported: Vec<String> = values.iter().map(|v| v.as_str().map(str::to_string).unwrap_or_else(|| go_json(v))).collect();
                    FieldError::not_supported(path, value, &supported)
                }
                Code::TooLong(max) => FieldError::too_long(path, max),
                Code::TooMany(actual, max) => FieldError::too_many(path, actual, max),
                Code::Type => FieldError::type_invalid(path, value, message),
                Code::Other => FieldError::invalid(path, value, message),
            }
        }
    }
}

/// Go's `json.Marshal` of a decoded value, for enum values in messages
/// (`1`, not `1.0`).
fn go_json(v: &Value) -> String {
    match v {
        Value::Number(n) if n.is_f64() => n.as_f64().map(|f| format!("{f}")).unwrap_or_default(),
        other => other.to_string(),
    }
}

/// The name a value at `path` has in messages: `spec.replicas in body`.
fn in_body(path: &str) -> String {
    format!("{path} in body")
}

/// A JSON value's kind as kube-openapi names it, and its Go format.
fn kind_of(v: &Value) -> (&'static str, &'static str) {
    match v {
        Value::Null => ("null", ""),
        Value::Bool(_) => ("boolean", ""),
        Value::Number(n) if n.is_f64() => ("number", "float64"),
        Value::Number(_) => ("integer", "int64"),
        Value::String(_) => ("string", ""),
        Value::Array(_) => ("array", ""),
        Value::Object(_) => ("object", ""),
    }
}

/// Whether a float is an integer as go-openapi's `IsFloat64AJSONInteger`
/// decides it (with a relative tolerance).
fn is_json_integer(f: f64) -> bool {
    if !f.is_finite() {
        return false;
    }
    let t = f.trunc();
    f == t || (f - t).abs() / (f.abs() + t.abs()).max(f64::MIN_POSITIVE) < 1e-9
}

fn node(s: SchemaRef<'_>, v: &Value, path: &str, out: &mut Vec<Raw>) {
    type_check(s, v, path, out);
    if v.is_null() {
        enum_check(s, v, path, out);
        return;
    }
    props(s, v, path, out);
    if let Value::String(text) = v {
        string_checks(s, text, path, out);
        if let Some(f) = formats::supported(s.format()) {
            if !formats::valid(f, text) {
                out.push(check(path, v.clone(), Code::Type, format!("{} must be of type {f}: {}", in_body(path), go_quote(text))));
            }
        }
    }
    if let Value::Number(_) = v {
        number_checks(s, v, path, out);
    }
    if let Value::Array(items) = v {
        array_checks(s, items, path, out);
    }
    enum_check(s, v, path, out);
    if let Value::Object(m) = v {
        object_checks(s, m, path, out);
    }
}

fn type_check(s: SchemaRef<'_>, v: &Value, path: &str, out: &mut Vec<Raw>) {
    let types: Vec<&str> = if s.int_or_string() { vec!["integer", "string"] } else { s.ty().map(|t| vec![t.as_str()]).unwrap_or_default() };
    let format = formats::supported(s.format());
    if types.is_empty() && format.is_none() {
        return;
    }
    let joined = types.join(",");
    let (kind, go_format) = kind_of(v);
    if v.is_null() {
        if !types.is_empty() && !s.nullable() {
            out.push(check(path, Value::String("null".into()), Code::Type, format!("{} must be of type {joined}: \"null\"", in_body(path))));
        }
        return;
    }
    let has = |t: &str| types.contains(&t);
    let float_int = kind == "number" && v.as_f64().is_some_and(is_json_integer) && has("integer");
    let int_float = kind == "integer" && has("number");
    let stringish = matches!(v, Value::String(_) | Value::Array(_));
    if let Some(f) = format {
        if !(stringish || has(kind) || go_format == f || float_int || int_float) {
            out.push(check(path, Value::String(go_format.into()), Code::Type, format!("{} must be of type {f}: {}", in_body(path), go_quote(go_format))));
            return;
        }
        if !(has("number") || has("integer")) && stringish {
            return;
        }
    }
    if !(has(kind) || float_int || int_float) {
        out.push(check(path, Value::String(kind.into()), Code::Type, format!("{} must be of type {joined}: {}", in_body(path), go_quote(kind))));
    }
}

/// Runs `s` on `v` alone, for allOf/anyOf/oneOf/not.
fn alone(s: SchemaRef<'_>, v: &Value, path: &str) -> Vec<Raw> {
    let mut r = Vec::new();
    node(s, v, path, &mut r);
    r
}

fn props(s: SchemaRef<'_>, v: &Value, path: &str, out: &mut Vec<Raw>) {
    let n = s.node();
    if !n.any_of.is_empty() {
        let mut best: Option<Vec<Raw>> = None;
        let mut ok = false;
        for id in &n.any_of {
            let r = alone(s.at(*id), v, path);
            if r.is_empty() {
                ok = true;
                best = None;
                break;
            }
            if best.as_ref().is_none_or(|b| r.len() < b.len()) {
                best = Some(r);
            }
        }
        if !ok {
            out.push(Raw::Composite(format!("{} must validate at least one schema (anyOf)", go_quote(path))));
        }
        out.extend(best.unwrap_or_default());
    }
    // Built-in IntOrString and Quantity use oneOf for their two scalar
    // types; custom schemas use it as a value validation.
    if !n.one_of.is_empty() {
        let mut best: Option<Vec<Raw>> = None;
        let mut valid = 0;
        for id in &n.one_of {
            let r = alone(s.at(*id), v, path);
            if r.is_empty() {
                valid += 1;
                best = None;
                continue;
            }
            if valid == 0 && best.as_ref().is_none_or(|b| r.len() < b.len()) {
                best = Some(r);
            }
        }
        if valid != 1 {
            let more = if valid == 0 { "Found none valid".to_string() } else { format!("Found {valid} valid alternatives") };
            out.push(Raw::Composite(format!("{} must validate one and only one schema (oneOf). {more}", go_quote(path))));
            out.extend(best.unwrap_or_default());
        }
    }
    if !n.all_of.is_empty() {
        let mut valid = 0;
        for id in &n.all_of {
            let r = alone(s.at(*id), v, path);
            if r.is_empty() {
                valid += 1;
            }
            out.extend(r);
        }
        if valid != n.all_of.len() {
            let more = if valid == 0 { ". None validated" } else { "" };
            out.push(Raw::Composite(format!("{} must validate all the schemas (allOf){more}", go_quote(path))));
        }
    }
    if let Some(not) = n.not {
        if alone(s.at(not), v, path).is_empty() {
            out.push(Raw::Composite(format!("{} must not validate the schema (not)", go_quote(path))));
        }
    }
}

fn string_checks(s: SchemaRef<'_>, text: &str, path: &str, out: &mut Vec<Raw>) {
    let n = s.node();
    let len = text.chars().count() as i64;
    let value = || Value::String(text.to_string());
    if let Some(max) = n.max_length.filter(|m| len > *m) {
        out.push(check(path, value(), Code::TooLong(max), format!("{} should be at most {max} chars long", in_body(path))));
        return;
    }
    if let Some(min) = n.min_length.filter(|m| len < *m) {
        out.push(check(path, value(), Code::Other, format!("{} should be at least {min} chars long", in_body(path))));
        return;
    }
    if let Some(p) = &n.pattern {
        match &p.regex {
            Ok(re) if re.is_match(text) => {}
            Ok(_) => out.push(check(path, value(), Code::Other, format!("{} should match '{}'", in_body(path), p.source))),
            Err(e) => out.push(check(path, value(), Code::Other, format!("{} should match '{}, but pattern is invalid: {e}'", in_body(path), p.source))),
        }
    }
}

/// A bound as kube-openapi prints it: as an integer when the value checked
/// is one (the bound truncated, as it compares), else as a float.
fn bound(b: f64, int: bool) -> String {
    if int {
        (b.trunc() as i64).to_string()
    } else {
        go_float(b)
    }
}

fn number_checks(s: SchemaRef<'_>, v: &Value, path: &str, out: &mut Vec<Raw>) {
    let n = s.node();
    let int = v.as_i64().or_else(|| v.as_u64().map(|u| u as i64));
    let f = v.as_f64().unwrap_or(0.0);
    if let Some(factor) = n.multiple_of {
        let err = match int {
            Some(i) => {
                let k = factor.trunc() as i64;
                if k <= 0 {
                    Some(format!("factor MultipleOf declared for {path} must be positive: {k}"))
                } else if i % k != 0 {
                    Some(format!("{} should be a multiple of {k}", in_body(path)))
                } else {
                    None
                }
            }
            None if factor <= 0.0 => Some(format!("factor MultipleOf declared for {path} must be positive: {}", go_float(factor))),
            None => {
                let mult = if factor < 1.0 { 1.0 / factor * f } else { f / factor };
                (!is_json_integer(mult)).then(|| format!("{} should be a multiple of {}", in_body(path), go_float(factor)))
            }
        };
        if let Some(m) = err {
            out.push(check(path, v.clone(), Code::Other, m));
        }
    }
    if let Some(min) = n.minimum {
        let below = match int {
            Some(i) => {
                let m = min.trunc() as i64;
                if n.exclusive_minimum {
                    i <= m
                } else {
                    i < m
                }
            }
            None => {
                if n.exclusive_minimum {
                    f <= min
                } else {
                    f < min
                }
            }
        };
        if below {
            let op = if n.exclusive_minimum { "greater than" } else { "greater than or equal to" };
            out.push(check(path, v.clone(), Code::Other, format!("{} should be {op} {}", in_body(path), bound(min, int.is_some()))));
        }
    }
    if let Some(max) = n.maximum {
        let above = match int {
            Some(i) => {
                let m = max.trunc() as i64;
                if n.exclusive_maximum {
                    i >= m
                } else {
                    i > m
                }
            }
            None => {
                if n.exclusive_maximum {
                    f >= max
                } else {
                    f > max
                }
            }
        };
        if above {
            let op = if n.exclusive_maximum { "less than" } else { "less than or equal to" };
            out.push(check(path, v.clone(), Code::Other, format!("{} should be {op} {}", in_body(path), bound(max, int.is_some()))));
        }
    }
}

fn array_checks(s: SchemaRef<'_>, items: &[Value], path: &str, out: &mut Vec<Raw>) {
    let n = s.node();
    if let Some(is) = s.items() {
        for (i, x) in items.iter().enumerate() {
            node(is, x, &field::index(path, i), out);
        }
    }
    let size = items.len() as i64;
    if let Some(min) = n.min_items.filter(|m| size < *m) {
        out.push(check(path, Value::from(size), Code::Other, format!("{} should have at least {min} items", in_body(path))));
    }
    if let Some(max) = n.max_items.filter(|m| size > *m) {
        out.push(check(path, Value::from(size), Code::TooMany(size, max), format!("{} should have at most {max} items", in_body(path))));
    }
    if n.unique_items && items.iter().enumerate().any(|(i, x)| items[..i].iter().any(|y| json_eq(x, y))) {
        out.push(check(path, Value::String(String::new()), Code::Other, format!("{} shouldn't contain duplicates", in_body(path))));
    }
}

/// JSON equality with numbers compared by value (`1` equals `1.0`).
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(i), Some(j)) => i == j,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_eq(p, q)),
        (Value::Object(x), Value::Object(y)) => x.len() == y.len() && x.iter().all(|(k, p)| y.get(k).is_some_and(|q| json_eq(p, q))),
        _ => a == b,
    }
}

fn enum_check(s: SchemaRef<'_>, v: &Value, path: &str, out: &mut Vec<Raw>) {
    let Some(values) = s.enumeration().filter(|e| !e.is_empty()) else { return };
    if !v.is_null() && values.iter().any(|e| json_eq(v, e)) {
        return;
    }
    let listed: Vec<String> = values.iter().map(go_json).collect();
    out.push(check(path, v.clone(), Code::Enum(values.to_vec()), format!("{} should be one of [{}]", in_body(path), listed.join(" "))));
}

fn object_checks(s: SchemaRef<'_>, m: &serde_json::Map<String, Value>, path: &str, out: &mut Vec<Raw>) {
    let n = s.node();
    let size = m.len() as i64;
    if let Some(min) = n.min_properties.filter(|x| size < *x) {
        out.push(check(path, Value::from(size), Code::Other, format!("{} should have at least {min} properties", in_body(path))));
    }
    if let Some(max) = n.max_properties.filter(|x| size > *x) {
        out.push(check(path, Value::from(size), Code::TooMany(size, max), format!("{} should have at most {max} properties", in_body(path))));
    }
    match s.additional() {
        Additional::Bool(false) => {
            for k in m.keys().filter(|k| s.property(k).is_none()) {
                out.push(check(path, Value::String(k.clone()), Code::Other, format!("{path}.{k} in body is a forbidden property")));
            }
        }
        Additional::Schema(id) => {
            for (k, x) in m.iter().filter(|(k, _)| s.property(k).is_none()) {
                node(s.at(id), x, &format!("{path}.{k}"), out);
            }
        }
        Additional::Bool(true) | Additional::Unset => {}
    }
    for (k, ps) in s.properties() {
        if let Some(x) = m.get(k) {
            node(ps, x, &field::child(path, k), out);
        }
    }
    for k in s.required() {
        if !m.contains_key(k) {
            out.push(check(&format!("{path}.{k}"), Value::Null, Code::Required, format!("{path}.{k} in body is required")));
        }
    }
}

/// Checks `x-kubernetes-list-type: set` and `map` lists for duplicates,
/// as kube does for custom resources after schema validation
/// (apiextensions `listtype.ValidateListSetsAndMaps`): `spec.ports[1]:
/// Duplicate value: map[string]interface {}{"name":"a"}`. Map values are
/// keyed `spec.labels[key]`.
pub fn validate_lists(schema: SchemaRef<'_>, obj: &Value, prefix: Option<&str>) -> Vec<FieldError> {
    let mut out = Vec::new();
    let root = prefix.unwrap_or("");
    if let Value::Object(m) = obj {
        lists_in_object(schema, m, root, &mut out);
    }
    out
}

fn lists_in_object(s: SchemaRef<'_>, m: &serde_json::Map<String, Value>, path: &str, out: &mut Vec<FieldError>) {
    if let Some(ap) = s.additional_properties() {
        for (k, v) in m {
            lists_in(ap, v, &field::index(path, k), out);
        }
    }
    for (k, v) in m {
        if let Some(ps) = s.property(k) {
            lists_in(ps, v, &field::child(path, k), out);
        }
    }
}

fn lists_in(s: SchemaRef<'_>, v: &Value, path: &str, out: &mut Vec<FieldError>) {
    match v {
        Value::Array(items) => {
            match s.list_type() {
                Some(ListType::Set) => {
                    for i in duplicates(items.to_vec()) {
                        out.push(FieldError::duplicate(field::index(path, i), items[i].clone()));
                    }
                }
                Some(ListType::Map) => list_map(s, items, path, out),
                _ => {}
            }
            if let Some(is) = s.items() {
                for (i, x) in items.iter().enumerate() {
                    lists_in(is, x, &field::index(path, i), out);
                }
            }
        }
        Value::Object(m) => lists_in_object(s, m, path, out),
        _ => {}
    }
}

/// The indexes of the second occurrence of each repeated value.
fn duplicates(values: Vec<Value>) -> Vec<usize> {
    let mut out = Vec::new();
    for (i, x) in values.iter().enumerate() {
        let earlier = values[..i].iter().filter(|y| json_eq(x, y)).count();
        if earlier == 1 {
            out.push(i);
        }
    }
    out
}

fn list_map(s: SchemaRef<'_>, items: &[Value], path: &str, out: &mut Vec<FieldError>) {
    if let Some((i, x)) = items.iter().enumerate().find(|(_, x)| !x.is_null() && !x.is_object()) {
        out.push(FieldError::invalid(field::index(path, i), x.clone(), "must be an object for an array of list-type map"));
        return;
    }
    let keys: Vec<Value> = items
        .iter()
        .map(|x| {
            let mut k = serde_json::Map::new();
            for f in s.list_map_keys() {
                if let Some(v) = x.get(f) {
                    k.insert(f.clone(), v.clone());
                }
            }
            Value::Object(k)
        })
        .collect();
    for i in duplicates(keys.clone()) {
        out.push(FieldError::duplicate(field::index(path, i), keys[i].clone()));
    }
}

/// kube's wording for a name that is not a DNS-1035 label.
const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

/// Checks the type meta of every `x-kubernetes-embedded-resource` below
/// the root (apiextensions `objectmeta.Validate`): `apiVersion` and `kind`
/// present, strings, not empty, a group/version and a DNS-1035 label
/// (any case): `spec.template.kind: Required value: must not be empty`.
/// The embedded `metadata` is not checked here (ObjectMeta's rules live in
/// the registry).
pub fn validate_embedded(schema: SchemaRef<'_>, obj: &Value, prefix: Option<&str>) -> Vec<FieldError> {
    let mut out = Vec::new();
    embedded_in(schema, obj, prefix.unwrap_or(""), false, &mut out);
    out
}

fn embedded_in(s: SchemaRef<'_>, v: &Value, path: &str, check: bool, out: &mut Vec<FieldError>) {
    match v {
        Value::Object(m) => {
            if check && s.embedded_resource() {
                type_meta(m, path, out);
            }
            for (k, x) in m {
                if let Some(ps) = s.property(k) {
                    embedded_in(ps, x, &field::child(path, k), true, out);
                } else if let Some(ap) = s.additional_properties() {
                    embedded_in(ap, x, &field::index(path, k), true, out);
                }
            }
        }
        Value::Array(items) => {
            if let Some(is) = s.items() {
                for (i, x) in items.iter().enumerate() {
                    embedded_in(is, x, &field::index(path, i), true, out);
                }
            }
        }
        _ => {}
    }
}

fn type_meta(m: &serde_json::Map<String, Value>, path: &str, out: &mut Vec<FieldError>) {
    for f in ["apiVersion", "kind"] {
        if !m.contains_key(f) {
            out.push(FieldError::required(field::child(path, f), "must not be empty"));
        }
    }
    if let Some(v) = m.get("apiVersion") {
        let p = field::child(path, "apiVersion");
        match v.as_str() {
            None => out.push(FieldError::invalid(p, v.clone(), "must be a string")),
            Some("") => out.push(FieldError::invalid(p, v.clone(), "must not be empty")),
            Some(av) if av.matches('/').count() > 1 => out.push(FieldError::invalid(p, v.clone(), format!("unexpected GroupVersion string: {av}"))),
            Some(_) => {}
        }
    }
    if let Some(v) = m.get("kind") {
        let p = field::child(path, "kind");
        match v.as_str() {
            None => out.push(FieldError::invalid(p, v.clone(), "must be a string")),
            Some("") => out.push(FieldError::invalid(p, v.clone(), "must not be empty")),
            Some(k) => {
                let lower = k.to_ascii_lowercase();
                let b = lower.as_bytes();
                let label =
                    b.first().is_some_and(u8::is_ascii_lowercase) && b.last().is_some_and(u8::is_ascii_alphanumeric) && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-');
                let mut msgs = Vec::new();
                if lower.len() > 63 {
                    msgs.push("must be no more than 63 characters".to_string());
                }
                if !label {
                    msgs.push(DNS1035_LABEL_MSG.to_string());
                }
                if !msgs.is_empty() {
                    out.push(FieldError::invalid(p, v.clone(), format!("may have mixed case, but should otherwise match: {}", msgs.join(","))));
                }
            }
        }
    }
}
