//! Validation of `admissionregistration.k8s.io` objects, with kube's field
//! paths and messages (`pkg/apis/admissionregistration/validation`,
//! `k8s.io/apiserver/pkg/util/webhook/validation.go`): webhook
//! configurations, ValidatingAdmissionPolicy, MutatingAdmissionPolicy and
//! their bindings.
//!
//! Webhook configurations are checked strictly on create. On update kube
//! keeps accepting what the stored object already had: side effects other
//! than `None`/`NoneOnDryRun`, no recognised AdmissionReview version,
//! duplicate webhook names, invalid label values in selectors, and match
//! conditions that did not change ([`WebhookOptions::for_update`]).

use std::collections::BTreeSet;

use serde_json::Value;

use super::super::validation::{label_value_errors, name_errors, qualified_name_errors, NameRule};
use crate::errors::Cause;

/// `field.Invalid` with a value already rendered as Go prints it.
fn invalid_raw(field: &str, rendered: &str, detail: &str) -> Cause {
    Cause { reason: "FieldValueInvalid".into(), message: format!("Invalid value: {rendered}: {detail}"), field: field.into() }
}

/// `field.Invalid` of a string value.
fn invalid_str(field: &str, value: &str, detail: &str) -> Cause {
    Cause::invalid(field, &Value::String(value.to_string()), detail)
}

/// `field.Duplicate` of a string value.
fn duplicate(field: &str, value: &str) -> Cause {
    Cause { reason: "FieldValueDuplicate".into(), message: format!("Duplicate value: {value:?}"), field: field.into() }
}

/// `field.TooMany`.
fn too_many(field: &str, actual: usize, max: usize) -> Cause {
    Cause { reason: "FieldValueTooMany".into(), message: format!("Too many: {actual}: must have at most {max} items"), field: field.into() }
}

/// The strings of a JSON list (non-strings as empty strings, as Go would
/// have refused them earlier).
fn strings(v: &Value) -> Vec<&str> {
    v.as_array().map(|a| a.iter().map(|s| s.as_str().unwrap_or("")).collect()).unwrap_or_default()
}

/// Go's `%#v` of a slice of (named) strings: `[]string{"a", "b"}`.
fn go_slice(type_name: &str, items: &[&str]) -> String {
    let body: Vec<String> = items.iter().map(|s| format!("{s:?}")).collect();
    format!("[]{type_name}{{{}}}", body.join(", "))
}

/// A string field: `None` when absent or null.
fn opt_str(v: &Value) -> Option<&str> {
    match v {
        Value::Null => None,
        Value::String(s) => Some(s),
        _ => Some(""),
    }
}

/// `field.NotSupported` when `value` is set and not in `supported`
/// (`supported` in kube's sorted order).
fn enum_check(causes: &mut Vec<Cause>, field: &str, value: &Value, supported: &[&str]) {
    if let Some(v) = opt_str(value) {
        if !supported.contains(&v) {
            causes.push(Cause::not_supported(field, &format!("{v:?}"), supported));
        }
    }
}

/// As [`enum_check`], and `Required value` when absent.
fn required_enum(causes: &mut Vec<Cause>, field: &str, value: &Value, supported: &[&str]) {
    match opt_str(value) {
        None | Some("") => causes.push(Cause::required(field, "")),
        Some(_) => enum_check(causes, field, value, supported),
    }
}

const FAILURE_POLICIES: &[&str] = &["Fail", "Ignore"];
const MATCH_POLICIES: &[&str] = &["Equivalent", "Exact"];
const REINVOCATION_POLICIES: &[&str] = &["IfNeeded", "Never"];
const NO_SIDE_EFFECTS: &[&str] = &["None", "NoneOnDryRun"];
const ALL_SIDE_EFFECTS: &[&str] = &["None", "NoneOnDryRun", "Some", "Unknown"];
const OPERATIONS: &[&str] = &["*", "CONNECT", "CREATE", "DELETE", "UPDATE"];
/// A MutatingAdmissionPolicy cannot match DELETE.
const MUTATING_OPERATIONS: &[&str] = &["*", "CONNECT", "CREATE", "UPDATE"];
const SCOPES: &[&str] = &["*", "Cluster", "Namespaced"];
const VALIDATION_ACTIONS: &[&str] = &["Audit", "Deny", "Warn"];
const REASONS: &[&str] = &["Forbidden", "Invalid", "RequestEntityTooLarge"];
const PATCH_TYPES: &[&str] = &["ApplyConfiguration", "JSONPatch"];
const REVIEW_VERSIONS: &[&str] = &["v1", "v1beta1"];
/// kube's limit on match conditions per webhook or policy.
const MAX_MATCH_CONDITIONS: usize = 64;
const MAX_AUDIT_ANNOTATIONS: usize = 20;
const MAX_AUDIT_VALUE_EXPRESSION: usize = 5 * 1024;

/// kube's `ValidateLabelSelector` (strict unless `allow_invalid_values`):
/// `matchLabels` keys are qualified names and values label values;
/// requirements have a known operator, values exactly when it is `In` or
/// `NotIn`, a qualified-name key and label values.
pub fn label_selector(sel: &Value, field: &str, allow_invalid_values: bool) -> Vec<Cause> {
    let mut causes = Vec::new();
    if let Some(labels) = sel["matchLabels"].as_object() {
        let f = format!("{field}.matchLabels");
        for (k, v) in labels {
            for e in qualified_name_errors(k) {
                causes.push(invalid_str(&f, k, &e));
            }
            for e in label_value_errors(v.as_str().unwrap_or("")) {
                causes.push(Cause::invalid(&f, v, &e));
            }
        }
    }
    for (i, r) in sel["matchExpressions"].as_array().into_iter().flatten().enumerate() {
        let f = format!("{field}.matchExpressions[{i}]");
        let values = strings(&r["values"]);
        match r["operator"].as_str().unwrap_or("") {
            "In" | "NotIn" if values.is_empty() => causes.push(Cause::required(&format!("{f}.values"), "must be specified when `operator` is 'In' or 'NotIn'")),
            "Exists" | "DoesNotExist" if !values.is_empty() => causes.push(Cause::forbidden(&format!("{f}.values"), "may not be specified when `operator` is 'Exists' or 'DoesNotExist'")),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            op => causes.push(invalid_str(&format!("{f}.operator"), op, "not a valid selector operator")),
        }
        let key = r["key"].as_str().unwrap_or("");
        for e in qualified_name_errors(key) {
            causes.push(invalid_str(&format!("{f}.key"), key, &e));
        }
        if !allow_invalid_values {
            for (j, v) in values.iter().enumerate() {
                for e in label_value_errors(v) {
                    causes.push(invalid_str(&format!("{f}.values[{j}]"), v, &e));
                }
            }
        }
    }
    causes
}

