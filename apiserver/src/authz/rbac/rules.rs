//! Policy rules and how one matches a request (kube
//! `plugin/pkg/auth/authorizer/rbac/rbac.go` `RuleAllows` and
//! `pkg/apis/rbac/v1/evaluation_helpers.go`), and whether some rules cover
//! others (kube `registry/rbac/validation` `Covers`), which bootstrap
//! reconciliation uses to find the rules a role lacks.
//!
//! Matching, field by field (any entry may match):
//!
//! | field | matches |
//! |---|---|
//! | verbs | `*` or the verb |
//! | apiGroups | `*` or the group (`""` is core) |
//! | resources | `*`, `resource` or `resource/subresource` as asked, or `*/subresource` |
//! | resourceNames | empty (every name) or the name |
//! | nonResourceURLs | `*`, the path, or a prefix ending in `*` |

use serde_json::{json, Value};

use crate::authz::Attributes;

/// `*`: every verb, group, resource or URL.
pub const ALL: &str = "*";

/// One rule of a Role or ClusterRole (`rbac/v1` `PolicyRule`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PolicyRule {
    /// Verbs.
    pub verbs: Vec<String>,
    /// API groups.
    pub api_groups: Vec<String>,
    /// Resources, with `/subresource` for subresources.
    pub resources: Vec<String>,
    /// Object names; empty is every name.
    pub resource_names: Vec<String>,
    /// URL paths of non-resource requests.
    pub non_resource_urls: Vec<String>,
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().map(|a| a.iter().filter_map(Value::as_str).map(String::from).collect()).unwrap_or_default()
}

impl PolicyRule {
    /// A rule from its JSON; missing or ill-typed fields are empty.
    pub fn from_json(v: &Value) -> Self {
        PolicyRule {
            verbs: strings(&v["verbs"]),
            api_groups: strings(&v["apiGroups"]),
            resources: strings(&v["resources"]),
            resource_names: strings(&v["resourceNames"]),
            non_resource_urls: strings(&v["nonResourceURLs"]),
        }
    }

    /// The rules of a role object (`rules`, absent or null for none).
    pub fn all_from(role: &Value) -> Vec<Self> {
        role["rules"].as_array().map(|a| a.iter().map(Self::from_json).collect()).unwrap_or_default()
    }

    /// The rule as JSON, empty lists left out as Go's `omitempty` does
    /// (`verbs` is always there).
    pub fn to_json(&self) -> Value {
        let mut m = serde_json::Map::new();
        for (k, v) in [("apiGroups", &self.api_groups), ("resources", &self.resources), ("resourceNames", &self.resource_names), ("nonResourceURLs", &self.non_resource_urls)] {
            if !v.is_empty() {
                m.insert(k.into(), json!(v));
            }
        }
        m.insert("verbs".into(), json!(self.verbs));
        Value::Object(m)
    }

    /// Whether the rule allows `attrs` (kube `RuleAllows`).
    pub fn allows(&self, attrs: &Attributes<'_>) -> bool {
        if attrs.resource_request {
            let combined = if attrs.subresource.is_empty() { attrs.resource.to_string() } else { format!("{}/{}", attrs.resource, attrs.subresource) };
            verb_matches(self, attrs.verb) && api_group_matches(self, attrs.api_group) && resource_matches(self, &combined, attrs.subresource) && resource_name_matches(self, attrs.name)
        } else {
            verb_matches(self, attrs.verb) && non_resource_url_matches(self, attrs.path)
        }
    }
}

fn any_or(list: &[String], want: &str) -> bool {
    list.iter().any(|x| x == ALL || x == want)
}

/// kube `VerbMatches`.
pub fn verb_matches(rule: &PolicyRule, verb: &str) -> bool {
    any_or(&rule.verbs, verb)
}

/// kube `APIGroupMatches`.
pub fn api_group_matches(rule: &PolicyRule, group: &str) -> bool {
    any_or(&rule.api_groups, group)
}

/// kube `ResourceMatches`: `combined` is `resource` or
/// `resource/subresource`; `*/<subresource>` matches that subresource of
/// every resource.
pub fn resource_matches(rule: &PolicyRule, combined: &str, subresource: &str) -> bool {
    rule.resources.iter().any(|r| r == ALL || r == combined || (!subresource.is_empty() && r.len() == subresource.len() + 2 && r.starts_with("*/") && r.ends_with(subresource)))
}

