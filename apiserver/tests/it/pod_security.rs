//! PodSecurity admission (the Pod Security Standards by namespace label)
//! through real kubectl 1.33 and 1.27, with kube-apiserver's messages word
//! for word: `enforce` refuses a root pod, `warn` warns on kubectl's
//! stderr, `kubectl debug` containers are checked too, a Deployment is
//! warned about and never refused, raising a namespace's enforce level
//! warns about its pods, `-version` labels pick older checks, `audit`
//! annotates the audit log, and `--disable-admission-plugins=PodSecurity`
//! turns it all off.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::{Out, Server};

/// What kube says about `kubectl run <name> --image=nginx` (one container
/// named after the pod, no security context) at restricted.
fn root_pod_violations(container: &str) -> String {
    format!(
        r#"allowPrivilegeEscalation != false (container "{container}" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "{container}" must set securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true (pod or container "{container}" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container "{container}" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")"#
    )
}

/// Creates namespace `name` with `labels`.
fn namespace(s: &Server, minor: u32, name: &str, labels: Value) {
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}).to_string();
    assert_eq!(s.kubectl_stdin(minor, &["create", "-f", "-"], Some(&ns)).ok().trim(), format!("namespace/{name} created"));
}

/// A pod that meets restricted, with `extra` merged into its container's
/// securityContext.
fn compliant_pod(name: &str, extra: Value) -> String {
    let mut sc = json!({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}});
    if let (Some(sc), Some(extra)) = (sc.as_object_mut(), extra.as_object()) {
        sc.extend(extra.clone());
    }
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "securityContext": {"runAsNonRoot": true, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "c", "image": "nginx", "securityContext": sc}]
        }
    })
    .to_string()
}

fn warnings(out: &Out) -> Vec<&str> {
    out.stderr.lines().filter_map(|l| l.strip_prefix("Warning: ")).collect()
}

