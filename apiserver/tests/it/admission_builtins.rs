//! kube-apiserver's default built-in admission plugins, driven by real
//! kubectl 1.33 and 1.27 and raw HTTPS: LimitRanger, ResourceQuota (with
//! concurrent creates that must not overshoot), DefaultStorageClass,
//! Priority, DefaultTolerationSeconds, RuntimeClass and
//! StorageObjectInUseProtection, and each of them switched off by
//! `--disable-admission-plugins`.

use std::time::Duration;

use serde_json::{json, Value};

use crate::common::{body_of, https_request, Out, Server};

const MINORS: [u32; 2] = [33, 27];

/// `kubectl create -f -` of `obj` in `ns`.
fn create(s: &Server, minor: u32, ns: &str, obj: &Value) -> Out {
    s.kubectl_stdin(minor, &["create", "--validate=false", "-n", ns, "-f", "-"], Some(&obj.to_string()))
}

fn get(s: &Server, ns: &str, what: &str) -> Value {
    serde_json::from_str(s.kubectl(33, &["get", "-n", ns, what, "-o", "json"]).ok()).unwrap()
}

fn pod(name: &str, spec: Value) -> Value {
    let mut spec = spec;
    if spec.get("containers").is_none() {
        spec["containers"] = json!([{"name": "app", "image": "nginx"}]);
    }
    spec["automountServiceAccountToken"] = json!(false);
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})
}

fn namespace(s: &Server, name: &str) {
    s.kubectl(33, &["create", "namespace", name]).ok();
    // Pods need the namespace's `default` ServiceAccount (its controller
    // makes it).
    until(&format!("ServiceAccount {name}/default"), || s.kubectl(33, &["get", "sa", "default", "-n", name]).code == 0);
}

/// Polls `f` until it holds (at most about 30 s, then fails).
#[track_caller]
fn until(what: &str, mut f: impl FnMut() -> bool) {
    for _ in 0..150 {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("never happened: {what}");
}

/// `kubectl create` refused with 403 and `message`.
#[track_caller]
fn refused(out: &Out, message: &str) {
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("Error from server (Forbidden)"), "{out:?}");
    assert!(out.stderr.contains(message), "want {message:?} in {out:?}");
}

#[test]
fn limit_ranger_fills_defaults_and_enforces_max() {
    let s = Server::start();
    namespace(&s, "lr");
    let range = json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "limits"}, "spec": {"limits": [
        {"type": "Container", "max": {"cpu": "1"}, "default": {"cpu": "500m", "memory": "128Mi"}, "defaultRequest": {"cpu": "250m"}},
        {"type": "PersistentVolumeClaim", "max": {"storage": "2Gi"}},
    ]}});
    create(&s, 33, "lr", &range).ok();
    for minor in MINORS {
        let name = format!("defaulted-{minor}");
        create(&s, minor, "lr", &pod(&name, json!({"initContainers": [{"name": "init", "image": "busybox", "resources": {"requests": {"memory": "64Mi"}}}]}))).ok();
        let p = get(&s, "lr", &format!("pod/{name}"));
        assert_eq!(p["spec"]["containers"][0]["resources"], json!({"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": "250m", "memory": "128Mi"}}), "{p}");
        assert_eq!(p["spec"]["initContainers"][0]["resources"], json!({"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": "250m", "memory": "64Mi"}}), "{p}");
        assert_eq!(
            p["metadata"]["annotations"]["kubernetes.io/limit-ranger"],
            "LimitRanger plugin set: cpu, memory request for container app; cpu, memory limit for container app; cpu request for init container init; cpu, memory limit for init container init"
        );

        let big = pod(&format!("big-{minor}"), json!({"containers": [{"name": "app", "image": "nginx", "resources": {"limits": {"cpu": "2"}}}]}));
        refused(&create(&s, minor, "lr", &big), &format!("pods \"big-{minor}\" is forbidden: maximum cpu usage per Container is 1, but limit is 2"));
        assert_eq!(s.kubectl(minor, &["get", "pod", &format!("big-{minor}"), "-n", "lr"]).code, 1);

        let claim = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": format!("huge-{minor}")}, "spec": {
            "accessModes": ["ReadWriteOnce"], "storageClassName": "", "resources": {"requests": {"storage": "5Gi"}}}});
        refused(&create(&s, minor, "lr", &claim), &format!("persistentvolumeclaims \"huge-{minor}\" is forbidden: maximum storage usage per PersistentVolumeClaim is 2Gi, but request is 5Gi"));
    }
}

