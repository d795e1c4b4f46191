//! Field errors as apimachinery's `util/validation/field` words them
//! (Kubernetes v1.33): `spec.replicas: Invalid value: -1: <detail>`.
//!
//! An error is a type, a field path, the bad value and a detail.
//! [`FieldError::body`] is the part after the path, which a 422 Status
//! carries as a cause's `message`; [`FieldError::to_cause`] gives that
//! cause, and [`crate::errors::Status::invalid`] builds the Status from
//! causes (`CronTab.stable.example.com "x" is invalid: [cause, cause]`).
//!
//! Values print as Go's `%v`/`%q`/`%#v` print the decoded JSON: integers
//! and floats bare (`1.5`, `1e+06`), strings quoted, `null` as `"null"`,
//! maps and lists in Go syntax (`map[string]interface {}{"a":1}`).

use std::fmt;

use serde_json::Value;

use crate::errors::{go_quote, Cause};

/// `field.ErrorType`: the cause's `reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorType {
    /// `FieldValueNotFound`.
    NotFound,
    /// `FieldValueRequired`.
    Required,
    /// `FieldValueDuplicate`.
    Duplicate,
    /// `FieldValueInvalid`.
    Invalid,
    /// `FieldValueNotSupported`.
    NotSupported,
    /// `FieldValueForbidden`.
    Forbidden,
    /// `FieldValueTooLong`.
    TooLong,
    /// `FieldValueTooMany`.
    TooMany,
    /// `InternalError`.
    Internal,
    /// `FieldValueTypeInvalid` (a value of the wrong JSON type).
    TypeInvalid,
}

impl ErrorType {
    /// The cause type (`FieldValueInvalid`).
    pub fn reason(self) -> &'static str {
        match self {
            ErrorType::NotFound => "FieldValueNotFound",
            ErrorType::Required => "FieldValueRequired",
            ErrorType::Duplicate => "FieldValueDuplicate",
            ErrorType::Invalid => "FieldValueInvalid",
            ErrorType::NotSupported => "FieldValueNotSupported",
            ErrorType::Forbidden => "FieldValueForbidden",
            ErrorType::TooLong => "FieldValueTooLong",
            ErrorType::TooMany => "FieldValueTooMany",
            ErrorType::Internal => "InternalError",
            ErrorType::TypeInvalid => "FieldValueTypeInvalid",
        }
    }

    /// The words a message starts with (`Invalid value`).
    pub fn label(self) -> &'static str {
        match self {
            ErrorType::NotFound => "Not found",
            ErrorType::Required => "Required value",
            ErrorType::Duplicate => "Duplicate value",
            ErrorType::Invalid | ErrorType::TypeInvalid => "Invalid value",
            ErrorType::NotSupported => "Unsupported value",
            ErrorType::Forbidden => "Forbidden",
            ErrorType::TooLong => "Too long",
            ErrorType::TooMany => "Too many",
            ErrorType::Internal => "Internal error",
        }
    }
}

/// The bad value of a field error.
#[derive(Debug, Clone, PartialEq)]
pub enum BadValue {
    /// Not printed (Required, Forbidden, TooLong, Internal always omit it).
    Omit,
    /// A decoded JSON value, printed as Go prints it.
    Json(Value),
    /// Already in Go's syntax (`[]string{"a", "b"}`), printed as is.
    Go(String),
}

/// One field error.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// Its type.
    pub kind: ErrorType,
    /// The field path (`spec.ports[0].name`, `metadata.labels[a]`), or
    /// `<nil>` for errors about no field (kube's nil path).
    pub field: String,
    /// The bad value.
    pub value: BadValue,
    /// What is wrong, after the value.
    pub detail: String,
}

impl FieldError {
    fn new(kind: ErrorType, field: impl Into<String>, value: BadValue, detail: impl Into<String>) -> Self {
        FieldError { kind, field: field.into(), value, detail: detail.into() }
    }

