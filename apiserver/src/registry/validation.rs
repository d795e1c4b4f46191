//! Validation shared by all types (apimachinery `validation`,
//! `ValidateObjectMeta`).

use serde_json::Value;

use crate::errors::{go_printable, Cause};

/// How a name is validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// RFC 1123 subdomain (most types).
    Subdomain,
    /// RFC 1123 label (namespaces).
    Label,
    /// RFC 1035 label (services).
    Dns1035,
    /// Any path segment: not `.` or `..`, no `/` or `%` (RBAC, whose names
    /// carry `:` as in `system:masters`).
    PathSegment,
}

const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

fn is_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty() && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-') && b[0] != b'-' && b[b.len() - 1] != b'-'
}

/// Errors of a name under `rule`, as kube's `IsDNS1123Subdomain` & co.
pub fn name_errors(name: &str, rule: NameRule) -> Vec<String> {
    let mut errs = Vec::new();
    match rule {
        NameRule::Subdomain => {
            if name.len() > 253 {
                errs.push("must be no more than 253 characters".to_string());
            }
            if !name.split('.').all(is_label) {
                errs.push(DNS1123_SUBDOMAIN_MSG.to_string());
            }
        }
        NameRule::Label => {
            if name.len() > 63 {
                errs.push("must be no more than 63 characters".to_string());
            }
            if !is_label(name) {
                errs.push(DNS1123_LABEL_MSG.to_string());
            }
        }
        NameRule::PathSegment => {
            for bad in [".", ".."] {
                if name == bad {
                    errs.push(format!("may not be '{bad}'"));
                }
            }
            for bad in ["/", "%"] {
                if name.contains(bad) {
                    errs.push(format!("may not contain '{bad}'"));
                }
            }
        }
        NameRule::Dns1035 => {
            if name.len() > 63 {
                errs.push("must be no more than 63 characters".to_string());
            }
            if !is_label(name) || !name.as_bytes()[0].is_ascii_lowercase() {
                errs.push(DNS1035_LABEL_MSG.to_string());
            }
        }
    }
    errs
}

/// `ValidateObjectMeta`: name (required, valid), namespace, label keys and
/// values, annotation keys and their total size.
pub fn object_meta(obj: &Value, rule: NameRule, namespaced: bool) -> Vec<Cause> {
    let mut causes = Vec::new();
    let meta = &obj["metadata"];
    let name = meta["name"].as_str().unwrap_or("");
    if let Some(prefix) = meta["generateName"].as_str().filter(|g| !g.is_empty()) {
        // Kube checks the prefix with a trailing dash masked
        // (`maskTrailingDash`), then the generated name too.
        let masked = match prefix.strip_suffix('-') {
            Some(rest) if !rest.is_empty() => format!("{rest}a"),
            _ => prefix.to_string(),
        };
        for e in name_errors(&masked, rule) {
            causes.push(Cause::invalid("metadata.generateName", &Value::String(prefix.into()), &e));
        }
    }
    if name.is_empty() {
        causes.push(Cause::required("metadata.name", "name or generateName is required"));
    } else {
        for e in name_errors(name, rule) {
            causes.push(Cause::invalid("metadata.name", &Value::String(name.into()), &e));
        }
    }
    let ns = meta["namespace"].as_str().unwrap_or("");
    if namespaced && ns.is_empty() {
        causes.push(Cause::required("metadata.namespace", ""));
    } else if !namespaced && !ns.is_empty() {
        causes.push(Cause::forbidden("metadata.namespace", "not allowed on this type"));
    }
    for field in ["labels", "annotations"] {
        let v = &meta[field];
        if !v.is_null() && !v.as_object().is_some_and(|m| m.values().all(Value::is_string)) {
            causes.push(Cause::invalid(&format!("metadata.{field}"), v, "must be a map of strings"));
        }
    }
    if let Some(labels) = meta["labels"].as_object() {
        for (k, v) in labels {
            for e in qualified_name_errors(k) {
                causes.push(Cause::invalid("metadata.labels", &Value::String(k.clone()), &e));
            }
            for e in label_value_errors(v.as_str().unwrap_or("")) {
                causes.push(Cause::invalid("metadata.labels", v, &e));
            }
        }
    }
    if let Some(annotations) = meta["annotations"].as_object() {
        let mut size = 0;
        for (k, v) in annotations {
            // Kube's rule: a qualified name, case aside.
            for e in qualified_name_errors(&k.to_lowercase()) {
                causes.push(Cause::invalid("metadata.annotations", &Value::String(k.clone()), &e));
            }
            size += k.len() + v.as_str().map_or(0, str::len);
        }
        if size > TOTAL_ANNOTATION_SIZE {
            causes.push(Cause::too_long("metadata.annotations", TOTAL_ANNOTATION_SIZE));
        }
    }
    causes.extend(managed_fields(&meta["managedFields"]));
    causes
}

