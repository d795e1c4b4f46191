//! The checks of the Pod Security Standards, as kube-apiserver 1.33 runs
//! them (`k8s.io/pod-security-admission/policy`, `check_*.go`), over a
//! pod's metadata and spec as JSON.
//!
//! Each check has an id, a level (baseline or restricted) and one or more
//! versions: the policy version a check revision first applies to. Which
//! checks run for a [`Level`] and [`Version`]:
//!
//! - `privileged`: none.
//! - `baseline:vX`: every baseline check that has a revision at or before
//!   `vX`, in that newest revision.
//! - `restricted:vX`: the same, plus the restricted checks; a restricted
//!   check may stand in for a baseline one (restricted volume types for
//!   hostPath volumes, dropping ALL capabilities for non-default ones,
//!   restricted seccomp for baseline seccomp), and then that baseline
//!   check does not run.
//!
//! A version newer than the newest revision of any check (`latest`,
//! `v1.33`, `v1.99`) runs the newest revisions: here `v1.32`'s. Results come
//! in kube's order, the baseline checks by id and then the restricted ones
//! by id, which is the order of [`CHECKS`]. For example a pod with one
//! container `c` and no security context, under `restricted:latest`:
//!
//! ```text
//! allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false),
//! unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]),
//! runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true),
//! seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")
//! ```
//!
//! Fields are read as a Go client decodes them: a missing field and a JSON
//! `null` are the same (unset); a value of the wrong type counts as unset.

use std::collections::BTreeSet;

use serde_json::Value;

use super::{Level, Version};
use crate::errors::go_quote;

/// The pod (or pod template) a check reads: its `metadata` and its `spec`
/// (either may be `null`).
#[derive(Debug, Clone, Copy)]
pub struct PodView<'a> {
    /// `metadata` (annotations are read).
    pub metadata: &'a Value,
    /// `spec`.
    pub spec: &'a Value,
}

impl<'a> PodView<'a> {
    /// The view of a Pod object.
    pub fn of_pod(pod: &'a Value) -> Self {
        PodView { metadata: &pod["metadata"], spec: &pod["spec"] }
    }

    /// Init containers, then containers, then ephemeral containers (kube's
    /// `visitContainers` order).
    fn containers(&self) -> impl Iterator<Item = &'a Value> {
        let spec = self.spec;
        ["initContainers", "containers", "ephemeralContainers"].into_iter().flat_map(move |k| items(spec, k))
    }

    /// `spec.securityContext`, when set.
    fn pod_security_context(&self) -> Option<&'a Value> {
        field(self.spec, "securityContext")
    }

    /// An annotation's value (`""` for a value that is not a string).
    fn annotations(&self) -> impl Iterator<Item = (&'a str, &'a str)> {
        field(self.metadata, "annotations").and_then(Value::as_object).into_iter().flatten().map(|(k, v)| (k.as_str(), v.as_str().unwrap_or("")))
    }

    fn annotation(&self, key: &str) -> Option<&'a str> {
        field(self.metadata, "annotations").and_then(|a| a.get(key)).map(|v| v.as_str().unwrap_or(""))
    }

    /// Whether `spec.os.name` is `windows` (the 1.25 revisions exempt such
    /// pods from the Linux-only restricted checks).
    fn is_windows(&self) -> bool {
        field(self.spec, "os").and_then(|o| o.get("name")).and_then(Value::as_str) == Some("windows")
    }
}

/// A check's refusal: kube's `CheckResult` with `Allowed: false`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forbidden {
    /// The short reason, always shown (`host namespaces`).
    pub reason: &'static str,
    /// What exactly, shown for a single object (`hostNetwork=true`); may be
    /// empty.
    pub detail: String,
}

/// The refusals of every check that ran, in check order (kube's
/// `AggregateCheckResult`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verdict(pub Vec<Forbidden>);

impl Verdict {
    /// Whether no check refused.
    pub fn allowed(&self) -> bool {
        self.0.is_empty()
    }

    /// The reasons joined by `, ` (what the namespace label update warning
    /// lists per pod).
    pub fn reasons(&self) -> String {
        self.0.iter().map(|f| f.reason).collect::<Vec<_>>().join(", ")
    }

    /// Each reason with its detail in parentheses, joined by `, ` (what a
    /// denial, warning or audit annotation says about one object).
    pub fn details(&self) -> String {
        self.0.iter().map(|f| if f.detail.is_empty() { f.reason.to_string() } else { format!("{} ({})", f.reason, f.detail) }).collect::<Vec<_>>().join(", ")
    }
}

/// A check revision: `None` when the pod passes.
type CheckFn = fn(&PodView<'_>) -> Option<Forbidden>;

/// One revision of a check.
struct Revision {
    /// The first policy minor version (`v1.<since>`) it applies to.
    since: u64,
    check: CheckFn,
    /// Baseline checks this (restricted) revision replaces.
    overrides: &'static [&'static str],
}

/// A check: kube's `policy.Check`.
struct Check {
    id: &'static str,
    level: Level,
    /// Oldest first.
    revisions: &'static [Revision],
}

const fn rev(since: u64, check: CheckFn) -> Revision {
    Revision { since, check, overrides: &[] }
}

const fn rev_over(since: u64, check: CheckFn, overrides: &'static [&'static str]) -> Revision {
    Revision { since, check, overrides }
}

/// Every check, baseline ones by id then restricted ones by id (byte order,
/// as kube sorts them).
const CHECKS: &[Check] = &[
    Check { id: "appArmorProfile", level: Level::Baseline, revisions: &[rev(0, app_armor_profile)] },
    Check { id: "capabilities_baseline", level: Level::Baseline, revisions: &[rev(0, capabilities_baseline)] },
    Check { id: "hostNamespaces", level: Level::Baseline, revisions: &[rev(0, host_namespaces)] },
    Check { id: "hostPathVolumes", level: Level::Baseline, revisions: &[rev(0, host_path_volumes)] },
    Check { id: "hostPorts", level: Level::Baseline, revisions: &[rev(0, host_ports)] },
    Check { id: "privileged", level: Level::Baseline, revisions: &[rev(0, privileged)] },
    Check { id: "procMount", level: Level::Baseline, revisions: &[rev(0, proc_mount)] },
    Check { id: "seLinuxOptions", level: Level::Baseline, revisions: &[rev(0, se_linux_options_1_0), rev(31, se_linux_options_1_31)] },
    Check { id: "seccompProfile_baseline", level: Level::Baseline, revisions: &[rev(0, seccomp_baseline_annotations), rev(19, seccomp_baseline)] },
    Check { id: "sysctls", level: Level::Baseline, revisions: &[rev(0, sysctls_1_0), rev(27, sysctls_1_27), rev(29, sysctls_1_29), rev(32, sysctls_1_32)] },
    Check { id: "windowsHostProcess", level: Level::Baseline, revisions: &[rev(0, windows_host_process)] },
    Check { id: "allowPrivilegeEscalation", level: Level::Restricted, revisions: &[rev(8, allow_privilege_escalation), rev(25, allow_privilege_escalation_1_25)] },
    Check {
        id: "capabilities_restricted",
        level: Level::Restricted,
        revisions: &[rev_over(22, capabilities_restricted, &["capabilities_baseline"]), rev_over(25, capabilities_restricted_1_25, &["capabilities_baseline"])],
    },
    Check { id: "restrictedVolumes", level: Level::Restricted, revisions: &[rev_over(0, restricted_volumes, &["hostPathVolumes"])] },
    Check { id: "runAsNonRoot", level: Level::Restricted, revisions: &[rev(0, run_as_non_root)] },
    Check { id: "runAsUser", level: Level::Restricted, revisions: &[rev(23, run_as_user)] },
    Check {
        id: "seccompProfile_restricted",
        level: Level::Restricted,
        revisions: &[rev_over(19, seccomp_restricted, &["seccompProfile_baseline"]), rev_over(25, seccomp_restricted_1_25, &["seccompProfile_baseline"])],
    },
];

