//! The audit policy (`audit.k8s.io/v1` `Policy`, kube
//! `audit/policy/{reader,checker}.go`, `apis/audit/validation`).
//!
//! A request is recorded at the level of the first rule that matches it,
//! and not at all when none does. A rule matches when every list it sets
//! holds the request's value:
//!
//! | field | holds |
//! |---|---|
//! | `users` | the user name |
//! | `userGroups` | one of the user's groups |
//! | `verbs` | the request-info verb |
//! | `namespaces` | the namespace (`""` for cluster-scoped); resource requests only |
//! | `resources` | one `{group, resources, resourceNames}` whose group is the request's and whose resources hold `res`, `res/sub`, `*`, `*/sub` or `res/*` |
//! | `nonResourceURLs` | the path, exactly, or by a prefix ending in `*`, or `*`; non-resource requests only |
//!
//! For example `{level: Metadata, resources: [{group: "", resources:
//! ["pods/log"]}]}` matches `GET /api/v1/namespaces/a/pods/p/log` and not
//! `GET /api/v1/namespaces/a/pods/p`; `resources: ["pods"]` matches the
//! second and not the first. The policy's `omitStages` are added to each
//! rule's; a rule's `omitManagedFields`, when set, wins over the policy's.

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::event::{Level, Stage};
use crate::authz::Attributes;

/// The API versions a policy file may be in.
pub const API_VERSIONS: &[&str] = &["audit.k8s.io/v1"];

/// A group's resources in a rule (kube `audit.GroupResources`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupResources {
    /// API group; `""` is the core group.
    #[serde(default)]
    pub group: String,
    /// Resources (`pods`, `pods/log`, `*`, `*/scale`, `pods/*`); empty is
    /// every resource of the group.
    #[serde(default)]
    pub resources: Vec<String>,
    /// Object names; empty is every name.
    #[serde(default)]
    pub resource_names: Vec<String>,
}

/// One rule (kube `audit.PolicyRule`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRule {
    /// The level of the requests it matches.
    #[serde(default = "no_level")]
    pub level: String,
    /// User names.
    #[serde(default)]
    pub users: Vec<String>,
    /// Groups.
    #[serde(default)]
    pub user_groups: Vec<String>,
    /// Verbs.
    #[serde(default)]
    pub verbs: Vec<String>,
    /// Resources.
    #[serde(default)]
    pub resources: Vec<GroupResources>,
    /// Namespaces (`""` matches cluster-scoped requests).
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// Non-resource paths.
    #[serde(default, rename = "nonResourceURLs")]
    pub non_resource_urls: Vec<String>,
    /// Stages not recorded.
    #[serde(default)]
    pub omit_stages: Vec<String>,
    /// Whether `managedFields` are dropped from recorded objects; unset
    /// takes the policy's.
    #[serde(default)]
    pub omit_managed_fields: Option<bool>,
}

fn no_level() -> String {
    String::new()
}

/// A policy file (kube `audit.Policy`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Policy {
    /// The rules, first match wins.
    #[serde(default)]
    pub rules: Vec<PolicyRule>,
    /// Stages no rule records.
    #[serde(default)]
    pub omit_stages: Vec<String>,
    /// Whether `managedFields` are dropped by default.
    #[serde(default)]
    pub omit_managed_fields: bool,
}