/// The reply of a raw HTTPS POST of `body` to `path` as the admin user:
/// (status code, body).
fn post(s: &Server, path: &str, body: &str) -> (u16, String) {
    let req = format!("POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
    let resp = https_request(s, &req, true);
    let code = resp.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (code, body_of(&resp))
}

/// `status.used[resource]` of a quota, or `""`.
fn used(s: &Server, ns: &str, quota: &str, resource: &str) -> String {
    let q = get(s, ns, &format!("resourcequota/{quota}"));
    q["status"]["used"][resource].as_str().unwrap_or("").to_string()
}

#[test]
fn resource_quota_counts_refuses_and_never_overshoots() {
    let s = Server::start();
    namespace(&s, "quota");
    let quota = json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "pods-5"}, "spec": {"hard": {"pods": "5"}}});
    create(&s, 33, "quota", &quota).ok();
    // The controller fills the status; until then kube refuses with
    // `status unknown for quota`.
    until("status.used of pods-5", || used(&s, "quota", "pods-5", "pods") == "0");
    assert_eq!(get(&s, "quota", "resourcequota/pods-5")["status"]["hard"], json!({"pods": "5"}));

    // 20 concurrent creates against a quota of 5: exactly 5 succeed.
    let results: Vec<(u16, String)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..20)
            .map(|i| {
                let s = &s;
                scope.spawn(move || post(s, "/api/v1/namespaces/quota/pods", &pod(&format!("p{i}"), json!({})).to_string()))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let created = results.iter().filter(|(c, _)| *c == 201).count();
    assert_eq!(created, 5, "{results:?}");
    for (code, body) in results.iter().filter(|(c, _)| *c != 201) {
        assert_eq!(*code, 403, "{body}");
        let status: Value = serde_json::from_str(body).unwrap();
        assert_eq!(status["reason"], "Forbidden", "{body}");
        let name = status["details"]["name"].as_str().unwrap_or("");
        assert_eq!(status["message"], format!("pods \"{name}\" is forbidden: exceeded quota: pods-5, requested: pods=1, used: pods=5, limited: pods=5"), "{body}");
    }
    assert_eq!(used(&s, "quota", "pods-5", "pods"), "5");
    let pods = s.kubectl(33, &["get", "pods", "-n", "quota", "-o", "name"]);
    assert_eq!(pods.ok().lines().count(), 5, "{pods:?}");

    for minor in MINORS {
        let out = create(&s, minor, "quota", &pod(&format!("extra-{minor}"), json!({})));
        refused(&out, &format!("pods \"extra-{minor}\" is forbidden: exceeded quota: pods-5, requested: pods=1, used: pods=5, limited: pods=5"));
    }

    // A delete frees its charge (the controller recounts); a dry run is
    // checked but not charged.
    let first = s.kubectl(33, &["get", "pods", "-n", "quota", "-o", "jsonpath={.items[0].metadata.name}"]).ok().to_string();
    s.kubectl(33, &["delete", "pod", &first, "-n", "quota"]).ok();
    until("pods-5 used back at 4", || used(&s, "quota", "pods-5", "pods") == "4");
    for minor in MINORS {
        let dry = s.kubectl_stdin(minor, &["create", "--validate=false", "--dry-run=server", "-n", "quota", "-f", "-", "-o", "name"], Some(&pod("dry", json!({})).to_string()));
        assert_eq!(dry.ok().trim(), "pod/dry");
    }
    assert_eq!(used(&s, "quota", "pods-5", "pods"), "4");
    create(&s, 27, "quota", &pod("fifth", json!({}))).ok();
    assert_eq!(used(&s, "quota", "pods-5", "pods"), "5");
    let dry = s.kubectl_stdin(33, &["create", "--validate=false", "--dry-run=server", "-n", "quota", "-f", "-"], Some(&pod("dry", json!({})).to_string()));
    refused(&dry, "exceeded quota: pods-5, requested: pods=1, used: pods=5, limited: pods=5");

    // Compute resources and object counts.
    namespace(&s, "compute");
    until("the root CA ConfigMap of compute", || s.kubectl(33, &["get", "cm", "kube-root-ca.crt", "-n", "compute"]).code == 0);
    let compute = json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "compute"}, "spec": {"hard": {"requests.cpu": "1", "limits.memory": "1Gi", "count/configmaps": "10"}}});
    create(&s, 33, "compute", &compute).ok();
    until("status.used of compute", || used(&s, "compute", "compute", "requests.cpu") == "0");
    refused(&create(&s, 33, "compute", &pod("bare", json!({}))), "pods \"bare\" is forbidden: failed quota: compute: must specify limits.memory for: app; requests.cpu for: app");
    let sized = |name: &str, cpu: &str| pod(name, json!({"containers": [{"name": "app", "image": "nginx", "resources": {"requests": {"cpu": cpu}, "limits": {"memory": "512Mi"}}}]}));
    create(&s, 33, "compute", &sized("a", "600m")).ok();
    assert_eq!(used(&s, "compute", "compute", "requests.cpu"), "600m");
    assert_eq!(used(&s, "compute", "compute", "limits.memory"), "512Mi");
    for minor in MINORS {
        refused(
            &create(&s, minor, "compute", &sized(&format!("b-{minor}"), "600m")),
            &format!("pods \"b-{minor}\" is forbidden: exceeded quota: compute, requested: requests.cpu=600m, used: requests.cpu=600m, limited: requests.cpu=1"),
        );
    }
    create(&s, 27, "compute", &sized("c", "400m")).ok();
    assert_eq!(used(&s, "compute", "compute", "requests.cpu"), "1");
    assert_eq!(used(&s, "compute", "compute", "limits.memory"), "1Gi");
    // The namespace's root CA ConfigMap, there before the quota, is counted
    // by the controller; a new one is charged.
    assert_eq!(used(&s, "compute", "compute", "count/configmaps"), "1");
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "one"}});
    create(&s, 33, "compute", &cm).ok();
    assert_eq!(used(&s, "compute", "compute", "count/configmaps"), "2");
}