/// The newest policy minor version any check has a revision for; newer
/// versions (and `latest`) evaluate as this one.
pub const NEWEST_MINOR: u64 = 32;

/// Runs the checks of `level` at `version` on `pod` (kube's
/// `Evaluator.EvaluatePod` followed by `AggregateCheckResults`).
pub fn evaluate(level: Level, version: Version, pod: &PodView<'_>) -> Verdict {
    if level == Level::Privileged {
        return Verdict::default();
    }
    let minor = match version {
        Version::Latest => NEWEST_MINOR,
        Version::Minor(m) => m.min(NEWEST_MINOR),
    };
    let at = |c: &'static Check| c.revisions.iter().rev().find(|r| r.since <= minor);
    let runs = |c: &&'static Check| c.level == Level::Baseline || level == Level::Restricted;
    let overridden: Vec<&str> = CHECKS.iter().filter(runs).filter_map(at).flat_map(|r| r.overrides.iter().copied()).collect();
    Verdict(CHECKS.iter().filter(runs).filter(|c| !overridden.contains(&c.id)).filter_map(at).filter_map(|r| (r.check)(pod)).collect())
}

// ---- helpers ----

/// `v[key]` unless missing or `null`.
fn field<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.get(key).filter(|x| !x.is_null())
}

/// The items of the list `v[key]` (none if it is not a list).
fn items<'a>(v: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> {
    v.get(key).and_then(Value::as_array).into_iter().flatten()
}

fn is_true(v: Option<&Value>, key: &str) -> bool {
    v.and_then(|v| v.get(key)).and_then(Value::as_bool) == Some(true)
}

fn name(c: &Value) -> &str {
    c.get("name").and_then(Value::as_str).unwrap_or("")
}

/// A container's `securityContext`, when set.
fn security_context(c: &Value) -> Option<&Value> {
    field(c, "securityContext")
}

/// `"a", "b"` (kube's `joinQuote`: plain quotes, no escaping).
fn join_quote<S: AsRef<str>>(items: impl IntoIterator<Item = S>) -> String {
    items.into_iter().map(|s| format!("\"{}\"", s.as_ref())).collect::<Vec<_>>().join(", ")
}

fn plural(singular: &'static str, plural: &'static str, n: usize) -> &'static str {
    if n == 1 {
        singular
    } else {
        plural
    }
}

/// `container "a"` / `containers "a", "b"`.
fn containers_phrase(names: &[&str]) -> String {
    format!("{} {}", plural("container", "containers", names.len()), join_quote(names))
}

/// `pod`, `containers "a", "b"` or `pod and container "a"`: who set a bad
/// value.
fn setters(pod: bool, containers: &[&str]) -> String {
    let mut parts = Vec::new();
    if pod {
        parts.push("pod".to_string());
    }
    if !containers.is_empty() {
        parts.push(containers_phrase(containers));
    }
    parts.join(" and ")
}

fn string_items<'a>(v: Option<&'a Value>, key: &str) -> impl Iterator<Item = &'a str> {
    v.and_then(|v| v.get(key)).and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str)
}

// ---- baseline ----

/// AppArmor: the profile type of the pod and its containers must be
/// `RuntimeDefault` or `Localhost`; the beta annotations
/// `container.apparmor.security.beta.kubernetes.io/*` may only say
/// `runtime/default` or `localhost/*` (or nothing).
fn app_armor_profile(pod: &PodView<'_>) -> Option<Forbidden> {
    const ANNOTATION_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";
    let type_ok = |p: &Value| matches!(p.get("type").and_then(Value::as_str), Some("RuntimeDefault" | "Localhost"));
    let type_of = |p: &Value| p.get("type").and_then(Value::as_str).unwrap_or("").to_string();
    let mut bad_values = BTreeSet::new();
    let pod_bad = match pod.pod_security_context().and_then(|s| field(s, "appArmorProfile")) {
        Some(p) if !type_ok(p) => {
            bad_values.insert(type_of(p));
            true
        }
        _ => false,
    };
    let mut bad_containers = Vec::new();
    for c in pod.containers() {
        if let Some(p) = security_context(c).and_then(|s| field(s, "appArmorProfile")) {
            if !type_ok(p) {
                bad_containers.push(name(c));
                bad_values.insert(type_of(p));
            }
        }
    }
    let mut who = Vec::new();
    if pod_bad {
        who.push("pod".to_string());
    }
    if !bad_containers.is_empty() {
        who.push(containers_phrase(&bad_containers));
    }
    let mut bad_annotations: Vec<String> = pod
        .annotations()
        .filter(|(k, v)| k.starts_with(ANNOTATION_PREFIX) && !(v.is_empty() || *v == "runtime/default" || v.starts_with("localhost/")))
        .map(|(k, v)| format!("{k}={}", go_quote(v)))
        .collect();
    let mut values: Vec<String> = bad_values.into_iter().collect();
    if !bad_annotations.is_empty() {
        bad_annotations.sort();
        who.push(plural("annotation", "annotations", bad_annotations.len()).to_string());
        values.extend(bad_annotations);
    }
    if who.is_empty() {
        return None;
    }
    Some(Forbidden {
        reason: plural("forbidden AppArmor profile", "forbidden AppArmor profiles", values.len()),
        detail: format!("{} must not set AppArmor profile type to {}", who.join(" and "), join_quote(&values)),
    })
}

/// The capabilities containers may add beyond the runtime's defaults.
const DEFAULT_CAPABILITIES: &[&str] = &["AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"];

/// Capabilities: containers may only add the default set.
fn capabilities_baseline(pod: &PodView<'_>) -> Option<Forbidden> {
    let mut bad_containers = Vec::new();
    let mut added = BTreeSet::new();
    for c in pod.containers() {
        let caps = security_context(c).and_then(|s| field(s, "capabilities"));
        let mut valid = true;
        for cap in string_items(caps, "add") {
            if !DEFAULT_CAPABILITIES.contains(&cap) {
                valid = false;
                added.insert(cap);
            }
        }
        if !valid {
            bad_containers.push(name(c));
        }
    }
    (!bad_containers.is_empty()).then(|| Forbidden {
        reason: "non-default capabilities",
        detail: format!("{} must not include {} in securityContext.capabilities.add", containers_phrase(&bad_containers), join_quote(&added)),
    })
}

