//! Which writes an admission webhook or policy looks at (kube
//! `admission/plugin/webhook/predicates` and `admission/plugin/policy/matching`):
//! `rules` (operations, apiGroups, apiVersions, resources, scope), the
//! `namespaceSelector` and the `objectSelector`, shared by webhook
//! configurations and by policies' `matchConstraints` and bindings'
//! `matchResources` (whose `resourceRules` and `excludeResourceRules` are
//! the same rules with `resourceNames`).
//!
//! `matchPolicy: Equivalent` also matches a request for another version of
//! the same group and resource (kube's equivalent resources); this server
//! passes the object as the client's version, without converting it to the
//! rule's version.

use serde_json::Value;

use super::sources::Sources;
use super::Attributes;
use crate::selectors::LabelSelector;

/// Whether one `RuleWithOperations` (or `NamedRuleWithOperations`) matches
/// `attrs`; `equivalent` is `matchPolicy: Equivalent`.
///
/// - `operations`: the operation or `*`;
/// - `apiGroups`, `apiVersions`: the request's or `*` (`apiVersions` any
///   version when `equivalent`);
/// - `resources`: `res` or `res/sub`, where `*` stands for any resource or
///   subresource: `*` matches every resource without subresource, `pods/*`
///   pods and all of its subresources, `*/*` everything, `*/scale` every
///   scale subresource;
/// - `scope`: `*` (default), `Cluster` (no namespace) or `Namespaced`;
/// - `resourceNames` (policies only): empty, or the object's name.
pub fn rule_matches(rule: &Value, attrs: &Attributes<'_>, equivalent: bool) -> bool {
    let has = |field: &str, want: &str| rule[field].as_array().is_some_and(|a| a.iter().any(|v| v.as_str().is_some_and(|v| v == "*" || v == want)));
    if !has("operations", attrs.operation.as_str()) || !has("apiGroups", attrs.resource.group) {
        return false;
    }
    if !equivalent && !has("apiVersions", attrs.resource.version) {
        return false;
    }
    if equivalent && rule["apiVersions"].as_array().is_none_or(Vec::is_empty) {
        return false;
    }
    let resource_ok = rule["resources"].as_array().is_some_and(|a| {
        a.iter().filter_map(Value::as_str).any(|r| {
            let (res, sub) = r.split_once('/').unwrap_or((r, ""));
            (res == "*" || res == attrs.resource.resource) && (sub == "*" || sub == attrs.subresource)
        })
    });
    if !resource_ok {
        return false;
    }
    let scope_ok = match rule["scope"].as_str().unwrap_or("*") {
        "Cluster" => attrs.namespace.is_empty() || is_namespace_itself(attrs),
        "Namespaced" => !attrs.namespace.is_empty(),
        _ => true,
    };
    if !scope_ok {
        return false;
    }
    match rule["resourceNames"].as_array() {
        Some(names) if !names.is_empty() => names.iter().any(|n| n.as_str() == Some(attrs.name)),
        _ => true,
    }
}

/// Whether the request is about a Namespace object itself.
fn is_namespace_itself(attrs: &Attributes<'_>) -> bool {
    attrs.resource.group.is_empty() && attrs.resource.resource == "namespaces"
}

/// Why a selector could not be checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatchError(pub String);

/// Whether `selector` (a `metav1.LabelSelector`; absent or `{}` selects
/// everything) matches the namespace of the request (kube's
/// `MatchNamespaceSelector`):
///
/// - a cluster-scoped object other than a Namespace always matches;
/// - a Namespace is matched by its own labels (the new object's, or the
///   old one's for a delete);
/// - any other object by its namespace's labels, as the admission feed
///   last saw them.
///
/// # Errors
/// The namespace is not known (yet): kube answers that it could not
/// find it; callers apply their failure policy.
pub fn namespace_matches(selector: &Value, attrs: &Attributes<'_>, sources: &Sources) -> Result<bool, MatchError> {
    let sel = LabelSelector::from_object(selector);
    if sel.is_empty() {
        return Ok(true);
    }
    if is_namespace_itself(attrs) {
        let obj = attrs.object.as_ref().or(attrs.old_object).unwrap_or(&Value::Null);
        return Ok(sel.matches_object(obj));
    }
    if attrs.namespace.is_empty() {
        return Ok(true);
    }
    match sources.namespace(attrs.namespace) {
        Some(ns) => Ok(sel.matches_object(&ns)),
        None => Err(MatchError(format!("namespace \"{}\" not found", attrs.namespace))),
    }
}

