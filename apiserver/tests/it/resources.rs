//! kubectl generators (protobuf bodies), access and identity reviews,
//! aggregated discovery, the groups beyond core and apps, the two served
//! versions of HorizontalPodAutoscaler, and list options, with kubectl 1.33
//! and 1.27.

use serde_json::Value;

use crate::common::Server;

fn json(out: &str) -> Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

#[test]
fn generators_and_reviews() {
    let s = Server::start();
    for minor in [33, 27] {
        let ns = format!("gen{minor}");
        assert_eq!(s.kubectl(minor, &["create", "namespace", &ns]).ok().trim(), format!("namespace/{ns} created"));
        let got = json(s.kubectl(minor, &["get", "ns", &ns, "-o", "json"]).ok());
        assert_eq!(got["status"]["phase"], "Active");
        assert_eq!(got["metadata"]["labels"]["kubernetes.io/metadata.name"], ns.as_str());

        let cm = s.kubectl(minor, &["create", "configmap", "lit", "-n", &ns, "--from-literal=a=1", "--from-literal=b=two"]);
        assert_eq!(cm.ok().trim(), "configmap/lit created");
        let got = json(s.kubectl(minor, &["get", "cm", "lit", "-n", &ns, "-o", "json"]).ok());
        assert_eq!(got["data"], serde_json::json!({"a": "1", "b": "two"}));

        let d = s.kubectl(minor, &["create", "deployment", "web", "-n", &ns, "--image=nginx:1.25", "--replicas=0", "--port=80", "--", "sleep", "10"]);
        assert_eq!(d.ok().trim(), "deployment.apps/web created");
        let got = json(s.kubectl(minor, &["get", "deploy", "web", "-n", &ns, "-o", "json"]).ok());
        assert_eq!(got["spec"]["replicas"], 0, "a pointer zero survives protobuf: {got}");
        assert_eq!(got["spec"]["selector"]["matchLabels"]["app"], "web");
        let c = &got["spec"]["template"]["spec"]["containers"][0];
        assert_eq!((c["name"].as_str(), c["image"].as_str()), (Some("nginx"), Some("nginx:1.25")));
        assert_eq!(c["command"], serde_json::json!(["sleep", "10"]));
        assert_eq!(c["ports"], serde_json::json!([{"containerPort": 80, "protocol": "TCP"}]));

        assert_eq!(s.kubectl(minor, &["auth", "can-i", "create", "configmaps"]).ok().trim(), "yes");
        assert_eq!(s.kubectl(minor, &["auth", "can-i", "delete", "deployments.apps", "-n", &ns]).ok().trim(), "yes");
        let who = s.kubectl(minor, &["auth", "whoami"]);
        let rows: Vec<Vec<&str>> = who.ok().lines().map(|l| l.split_whitespace().collect()).collect();
        assert_eq!(rows[0], ["ATTRIBUTE", "VALUE"], "{who:?}");
        assert_eq!(rows[1], ["Username", "kubernetes-admin"], "{who:?}");
        assert_eq!(rows[2], ["Groups", "[system:masters", "system:authenticated]"], "{who:?}");
        let who = json(s.kubectl(minor, &["auth", "whoami", "-o", "json"]).ok());
        assert_eq!(who["status"]["userInfo"]["username"], "kubernetes-admin");
    }
    // More generators that send protobuf: RBAC and priority classes.
    for (args, want) in [
        (&["create", "role", "r1", "--verb=get,list", "--resource=pods"][..], "role.rbac.authorization.k8s.io/r1 created"),
        (&["create", "rolebinding", "rb", "--role=r1", "--user=bob"][..], "rolebinding.rbac.authorization.k8s.io/rb created"),
        (&["create", "clusterrole", "system:x", "--verb=get", "--non-resource-url=/logs"][..], "clusterrole.rbac.authorization.k8s.io/system:x created"),
        (&["create", "priorityclass", "high", "--value=1000", "--preemption-policy=Never"][..], "priorityclass.scheduling.k8s.io/high created"),
    ] {
        assert_eq!(s.kubectl(33, args).ok().trim(), want);
    }
    let role = json(s.kubectl(33, &["get", "role", "r1", "-o", "json"]).ok());
    assert_eq!(role["rules"], serde_json::json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]));
    let rb = json(s.kubectl(33, &["get", "rolebinding", "rb", "-o", "json"]).ok());
    assert_eq!(rb["roleRef"], serde_json::json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r1"}));
    let pc = json(s.kubectl(33, &["get", "pc", "high", "-o", "json"]).ok());
    assert_eq!((pc["value"].as_i64(), pc["preemptionPolicy"].as_str()), (Some(1000), Some("Never")));
    // More generators, and kinds without a decoder: writes.rs.

    // A namespace that does not exist fails as it would for JSON.
    let missing = s.kubectl(33, &["create", "configmap", "x", "-n", "nope", "--from-literal=a=1"]);
    assert_eq!(missing.code, 1);
    assert!(missing.stderr.contains("namespaces \"nope\" not found"), "{missing:?}");
}