/// Host namespaces: hostNetwork, hostPID and hostIPC must not be true.
fn host_namespaces(pod: &PodView<'_>) -> Option<Forbidden> {
    let shared: Vec<String> = ["hostNetwork", "hostPID", "hostIPC"].into_iter().filter(|k| is_true(Some(pod.spec), k)).map(|k| format!("{k}=true")).collect();
    (!shared.is_empty()).then(|| Forbidden { reason: "host namespaces", detail: shared.join(", ") })
}

/// HostPath volumes are forbidden.
fn host_path_volumes(pod: &PodView<'_>) -> Option<Forbidden> {
    let names: Vec<&str> = items(pod.spec, "volumes").filter(|v| field(v, "hostPath").is_some()).map(name).collect();
    (!names.is_empty()).then(|| Forbidden { reason: "hostPath volumes", detail: format!("{} {}", plural("volume", "volumes", names.len()), join_quote(&names)) })
}

/// Host ports must be unset or 0.
fn host_ports(pod: &PodView<'_>) -> Option<Forbidden> {
    let mut bad_containers = Vec::new();
    let mut ports = BTreeSet::new();
    for c in pod.containers() {
        let mut valid = true;
        for p in items(c, "ports") {
            match p.get("hostPort").and_then(Value::as_i64) {
                Some(0) | None => {}
                Some(n) => {
                    valid = false;
                    ports.insert(n.to_string());
                }
            }
        }
        if !valid {
            bad_containers.push(name(c));
        }
    }
    (!bad_containers.is_empty()).then(|| Forbidden {
        reason: "hostPort",
        detail: format!(
            "{} {} {} {}",
            containers_phrase(&bad_containers),
            plural("uses", "use", bad_containers.len()),
            plural("hostPort", "hostPorts", ports.len()),
            ports.into_iter().collect::<Vec<_>>().join(", ")
        ),
    })
}

/// Privileged containers are forbidden.
fn privileged(pod: &PodView<'_>) -> Option<Forbidden> {
    let bad: Vec<&str> = pod.containers().filter(|c| is_true(security_context(c), "privileged")).map(name).collect();
    (!bad.is_empty()).then(|| Forbidden { reason: "privileged", detail: format!("{} must not set securityContext.privileged=true", containers_phrase(&bad)) })
}

/// /proc mount: `procMount` must be unset or `Default`.
fn proc_mount(pod: &PodView<'_>) -> Option<Forbidden> {
    let mut bad_containers = Vec::new();
    let mut types = BTreeSet::new();
    for c in pod.containers() {
        if let Some(t) = security_context(c).and_then(|s| field(s, "procMount")) {
            let t = t.as_str().unwrap_or("");
            if t != "Default" {
                bad_containers.push(name(c));
                types.insert(t);
            }
        }
    }
    (!bad_containers.is_empty()).then(|| Forbidden { reason: "procMount", detail: format!("{} must not set securityContext.procMount to {}", containers_phrase(&bad_containers), join_quote(&types)) })
}

fn se_linux_options_1_0(pod: &PodView<'_>) -> Option<Forbidden> {
    se_linux_options(pod, &["", "container_t", "container_init_t", "container_kvm_t"])
}