/// How strictly a webhook configuration is checked (kube's
/// `validationOptions`).
#[derive(Debug, Clone)]
pub struct WebhookOptions {
    require_no_side_effects: bool,
    require_recognized_version: bool,
    require_unique_names: bool,
    allow_invalid_label_values: bool,
    ignore_match_conditions: bool,
}

impl WebhookOptions {
    /// The checks of a create.
    pub fn for_create() -> Self {
        WebhookOptions { require_no_side_effects: true, require_recognized_version: true, require_unique_names: true, allow_invalid_label_values: false, ignore_match_conditions: false }
    }

    /// The checks of an update of `old` into `new`: what `old` already
    /// broke stays allowed.
    pub fn for_update(new: &Value, old: &Value) -> Self {
        let old_hooks: Vec<&Value> = old["webhooks"].as_array().map(|a| a.iter().collect()).unwrap_or_default();
        let new_hooks: Vec<&Value> = new["webhooks"].as_array().map(|a| a.iter().collect()).unwrap_or_default();
        let mut names = BTreeSet::new();
        WebhookOptions {
            require_no_side_effects: old_hooks.iter().all(|h| opt_str(&h["sideEffects"]).is_some_and(|s| NO_SIDE_EFFECTS.contains(&s))),
            require_recognized_version: old_hooks.iter().all(|h| {
                let v = strings(&h["admissionReviewVersions"]);
                v.is_empty() || v.iter().any(|v| REVIEW_VERSIONS.contains(v))
            }),
            require_unique_names: old_hooks.iter().all(|h| names.insert(h["name"].as_str().unwrap_or(""))),
            allow_invalid_label_values: old_hooks.iter().any(|h| ["namespaceSelector", "objectSelector"].iter().any(|s| h[*s].is_object() && !label_selector(&h[*s], "", false).is_empty())),
            ignore_match_conditions: new_hooks.len() == old_hooks.len() && new_hooks.iter().zip(&old_hooks).all(|(n, o)| n["matchConditions"] == o["matchConditions"]),
        }
    }
}

/// kube's `ValidateValidatingWebhookConfiguration` and
/// `ValidateMutatingWebhookConfiguration` (metadata aside, which the store
/// checks): every webhook's name, rules, policies, side effects, timeout,
/// selectors, client config and match conditions, its AdmissionReview
/// versions, and unique names.
pub fn webhook_configuration(o: &Value, mutating: bool, opts: &WebhookOptions) -> Vec<Cause> {
    let mut causes = Vec::new();
    let mut names = BTreeSet::new();
    for (i, w) in o["webhooks"].as_array().into_iter().flatten().enumerate() {
        let base = format!("webhooks[{i}]");
        causes.extend(webhook(w, &base, mutating, opts));
        causes.extend(review_versions(&w["admissionReviewVersions"], &format!("{base}.admissionReviewVersions"), opts.require_recognized_version));
        let name = w["name"].as_str().unwrap_or("");
        if opts.require_unique_names && !name.is_empty() && !names.insert(name) {
            causes.push(duplicate(&format!("{base}.name"), name));
        }
    }
    causes
}

/// kube's `IsFullyQualifiedName`: a DNS subdomain of at least three
/// labels.
fn fully_qualified_name(name: &str, field: &str) -> Vec<Cause> {
    if name.is_empty() {
        return vec![Cause::required(field, "")];
    }
    let errs = name_errors(name, NameRule::Subdomain);
    if !errs.is_empty() {
        return vec![invalid_str(field, name, &errs.join(","))];
    }
    if name.split('.').count() < 3 {
        return vec![invalid_str(field, name, "should be a domain with at least three segments separated by dots")];
    }
    Vec::new()
}