#[test]
fn discovery_lists_every_group() {
    let s = Server::start();
    let want = [
        ("jobs", "batch/v1"),
        ("cronjobs", "batch/v1"),
        ("horizontalpodautoscalers", "autoscaling/v2"),
        ("leases", "coordination.k8s.io/v1"),
        ("endpointslices", "discovery.k8s.io/v1"),
        ("ingresses", "networking.k8s.io/v1"),
        ("ingressclasses", "networking.k8s.io/v1"),
        ("networkpolicies", "networking.k8s.io/v1"),
        ("poddisruptionbudgets", "policy/v1"),
        ("storageclasses", "storage.k8s.io/v1"),
        ("priorityclasses", "scheduling.k8s.io/v1"),
        ("runtimeclasses", "node.k8s.io/v1"),
        ("apiservices", "apiregistration.k8s.io/v1"),
        ("roles", "rbac.authorization.k8s.io/v1"),
        ("clusterrolebindings", "rbac.authorization.k8s.io/v1"),
        ("validatingwebhookconfigurations", "admissionregistration.k8s.io/v1"),
        ("mutatingwebhookconfigurations", "admissionregistration.k8s.io/v1"),
        ("validatingadmissionpolicies", "admissionregistration.k8s.io/v1"),
        ("validatingadmissionpolicybindings", "admissionregistration.k8s.io/v1"),
        ("customresourcedefinitions", "apiextensions.k8s.io/v1"),
        ("selfsubjectaccessreviews", "authorization.k8s.io/v1"),
        ("selfsubjectreviews", "authentication.k8s.io/v1"),
    ];
    for minor in [33, 27] {
        // 1.33 uses aggregated discovery: two requests, no per-group fetch.
        let ar = s.kubectl(minor, &["api-resources", "-v=6"]);
        let lines: Vec<Vec<&str>> = ar.ok().lines().map(|l| l.split_whitespace().collect()).collect();
        for (res, gv) in want {
            assert!(lines.iter().any(|l| l.first() == Some(&res) && l.contains(&gv)), "{res} {gv} missing: {}", ar.stdout);
        }
        assert!(ar.stderr.contains("/apis?timeout"), "{}", ar.stderr);
        assert!(!ar.stderr.contains("/apis/apps/v1?timeout"), "fell back to legacy discovery: {}", ar.stderr);
        let versions = s.kubectl(minor, &["api-versions"]);
        for gv in ["autoscaling/v1", "autoscaling/v2", "batch/v1", "events.k8s.io/v1", "rbac.authorization.k8s.io/v1", "v1", "apps/v1"] {
            assert!(versions.ok().lines().any(|l| l == gv), "{gv}: {versions:?}");
        }
    }
    // Legacy discovery stays for plain JSON.
    let apps = json(s.kubectl(33, &["get", "--raw", "/apis/apps/v1"]).ok());
    assert_eq!(apps["kind"], "APIResourceList");
    assert_eq!(apps["groupVersion"], "apps/v1");
    assert!(apps["resources"].as_array().unwrap().iter().any(|r| r["name"] == "deployments/scale"), "{apps}");
    let groups = json(s.kubectl(33, &["get", "--raw", "/apis"]).ok());
    assert_eq!(groups["kind"], "APIGroupList");
    let autoscaling = groups["groups"].as_array().unwrap().iter().find(|g| g["name"] == "autoscaling").cloned().unwrap();
    assert_eq!(autoscaling["preferredVersion"]["version"], "v2");
}