/// kube `ResourceNameMatches`: no names means every name.
pub fn resource_name_matches(rule: &PolicyRule, name: &str) -> bool {
    rule.resource_names.is_empty() || rule.resource_names.iter().any(|n| n == name)
}

/// kube `NonResourceURLMatches`: `*`, the path itself, or a prefix
/// written with a trailing `*`.
pub fn non_resource_url_matches(rule: &PolicyRule, path: &str) -> bool {
    rule.non_resource_urls.iter().any(|u| u == ALL || u == path || u.strip_suffix('*').is_some_and(|prefix| path.starts_with(prefix)))
}

/// The rule split into rules of one verb, group, resource and name each
/// (kube `BreakdownRule`); non-resource rules into one verb and URL each.
pub fn breakdown(rule: &PolicyRule) -> Vec<PolicyRule> {
    let one = |s: &String| vec![s.clone()];
    let mut out = Vec::new();
    for group in &rule.api_groups {
        for resource in &rule.resources {
            for verb in &rule.verbs {
                if rule.resource_names.is_empty() {
                    out.push(PolicyRule { api_groups: one(group), resources: one(resource), verbs: one(verb), ..Default::default() });
                }
                for name in &rule.resource_names {
                    out.push(PolicyRule { api_groups: one(group), resources: one(resource), verbs: one(verb), resource_names: one(name), ..Default::default() });
                }
            }
        }
    }
    for url in &rule.non_resource_urls {
        for verb in &rule.verbs {
            out.push(PolicyRule { non_resource_urls: one(url), verbs: one(verb), ..Default::default() });
        }
    }
    out
}

fn has_all(list: &[String], want: &[String]) -> bool {
    want.iter().all(|w| list.iter().any(|x| x == w))
}

/// Whether `owner` grants everything `servant` does (kube `ruleCovers`,
/// for a `servant` broken down by [`breakdown`]).
fn rule_covers(owner: &PolicyRule, servant: &PolicyRule) -> bool {
    let verbs = owner.verbs.iter().any(|v| v == ALL) || has_all(&owner.verbs, &servant.verbs);
    let groups = owner.api_groups.iter().any(|g| g == ALL) || has_all(&owner.api_groups, &servant.api_groups);
    let resources =
        servant.resources.iter().all(|r| owner.resources.iter().any(|o| o == ALL || o == r) || r.split_once('/').is_some_and(|(_, sub)| owner.resources.iter().any(|o| *o == format!("*/{sub}"))));
    let urls = servant.non_resource_urls.iter().all(|u| owner.non_resource_urls.iter().any(|o| o == ALL || o == u || o.strip_suffix('*').is_some_and(|p| u.starts_with(p))));
    // A rule for every name is covered only by a rule for every name.
    let names = owner.resource_names.is_empty() || (!servant.resource_names.is_empty() && has_all(&owner.resource_names, &servant.resource_names));
    verbs && groups && resources && urls && names
}

