//! `PodSecurity` (kube `plugin/pkg/admission/security/podsecurity` over
//! `k8s.io/pod-security-admission`): the Pod Security Standards, chosen per
//! namespace by its labels.
//!
//! A namespace names up to three levels (`privileged`, `baseline`,
//! `restricted`), each with a policy version (`latest` or `v1.<minor>`,
//! default `latest`):
//!
//! | label | what a violation does |
//! |---|---|
//! | `pod-security.kubernetes.io/enforce` | a pod is refused: 403 `pods "x" is forbidden: violates PodSecurity "restricted:latest": ...` |
//! | `pod-security.kubernetes.io/audit` | the audit event gets `pod-security.kubernetes.io/audit-violations: would violate PodSecurity "...": ...` |
//! | `pod-security.kubernetes.io/warn` | the client gets a warning `would violate PodSecurity "...": ...` |
//!
//! and `pod-security.kubernetes.io/<mode>-version` beside each. Unlabelled
//! modes take the configured defaults (`privileged:latest`); an enforce
//! level stricter than the warn level also warns at it, unless warn is
//! labelled. Which checks a level and version run is in [`checks`].
//!
//! What is checked, as kube does:
//! - pods on create, and on an update that changes a container image or adds
//!   a container or an ephemeral container (other updates cannot weaken a
//!   pod); subresources `status`, `binding`, `eviction`, `exec`, `attach`,
//!   `log`, `portforward` and `proxy` are not checked;
//! - the pod templates of Deployments, ReplicaSets, StatefulSets,
//!   DaemonSets, Jobs, CronJobs, ReplicationControllers and PodTemplates on
//!   create and update: only audit and warn apply to them, never enforce (the
//!   pods they make are checked when created), and their subresources
//!   (`scale`, `status`) are not checked;
//! - namespaces on create and update: invalid labels are refused (422);
//!   raising the enforce level warns about existing pods that would not
//!   be admitted now: `existing pods in namespace "x" violate the new
//!   PodSecurity enforce level "restricted:latest"` then one warning per
//!   distinct set of violations, `<pod> (and N other pods): <reasons>`.
//!
//! Every checked pod request records `pod-security.kubernetes.io/enforce-policy`
//! in the audit event; exempt requests record `pod-security.kubernetes.io/exempt`
//! (`namespace`, `user` or `runtimeClass`), and a namespace with invalid
//! labels `pod-security.kubernetes.io/error` (its modes then fall back:
//! enforce to `restricted`, audit and warn to `privileged`).
//!
//! Namespaces are read from the local copy ([`Sources`]), and from the
//! store when the copy does not have the namespace (yet), as kube's plugin
//! falls back from its informer to a live GET.

pub mod checks;

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value};

use self::checks::{evaluate, PodView, Verdict};
use super::sources::Sources;
use super::{Attributes, Operation, Validating};
use crate::errors::go_quote;
use crate::errors::{Cause, Status};
use crate::meta;
use crate::storage::{keys, ListOptions, Storage};

/// The prefix of the namespace labels and of the audit annotations.
pub const PREFIX: &str = "pod-security.kubernetes.io/";
/// The enforce level label.
pub const ENFORCE_LABEL: &str = "pod-security.kubernetes.io/enforce";
/// The enforce version label.
pub const ENFORCE_VERSION_LABEL: &str = "pod-security.kubernetes.io/enforce-version";
/// The audit level label.
pub const AUDIT_LABEL: &str = "pod-security.kubernetes.io/audit";
/// The audit version label.
pub const AUDIT_VERSION_LABEL: &str = "pod-security.kubernetes.io/audit-version";
/// The warn level label.
pub const WARN_LABEL: &str = "pod-security.kubernetes.io/warn";
/// The warn version label.
pub const WARN_VERSION_LABEL: &str = "pod-security.kubernetes.io/warn-version";

/// The most pods a namespace label update looks at (kube's
/// `defaultNamespaceMaxPodsToCheck`).
const MAX_PODS_TO_CHECK: usize = 3000;
/// How long a namespace label update waits for the pod list (kube's
/// `defaultNamespacePodCheckTimeout`).
const POD_LIST_TIMEOUT: Duration = Duration::from_secs(1);

/// Pod subresources that cannot change what a pod runs.
const IGNORED_POD_SUBRESOURCES: &[&str] = &["exec", "attach", "binding", "eviction", "log", "portforward", "proxy", "status"];

/// The resources with a pod template: (group, resource).
const POD_CONTROLLERS: &[(&str, &str)] = &[
    ("", "replicationcontrollers"),
    ("", "podtemplates"),
    ("apps", "replicasets"),
    ("apps", "deployments"),
    ("apps", "statefulsets"),
    ("apps", "daemonsets"),
    ("batch", "jobs"),
    ("batch", "cronjobs"),
];

/// A Pod Security Standards level, least strict first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// Anything goes.
    Privileged,
    /// Known privilege escalations are prevented.
    Baseline,
    /// Current pod hardening practice.
    Restricted,
}

impl Level {
    /// `privileged`, `baseline` or `restricted`; anything else is `None`.
    pub fn parse(s: &str) -> Option<Level> {
        match s {
            "privileged" => Some(Level::Privileged),
            "baseline" => Some(Level::Baseline),
            "restricted" => Some(Level::Restricted),
            _ => None,
        }
    }

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Privileged => "privileged",
            Level::Baseline => "baseline",
            Level::Restricted => "restricted",
        }
    }
}

/// A policy version: the checks as they were in Kubernetes `v1.<minor>`,
/// or the newest ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Version {
    /// `v1.<minor>`.
    Minor(u64),
    /// `latest`.
    Latest,
}

impl Version {
    /// `latest`, or `v1.` and a minor number without leading zeros (kube's
    /// `^v1\.([0-9]|[1-9][0-9]*)$`); anything else is `None`.
    pub fn parse(s: &str) -> Option<Version> {
        if s == "latest" {
            return Some(Version::Latest);
        }
        let digits = s.strip_prefix("v1.")?;
        let canonical = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) && (digits == "0" || !digits.starts_with('0'));
        canonical.then(|| digits.parse().ok().map(Version::Minor)).flatten()
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Version::Minor(m) => write!(f, "v1.{m}"),
            Version::Latest => f.write_str("latest"),
        }
    }
}

/// A level at a version: `restricted:latest`, `baseline:v1.24`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LevelVersion {
    /// The level.
    pub level: Level,
    /// The version.
    pub version: Version,
}

impl LevelVersion {
    /// `privileged:latest`, the default of every mode.
    pub const PRIVILEGED: LevelVersion = LevelVersion { level: Level::Privileged, version: Version::Latest };

    /// Whether both check the same: both privileged, or equal.
    fn equivalent(&self, other: &LevelVersion) -> bool {
        (self.level == Level::Privileged && other.level == Level::Privileged) || self == other
    }

    /// The checks' verdict on `pod`.
    fn evaluate(&self, pod: &PodView<'_>) -> Verdict {
        evaluate(self.level, self.version, pod)
    }
}

impl fmt::Display for LevelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.level.as_str(), self.version)
    }
}

/// What a namespace asks for in each mode (kube's `api.Policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Refuse pods that violate it.
    pub enforce: LevelVersion,
    /// Annotate audit events of objects that violate it.
    pub audit: LevelVersion,
    /// Warn the client about objects that violate it.
    pub warn: LevelVersion,
}