fn webhook(w: &Value, base: &str, mutating: bool, opts: &WebhookOptions) -> Vec<Cause> {
    let mut causes = fully_qualified_name(w["name"].as_str().unwrap_or(""), &format!("{base}.name"));
    for (i, r) in w["rules"].as_array().into_iter().flatten().enumerate() {
        causes.extend(rule_with_operations(r, &format!("{base}.rules[{i}]")));
    }
    enum_check(&mut causes, &format!("{base}.failurePolicy"), &w["failurePolicy"], FAILURE_POLICIES);
    enum_check(&mut causes, &format!("{base}.matchPolicy"), &w["matchPolicy"], MATCH_POLICIES);
    let side_effects = if opts.require_no_side_effects { NO_SIDE_EFFECTS } else { ALL_SIDE_EFFECTS };
    match opt_str(&w["sideEffects"]) {
        None => causes.push(Cause::required(&format!("{base}.sideEffects"), &format!("must specify one of {}", side_effects.join(", ")))),
        Some(_) => enum_check(&mut causes, &format!("{base}.sideEffects"), &w["sideEffects"], side_effects),
    }
    if let Some(t) = w.get("timeoutSeconds").filter(|t| !t.is_null()) {
        let n = t.as_i64().unwrap_or(0);
        if !(1..=30).contains(&n) {
            causes.push(invalid_raw(&format!("{base}.timeoutSeconds"), &n.to_string(), "the timeout value must be between 1 and 30 seconds"));
        }
    }
    for sel in ["namespaceSelector", "objectSelector"] {
        if w[sel].is_object() {
            causes.extend(label_selector(&w[sel], &format!("{base}.{sel}"), opts.allow_invalid_label_values));
        }
    }
    if mutating {
        enum_check(&mut causes, &format!("{base}.reinvocationPolicy"), &w["reinvocationPolicy"], REINVOCATION_POLICIES);
    }
    let cc = &w["clientConfig"];
    let (url, service) = (&cc["url"], &cc["service"]);
    let cc_field = format!("{base}.clientConfig");
    match (url.is_null(), service.is_null()) {
        (true, true) | (false, false) => causes.push(Cause::required(&cc_field, "exactly one of url or service is required")),
        (false, true) => causes.extend(webhook_url(url.as_str().unwrap_or(""), &format!("{cc_field}.url"))),
        (true, false) => causes.extend(webhook_service(service, &format!("{cc_field}.service"))),
    }
    if !opts.ignore_match_conditions {
        causes.extend(match_conditions(&w["matchConditions"], &format!("{base}.matchConditions")));
    }
    causes
}

/// kube's `validateAdmissionReviewVersions`.
fn review_versions(v: &Value, field: &str, require_recognized: bool) -> Vec<Cause> {
    let versions = strings(v);
    if versions.is_empty() {
        return vec![Cause::required(field, &format!("must specify one of {}", REVIEW_VERSIONS.join(", ")))];
    }
    let mut causes = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, version) in versions.iter().enumerate() {
        if !seen.insert(*version) {
            causes.push(invalid_str(&format!("{field}[{i}]"), version, "duplicate version"));
            continue;
        }
        for e in name_errors(version, NameRule::Dns1035) {
            causes.push(invalid_str(&format!("{field}[{i}]"), version, &e));
        }
    }
    if require_recognized && !versions.iter().any(|v| REVIEW_VERSIONS.contains(v)) {
        causes.push(invalid_raw(field, &go_slice("string", &versions), &format!("must include at least one of {}", REVIEW_VERSIONS.join(", "))));
    }
    causes
}

/// The parts of a URL as Go's `url.Parse` splits them: scheme, userinfo,
/// host, query and fragment (the `url` crate normalises what Go keeps, as
/// `https:///x`, whose host Go leaves empty).
struct GoUrl<'a> {
    scheme: &'a str,
    user: Option<&'a str>,
    host: &'a str,
    query: &'a str,
    fragment: &'a str,
}

fn go_url(raw: &str) -> GoUrl<'_> {
    let (rest, fragment) = raw.split_once('#').unwrap_or((raw, ""));
    let scheme_ok = |s: &str| s.as_bytes().first().is_some_and(u8::is_ascii_alphabetic) && s.bytes().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.'));
    let (scheme, rest) = match rest.split_once(':') {
        Some((s, r)) if scheme_ok(s) => (s, r),
        _ => ("", rest),
    };
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (user, host) = match rest.strip_prefix("//") {
        Some(auth) => {
            let auth = auth.split('/').next().unwrap_or("");
            match auth.rsplit_once('@') {
                Some((u, h)) => (Some(u), h),
                None => (None, auth),
            }
        }
        None => (None, ""),
    };
    GoUrl { scheme, user, host, query, fragment }
}

/// kube's `ValidateWebhookURL` with https forced.
fn webhook_url(raw: &str, field: &str) -> Vec<Cause> {
    const FORM: &str = "; desired format: https://host[/path]";
    let u = go_url(raw);
    let mut causes = Vec::new();
    if u.scheme != "https" {
        causes.push(invalid_str(field, u.scheme, &format!("'https' is the only allowed URL scheme{FORM}")));
    }
    if u.host.is_empty() {
        causes.push(invalid_str(field, "", &format!("host must be provided{FORM}")));
    }
    if let Some(user) = u.user {
        causes.push(invalid_str(field, user, "user information is not permitted in the URL"));
    }
    if !u.fragment.is_empty() {
        causes.push(invalid_str(field, u.fragment, "fragments are not permitted in the URL"));
    }
    if !u.query.is_empty() {
        causes.push(invalid_str(field, u.query, "query parameters are not permitted in the URL"));
    }
    causes
}

/// kube's `ValidateWebhookService` (the port is defaulted to 443 before).
fn webhook_service(s: &Value, field: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    if s["name"].as_str().is_none_or(str::is_empty) {
        causes.push(Cause::required(&format!("{field}.name"), "service name is required"));
    }
    if s["namespace"].as_str().is_none_or(str::is_empty) {
        causes.push(Cause::required(&format!("{field}.namespace"), "service namespace is required"));
    }
    let port = s["port"].as_i64().unwrap_or(443);
    if !(1..=65535).contains(&port) {
        causes.push(invalid_raw(&format!("{field}.port"), &port.to_string(), "port is not valid: must be between 1 and 65535, inclusive"));
    }
    let Some(path) = s["path"].as_str() else { return causes };
    let pf = format!("{field}.path");
    if path.is_empty() || path == "/" {
        return causes;
    }
    if path == "//" {
        causes.push(invalid_str(&pf, path, "segment[0] may not be empty"));
        return causes;
    }
    if !path.starts_with('/') {
        causes.push(invalid_str(&pf, path, "must start with a '/'"));
    }
    let mut rest = path.get(1..).unwrap_or("");
    rest = rest.strip_suffix('/').unwrap_or(rest);
    for (i, step) in rest.split('/').enumerate() {
        if step.is_empty() {
            causes.push(invalid_str(&pf, path, &format!("segment[{i}] may not be empty")));
            continue;
        }
        for e in name_errors(step, NameRule::Subdomain) {
            causes.push(invalid_str(&pf, path, &format!("segment[{i}]: {e}")));
        }
    }
    causes
}