/// Whether `selector` matches the object or the old object (kube's
/// `MatchObjectSelector`: either one's labels may match).
pub fn object_matches(selector: &Value, attrs: &Attributes<'_>) -> bool {
    let sel = LabelSelector::from_object(selector);
    if sel.is_empty() {
        return true;
    }
    attrs.object.as_ref().is_some_and(|o| sel.matches_object(o)) || attrs.old_object.is_some_and(|o| sel.matches_object(o))
}

/// Whether the `matchResources` / `matchConstraints` of a policy or binding
/// match (kube's policy `Matcher`): the selectors, then some
/// `resourceRules` entry, then no `excludeResourceRules` entry. An absent
/// `matchResources` matches everything (bindings may leave it out).
///
/// # Errors
/// As [`namespace_matches`].
pub fn resources_match(match_resources: &Value, attrs: &Attributes<'_>, sources: &Sources) -> Result<bool, MatchError> {
    if match_resources.is_null() {
        return Ok(true);
    }
    if !namespace_matches(&match_resources["namespaceSelector"], attrs, sources)? || !object_matches(&match_resources["objectSelector"], attrs) {
        return Ok(false);
    }
    let equivalent = match_resources["matchPolicy"].as_str() != Some("Exact");
    let rules = match_resources["resourceRules"].as_array();
    // A binding without resourceRules defers to its policy's constraints.
    let included = match rules {
        Some(r) if !r.is_empty() => r.iter().any(|r| rule_matches(r, attrs, equivalent)),
        _ => true,
    };
    let excluded = match_resources["excludeResourceRules"].as_array().is_some_and(|r| r.iter().any(|r| rule_matches(r, attrs, equivalent)));
    Ok(included && !excluded)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::testing::TestRequest;
    use crate::admission::{Kind, Operation, Resource};
    use serde_json::json;

    fn check(rule: Value, resource: &str, sub: &str, ns: &str, op: Operation) -> bool {
        let req = TestRequest::default();
        let pod = json!({"metadata": {"name": "x", "labels": {"a": "b"}}});
        let attrs = Attributes { operation: op, subresource: sub, ..req.create(Resource { group: "", version: "v1", resource }, Kind { group: "", version: "v1", kind: "Pod" }, "x", ns, pod) };
        rule_matches(&rule, &attrs, false)
    }

    #[test]
    fn resources_with_wildcards_and_subresources() {
        let rule = |res: &[&str]| json!({"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": res});
        assert!(check(rule(&["pods"]), "pods", "", "default", Operation::Create));
        assert!(!check(rule(&["pods"]), "pods", "status", "default", Operation::Create));
        assert!(check(rule(&["pods/*"]), "pods", "ephemeralcontainers", "default", Operation::Create));
        assert!(check(rule(&["pods/*"]), "pods", "", "default", Operation::Create));
        assert!(check(rule(&["*"]), "configmaps", "", "default", Operation::Create));
        assert!(!check(rule(&["*"]), "pods", "status", "default", Operation::Create));
        assert!(check(rule(&["*/*"]), "pods", "status", "default", Operation::Create));
        assert!(check(rule(&["pods/ephemeralcontainers"]), "pods", "ephemeralcontainers", "default", Operation::Create));
        assert!(!check(rule(&["pods"]), "pods", "", "default", Operation::Update));
    }

    #[test]
    fn scope_and_operations() {
        let rule = |scope: &str| json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "scope": scope});
        assert!(check(rule("Namespaced"), "pods", "", "default", Operation::Delete));
        assert!(!check(rule("Namespaced"), "nodes", "", "", Operation::Delete));
        assert!(check(rule("Cluster"), "nodes", "", "", Operation::Create));
        assert!(!check(rule("Cluster"), "pods", "", "default", Operation::Create));
        assert!(check(rule("*"), "pods", "", "default", Operation::Update));
    }
}