impl Default for Policy {
    /// `privileged:latest` in every mode.
    fn default() -> Self {
        Policy { enforce: LevelVersion::PRIVILEGED, audit: LevelVersion::PRIVILEGED, warn: LevelVersion::PRIVILEGED }
    }
}

const LEVEL_ERROR: &str = "must be one of privileged, baseline, restricted";
const VERSION_ERROR: &str = r#"must be "latest" or "v1.x""#;

impl Policy {
    /// The policy of a namespace with `labels` (kube's `PolicyToEvaluate`):
    /// `defaults` overridden by the labels present, and warn raised to
    /// enforce when enforce is labelled, stricter, and warn is not
    /// labelled. A bad value is returned as a cause on
    /// `metadata.labels[<label>]` (in label order) and replaced: an enforce
    /// level by `restricted`, an audit or warn level by `privileged`, a
    /// version by `latest`.
    pub fn from_labels(labels: Option<&Map<String, Value>>, defaults: &Policy) -> (Policy, Vec<Cause>) {
        let mut p = *defaults;
        let mut errors = Vec::new();
        let Some(labels) = labels.filter(|l| !l.is_empty()) else {
            return (p, errors);
        };
        let enforce_level = label_level(labels, ENFORCE_LABEL, Level::Restricted, &mut errors);
        let valid_enforce_level = errors.is_empty() && enforce_level.is_some();
        if let Some(l) = enforce_level {
            p.enforce.level = l;
        }
        if let Some(v) = label_version(labels, ENFORCE_VERSION_LABEL, &mut errors) {
            p.enforce.version = v;
        }
        if let Some(l) = label_level(labels, AUDIT_LABEL, Level::Privileged, &mut errors) {
            p.audit.level = l;
        }
        if let Some(v) = label_version(labels, AUDIT_VERSION_LABEL, &mut errors) {
            p.audit.version = v;
        }
        let warn_level = label_level(labels, WARN_LABEL, Level::Privileged, &mut errors);
        if let Some(l) = warn_level {
            p.warn.level = l;
        }
        let warn_version = label_version(labels, WARN_VERSION_LABEL, &mut errors);
        if let Some(v) = warn_version {
            p.warn.version = v;
        }
        if warn_level.is_none() && valid_enforce_level && p.enforce.level > p.warn.level {
            p.warn.level = p.enforce.level;
            if warn_version.is_none() {
                p.warn.version = p.enforce.version;
            }
        }
        (p, errors)
    }

    /// Whether every mode is privileged (nothing to check).
    pub fn fully_privileged(&self) -> bool {
        [self.enforce, self.audit, self.warn].iter().all(|lv| lv.level == Level::Privileged)
    }

    fn equivalent(&self, other: &Policy) -> bool {
        self.enforce.equivalent(&other.enforce) && self.audit.equivalent(&other.audit) && self.warn.equivalent(&other.warn)
    }
}

/// A label's value (`""` when it is not a string).
fn label<'a>(labels: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    labels.get(key).map(|v| v.as_str().unwrap_or(""))
}

/// The level `key` names, if labelled; `fallback` and a cause in `errors`
/// when the value is not a level.
fn label_level(labels: &Map<String, Value>, key: &str, fallback: Level, errors: &mut Vec<Cause>) -> Option<Level> {
    let v = label(labels, key)?;
    Some(Level::parse(v).unwrap_or_else(|| {
        errors.push(Cause::invalid(&format!("metadata.labels[{key}]"), &Value::String(v.to_string()), LEVEL_ERROR));
        fallback
    }))
}

/// The version `key` names, if labelled; `latest` and a cause in `errors`
/// when the value is not a version.
fn label_version(labels: &Map<String, Value>, key: &str, errors: &mut Vec<Cause>) -> Option<Version> {
    let v = label(labels, key)?;
    Some(Version::parse(v).unwrap_or_else(|| {
        errors.push(Cause::invalid(&format!("metadata.labels[{key}]"), &Value::String(v.to_string()), VERSION_ERROR));
        Version::Latest
    }))
}

/// Requests that are never checked (kube's `PodSecurityConfiguration`
/// `exemptions`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Exemptions {
    /// Requests by these users.
    pub usernames: Vec<String>,
    /// Objects in these namespaces.
    pub namespaces: Vec<String>,
    /// Pods (and templates) with these `runtimeClassName`s.
    pub runtime_classes: Vec<String>,
}

/// The plugin's configuration (kube's `PodSecurityConfiguration`): the
/// policy of unlabelled modes, and exemptions. The default is
/// `privileged:latest` everywhere and no exemptions, as kube-apiserver
/// runs without `--admission-control-config-file`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Config {
    /// The policy of modes a namespace does not label.
    pub defaults: Policy,
    /// What is never checked.
    pub exemptions: Exemptions,
}

/// The `apiVersion`s of `PodSecurityConfiguration`.
const CONFIG_API_VERSIONS: &[&str] = &["pod-security.admission.config.k8s.io/v1", "pod-security.admission.config.k8s.io/v1beta1", "pod-security.admission.config.k8s.io/v1alpha1"];

const DNS1123_LABEL_ERROR: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS1123_SUBDOMAIN_ERROR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

fn is_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty() && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-') && b[0] != b'-' && b[b.len() - 1] != b'-'
}

/// Why a namespace name (`label`) or runtime class name (subdomain) is
/// not one, in kube's words.
fn name_errors(name: &str, subdomain: bool) -> Vec<&'static str> {
    let mut errors = Vec::new();
    if subdomain {
        if name.len() > 253 {
            errors.push("must be no more than 253 characters");
        }
        if !name.split('.').all(is_dns_label) {
            errors.push(DNS1123_SUBDOMAIN_ERROR);
        }
    } else {
        if name.len() > 63 {
            errors.push("must be no more than 63 characters");
        }
        if !is_dns_label(name) {
            errors.push(DNS1123_LABEL_ERROR);
        }
    }
    errors
}