fn se_linux_options_1_31(pod: &PodView<'_>) -> Option<Forbidden> {
    se_linux_options(pod, &["", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"])
}

/// SELinux: the type must be one of `allowed_types`; user and role must be
/// unset.
fn se_linux_options(pod: &PodView<'_>, allowed_types: &[&str]) -> Option<Forbidden> {
    let mut bad_types = BTreeSet::new();
    let (mut set_user, mut set_role) = (false, false);
    let mut valid = |o: &Value| {
        let s = |k: &str| o.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let mut ok = true;
        let t = s("type");
        if !allowed_types.contains(&t.as_str()) {
            ok = false;
            bad_types.insert(t);
        }
        if !s("user").is_empty() {
            ok = false;
            set_user = true;
        }
        if !s("role").is_empty() {
            ok = false;
            set_role = true;
        }
        ok
    };
    let pod_bad = pod.pod_security_context().and_then(|s| field(s, "seLinuxOptions")).is_some_and(|o| !valid(o));
    let bad_containers: Vec<&str> = pod.containers().filter(|c| security_context(c).and_then(|s| field(s, "seLinuxOptions")).is_some_and(|o| !valid(o))).map(name).collect();
    if !pod_bad && bad_containers.is_empty() {
        return None;
    }
    let mut data = Vec::new();
    if !bad_types.is_empty() {
        data.push(format!("{} {}", plural("type", "types", bad_types.len()), join_quote(&bad_types)));
    }
    if set_user {
        data.push("user may not be set".to_string());
    }
    if set_role {
        data.push("role may not be set".to_string());
    }
    Some(Forbidden { reason: "seLinuxOptions", detail: format!("{} set forbidden securityContext.seLinuxOptions: {}", setters(pod_bad, &bad_containers), data.join("; ")) })
}

fn valid_seccomp_type(profile: &Value) -> bool {
    matches!(profile.get("type").and_then(Value::as_str), Some("Localhost" | "RuntimeDefault"))
}

fn seccomp_type(profile: &Value) -> String {
    profile.get("type").and_then(Value::as_str).unwrap_or("").to_string()
}

/// Seccomp before 1.19: the alpha annotations may only name
/// `runtime/default`, `docker/default` or `localhost/*`.
fn seccomp_baseline_annotations(pod: &PodView<'_>) -> Option<Forbidden> {
    const POD: &str = "seccomp.security.alpha.kubernetes.io/pod";
    const CONTAINER_PREFIX: &str = "container.seccomp.security.alpha.kubernetes.io/";
    let valid = |v: &str| v == "runtime/default" || v == "docker/default" || v.starts_with("localhost/");
    let mut bad = BTreeSet::new();
    if let Some(v) = pod.annotation(POD).filter(|v| !valid(v)) {
        bad.insert(format!("{POD}={}", go_quote(v)));
    }
    for c in pod.containers() {
        let key = format!("{CONTAINER_PREFIX}{}", name(c));
        if let Some(v) = pod.annotation(&key).filter(|v| !valid(v)) {
            bad.insert(format!("{key}={}", go_quote(v)));
        }
    }
    (!bad.is_empty())
        .then(|| Forbidden { reason: "seccompProfile", detail: format!("forbidden {} {}", plural("annotation", "annotations", bad.len()), bad.into_iter().collect::<Vec<_>>().join(", ")) })
}

/// Seccomp from 1.19: a profile set on the pod or a container must be
/// `RuntimeDefault` or `Localhost` (unset is allowed at baseline).
fn seccomp_baseline(pod: &PodView<'_>) -> Option<Forbidden> {
    seccomp(pod, false)
}

/// Seccomp at restricted: as baseline, and every container must have a
/// valid profile, its own or the pod's.
fn seccomp_restricted(pod: &PodView<'_>) -> Option<Forbidden> {
    seccomp(pod, true)
}

fn seccomp_restricted_1_25(pod: &PodView<'_>) -> Option<Forbidden> {
    if pod.is_windows() {
        return None;
    }
    seccomp(pod, true)
}

fn seccomp(pod: &PodView<'_>, required: bool) -> Option<Forbidden> {
    let mut bad_values = BTreeSet::new();
    let (mut pod_bad, mut pod_set) = (false, false);
    if let Some(p) = pod.pod_security_context().and_then(|s| field(s, "seccompProfile")) {
        if valid_seccomp_type(p) {
            pod_set = true;
        } else {
            pod_bad = true;
            bad_values.insert(seccomp_type(p));
        }
    }
    let (mut explicit, mut implicit) = (Vec::new(), Vec::new());
    for c in pod.containers() {
        match security_context(c).and_then(|s| field(s, "seccompProfile")) {
            Some(p) if !valid_seccomp_type(p) => {
                explicit.push(name(c));
                bad_values.insert(seccomp_type(p));
            }
            Some(_) => {}
            None if !pod_set => implicit.push(name(c)),
            None => {}
        }
    }
    if pod_bad || !explicit.is_empty() {
        return Some(Forbidden { reason: "seccompProfile", detail: format!("{} must not set securityContext.seccompProfile.type to {}", setters(pod_bad, &explicit), join_quote(&bad_values)) });
    }
    (required && !implicit.is_empty())
        .then(|| Forbidden { reason: "seccompProfile", detail: format!(r#"pod or {} must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost""#, containers_phrase(&implicit)) })
}

const SYSCTLS_1_0: &[&str] = &["kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_unprivileged_port_start"];
const SYSCTLS_1_27: &[&str] = &["net.ipv4.ip_local_reserved_ports"];
const SYSCTLS_1_29: &[&str] = &["net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes"];
const SYSCTLS_1_32: &[&str] = &["net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"];

fn sysctls_1_0(pod: &PodView<'_>) -> Option<Forbidden> {
    sysctls(pod, &[SYSCTLS_1_0])
}

fn sysctls_1_27(pod: &PodView<'_>) -> Option<Forbidden> {
    sysctls(pod, &[SYSCTLS_1_0, SYSCTLS_1_27])
}

fn sysctls_1_29(pod: &PodView<'_>) -> Option<Forbidden> {
    sysctls(pod, &[SYSCTLS_1_0, SYSCTLS_1_27, SYSCTLS_1_29])
}

fn sysctls_1_32(pod: &PodView<'_>) -> Option<Forbidden> {
    sysctls(pod, &[SYSCTLS_1_0, SYSCTLS_1_27, SYSCTLS_1_29, SYSCTLS_1_32])
}

/// Sysctls: only the ones in `allowed` (kube's "safe" set of that version),
/// listed in the pod's order.
fn sysctls(pod: &PodView<'_>, allowed: &[&[&str]]) -> Option<Forbidden> {
    let sysctls = pod.pod_security_context().map(|s| items(s, "sysctls"));
    let bad: Vec<&str> = sysctls.into_iter().flatten().map(name).filter(|n| !allowed.iter().any(|set| set.contains(n))).collect();
    (!bad.is_empty()).then(|| Forbidden { reason: "forbidden sysctls", detail: bad.join(", ") })
}

/// Windows HostProcess containers are forbidden, on the pod or a container.
fn windows_host_process(pod: &PodView<'_>) -> Option<Forbidden> {
    let host_process = |sc: Option<&Value>| is_true(sc.and_then(|s| field(s, "windowsOptions")), "hostProcess");
    let bad: Vec<&str> = pod.containers().filter(|c| host_process(security_context(c))).map(name).collect();
    let pod_bad = host_process(pod.pod_security_context());
    (pod_bad || !bad.is_empty()).then(|| Forbidden { reason: "hostProcess", detail: format!("{} must not set securityContext.windowsOptions.hostProcess=true", setters(pod_bad, &bad)) })
}

// ---- restricted ----

/// Privilege escalation: every container must set
/// `allowPrivilegeEscalation: false`.
fn allow_privilege_escalation(pod: &PodView<'_>) -> Option<Forbidden> {
    let bad: Vec<&str> = pod.containers().filter(|c| security_context(c).and_then(|s| s.get("allowPrivilegeEscalation")).and_then(Value::as_bool) != Some(false)).map(name).collect();
    (!bad.is_empty()).then(|| Forbidden { reason: "allowPrivilegeEscalation != false", detail: format!("{} must set securityContext.allowPrivilegeEscalation=false", containers_phrase(&bad)) })
}

/// From 1.25 Windows pods are exempt (the field does not apply to them).
fn allow_privilege_escalation_1_25(pod: &PodView<'_>) -> Option<Forbidden> {
    if pod.is_windows() {
        return None;
    }
    allow_privilege_escalation(pod)
}

/// Capabilities at restricted: every container drops `ALL` and adds at most
/// `NET_BIND_SERVICE`.
fn capabilities_restricted(pod: &PodView<'_>) -> Option<Forbidden> {
    let (mut missing_drop, mut adding) = (Vec::new(), Vec::new());
    let mut forbidden = BTreeSet::new();
    for c in pod.containers() {
        let Some(caps) = security_context(c).and_then(|s| field(s, "capabilities")) else {
            missing_drop.push(name(c));
            continue;
        };
        if !string_items(Some(caps), "drop").any(|d| d == "ALL") {
            missing_drop.push(name(c));
        }
        let mut adds = false;
        for a in string_items(Some(caps), "add").filter(|a| *a != "NET_BIND_SERVICE") {
            adds = true;
            forbidden.insert(a);
        }
        if adds {
            adding.push(name(c));
        }
    }
    let mut details = Vec::new();
    if !missing_drop.is_empty() {
        details.push(format!(r#"{} must set securityContext.capabilities.drop=["ALL"]"#, containers_phrase(&missing_drop)));
    }
    if !adding.is_empty() {
        details.push(format!("{} must not include {} in securityContext.capabilities.add", containers_phrase(&adding), join_quote(&forbidden)));
    }
    (!details.is_empty()).then(|| Forbidden { reason: "unrestricted capabilities", detail: details.join("; ") })
}

fn capabilities_restricted_1_25(pod: &PodView<'_>) -> Option<Forbidden> {
    if pod.is_windows() {
        return None;
    }
    capabilities_restricted(pod)
}

/// The volume sources restricted pods may use.
const ALLOWED_VOLUMES: &[&str] = &["configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "image", "persistentVolumeClaim", "projected", "secret"];

/// The restricted volume sources, in the order kube names the first one a
/// volume has.
const RESTRICTED_VOLUMES: &[&str] = &[
    "hostPath",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "nfs",
    "iscsi",
    "glusterfs",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "fc",
    "azureFile",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "portworxVolume",
    "scaleIO",
    "storageos",
];

/// Volume types: only the core ephemeral and claim-backed sources.
fn restricted_volumes(pod: &PodView<'_>) -> Option<Forbidden> {
    let mut bad = Vec::new();
    let mut types = BTreeSet::new();
    for v in items(pod.spec, "volumes") {
        if ALLOWED_VOLUMES.iter().any(|k| field(v, k).is_some()) {
            continue;
        }
        bad.push(name(v));
        types.insert(RESTRICTED_VOLUMES.iter().find(|k| field(v, k).is_some()).copied().unwrap_or("unknown"));
    }
    (!bad.is_empty()).then(|| Forbidden {
        reason: "restricted volume types",
        detail: format!(
            "{} {} {} {} {}",
            plural("volume", "volumes", bad.len()),
            join_quote(&bad),
            plural("uses", "use", bad.len()),
            plural("restricted volume type", "restricted volume types", types.len()),
            join_quote(&types)
        ),
    })
}

/// Running as non-root: `runAsNonRoot: true` on the pod or on every
/// container, and never `false`.
fn run_as_non_root(pod: &PodView<'_>) -> Option<Forbidden> {
    let flag = |sc: Option<&Value>| sc.and_then(|s| field(s, "runAsNonRoot")).map(|v| v.as_bool() == Some(true));
    let pod_flag = flag(pod.pod_security_context());
    let pod_bad = pod_flag == Some(false);
    let pod_non_root = pod_flag == Some(true);
    let (mut explicit, mut implicit) = (Vec::new(), Vec::new());
    for c in pod.containers() {
        match flag(security_context(c)) {
            Some(false) => explicit.push(name(c)),
            Some(true) => {}
            None if !pod_non_root => implicit.push(name(c)),
            None => {}
        }
    }
    if pod_bad || !explicit.is_empty() {
        return Some(Forbidden { reason: "runAsNonRoot != true", detail: format!("{} must not set securityContext.runAsNonRoot=false", setters(pod_bad, &explicit)) });
    }
    (!implicit.is_empty()).then(|| Forbidden { reason: "runAsNonRoot != true", detail: format!("pod or {} must set securityContext.runAsNonRoot=true", containers_phrase(&implicit)) })
}

/// Run as user: `runAsUser` must not be 0, on the pod or a container.
fn run_as_user(pod: &PodView<'_>) -> Option<Forbidden> {
    let root = |sc: Option<&Value>| sc.and_then(|s| s.get("runAsUser")).and_then(Value::as_i64) == Some(0);
    let pod_bad = root(pod.pod_security_context());
    let bad: Vec<&str> = pod.containers().filter(|c| root(security_context(c))).map(name).collect();
    (pod_bad || !bad.is_empty()).then(|| Forbidden { reason: "runAsUser=0", detail: format!("{} must not set runAsUser=0", setters(pod_bad, &bad)) })
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;

    /// Runs `check` on a pod with `metadata` and `spec`: `None` when it
    /// passes, `(reason, detail)` otherwise.
    fn run(check: CheckFn, metadata: Value, spec: Value) -> Option<(&'static str, String)> {
        check(&PodView { metadata: &metadata, spec: &spec }).map(|f| (f.reason, f.detail))
    }

    /// A container `name` with `securityContext: sc` (none for `null`).
    fn c(name: &str, sc: Value) -> Value {
        if sc.is_null() {
            json!({"name": name, "image": "i"})
        } else {
            json!({"name": name, "image": "i", "securityContext": sc})
        }
    }

    /// Table rows: (case, check, metadata, spec, expected refusal).
    type Row = (&'static str, CheckFn, Value, Value, Option<(&'static str, &'static str)>);

    fn table(rows: Vec<Row>) {
        for (case, check, metadata, spec, want) in rows {
            let got = run(check, metadata, spec);
            let want = want.map(|(r, d)| (r, d.to_string()));
            assert_eq!(got, want, "{case}");
        }
    }

    #[test]
    fn baseline_checks() {
        let none = json!({});
        table(vec![
            // AppArmor
            ("apparmor unset", app_armor_profile, none.clone(), json!({"containers": [c("a", Value::Null)]}), None),
            (
                "apparmor allowed",
                app_armor_profile,
                json!({"annotations": {"container.apparmor.security.beta.kubernetes.io/a": "runtime/default", "container.apparmor.security.beta.kubernetes.io/b": "localhost/p", "container.apparmor.security.beta.kubernetes.io/c": "", "env": "x"}}),
                json!({"securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}}, "containers": [c("a", json!({"appArmorProfile": {"type": "Localhost", "localhostProfile": "p"}}))]}),
                None,
            ),
            (
                "apparmor unconfined pod",
                app_armor_profile,
                none.clone(),
                json!({"securityContext": {"appArmorProfile": {"type": "Unconfined"}}}),
                Some(("forbidden AppArmor profile", r#"pod must not set AppArmor profile type to "Unconfined""#)),
            ),
            (
                "apparmor unconfined init container",
                app_armor_profile,
                none.clone(),
                json!({"containers": [c("foo", Value::Null)], "initContainers": [c("bar", json!({"appArmorProfile": {"type": "Unconfined"}}))]}),
                Some(("forbidden AppArmor profile", r#"container "bar" must not set AppArmor profile type to "Unconfined""#)),
            ),
            (
                "apparmor pod, containers and annotations",
                app_armor_profile,
                json!({"annotations": {"container.apparmor.security.beta.kubernetes.io/e": "unconfined", "container.apparmor.security.beta.kubernetes.io/": "bogus", "container.apparmor.security.beta.kubernetes.io/d": "localhost/foo"}}),
                json!({"securityContext": {"appArmorProfile": {"type": "Unconfined"}}, "containers": [c("a", json!({"appArmorProfile": {"type": "Bogus"}})), c("b", json!({"appArmorProfile": {"type": "Unconfined"}}))]}),
                Some((
                    "forbidden AppArmor profiles",
                    r#"pod and containers "a", "b" and annotations must not set AppArmor profile type to "Bogus", "Unconfined", "container.apparmor.security.beta.kubernetes.io/="bogus"", "container.apparmor.security.beta.kubernetes.io/e="unconfined"""#,
                )),
            ),
            // capabilities (baseline)
            ("caps default set", capabilities_baseline, none.clone(), json!({"containers": [c("a", json!({"capabilities": {"add": ["CHOWN", "NET_BIND_SERVICE"], "drop": ["ALL"]}}))]}), None),
            (
                "caps beyond the default set",
                capabilities_baseline,
                none.clone(),
                json!({"containers": [c("a", json!({"capabilities": {"add": ["FOO", "BAR", "CHOWN"]}})), c("b", json!({"capabilities": {"add": ["BAZ", "FOO"]}})), c("c", json!({"capabilities": {"add": ["KILL"]}}))]}),
                Some(("non-default capabilities", r#"containers "a", "b" must not include "BAR", "BAZ", "FOO" in securityContext.capabilities.add"#)),
            ),
            // host namespaces
            ("host namespaces false", host_namespaces, none.clone(), json!({"hostNetwork": false, "hostPID": null}), None),
            (
                "host namespaces",
                host_namespaces,
                none.clone(),
                json!({"hostIPC": true, "hostNetwork": true, "hostPID": true}),
                Some(("host namespaces", "hostNetwork=true, hostPID=true, hostIPC=true")),
            ),
            ("host network", host_namespaces, none.clone(), json!({"hostNetwork": true}), Some(("host namespaces", "hostNetwork=true"))),
            // hostPath volumes
            ("no hostPath", host_path_volumes, none.clone(), json!({"volumes": [{"name": "a", "emptyDir": {}}, {"name": "b", "hostPath": null}]}), None),
            (
                "hostPath volumes",
                host_path_volumes,
                none.clone(),
                json!({"volumes": [{"name": "a", "hostPath": {"path": "/"}}, {"name": "c", "emptyDir": {}}, {"name": "b", "hostPath": {"path": "/x"}}]}),
                Some(("hostPath volumes", r#"volumes "a", "b""#)),
            ),
            ("one hostPath volume", host_path_volumes, none.clone(), json!({"volumes": [{"name": "a", "hostPath": {"path": "/"}}]}), Some(("hostPath volumes", r#"volume "a""#))),
            // host ports
            ("host port 0", host_ports, none.clone(), json!({"containers": [{"name": "a", "ports": [{"containerPort": 80, "hostPort": 0}, {"containerPort": 81}]}]}), None),
            (
                "host ports",
                host_ports,
                none.clone(),
                json!({"containers": [{"name": "a", "ports": [{"containerPort": 80}]}, {"name": "b", "ports": [{"hostPort": 10}, {"hostPort": 20}]}], "initContainers": [{"name": "c", "ports": [{"hostPort": 30}]}]}),
                Some(("hostPort", r#"containers "c", "b" use hostPorts 10, 20, 30"#)),
            ),
            ("one host port", host_ports, none.clone(), json!({"containers": [{"name": "b", "ports": [{"hostPort": 20}]}]}), Some(("hostPort", r#"container "b" uses hostPort 20"#))),
            // privileged
            ("privileged false", privileged, none.clone(), json!({"containers": [c("a", json!({"privileged": false})), c("b", json!({}))]}), None),
            (
                "privileged",
                privileged,
                none.clone(),
                json!({"containers": [c("a", Value::Null), c("d", json!({"privileged": true}))], "ephemeralContainers": [c("e", json!({"privileged": true}))]}),
                Some(("privileged", r#"containers "d", "e" must not set securityContext.privileged=true"#)),
            ),
            // /proc mount
            ("procMount default", proc_mount, none.clone(), json!({"containers": [c("a", json!({"procMount": "Default"})), c("b", json!({}))]}), None),
            (
                "procMount unmasked",
                proc_mount,
                none.clone(),
                json!({"containers": [c("d", json!({"procMount": "Unmasked"})), c("e", json!({"procMount": "other"}))]}),
                Some(("procMount", r#"containers "d", "e" must not set securityContext.procMount to "Unmasked", "other""#)),
            ),
            // SELinux
            ("selinux allowed", se_linux_options_1_0, none.clone(), json!({"securityContext": {"seLinuxOptions": {"type": "container_t", "level": "s0:c1"}}}), None),
            (
                "selinux pod and containers",
                se_linux_options_1_0,
                none.clone(),
                json!({"securityContext": {"seLinuxOptions": {"type": "foo"}}, "containers": [c("e", json!({"seLinuxOptions": {"type": "bar"}})), c("f", json!({"seLinuxOptions": {"user": "u"}})), c("g", json!({"seLinuxOptions": {"role": "r"}}))]}),
                Some(("seLinuxOptions", r#"pod and containers "e", "f", "g" set forbidden securityContext.seLinuxOptions: types "bar", "foo"; user may not be set; role may not be set"#)),
            ),
            (
                "selinux user",
                se_linux_options_1_0,
                none.clone(),
                json!({"securityContext": {"seLinuxOptions": {"user": "u"}}}),
                Some(("seLinuxOptions", "pod set forbidden securityContext.seLinuxOptions: user may not be set")),
            ),
            (
                "container_engine_t before 1.31",
                se_linux_options_1_0,
                none.clone(),
                json!({"securityContext": {"seLinuxOptions": {"type": "container_engine_t"}}}),
                Some(("seLinuxOptions", r#"pod set forbidden securityContext.seLinuxOptions: type "container_engine_t""#)),
            ),
            ("container_engine_t from 1.31", se_linux_options_1_31, none.clone(), json!({"securityContext": {"seLinuxOptions": {"type": "container_engine_t"}}}), None),
            // seccomp (baseline)
            ("seccomp unset", seccomp_baseline, none.clone(), json!({"containers": [c("a", Value::Null)]}), None),
            (
                "seccomp unconfined",
                seccomp_baseline,
                none.clone(),
                json!({"securityContext": {"seccompProfile": {"type": "Unconfined"}}, "containers": [c("a", Value::Null), c("c", json!({"seccompProfile": {"type": "Unconfined"}})), c("d", json!({"seccompProfile": {"type": "Unconfined"}}))]}),
                Some(("seccompProfile", r#"pod and containers "c", "d" must not set securityContext.seccompProfile.type to "Unconfined""#)),
            ),
            (
                "seccomp annotations",
                seccomp_baseline_annotations,
                json!({"annotations": {"seccomp.security.alpha.kubernetes.io/pod": "unconfined", "container.seccomp.security.alpha.kubernetes.io/a": "unconfined", "container.seccomp.security.alpha.kubernetes.io/b": "unknown", "container.seccomp.security.alpha.kubernetes.io/c": "docker/default"}}),
                json!({"containers": [c("a", Value::Null), c("b", Value::Null), c("c", Value::Null)]}),
                Some((
                    "seccompProfile",
                    r#"forbidden annotations container.seccomp.security.alpha.kubernetes.io/a="unconfined", container.seccomp.security.alpha.kubernetes.io/b="unknown", seccomp.security.alpha.kubernetes.io/pod="unconfined""#,
                )),
            ),
            // sysctls
            ("safe sysctls", sysctls_1_0, none.clone(), json!({"securityContext": {"sysctls": [{"name": "kernel.shm_rmid_forced", "value": "0"}]}}), None),
            ("unsafe sysctls", sysctls_1_32, none.clone(), json!({"securityContext": {"sysctls": [{"name": "b", "value": "0"}, {"name": "a", "value": "0"}]}}), Some(("forbidden sysctls", "b, a"))),
            (
                "reserved ports before 1.27",
                sysctls_1_0,
                none.clone(),
                json!({"securityContext": {"sysctls": [{"name": "net.ipv4.ip_local_reserved_ports"}]}}),
                Some(("forbidden sysctls", "net.ipv4.ip_local_reserved_ports")),
            ),
            ("reserved ports from 1.27", sysctls_1_27, none.clone(), json!({"securityContext": {"sysctls": [{"name": "net.ipv4.ip_local_reserved_ports"}]}}), None),
            (
                "keepalive before 1.29",
                sysctls_1_27,
                none.clone(),
                json!({"securityContext": {"sysctls": [{"name": "net.ipv4.tcp_keepalive_time"}]}}),
                Some(("forbidden sysctls", "net.ipv4.tcp_keepalive_time")),
            ),
            ("keepalive from 1.29", sysctls_1_29, none.clone(), json!({"securityContext": {"sysctls": [{"name": "net.ipv4.tcp_keepalive_time"}]}}), None),
            ("tcp_rmem before 1.32", sysctls_1_29, none.clone(), json!({"securityContext": {"sysctls": [{"name": "net.ipv4.tcp_rmem"}]}}), Some(("forbidden sysctls", "net.ipv4.tcp_rmem"))),
            ("tcp_rmem from 1.32", sysctls_1_32, none.clone(), json!({"securityContext": {"sysctls": [{"name": "net.ipv4.tcp_rmem"}]}}), None),
            // hostProcess
            ("hostProcess false", windows_host_process, none.clone(), json!({"securityContext": {"windowsOptions": {"hostProcess": false}}}), None),
            (
                "hostProcess",
                windows_host_process,
                none.clone(),
                json!({"securityContext": {"windowsOptions": {"hostProcess": true}}, "containers": [c("e", json!({"windowsOptions": {"hostProcess": true}})), c("f", json!({"windowsOptions": {"hostProcess": true}}))]}),
                Some(("hostProcess", r#"pod and containers "e", "f" must not set securityContext.windowsOptions.hostProcess=true"#)),
            ),
        ]);
    }

    #[test]
    fn restricted_checks() {
        let none = json!({});
        let windows = |mut spec: Value| {
            spec["os"] = json!({"name": "windows"});
            spec
        };
        table(vec![
            // privilege escalation
            ("escalation false", allow_privilege_escalation, none.clone(), json!({"containers": [c("a", json!({"allowPrivilegeEscalation": false}))]}), None),
            (
                "escalation unset or true",
                allow_privilege_escalation,
                none.clone(),
                json!({"containers": [c("a", Value::Null), c("b", json!({})), c("c", json!({"allowPrivilegeEscalation": true})), c("d", json!({"allowPrivilegeEscalation": false}))]}),
                Some(("allowPrivilegeEscalation != false", r#"containers "a", "b", "c" must set securityContext.allowPrivilegeEscalation=false"#)),
            ),
            (
                "escalation windows before 1.25",
                allow_privilege_escalation,
                none.clone(),
                windows(json!({"containers": [c("a", Value::Null)]})),
                Some(("allowPrivilegeEscalation != false", r#"container "a" must set securityContext.allowPrivilegeEscalation=false"#)),
            ),
            ("escalation windows from 1.25", allow_privilege_escalation_1_25, none.clone(), windows(json!({"containers": [c("a", Value::Null)]})), None),
            // capabilities (restricted)
            ("drop ALL, add NET_BIND_SERVICE", capabilities_restricted, none.clone(), json!({"containers": [c("a", json!({"capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}}))]}), None),
            (
                "no drop",
                capabilities_restricted,
                none.clone(),
                json!({"containers": [c("a", json!({}))]}),
                Some(("unrestricted capabilities", r#"container "a" must set securityContext.capabilities.drop=["ALL"]"#)),
            ),
            (
                "no drop and forbidden adds",
                capabilities_restricted,
                none.clone(),
                json!({"containers": [
                    c("a", json!({"capabilities": {"add": ["FOO", "NET_BIND_SERVICE"]}})),
                    c("b", json!({"capabilities": {"drop": ["CHOWN"], "add": ["BAR", "CHOWN"]}})),
                    c("c", json!({"capabilities": {"drop": ["ALL"], "add": ["BAZ"]}})),
                    c("d", json!({"capabilities": {"drop": ["ALL"]}}))
                ]}),
                Some((
                    "unrestricted capabilities",
                    r#"containers "a", "b" must set securityContext.capabilities.drop=["ALL"]; containers "a", "b", "c" must not include "BAR", "BAZ", "CHOWN", "FOO" in securityContext.capabilities.add"#,
                )),
            ),
            ("capabilities windows from 1.25", capabilities_restricted_1_25, none.clone(), windows(json!({"containers": [c("a", Value::Null)]})), None),
            // volume types
            (
                "allowed volume types",
                restricted_volumes,
                none.clone(),
                json!({"volumes": [{"name": "a", "configMap": {"name": "x"}}, {"name": "b", "secret": {}}, {"name": "c", "emptyDir": {}}, {"name": "d", "projected": {}}, {"name": "e", "persistentVolumeClaim": {"claimName": "x"}}, {"name": "f", "ephemeral": {}}, {"name": "g", "csi": {"driver": "d"}}, {"name": "h", "downwardAPI": {}}, {"name": "i", "image": {"reference": "r"}}]}),
                None,
            ),
            (
                "one restricted volume",
                restricted_volumes,
                none.clone(),
                json!({"volumes": [{"name": "a", "hostPath": {"path": "/"}}]}),
                Some(("restricted volume types", r#"volume "a" uses restricted volume type "hostPath""#)),
            ),
            (
                "restricted volumes",
                restricted_volumes,
                none.clone(),
                json!({"volumes": [{"name": "b", "nfs": {}}, {"name": "a", "hostPath": {"path": "/"}}, {"name": "ok", "emptyDir": {}}, {"name": "c", "nfs": null, "cephfs": {}}, {"name": "d"}]}),
                Some(("restricted volume types", r#"volumes "b", "a", "c", "d" use restricted volume types "cephfs", "hostPath", "nfs", "unknown""#)),
            ),
            // non-root
            ("pod runAsNonRoot", run_as_non_root, none.clone(), json!({"securityContext": {"runAsNonRoot": true}, "containers": [c("a", Value::Null)]}), None),
            ("container runAsNonRoot", run_as_non_root, none.clone(), json!({"containers": [c("a", json!({"runAsNonRoot": true}))]}), None),
            (
                "runAsNonRoot unset",
                run_as_non_root,
                none.clone(),
                json!({"containers": [c("a", Value::Null)]}),
                Some(("runAsNonRoot != true", r#"pod or container "a" must set securityContext.runAsNonRoot=true"#)),
            ),
            (
                "runAsNonRoot unset on some",
                run_as_non_root,
                none.clone(),
                json!({"containers": [c("a", Value::Null), c("b", json!({})), c("c", json!({"runAsNonRoot": true}))]}),
                Some(("runAsNonRoot != true", r#"pod or containers "a", "b" must set securityContext.runAsNonRoot=true"#)),
            ),
            (
                "runAsNonRoot false",
                run_as_non_root,
                none.clone(),
                json!({"securityContext": {"runAsNonRoot": false}, "containers": [c("a", Value::Null), c("c", json!({"runAsNonRoot": false})), c("d", json!({"runAsNonRoot": false}))]}),
                Some(("runAsNonRoot != true", r#"pod and containers "c", "d" must not set securityContext.runAsNonRoot=false"#)),
            ),
            (
                "container false under pod true",
                run_as_non_root,
                none.clone(),
                json!({"securityContext": {"runAsNonRoot": true}, "containers": [c("c", json!({"runAsNonRoot": false}))]}),
                Some(("runAsNonRoot != true", r#"container "c" must not set securityContext.runAsNonRoot=false"#)),
            ),
            // run as user
            ("runAsUser 1000", run_as_user, none.clone(), json!({"securityContext": {"runAsUser": 1000}, "containers": [c("a", json!({"runAsUser": 1}))]}), None),
            ("runAsUser 0 on pod", run_as_user, none.clone(), json!({"securityContext": {"runAsUser": 0}, "containers": [c("a", Value::Null)]}), Some(("runAsUser=0", "pod must not set runAsUser=0"))),
            (
                "runAsUser 0 on containers",
                run_as_user,
                none.clone(),
                json!({"containers": [c("a", json!({"runAsUser": 1})), c("c", json!({"runAsUser": 0})), c("d", json!({"runAsUser": 0}))]}),
                Some(("runAsUser=0", r#"containers "c", "d" must not set runAsUser=0"#)),
            ),
            // seccomp (restricted)
            ("seccomp on pod", seccomp_restricted, none.clone(), json!({"securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}, "containers": [c("a", Value::Null)]}), None),
            ("seccomp on containers", seccomp_restricted, none.clone(), json!({"containers": [c("a", json!({"seccompProfile": {"type": "Localhost", "localhostProfile": "p"}}))]}), None),
            (
                "seccomp unset",
                seccomp_restricted,
                none.clone(),
                json!({"containers": [c("a", Value::Null), c("b", json!({}))]}),
                Some(("seccompProfile", r#"pod or containers "a", "b" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost""#)),
            ),
            (
                "seccomp unconfined pod",
                seccomp_restricted,
                none.clone(),
                json!({"securityContext": {"seccompProfile": {"type": "Unconfined"}}, "containers": [c("a", Value::Null)]}),
                Some(("seccompProfile", r#"pod must not set securityContext.seccompProfile.type to "Unconfined""#)),
            ),
            ("seccomp windows from 1.25", seccomp_restricted_1_25, none.clone(), windows(json!({"containers": [c("a", Value::Null)]})), None),
        ]);
    }

    /// A pod that meets restricted.
    fn restricted_pod() -> Value {
        json!({
            "metadata": {"name": "p"},
            "spec": {
                "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
                "containers": [c("c", json!({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}))]
            }
        })
    }

    fn eval(level: Level, version: Version, pod: &Value) -> String {
        evaluate(level, version, &PodView::of_pod(pod)).details()
    }

    #[test]
    fn levels_run_their_checks_in_kubes_order() {
        let plain = json!({"metadata": {"name": "p"}, "spec": {"containers": [c("c", Value::Null)]}});
        assert_eq!(
            eval(Level::Restricted, Version::Latest, &plain),
            r#"allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")"#
        );
        assert_eq!(eval(Level::Baseline, Version::Latest, &plain), "");
        assert_eq!(eval(Level::Privileged, Version::Latest, &plain), "");
        assert_eq!(eval(Level::Restricted, Version::Latest, &restricted_pod()), "");

        // Baseline violations come first, and restricted checks replace
        // the baseline ones they cover (one hostPath entry, not two).
        let mut bad = restricted_pod();
        bad["spec"]["hostNetwork"] = json!(true);
        bad["spec"]["volumes"] = json!([{"name": "h", "hostPath": {"path": "/"}}]);
        bad["spec"]["containers"][0]["securityContext"]["privileged"] = json!(true);
        bad["spec"]["containers"][0]["securityContext"]["capabilities"]["add"] = json!(["SYS_ADMIN"]);
        bad["spec"]["containers"][0]["securityContext"]["runAsUser"] = json!(0);
        assert_eq!(
            eval(Level::Restricted, Version::Latest, &bad),
            r#"host namespaces (hostNetwork=true), privileged (container "c" must not set securityContext.privileged=true), unrestricted capabilities (container "c" must not include "SYS_ADMIN" in securityContext.capabilities.add), restricted volume types (volume "h" uses restricted volume type "hostPath"), runAsUser=0 (container "c" must not set runAsUser=0)"#
        );
        assert_eq!(
            eval(Level::Baseline, Version::Latest, &bad),
            r#"non-default capabilities (container "c" must not include "SYS_ADMIN" in securityContext.capabilities.add), host namespaces (hostNetwork=true), hostPath volumes (volume "h"), privileged (container "c" must not set securityContext.privileged=true)"#
        );
        assert_eq!(evaluate(Level::Baseline, Version::Latest, &PodView::of_pod(&bad)).reasons(), "non-default capabilities, host namespaces, hostPath volumes, privileged");
    }

    #[test]
    fn versions_pick_the_revisions_of_their_time() {
        let mut pod = restricted_pod();
        pod["spec"]["containers"][0]["securityContext"]["runAsUser"] = json!(0);
        // runAsUser joined restricted in 1.23.
        assert_eq!(eval(Level::Restricted, Version::Minor(22), &pod), "");
        assert_eq!(eval(Level::Restricted, Version::Minor(23), &pod), r#"runAsUser=0 (container "c" must not set runAsUser=0)"#);

        // Before 1.22 restricted has no capabilities check of its own, so
        // the baseline one runs.
        let mut caps = restricted_pod();
        caps["spec"]["containers"][0]["securityContext"]["capabilities"] = json!({"add": ["SYS_ADMIN"]});
        assert_eq!(eval(Level::Restricted, Version::Minor(21), &caps), r#"non-default capabilities (container "c" must not include "SYS_ADMIN" in securityContext.capabilities.add)"#);
        assert_eq!(
            eval(Level::Restricted, Version::Minor(22), &caps),
            r#"unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]; container "c" must not include "SYS_ADMIN" in securityContext.capabilities.add)"#
        );

        // Before 1.19 seccomp was the annotations (a baseline check, so it
        // comes first); before 1.8 there was no privilege escalation check.
        let plain = json!({"metadata": {"annotations": {"seccomp.security.alpha.kubernetes.io/pod": "unconfined"}}, "spec": {"containers": [c("c", Value::Null)]}});
        assert_eq!(
            eval(Level::Restricted, Version::Minor(7), &plain),
            r#"seccompProfile (forbidden annotation seccomp.security.alpha.kubernetes.io/pod="unconfined"), runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true)"#
        );

        // Windows pods skip the Linux-only checks from 1.25.
        let mut win = json!({"metadata": {}, "spec": {"os": {"name": "windows"}, "securityContext": {"runAsNonRoot": true}, "containers": [c("c", Value::Null)]}});
        assert_eq!(eval(Level::Restricted, Version::Minor(25), &win), "");
        assert_eq!(eval(Level::Restricted, Version::Minor(24), &win).split(" (").next(), Some("allowPrivilegeEscalation != false"));
        win["spec"]["os"]["name"] = json!("linux");
        assert_ne!(eval(Level::Restricted, Version::Minor(25), &win), "");

        // Versions past the newest revision are the newest.
        let sysctl = json!({"metadata": {}, "spec": {"securityContext": {"sysctls": [{"name": "net.ipv4.tcp_wmem", "value": "1"}]}}});
        assert_eq!(eval(Level::Baseline, Version::Minor(31), &sysctl), "forbidden sysctls (net.ipv4.tcp_wmem)");
        assert_eq!(eval(Level::Baseline, Version::Minor(32), &sysctl), "");
        assert_eq!(eval(Level::Baseline, Version::Minor(99), &sysctl), "");
        assert_eq!(eval(Level::Baseline, Version::Latest, &sysctl), "");
    }

    #[test]
    fn checks_are_sorted_as_kube_sorts_them() {
        let ids = |l: Level| CHECKS.iter().filter(|c| c.level == l).map(|c| c.id).collect::<Vec<_>>();
        for l in [Level::Baseline, Level::Restricted] {
            let mut sorted = ids(l);
            sorted.sort_unstable();
            assert_eq!(ids(l), sorted);
        }
        let first_restricted = CHECKS.iter().position(|c| c.level == Level::Restricted).unwrap_or(0);
        assert!(CHECKS[first_restricted..].iter().all(|c| c.level == Level::Restricted));
        assert_eq!(CHECKS.iter().flat_map(|c| c.revisions.iter().map(|r| r.since)).max(), Some(NEWEST_MINOR));
        for c in CHECKS {
            assert!(c.revisions.windows(2).all(|w| w[0].since < w[1].since), "{}", c.id);
            for r in c.revisions {
                for o in r.overrides {
                    assert!(c.level == Level::Restricted && CHECKS.iter().any(|b| b.id == *o && b.level == Level::Baseline), "{}", c.id);
                }
            }
        }
    }
}