/// The same shapes, refusing unknown fields: kube decodes strictly first
/// and falls back to lenient decoding with a warning.
mod strict {
    use serde::Deserialize;

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    #[allow(dead_code)]
    pub struct GroupResources {
        #[serde(default)]
        group: String,
        #[serde(default)]
        resources: Vec<String>,
        #[serde(default)]
        resource_names: Vec<String>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    #[allow(dead_code)]
    pub struct PolicyRule {
        #[serde(default)]
        level: String,
        #[serde(default)]
        users: Vec<String>,
        #[serde(default)]
        user_groups: Vec<String>,
        #[serde(default)]
        verbs: Vec<String>,
        #[serde(default)]
        resources: Vec<GroupResources>,
        #[serde(default)]
        namespaces: Vec<String>,
        #[serde(default, rename = "nonResourceURLs")]
        non_resource_urls: Vec<String>,
        #[serde(default)]
        omit_stages: Vec<String>,
        #[serde(default)]
        omit_managed_fields: Option<bool>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    #[allow(dead_code)]
    pub struct Policy {
        #[serde(default)]
        kind: String,
        #[serde(default)]
        api_version: String,
        #[serde(default)]
        metadata: Option<serde_json::Value>,
        #[serde(default)]
        rules: Vec<PolicyRule>,
        #[serde(default)]
        omit_stages: Vec<String>,
        #[serde(default)]
        omit_managed_fields: bool,
    }
}

/// Why a policy file was refused. The text is kube's, so the server's
/// start-up error reads as kube-apiserver's.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The file could not be read.
    #[error("failed to read file path {path:?}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::sync::Arc<std::io::Error>,
    },
    /// Not YAML or JSON of a policy, or not `audit.k8s.io/v1` `Policy`.
    #[error("failed decoding: {0}")]
    Decode(String),
    /// Field errors (kube's aggregate: one message, or several in brackets).
    #[error("{}", aggregate(.0))]
    Invalid(Vec<String>),
    /// A policy without rules.
    #[error("loaded illegal policy with 0 rules")]
    NoRules,
    /// Any of the above, in a file (kube appends `: from file <path>`).
    #[error("{source}: from file {path}")]
    InFile {
        /// The file.
        path: String,
        /// The error.
        source: Box<Error>,
    },
}

fn aggregate(errors: &[String]) -> String {
    match errors {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

const LEVELS: &[&str] = &["None", "Metadata", "Request", "RequestResponse"];
const STAGES: &[&str] = &["RequestReceived", "ResponseStarted", "ResponseComplete", "Panic"];

/// Go's `%#v` of a `[]string`, as kube's field errors print list values.
fn go_strings(v: &[String]) -> String {
    format!("[]string{{{}}}", v.iter().map(|s| format!("{s:?}")).collect::<Vec<_>>().join(", "))
}

fn validate_stages(stages: &[String], path: &str, errs: &mut Vec<String>) {
    for (i, s) in stages.iter().enumerate() {
        if !STAGES.contains(&s.as_str()) {
            errs.push(format!("{path}[{i}]: Invalid value: {s:?}: allowed stages are {}", STAGES.join(",")));
        }
    }
}

/// A DNS-1123 subdomain (kube `IsDNS1123Subdomain`), the shape of an API
/// group.
fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-') && !l.starts_with('-') && !l.ends_with('-'))
}

/// Checks a policy as kube's `ValidatePolicy`: the field errors, in order.
pub fn validate(p: &Policy) -> Vec<String> {
    let mut errs = Vec::new();
    validate_stages(&p.omit_stages, "omitStages", &mut errs);
    for (i, r) in p.rules.iter().enumerate() {
        let at = format!("rules[{i}]");
        match r.level.as_str() {
            "" => errs.push(format!("{at}.level: Required value")),
            l if LEVELS.contains(&l) => {}
            l => errs.push(format!("{at}.level: Unsupported value: {l:?}: supported values: {}", LEVELS.iter().map(|v| format!("{v:?}")).collect::<Vec<_>>().join(", "))),
        }
        for (j, u) in r.non_resource_urls.iter().enumerate() {
            if u == "*" {
                continue;
            }
            if !u.starts_with('/') {
                errs.push(format!("{at}.nonResourceURLs[{j}]: Invalid value: {u:?}: non-resource URL rules must begin with a '/' character"));
            }
            if !u.is_empty() && u[..u.len() - 1].contains('*') {
                errs.push(format!("{at}.nonResourceURLs[{j}]: Invalid value: {u:?}: non-resource URL wildcards '*' must be the final character of the rule"));
            }
        }
        for (j, g) in r.resources.iter().enumerate() {
            if !g.group.is_empty() && !is_dns_subdomain(&g.group) {
                errs.push(format!(
                    "{at}.resources[{j}].group: Invalid value: {:?}: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
                    g.group
                ));
            }
            if !g.resource_names.is_empty() && g.resources.is_empty() {
                errs.push(format!("{at}.resources[{j}].resourceNames: Invalid value: {}: using resource names requires at least one resource", go_strings(&g.resource_names)));
            }
        }
        validate_stages(&r.omit_stages, &format!("{at}.omitStages"), &mut errs);
        if !r.non_resource_urls.is_empty() && (!r.resources.is_empty() || !r.namespaces.is_empty()) {
            errs.push(format!("{at}.nonResourceURLs: Invalid value: {}: rules cannot apply to both regular resources and non-resource URLs", go_strings(&r.non_resource_urls)));
        }
    }
    errs
}

/// Parses and checks a policy document (YAML or JSON), as kube's
/// `LoadPolicyFromBytes`.
///
/// # Errors
/// [`Error::Decode`] for a document that is not an `audit.k8s.io/v1`
/// `Policy`, [`Error::Invalid`] for field errors, [`Error::NoRules`].
pub fn parse(bytes: &[u8]) -> Result<Policy, Error> {
    let doc: Value = if bytes.iter().all(u8::is_ascii_whitespace) { Value::Null } else { serde_saphyr::from_slice(bytes).map_err(|e| Error::Decode(format!("error converting YAML to JSON: {e}")))? };
    let text = String::from_utf8_lossy(bytes);
    let kind = doc.get("kind").and_then(Value::as_str).unwrap_or("");
    let api_version = doc.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    if kind.is_empty() {
        return Err(Error::Decode(format!("Object 'Kind' is missing in '{}'", text.trim_end())));
    }
    if api_version.is_empty() {
        return Err(Error::Decode(format!("Object 'apiVersion' is missing in '{}'", text.trim_end())));
    }
    if !API_VERSIONS.contains(&api_version) || kind != "Policy" {
        return Err(Error::Decode(format!("no kind {kind:?} is registered for version {api_version:?} in scheme \"k8s.io/apiserver/pkg/audit/scheme.go\"")));
    }
    let policy: Policy = serde_json::from_value(doc.clone()).map_err(|e| Error::Decode(e.to_string()))?;
    if let Err(e) = serde_json::from_value::<strict::Policy>(doc) {
        tracing::warn!("Audit policy contains errors, falling back to lenient decoding: strict decoding error: {e}");
    }
    let errs = validate(&policy);
    if !errs.is_empty() {
        return Err(Error::Invalid(errs));
    }
    if policy.rules.is_empty() {
        return Err(Error::NoRules);
    }
    Ok(policy)
}

/// Reads `--audit-policy-file` (kube `LoadPolicyFromFile`).
///
/// # Errors
/// [`Error::Read`], or what [`parse`] refuses wrapped in
/// [`Error::InFile`].
pub fn load(path: &Path) -> Result<Policy, Error> {
    let bytes = std::fs::read(path).map_err(|e| Error::Read { path: path.display().to_string(), source: std::sync::Arc::new(e) })?;
    parse(&bytes).map_err(|e| Error::InFile { path: path.display().to_string(), source: Box::new(e) })
}

/// What the policy says about one request (kube `RequestAuditConfig`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestConfig {
    /// The level.
    pub level: Level,
    /// Stages not recorded.
    pub omit_stages: Vec<Stage>,
    /// Whether `managedFields` are dropped from recorded objects.
    pub omit_managed_fields: bool,
}