const HPA_V2: &str = "apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: two}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 2
  maxReplicas: 5
  metrics:
  - type: Resource
    resource: {name: cpu, target: {type: Utilization, averageUtilization: 60}}
  - type: Resource
    resource: {name: memory, target: {type: AverageValue, averageValue: 100Mi}}
";

const HPA_V1: &str = "apiVersion: autoscaling/v1
kind: HorizontalPodAutoscaler
metadata: {name: one}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  maxReplicas: 3
  targetCPUUtilizationPercentage: 70
";

#[test]
fn hpa_is_served_as_v1_and_v2() {
    let s = Server::start();
    const BASE: &str = "/apis/autoscaling/{v}/namespaces/default/horizontalpodautoscalers/";
    s.kubectl_stdin(33, &["create", "--validate=false", "-f", "-"], Some(HPA_V2)).ok();
    s.kubectl_stdin(27, &["create", "--validate=false", "-f", "-"], Some(HPA_V1)).ok();

    let v1 = json(s.kubectl(33, &["get", "--raw", &format!("{}two", BASE.replace("{v}", "v1"))]).ok());
    assert_eq!(v1["apiVersion"], "autoscaling/v1");
    assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 60);
    assert!(v1["spec"]["metrics"].is_null());
    assert!(v1["metadata"]["annotations"]["autoscaling.alpha.kubernetes.io/metrics"].as_str().unwrap().contains("memory"));

    let v2 = json(s.kubectl(33, &["get", "--raw", &format!("{}one", BASE.replace("{v}", "v2"))]).ok());
    assert_eq!(v2["apiVersion"], "autoscaling/v2");
    assert_eq!(v2["spec"]["minReplicas"], 1);
    assert_eq!(v2["spec"]["metrics"], serde_json::json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}}]));

    // An update through v1 keeps the v2-only metric.
    let patched = s.kubectl(33, &["patch", "hpa.v1.autoscaling", "two", "--type=merge", "-p", r#"{"spec":{"maxReplicas":9}}"#]);
    patched.ok();
    let v2 = json(s.kubectl(33, &["get", "--raw", &format!("{}two", BASE.replace("{v}", "v2"))]).ok());
    assert_eq!(v2["spec"]["maxReplicas"], 9);
    assert_eq!(v2["spec"]["metrics"].as_array().map(Vec::len), Some(2), "{v2}");
    assert!(v2["metadata"]["annotations"].is_null(), "{v2}");

    // Lists of either version hold both objects, in that version.
    for v in ["v1", "v2"] {
        let list = json(s.kubectl(33, &["get", "--raw", &format!("/apis/autoscaling/{v}/horizontalpodautoscalers")]).ok());
        assert_eq!(list["apiVersion"], format!("autoscaling/{v}"));
        assert_eq!(list["items"].as_array().map(Vec::len), Some(2));
        assert!(list["items"].as_array().unwrap().iter().all(|i| i["apiVersion"] == format!("autoscaling/{v}")));
    }
    let table = s.kubectl(33, &["get", "hpa"]);
    let rows: Vec<Vec<&str>> = table.ok().lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(rows[0], ["NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS", "AGE"]);
    assert_eq!(rows[1][..4], ["one", "Deployment/web", "cpu:", "<unknown>/70%"]);
}

#[test]
fn new_groups_tables_and_list_options() {
    let s = Server::start();
    let manifests = "apiVersion: batch/v1
kind: Job
metadata: {name: pi}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: pi, image: perl}]
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: tick}
spec:
  schedule: '*/5 * * * *'
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers: [{name: t, image: busybox}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: 'system:reader'}
rules: [{apiGroups: [''], resources: [pods], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: read}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: 'system:reader'}
subjects: [{kind: User, name: bob}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: ing}
spec:
  ingressClassName: nginx
  rules:
  - host: foo.example.com
    http:
      paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: leader}