/// Whether `owner` covers every rule of `servant`, and the broken-down
/// rules it does not cover (kube `validation.Covers`).
pub fn covers(owner: &[PolicyRule], servant: &[PolicyRule]) -> (bool, Vec<PolicyRule>) {
    let missing: Vec<PolicyRule> = servant.iter().flat_map(breakdown).filter(|s| !owner.iter().any(|o| rule_covers(o, s))).collect();
    (missing.is_empty(), missing)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authn::UserInfo;

    fn rule(verbs: &[&str], groups: &[&str], resources: &[&str], names: &[&str]) -> PolicyRule {
        let v = |x: &[&str]| x.iter().map(|s| s.to_string()).collect();
        PolicyRule { verbs: v(verbs), api_groups: v(groups), resources: v(resources), resource_names: v(names), non_resource_urls: Vec::new() }
    }

    fn urls(verbs: &[&str], urls: &[&str]) -> PolicyRule {
        let v = |x: &[&str]| x.iter().map(|s| s.to_string()).collect();
        PolicyRule { verbs: v(verbs), non_resource_urls: v(urls), ..Default::default() }
    }

    fn attrs<'a>(user: &'a UserInfo, verb: &'a str, group: &'a str, resource: &'a str, sub: &'a str, name: &'a str) -> Attributes<'a> {
        Attributes { user, verb, resource_request: true, path: "", namespace: "default", api_group: group, api_version: "v1", resource, subresource: sub, name }
    }

    #[test]
    fn resource_rules_match_as_kube() {
        let u = UserInfo::default();
        // (rule, verb, group, resource, subresource, name, allowed)
        let cases: Vec<(PolicyRule, &str, &str, &str, &str, &str, bool)> = vec![
            (rule(&["get"], &[""], &["pods"], &[]), "get", "", "pods", "", "x", true),
            (rule(&["get"], &[""], &["pods"], &[]), "list", "", "pods", "", "", false),
            (rule(&["get"], &[""], &["pods"], &[]), "get", "apps", "pods", "", "", false),
            (rule(&["get"], &[""], &["pods"], &[]), "get", "", "pods", "log", "x", false),
            (rule(&["get"], &[""], &["pods/log"], &[]), "get", "", "pods", "log", "x", true),
            (rule(&["get"], &[""], &["pods/log"], &[]), "get", "", "pods", "", "x", false),
            (rule(&["get"], &[""], &["*/log"], &[]), "get", "", "pods", "log", "x", true),
            (rule(&["get"], &[""], &["*/log"], &[]), "get", "", "pods", "exec", "x", false),
            (rule(&["get"], &[""], &["*/log"], &[]), "get", "", "log", "", "x", false),
            (rule(&["*"], &["*"], &["*"], &[]), "delete", "apps", "deployments", "scale", "d", true),
            (rule(&["get"], &[""], &["configmaps"], &["a"]), "get", "", "configmaps", "", "a", true),
            (rule(&["get"], &[""], &["configmaps"], &["a"]), "get", "", "configmaps", "", "b", false),
            // A list has no name: a rule with names does not allow it.
            (rule(&["list"], &[""], &["configmaps"], &["a"]), "list", "", "configmaps", "", "", false),
            (rule(&["create"], &["apps"], &["deployments"], &[]), "create", "apps", "deployments", "", "", true),
            (rule(&[], &["*"], &["*"], &[]), "get", "", "pods", "", "", false),
        ];
        for (i, (r, verb, group, res, sub, name, want)) in cases.into_iter().enumerate() {
            assert_eq!(r.allows(&attrs(&u, verb, group, res, sub, name)), want, "case {i}: {r:?} {verb} {group}/{res}/{sub} {name}");
        }
    }

    #[test]
    fn non_resource_rules_match_as_kube() {
        let u = UserInfo::default();
        let cases: Vec<(PolicyRule, &str, &str, bool)> = vec![
            (urls(&["get"], &["/healthz"]), "get", "/healthz", true),
            (urls(&["get"], &["/healthz"]), "get", "/healthz/etcd", false),
            (urls(&["get"], &["/healthz/*"]), "get", "/healthz/etcd", true),
            (urls(&["get"], &["/api/*"]), "get", "/api", false),
            (urls(&["get"], &["/api", "/api/*"]), "get", "/api", true),
            (urls(&["get"], &["*"]), "get", "/metrics", true),
            (urls(&["get"], &["/metrics"]), "post", "/metrics", false),
            // A resource rule never allows a path.
            (rule(&["*"], &["*"], &["*"], &[]), "get", "/metrics", false),
        ];
        for (r, verb, path, want) in cases {
            let a = Attributes { user: &u, verb, resource_request: false, path, namespace: "", api_group: "", api_version: "", resource: "", subresource: "", name: "" };
            assert_eq!(r.allows(&a), want, "{r:?} {verb} {path}");
        }
    }

    #[test]
    fn covers_finds_missing_rules() {
        let owner = vec![rule(&["get", "list"], &[""], &["pods"], &[]), urls(&["get"], &["/api/*"])];
        assert!(covers(&owner, &[rule(&["get"], &[""], &["pods"], &[])]).0);
        assert!(covers(&owner, &[urls(&["get"], &["/api/v1"])]).0);
        let (ok, missing) = covers(&owner, &[rule(&["get", "watch"], &[""], &["pods", "secrets"], &[])]);
        assert!(!ok);
        assert_eq!(missing, vec![rule(&["watch"], &[""], &["pods"], &[]), rule(&["get"], &[""], &["secrets"], &[]), rule(&["watch"], &[""], &["secrets"], &[])]);
        assert!(covers(&[rule(&["*"], &["*"], &["*"], &[])], &[rule(&["get"], &["apps"], &["deployments/scale"], &["x"])]).0);
        assert!(!covers(&[rule(&["get"], &[""], &["configmaps"], &["a"])], &[rule(&["get"], &[""], &["configmaps"], &[])]).0);
    }
}