/// kube's `validateRuleWithOperations` (subresources allowed), with the
/// operations a MutatingAdmissionPolicy accepts when `mutating_policy`.
fn rule_with_operations(r: &Value, base: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let ops = strings(&r["operations"]);
    let f = format!("{base}.operations");
    if ops.is_empty() {
        causes.push(Cause::required(&f, ""));
    }
    if ops.len() > 1 && ops.contains(&"*") {
        causes.push(invalid_raw(&f, &go_slice("admissionregistration.OperationType", &ops), "if '*' is present, must not specify other operations"));
    }
    for (i, op) in ops.iter().enumerate() {
        if !OPERATIONS.contains(op) {
            causes.push(Cause::not_supported(&format!("{f}[{i}]"), &format!("{op:?}"), OPERATIONS));
        }
    }
    causes.extend(rule(r, base));
    causes
}

/// kube's `validateRule` with subresources allowed.
fn rule(r: &Value, base: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let groups = strings(&r["apiGroups"]);
    if groups.is_empty() {
        causes.push(Cause::required(&format!("{base}.apiGroups"), ""));
    }
    if groups.len() > 1 && groups.contains(&"*") {
        causes.push(invalid_raw(&format!("{base}.apiGroups"), &go_slice("string", &groups), "if '*' is present, must not specify other API groups"));
    }
    let versions = strings(&r["apiVersions"]);
    if versions.is_empty() {
        causes.push(Cause::required(&format!("{base}.apiVersions"), ""));
    }
    if versions.len() > 1 && versions.contains(&"*") {
        causes.push(invalid_raw(&format!("{base}.apiVersions"), &go_slice("string", &versions), "if '*' is present, must not specify other API versions"));
    }
    for (i, v) in versions.iter().enumerate() {
        if v.is_empty() {
            causes.push(Cause::required(&format!("{base}.apiVersions[{i}]"), ""));
        }
    }
    causes.extend(resources(&strings(&r["resources"]), &format!("{base}.resources")));
    enum_check(&mut causes, &format!("{base}.scope"), &r["scope"], SCOPES);
    causes
}

/// kube's `validateResources`: `*/*` alone, `*` without plain resources,
/// `x/*` or `*/x` not combined with what they cover.
fn resources(list: &[&str], field: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    if list.is_empty() {
        causes.push(Cause::required(field, ""));
    }
    let mut with_wild_sub = BTreeSet::new();
    let mut with_wild_res = BTreeSet::new();
    let (mut double, mut single, mut plain) = (false, false, false);
    for (i, res_sub) in list.iter().enumerate() {
        if res_sub.is_empty() {
            causes.push(Cause::required(&format!("{field}[{i}]"), ""));
            continue;
        }
        double |= *res_sub == "*/*";
        single |= *res_sub == "*";
        let Some((res, sub)) = res_sub.split_once('/') else {
            plain = *res_sub != "*";
            continue;
        };
        if with_wild_sub.contains(res) {
            causes.push(invalid_str(&format!("{field}[{i}]"), res_sub, &format!("if '{res}/*' is present, must not specify {res_sub}")));
        }
        if with_wild_res.contains(sub) {
            causes.push(invalid_str(&format!("{field}[{i}]"), res_sub, &format!("if '*/{sub}' is present, must not specify {res_sub}")));
        }
        if sub == "*" {
            with_wild_sub.insert(res);
        }
        if res == "*" {
            with_wild_res.insert(sub);
        }
    }
    if list.len() > 1 && double {
        causes.push(invalid_raw(field, &go_slice("string", list), "if '*/*' is present, must not specify other resources"));
    }
    if single && plain {
        causes.push(invalid_raw(field, &go_slice("string", list), "if '*' is present, must not specify other resources without subresources"));
    }
    causes
}

/// kube's `validateMatchConditions`: at most 64; each has a qualified,
/// unique name and an expression that compiles.
fn match_conditions(v: &Value, field: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let list = v.as_array().map(Vec::as_slice).unwrap_or_default();
    if list.len() > MAX_MATCH_CONDITIONS {
        causes.push(too_many(field, list.len(), MAX_MATCH_CONDITIONS));
    }
    let mut names = BTreeSet::new();
    for (i, c) in list.iter().enumerate() {
        let f = format!("{field}[{i}]");
        let expr = c["expression"].as_str().unwrap_or("").trim();
        if expr.is_empty() {
            causes.push(Cause::required(&format!("{f}.expression"), ""));
        } else {
            causes.extend(compiles(expr, &format!("{f}.expression")));
        }
        let name = c["name"].as_str().unwrap_or("");
        if name.is_empty() {
            causes.push(Cause::required(&format!("{f}.name"), ""));
        } else {
            for e in qualified_name_errors(name) {
                causes.push(invalid_str(&format!("{f}.name"), name, &e));
            }
        }
        if !name.is_empty() && !names.insert(name) {
            causes.push(duplicate(&format!("{f}.name"), name));
        }
    }
    causes
}

/// One 422 cause when `expr` does not compile (kube: `Invalid value:
/// "<expression>": compilation failed: …`). Type checking is left to the
/// policy's `status.typeChecking`.
fn compiles(expr: &str, field: &str) -> Vec<Cause> {
    match crate::cel::Program::compile(expr) {
        Ok(_) => Vec::new(),
        Err(e) => vec![invalid_str(field, expr, &e.to_string())],
    }
}