spec: {holderIdentity: node-1}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: fast}
provisioner: example.com/fast
";
    let created = s.kubectl_stdin(33, &["create", "--validate=false", "-f", "-"], Some(manifests));
    assert_eq!(created.ok().lines().count(), 7, "{created:?}");

    let table = |args: &[&str]| -> Vec<Vec<String>> { s.kubectl(33, args).ok().lines().map(|l| l.split_whitespace().map(String::from).collect()).collect() };
    let jobs = table(&["get", "jobs"]);
    assert_eq!(jobs[0], ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]);
    assert_eq!(jobs[1][..3], ["pi", "Running", "0/1"]);
    let job = json(s.kubectl(33, &["get", "job", "pi", "-o", "json"]).ok());
    let uid = job["metadata"]["uid"].as_str().unwrap();
    assert_eq!(job["spec"]["selector"]["matchLabels"]["batch.kubernetes.io/controller-uid"], uid);
    assert_eq!(job["spec"]["template"]["metadata"]["labels"]["job-name"], "pi");
    assert_eq!(job["spec"]["backoffLimit"], 6);
    let cj = table(&["get", "cronjobs"]);
    assert_eq!(cj[0], ["NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST", "SCHEDULE", "AGE"]);
    assert_eq!(cj[1][..7], ["tick", "*/5", "*", "*", "*", "*", "<none>"]);
    let ing = table(&["get", "ingress"]);
    assert_eq!(ing[0], ["NAME", "CLASS", "HOSTS", "ADDRESS", "PORTS", "AGE"]);
    assert_eq!(ing[1][..4], ["ing", "nginx", "foo.example.com", "80"]);
    let rb = table(&["get", "rolebindings", "-o", "wide"]);
    assert_eq!(rb[0], ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"]);
    assert_eq!(rb[1][..2], ["read", "ClusterRole/system:reader"]);
    assert_eq!(rb[1][3], "bob");
    let cr = table(&["get", "clusterrole", "system:reader"]);
    assert_eq!(cr[0], ["NAME", "CREATED", "AT"]);
    assert_eq!(table(&["get", "lease", "leader"])[1][..2], ["leader", "node-1"]);
    assert_eq!(table(&["get", "sc"])[1][..5], ["fast", "example.com/fast", "Delete", "Immediate", "false"]);
    let bad = s.kubectl_stdin(
        33,
        &["create", "--validate=false", "-f", "-"],
        Some("apiVersion: batch/v1\nkind: Job\nmetadata: {name: bad}\nspec:\n  template:\n    spec:\n      containers: [{name: a, image: b}]\n"),
    );
    assert_eq!(bad.code, 1);
    assert!(bad.stderr.contains("spec.template.spec.restartPolicy: Unsupported value: \"Always\""), "{bad:?}");

    // List options over more objects, in two namespaces.
    s.kubectl(33, &["create", "namespace", "other"]).ok();
    for i in 0..5 {
        s.kubectl(33, &["create", "configmap", &format!("c{i}"), "--from-literal=i=x"]).ok();
        s.kubectl(33, &["create", "configmap", &format!("o{i}"), "-n", "other", "--from-literal=i=x"]).ok();
    }
    for minor in [33, 27] {
        let all = s.kubectl(minor, &["get", "cm", "-A"]);
        let rows: Vec<Vec<&str>> = all.ok().lines().map(|l| l.split_whitespace().collect()).collect();
        assert_eq!(rows[0], ["NAMESPACE", "NAME", "DATA", "AGE"]);
        assert!(rows.iter().any(|r| r[..2] == ["other", "o3"]) && rows.iter().any(|r| r[..2] == ["default", "c3"]), "{all:?}");

        let by_field = s.kubectl(minor, &["get", "cm", "-A", "--field-selector", "metadata.name=o2", "-o", "name"]);
        assert_eq!(by_field.ok().trim(), "configmap/o2");
        let not_ns = s.kubectl(minor, &["get", "cm", "-A", "--field-selector", "metadata.namespace!=default", "-o", "name"]);
        assert_eq!(not_ns.ok().lines().filter(|l| l.starts_with("configmap/o")).count(), 5, "{not_ns:?}");

        let chunked = s.kubectl(minor, &["get", "cm", "--chunk-size=2", "-o", "name", "-v=6"]);
        let names: Vec<&str> = chunked.ok().lines().collect();
        assert_eq!(names, ["configmap/c0", "configmap/c1", "configmap/c2", "configmap/c3", "configmap/c4", "configmap/kube-root-ca.crt"]);
        assert_eq!(chunked.stderr.matches("limit=2").count(), 3, "{}", chunked.stderr);
        assert!(chunked.stderr.contains("continue="), "{}", chunked.stderr);
    }
}