impl Config {
    /// Reads a `PodSecurityConfiguration`
    /// (`pod-security.admission.config.k8s.io/v1`, `v1beta1` or
    /// `v1alpha1`), kube's `--admission-control-config-file` entry for
    /// `PodSecurity`:
    ///
    /// ```yaml
    /// defaults: {enforce: baseline, enforce-version: latest, audit: restricted, warn: restricted}
    /// exemptions: {usernames: [], namespaces: [kube-system], runtimeClasses: []}
    /// ```
    ///
    /// Unset defaults are `privileged` and `latest`.
    ///
    /// # Errors
    /// Another kind; bad levels or versions; namespace names that are not
    /// RFC 1123 labels, runtime class names that are not subdomains, empty
    /// user names, and duplicates, all in kube's field error wording (a
    /// list in brackets when there are several).
    pub fn from_value(v: &Value) -> Result<Config, String> {
        let kind = v.get("kind").and_then(Value::as_str).unwrap_or("");
        let api_version = v.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        if kind != "PodSecurityConfiguration" || !CONFIG_API_VERSIONS.contains(&api_version) {
            return Err(format!("no kind {kind:?} is registered for version {api_version:?}: expected a PodSecurityConfiguration of {}", CONFIG_API_VERSIONS.join(", ")));
        }
        let mut errors: Vec<String> = Vec::new();
        let defaults = &v["defaults"];
        let field = |key: &str, fallback: &'static str| defaults.get(key).and_then(Value::as_str).filter(|s| !s.is_empty()).unwrap_or(fallback).to_string();
        let mut mode = |name: &str| -> LevelVersion {
            let (level, version) = (field(name, "privileged"), field(&format!("{name}-version"), "latest"));
            let level = Level::parse(&level).unwrap_or_else(|| {
                errors.push(format!("defaults.{name}: Invalid value: {}: {LEVEL_ERROR}", go_quote(&level)));
                Level::Restricted
            });
            let version = Version::parse(&version).unwrap_or_else(|| {
                errors.push(format!("defaults.{name}-version: Invalid value: {}: {VERSION_ERROR}", go_quote(&version)));
                Version::Latest
            });
            LevelVersion { level, version }
        };
        // kube checks enforce, warn, then audit.
        let (enforce, warn, audit) = (mode("enforce"), mode("warn"), mode("audit"));
        let mut list = |key: &str, check: &dyn Fn(&str) -> Vec<&'static str>| -> Vec<String> {
            let mut seen: Vec<String> = Vec::new();
            for (i, item) in v["exemptions"].get(key).and_then(Value::as_array).into_iter().flatten().enumerate() {
                let item = item.as_str().unwrap_or("");
                let problems = check(item);
                if !problems.is_empty() {
                    errors.push(format!("exemptions.{key}[{i}]: Invalid value: {}: {}", go_quote(item), problems.join(", ")));
                } else if seen.iter().any(|s| s == item) {
                    errors.push(format!("exemptions.{key}[{i}]: Duplicate value: {}", go_quote(item)));
                } else {
                    seen.push(item.to_string());
                }
            }
            seen
        };
        let namespaces = list("namespaces", &|n| name_errors(n, false));
        let runtime_classes = list("runtimeClasses", &|n| name_errors(n, true));
        let usernames = list("usernames", &|n| if n.is_empty() { vec!["username must not be empty"] } else { vec![] });
        match errors.len() {
            0 => Ok(Config { defaults: Policy { enforce, audit, warn }, exemptions: Exemptions { usernames, namespaces, runtime_classes } }),
            1 => Err(errors.concat()),
            _ => Err(format!("[{}]", errors.join(", "))),
        }
    }
}

/// The plugin.
pub struct PodSecurity {
    storage: Arc<dyn Storage>,
    sources: Arc<Sources>,
    config: Config,
}

impl PodSecurity {
    /// The plugin with the default [`Config`], reading namespaces from
    /// `sources` (and `storage` when a copy lacks one) and listing pods from
    /// `storage`.
    pub fn new(storage: Arc<dyn Storage>, sources: Arc<Sources>) -> Self {
        Self::with_config(storage, sources, Config::default())
    }

    /// The plugin with `config`.
    pub fn with_config(storage: Arc<dyn Storage>, sources: Arc<Sources>, config: Config) -> Self {
        PodSecurity { storage, sources, config }
    }

    fn policy(&self, labels: Option<&Map<String, Value>>) -> (Policy, Vec<Cause>) {
        Policy::from_labels(labels, &self.config.defaults)
    }

    fn exempt_namespace(&self, namespace: &str) -> bool {
        !namespace.is_empty() && self.config.exemptions.namespaces.iter().any(|n| n == namespace)
    }

    fn exempt_user(&self, user: &str) -> bool {
        !user.is_empty() && self.config.exemptions.usernames.iter().any(|u| u == user)
    }

    fn exempt_runtime_class(&self, spec: &Value) -> bool {
        let class = spec.get("runtimeClassName").and_then(Value::as_str).unwrap_or("");
        !class.is_empty() && self.config.exemptions.runtime_classes.iter().any(|c| c == class)
    }

    /// The namespace `name`: the local copy, else the store.
    ///
    /// # Errors
    /// Why it could not be read (`namespaces "x" not found`).
    async fn namespace(&self, name: &str) -> Result<Arc<Value>, String> {
        if let Some(ns) = self.sources.namespace(name) {
            return Ok(ns);
        }
        match self.storage.get(&keys::namespace(name)).await {
            Ok(ns) => Ok(Arc::new(ns)),
            Err(crate::storage::Error::NotFound) => Err(format!("namespaces {} not found", go_quote(name))),
            Err(e) => Err(e.to_string()),
        }
    }

    /// A namespace create or update: its labels must be valid (unless they
    /// were invalid before and did not change); a stricter enforce level
    /// warns about the pods already there that it would refuse.
    async fn validate_namespace(&self, attrs: &Attributes<'_>) -> Result<(), Status> {
        let Some(ns) = attrs.object.as_ref().filter(|_| attrs.subresource.is_empty()) else {
            return Ok(());
        };
        let name = meta::name(ns);
        let labels = ns["metadata"]["labels"].as_object();
        let (new, new_errors) = self.policy(labels);
        let invalid = |errors: Vec<Cause>| Status::invalid("", "Namespace", name, errors);
        let old = match (attrs.operation, attrs.old_object) {
            (Operation::Update, Some(old)) => old,
            _ => {
                if !new_errors.is_empty() {
                    return Err(invalid(new_errors));
                }
                self.warn_exempt_namespace(attrs, name, &new, labels);
                return Ok(());
            }
        };
        let (old_policy, old_errors) = self.policy(old["metadata"]["labels"].as_object());
        if !new_errors.is_empty() && (old_errors.is_empty() || new_errors != old_errors) {
            return Err(invalid(new_errors));
        }
        // Pods are looked at only when the enforce level got stricter.
        if new.enforce == old_policy.enforce || new.enforce.level == Level::Privileged || (new.enforce.version == old_policy.enforce.version && new.enforce.level <= old_policy.enforce.level) {
            return Ok(());
        }
        if self.exempt_namespace(name) {
            self.warn_exempt_namespace(attrs, name, &new, labels);
            return Ok(());
        }
        for w in self.check_existing_pods(name, new.enforce).await {
            attrs.warnings.add(w);
        }
        Ok(())
    }

    /// Warns that an exempt namespace's labels are ignored (when they ask
    /// for more than privileged or the defaults).
    fn warn_exempt_namespace(&self, attrs: &Attributes<'_>, name: &str, policy: &Policy, labels: Option<&Map<String, Value>>) {
        if !self.exempt_namespace(name) || policy.fully_privileged() || policy.equivalent(&self.config.defaults) {
            return;
        }
        let has = |k: &str| labels.is_some_and(|l| l.contains_key(k));
        let modes: Vec<String> =
            [("enforce", policy.enforce, ENFORCE_LABEL, ENFORCE_VERSION_LABEL), ("audit", policy.audit, AUDIT_LABEL, AUDIT_VERSION_LABEL), ("warn", policy.warn, WARN_LABEL, WARN_VERSION_LABEL)]
                .into_iter()
                .filter(|(_, lv, level, version)| lv.level != Level::Privileged && (has(level) || has(version)))
                .map(|(mode, lv, _, _)| format!("{mode}={lv}"))
                .collect();
        attrs.warnings.add(format!("namespace {} is exempt from Pod Security, and the policy ({}) will be ignored", go_quote(name), modes.join(", ")));
    }