/// kube's `validateParamKind`.
fn param_kind(pk: &Value, field: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let api_version = pk["apiVersion"].as_str().unwrap_or("");
    let af = format!("{field}.apiVersion");
    if api_version.is_empty() {
        causes.push(Cause::required(&af, ""));
    } else if api_version.matches('/').count() > 1 {
        causes.push(invalid_str(&af, api_version, &format!("unexpected GroupVersion string: {api_version}")));
    } else {
        let (group, version) = if api_version == "/" { ("", "") } else { api_version.split_once('/').unwrap_or(("", api_version)) };
        if !group.is_empty() {
            let errs = name_errors(group, NameRule::Subdomain);
            if !errs.is_empty() {
                causes.push(invalid_str(&af, group, &errs.join(",")));
            }
        }
        if version.is_empty() {
            causes.push(invalid_str(&af, api_version, "version must be specified"));
        } else {
            let errs = name_errors(version, NameRule::Dns1035);
            if !errs.is_empty() {
                causes.push(invalid_str(&af, version, &errs.join(",")));
            }
        }
    }
    let kind = pk["kind"].as_str().unwrap_or("");
    if kind.is_empty() {
        causes.push(Cause::required(&format!("{field}.kind"), ""));
    } else {
        let errs = name_errors(&kind.to_lowercase(), NameRule::Dns1035);
        if !errs.is_empty() {
            causes.push(invalid_str(&format!("{field}.kind"), kind, &format!("may have mixed case, but should otherwise match: {}", errs.join(","))));
        }
    }
    causes
}

/// kube's `validateMatchResources` (of a policy or a binding): match
/// policy, both selectors (required: defaulting fills them), named rules.
fn match_resources(mc: &Value, field: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    required_enum(&mut causes, &format!("{field}.matchPolicy"), &mc["matchPolicy"], MATCH_POLICIES);
    for sel in ["namespaceSelector", "objectSelector"] {
        if mc[sel].is_null() {
            causes.push(Cause::required(&format!("{field}.{sel}"), ""));
        } else {
            causes.extend(label_selector(&mc[sel], &format!("{field}.{sel}"), false));
        }
    }
    for list in ["resourceRules", "excludeResourceRules"] {
        for (i, r) in mc[list].as_array().into_iter().flatten().enumerate() {
            let f = format!("{field}.{list}[{i}]");
            let mut names = BTreeSet::new();
            for (j, n) in strings(&r["resourceNames"]).into_iter().enumerate() {
                for e in name_errors(n, NameRule::PathSegment) {
                    causes.push(invalid_str(&format!("{f}.resourceNames[{j}]"), n, &e));
                }
                if !names.insert(n) {
                    causes.push(duplicate(&format!("{f}.resourceNames[{j}]"), n));
                }
            }
            causes.extend(rule_with_operations(r, &f));
        }
    }
    causes
}

/// MutatingAdmissionPolicy's operations: no DELETE.
fn mutating_operations(mc: &Value, field: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    for r in mc["resourceRules"].as_array().into_iter().flatten() {
        for op in strings(&r["operations"]) {
            if !MUTATING_OPERATIONS.contains(&op) {
                causes.push(Cause::not_supported(field, &format!("{op:?}"), MUTATING_OPERATIONS));
            }
        }
    }
    causes
}

/// What ValidatingAdmissionPolicy and MutatingAdmissionPolicy share:
/// failurePolicy, paramKind, matchConstraints (with at least one resource
/// rule), matchConditions and variables.
fn policy_common(spec: &Value, mutating: bool) -> Vec<Cause> {
    let mut causes = Vec::new();
    required_enum(&mut causes, "spec.failurePolicy", &spec["failurePolicy"], FAILURE_POLICIES);
    if spec["paramKind"].is_object() {
        causes.extend(param_kind(&spec["paramKind"], "spec.paramKind"));
    }
    let mc = &spec["matchConstraints"];
    if mc.is_null() {
        causes.push(Cause::required("spec.matchConstraints", ""));
    } else {
        causes.extend(match_resources(mc, "spec.matchConstraints"));
        if mc["resourceRules"].as_array().is_none_or(Vec::is_empty) {
            causes.push(Cause::required("spec.matchConstraints.resourceRules", ""));
        }
        if mutating {
            causes.extend(mutating_operations(mc, "spec.matchConstraints.resourceRules.operations"));
        }
    }
    causes.extend(match_conditions(&spec["matchConditions"], "spec.matchConditions"));
    for (i, v) in spec["variables"].as_array().into_iter().flatten().enumerate() {
        let f = format!("spec.variables[{i}]");
        let name = v["name"].as_str().unwrap_or("");
        if name.trim().is_empty() {
            causes.push(Cause::required(&format!("{f}.name"), "name is not specified"));
        } else if !is_cel_identifier(name) {
            causes.push(invalid_str(&format!("{f}.name"), name, "name is not a valid CEL identifier"));
        }
        let expr = v["expression"].as_str().unwrap_or("");
        if expr.trim().is_empty() {
            causes.push(Cause::required(&format!("{f}.expression"), "expression is not specified"));
        } else {
            causes.extend(compiles(expr, &format!("{f}.expression")));
        }
    }
    causes
}

/// CEL's `IDENT` less its reserved words.
fn is_cel_identifier(name: &str) -> bool {
    const RESERVED: &[&str] =
        &["true", "false", "null", "in", "as", "break", "const", "continue", "else", "for", "function", "if", "import", "let", "loop", "package", "namespace", "return", "var", "void", "while"];
    let b = name.as_bytes();
    !b.is_empty() && (b[0].is_ascii_alphabetic() || b[0] == b'_') && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_') && !RESERVED.contains(&name)
}

