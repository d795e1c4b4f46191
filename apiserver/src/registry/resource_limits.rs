//! Validation of LimitRange and ResourceQuota (kube's `ValidateLimitRange`,
//! `ValidateResourceQuota`, `ValidateResourceQuotaUpdate` and their helpers
//! in `pkg/apis/core/validation`), with kube's messages and field paths
//! (`spec.limits[0].min[cpu]`, `spec.hard[pods]`).
//!
//! Quantities that do not parse never get here: the decoder refuses them
//! with 400 as kube's does ([`crate::schema::decode::type_error`]). What is
//! checked here:
//!
//! - LimitRange: the type name (`Pod`, `Container`, `PersistentVolumeClaim`
//!   or a qualified name), no type twice, resource names (container
//!   resources for `Pod` and `Container`), no `default`/`defaultRequest`
//!   for `Pod`, a storage bound for `PersistentVolumeClaim`, and the
//!   relations min ≤ defaultRequest ≤ default ≤ max, 1 ≤ ratio ≤ max/min,
//!   and default = defaultRequest for resources that cannot be overcommitted
//!   (extended resources, hugepages). kube checks no sign here.
//! - ResourceQuota: resource names of `spec.hard` and `status.hard/used`,
//!   non-negative values, integers for object counts and extended
//!   resources, scopes and the scope selector, and scopes that an update
//!   may not change.
//!
//! Values are rendered as kube's `field.Error` renders them: a quantity as
//! its canonical string, unquoted (it is a `fmt.Stringer`); a resource or
//! scope name quoted; slices and structs in Go's `%#v` form.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use serde_json::Value;

use super::strategy::Strategy;
use super::validation::qualified_name_errors;
use crate::errors::{go_quote, Cause};
use crate::quantity::Quantity;

/// kube's `isNegativeErrorMsg`.
const NEGATIVE: &str = "must be greater than or equal to 0";
/// kube's `isNotIntegerErrorMsg`.
const NOT_INTEGER: &str = "must be an integer";
/// kube's `isInvalidQuotaResource`.
const NOT_QUOTA_RESOURCE: &str = "must be a standard resource for quota";

/// kube's `standardResources` (`helper.IsStandardResourceName`, with the
/// hugepages prefixes).
const STANDARD_RESOURCES: &[&str] = &[
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "pods",
    "resourcequotas",
    "services",
    "replicationcontrollers",
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
    "storage",
    "requests.storage",
    "services.nodeports",
    "services.loadbalancers",
];

/// kube's `standardQuotaResources`: [`STANDARD_RESOURCES`] less `storage`.
fn is_standard_quota_resource(name: &str) -> bool {
    name != "storage" && STANDARD_RESOURCES.contains(&name) || is_quota_hugepages(name)
}

fn is_quota_hugepages(name: &str) -> bool {
    name.starts_with("hugepages-") || name.starts_with("requests.hugepages-")
}

fn is_standard_resource(name: &str) -> bool {
    STANDARD_RESOURCES.contains(&name) || is_quota_hugepages(name)
}

/// kube's `IsStandardContainerResourceName`.
fn is_standard_container_resource(name: &str) -> bool {
    matches!(name, "cpu" | "memory" | "ephemeral-storage") || name.starts_with("hugepages-")
}

