//! How a decoded Kubernetes protobuf message becomes the JSON a Go client
//! would have sent for the same object.
//!
//! The generated messages (`k8s-pb`) are proto2: every scalar is an
//! `Option`, and nothing in them says what Go's `encoding/json` does with a
//! field. That depends on the Go field, so each converted field names one of
//! three rules (Go's struct tags in `k8s.io/api`):
//!
//! | rule | Go field | JSON |
//! |---|---|---|
//! | [`Object::omit`] | a value with `omitempty` | left out when unset or empty (`""`, `0`, `false`, `[]`, `{}`, a zero time) |
//! | [`Object::ptr`] | a pointer (`*int32`, `*bool`, `*LabelSelector`, ...) | written whenever set, so `replicas: 0` survives |
//! | [`Object::always`] | a value without `omitempty` | always written; unset is `""`, `0`, `false`, `[]`, or `null` for a message |
//!
//! Go's gogo-protobuf encoder writes every non-pointer field, so for bodies
//! from Go clients "unset" only happens for pointers; the rules matter for
//! the empty values it writes.
//!
//! A few apimachinery types have their own JSON form: `metav1.Time` is an
//! RFC 3339 string, `intstr.IntOrString` a number or a string,
//! `resource.Quantity` its string, and `bytes` base64. Go never omits a
//! struct, so it writes a zero time as `null` and a zero IntOrString as `0`;
//! here both count as empty and `omit` leaves them out, which a Go decoder
//! reads back as the same zero value.

use std::collections::BTreeMap;

use base64::Engine as _;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1::Time;
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Map, Value};

/// A protobuf value with a Kubernetes JSON form.
pub trait ToJson {
    /// The JSON of a value that is present.
    fn to_json(&self) -> Value;

    /// Whether `omit` leaves the value out: Go's `omitempty` for scalars,
    /// lists and maps. Messages are never empty, as Go never omits a
    /// struct, except `Time` and `IntOrString` at their zero (module doc).
    fn is_empty(&self) -> bool {
        false
    }

    /// What an `always` field holds when the message leaves it unset: Go's
    /// zero value for scalars and lists, `null` for a message.
    fn unset() -> Value
    where
        Self: Sized,
    {
        Value::Null
    }
}

/// A JSON object built field by field under the rules in the module doc.
#[derive(Default)]
pub struct Object(Map<String, Value>);

impl Object {
    /// An empty object.
    pub fn new() -> Self {
        Self::default()
    }

    /// A Go value field with `omitempty`: written unless unset or empty.
    pub fn omit(mut self, key: &str, v: &impl ToJson) -> Self {
        if !v.is_empty() {
            self.0.insert(key.into(), v.to_json());
        }
        self
    }

    /// A Go pointer field: written whenever set, even to a zero value.
    pub fn ptr<T: ToJson>(mut self, key: &str, v: &Option<T>) -> Self {
        if let Some(v) = v {
            self.0.insert(key.into(), v.to_json());
        }
        self
    }

    /// A Go value field without `omitempty`: always written.
    pub fn always(mut self, key: &str, v: &impl ToJson) -> Self {
        self.0.insert(key.into(), v.to_json());
        self
    }

    /// A Go struct embedded with `json:",inline"`: its fields join this
    /// object's (`IngressRule` inlines `IngressRuleValue`).
    pub fn inline<T: ToJson>(mut self, v: &Option<T>) -> Self {
        if let Some(Value::Object(m)) = v.as_ref().map(ToJson::to_json) {
            self.0.extend(m);
        }
        self
    }

    /// The finished object.
    pub fn build(self) -> Value {
        Value::Object(self.0)
    }
}

impl<T: ToJson> ToJson for Option<T> {
    fn to_json(&self) -> Value {
        self.as_ref().map_or_else(T::unset, ToJson::to_json)
    }
    fn is_empty(&self) -> bool {
        self.as_ref().is_none_or(ToJson::is_empty)
    }
    fn unset() -> Value {
        T::unset()
    }
}

impl ToJson for String {
    fn to_json(&self) -> Value {
        Value::String(self.clone())
    }
    fn is_empty(&self) -> bool {
        self.is_empty()
    }
    fn unset() -> Value {
        Value::String(String::new())
    }
}

