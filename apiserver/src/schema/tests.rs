//! Table-driven tests of the schema layer. Expected messages are
//! kube-apiserver v1.33's, as its documentation, its own tests and users'
//! reports print them (`spec.replicas: Invalid value: -1: spec.replicas in
//! body should be greater than or equal to 0`).

#![allow(clippy::unwrap_used)]

use serde_json::{json, Value};

use super::*;

/// A CronTab schema exercising every check.
fn crontab() -> Value {
    json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["image"],
                "properties": {
                    "replicas": {"type": "integer", "minimum": 0, "maximum": 10},
                    "image": {"type": "string", "minLength": 1, "maxLength": 5, "pattern": "^[a-z]+$"},
                    "mode": {"type": "string", "enum": ["a", "b"]},
                    "ratio": {"type": "number", "minimum": 0, "exclusiveMinimum": true, "maximum": 1, "exclusiveMaximum": true},
                    "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}, "minProperties": 1, "maxProperties": 1},
                    "id": {"type": "string", "format": "uuid"},
                    "at": {"type": "string", "format": "date-time"},
                    "port": {"x-kubernetes-int-or-string": true},
                    "note": {"type": "string", "nullable": true},
                    "count": {"type": "integer", "multipleOf": 5},
                    "level": {"type": "integer", "enum": [1, 2]},
                    "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                              "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "protocol": {"type": "string", "default": "TCP"}}}},
                    "set": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                    "anything": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "template": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true},
                    "closed": {"type": "object", "additionalProperties": false}
                }
            },
            "status": {"type": "object", "properties": {"num": {"type": "integer", "maximum": 10}}}
        }
    })
}

fn crontab_schema() -> Schema {
    compile_crd("stable.example.com", "v1", "CronTab", &crontab())
}

fn rendered(errs: &[FieldError]) -> Vec<String> {
    errs.iter().map(ToString::to_string).collect()
}