/// kube's `IsNativeResource`: unprefixed, or in `kubernetes.io/`.
fn is_native(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

/// kube's `IsExtendedResourceName`.
fn is_extended(name: &str) -> bool {
    !is_native(name) && !name.starts_with("requests.") && qualified_name_errors(&format!("requests.{name}")).is_empty()
}

/// kube's `IsOvercommitAllowed`.
fn overcommit_allowed(name: &str) -> bool {
    is_native(name) && !name.starts_with("hugepages-")
}

/// kube's `IsIntegerResourceName`.
fn is_integer_resource(name: &str) -> bool {
    matches!(name, "pods" | "resourcequotas" | "services" | "replicationcontrollers" | "secrets" | "configmaps" | "persistentvolumeclaims" | "services.nodeports" | "services.loadbalancers")
        || is_extended(name)
}

/// `field: Invalid value: <rendered>: <detail>`, the value already
/// rendered as Go prints it.
fn invalid(field: &str, rendered: &str, detail: &str) -> Cause {
    Cause { reason: "FieldValueInvalid".into(), message: format!("Invalid value: {rendered}: {detail}"), field: field.into() }
}

/// A string slice as `%#v` prints it: `[]T{"a", "b"}`, `[]T(nil)`.
fn go_slice(ty: &str, v: &Value) -> String {
    match v.as_array() {
        None => format!("[]{ty}(nil)"),
        Some(items) => {
            let parts: Vec<String> = items.iter().map(|x| go_quote(x.as_str().unwrap_or(""))).collect();
            format!("[]{ty}{{{}}}", parts.join(", "))
        }
    }
}

/// kube's `validateResourceName`: a qualified name, and a standard one
/// when unprefixed.
fn resource_name(name: &str, field: &str) -> Vec<Cause> {
    let errs: Vec<Cause> = qualified_name_errors(name).iter().map(|e| invalid(field, &go_quote(name), e)).collect();
    if !errs.is_empty() {
        return errs;
    }
    if !name.contains('/') && !is_standard_resource(name) {
        return vec![invalid(field, &go_quote(name), "must be a standard resource type or fully qualified")];
    }
    Vec::new()
}

/// kube's `validateContainerResourceName`.
fn container_resource_name(name: &str, field: &str) -> Vec<Cause> {
    let mut errs = resource_name(name, field);
    if !name.contains('/') {
        if !is_standard_container_resource(name) {
            errs.push(invalid(field, &go_quote(name), "must be a standard resource for containers"));
        }
    } else if !is_native(name) && !is_extended(name) {
        errs.push(invalid(field, &go_quote(name), "doesn't follow extended resource name standard"));
    }
    errs
}

/// kube's `ValidateResourceQuotaResourceName`.
fn quota_resource_name(name: &str, field: &str) -> Vec<Cause> {
    let mut errs = resource_name(name, field);
    if !name.contains('/') && !is_standard_quota_resource(name) {
        errs.push(invalid(field, &go_quote(name), NOT_QUOTA_RESOURCE));
    }
    errs
}

/// kube's `ValidateResourceQuantityValue`: not negative, and whole for
/// object counts and extended resources.
fn quantity_value(name: &str, q: &Quantity, field: &str) -> Vec<Cause> {
    let mut errs = Vec::new();
    if q.sign() < 0 {
        errs.push(invalid(field, &go_quote(&q.to_string()), NEGATIVE));
    }
    if is_integer_resource(name) && q.milli_value() % 1000 != 0 {
        errs.push(invalid(field, &q.to_string(), NOT_INTEGER));
    }
    errs
}

/// The entries of a resource list (`{"cpu": "1"}`) in key order, with
/// their parsed quantities (unparsable ones were refused at decode).
fn entries(v: &Value) -> Vec<(String, Option<Quantity>)> {
    v.as_object().map(|m| m.iter().map(|(k, x)| (k.clone(), Quantity::from_json(x).ok())).collect()).unwrap_or_default()
}

/// LimitRange: [`validate_limit_range`].
pub struct LimitRanges;

impl Strategy for LimitRanges {
    fn validate(&self, o: &Value) -> Vec<Cause> {
        validate_limit_range(o)
    }
}

/// kube's `ValidateLimitRange` (object meta aside).
pub fn validate_limit_range(o: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let mut types = HashSet::new();
    for (i, item) in o["spec"]["limits"].as_array().map(Vec::as_slice).unwrap_or_default().iter().enumerate() {
        let at = format!("spec.limits[{i}]");
        let ty = item["type"].as_str().unwrap_or("");
        causes.extend(limit_type(ty, &format!("{at}.type")));
        if !types.insert(ty) {
            causes.push(Cause { reason: "FieldValueDuplicate".into(), message: format!("Duplicate value: {}", go_quote(ty)), field: format!("{at}.type") });
        }
        let name_check = |name: &str, field: &str| if matches!(ty, "Pod" | "Container") { container_resource_name(name, field) } else { resource_name(name, field) };
        let mut keys = BTreeSet::new();
        let mut lists: BTreeMap<&str, BTreeMap<String, Quantity>> = BTreeMap::new();
        let mut read = |part: &'static str, causes: &mut Vec<Cause>| {
            for (k, q) in entries(&item[part]) {
                causes.extend(name_check(&k, &format!("{at}.{part}[{k}]")));
                keys.insert(k.clone());
                if let Some(q) = q {
                    lists.entry(part).or_default().insert(k, q);
                }
            }
        };
        read("max", &mut causes);
        read("min", &mut causes);
        if ty == "Pod" {
            for part in ["default", "defaultRequest"] {
                if item[part].as_object().is_some_and(|m| !m.is_empty()) {
                    causes.push(Cause::forbidden(&format!("{at}.{part}"), "may not be specified when `type` is 'Pod'"));
                }
            }
        } else {
            read("default", &mut causes);
            read("defaultRequest", &mut causes);
        }
        if ty == "PersistentVolumeClaim" && item["min"].get("storage").is_none() && item["max"].get("storage").is_none() {
            causes.push(Cause::required(&format!("{at}.limits"), "either minimum or maximum storage value is required, but neither was provided"));
        }
        read("maxLimitRequestRatio", &mut causes);
        let get = |part: &str, k: &str| lists.get(part).and_then(|l| l.get(k)).copied();
        for k in &keys {
            let (min, max, default, request, ratio) = (get("min", k), get("max", k), get("default", k), get("defaultRequest", k), get("maxLimitRequestRatio", k));
            let path = |part: &str| format!("{at}.{part}[{k}]");
            if let (Some(min), Some(max)) = (min, max) {
                if min > max {
                    causes.push(invalid(&path("min"), &min.to_string(), &format!("min value {min} is greater than max value {max}")));
                }
            }
            if let (Some(request), Some(min)) = (request, min) {
                if min > request {
                    causes.push(invalid(&path("defaultRequest"), &request.to_string(), &format!("min value {min} is greater than default request value {request}")));
                }
            }
            if let (Some(request), Some(max)) = (request, max) {
                if request > max {
                    causes.push(invalid(&path("defaultRequest"), &request.to_string(), &format!("default request value {request} is greater than max value {max}")));
                }
            }
            if let (Some(request), Some(default)) = (request, default) {
                if request > default {
                    causes.push(invalid(&path("defaultRequest"), &request.to_string(), &format!("default request value {request} is greater than default limit value {default}")));
                }
            }
            if let (Some(default), Some(min)) = (default, min) {
                if min > default {
                    causes.push(invalid(&path("default"), &min.to_string(), &format!("min value {min} is greater than default value {default}")));
                }
            }
            if let (Some(default), Some(max)) = (default, max) {
                // kube reports the max as the bad value here.
                if default > max {
                    causes.push(invalid(&path("default"), &max.to_string(), &format!("default value {default} is greater than max value {max}")));
                }
            }
            if let Some(ratio) = ratio {
                if ratio < Quantity::from_int(1) {
                    causes.push(invalid(&path("maxLimitRequestRatio"), &ratio.to_string(), &format!("ratio {ratio} is less than 1")));
                }
                if let (Some(min), Some(max)) = (min, max) {
                    let limit = ratio_limit(&ratio, &min, &max);
                    if limit.0 > limit.1 {
                        causes.push(invalid(&path("maxLimitRequestRatio"), &ratio.to_string(), &format!("ratio {ratio} is greater than max/min = {:.6}", limit.1)));
                    }
                }
            }
            if let (Some(default), Some(request)) = (default, request) {
                if !overcommit_allowed(k) && default != request {
                    causes.push(invalid(&path("defaultRequest"), &request.to_string(), &format!("default value {default} must equal to defaultRequest value {request} in {k}")));
                }
            }
        }
    }
    causes
}