    /// `field.Invalid`.
    pub fn invalid(field: impl Into<String>, value: Value, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Invalid, field, BadValue::Json(value), detail)
    }

    /// `field.TypeInvalid`.
    pub fn type_invalid(field: impl Into<String>, value: Value, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::TypeInvalid, field, BadValue::Json(value), detail)
    }

    /// `field.Required`.
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Required, field, BadValue::Omit, detail)
    }

    /// `field.Forbidden`.
    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Forbidden, field, BadValue::Omit, detail)
    }

    /// `field.Duplicate`.
    pub fn duplicate(field: impl Into<String>, value: Value) -> Self {
        Self::new(ErrorType::Duplicate, field, BadValue::Json(value), "")
    }

    /// `field.NotSupported`: `supported` are quoted in the detail.
    pub fn not_supported(field: impl Into<String>, value: Value, supported: &[String]) -> Self {
        let detail = if supported.is_empty() { String::new() } else { format!("supported values: {}", supported.iter().map(|s| go_quote(s)).collect::<Vec<_>>().join(", ")) };
        Self::new(ErrorType::NotSupported, field, BadValue::Json(value), detail)
    }

    /// `field.TooLong` (v1.33 wording; a negative max has no number).
    pub fn too_long(field: impl Into<String>, max: i64) -> Self {
        let detail = if max >= 0 { format!("may not be more than {max} bytes") } else { "value is too long".into() };
        Self::new(ErrorType::TooLong, field, BadValue::Omit, detail)
    }

    /// `field.TooMany`: `actual` items (or properties) of at most `max`.
    pub fn too_many(field: impl Into<String>, actual: i64, max: i64) -> Self {
        let detail = if max >= 0 { format!("must have at most {max} items") } else { "has too many items".into() };
        let value = if actual >= 0 { BadValue::Json(Value::from(actual)) } else { BadValue::Omit };
        Self::new(ErrorType::TooMany, field, value, detail)
    }

    /// The message without the field (`Invalid value: -1: ...`), a
    /// cause's `message` (`ErrorBody`).
    pub fn body(&self) -> String {
        let mut s = self.kind.label().to_string();
        let omit = matches!(self.kind, ErrorType::Required | ErrorType::Forbidden | ErrorType::TooLong | ErrorType::Internal);
        match (omit, &self.value) {
            (false, BadValue::Json(v)) => {
                s.push_str(": ");
                s.push_str(&go_value(v));
            }
            (false, BadValue::Go(v)) => {
                s.push_str(": ");
                s.push_str(v);
            }
            _ => {}
        }
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }

    /// The Status cause of this error.
    pub fn to_cause(&self) -> Cause {
        Cause { reason: self.kind.reason().into(), message: self.body(), field: self.field.clone() }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

/// The causes of `errors`, in order, for [`crate::errors::Status::invalid`].
pub fn to_causes(errors: &[FieldError]) -> Vec<Cause> {
    errors.iter().map(FieldError::to_cause).collect()
}

/// A field path under construction: `parent.child`, `parent[3]`,
/// `parent[key]` (`field.Path`).
pub(crate) fn child(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_string()
    } else {
        format!("{parent}.{name}")
    }
}

/// `parent[index]`.
pub(crate) fn index(parent: &str, i: impl fmt::Display) -> String {
    format!("{parent}[{i}]")
}

/// A JSON value as `ErrorBody` prints a bad value: numbers and booleans
/// bare, strings and `null` quoted, maps and lists as `%#v`.
pub fn go_value(v: &Value) -> String {
    match v {
        Value::Null => go_quote("null"),
        Value::String(s) => go_quote(s),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => go_number(n),
        Value::Array(_) | Value::Object(_) => go_sharp_v(v),
    }
}

/// Go's `%#v` of a decoded JSON value (`map[string]interface {}{"a":1}`,
/// `[]interface {}{"a", 2}`); map keys sorted, as fmt sorts them.
pub fn go_sharp_v(v: &Value) -> String {
    match v {
        Value::Null => "interface {}(nil)".into(),
        Value::String(s) => go_quote(s),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => go_number(n),
        Value::Array(a) => format!("[]interface {{}}{{{}}}", a.iter().map(go_sharp_v).collect::<Vec<_>>().join(", ")),
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let items: Vec<String> = keys.iter().map(|k| format!("{}:{}", go_quote(k), m.get(*k).map(go_sharp_v).unwrap_or_default())).collect();
            format!("map[string]interface {{}}{{{}}}", items.join(", "))
        }
    }
}

/// A JSON number as Go prints the int64 or float64 it decodes to.
pub fn go_number(n: &serde_json::Number) -> String {
    if let Some(i) = n.as_i64() {
        return i.to_string();
    }
    if let Some(u) = n.as_u64() {
        return u.to_string();
    }
    go_float(n.as_f64().unwrap_or(0.0))
}

/// Go's `%v` of a float64 (`strconv.FormatFloat(f, 'g', -1, 64)`): the
/// shortest digits, in exponent form when the decimal exponent is below
/// -4 or at least 6 (`1e+06`, `123456`).
pub fn go_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf".into() } else { "-Inf".into() };
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0".into() } else { "0".into() };
    }
    // Rust's `{:e}` gives the shortest round-tripping digits: d.ddde±x.
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exp.abs());
    }
    // Plain decimal with the same digits.
    format!("{f}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_print_as_go_prints_them() {
        let cases = [
            (json!(-1), "-1"),
            (json!(1.5), "1.5"),
            (json!(1000000.0), "1e+06"),
            (json!(123456.0), "123456"),
            (json!(0.00001), "1e-05"),
            (json!(0.0001), "0.0001"),
            (json!("a\"b\n"), r#""a\"b\n""#),
            (json!(null), r#""null""#),
            (json!(true), "true"),
            (json!({"b": 1, "a": "x"}), r#"map[string]interface {}{"a":"x", "b":1}"#),
            (json!(["a", 2, null]), r#"[]interface {}{"a", 2, interface {}(nil)}"#),
        ];
        for (v, want) in cases {
            assert_eq!(go_value(&v), want, "{v}");
        }
    }
}