macro_rules! number {
    ($($t:ty),*) => {$(
        impl ToJson for $t {
            fn to_json(&self) -> Value {
                Value::from(*self)
            }
            fn is_empty(&self) -> bool {
                *self == 0
            }
            fn unset() -> Value {
                Value::from(0)
            }
        }
    )*};
}
number!(i32, i64);

impl ToJson for bool {
    fn to_json(&self) -> Value {
        Value::Bool(*self)
    }
    fn is_empty(&self) -> bool {
        !*self
    }
    fn unset() -> Value {
        Value::Bool(false)
    }
}

/// `bytes`: base64, as Go's `encoding/json` writes a `[]byte`.
impl ToJson for Vec<u8> {
    fn to_json(&self) -> Value {
        Value::String(base64::engine::general_purpose::STANDARD.encode(self))
    }
    fn is_empty(&self) -> bool {
        self.is_empty()
    }
    fn unset() -> Value {
        Value::Null
    }
}

impl<T: ToJson> ToJson for Vec<T> {
    fn to_json(&self) -> Value {
        Value::Array(self.iter().map(ToJson::to_json).collect())
    }
    fn is_empty(&self) -> bool {
        self.is_empty()
    }
    fn unset() -> Value {
        Value::Array(Vec::new())
    }
}

impl<T: ToJson> ToJson for BTreeMap<String, T> {
    fn to_json(&self) -> Value {
        Value::Object(self.iter().map(|(k, v)| (k.clone(), v.to_json())).collect())
    }
    fn is_empty(&self) -> bool {
        self.is_empty()
    }
    fn unset() -> Value {
        Value::Object(Map::new())
    }
}

/// `metav1.Time`: RFC 3339 in whole seconds (the JSON form drops nanos).
/// Go's zero time is empty; a time before the epoch is written as the epoch.
impl ToJson for Time {
    fn to_json(&self) -> Value {
        let secs = u64::try_from(self.seconds.unwrap_or(0)).unwrap_or(0);
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
        Value::String(humantime::format_rfc3339_seconds(t).to_string())
    }
    fn is_empty(&self) -> bool {
        self.seconds.unwrap_or(0) == 0 && self.nanos.unwrap_or(0) == 0
    }
}

/// `intstr.IntOrString`: type 1 is the string, anything else the int. The
/// int zero is empty.
impl ToJson for IntOrString {
    fn to_json(&self) -> Value {
        if self.r#type == Some(1) {
            self.str_val.to_json()
        } else {
            Value::from(self.int_val.unwrap_or(0))
        }
    }
    fn is_empty(&self) -> bool {
        self.r#type.unwrap_or(0) == 0 && self.int_val.unwrap_or(0) == 0
    }
}