    /// The warnings of an enforce level raised to `enforce` on namespace
    /// `ns` (kube's `EvaluatePodsInNamespace`): at most
    /// [`MAX_PODS_TO_CHECK`] pods, one of each controller first; pods with
    /// the same violations are reported together.
    async fn check_existing_pods(&self, ns: &str, enforce: LevelVersion) -> Vec<String> {
        let listed = tokio::time::timeout(POD_LIST_TIMEOUT, self.storage.list(&keys::prefix("", "pods", Some(ns)), &ListOptions::default())).await;
        let pods = match listed {
            Ok(Ok(list)) => list.items,
            _ => return vec!["failed to list pods while checking new PodSecurity enforce level".to_string()],
        };
        let pods = self.prioritize_pods(pods);
        let total = pods.len();
        // Each distinct list of reasons, in the order first seen, with the
        // first pod name (in name order) and how many pods have it.
        let mut seen: Vec<String> = Vec::new();
        let mut by_reasons: HashMap<String, (String, usize)> = HashMap::new();
        let checked = total.min(MAX_PODS_TO_CHECK);
        for pod in pods.iter().take(checked) {
            let verdict = enforce.evaluate(&PodView::of_pod(pod));
            if verdict.allowed() {
                continue;
            }
            let reasons = verdict.reasons();
            let name = meta::name(pod);
            match by_reasons.get_mut(&reasons) {
                Some((first, count)) => {
                    if name < first.as_str() {
                        *first = name.to_string();
                    }
                    *count += 1;
                }
                None => {
                    seen.push(reasons.clone());
                    by_reasons.insert(reasons, (name.to_string(), 1));
                }
            }
        }
        let mut warnings = Vec::new();
        if checked < total {
            warnings.push(format!("new PodSecurity enforce level only checked against the first {checked} of {total} existing pods"));
        }
        if !seen.is_empty() {
            warnings.push(format!("existing pods in namespace {} violate the new PodSecurity enforce level {}", go_quote(ns), go_quote(&enforce.to_string())));
        }
        let mut per_pod: Vec<String> = seen
            .into_iter()
            .map(|reasons| {
                let (first, count) = by_reasons.get(&reasons).cloned().unwrap_or_default();
                match count {
                    0 | 1 => format!("{first}: {reasons}"),
                    2 => format!("{first} (and 1 other pod): {reasons}"),
                    n => format!("{first} (and {} other pods): {reasons}", n - 1),
                }
            })
            .collect();
        per_pod.sort();
        warnings.extend(per_pod);
        warnings
    }

    /// Pods without an exempt runtime class, one per controller first and
    /// the other pods of each controller last (kube's `prioritizePods`).
    fn prioritize_pods(&self, pods: Vec<Value>) -> Vec<Value> {
        let mut first = Vec::with_capacity(pods.len());
        let mut rest = Vec::new();
        let mut controllers = std::collections::HashSet::new();
        for pod in pods {
            if self.exempt_runtime_class(&pod["spec"]) {
                continue;
            }
            let controller =
                pod["metadata"]["ownerReferences"].as_array().and_then(|refs| refs.iter().find(|r| r["controller"] == Value::Bool(true))).and_then(|r| r["uid"].as_str()).map(str::to_string);
            match controller {
                Some(uid) if controllers.contains(&uid) => rest.push(pod),
                Some(uid) => {
                    controllers.insert(uid);
                    first.push(pod);
                }
                None => first.push(pod),
            }
        }
        first.extend(rest);
        first
    }

    /// A pod create or update (or a subresource that may change it).
    async fn validate_pod(&self, attrs: &Attributes<'_>) -> Result<(), Status> {
        if IGNORED_POD_SUBRESOURCES.contains(&attrs.subresource) || self.exempted(attrs) {
            return Ok(());
        }
        let ns = match self.namespace(attrs.namespace).await {
            Ok(ns) => ns,
            Err(e) => {
                let status = Status::internal(format!("failed to lookup namespace {}", go_quote(attrs.namespace)));
                annotate(attrs, "error", &format!("{}: {e}", status.message));
                return Err(status);
            }
        };
        let (policy, errors) = self.policy(ns["metadata"]["labels"].as_object());
        if errors.is_empty() && policy.fully_privileged() {
            annotate(attrs, "enforce-policy", &LevelVersion::PRIVILEGED.to_string());
            return Ok(());
        }
        let Some(pod) = attrs.object.as_ref() else {
            return Ok(());
        };
        if let (Operation::Update, Some(old)) = (attrs.operation, attrs.old_object) {
            if !significant_pod_update(pod, old) {
                return Ok(());
            }
        }
        self.evaluate(attrs, &policy, &errors, &PodView::of_pod(pod), true)
    }

    /// A create or update of a resource with a pod template: audit and warn
    /// only.
    async fn validate_pod_controller(&self, attrs: &Attributes<'_>) -> Result<(), Status> {
        if !attrs.subresource.is_empty() || self.exempted(attrs) {
            return Ok(());
        }
        let ns = match self.namespace(attrs.namespace).await {
            Ok(ns) => ns,
            Err(e) => {
                annotate(attrs, "error", &format!("failed to lookup namespace {}: {e}", go_quote(attrs.namespace)));
                return Ok(());
            }
        };
        let (policy, errors) = self.policy(ns["metadata"]["labels"].as_object());
        if errors.is_empty() && policy.warn.level == Level::Privileged && policy.audit.level == Level::Privileged {
            return Ok(());
        }
        let Some(template) = attrs.object.as_ref().and_then(|o| pod_template(attrs.resource.group, attrs.resource.resource, o)) else {
            return Ok(());
        };
        self.evaluate(attrs, &policy, &errors, &template, false)
    }

    /// Whether the namespace or the user is exempt (recorded in the audit
    /// event).
    fn exempted(&self, attrs: &Attributes<'_>) -> bool {
        let why = if self.exempt_namespace(attrs.namespace) {
            "namespace"
        } else if self.exempt_user(&attrs.user.name) {
            "user"
        } else {
            return false;
        };
        annotate(attrs, "exempt", why);
        true
    }

    /// Checks `pod` against the policy's modes (kube's `EvaluatePod`):
    /// enforce (when `enforce`) refuses, audit annotates, warn warns unless
    /// the request is refused anyway. A mode at the same level and version as
    /// an earlier one reuses its verdict.
    fn evaluate(&self, attrs: &Attributes<'_>, policy: &Policy, errors: &[Cause], pod: &PodView<'_>, enforce: bool) -> Result<(), Status> {
        if self.exempt_runtime_class(pod.spec) {
            annotate(attrs, "exempt", "runtimeClass");
            return Ok(());
        }
        if !errors.is_empty() {
            let rendered: Vec<String> = errors.iter().map(|c| format!("{}: {}", c.field, c.message)).collect();
            let list = if rendered.len() == 1 { rendered.concat() } else { format!("[{}]", rendered.join(", ")) };
            annotate(attrs, "error", &format!("Failed to parse policy: {list}"));
        }
        let mut verdicts: Vec<(LevelVersion, Verdict)> = Vec::with_capacity(3);
        let mut verdict_of = |lv: LevelVersion| -> Verdict {
            if let Some((_, v)) = verdicts.iter().find(|(k, _)| *k == lv) {
                return v.clone();
            }
            let v = lv.evaluate(pod);
            verdicts.push((lv, v.clone()));
            v
        };
        let mut refusal = None;
        if enforce {
            annotate(attrs, "enforce-policy", &policy.enforce.to_string());
            let v = verdict_of(policy.enforce);
            if !v.allowed() {
                let why = format!("violates PodSecurity {}: {}", go_quote(&policy.enforce.to_string()), v.details());
                refusal = Some(Status::forbidden_because(attrs.resource.group, attrs.resource.resource, attrs.name, &why));
            }
        }
        let v = verdict_of(policy.audit);
        if !v.allowed() {
            annotate(attrs, "audit-violations", &format!("would violate PodSecurity {}: {}", go_quote(&policy.audit.to_string()), v.details()));
        }
        if refusal.is_none() {
            let v = verdict_of(policy.warn);
            if !v.allowed() {
                attrs.warnings.add(format!("would violate PodSecurity {}: {}", go_quote(&policy.warn.to_string()), v.details()));
            }
        }
        refusal.map_or(Ok(()), Err)
    }
}