/// The ratio and max/min as kube compares them: in thousandths when every
/// value is small enough for that, else in whole units, as `f64`.
fn ratio_limit(ratio: &Quantity, min: &Quantity, max: &Quantity) -> (f64, f64) {
    // kube's `resource.MaxMilliValue`.
    const MAX_MILLI: i128 = (i64::MAX / 1000) as i128;
    if ratio.value() < MAX_MILLI && min.value() < MAX_MILLI && max.value() < MAX_MILLI {
        (ratio.milli_value() as f64 / 1000.0, max.milli_value() as f64 / min.milli_value() as f64)
    } else {
        (ratio.value() as f64, max.value() as f64 / min.value() as f64)
    }
}

/// kube's `validateLimitRangeTypeName`.
fn limit_type(ty: &str, field: &str) -> Vec<Cause> {
    let errs: Vec<Cause> = qualified_name_errors(ty).iter().map(|e| invalid(field, &go_quote(ty), e)).collect();
    if !errs.is_empty() {
        return errs;
    }
    if !ty.contains('/') && !matches!(ty, "Pod" | "Container" | "PersistentVolumeClaim") {
        return vec![invalid(field, &go_quote(ty), "must be a standard limit type or fully qualified")];
    }
    Vec::new()
}

/// ResourceQuota: [`validate_resource_quota`], and scopes that do not
/// change on update; it has a status subresource.
pub struct ResourceQuotas;