/// One kubectl version's walk through the levels and modes.
fn levels_and_modes(s: &Server, minor: u32) {
    let enforced = format!("enforced-{minor}");
    namespace(s, minor, &enforced, json!({"pod-security.kubernetes.io/enforce": "restricted"}));

    // enforce: a root pod is refused with kube's message.
    let refused = s.kubectl(minor, &["run", "root", "--image=nginx", "-n", &enforced]);
    assert_eq!(refused.code, 1, "{refused:?}");
    assert_eq!(
        refused.stderr.trim(),
        format!(r#"Error from server (Forbidden): pods "root" is forbidden: violates PodSecurity "restricted:latest": {}"#, root_pod_violations("root")),
        "kubectl 1.{minor}"
    );
    assert_eq!(s.kubectl(minor, &["get", "pods", "-n", &enforced, "-o", "name"]).ok().trim(), "");

    // A compliant pod is admitted, without a warning.
    let admitted = s.kubectl_stdin(minor, &["create", "-n", &enforced, "-f", "-"], Some(&compliant_pod("ok", json!({}))));
    assert_eq!(admitted.ok().trim(), "pod/ok created");
    assert!(warnings(&admitted).is_empty(), "{admitted:?}");

    // kubectl debug adds an ephemeral container, checked as any other.
    let debug = s.kubectl(minor, &["debug", "ok", "-n", &enforced, "--image=busybox", "--container=dbg"]);
    assert_eq!(debug.code, 1, "{debug:?}");
    assert!(
        debug.stderr.contains(r#"pods "ok" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "dbg" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "dbg" must set securityContext.capabilities.drop=["ALL"])"#),
        "{debug:?}"
    );
    // kubectl 1.33's restricted profile makes a container that passes;
    // 1.27's did not set allowPrivilegeEscalation yet.
    let debug = s.kubectl(minor, &["debug", "ok", "-n", &enforced, "--image=busybox", "--container=dbg", "--profile=restricted"]);
    if minor >= 33 {
        assert_eq!(debug.code, 0, "{debug:?}");
        assert_eq!(s.kubectl(minor, &["get", "pod", "ok", "-n", &enforced, "-o", "jsonpath={.spec.ephemeralContainers[*].name}"]).ok(), "dbg");
    } else {
        assert_eq!(
            debug.stderr.trim(),
            r#"Error from server (Forbidden): pods "ok" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "dbg" must set securityContext.allowPrivilegeEscalation=false)"#
        );
    }

    // A Deployment is warned about (enforce also warns) and created.
    let deploy = s.kubectl(minor, &["create", "deployment", "web", "--image=nginx", "-n", &enforced]);
    assert_eq!(deploy.ok().trim(), "deployment.apps/web created");
    assert_eq!(warnings(&deploy), [format!(r#"would violate PodSecurity "restricted:latest": {}"#, root_pod_violations("nginx"))], "{deploy:?}");

    // warn: the pod is created and kubectl prints the warning.
    let warned = format!("warned-{minor}");
    namespace(s, minor, &warned, json!({"pod-security.kubernetes.io/warn": "restricted"}));
    let out = s.kubectl(minor, &["run", "root", "--image=nginx", "-n", &warned]);
    assert_eq!(out.ok().trim(), "pod/root created");
    assert_eq!(warnings(&out), [format!(r#"would violate PodSecurity "restricted:latest": {}"#, root_pod_violations("root"))], "{out:?}");

    // Raising the enforce level warns about the pods already there.
    let labelled = s.kubectl(minor, &["label", "ns", &warned, "pod-security.kubernetes.io/enforce=restricted"]);
    assert_eq!(labelled.ok().trim(), format!("namespace/{warned} labeled"));
    assert_eq!(
        warnings(&labelled),
        [
            format!(r#"existing pods in namespace "{warned}" violate the new PodSecurity enforce level "restricted:latest""#),
            "root: allowPrivilegeEscalation != false, unrestricted capabilities, runAsNonRoot != true, seccompProfile".to_string(),
        ],
        "{labelled:?}"
    );

    // Labels must name a level and a version.
    let bad = s.kubectl(minor, &["label", "ns", &warned, "pod-security.kubernetes.io/audit=strict", "--overwrite"]);
    assert_eq!(bad.code, 1, "{bad:?}");
    assert!(
        bad.stderr
            .contains(&format!(r#"The Namespace "{warned}" is invalid: metadata.labels[pod-security.kubernetes.io/audit]: Invalid value: "strict": must be one of privileged, baseline, restricted"#)),
        "{bad:?}"
    );

    // baseline refuses privileged containers and host namespaces, not root.
    let baseline = format!("baseline-{minor}");
    namespace(s, minor, &baseline, json!({"pod-security.kubernetes.io/enforce": "baseline"}));
    assert_eq!(s.kubectl(minor, &["run", "root", "--image=nginx", "-n", &baseline]).ok().trim(), "pod/root created");
    let privileged = json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "priv"},
        "spec": {
            "hostNetwork": true,
            "initContainers": [{"name": "setup", "image": "busybox", "securityContext": {"privileged": true}}],
            "containers": [{"name": "c", "image": "nginx", "ports": [{"containerPort": 8080, "hostPort": 8080}], "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}}}],
            "volumes": [{"name": "host", "hostPath": {"path": "/etc"}}]
        }
    });
    let refused = s.kubectl_stdin(minor, &["create", "-n", &baseline, "-f", "-"], Some(&privileged.to_string()));
    assert_eq!(refused.code, 1, "{refused:?}");
    assert_eq!(
        refused.stderr.trim(),
        r#"Error from server (Forbidden): error when creating "STDIN": pods "priv" is forbidden: violates PodSecurity "baseline:latest": non-default capabilities (container "c" must not include "NET_ADMIN" in securityContext.capabilities.add), host namespaces (hostNetwork=true), hostPath volumes (volume "host"), hostPort (container "c" uses hostPort 8080), privileged (container "setup" must not set securityContext.privileged=true)"#,
        "kubectl 1.{minor}"
    );

    // -version: runAsUser=0 joined restricted in v1.23.
    let old = format!("restricted-122-{minor}");
    namespace(s, minor, &old, json!({"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "v1.22"}));
    let as_root = compliant_pod("uid0", json!({"runAsUser": 0}));
    assert_eq!(s.kubectl_stdin(minor, &["create", "-n", &old, "-f", "-"], Some(&as_root)).ok().trim(), "pod/uid0 created");
    let refused = s.kubectl_stdin(minor, &["create", "-n", &enforced, "-f", "-"], Some(&as_root));
    assert_eq!(refused.code, 1, "{refused:?}");
    assert!(refused.stderr.contains(r#"pods "uid0" is forbidden: violates PodSecurity "restricted:latest": runAsUser=0 (container "c" must not set runAsUser=0)"#), "{refused:?}");
}

#[test]
fn namespace_labels_enforce_warn_and_version_the_standards() {
    let s = Server::start();
    for minor in [33, 27] {
        levels_and_modes(&s, minor);
    }
}

/// The audit log's events, once `done` holds for them.
fn wait_events(log: &Path, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let events: Vec<Value> = std::fs::read_to_string(log).unwrap_or_default().lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
        if done(&events) || Instant::now() > deadline {
            return events;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The ResponseComplete event of the create of `resource` in `ns`.
fn create_event<'a>(events: &'a [Value], resource: &str, ns: &str) -> Option<&'a Value> {
    events.iter().find(|e| e["verb"] == "create" && e["stage"] == "ResponseComplete" && e["objectRef"]["resource"] == resource && e["objectRef"]["namespace"] == ns)
}

#[test]
fn audit_mode_annotates_the_audit_log() {
    let files = tempfile::tempdir().unwrap();
    let policy = files.path().join("policy.yaml");
    std::fs::write(
        &policy,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n  resources:\n  - group: \"\"\n    resources: [\"pods\"]\n  - group: apps\n    resources: [\"deployments\"]\n",
    )
    .unwrap();
    let log = files.path().join("audit.log");
    let s = Server::start_with(&[format!("--audit-policy-file={}", policy.display()), format!("--audit-log-path={}", log.display())]);
    namespace(&s, 33, "audited", json!({"pod-security.kubernetes.io/audit": "restricted"}));
    namespace(&s, 33, "enforced", json!({"pod-security.kubernetes.io/enforce": "restricted"}));
    namespace(&s, 33, "open", json!({}));

    // audit: admitted without a warning, the violations go to the log.
    let out = s.kubectl(33, &["run", "root", "--image=nginx", "-n", "audited"]);
    assert_eq!(out.ok().trim(), "pod/root created");
    assert!(warnings(&out).is_empty(), "{out:?}");
    s.kubectl(33, &["create", "deployment", "web", "--image=nginx", "-n", "audited"]).ok();
    assert_eq!(s.kubectl(33, &["run", "root", "--image=nginx", "-n", "enforced"]).code, 1);
    s.kubectl(33, &["run", "root", "--image=nginx", "-n", "open"]).ok();

    let events = wait_events(&log, |evs| ["audited", "enforced", "open"].iter().all(|ns| create_event(evs, "pods", ns).is_some()) && create_event(evs, "deployments", "audited").is_some());
    let annotations = |resource: &str, ns: &str| create_event(&events, resource, ns).map(|e| e["annotations"].clone()).unwrap_or_else(|| panic!("no create of {resource} in {ns}: {events:#?}"));
    let pod = annotations("pods", "audited");
    assert_eq!(pod["pod-security.kubernetes.io/audit-violations"], format!(r#"would violate PodSecurity "restricted:latest": {}"#, root_pod_violations("root")), "{pod}");
    assert_eq!(pod["pod-security.kubernetes.io/enforce-policy"], "privileged:latest", "{pod}");
    let deployment = annotations("deployments", "audited");
    assert_eq!(deployment["pod-security.kubernetes.io/audit-violations"], format!(r#"would violate PodSecurity "restricted:latest": {}"#, root_pod_violations("nginx")), "{deployment}");
    assert!(deployment.get("pod-security.kubernetes.io/enforce-policy").is_none(), "{deployment}");
    let refused = create_event(&events, "pods", "enforced").cloned().unwrap_or_default();
    assert_eq!(refused["responseStatus"]["code"], 403, "{refused}");
    assert_eq!(refused["annotations"]["pod-security.kubernetes.io/enforce-policy"], "restricted:latest", "{refused}");
    assert!(refused["annotations"].get("pod-security.kubernetes.io/audit-violations").is_none(), "{refused}");
    let open = annotations("pods", "open");
    assert_eq!(open["pod-security.kubernetes.io/enforce-policy"], "privileged:latest", "{open}");
    assert!(open.get("pod-security.kubernetes.io/audit-violations").is_none(), "{open}");
}

#[test]
fn disabled_plugin_admits_any_pod() {
    let s = Server::start_with(&["--disable-admission-plugins=PodSecurity".to_string()]);
    for minor in [33, 27] {
        let ns = format!("enforced-{minor}");
        namespace(&s, minor, &ns, json!({"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/warn": "restricted"}));
        let out = s.kubectl(minor, &["run", "root", "--image=nginx", "-n", &ns]);
        assert_eq!(out.ok().trim(), "pod/root created");
        assert!(warnings(&out).is_empty(), "{out:?}");
        // Nor are its labels checked.
        assert_eq!(s.kubectl(minor, &["label", "ns", &ns, "pod-security.kubernetes.io/enforce=strict", "--overwrite"]).ok().trim(), format!("namespace/{ns} labeled"));
    }
}

/// `--admission-control-config-file` with a `PodSecurityConfiguration`:
/// the defaults apply to unlabelled namespaces, exempt namespaces are not
/// checked (and their labels draw a warning), and a bad configuration
/// stops the start.
#[test]
fn configuration_file_sets_defaults_and_exemptions() {
    let files = tempfile::tempdir().unwrap();
    let config = files.path().join("admission.yaml");
    std::fs::write(&config, "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: PodSecurity\n  path: podsecurity.yaml\n").unwrap();
    std::fs::write(
        files.path().join("podsecurity.yaml"),
        "apiVersion: pod-security.admission.config.k8s.io/v1\nkind: PodSecurityConfiguration\ndefaults:\n  enforce: baseline\nexemptions:\n  namespaces: [exempt]\n",
    )
    .unwrap();
    let s = Server::start_with(&[format!("--admission-control-config-file={}", config.display())]);
    let privileged =
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "priv"}, "spec": {"containers": [{"name": "c", "image": "nginx", "securityContext": {"privileged": true}}]}}).to_string();
    for minor in [33, 27] {
        let open = format!("open-{minor}");
        namespace(&s, minor, &open, json!({}));
        let refused = s.kubectl_stdin(minor, &["create", "-n", &open, "-f", "-"], Some(&privileged));
        assert_eq!(
            refused.stderr.trim(),
            r#"Error from server (Forbidden): error when creating "STDIN": pods "priv" is forbidden: violates PodSecurity "baseline:latest": privileged (container "c" must not set securityContext.privileged=true)"#,
            "kubectl 1.{minor}"
        );
        // A root pod meets baseline.
        assert_eq!(s.kubectl(minor, &["run", "root", "--image=nginx", "-n", &open]).ok().trim(), "pod/root created");
    }
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "exempt", "labels": {"pod-security.kubernetes.io/enforce": "restricted"}}}).to_string();
    let created = s.kubectl_stdin(33, &["create", "-f", "-"], Some(&ns));
    assert_eq!(created.ok().trim(), "namespace/exempt created");
    assert_eq!(warnings(&created), [r#"namespace "exempt" is exempt from Pod Security, and the policy (enforce=restricted:latest) will be ignored"#], "{created:?}");
    assert_eq!(s.kubectl_stdin(33, &["create", "-n", "exempt", "-f", "-"], Some(&privileged)).ok().trim(), "pod/priv created");

    std::fs::write(files.path().join("podsecurity.yaml"), "apiVersion: pod-security.admission.config.k8s.io/v1\nkind: PodSecurityConfiguration\ndefaults:\n  warn: loud\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_apiserver"))
        .args(["--secure-port", "0", "--data-dir"])
        .arg(files.path().join("data"))
        .arg(format!("--admission-control-config-file={}", config.display()))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(r#"couldn't init admission plugin "PodSecurity": defaults.warn: Invalid value: "loud": must be one of privileged, baseline, restricted"#), "{stderr}");
}