/// Records `pod-security.kubernetes.io/<key>` in the request's audit event.
fn annotate(attrs: &Attributes<'_>, key: &str, value: &str) {
    attrs.add_audit_annotation(&format!("{PREFIX}{key}"), value);
}

/// The pod template of an object of a pod controller resource, if it has
/// one.
fn pod_template<'a>(group: &str, resource: &str, obj: &'a Value) -> Option<PodView<'a>> {
    let template = match (group, resource) {
        ("", "podtemplates") => &obj["template"],
        ("batch", "cronjobs") => &obj["spec"]["jobTemplate"]["spec"]["template"],
        _ => &obj["spec"]["template"],
    };
    (!template.is_null()).then(|| PodView { metadata: &template["metadata"], spec: &template["spec"] })
}

/// Whether a pod update can change what the checks see (kube's
/// `isSignificantPodUpdate`): a container or init container added, removed
/// or given another image, or an ephemeral container added or given
/// another image. Everything else the checks read is immutable.
fn significant_pod_update(new: &Value, old: &Value) -> bool {
    fn list<'a>(pod: &'a Value, key: &str) -> &'a [Value] {
        pod["spec"][key].as_array().map(Vec::as_slice).unwrap_or_default()
    }
    fn image(c: &Value) -> &str {
        c["image"].as_str().unwrap_or("")
    }
    for key in ["containers", "initContainers"] {
        let (n, o) = (list(new, key), list(old, key));
        if n.len() != o.len() || n.iter().zip(o).any(|(a, b)| image(a) != image(b)) {
            return true;
        }
    }
    let old_ephemeral = list(old, "ephemeralContainers");
    list(new, "ephemeralContainers").iter().any(|c| match old_ephemeral.iter().find(|o| o["name"] == c["name"]) {
        None => true,
        Some(o) => image(o) != image(c),
    })
}

fn is_pod_controller(group: &str, resource: &str) -> bool {
    POD_CONTROLLERS.contains(&(group, resource))
}

