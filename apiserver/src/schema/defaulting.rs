//! Structural defaulting of custom resources (apiextensions-apiserver
//! `schema/defaulting`): a field missing from an object, or `null` where
//! its schema is not `nullable`, takes the schema's `default`; so do
//! `null` map values (`additionalProperties`) and `null` array items.
//! Defaults apply top-down, so a defaulted object is itself defaulted
//! inside.
//!
//! Example: schema `spec: {type: object, default: {}, properties:
//! {replicas: {type: integer, default: 1}}}` turns `{}` into `{"spec":
//! {"replicas": 1}}`.
//!
//! kube defaults after pruning, and the CRD's defaults were checked to be
//! pruned already ([`crate::schema::validate_crd_schema`]).

use serde_json::Value;

use super::compiled::SchemaRef;

/// Applies the defaults of `s` to `x`, in place.
pub fn apply(s: SchemaRef<'_>, x: &mut Value) {
    let non_nullable_null = |v: &Value, s: SchemaRef<'_>| v.is_null() && !s.nullable();
    match x {
        Value::Object(m) => {
            for (k, ps) in s.properties() {
                let Some(d) = ps.default_value() else { continue };
                match m.get(k) {
                    Some(v) if !non_nullable_null(v, ps) => {}
                    _ => {
                        m.insert(k.to_string(), d.clone());
                    }
                }
            }
            let ap = s.additional_properties();
            for (k, v) in m.iter_mut() {
                if let Some(ps) = s.property(k) {
                    apply(ps, v);
                } else if let Some(ap) = ap {
                    if let (true, Some(d)) = (non_nullable_null(v, ap), ap.default_value()) {
                        *v = d.clone();
                    }
                    apply(ap, v);
                }
            }
        }
        Value::Array(items) => {
            let Some(is) = s.items() else { return };
            for v in items.iter_mut() {
                if let (true, Some(d)) = (non_nullable_null(v, is), is.default_value()) {
                    *v = d.clone();
                }
                apply(is, v);
            }
        }
        _ => {}
    }
}