/// `resource.Quantity`: its canonical string, as the client wrote it.
impl ToJson for Quantity {
    fn to_json(&self) -> Value {
        self.string.to_json()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn time(seconds: Option<i64>, nanos: Option<i32>) -> Time {
        Time { seconds, nanos }
    }

    fn ios(r#type: Option<i64>, int_val: Option<i32>, str_val: Option<&str>) -> IntOrString {
        IntOrString { r#type, int_val, str_val: str_val.map(str::to_string) }
    }

    /// A value's JSON and whether `omitempty` drops it.
    fn probe(v: &impl ToJson) -> (Value, bool) {
        (v.to_json(), v.is_empty())
    }

    #[test]
    fn special_values() {
        let cases: &[(&str, (Value, bool), Value, bool)] = &[
            ("time", probe(&time(Some(1_700_000_000), Some(5))), json!("2023-11-14T22:13:20Z"), false),
            ("time of nanos only", probe(&time(None, Some(5))), json!("1970-01-01T00:00:00Z"), false),
            ("time before the epoch", probe(&time(Some(-5), None)), json!("1970-01-01T00:00:00Z"), false),
            ("zero time", probe(&time(Some(0), Some(0))), json!("1970-01-01T00:00:00Z"), true),
            ("unset time", probe(&time(None, None)), json!("1970-01-01T00:00:00Z"), true),
            ("int", probe(&ios(Some(0), Some(8080), None)), json!(8080), false),
            ("string", probe(&ios(Some(1), None, Some("25%"))), json!("25%"), false),
            ("unset string", probe(&ios(Some(1), None, None)), json!(""), false),
            ("int zero", probe(&ios(Some(0), Some(0), Some("x"))), json!(0), true),
            ("unset type and int", probe(&ios(None, None, None)), json!(0), true),
            ("unknown type", probe(&ios(Some(2), None, Some("x"))), json!(0), false),
            ("quantity", probe(&Quantity { string: Some("500m".into()) }), json!("500m"), false),
            ("unset quantity", probe(&Quantity { string: None }), json!(""), false),
            ("bytes", probe(&vec![0u8, 1, 255]), json!("AAH/"), false),
            ("no bytes", probe(&Vec::<u8>::new()), json!(""), true),
        ];
        for (name, (got, empty), want, want_empty) in cases {
            assert_eq!((got, empty), (want, want_empty), "{name}");
        }
    }

    #[test]
    fn field_rules() {
        // (rule, value, expected object): the same values under the three rules.
        type Case = (&'static str, fn(Object) -> Object, Value);
        let cases: &[Case] = &[
            ("omit unset string", |o| o.omit("f", &None::<String>), json!({})),
            ("omit empty string", |o| o.omit("f", &Some(String::new())), json!({})),
            ("omit string", |o| o.omit("f", &Some("a".to_string())), json!({"f": "a"})),
            ("omit zero int", |o| o.omit("f", &Some(0i32)), json!({})),
            ("omit false", |o| o.omit("f", &Some(false)), json!({})),
            ("omit true", |o| o.omit("f", &Some(true)), json!({"f": true})),
            ("omit empty list", |o| o.omit("f", &Vec::<String>::new()), json!({})),
            ("omit empty map", |o| o.omit("f", &BTreeMap::<String, String>::new()), json!({})),
            ("omit zero time", |o| o.omit("f", &Some(time(Some(0), None))), json!({})),
            ("omit zero int-or-string", |o| o.omit("f", &Some(ios(Some(0), Some(0), None))), json!({})),
            ("omit int-or-string", |o| o.omit("f", &Some(ios(Some(0), Some(80), None))), json!({"f": 80})),
            ("ptr unset", |o| o.ptr("f", &None::<i32>), json!({})),
            ("ptr zero", |o| o.ptr("f", &Some(0i32)), json!({"f": 0})),
            ("ptr false", |o| o.ptr("f", &Some(false)), json!({"f": false})),
            ("ptr empty string", |o| o.ptr("f", &Some(String::new())), json!({"f": ""})),
            ("ptr zero int-or-string", |o| o.ptr("f", &Some(ios(Some(0), Some(0), None))), json!({"f": 0})),
            ("always unset string", |o| o.always("f", &None::<String>), json!({"f": ""})),
            ("always unset int", |o| o.always("f", &None::<i32>), json!({"f": 0})),
            ("always unset bool", |o| o.always("f", &None::<bool>), json!({"f": false})),
            ("always empty list", |o| o.always("f", &Vec::<String>::new()), json!({"f": []})),
            ("always unset message", |o| o.always("f", &None::<Quantity>), json!({"f": null})),
            ("always zero int", |o| o.always("f", &Some(0i64)), json!({"f": 0})),
            ("bytes map", |o| o.omit("f", &BTreeMap::from([("k".to_string(), vec![1u8])])), json!({"f": {"k": "AQ=="}})),
            ("quantity map", |o| o.omit("f", &BTreeMap::from([("cpu".to_string(), Quantity { string: Some("1".into()) })])), json!({"f": {"cpu": "1"}})),
        ];
        for (name, build, want) in cases {
            assert_eq!(&build(Object::new()).build(), want, "{name}");
        }
    }

    #[test]
    fn inline_merges_fields() {
        struct Inner;
        impl ToJson for Inner {
            fn to_json(&self) -> Value {
                json!({"http": {"paths": []}})
            }
        }
        let o = Object::new().omit("host", &Some("h".to_string())).inline(&Some(Inner)).build();
        assert_eq!(o, json!({"host": "h", "http": {"paths": []}}));
        assert_eq!(Object::new().inline(&None::<Inner>).build(), json!({}));
    }
}