#[async_trait]
impl Validating for PodSecurity {
    fn name(&self) -> &'static str {
        "PodSecurity"
    }

    fn handles(&self, op: Operation) -> bool {
        matches!(op, Operation::Create | Operation::Update)
    }

    async fn validate(&self, attrs: &Attributes<'_>) -> Result<(), Status> {
        match (attrs.resource.group, attrs.resource.resource) {
            ("", "namespaces") => self.validate_namespace(attrs).await,
            ("", "pods") => self.validate_pod(attrs).await,
            (group, resource) if is_pod_controller(group, resource) => self.validate_pod_controller(attrs).await,
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;
    use crate::admission::sources::Fixed;
    use crate::admission::{Kind, Resource};
    use crate::authn::UserInfo;
    use crate::storage::{ListResult, Preconditions, Result as StorageResult, TryUpdate, WatchOptions, WatchStream};
    use crate::warning::Warnings;

    /// A store holding only the pods a namespace label update lists.
    struct PodsOnly(Vec<Value>);

    #[async_trait]
    impl Storage for PodsOnly {
        async fn get(&self, _: &str) -> StorageResult<Value> {
            Err(crate::storage::Error::NotFound)
        }
        async fn list(&self, _: &str, _: &ListOptions) -> StorageResult<ListResult> {
            Ok(ListResult { items: self.0.clone(), ..Default::default() })
        }
        async fn create(&self, _: &str, _: Value) -> StorageResult<Value> {
            Err(crate::storage::Error::Internal("read-only".into()))
        }
        async fn guaranteed_update(&self, _: &str, _: &Preconditions, _: &mut dyn TryUpdate) -> StorageResult<Value> {
            Err(crate::storage::Error::Internal("read-only".into()))
        }
        async fn delete(&self, _: &str, _: &Preconditions) -> StorageResult<Value> {
            Err(crate::storage::Error::Internal("read-only".into()))
        }
        async fn watch(&self, _: &str, _: &WatchOptions) -> StorageResult<WatchStream> {
            Err(crate::storage::Error::Internal("read-only".into()))
        }
        async fn current_revision(&self) -> StorageResult<i64> {
            Ok(1)
        }
    }

    fn namespace(name: &str, labels: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
    }

    /// The plugin over these namespaces and pods.
    fn plugin(namespaces: Vec<Value>, pods: Vec<Value>, config: Config) -> PodSecurity {
        let sources = Sources::new();
        sources.set("", "namespaces", Fixed::of(namespaces));
        PodSecurity::with_config(Arc::new(PodsOnly(pods)), sources, config)
    }

    /// A request's refusal (code, message), warnings and audit annotations.
    type Outcome = (Option<(u16, String)>, Vec<String>, BTreeMap<String, String>);

    /// One request to the plugin.
    struct Req<'a> {
        op: Operation,
        group: &'a str,
        resource: &'a str,
        subresource: &'a str,
        namespace: &'a str,
        object: Value,
        old: Option<Value>,
        user: &'a str,
    }

    impl<'a> Req<'a> {
        fn create(group: &'a str, resource: &'a str, namespace: &'a str, object: Value) -> Self {
            Req { op: Operation::Create, group, resource, subresource: "", namespace, object, old: None, user: "admin" }
        }

        fn update(mut self, old: Value) -> Self {
            self.op = Operation::Update;
            self.old = Some(old);
            self
        }

        /// (the refusal's code and message, the warnings).
        fn run(&self, p: &PodSecurity) -> (Option<(u16, String)>, Vec<String>) {
            let (refusal, warnings, _) = self.run_audited(p);
            (refusal, warnings)
        }

        /// As [`Req::run`], with the audit annotations.
        fn run_audited(&self, p: &PodSecurity) -> Outcome {
            let audit = Recorder::default();
            let opts = json!({});
            let warnings = Warnings::default();
            let user = UserInfo { name: self.user.into(), ..Default::default() };
            let name = meta::name(&self.object).to_string();
            let attrs = Attributes {
                operation: self.op,
                name: &name,
                namespace: self.namespace,
                resource: Resource { group: self.group, version: "v1", resource: self.resource },
                subresource: self.subresource,
                kind: Kind { group: self.group, version: "v1", kind: "X" },
                request_kind: Kind { group: self.group, version: "v1", kind: "X" },
                object: Some(self.object.clone()),
                old_object: self.old.as_ref(),
                options: &opts,
                user: &user,
                dry_run: false,
                warnings: &warnings,
                audit: Some(&audit),
                reinvocation: false,
            };
            // A runtime with a clock: the pod list has a timeout.
            let rt = tokio::runtime::Builder::new_current_thread().enable_time().build();
            let r = rt.map_err(Status::internal).and_then(|rt| rt.block_on(p.validate(&attrs)));
            let annotations = audit.0.lock().clone();
            (r.err().map(|s| (s.code, s.message)), warnings.texts(), annotations)
        }
    }

    /// The audit annotations of a request.
    #[derive(Debug, Default)]
    struct Recorder(parking_lot::Mutex<BTreeMap<String, String>>);

    impl crate::admission::AuditAnnotations for Recorder {
        fn add_annotation(&self, key: &str, value: &str) {
            self.0.lock().entry(key.to_string()).or_insert_with(|| value.to_string());
        }
    }

    /// A pod `name` whose one container `c` runs `image` as root.
    fn root_pod(name: &str, image: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns"}, "spec": {"containers": [{"name": "c", "image": image}]}})
    }

    fn restricted_pod(name: &str) -> Value {
        let mut p = root_pod(name, "i");
        p["spec"]["securityContext"] = json!({"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}});
        p["spec"]["containers"][0]["securityContext"] = json!({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}});
        p
    }

    const ROOT_POD_RESTRICTED: &str = r#"allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")"#;

    #[test]
    fn versions_and_levels_parse_as_kube_does() {
        for (s, want) in [("latest", Some(Version::Latest)), ("v1.0", Some(Version::Minor(0))), ("v1.25", Some(Version::Minor(25))), ("v1.100", Some(Version::Minor(100)))] {
            assert_eq!(Version::parse(s), want, "{s}");
            assert_eq!(want.map(|v| v.to_string()).as_deref(), Some(s));
        }
        for s in ["", "v1", "v1.", "v1.01", "v2.1", "1.25", "v1.-1", "v1.x", "Latest", "v1.2 "] {
            assert_eq!(Version::parse(s), None, "{s}");
        }
        assert_eq!(Level::parse("baseline"), Some(Level::Baseline));
        assert_eq!(Level::parse("Baseline"), None);
        assert!(Level::Privileged < Level::Baseline && Level::Baseline < Level::Restricted);
        assert_eq!(LevelVersion { level: Level::Restricted, version: Version::Minor(24) }.to_string(), "restricted:v1.24");
    }

    #[test]
    fn labels_make_the_policy() {
        let lv = |level, version| LevelVersion { level, version };
        let (r, b, p) = (Level::Restricted, Level::Baseline, Level::Privileged);
        let latest = Version::Latest;
        // (labels, enforce, audit, warn, error messages)
        let rows: Vec<(Value, LevelVersion, LevelVersion, LevelVersion, Vec<&str>)> = vec![
            (json!(null), lv(p, latest), lv(p, latest), lv(p, latest), vec![]),
            (json!({"app": "x"}), lv(p, latest), lv(p, latest), lv(p, latest), vec![]),
            (json!({ENFORCE_LABEL: "restricted"}), lv(r, latest), lv(p, latest), lv(r, latest), vec![]),
            (json!({ENFORCE_LABEL: "baseline", ENFORCE_VERSION_LABEL: "v1.24"}), lv(b, Version::Minor(24)), lv(p, latest), lv(b, Version::Minor(24)), vec![]),
            (json!({ENFORCE_LABEL: "restricted", WARN_LABEL: "privileged"}), lv(r, latest), lv(p, latest), lv(p, latest), vec![]),
            (json!({ENFORCE_LABEL: "restricted", WARN_LABEL: "baseline"}), lv(r, latest), lv(p, latest), lv(b, latest), vec![]),
            (json!({ENFORCE_LABEL: "restricted", WARN_VERSION_LABEL: "v1.20"}), lv(r, latest), lv(p, latest), lv(r, Version::Minor(20)), vec![]),
            (json!({ENFORCE_VERSION_LABEL: "v1.20"}), lv(p, Version::Minor(20)), lv(p, latest), lv(p, latest), vec![]),
            (json!({AUDIT_LABEL: "baseline", AUDIT_VERSION_LABEL: "v1.30", WARN_LABEL: "restricted"}), lv(p, latest), lv(b, Version::Minor(30)), lv(r, latest), vec![]),
            (
                json!({ENFORCE_LABEL: "bogus", WARN_VERSION_LABEL: "v1.x"}),
                lv(r, latest),
                lv(p, latest),
                lv(p, latest),
                vec![
                    r#"metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "bogus": must be one of privileged, baseline, restricted"#,
                    r#"metadata.labels[pod-security.kubernetes.io/warn-version]: Invalid value: "v1.x": must be "latest" or "v1.x""#,
                ],
            ),
            (
                json!({AUDIT_LABEL: "Restricted", WARN_LABEL: "all"}),
                lv(p, latest),
                lv(p, latest),
                lv(p, latest),
                vec![
                    r#"metadata.labels[pod-security.kubernetes.io/audit]: Invalid value: "Restricted": must be one of privileged, baseline, restricted"#,
                    r#"metadata.labels[pod-security.kubernetes.io/warn]: Invalid value: "all": must be one of privileged, baseline, restricted"#,
                ],
            ),
        ];
        for (labels, enforce, audit, warn, errors) in rows {
            let (policy, causes) = Policy::from_labels(labels.as_object(), &Policy::default());
            assert_eq!(policy, Policy { enforce, audit, warn }, "{labels}");
            assert_eq!(causes.iter().map(|c| format!("{}: {}", c.field, c.message)).collect::<Vec<_>>(), errors, "{labels}");
        }
    }

    #[test]
    fn enforce_refuses_pods_and_warn_warns() {
        let p = plugin(
            vec![
                namespace("ns", json!({ENFORCE_LABEL: "restricted"})),
                namespace("warned", json!({WARN_LABEL: "restricted", WARN_VERSION_LABEL: "v1.30"})),
                namespace("open", json!({})),
                namespace("base", json!({ENFORCE_LABEL: "baseline", AUDIT_LABEL: "restricted"})),
            ],
            vec![],
            Config::default(),
        );
        let refused = Req::create("", "pods", "ns", root_pod("x", "i")).run(&p);
        assert_eq!(refused, (Some((403, format!(r#"pods "x" is forbidden: violates PodSecurity "restricted:latest": {ROOT_POD_RESTRICTED}"#))), vec![]));
        assert_eq!(Req::create("", "pods", "ns", restricted_pod("y")).run(&p), (None, vec![]));
        assert_eq!(Req::create("", "pods", "warned", root_pod("x", "i")).run(&p), (None, vec![format!(r#"would violate PodSecurity "restricted:v1.30": {ROOT_POD_RESTRICTED}"#)]));
        assert_eq!(Req::create("", "pods", "open", root_pod("x", "i")).run(&p), (None, vec![]));
        // Baseline allows a root pod; audit only annotates.
        assert_eq!(Req::create("", "pods", "base", root_pod("x", "i")).run(&p), (None, vec![]));
        let mut privileged = root_pod("x", "i");
        privileged["spec"]["containers"][0]["securityContext"] = json!({"privileged": true});
        privileged["spec"]["initContainers"] = json!([{"name": "init", "image": "i", "securityContext": {"privileged": true}}]);
        assert_eq!(
            Req::create("", "pods", "base", privileged).run(&p).0,
            Some((403, r#"pods "x" is forbidden: violates PodSecurity "baseline:latest": privileged (containers "init", "c" must not set securityContext.privileged=true)"#.into()))
        );
        // A namespace nobody has is a 500, as kube answers.
        assert_eq!(Req::create("", "pods", "gone", root_pod("x", "i")).run(&p).0, Some((500, r#"Internal error occurred: failed to lookup namespace "gone""#.into())));
    }

    #[test]
    fn audit_annotations_record_the_policy_and_violations() {
        let p = plugin(
            vec![
                namespace("ns", json!({ENFORCE_LABEL: "restricted"})),
                namespace("audited", json!({AUDIT_LABEL: "restricted", AUDIT_VERSION_LABEL: "v1.24"})),
                namespace("open", json!({})),
                namespace("broken", json!({ENFORCE_LABEL: "baseline", WARN_LABEL: "everything"})),
            ],
            vec![],
            Config::default(),
        );
        let map = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (format!("{PREFIX}{k}"), v.to_string())).collect::<BTreeMap<_, _>>();
        let (_, _, refused) = Req::create("", "pods", "ns", root_pod("x", "i")).run_audited(&p);
        assert_eq!(refused, map(&[("enforce-policy", "restricted:latest")]));
        let (_, warnings, audited) = Req::create("", "pods", "audited", root_pod("x", "i")).run_audited(&p);
        // v1.24 had no Windows exemptions, but the same checks for a Linux pod.
        assert_eq!(audited, map(&[("enforce-policy", "privileged:latest"), ("audit-violations", &format!(r#"would violate PodSecurity "restricted:v1.24": {ROOT_POD_RESTRICTED}"#))]));
        assert!(warnings.is_empty());
        let deployment = json!({"metadata": {"name": "d"}, "spec": {"template": root_pod("", "i")}});
        let (_, _, audited) = Req::create("apps", "deployments", "audited", deployment).run_audited(&p);
        assert_eq!(audited, map(&[("audit-violations", &format!(r#"would violate PodSecurity "restricted:v1.24": {ROOT_POD_RESTRICTED}"#))]));
        assert_eq!(Req::create("", "pods", "open", root_pod("x", "i")).run_audited(&p).2, map(&[("enforce-policy", "privileged:latest")]));
        // Bad labels are reported, and the bad mode falls back (warn to
        // privileged).
        let (refusal, warnings, broken) = Req::create("", "pods", "broken", root_pod("x", "i")).run_audited(&p);
        assert_eq!((refusal, warnings), (None, vec![]));
        assert_eq!(
            broken,
            map(&[
                ("enforce-policy", "baseline:latest"),
                ("error", r#"Failed to parse policy: metadata.labels[pod-security.kubernetes.io/warn]: Invalid value: "everything": must be one of privileged, baseline, restricted"#)
            ])
        );
    }

    #[test]
    fn pod_updates_are_checked_only_when_they_can_weaken_the_pod() {
        let p = plugin(vec![namespace("ns", json!({ENFORCE_LABEL: "restricted"}))], vec![], Config::default());
        let old = root_pod("x", "i");
        let mut labelled = old.clone();
        labelled["metadata"]["labels"] = json!({"a": "b"});
        assert_eq!(Req::create("", "pods", "ns", labelled).update(old.clone()).run(&p), (None, vec![]));
        let refused = Req::create("", "pods", "ns", root_pod("x", "i2")).update(old.clone()).run(&p);
        assert_eq!(refused.0.map(|(code, _)| code), Some(403));
        let mut debug = old.clone();
        debug["spec"]["ephemeralContainers"] = json!([{"name": "dbg", "image": "busybox"}]);
        let mut req = Req::create("", "pods", "ns", debug.clone()).update(old.clone());
        req.subresource = "ephemeralcontainers";
        assert!(req.run(&p).0.is_some_and(|(_, m)| m.contains(r#"containers "c", "dbg" must set securityContext.allowPrivilegeEscalation=false"#)));
        let mut status = Req::create("", "pods", "ns", root_pod("x", "i2")).update(old);
        status.subresource = "status";
        assert_eq!(status.run(&p), (None, vec![]));
        assert!(!significant_pod_update(&debug, &debug));
    }

    #[test]
    fn templates_are_warned_about_never_refused() {
        let p = plugin(vec![namespace("ns", json!({ENFORCE_LABEL: "restricted"})), namespace("audited", json!({AUDIT_LABEL: "restricted"}))], vec![], Config::default());
        let template = root_pod("", "i");
        let warning = format!(r#"would violate PodSecurity "restricted:latest": {ROOT_POD_RESTRICTED}"#);
        let objects = [
            ("apps", "deployments", json!({"metadata": {"name": "d"}, "spec": {"template": template}})),
            ("apps", "replicasets", json!({"metadata": {"name": "d"}, "spec": {"template": template}})),
            ("apps", "statefulsets", json!({"metadata": {"name": "d"}, "spec": {"template": template}})),
            ("apps", "daemonsets", json!({"metadata": {"name": "d"}, "spec": {"template": template}})),
            ("batch", "jobs", json!({"metadata": {"name": "d"}, "spec": {"template": template}})),
            ("batch", "cronjobs", json!({"metadata": {"name": "d"}, "spec": {"jobTemplate": {"spec": {"template": template}}}})),
            ("", "replicationcontrollers", json!({"metadata": {"name": "d"}, "spec": {"template": template}})),
            ("", "podtemplates", json!({"metadata": {"name": "d"}, "template": template})),
        ];
        for (group, resource, obj) in objects {
            assert_eq!(Req::create(group, resource, "ns", obj.clone()).run(&p), (None, vec![warning.clone()]), "{resource}");
            assert_eq!(Req::create(group, resource, "ns", obj.clone()).update(obj.clone()).run(&p), (None, vec![warning.clone()]), "{resource}");
            assert_eq!(Req::create(group, resource, "audited", obj.clone()).run(&p), (None, vec![]), "{resource}");
            let mut scale = Req::create(group, resource, "ns", obj.clone()).update(obj);
            scale.subresource = "scale";
            assert_eq!(scale.run(&p), (None, vec![]), "{resource}");
        }
        let mut fine = restricted_pod("");
        fine["metadata"] = json!({"labels": {"app": "a"}});
        assert_eq!(Req::create("apps", "deployments", "ns", json!({"metadata": {"name": "d"}, "spec": {"template": fine}})).run(&p), (None, vec![]));
        // Other resources are none of its business.
        assert_eq!(Req::create("", "configmaps", "ns", json!({"metadata": {"name": "c"}})).run(&p), (None, vec![]));
    }

    #[test]
    fn namespace_labels_are_validated_and_stricter_enforce_checks_existing_pods() {
        let mut owned = root_pod("b-owned", "i");
        owned["metadata"]["ownerReferences"] = json!([{"uid": "rs1", "controller": true, "kind": "ReplicaSet", "name": "rs", "apiVersion": "apps/v1"}]);
        let mut owned2 = owned.clone();
        owned2["metadata"]["name"] = json!("a-owned");
        let mut hostnet = restricted_pod("h");
        hostnet["spec"]["hostNetwork"] = json!(true);
        let pods = vec![root_pod("z-root", "i"), owned, owned2, restricted_pod("fine"), hostnet];
        let p = plugin(vec![], pods, Config::default());

        let bad = namespace("ns", json!({ENFORCE_LABEL: "bogus"}));
        let invalid =
            Some((422, r#"Namespace "ns" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "bogus": must be one of privileged, baseline, restricted"#.to_string()));
        assert_eq!(Req::create("", "namespaces", "", bad.clone()).run(&p), (invalid.clone(), vec![]));
        let open = namespace("ns", json!({}));
        assert_eq!(Req::create("", "namespaces", "", bad.clone()).update(open.clone()).run(&p), (invalid, vec![]));
        // Labels that were already bad and stay so do not block other updates.
        assert_eq!(Req::create("", "namespaces", "", bad.clone()).update(bad).run(&p), (None, vec![]));

        let restricted = namespace("ns", json!({ENFORCE_LABEL: "restricted"}));
        assert_eq!(Req::create("", "namespaces", "", restricted.clone()).run(&p), (None, vec![]));
        let (refused, warnings) = Req::create("", "namespaces", "", restricted.clone()).update(open.clone()).run(&p);
        assert_eq!(refused, None);
        assert_eq!(
            warnings,
            vec![
                r#"existing pods in namespace "ns" violate the new PodSecurity enforce level "restricted:latest""#.to_string(),
                "a-owned (and 2 other pods): allowPrivilegeEscalation != false, unrestricted capabilities, runAsNonRoot != true, seccompProfile".to_string(),
                "h: host namespaces".to_string(),
            ]
        );
        // Relaxing, or keeping, the enforce level looks at no pod.
        let baseline = namespace("ns", json!({ENFORCE_LABEL: "baseline"}));
        assert_eq!(Req::create("", "namespaces", "", baseline.clone()).update(restricted.clone()).run(&p), (None, vec![]));
        let mut relabelled = restricted.clone();
        relabelled["metadata"]["labels"]["other"] = json!("x");
        assert_eq!(Req::create("", "namespaces", "", relabelled).update(restricted).run(&p), (None, vec![]));
        let (_, warnings) = Req::create("", "namespaces", "", baseline).update(open).run(&p);
        assert_eq!(warnings, vec![r#"existing pods in namespace "ns" violate the new PodSecurity enforce level "baseline:latest""#.to_string(), "h: host namespaces".to_string()]);
    }

    #[test]
    fn configuration_sets_defaults_and_exemptions() {
        let doc = json!({
            "apiVersion": "pod-security.admission.config.k8s.io/v1",
            "kind": "PodSecurityConfiguration",
            "defaults": {"enforce": "baseline", "enforce-version": "v1.30", "warn": "restricted"},
            "exemptions": {"namespaces": ["kube-system"], "runtimeClasses": ["kata.io"], "usernames": ["system:serviceaccount:ci:deployer"]}
        });
        let config = Config::from_value(&doc).unwrap_or_else(|e| panic!("{e}"));
        let lv = |level, version| LevelVersion { level, version };
        assert_eq!(config.defaults, Policy { enforce: lv(Level::Baseline, Version::Minor(30)), audit: LevelVersion::PRIVILEGED, warn: lv(Level::Restricted, Version::Latest) });
        assert_eq!(config.exemptions, Exemptions { usernames: vec!["system:serviceaccount:ci:deployer".into()], namespaces: vec!["kube-system".into()], runtime_classes: vec!["kata.io".into()] });
        let empty = json!({"apiVersion": "pod-security.admission.config.k8s.io/v1beta1", "kind": "PodSecurityConfiguration"});
        assert_eq!(Config::from_value(&empty), Ok(Config::default()));

        // Unlabelled namespaces take the defaults; labels still win.
        let p = plugin(vec![namespace("open", json!({})), namespace("labelled", json!({ENFORCE_LABEL: "privileged"}))], vec![], config);
        let mut privileged = root_pod("x", "i");
        privileged["spec"]["containers"][0]["securityContext"] = json!({"privileged": true});
        let (refusal, _) = Req::create("", "pods", "open", privileged.clone()).run(&p);
        assert_eq!(
            refusal.map(|(_, m)| m),
            Some(r#"pods "x" is forbidden: violates PodSecurity "baseline:v1.30": privileged (container "c" must not set securityContext.privileged=true)"#.to_string())
        );
        let (refusal, warnings) = Req::create("", "pods", "labelled", privileged).run(&p);
        assert_eq!(refusal, None);
        assert_eq!(warnings.len(), 1);

        let bad = json!({
            "apiVersion": "pod-security.admission.config.k8s.io/v1",
            "kind": "PodSecurityConfiguration",
            "defaults": {"enforce": "strict", "audit-version": "1.30"},
            "exemptions": {"namespaces": ["Kube", "a", "a"], "usernames": [""]}
        });
        assert_eq!(
            Config::from_value(&bad),
            Err(format!(
                r#"[defaults.enforce: Invalid value: "strict": {LEVEL_ERROR}, defaults.audit-version: Invalid value: "1.30": {VERSION_ERROR}, exemptions.namespaces[0]: Invalid value: "Kube": {DNS1123_LABEL_ERROR}, exemptions.namespaces[2]: Duplicate value: "a", exemptions.usernames[0]: Invalid value: "": username must not be empty]"#
            ))
        );
        assert!(Config::from_value(&json!({"apiVersion": "v1", "kind": "ConfigMap"})).is_err_and(|e| e.starts_with(r#"no kind "ConfigMap" is registered for version "v1""#)));
    }

    #[test]
    fn exemptions_skip_checks() {
        let config = Config { defaults: Policy::default(), exemptions: Exemptions { usernames: vec!["ci".into()], namespaces: vec!["kube-system".into()], runtime_classes: vec!["kata".into()] } };
        let p = plugin(vec![namespace("ns", json!({ENFORCE_LABEL: "restricted"})), namespace("kube-system", json!({ENFORCE_LABEL: "restricted"}))], vec![], config);
        assert_eq!(Req::create("", "pods", "kube-system", root_pod("x", "i")).run_audited(&p), (None, vec![], BTreeMap::from([(format!("{PREFIX}exempt"), "namespace".to_string())])));
        let mut by_ci = Req::create("", "pods", "ns", root_pod("x", "i"));
        by_ci.user = "ci";
        assert_eq!(by_ci.run(&p), (None, vec![]));
        let mut kata = root_pod("x", "i");
        kata["spec"]["runtimeClassName"] = json!("kata");
        assert_eq!(Req::create("", "pods", "ns", kata).run(&p), (None, vec![]));
        assert_eq!(Req::create("", "pods", "ns", root_pod("x", "i")).run(&p).0.map(|(c, _)| c), Some(403));
        assert_eq!(
            Req::create("", "namespaces", "", namespace("kube-system", json!({ENFORCE_LABEL: "restricted", AUDIT_LABEL: "privileged", WARN_VERSION_LABEL: "v1.30"}))).run(&p),
            (None, vec![r#"namespace "kube-system" is exempt from Pod Security, and the policy (enforce=restricted:latest, warn=restricted:v1.30) will be ignored"#.to_string()])
        );
    }
}