/// kube's `ValidateValidatingAdmissionPolicy` (metadata aside).
pub fn validating_policy(o: &Value) -> Vec<Cause> {
    let spec = &o["spec"];
    let mut causes = policy_common(spec, false);
    let validations = spec["validations"].as_array().map(Vec::as_slice).unwrap_or_default();
    let annotations = spec["auditAnnotations"].as_array().map(Vec::as_slice).unwrap_or_default();
    if validations.is_empty() && annotations.is_empty() {
        let why = "validations or auditAnnotations must contain at least one item";
        causes.push(Cause::required("spec.validations", why));
        causes.push(Cause::required("spec.auditAnnotations", why));
        return causes;
    }
    for (i, v) in validations.iter().enumerate() {
        let f = format!("spec.validations[{i}]");
        let expr = v["expression"].as_str().unwrap_or("");
        if expr.trim().is_empty() {
            causes.push(Cause::required(&format!("{f}.expression"), "expression is not specified"));
        } else {
            causes.extend(compiles(expr, &format!("{f}.expression")));
        }
        let msg_expr = v["messageExpression"].as_str().unwrap_or("");
        if !msg_expr.is_empty() && msg_expr.trim().is_empty() {
            causes.push(invalid_str(&format!("{f}.messageExpression"), msg_expr, "must be non-empty if specified"));
        } else if !msg_expr.trim().is_empty() {
            causes.extend(compiles(msg_expr, &format!("{f}.messageExpression")));
        }
        let msg = v["message"].as_str().unwrap_or("");
        if !msg.is_empty() && msg.trim().is_empty() {
            causes.push(invalid_str(&format!("{f}.message"), msg, "message must be non-empty if specified"));
        } else if msg.trim().contains(['\n', '\r']) {
            causes.push(invalid_str(&format!("{f}.message"), msg, "message must not contain line breaks"));
        }
        enum_check(&mut causes, &format!("{f}.reason"), &v["reason"], REASONS);
    }
    if annotations.len() > MAX_AUDIT_ANNOTATIONS {
        causes.push(Cause {
            reason: "FieldValueInvalid".into(),
            message: format!("Invalid value: \"\": must not have more than {MAX_AUDIT_ANNOTATIONS} auditAnnotations"),
            field: "spec.auditAnnotations".into(),
        });
    }
    let name = crate::meta::name(o);
    let mut keys = BTreeSet::new();
    for (i, a) in annotations.iter().enumerate() {
        let f = format!("spec.auditAnnotations[{i}]");
        let key = a["key"].as_str().unwrap_or("");
        if name.is_empty() {
            causes.push(invalid_str(&format!("{f}.key"), key, "requires metadata.name be non-empty"));
        } else {
            let full = format!("{name}/{key}");
            for e in qualified_name_errors(&full) {
                causes.push(invalid_str(&format!("{f}.key"), &full, &e));
            }
        }
        let value = a["valueExpression"].as_str().unwrap_or("");
        let trimmed = value.trim();
        if trimmed.is_empty() {
            causes.push(Cause::required(&format!("{f}.valueExpression"), "valueExpression is not specified"));
        } else if trimmed.len() > MAX_AUDIT_VALUE_EXPRESSION {
            causes.push(Cause::required(&format!("{f}.valueExpression"), &format!("must not exceed {MAX_AUDIT_VALUE_EXPRESSION} bytes in length")));
        } else {
            causes.extend(compiles(value, &format!("{f}.valueExpression")));
        }
        if !keys.insert(key) {
            causes.push(duplicate(&format!("{f}.key"), key));
        }
    }
    causes
}

/// kube's `ValidateMutatingAdmissionPolicy` (metadata aside).
pub fn mutating_policy(o: &Value) -> Vec<Cause> {
    let spec = &o["spec"];
    let mut causes = policy_common(spec, true);
    let mutations = spec["mutations"].as_array().map(Vec::as_slice).unwrap_or_default();
    if mutations.is_empty() {
        causes.push(Cause::required("spec.mutations", "mutations must contain at least one item"));
    }
    for (i, m) in mutations.iter().enumerate() {
        let f = format!("spec.mutations[{i}]");
        let patch_type = m["patchType"].as_str().unwrap_or("");
        let (own, other) = match patch_type {
            "" => {
                causes.push(Cause::required(&format!("{f}.patchType"), ""));
                continue;
            }
            "JSONPatch" => ("jsonPatch", "applyConfiguration"),
            "ApplyConfiguration" => ("applyConfiguration", "jsonPatch"),
            other => {
                causes.push(Cause::not_supported(&format!("{f}.patchType"), &format!("{other:?}"), PATCH_TYPES));
                continue;
            }
        };
        if m[own].is_null() {
            causes.push(Cause::required(&format!("{f}.{own}"), &format!("must be specified when patchType is {patch_type}")));
        } else {
            let expr = m[own]["expression"].as_str().unwrap_or("").trim();
            if expr.is_empty() {
                causes.push(Cause::required(&format!("{f}.{own}.expression"), ""));
            } else {
                causes.extend(compiles(expr, &format!("{f}.{own}.expression")));
            }
        }
        if !m[other].is_null() {
            causes.push(invalid_str(&format!("{f}.{other}"), &format!("{{{other}}}"), &format!("must not be specified when patchType is {patch_type}")));
        }
    }
    required_enum(&mut causes, "spec.reinvocationPolicy", &spec["reinvocationPolicy"], REINVOCATION_POLICIES);
    causes
}