impl RequestConfig {
    /// Whether `stage` is recorded.
    pub fn records(&self, stage: Stage) -> bool {
        !self.omit_stages.contains(&stage)
    }
}

fn level_of(s: &str) -> Level {
    match s {
        "Metadata" => Level::Metadata,
        "Request" => Level::Request,
        "RequestResponse" => Level::RequestResponse,
        _ => Level::None,
    }
}

fn stages_of(names: &[String]) -> Vec<Stage> {
    let mut out = Vec::new();
    for n in names {
        let s = match n.as_str() {
            "RequestReceived" => Stage::RequestReceived,
            "ResponseStarted" => Stage::ResponseStarted,
            "ResponseComplete" => Stage::ResponseComplete,
            "Panic" => Stage::Panic,
            _ => continue,
        };
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

/// A checked policy, ready to evaluate requests (kube
/// `policyRuleEvaluator`).
#[derive(Debug, Clone)]
pub struct Evaluator {
    rules: Vec<(PolicyRule, RequestConfig)>,
    default: RequestConfig,
}

impl Evaluator {
    /// An evaluator of `policy` (checked by [`parse`]).
    pub fn new(policy: Policy) -> Self {
        let rules = policy
            .rules
            .into_iter()
            .map(|r| {
                let mut names = policy.omit_stages.clone();
                names.extend(r.omit_stages.iter().cloned());
                let cfg = RequestConfig { level: level_of(&r.level), omit_stages: stages_of(&names), omit_managed_fields: r.omit_managed_fields.unwrap_or(policy.omit_managed_fields) };
                (r, cfg)
            })
            .collect();
        Evaluator { rules, default: RequestConfig { level: Level::None, omit_stages: stages_of(&policy.omit_stages), omit_managed_fields: policy.omit_managed_fields } }
    }

    /// The config of the first rule matching `attrs` (`user` `None` for a
    /// request that failed authentication), or level None.
    pub fn evaluate(&self, attrs: &Attributes<'_>, authenticated: bool) -> &RequestConfig {
        self.rules.iter().find(|(r, _)| matches(r, attrs, authenticated)).map(|(_, c)| c).unwrap_or(&self.default)
    }
}

fn has(list: &[String], v: &str) -> bool {
    list.iter().any(|x| x == v)
}

/// kube `ruleMatches`.
fn matches(r: &PolicyRule, a: &Attributes<'_>, authenticated: bool) -> bool {
    // A request without a user matches no rule that names users or groups.
    let user_ok = r.users.is_empty() || (authenticated && has(&r.users, &a.user.name));
    let group_ok = r.user_groups.is_empty() || (authenticated && a.user.groups.iter().any(|g| has(&r.user_groups, g)));
    if !user_ok || !group_ok {
        return false;
    }
    if !r.verbs.is_empty() && !has(&r.verbs, a.verb) {
        return false;
    }
    if !r.namespaces.is_empty() || !r.resources.is_empty() {
        return matches_resource(r, a);
    }
    if !r.non_resource_urls.is_empty() {
        return !a.resource_request && r.non_resource_urls.iter().any(|spec| path_matches(a.path, spec));
    }
    true
}

fn path_matches(path: &str, spec: &str) -> bool {
    spec == "*" || spec == path || spec.strip_suffix('*').is_some_and(|prefix| path.starts_with(prefix.trim_end_matches('*')))
}

/// kube `ruleMatchesResource`.
fn matches_resource(r: &PolicyRule, a: &Attributes<'_>) -> bool {
    if !a.resource_request {
        return false;
    }
    if !r.namespaces.is_empty() && !has(&r.namespaces, a.namespace) {
        return false;
    }
    if r.resources.is_empty() {
        return true;
    }
    let combined = if a.subresource.is_empty() { a.resource.to_string() } else { format!("{}/{}", a.resource, a.subresource) };
    r.resources.iter().filter(|g| g.group == a.api_group).any(|g| {
        if g.resources.is_empty() {
            return true;
        }
        if !g.resource_names.is_empty() && !has(&g.resource_names, a.name) {
            return false;
        }
        g.resources.iter().any(|res| res == "*" || *res == combined || (!a.subresource.is_empty() && res.strip_prefix("*/") == Some(a.subresource)) || res.strip_suffix("/*") == Some(a.resource))
    })
}

/// Drops `metadata.managedFields` from an object, or from each item of a
/// list (kube `copyWithoutManagedFields`).
pub fn remove_managed_fields(obj: &mut Value) {
    if let Some(items) = obj.get_mut("items").and_then(Value::as_array_mut) {
        for item in items {
            if let Some(m) = item.get_mut("metadata").and_then(Value::as_object_mut) {
                m.remove("managedFields");
            }
        }
    }
    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("managedFields");
    }
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;
    use crate::authn::UserInfo;

    const POLICY: &str = r#"
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: None
  users: ["system:kube-proxy"]
  verbs: ["watch"]
- level: None
  userGroups: ["system:nodes"]
  nonResourceURLs: ["/healthz*", "/version"]
- level: RequestResponse
  resources:
  - group: ""
    resources: ["pods/log", "*/status"]
  omitStages: ["Panic"]
  omitManagedFields: false
- level: Request
  resources:
  - group: ""
    resources: ["configmaps"]
    resourceNames: ["controller-leader"]
  namespaces: ["kube-system"]
- level: Metadata
  resources:
  - group: "apps"
    resources: ["deployments/*"]
  - group: ""
    resources: ["secrets"]
- level: Request
  resources:
  - group: "rbac.authorization.k8s.io"
- level: Metadata
  namespaces: [""]
- level: Metadata
  nonResourceURLs: ["*"]
omitManagedFields: true
"#;

    struct Req {
        user: UserInfo,
        verb: &'static str,
        resource_request: bool,
        path: &'static str,
        namespace: &'static str,
        group: &'static str,
        resource: &'static str,
        subresource: &'static str,
        name: &'static str,
    }

    // One argument per column of the table below.
    #[allow(clippy::too_many_arguments)]
    fn res(user: &str, groups: &[&str], verb: &'static str, ns: &'static str, group: &'static str, resource: &'static str, sub: &'static str, name: &'static str) -> Req {
        let user = UserInfo { name: user.into(), groups: groups.iter().map(|g| g.to_string()).collect(), ..Default::default() };
        Req { user, verb, resource_request: true, path: "/apis/x", namespace: ns, group, resource, subresource: sub, name }
    }

    fn path(user: &str, groups: &[&str], path: &'static str) -> Req {
        let user = UserInfo { name: user.into(), groups: groups.iter().map(|g| g.to_string()).collect(), ..Default::default() };
        Req { user, verb: "get", resource_request: false, path, namespace: "", group: "", resource: "", subresource: "", name: "" }
    }

    fn level(e: &Evaluator, r: &Req) -> Level {
        let a = Attributes {
            user: &r.user,
            verb: r.verb,
            resource_request: r.resource_request,
            path: r.path,
            namespace: r.namespace,
            api_group: r.group,
            api_version: "v1",
            resource: r.resource,
            subresource: r.subresource,
            name: r.name,
        };
        e.evaluate(&a, true).level
    }

    #[test]
    fn first_matching_rule_wins() {
        let e = Evaluator::new(parse(POLICY.as_bytes()).expect("policy parses"));
        use Level::*;
        let cases: Vec<(Req, Level)> = vec![
            (res("system:kube-proxy", &[], "watch", "", "", "endpoints", "", ""), None),
            (res("system:kube-proxy", &[], "list", "", "", "nodes", "", ""), Metadata),
            (path("kubelet", &["system:nodes"], "/healthz/ready"), None),
            (path("kubelet", &["system:nodes"], "/version"), None),
            (path("kubelet", &["system:nodes"], "/versions"), Metadata),
            (path("bob", &[], "/healthz"), Metadata),
            (res("bob", &[], "get", "a", "", "pods", "log", "p"), RequestResponse),
            (res("bob", &[], "get", "a", "", "pods", "", "p"), None),
            (res("bob", &[], "update", "a", "", "pods", "status", "p"), RequestResponse),
            (res("bob", &[], "update", "a", "apps", "deployments", "status", "p"), Metadata),
            (res("bob", &[], "update", "a", "apps", "deployments", "scale", "p"), Metadata),
            // `res/*` matches the resource itself too, as in kube.
            (res("bob", &[], "get", "a", "apps", "deployments", "", "p"), Metadata),
            (res("bob", &[], "get", "a", "apps", "replicasets", "", "p"), None),
            (res("bob", &[], "update", "kube-system", "", "configmaps", "", "controller-leader"), Request),
            (res("bob", &[], "update", "kube-system", "", "configmaps", "", "other"), None),
            (res("bob", &[], "update", "default", "", "configmaps", "", "controller-leader"), None),
            (res("bob", &[], "get", "a", "", "secrets", "", "s"), Metadata),
            (res("bob", &[], "get", "a", "", "secrets", "x", "s"), None),
            (res("bob", &[], "create", "a", "rbac.authorization.k8s.io", "roles", "", ""), Request),
            (res("bob", &[], "list", "", "", "nodes", "", ""), Metadata),
            (res("bob", &[], "list", "b", "", "events", "", ""), None),
        ];
        for (i, (r, want)) in cases.iter().enumerate() {
            assert_eq!(level(&e, r), *want, "case {i}: {} {} {}/{}/{}", r.verb, r.path, r.resource, r.subresource, r.name);
        }
    }

    #[test]
    fn stages_and_managed_fields_follow_policy_and_rule() {
        let e = Evaluator::new(parse(POLICY.as_bytes()).expect("policy parses"));
        let u = UserInfo::default();
        let a = |resource: &'static str, sub: &'static str| Attributes {
            user: &u,
            verb: "get",
            resource_request: true,
            path: "",
            namespace: "a",
            api_group: "",
            api_version: "v1",
            resource,
            subresource: sub,
            name: "",
        };
        let log = e.evaluate(&a("pods", "log"), true);
        assert_eq!(log.omit_stages, vec![Stage::RequestReceived, Stage::Panic]);
        assert!(!log.omit_managed_fields);
        let secret = e.evaluate(&a("secrets", ""), true);
        assert_eq!(secret.omit_stages, vec![Stage::RequestReceived]);
        assert!(secret.omit_managed_fields);
        assert!(!secret.records(Stage::RequestReceived) && secret.records(Stage::ResponseComplete));
        // A request that failed authentication matches no user rule.
        let proxy = UserInfo { name: "system:kube-proxy".into(), ..Default::default() };
        let w = Attributes { user: &proxy, verb: "watch", resource_request: true, path: "", namespace: "", api_group: "", api_version: "v1", resource: "nodes", subresource: "", name: "" };
        assert_eq!(e.evaluate(&w, true).level, Level::None);
        assert_eq!(e.evaluate(&w, false).level, Level::Metadata);
    }

    #[test]
    fn bad_policies_fail_as_kube() {
        let err = |s: &str| parse(s.as_bytes()).err().map(|e| e.to_string()).unwrap_or_default();
        let head = "apiVersion: audit.k8s.io/v1\nkind: Policy\n";
        assert_eq!(err(head), "loaded illegal policy with 0 rules");
        assert_eq!(err(&format!("{head}rules:\n- users: [a]\n")), "rules[0].level: Required value");
        assert_eq!(err(&format!("{head}rules:\n- level: Everything\n")), r#"rules[0].level: Unsupported value: "Everything": supported values: "None", "Metadata", "Request", "RequestResponse""#);
        assert_eq!(
            err(&format!("{head}rules:\n- level: None\n  nonResourceURLs: [healthz, /a*b]\n")),
            r#"[rules[0].nonResourceURLs[0]: Invalid value: "healthz": non-resource URL rules must begin with a '/' character, rules[0].nonResourceURLs[1]: Invalid value: "/a*b": non-resource URL wildcards '*' must be the final character of the rule]"#
        );
        assert_eq!(
            err(&format!("{head}rules:\n- level: None\n  nonResourceURLs: [/a]\n  namespaces: [b]\n")),
            r#"rules[0].nonResourceURLs: Invalid value: []string{"/a"}: rules cannot apply to both regular resources and non-resource URLs"#
        );
        assert_eq!(
            err(&format!("{head}rules:\n- level: None\n  resources: [{{group: \"\", resourceNames: [x]}}]\n")),
            r#"rules[0].resources[0].resourceNames: Invalid value: []string{"x"}: using resource names requires at least one resource"#
        );
        assert_eq!(
            err(&format!("{head}omitStages: [Later]\nrules:\n- level: None\n")),
            r#"omitStages[0]: Invalid value: "Later": allowed stages are RequestReceived,ResponseStarted,ResponseComplete,Panic"#
        );
        assert!(err("apiVersion: audit.k8s.io/v2\nkind: Policy\nrules: [{level: None}]\n").starts_with(r#"failed decoding: no kind "Policy" is registered for version "audit.k8s.io/v2""#));
        assert!(err("rules: [{level: None}]\n").starts_with("failed decoding: Object 'Kind' is missing in"));
        assert!(err(&format!("{head}rules: 3\n")).starts_with("failed decoding: "));
        // Unknown fields are tolerated, as kube's lenient fallback does.
        assert!(parse(format!("{head}rules:\n- level: None\n  colour: blue\n").as_bytes()).is_ok());
        // The file is named.
        let dir = tempfile::tempdir().expect("tempdir");
        let f = dir.path().join("p.yaml");
        std::fs::write(&f, head).expect("write");
        assert_eq!(load(&f).err().map(|e| e.to_string()).unwrap_or_default(), format!("loaded illegal policy with 0 rules: from file {}", f.display()));
        let missing = dir.path().join("none.yaml");
        assert!(load(&missing).err().map(|e| e.to_string()).unwrap_or_default().starts_with(&format!("failed to read file path {:?}: ", missing.display().to_string())));
    }

    #[test]
    fn managed_fields_are_dropped_from_objects_and_lists() {
        let mut o = serde_json::json!({"metadata": {"name": "a", "managedFields": [{}]}});
        remove_managed_fields(&mut o);
        assert_eq!(o, serde_json::json!({"metadata": {"name": "a"}}));
        let mut l = serde_json::json!({"metadata": {}, "items": [{"metadata": {"name": "a", "managedFields": [{}]}}]});
        remove_managed_fields(&mut l);
        assert_eq!(l["items"][0]["metadata"], serde_json::json!({"name": "a"}));
    }
}