#[test]
fn custom_resource_validation() {
    let s = crontab_schema();
    let cases: Vec<(Value, Vec<&str>)> = vec![
        (json!({"image": "nginx", "replicas": 3}), vec![]),
        (json!({"image": "nginx", "replicas": -1}), vec!["spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0"]),
        (json!({"image": "nginx", "replicas": 11}), vec!["spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10"]),
        (json!({"image": "nginx", "replicas": "3"}), vec![r#"spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#]),
        (json!({"image": "nginx", "replicas": 1.5}), vec![r#"spec.replicas: Invalid value: "number": spec.replicas in body must be of type integer: "number""#]),
        // An integral float is an integer.
        (json!({"image": "nginx", "replicas": 2.0}), vec![]),
        (json!({}), vec!["spec.image: Required value"]),
        (json!({"image": "abcdef"}), vec!["spec.image: Too long: may not be more than 5 bytes"]),
        (json!({"image": ""}), vec![r#"spec.image: Invalid value: "": spec.image in body should be at least 1 chars long"#]),
        (json!({"image": "AB"}), vec![r#"spec.image: Invalid value: "AB": spec.image in body should match '^[a-z]+$'"#]),
        (json!({"image": "x", "mode": "c"}), vec![r#"spec.mode: Unsupported value: "c": supported values: "a", "b""#]),
        (json!({"image": "x", "level": 3}), vec![r#"spec.level: Unsupported value: 3: supported values: "1", "2""#]),
        // A type error does not stop the enum check; null is checked for both.
        (
            json!({"image": "x", "mode": null}),
            vec![r#"spec.mode: Invalid value: "null": spec.mode in body must be of type string: "null""#, r#"spec.mode: Unsupported value: "null": supported values: "a", "b""#],
        ),
        (
            json!({"image": "x", "mode": true}),
            vec![r#"spec.mode: Invalid value: "boolean": spec.mode in body must be of type string: "boolean""#, r#"spec.mode: Unsupported value: true: supported values: "a", "b""#],
        ),
        (json!({"image": "x", "ratio": 0}), vec!["spec.ratio: Invalid value: 0: spec.ratio in body should be greater than 0"]),
        (json!({"image": "x", "ratio": 1.0}), vec!["spec.ratio: Invalid value: 1: spec.ratio in body should be less than 1"]),
        (json!({"image": "x", "ratio": 0.5}), vec![]),
        (json!({"image": "x", "tags": []}), vec!["spec.tags: Invalid value: 0: spec.tags in body should have at least 1 items"]),
        (json!({"image": "x", "tags": ["a", "b", "c"]}), vec!["spec.tags: Too many: 3: must have at most 2 items"]),
        (json!({"image": "x", "tags": [1]}), vec![r#"spec.tags[0]: Invalid value: "integer": spec.tags[0] in body must be of type string: "integer""#]),
        (json!({"image": "x", "labels": {}}), vec!["spec.labels: Invalid value: 0: spec.labels in body should have at least 1 properties"]),
        (json!({"image": "x", "labels": {"a": "x", "b": "y"}}), vec!["spec.labels: Too many: 2: must have at most 1 items"]),
        (json!({"image": "x", "labels": {"a": 1}}), vec![r#"spec.labels.a: Invalid value: "integer": spec.labels.a in body must be of type string: "integer""#]),
        (json!({"image": "x", "id": "nope"}), vec![r#"spec.id: Invalid value: "nope": spec.id in body must be of type uuid: "nope""#]),
        (json!({"image": "x", "id": "123e4567-e89b-12d3-a456-426614174000", "at": "2024-01-02T03:04:05Z"}), vec![]),
        (json!({"image": "x", "at": "soon"}), vec![r#"spec.at: Invalid value: "soon": spec.at in body must be of type date-time: "soon""#]),
        (json!({"image": "x", "port": true}), vec![r#"spec.port: Invalid value: "boolean": spec.port in body must be of type integer,string: "boolean""#]),
        (json!({"image": "x", "port": 80}), vec![]),
        (json!({"image": "x", "port": "http"}), vec![]),
        (json!({"image": "x", "note": null}), vec![]),
        (json!({"image": "x", "count": 7}), vec!["spec.count: Invalid value: 7: spec.count in body should be a multiple of 5"]),
        (json!({"image": "x", "ports": [{"name": "a"}, {"name": "a"}]}), vec![r#"spec.ports[1]: Duplicate value: map[string]interface {}{"name":"a"}"#]),
        (json!({"image": "x", "ports": [{"protocol": "TCP"}]}), vec!["spec.ports[0].name: Required value"]),
        (json!({"image": "x", "set": ["x", "y", "x"]}), vec![r#"spec.set[2]: Duplicate value: "x""#]),
        (json!({"image": "x", "closed": {"k": 1}}), vec![r#"spec.closed: Invalid value: "k": spec.closed.k in body is a forbidden property"#]),
        (json!({"image": "x", "anything": {"free": ["form"]}}), vec![]),
        (json!({"image": "x", "template": {"kind": "Pod", "metadata": {"name": "p"}}}), vec!["spec.template.apiVersion: Required value: must not be empty"]),
        (
            json!({"image": "x", "template": {"apiVersion": "a/b/c", "kind": "Not_A_Kind"}}),
            vec![
                r#"spec.template.apiVersion: Invalid value: "a/b/c": unexpected GroupVersion string: a/b/c"#,
                r#"spec.template.kind: Invalid value: "Not_A_Kind": may have mixed case, but should otherwise match: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"#,
            ],
        ),
        (json!("x"), vec![r#"spec: Invalid value: "string": spec in body must be of type object: "string""#]),
    ];
    assert!(cases.len() >= 30);
    for (spec, want) in cases {
        let obj = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": "x"}, "spec": spec});
        assert_eq!(rendered(&s.validate(&obj)), want, "{spec}");
    }
}

#[test]
fn invalid_status_lists_causes_as_kube_does() {
    let s = crontab_schema();
    let obj = json!({"spec": {"image": "x", "replicas": -1, "mode": "c"}});
    let errs = s.validate(&obj);
    let st = crate::errors::Status::invalid("stable.example.com", "CronTab", "x", field::to_causes(&errs));
    assert_eq!(st.code, 422);
    assert_eq!(
        st.message,
        r#"CronTab.stable.example.com "x" is invalid: [spec.mode: Unsupported value: "c": supported values: "a", "b", spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0]"#
    );
    let causes = st.details.map(|d| d.causes).unwrap_or_default();
    assert_eq!(causes[0].reason, "FieldValueNotSupported");
    assert_eq!(causes[1].reason, "FieldValueInvalid");
    assert_eq!(causes[1].field, "spec.replicas");
    assert_eq!(causes[1].message, "Invalid value: -1: spec.replicas in body should be greater than or equal to 0");
    let type_err = s.validate(&json!({"spec": {"image": "x", "replicas": "1"}}));
    assert_eq!(type_err[0].to_cause().reason, "FieldValueTypeInvalid");
    // The status subresource: names relative to status, fields under it.
    assert_eq!(rendered(&s.validate_status(&json!({"num": 15}))), ["status.num: Invalid value: 15: num in body should be less than or equal to 10"]);
}

#[test]
fn value_validations_under_junctors() {
    let cases = [
        (
            json!({"type": "object", "properties": {"field": {"nullable": true, "x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]}}}),
            json!({"field": true}),
            vec![
                r#"field: Invalid value: "boolean": field in body must be of type integer,string: "boolean""#,
                r#"<nil>: Invalid value: "": "field" must validate at least one schema (anyOf)"#,
                r#"field: Invalid value: "boolean": field in body must be of type integer: "boolean""#,
            ],
        ),
        (
            json!({"type": "object", "properties": {"field": {"type": "object", "required": ["nested"], "properties": {"nested": {}}}}, "required": ["field"]}),
            json!({"field": {}}),
            vec!["field.nested: Required value"],
        ),
        (json!({"type": "object", "properties": {"field": {"type": "object"}}}), json!({"field": null}), vec![r#"field: Invalid value: "null": field in body must be of type object: "null""#]),
        (json!({"type": "object", "properties": {"field": {"type": "object", "nullable": true}}}), json!({"field": null}), vec![]),
        (
            json!({"type": "object", "properties": {"n": {"type": "integer", "oneOf": [{"minimum": 0}, {"maximum": 10}]}}}),
            json!({"n": 5}),
            vec![r#"<nil>: Invalid value: "": "n" must validate one and only one schema (oneOf). Found 2 valid alternatives"#],
        ),
        (json!({"type": "object", "properties": {"n": {"type": "integer", "not": {"minimum": 3}}}}), json!({"n": 5}), vec![r#"<nil>: Invalid value: "": "n" must not validate the schema (not)"#]),
    ];
    for (schema, obj, want) in cases {
        let s = compile_crd("g.example.com", "v1", "K", &schema);
        assert_eq!(rendered(&s.validate(&obj)), want, "{schema} {obj}");
    }
}

const P: &str = "spec.versions[0].schema.openAPIV3Schema";

#[test]
fn crd_schema_checks() {
    let list_map = |item: Value| json!({"type": "object", "properties": {"l": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"], "items": item}}});
    let cases: Vec<(Value, bool, Vec<String>)> = vec![
        (crontab(), true, vec![]),
        (json!({"properties": {}}), false, vec![format!("{P}.type: Required value: must not be empty at the root")]),
        (json!({"type": "string"}), false, vec![format!(r#"{P}.type: Invalid value: "string": must be object at the root"#)]),
        (json!({"type": "object", "properties": {"spec": {"properties": {}}}}), false, vec![format!("{P}.properties[spec].type: Required value: must not be empty for specified object fields")]),
        (json!({"type": "object", "properties": {"a": {"type": "array"}}}), false, vec![format!("{P}.properties[a].items: Required value: must be specified")]),
        (
            json!({"type": "object", "properties": {"a": {"type": "array", "items": {}}}}),
            false,
            vec![format!("{P}.properties[a].items.type: Required value: must not be empty for specified array items")],
        ),
        (json!({"type": "object", "additionalProperties": {"type": "string"}}), false, vec![format!("{P}.additionalProperties: Forbidden: must not be used at the root")]),
        (
            json!({"type": "object", "properties": {"a": {"type": "string", "anyOf": [{"type": "string"}]}}}),
            false,
            vec![format!("{P}.properties[a].anyOf[0].type: Forbidden: must be empty to be structural")],
        ),
        (json!({"type": "object", "properties": {"a": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]}}}), false, vec![]),
        (json!({"type": "object", "properties": {"a": {"x-kubernetes-int-or-string": true, "allOf": [{"anyOf": [{"type": "integer"}, {"type": "string"}]}, {"pattern": "^a"}]}}}), false, vec![]),
        (
            json!({"type": "object", "properties": {"a": {"type": "string", "allOf": [{"description": "d", "x-kubernetes-list-type": "set"}]}}}),
            false,
            vec![
                format!("{P}.properties[a].allOf[0].description: Forbidden: must be empty to be structural"),
                format!("{P}.properties[a].allOf[0].x-kubernetes-list-type: Forbidden: must be undefined to be structural"),
                format!("{P}.properties[a].allOf[0].type: Required value: must be array if x-kubernetes-list-type is specified"),
            ],
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "anyOf": [{"properties": {"b": {}}}]}),
            false,
            vec![format!("{P}.properties[b]: Required value: because it is defined in {P}.anyOf[0].properties[b]")],
        ),
        (
            json!({"type": "object", "properties": {"metadata": {"type": "object", "properties": {"labels": {"type": "object"}}}}}),
            false,
            vec![format!("{P}.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified")],
        ),
        (json!({"type": "object", "properties": {"metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10}}}}}), false, vec![]),
        (
            json!({"type": "object", "properties": {"metadata": {"type": "object"}}, "allOf": [{"properties": {"metadata": {}}}]}),
            false,
            vec![format!("{P}.allOf[0].properties[metadata]: Forbidden: must not be specified in a nested context")],
        ),
        (
            json!({"type": "object", "properties": {"t": {"x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}}}),
            false,
            vec![format!("{P}.properties[t].type: Required value: must be object if x-kubernetes-embedded-resource is true")],
        ),
        (
            json!({"type": "object", "properties": {"t": {"type": "object", "x-kubernetes-embedded-resource": true}}}),
            false,
            vec![format!("{P}.properties[t].properties: Required value: must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields")],
        ),
        (
            json!({"type": "object", "properties": {"a": {"x-kubernetes-int-or-string": true, "x-kubernetes-preserve-unknown-fields": true}}}),
            false,
            vec![format!("{P}.properties[a].x-kubernetes-preserve-unknown-fields: Invalid value: true: must be false if x-kubernetes-int-or-string is true")],
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "map[string]string"}}}),
            false,
            vec![format!(r#"{P}.properties[a].type: Unsupported value: "map[string]string": supported values: "array", "boolean", "integer", "number", "object", "string""#)],
        ),
        (
            json!({"type": "object", "properties": {"a": {"$ref": "#/definitions/x"}}}),
            false,
            vec![format!("{P}.properties[a].type: Required value: must not be empty for specified object fields"), format!("{P}.properties[a].$ref: Forbidden: $ref is not supported")],
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "null"}}}),
            false,
            vec![
                format!(r#"{P}.properties[a].type: Unsupported value: "null": supported values: "array", "boolean", "integer", "number", "object", "string""#),
                format!("{P}.properties[a].type: Forbidden: type cannot be set to null, use nullable as an alternative"),
            ],
        ),
        (
            json!({"type": "object", "properties": {"r": {"type": "integer", "minimum": 0, "default": -1}}}),
            false,
            vec![format!("{P}.properties[r].default: Invalid value: -1:  in body should be greater than or equal to 0")],
        ),
        (
            json!({"type": "object", "properties": {"o": {"type": "object", "properties": {"a": {"type": "string"}}, "default": {"a": "x", "b": "y"}}}}),
            false,
            vec![format!(r#"{P}.properties[o].default: Invalid value: map[string]interface {{}}{{"a":"x", "b":"y"}}: must not have unknown fields"#)],
        ),
        (
            json!({"type": "object", "properties": {"metadata": {"type": "object", "default": {}}}}),
            false,
            vec![format!("{P}.properties[metadata].default: Forbidden: must not be set in top-level metadata")],
        ),
        (
            json!({"type": "object", "properties": {"l": {"type": "array", "x-kubernetes-list-type": "map", "items": {"type": "object", "properties": {"k": {"type": "string"}}}}}}),
            false,
            vec![format!("{P}.properties[l].x-kubernetes-list-map-keys: Required value: must not be empty if x-kubernetes-list-type is map")],
        ),
        (
            list_map(json!({"type": "object", "properties": {"k": {"type": "string"}}})),
            false,
            vec![format!("{P}.properties[l].items.properties[k].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property")],
        ),
        (list_map(json!({"type": "object", "required": ["k"], "properties": {"k": {"type": "string"}}})), false, vec![]),
        (
            list_map(json!({"type": "object", "required": ["j"], "properties": {"j": {"type": "string"}}})),
            false,
            vec![format!(r#"{P}.properties[l].x-kubernetes-list-map-keys: Invalid value: []string{{"k"}}: entries must all be names of item properties"#)],
        ),
        (
            json!({"type": "object", "properties": {"s": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "object", "properties": {"a": {"type": "string"}}}}}}),
            false,
            vec![format!(r#"{P}.properties[s].items.x-kubernetes-map-type: Invalid value: "null": must be atomic as item of a list with x-kubernetes-list-type=set"#)],
        ),
        (
            json!({"type": "object", "properties": {"s": {"type": "array", "x-kubernetes-list-type": "bag", "items": {"type": "string"}}}}),
            false,
            vec![format!(r#"{P}.properties[s].x-kubernetes-list-type: Unsupported value: "bag": supported values: "atomic", "set", "map""#)],
        ),
        (
            json!({"type": "object", "properties": {"m": {"type": "string", "x-kubernetes-map-type": "atomic"}}}),
            false,
            vec![format!(r#"{P}.properties[m].type: Invalid value: "string": must be object if x-kubernetes-map-type is specified"#)],
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "array", "uniqueItems": true, "items": {"type": "string"}}}}),
            false,
            vec![format!("{P}.properties[a].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic")],
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "object", "x-kubernetes-preserve-unknown-fields": false}}}),
            false,
            vec![format!("{P}.properties[a].x-kubernetes-preserve-unknown-fields: Invalid value: false: must be true or undefined")],
        ),
        (
            json!({"type": "object", "properties": {"o": {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}}}}),
            false,
            vec![format!("{P}.properties[o].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive")],
        ),
        (json!({"type": "object", "nullable": true}), false, vec![format!("{P}.nullable: Forbidden: nullable cannot be true at the root")]),
        (
            json!({"type": "array", "items": {"type": "string"}}),
            true,
            vec![
                format!(r#"{P}.type: Invalid value: "array": only "object" is allowed as the type at the root of the schema if the status subresource is enabled"#),
                format!(r#"{P}.type: Invalid value: "array": must be object at the root"#),
            ],
        ),
        (
            json!({"type": "object", "properties": {"v": {"type": "string", "x-kubernetes-validations": [{"rule": " "}]}}}),
            false,
            vec![format!("{P}.properties[v].x-kubernetes-validations[0].rule: Required value: rule is not specified")],
        ),
    ];
    assert!(cases.len() >= 30);
    for (schema, status, want) in cases {
        assert_eq!(rendered(&validate_crd_schema(P, &schema, status)), want, "{schema}");
    }
    // Go's regexp words its errors differently; the frame is kube's.
    let bad = rendered(&validate_crd_schema(P, &json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "+"}}}), false));
    assert_eq!(bad.len(), 1);
    assert!(bad[0].starts_with(&format!(r#"{P}.properties[a].pattern: Invalid value: "+": must be a valid regular expression, but isn't: "#)), "{bad:?}");
}

#[test]
fn pruning() {
    let s = crontab_schema();
    let cases = [
        (
            json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": "x", "bogus": 1}, "spec": {"image": "x", "extra": 2}, "other": 3}),
            json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": "x"}, "spec": {"image": "x"}}),
            vec!["metadata.bogus", "other", "spec.extra"],
        ),
        (json!({"spec": {"anything": {"x": {"y": 1}}}}), json!({"spec": {"anything": {"x": {"y": 1}}}}), vec![]),
        (
            json!({"spec": {"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "junk": 1}, "spec": {"any": 1}}}}),
            json!({"spec": {"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"any": 1}}}}),
            vec!["spec.template.metadata.junk"],
        ),
        (json!({"spec": {"ports": [{"name": "a", "x": 1}]}}), json!({"spec": {"ports": [{"name": "a"}]}}), vec!["spec.ports[0].x"]),
        // Nulls their schema neither allows nor defaults go; nullable ones stay.
        (json!({"spec": {"replicas": null, "note": null}}), json!({"spec": {"note": null}}), vec![]),
        (json!({"spec": {"labels": {"a": "x"}}, "status": {"num": 1, "gone": true}}), json!({"spec": {"labels": {"a": "x"}}, "status": {"num": 1}}), vec!["status.gone"]),
    ];
    for (mut obj, want, unknown) in cases {
        let got = s.prune(&mut obj);
        assert_eq!(obj, want);
        assert_eq!(got, unknown);
    }
}

#[test]
fn defaulting() {
    let cases = [
        (
            json!({"type": "object", "properties": {"spec": {"type": "object", "default": {}, "properties": {"replicas": {"type": "integer", "default": 1}}}}}),
            json!({}),
            json!({"spec": {"replicas": 1}}),
        ),
        (
            json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"replicas": {"type": "integer", "default": 1}}}}}),
            json!({"spec": {"replicas": 3}}),
            json!({"spec": {"replicas": 3}}),
        ),
        (
            json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"replicas": {"type": "integer", "default": 1}}}}}),
            json!({"spec": {"replicas": null}}),
            json!({"spec": {"replicas": 1}}),
        ),
        (
            json!({"type": "object", "properties": {"l": {"type": "array", "items": {"type": "object", "properties": {"p": {"type": "string", "default": "TCP"}}}}}}),
            json!({"l": [{}, {"p": "UDP"}]}),
            json!({"l": [{"p": "TCP"}, {"p": "UDP"}]}),
        ),
        (
            json!({"type": "object", "properties": {"m": {"type": "object", "additionalProperties": {"type": "object", "properties": {"x": {"type": "integer", "default": 0}}}}}}),
            json!({"m": {"a": {}}}),
            json!({"m": {"a": {"x": 0}}}),
        ),
        (json!({"type": "object", "properties": {"n": {"type": "string", "nullable": true, "default": "d"}}}), json!({"n": null}), json!({"n": null})),
    ];
    for (schema, mut obj, want) in cases {
        compile_crd("g.example.com", "v1", "K", &schema).apply_defaults(&mut obj);
        assert_eq!(obj, want, "{schema}");
    }
    // Prune, then default, then validate: kube's order on a write.
    let s = crontab_schema();
    let mut obj = json!({"spec": {"image": "x", "ports": [{"name": "a", "junk": 1}]}});
    assert_eq!(s.prune(&mut obj), ["spec.ports[0].junk"]);
    s.apply_defaults(&mut obj);
    assert_eq!(obj["spec"]["ports"], json!([{"name": "a", "protocol": "TCP"}]));
    assert!(s.validate(&obj).is_empty());
}

#[test]
fn store_serves_builtins_and_crds() {
    let store = SchemaStore::builtin();
    let pod = store.of_kind("", "v1", "Pod").unwrap();
    assert_eq!(pod.origin(), Origin::Builtin);
    let spec = pod.root().property("spec").unwrap();
    let containers = spec.property("containers").unwrap();
    assert_eq!(containers.patch_strategy(), Some("merge"));
    assert_eq!(containers.patch_merge_key(), Some("name"));
    assert_eq!(containers.items().and_then(|i| i.definition_name()), Some("io.k8s.api.core.v1.Container"));
    let ports = containers.items().and_then(|i| i.property("ports")).unwrap();
    assert_eq!(ports.list_type(), Some(ListType::Map));
    assert_eq!(ports.list_map_keys(), ["containerPort", "protocol"]);
    let dep = store.of_kind("apps", "v1", "Deployment").unwrap();
    let strategy = dep.root().property("spec").and_then(|s| s.property("strategy")).unwrap();
    assert_eq!(strategy.patch_strategy(), Some("retainKeys"));
    assert_eq!(strategy.definition_name(), Some("io.k8s.api.apps.v1.DeploymentStrategy"));
    let selector = dep.root().property("spec").and_then(|s| s.property("selector")).unwrap();
    assert_eq!(selector.map_type(), Some(MapType::Atomic));
    let ios = strategy.property("rollingUpdate").and_then(|r| r.property("maxSurge")).unwrap();
    assert!(ios.int_or_string());
    assert!(store.of_kind("stable.example.com", "v1", "CronTab").is_none());

    let other = store.clone();
    store.set_crd("stable.example.com", "v1", "CronTab", &crontab());
    let ct = other.of_kind("stable.example.com", "v1", "CronTab").unwrap();
    assert_eq!(ct.origin(), Origin::Custom);
    assert_eq!(ct.root().property("spec").and_then(|s| s.property("replicas")).and_then(|r| r.ty()), Some(Type::Integer));
    assert_eq!(other.load().custom_kinds().count(), 1);
    store.remove("stable.example.com", "v1", "CronTab");
    assert!(other.of_kind("stable.example.com", "v1", "CronTab").is_none());
    assert!(other.of_kind("", "v1", "ConfigMap").is_some());
}