#[test]
fn defaults_from_storage_classes_priorities_runtime_classes_and_tolerations() {
    let s = Server::start();
    namespace(&s, "d");
    // DefaultStorageClass: the newest default class; StorageObjectInUseProtection.
    for (name, default) in [("old", true), ("plain", false)] {
        let sc = json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name, "annotations": {"storageclass.kubernetes.io/is-default-class": default.to_string()}}, "provisioner": "example.com/p"});
        create(&s, 33, "d", &sc).ok();
    }
    std::thread::sleep(Duration::from_millis(1100));
    let fast = json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "fast", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}}, "provisioner": "example.com/p"});
    create(&s, 33, "d", &fast).ok();
    for minor in MINORS {
        let name = format!("claim-{minor}");
        let claim = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}});
        create(&s, minor, "d", &claim).ok();
        let c = get(&s, "d", &format!("pvc/{name}"));
        assert_eq!(c["spec"]["storageClassName"], "fast", "{c}");
        assert_eq!(c["metadata"]["finalizers"], json!(["kubernetes.io/pvc-protection"]), "{c}");
    }
    let explicit = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "none"}, "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "", "resources": {"requests": {"storage": "1Gi"}}}});
    create(&s, 33, "d", &explicit).ok();
    assert_eq!(get(&s, "d", "pvc/none")["spec"]["storageClassName"], "");
    let pv = json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "vol"}, "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/tmp/vol"}}});
    create(&s, 27, "d", &pv).ok();
    assert_eq!(get(&s, "d", "pv/vol")["metadata"]["finalizers"], json!(["kubernetes.io/pv-protection"]));

    // The protection controller lets an unused claim go at once, and a used
    // one only when its Pod is gone.
    s.kubectl(33, &["delete", "pvc", "none", "-n", "d"]).ok();
    assert_eq!(s.kubectl(33, &["get", "pvc", "none", "-n", "d"]).code, 1);
    create(&s, 33, "d", &pod("user", json!({"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "claim-33"}}]}))).ok();
    s.kubectl(33, &["delete", "pvc", "claim-33", "-n", "d", "--wait=false"]).ok();
    std::thread::sleep(Duration::from_millis(1000));
    let held = get(&s, "d", "pvc/claim-33");
    assert!(held["metadata"]["deletionTimestamp"].is_string(), "{held}");
    assert_eq!(held["metadata"]["finalizers"], json!(["kubernetes.io/pvc-protection"]), "{held}");
    s.kubectl(33, &["delete", "pod", "user", "-n", "d"]).ok();
    until("claim-33 gone", || s.kubectl(33, &["get", "pvc", "claim-33", "-n", "d"]).code == 1);
    s.kubectl(27, &["delete", "pv", "vol"]).ok();
    assert_eq!(s.kubectl(33, &["get", "pv", "vol"]).code, 1);

    // Priority.
    let high = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000, "preemptionPolicy": "Never"});
    create(&s, 33, "d", &high).ok();
    for minor in MINORS {
        let name = format!("prio-{minor}");
        create(&s, minor, "d", &pod(&name, json!({"priorityClassName": "high"}))).ok();
        let p = get(&s, "d", &format!("pod/{name}"));
        assert_eq!((p["spec"]["priority"].clone(), p["spec"]["preemptionPolicy"].clone()), (json!(1000), json!("Never")), "{p}");
        let crit = format!("crit-{minor}");
        create(&s, minor, "d", &pod(&crit, json!({"priorityClassName": "system-node-critical"}))).ok();
        assert_eq!(get(&s, "d", &format!("pod/{crit}"))["spec"]["priority"], 2000001000);
        refused(&create(&s, minor, "d", &pod("lost", json!({"priorityClassName": "nope"}))), "pods \"lost\" is forbidden: no PriorityClass with name nope was found");
        refused(
            &create(&s, minor, "d", &pod("given", json!({"priorityClassName": "high", "priority": 5}))),
            "pods \"given\" is forbidden: the integer value of priority (5) must not be provided in pod spec; priority admission controller computed 1000 from the given PriorityClass name",
        );
    }
    let plain = get(&s, "d", "pod/prio-33");
    // DefaultTolerationSeconds.
    let tolerations = plain["spec"]["tolerations"].clone();
    assert_eq!(
        tolerations,
        json!([
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        ])
    );
    create(&s, 27, "d", &pod("nodefault", json!({}))).ok();
    let p = get(&s, "d", "pod/nodefault");
    assert_eq!((p["spec"]["priority"].clone(), p["spec"]["preemptionPolicy"].clone()), (json!(0), json!("PreemptLowerPriority")), "{p}");
    let global = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "everyone"}, "value": 7, "globalDefault": true});
    create(&s, 33, "d", &global).ok();
    let second = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "second"}, "value": 8, "globalDefault": true});
    refused(&create(&s, 33, "d", &second), "priorityclasses.scheduling.k8s.io \"second\" is forbidden: PriorityClass everyone is already marked as default. Only one default can exist");
    create(&s, 33, "d", &pod("defaulted", json!({}))).ok();
    let p = get(&s, "d", "pod/defaulted");
    assert_eq!((p["spec"]["priority"].clone(), p["spec"]["priorityClassName"].clone()), (json!(7), json!("everyone")), "{p}");

    // RuntimeClass.
    let rc = json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "gvisor"}, "handler": "runsc",
        "overhead": {"podFixed": {"cpu": "100m", "memory": "20Mi"}},
        "scheduling": {"nodeSelector": {"sandbox": "gvisor"}, "tolerations": [{"key": "sandbox", "operator": "Exists", "effect": "NoSchedule"}]}});
    create(&s, 33, "d", &rc).ok();
    for minor in MINORS {
        let name = format!("sandboxed-{minor}");
        create(&s, minor, "d", &pod(&name, json!({"runtimeClassName": "gvisor"}))).ok();
        let p = get(&s, "d", &format!("pod/{name}"));
        assert_eq!(p["spec"]["overhead"], json!({"cpu": "100m", "memory": "20Mi"}), "{p}");
        assert_eq!(p["spec"]["nodeSelector"], json!({"sandbox": "gvisor"}), "{p}");
        assert!(p["spec"]["tolerations"].as_array().unwrap().iter().any(|t| t["key"] == "sandbox"), "{p}");
        refused(&create(&s, minor, "d", &pod("unknown-rc", json!({"runtimeClassName": "nope"}))), "pods \"unknown-rc\" is forbidden: pod rejected: RuntimeClass \"nope\" not found");
        refused(
            &create(&s, minor, "d", &pod("clash", json!({"runtimeClassName": "gvisor", "nodeSelector": {"sandbox": "kata"}}))),
            "pods \"clash\" is forbidden: conflict: runtimeClass.scheduling.nodeSelector[sandbox] = gvisor; pod.spec.nodeSelector[sandbox] = kata",
        );
    }
}