impl Strategy for ResourceQuotas {
    fn has_status(&self) -> bool {
        true
    }

    fn validate(&self, o: &Value) -> Vec<Cause> {
        validate_resource_quota(o)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        let mut causes = validate_resource_quota(new);
        let scopes = |o: &Value| -> BTreeSet<String> { o["spec"]["scopes"].as_array().map(|a| a.iter().filter_map(|s| s.as_str().map(String::from)).collect()).unwrap_or_default() };
        if scopes(new) != scopes(old) {
            causes.push(invalid("spec.scopes", &go_slice("core.ResourceQuotaScope", &new["spec"]["scopes"]), "field is immutable"));
        }
        causes
    }
}

/// kube's `ValidateResourceQuota` (object meta aside): spec and status.
pub fn validate_resource_quota(o: &Value) -> Vec<Cause> {
    let spec = &o["spec"];
    let mut causes = Vec::new();
    for (at, list) in [("spec.hard", &spec["hard"]), ("status.hard", &o["status"]["hard"]), ("status.used", &o["status"]["used"])] {
        for (k, q) in entries(list) {
            let field = format!("{at}[{k}]");
            causes.extend(quota_resource_name(&k, &field));
            if let Some(q) = q {
                causes.extend(quantity_value(&k, &q, &field));
            }
        }
        if at == "spec.hard" {
            causes.extend(quota_scopes(spec));
            causes.extend(scope_selector(spec));
        }
    }
    causes
}

/// The scopes kube knows (`IsStandardResourceQuotaScope`).
fn is_standard_scope(scope: &str) -> bool {
    matches!(scope, "Terminating" | "NotTerminating" | "BestEffort" | "NotBestEffort" | "PriorityClass" | "CrossNamespacePodAffinity")
}

/// kube's `IsResourceQuotaScopeValidForResource`.
fn scope_fits(scope: &str, resource: &str) -> bool {
    let pod_count = resource == "pods";
    let pod_compute = matches!(resource, "cpu" | "memory" | "limits.cpu" | "limits.memory" | "requests.cpu" | "requests.memory");
    match scope {
        "Terminating" | "NotTerminating" | "NotBestEffort" | "PriorityClass" | "CrossNamespacePodAffinity" => pod_count || pod_compute,
        "BestEffort" => pod_count,
        _ => true,
    }
}

/// The hard resources kube checks scopes against: standard quota ones.
fn scoped_resources(spec: &Value) -> Vec<String> {
    spec["hard"].as_object().map(|m| m.keys().filter(|k| is_standard_quota_resource(k)).cloned().collect()).unwrap_or_default()
}

/// Whether both scopes of a pair that excludes itself are present.
fn conflicting(scopes: &BTreeSet<&str>) -> bool {
    (scopes.contains("BestEffort") && scopes.contains("NotBestEffort")) || (scopes.contains("Terminating") && scopes.contains("NotTerminating"))
}

/// kube's `validateResourceQuotaScopes`.
fn quota_scopes(spec: &Value) -> Vec<Cause> {
    let Some(scopes) = spec["scopes"].as_array().filter(|a| !a.is_empty()) else { return Vec::new() };
    let shown = go_slice("core.ResourceQuotaScope", &spec["scopes"]);
    let hard = scoped_resources(spec);
    let mut causes = Vec::new();
    let mut set = BTreeSet::new();
    for scope in scopes.iter().map(|s| s.as_str().unwrap_or("")) {
        if !is_standard_scope(scope) {
            causes.push(invalid("spec.scopes", &shown, "unsupported scope"));
        }
        if hard.iter().any(|k| !scope_fits(scope, k)) {
            causes.push(invalid("spec.scopes", &shown, "unsupported scope applied to resource"));
        }
        set.insert(scope);
    }
    if conflicting(&set) {
        causes.push(invalid("spec.scopes", &shown, "conflicting scopes"));
    }
    causes
}