/// kube's `ValidateValidatingAdmissionPolicyBinding` and
/// `ValidateMutatingAdmissionPolicyBinding` (metadata aside): policyName,
/// paramRef, matchResources, and validationActions (validating only).
pub fn binding(o: &Value, mutating: bool) -> Vec<Cause> {
    let spec = &o["spec"];
    let mut causes = Vec::new();
    let policy = spec["policyName"].as_str().unwrap_or("");
    if policy.is_empty() {
        causes.push(Cause::required("spec.policyName", ""));
    } else {
        for e in name_errors(policy, NameRule::Subdomain) {
            causes.push(invalid_str("spec.policyName", policy, &e));
        }
    }
    let pr = &spec["paramRef"];
    if pr.is_object() {
        let name = pr["name"].as_str().unwrap_or("");
        let selector = &pr["selector"];
        if !name.is_empty() {
            for e in name_errors(name, NameRule::PathSegment) {
                causes.push(invalid_str("spec.paramRef.name", name, &e));
            }
            if !selector.is_null() {
                causes.push(Cause::forbidden("spec.paramRef.name", "name and selector are mutually exclusive"));
            }
        }
        if !selector.is_null() {
            causes.extend(label_selector(selector, "spec.paramRef.selector", false));
            if !name.is_empty() {
                causes.push(Cause::forbidden("spec.paramRef.selector", "name and selector are mutually exclusive"));
            }
        }
        if name.is_empty() && selector.is_null() {
            causes.push(Cause::required("spec.paramRef", "one of name or selector must be specified"));
        }
        required_enum(&mut causes, "spec.paramRef.parameterNotFoundAction", &pr["parameterNotFoundAction"], &["Deny", "Allow"]);
    }
    let mr = &spec["matchResources"];
    if mr.is_object() {
        causes.extend(match_resources(mr, "spec.matchResources"));
        if mutating {
            causes.extend(mutating_operations(mr, "spec.matchResources.resourceRules.operations"));
        }
    }
    if !mutating {
        let actions = strings(&spec["validationActions"]);
        let mut seen = BTreeSet::new();
        for (i, a) in actions.iter().enumerate() {
            let f = format!("spec.validationActions[{i}]");
            if !VALIDATION_ACTIONS.contains(a) {
                causes.push(Cause::not_supported(&f, &format!("{a:?}"), VALIDATION_ACTIONS));
            }
            if !seen.insert(*a) {
                causes.push(duplicate(&f, a));
            }
        }
        if seen.contains("Deny") && seen.contains("Warn") {
            causes.push(invalid_raw(
                "spec.validationActions",
                &go_slice("admissionregistration.ValidationAction", &actions),
                "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
            ));
        }
        if seen.is_empty() {
            causes.push(Cause::required("spec.validationActions", "at least one validation action is required"));
        }
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rendered(causes: &[Cause]) -> Vec<String> {
        causes.iter().map(|c| format!("{}: {}", c.field, c.message)).collect()
    }

    fn hook(extra: Value) -> Value {
        let mut w = json!({
            "name": "a.example.com", "sideEffects": "None", "admissionReviewVersions": ["v1"],
            "clientConfig": {"url": "https://h/x"},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
        });
        for (k, v) in extra.as_object().cloned().unwrap_or_default() {
            w[k] = v;
        }
        json!({"webhooks": [w]})
    }

    #[test]
    fn webhook_configurations_as_kube_validates_them() {
        let create = WebhookOptions::for_create();
        assert_eq!(rendered(&webhook_configuration(&hook(json!({})), true, &create)), Vec::<String>::new());
        let cases: Vec<(Value, &str)> = vec![
            (json!({"clientConfig": {"url": "http://h/x"}}), r#"webhooks[0].clientConfig.url: Invalid value: "http": 'https' is the only allowed URL scheme; desired format: https://host[/path]"#),
            (json!({"clientConfig": {"url": "https:///x"}}), r#"webhooks[0].clientConfig.url: Invalid value: "": host must be provided; desired format: https://host[/path]"#),
            (json!({"clientConfig": {"url": "https://u:p@h/x"}}), r#"webhooks[0].clientConfig.url: Invalid value: "u:p": user information is not permitted in the URL"#),
            (json!({"clientConfig": {"url": "https://h/x#f"}}), r#"webhooks[0].clientConfig.url: Invalid value: "f": fragments are not permitted in the URL"#),
            (json!({"clientConfig": {"url": "https://h/x?a=b"}}), r#"webhooks[0].clientConfig.url: Invalid value: "a=b": query parameters are not permitted in the URL"#),
            (json!({"clientConfig": {}}), "webhooks[0].clientConfig: Required value: exactly one of url or service is required"),
            (json!({"clientConfig": {"service": {"port": 0, "path": "x/Y"}}}), "webhooks[0].clientConfig.service.name: Required value: service name is required"),
            (json!({"clientConfig": {"service": {"port": 0}}}), "webhooks[0].clientConfig.service.port: Invalid value: 0: port is not valid: must be between 1 and 65535, inclusive"),
            (json!({"clientConfig": {"service": {"name": "s", "namespace": "n", "path": "x"}}}), r#"webhooks[0].clientConfig.service.path: Invalid value: "x": must start with a '/'"#),
            (json!({"timeoutSeconds": 31}), "webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds"),
            (json!({"sideEffects": null}), "webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun"),
            (json!({"sideEffects": "Some"}), r#"webhooks[0].sideEffects: Unsupported value: "Some": supported values: "None", "NoneOnDryRun""#),
            (json!({"failurePolicy": "Maybe"}), r#"webhooks[0].failurePolicy: Unsupported value: "Maybe": supported values: "Fail", "Ignore""#),
            (json!({"matchPolicy": "Loose"}), r#"webhooks[0].matchPolicy: Unsupported value: "Loose": supported values: "Equivalent", "Exact""#),
            (json!({"reinvocationPolicy": "Always"}), r#"webhooks[0].reinvocationPolicy: Unsupported value: "Always": supported values: "IfNeeded", "Never""#),
            (json!({"name": "short.name"}), r#"webhooks[0].name: Invalid value: "short.name": should be a domain with at least three segments separated by dots"#),
            (json!({"admissionReviewVersions": []}), "webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1"),
            (json!({"admissionReviewVersions": ["v2"]}), r#"webhooks[0].admissionReviewVersions: Invalid value: []string{"v2"}: must include at least one of v1, v1beta1"#),
            (
                json!({"rules": [{"operations": ["GET"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]}),
                r#"webhooks[0].rules[0].operations[0]: Unsupported value: "GET": supported values: "*", "CONNECT", "CREATE", "DELETE", "UPDATE""#,
            ),
            (json!({"rules": [{"operations": ["*"], "apiGroups": [], "apiVersions": ["v1"], "resources": ["pods"]}]}), "webhooks[0].rules[0].apiGroups: Required value"),
            (
                json!({"rules": [{"operations": ["*"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["*", "pods"]}]}),
                r#"webhooks[0].rules[0].resources: Invalid value: []string{"*", "pods"}: if '*' is present, must not specify other resources without subresources"#,
            ),
            (
                json!({"rules": [{"operations": ["*"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods/*", "pods/status"]}]}),
                r#"webhooks[0].rules[0].resources[1]: Invalid value: "pods/status": if 'pods/*' is present, must not specify pods/status"#,
            ),
            (
                json!({"rules": [{"operations": ["*"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"], "scope": "Global"}]}),
                r#"webhooks[0].rules[0].scope: Unsupported value: "Global": supported values: "*", "Cluster", "Namespaced""#,
            ),
            (
                json!({"namespaceSelector": {"matchExpressions": [{"key": "a", "operator": "Has"}]}}),
                r#"webhooks[0].namespaceSelector.matchExpressions[0].operator: Invalid value: "Has": not a valid selector operator"#,
            ),
            (
                json!({"objectSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}),
                "webhooks[0].objectSelector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
            ),
            (json!({"matchConditions": [{"name": "", "expression": "true"}]}), "webhooks[0].matchConditions[0].name: Required value"),
            (json!({"matchConditions": [{"name": "a", "expression": " "}]}), "webhooks[0].matchConditions[0].expression: Required value"),
            (json!({"matchConditions": [{"name": "a", "expression": "true"}, {"name": "a", "expression": "true"}]}), r#"webhooks[0].matchConditions[1].name: Duplicate value: "a""#),
        ];
        for (extra, want) in cases {
            let got = rendered(&webhook_configuration(&hook(extra.clone()), true, &create));
            assert!(got.iter().any(|g| g == want), "{extra}: want {want:?} in {got:#?}");
        }
        let many: Vec<Value> = (0..65).map(|i| json!({"name": format!("c{i}"), "expression": "true"})).collect();
        let got = rendered(&webhook_configuration(&hook(json!({"matchConditions": many})), false, &create));
        assert!(got.contains(&"webhooks[0].matchConditions: Too many: 65: must have at most 64 items".to_string()), "{got:#?}");
        let mut two = hook(json!({}));
        two["webhooks"] = json!([two["webhooks"][0].clone(), two["webhooks"][0].clone()]);
        assert_eq!(rendered(&webhook_configuration(&two, false, &create)), vec![r#"webhooks[1].name: Duplicate value: "a.example.com""#.to_string()]);
        // On update, what the stored object already had stays allowed.
        let some = hook(json!({"sideEffects": "Some"}));
        assert_eq!(rendered(&webhook_configuration(&some, false, &WebhookOptions::for_update(&some, &some))), Vec::<String>::new());
        assert_eq!(rendered(&webhook_configuration(&two, false, &WebhookOptions::for_update(&two, &two))), Vec::<String>::new());
    }

    #[test]
    fn policies_and_bindings_as_kube_validates_them() {
        let got = rendered(&validating_policy(&json!({"metadata": {"name": "p"}, "spec": {}})));
        for want in [
            "spec.failurePolicy: Required value",
            "spec.matchConstraints: Required value",
            "spec.validations: Required value: validations or auditAnnotations must contain at least one item",
            "spec.auditAnnotations: Required value: validations or auditAnnotations must contain at least one item",
        ] {
            assert!(got.iter().any(|g| g == want), "want {want:?} in {got:#?}");
        }
        let vap = json!({"metadata": {"name": "p"}, "spec": {
            "failurePolicy": "Sometimes",
            "paramKind": {"apiVersion": "example.com/v1"},
            "matchConstraints": {"matchPolicy": "Equivalent", "namespaceSelector": {}, "objectSelector": {}, "resourceRules": []},
            "validations": [{"expression": "true", "reason": "Teapot"}],
        }});
        let got = rendered(&validating_policy(&vap));
        for want in [
            r#"spec.failurePolicy: Unsupported value: "Sometimes": supported values: "Fail", "Ignore""#,
            "spec.paramKind.kind: Required value",
            "spec.matchConstraints.resourceRules: Required value",
            r#"spec.validations[0].reason: Unsupported value: "Teapot": supported values: "Forbidden", "Invalid", "RequestEntityTooLarge""#,
        ] {
            assert!(got.iter().any(|g| g == want), "want {want:?} in {got:#?}");
        }
        let got = rendered(&mutating_policy(&json!({"metadata": {"name": "p"}, "spec": {"mutations": [{"patchType": "Merge"}]}})));
        for want in [r#"spec.mutations[0].patchType: Unsupported value: "Merge": supported values: "ApplyConfiguration", "JSONPatch""#, "spec.reinvocationPolicy: Required value"] {
            assert!(got.iter().any(|g| g == want), "want {want:?} in {got:#?}");
        }
        let got = rendered(&binding(&json!({"spec": {"policyName": "p", "validationActions": ["Deny", "Deny", "Warn", "Shout"]}}), false));
        for want in [
            r#"spec.validationActions[1]: Duplicate value: "Deny""#,
            r#"spec.validationActions[3]: Unsupported value: "Shout": supported values: "Audit", "Deny", "Warn""#,
            r#"spec.validationActions: Invalid value: []admissionregistration.ValidationAction{"Deny", "Deny", "Warn", "Shout"}: must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)"#,
        ] {
            assert!(got.iter().any(|g| g == want), "want {want:?} in {got:#?}");
        }
        let got = rendered(&binding(&json!({"spec": {}}), false));
        assert_eq!(got, vec!["spec.policyName: Required value".to_string(), "spec.validationActions: Required value: at least one validation action is required".to_string()]);
        assert_eq!(rendered(&binding(&json!({"spec": {"policyName": "p"}}), true)), Vec::<String>::new());
    }
}