#[test]
fn disabled_plugins_have_no_effect() {
    let off = "LimitRanger,Priority,DefaultTolerationSeconds,DefaultStorageClass,StorageObjectInUseProtection,RuntimeClass,ResourceQuota";
    let s = Server::start_with(&[format!("--disable-admission-plugins={off}")]);
    namespace(&s, "off");
    let range = json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "limits"}, "spec": {"limits": [{"type": "Container", "max": {"cpu": "1"}, "default": {"cpu": "500m"}}]}});
    create(&s, 33, "off", &range).ok();
    let quota = json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "one"}, "spec": {"hard": {"pods": "1"}}});
    create(&s, 33, "off", &quota).ok();
    until("status.used of one", || used(&s, "off", "one", "pods") == "0");
    let sc = json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "fast", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}}, "provisioner": "example.com/p"});
    create(&s, 33, "off", &sc).ok();

    for minor in MINORS {
        let name = format!("free-{minor}");
        let spec = json!({"containers": [{"name": "app", "image": "nginx", "resources": {"limits": {"cpu": "2"}}}], "priorityClassName": "nope", "runtimeClassName": "nope"});
        create(&s, minor, "off", &pod(&name, spec)).ok();
        let p = get(&s, "off", &format!("pod/{name}"));
        assert_eq!(p["spec"]["containers"][0]["resources"], json!({"limits": {"cpu": "2"}}), "{p}");
        assert!(p["metadata"]["annotations"].get("kubernetes.io/limit-ranger").is_none(), "{p}");
        assert!(p["spec"].get("priority").is_none() && p["spec"].get("tolerations").is_none() && p["spec"].get("overhead").is_none(), "{p}");

        let claim = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": format!("c-{minor}")}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}});
        create(&s, minor, "off", &claim).ok();
        let c = get(&s, "off", &format!("pvc/c-{minor}"));
        assert!(c["spec"].get("storageClassName").is_none() && c["metadata"].get("finalizers").is_none(), "{c}");
    }
    // Two pods against a quota of one, and the charge never made.
    assert_eq!(used(&s, "off", "one", "pods"), "0");
}