/// A scope selector as Go's `%#v` prints kube's internal type.
fn go_scope_selector(sel: &Value) -> String {
    let exprs: Vec<String> = sel["matchExpressions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|e| {
            format!(
                "core.ScopedResourceSelectorRequirement{{ScopeName:{}, Operator:{}, Values:{}}}",
                go_quote(e["scopeName"].as_str().unwrap_or("")),
                go_quote(e["operator"].as_str().unwrap_or("")),
                go_slice("string", &e["values"])
            )
        })
        .collect();
    let list =
        if sel["matchExpressions"].is_array() { format!("[]core.ScopedResourceSelectorRequirement{{{}}}", exprs.join(", ")) } else { "[]core.ScopedResourceSelectorRequirement(nil)".to_string() };
    format!("core.ScopeSelector{{MatchExpressions:{list}}}")
}

/// kube's `validateScopeSelector` and `validateScopedResourceSelectorRequirement`.
fn scope_selector(spec: &Value) -> Vec<Cause> {
    let sel = &spec["scopeSelector"];
    if !sel.is_object() {
        return Vec::new();
    }
    let at = "spec.scopeSelector.matchExpressions";
    let hard = scoped_resources(spec);
    let mut causes = Vec::new();
    let mut set = BTreeSet::new();
    for e in sel["matchExpressions"].as_array().map(Vec::as_slice).unwrap_or_default() {
        let scope = e["scopeName"].as_str().unwrap_or("");
        let op = e["operator"].as_str().unwrap_or("");
        if !is_standard_scope(scope) {
            causes.push(invalid(&format!("{at}.scopeName"), &go_quote(scope), "unsupported scope"));
        }
        if hard.iter().any(|k| !scope_fits(scope, k)) {
            causes.push(invalid(at, &go_scope_selector(sel), "unsupported scope applied to resource"));
        }
        if matches!(scope, "BestEffort" | "NotBestEffort" | "Terminating" | "NotTerminating" | "CrossNamespacePodAffinity") && op != "Exists" {
            causes.push(invalid(
                &format!("{at}.operator"),
                &go_quote(op),
                "must be 'Exists' when scope is any of ResourceQuotaScopeTerminating, ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity",
            ));
        }
        let values = e["values"].as_array().map_or(0, Vec::len);
        match op {
            "In" | "NotIn" if values == 0 => causes.push(Cause::required(&format!("{at}.values"), "must be at least one value when `operator` is 'In' or 'NotIn' for scope selector")),
            "Exists" | "DoesNotExist" if values != 0 => {
                causes.push(invalid(&format!("{at}.values"), &go_slice("string", &e["values"]), "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector"))
            }
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            _ => causes.push(invalid(&format!("{at}.operator"), &go_quote(op), "not a valid selector operator")),
        }
        set.insert(scope);
    }
    if conflicting(&set) {
        // kube shows spec.scopes here, not the selector.
        causes.push(invalid(at, &go_slice("core.ResourceQuotaScope", &spec["scopes"]), "conflicting scopes"));
    }
    causes
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The causes as the Status message lists them (repeats dropped).
    fn messages(causes: Vec<Cause>) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for m in causes.into_iter().map(|c| format!("{}: {}", c.field, c.message)) {
            if !out.contains(&m) {
                out.push(m);
            }
        }
        out
    }

    #[test]
    fn limit_range_relations_are_kubes() {
        let lr = json!({"spec": {"limits": [{"type": "Container",
            "min": {"cpu": "2"}, "max": {"cpu": "1"},
            "default": {"memory": "1Gi"}, "defaultRequest": {"memory": "2Gi"},
            "maxLimitRequestRatio": {"cpu": "500m"}}]}});
        assert_eq!(
            messages(validate_limit_range(&lr)),
            vec![
                "spec.limits[0].min[cpu]: Invalid value: 2: min value 2 is greater than max value 1",
                "spec.limits[0].maxLimitRequestRatio[cpu]: Invalid value: 500m: ratio 500m is less than 1",
                "spec.limits[0].defaultRequest[memory]: Invalid value: 2Gi: default request value 2Gi is greater than default limit value 1Gi",
            ]
        );
        let ratio = json!({"spec": {"limits": [{"type": "Container", "min": {"cpu": "100m"}, "max": {"cpu": "1"}, "maxLimitRequestRatio": {"cpu": "20"}}]}});
        assert_eq!(messages(validate_limit_range(&ratio)), vec!["spec.limits[0].maxLimitRequestRatio[cpu]: Invalid value: 20: ratio 20 is greater than max/min = 10.000000"]);
    }

    #[test]
    fn limit_range_names_and_types_are_kubes() {
        let lr = json!({"spec": {"limits": [
            {"type": "Pod", "max": {"storage": "1Gi"}, "default": {"cpu": "1"}},
            {"type": "Pod"},
            {"type": "Foo"},
            {"type": "PersistentVolumeClaim", "max": {"cpu": "1"}},
            {"type": "Container", "default": {"example.com/gpu": "2"}, "defaultRequest": {"example.com/gpu": "1"}},
        ]}});
        assert_eq!(
            messages(validate_limit_range(&lr)),
            vec![
                r#"spec.limits[0].max[storage]: Invalid value: "storage": must be a standard resource for containers"#,
                "spec.limits[0].default: Forbidden: may not be specified when `type` is 'Pod'",
                r#"spec.limits[1].type: Duplicate value: "Pod""#,
                r#"spec.limits[2].type: Invalid value: "Foo": must be a standard limit type or fully qualified"#,
                "spec.limits[3].limits: Required value: either minimum or maximum storage value is required, but neither was provided",
                "spec.limits[4].defaultRequest[example.com/gpu]: Invalid value: 1: default value 2 must equal to defaultRequest value 1 in example.com/gpu",
            ]
        );
    }

    #[test]
    fn resource_quota_checks_are_kubes() {
        let rq = json!({"spec": {"hard": {"pods": "-1", "services": "1500m", "foo": "1", "example.com/gpu": "1"}, "scopes": ["BestEffort", "NotBestEffort", "Bogus"]}});
        assert_eq!(
            messages(validate_resource_quota(&rq)),
            vec![
                r#"spec.hard[foo]: Invalid value: "foo": must be a standard resource type or fully qualified"#,
                r#"spec.hard[foo]: Invalid value: "foo": must be a standard resource for quota"#,
                r#"spec.hard[pods]: Invalid value: "-1": must be greater than or equal to 0"#,
                "spec.hard[services]: Invalid value: 1500m: must be an integer",
                r#"spec.scopes: Invalid value: []core.ResourceQuotaScope{"BestEffort", "NotBestEffort", "Bogus"}: unsupported scope applied to resource"#,
                r#"spec.scopes: Invalid value: []core.ResourceQuotaScope{"BestEffort", "NotBestEffort", "Bogus"}: unsupported scope"#,
                r#"spec.scopes: Invalid value: []core.ResourceQuotaScope{"BestEffort", "NotBestEffort", "Bogus"}: conflicting scopes"#,
            ]
        );
        let sel = json!({"spec": {"hard": {"pods": "1"}, "scopeSelector": {"matchExpressions": [{"scopeName": "BestEffort", "operator": "In", "values": ["x"]}]}}});
        assert_eq!(
            messages(validate_resource_quota(&sel)),
            vec!["spec.scopeSelector.matchExpressions.operator: Invalid value: \"In\": must be 'Exists' when scope is any of ResourceQuotaScopeTerminating, ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity"]
        );
        let good = json!({"spec": {"hard": {"pods": "10", "requests.cpu": "1", "count/deployments.apps": "2"}, "scopes": ["NotTerminating"]}});
        assert_eq!(messages(validate_resource_quota(&good)), Vec::<String>::new());
        let old = json!({"spec": {"hard": {"pods": "1"}}});
        assert_eq!(
            messages(ResourceQuotas.validate_update(&json!({"spec": {"hard": {"pods": "1"}, "scopes": ["BestEffort"]}}), &old)),
            vec![r#"spec.scopes: Invalid value: []core.ResourceQuotaScope{"BestEffort"}: field is immutable"#]
        );
    }
}