/// kube's `ValidateManagedFields`: each entry's operation is `Apply` or
/// `Update`, its fieldsType (if any) `FieldsV1`, its manager a valid
/// field manager ([`field_manager`]), its subresource at most 256 bytes.
/// The field manager writes well-formed entries; a client that rewrites
/// the list can still send what it cannot fix, as a manager name too long.
fn managed_fields(list: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    for (i, e) in list.as_array().into_iter().flatten().enumerate() {
        let at = |f: &str| format!("metadata.managedFields[{i}].{f}");
        let s = |f: &str| e.get(f).and_then(Value::as_str).unwrap_or("");
        if !matches!(s("operation"), "Apply" | "Update") {
            causes.push(Cause::invalid(&at("operation"), &Value::String(s("operation").into()), "must be `Apply` or `Update`"));
        }
        if !s("fieldsType").is_empty() && s("fieldsType") != "FieldsV1" {
            causes.push(Cause::invalid(&at("fieldsType"), &Value::String(s("fieldsType").into()), "must be `FieldsV1`"));
        }
        causes.extend(field_manager(&at("manager"), s("manager")));
        if s("subresource").len() > MAX_SUBRESOURCE_NAME {
            causes.push(Cause::too_long(&at("subresource"), MAX_SUBRESOURCE_NAME));
        }
    }
    causes
}

/// kube's `MaxSubresourceNameLength`.
const MAX_SUBRESOURCE_NAME: usize = 256;

/// kube's `FieldManagerMaxLength`.
const FIELD_MANAGER_MAX: usize = 128;

/// kube's `ValidateFieldManager` of a manager name at `field`: at most 128
/// bytes, and printable characters only (`invalid character U+0007 (at
/// position 3)`, the byte offset, for each that is not).
pub fn field_manager(field: &str, manager: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    if manager.len() > FIELD_MANAGER_MAX {
        causes.push(Cause::too_long(field, FIELD_MANAGER_MAX));
    }
    for (i, c) in manager.char_indices().filter(|(_, c)| !go_printable(*c)) {
        causes.push(Cause::invalid(field, &Value::String(manager.into()), &format!("invalid character U+{:04X} (at position {i})", u32::from(c))));
    }
    causes
}

/// Kube's `TotalAnnotationSizeLimitB`: keys and values together.
const TOTAL_ANNOTATION_SIZE: usize = 256 * 1024;

const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, non-empty.
fn is_qualified_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty() && b.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.')) && b[0].is_ascii_alphanumeric() && b[b.len() - 1].is_ascii_alphanumeric()
}

/// Errors of a label key or annotation key, as kube's `IsQualifiedName`: an
/// optional DNS-subdomain prefix and `/`, then a name of at most 63
/// characters.
pub fn qualified_name_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(name_errors(prefix, NameRule::Subdomain).into_iter().map(|e| format!("prefix part {e}")));
            }
            *name
        }
        _ => {
            return vec![format!("a qualified name {QUALIFIED_NAME_MSG} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')")];
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 characters".to_string());
    }
    if !is_qualified_part(name) {
        errs.push(format!("name part {QUALIFIED_NAME_MSG}"));
    }
    errs
}

/// Errors of a label value, as kube's `IsValidLabelValue`: empty, or at
/// most 63 characters of the qualified-name alphabet.
pub fn label_value_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    if !value.is_empty() && !is_qualified_part(value) {
        errs.push(LABEL_VALUE_MSG.to_string());
    }
    errs
}

/// The string value of a dotted field path (`spec.nodeName`), as field
/// selectors compare it; missing fields are `""`.
pub fn field_string(obj: &Value, field: &str) -> String {
    let mut v = obj;
    for part in field.split('.') {
        v = &v[part];
    }
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        Value::Bool(b) => b.to_string(),
        other => other.to_string(),
    }
}

/// Go's `%#v` of a `map[string]string`, as kube prints label maps in
/// Invalid messages: `map[string]string{"app":"x"}`.
pub fn go_string_map(v: &Value) -> String {
    let mut items: Vec<(String, String)> = v.as_object().map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string())).collect()).unwrap_or_default();
    items.sort();
    let body: Vec<String> = items.iter().map(|(k, v)| format!("{k:?}:{v:?}")).collect();
    format!("map[string]string{{{}}}", body.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(name_errors("my-app.example", NameRule::Subdomain).is_empty());
        assert!(!name_errors("My", NameRule::Subdomain).is_empty());
        assert!(!name_errors("a.b", NameRule::Label).is_empty());
        assert!(!name_errors("1abc", NameRule::Dns1035).is_empty());
        assert!(name_errors("abc-1", NameRule::Dns1035).is_empty());
        assert_eq!(go_string_map(&serde_json::json!({"b":"2","a":"1"})), r#"map[string]string{"a":"1", "b":"2"}"#);
    }

    #[test]
    fn managed_fields_entries() {
        let long = "m".repeat(129);
        let list = serde_json::json!([
            {"manager": "ok", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1"},
            {"manager": long, "operation": "Patch", "fieldsType": "FieldsV2", "subresource": "s".repeat(257)},
            {"manager": "a\u{7}b\u{200b}", "operation": "Apply"},
        ]);
        let got: Vec<String> = managed_fields(&list).iter().map(|c| format!("{}: {}", c.field, c.message)).collect();
        assert_eq!(
            got,
            [
                "metadata.managedFields[1].operation: Invalid value: \"Patch\": must be `Apply` or `Update`",
                "metadata.managedFields[1].fieldsType: Invalid value: \"FieldsV2\": must be `FieldsV1`",
                "metadata.managedFields[1].manager: Too long: may not be more than 128 bytes",
                "metadata.managedFields[1].subresource: Too long: may not be more than 256 bytes",
                "metadata.managedFields[2].manager: Invalid value: \"a\\ab\\u200b\": invalid character U+0007 (at position 1)",
                "metadata.managedFields[2].manager: Invalid value: \"a\\ab\\u200b\": invalid character U+200B (at position 3)",
            ]
        );
    }
}