/// A kubectl write refused with `reason` and `message`. kubectl prints
/// `Error from server (<reason>)` before most refusals, and an Invalid one
/// (422) as `The <Kind> "<name>" is invalid: …` alone.
#[track_caller]
fn refused_with(out: &Out, reason: &str, message: &str) {
    assert_eq!(out.code, 1, "{out:?}");
    let prefixed = out.stderr.contains(&format!("Error from server ({reason})"));
    assert_eq!(prefixed, reason != "Invalid", "{out:?}");
    assert!(out.stderr.contains(message), "want {message:?} in {out:?}");
}

#[test]
fn limit_ranges_and_quotas_with_bad_values_are_refused() {
    const REGEX: &str = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
    let s = Server::start();
    namespace(&s, "qv");
    let lr = |name: &str, item: Value| json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": name}, "spec": {"limits": [item]}});
    let rq = |name: &str, spec: Value| json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name}, "spec": spec});
    for minor in MINORS {
        // Quantities that do not parse fail the decode (400), as in kube.
        let out = create(&s, minor, "qv", &lr("bad-text", json!({"type": "Container", "max": {"cpu": "abc"}})));
        refused_with(&out, "BadRequest", &format!("LimitRange in version \"v1\" cannot be handled as a LimitRange: {REGEX}"));
        let out = create(&s, minor, "qv", &rq("bad-text", json!({"hard": {"pods": "1x"}})));
        refused_with(&out, "BadRequest", &format!("ResourceQuota in version \"v1\" cannot be handled as a ResourceQuota: {REGEX}"));
    }
    // What parses but breaks kube's rules is 422 Invalid with field paths.
    let cases = [
        (
            lr("min-over-max", json!({"type": "Container", "min": {"cpu": "2"}, "max": {"cpu": "1"}})),
            r#"The LimitRange "min-over-max" is invalid: spec.limits[0].min[cpu]: Invalid value: 2: min value 2 is greater than max value 1"#,
        ),
        (
            lr("request-over-limit", json!({"type": "Container", "default": {"memory": "1Gi"}, "defaultRequest": {"memory": "1536Mi"}})),
            r#"The LimitRange "request-over-limit" is invalid: spec.limits[0].defaultRequest[memory]: Invalid value: 1536Mi: default request value 1536Mi is greater than default limit value 1Gi"#,
        ),
        (
            lr("bad-name", json!({"type": "Container", "max": {"storage": "1Gi"}})),
            r#"The LimitRange "bad-name" is invalid: spec.limits[0].max[storage]: Invalid value: "storage": must be a standard resource for containers"#,
        ),
        (
            lr("bad-ratio", json!({"type": "Container", "maxLimitRequestRatio": {"cpu": "500m"}})),
            r#"The LimitRange "bad-ratio" is invalid: spec.limits[0].maxLimitRequestRatio[cpu]: Invalid value: 500m: ratio 500m is less than 1"#,
        ),
        (rq("negative", json!({"hard": {"pods": "-1"}})), r#"The ResourceQuota "negative" is invalid: spec.hard[pods]: Invalid value: "-1": must be greater than or equal to 0"#),
        (rq("fraction", json!({"hard": {"services": "1500m"}})), r#"The ResourceQuota "fraction" is invalid: spec.hard[services]: Invalid value: 1500m: must be an integer"#),
        (
            rq("unknown", json!({"hard": {"widgets": "1"}})),
            "The ResourceQuota \"unknown\" is invalid: \n* spec.hard[widgets]: Invalid value: \"widgets\": must be a standard resource type or fully qualified\n* spec.hard[widgets]: Invalid value: \"widgets\": must be a standard resource for quota",
        ),
        (
            rq("conflict", json!({"hard": {"pods": "1"}, "scopes": ["Terminating", "NotTerminating"]})),
            r#"The ResourceQuota "conflict" is invalid: spec.scopes: Invalid value: []core.ResourceQuotaScope{"Terminating", "NotTerminating"}: conflicting scopes"#,
        ),
    ];
    for (obj, message) in &cases {
        let out = create(&s, 33, "qv", obj);
        refused_with(&out, "Invalid", message);
    }
    let out = s.kubectl(33, &["get", "limitranges,resourcequotas", "-n", "qv", "-o", "name"]);
    assert_eq!(out.ok().trim(), "", "nothing refused was stored");
    // Good ones are stored, and quantities keep working.
    create(
        &s,
        33,
        "qv",
        &lr("good", json!({"type": "Container", "min": {"cpu": "100m"}, "max": {"cpu": "2"}, "default": {"cpu": "1"}, "defaultRequest": {"cpu": "500m"}, "maxLimitRequestRatio": {"cpu": "4"}})),
    )
    .ok();
    create(&s, 27, "qv", &rq("good", json!({"hard": {"pods": "10", "requests.cpu": "4", "count/deployments.apps": "2"}, "scopes": ["NotTerminating"]}))).ok();
    assert_eq!(get(&s, "qv", "limitrange/good")["spec"]["limits"][0]["max"]["cpu"], "2");
    assert_eq!(get(&s, "qv", "resourcequota/good")["spec"]["hard"]["pods"], "10");
    // Scopes may not change on update.
    let out = s.kubectl(33, &["patch", "resourcequota", "good", "-n", "qv", "--type=merge", "-p", r#"{"spec":{"scopes":["Terminating"]}}"#]);
    refused_with(&out, "Invalid", r#"The ResourceQuota "good" is invalid: spec.scopes: Invalid value: []core.ResourceQuotaScope{"Terminating"}: field is immutable"#);
}
