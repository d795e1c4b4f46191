//! CustomResourceDefinitions driven by kubectl 1.33 and 1.27: a CRD is
//! applied and established, shows in `api-resources` and `explain`, and its
//! custom resources are created, read by short name, listed, watched,
//! patched and deleted; unknown fields are pruned, defaults filled in,
//! wrong values refused with kube's messages, status written only through
//! `/status`; deleting the CRD deletes its objects and withdraws its
//! endpoints. The same suite runs on a three-node cluster (the CRD applied
//! through one node, used through the others) and across a restart.

use std::time::Duration;

use serde_json::Value;

use crate::common::{eventually, json, Cluster, Server};

/// A CRD of group `stableNN.example.com` (NN: a tag, so several suites can
/// share a server), short name `ctNN`.
fn crd(tag: &str) -> String {
    r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: crontabs.stableTAG.example.com
spec:
  group: stableTAG.example.com
  scope: Namespaced
  names:
    plural: crontabs
    singular: crontab
    kind: CronTab
    shortNames: [ctTAG]
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
    schema:
      openAPIV3Schema:
        type: object
        description: A CronTab runs a command on a schedule.
        properties:
          spec:
            type: object
            description: What to run and when.
            properties:
              cronSpec:
                type: string
                description: The schedule, in cron format.
              image:
                type: string
              replicas:
                type: integer
                minimum: 0
                default: 1
              mode:
                type: string
                enum: [fast, slow]
                default: slow
          status:
            type: object
            properties:
              ready:
                type: integer
"#
    .replace("TAG", tag)
}

fn cron(name: &str, tag: &str, spec: &str) -> String {
    format!("apiVersion: stable{tag}.example.com/v1\nkind: CronTab\nmetadata:\n  name: {name}\nspec:\n{spec}")
}

/// Applies the CRD through `via` and waits until `other` serves it.
fn establish(via: &Server, other: &Server, minor: u32, tag: &str) {
    let name = format!("crontabs.stable{tag}.example.com");
    let applied = via.kubectl_stdin(minor, &["apply", "-f", "-"], Some(&crd(tag)));
    assert_eq!(applied.ok().trim(), format!("customresourcedefinition.apiextensions.k8s.io/{name} created"));
    eventually("the CRD on the other node", || (other.kubectl(minor, &["get", "crd", &name, "-o", "name"]).code == 0).then_some(()));
    let waited = other.kubectl(minor, &["wait", "--for=condition=Established", &format!("crd/{name}"), "--timeout=30s"]);
    assert_eq!(waited.ok().trim(), format!("customresourcedefinition.apiextensions.k8s.io/{name} condition met"));
    let got = json(&other.kubectl(minor, &["get", "crd", &name, "-o", "json"]));
    let conds = got["status"]["conditions"].as_array().cloned().unwrap_or_default();
    let cond = |t: &str| conds.iter().find(|c| c["type"] == t).cloned().unwrap_or(Value::Null);
    assert_eq!(cond("NamesAccepted")["status"], "True", "{got}");
    assert_eq!(cond("NamesAccepted")["reason"], "NoConflicts", "{got}");
    assert_eq!(cond("Established")["status"], "True", "{got}");
    assert_eq!(got["status"]["acceptedNames"]["kind"], "CronTab");
    assert_eq!(got["status"]["acceptedNames"]["listKind"], "CronTabList");
    assert_eq!(got["status"]["storedVersions"], serde_json::json!(["v1"]));
}

/// The suite: the CRD applied through `a`, its objects used through `b`,
/// watched through `c`.
fn suite(a: &Server, b: &Server, c: &Server, minor: u32, tag: &str) {
    let ct = format!("ct{tag}");
    let group = format!("stable{tag}.example.com");
    establish(a, b, minor, tag);

    // Discovery and OpenAPI.
    let row = ["crontabs", ct.as_str(), &format!("{group}/v1"), "true", "CronTab"].map(String::from).to_vec();
    eventually("api-resources to list crontabs", || {
        let ar = b.kubectl(minor, &["api-resources", "--no-headers", "--api-group", &group]);
        ar.stdout.lines().any(|l| l.split_whitespace().map(String::from).collect::<Vec<_>>() == row).then_some(())
    });
    let explained = eventually("explain to know crontabs", || {
        let e = b.kubectl(minor, &["explain", &format!("{ct}.spec")]);
        (e.code == 0).then_some(e.stdout)
    });
    assert!(explained.contains("What to run and when."), "{explained}");
    assert!(explained.contains("replicas") && explained.contains("cronSpec"), "{explained}");

    // A watch on the third node from before the first object.
    let w = c.kubectl_spawn(minor, &["get", &ct, "-w", "--output-watch-events"]);
    // The watch only starts once the third node serves the resource.
    eventually("the third node to serve crontabs", || (c.kubectl(minor, &["get", &ct, "-o", "name"]).code == 0).then_some(()));
    std::thread::sleep(Duration::from_millis(1500));

    // Create: an unknown field is pruned, defaults are filled in.
    let created = b.kubectl_stdin(minor, &["create", "--validate=false", "-f", "-"], Some(&cron("daily", tag, "  cronSpec: '0 0 * * *'\n  image: busybox\n  extra: dropped\n")));
    assert_eq!(created.ok().trim(), format!("crontab.{group}/daily created"));
    let got = json(&b.kubectl(minor, &["get", &ct, "daily", "-o", "json"]));
    assert_eq!(got["spec"]["replicas"], 1, "{got}");
    assert_eq!(got["spec"]["mode"], "slow", "{got}");
    assert!(got["spec"].get("extra").is_none(), "an unknown field was kept: {got}");
    assert_eq!(got["metadata"]["generation"], 1);
    assert_eq!(got["apiVersion"], format!("{group}/v1"));

    // The default table: NAME and AGE.
    let table = b.kubectl(minor, &["get", &ct]);
    let lines: Vec<Vec<&str>> = table.ok().lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(lines[0], ["NAME", "AGE"], "{table:?}");
    assert_eq!(lines[1][0], "daily", "{table:?}");
    assert_eq!(lines.len(), 2, "{table:?}");
    // Through the node the CRD was applied on too.
    assert_eq!(a.kubectl(minor, &["get", &format!("crontabs.{group}"), "daily", "-o", "name"]).ok().trim(), format!("crontab.{group}/daily"));

    // Wrong values: 422 with kube's field messages.
    let wrong_type = b.kubectl_stdin(minor, &["create", "--validate=false", "-f", "-"], Some(&cron("bad", tag, "  replicas: three\n")));
    assert_eq!(wrong_type.code, 1, "{wrong_type:?}");
    assert!(wrong_type.stderr.contains("The CronTab \"bad\" is invalid: spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\""), "{wrong_type:?}");
    let negative = b.kubectl_stdin(minor, &["create", "--validate=false", "-f", "-"], Some(&cron("bad", tag, "  replicas: -1\n")));
    assert!(negative.stderr.contains("spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0"), "{negative:?}");
    let bad_enum = b.kubectl_stdin(minor, &["create", "--validate=false", "-f", "-"], Some(&cron("bad", tag, "  mode: turbo\n")));
    assert!(bad_enum.stderr.contains("spec.mode: Unsupported value: \"turbo\": supported values: \"fast\", \"slow\""), "{bad_enum:?}");
    assert_eq!(b.kubectl(minor, &["get", &ct, "bad"]).code, 1);

    // Client-side apply of an existing custom resource: OpenAPI v3 lists no
    // strategic merge patch for the kind, so kubectl sends a JSON merge
    // patch (a strategic one would be 415).
    let first = b.kubectl_stdin(minor, &["apply", "--validate=false", "-f", "-"], Some(&cron("applied", tag, "  image: one\n")));
    assert_eq!(first.ok().trim(), format!("crontab.{group}/applied created"));
    let second = b.kubectl_stdin(minor, &["apply", "--validate=false", "-f", "-"], Some(&cron("applied", tag, "  image: two\n")));
    assert_eq!(second.ok().trim(), format!("crontab.{group}/applied configured"));
    assert_eq!(b.kubectl(minor, &["get", &ct, "applied", "-o", "jsonpath={.spec.image}"]).ok(), "two");
    b.kubectl(minor, &["delete", &ct, "applied"]).ok();

    // Patch: spec changes bump the generation; status is ignored on the
    // main resource.
    let patched = b.kubectl(minor, &["patch", &ct, "daily", "--type=merge", "-p", r#"{"spec":{"replicas":3},"status":{"ready":9}}"#]);
    assert_eq!(patched.ok().trim(), format!("crontab.{group}/daily patched"));
    let got = json(&b.kubectl(minor, &["get", &ct, "daily", "-o", "json"]));
    assert_eq!(got["spec"]["replicas"], 3);
    assert_eq!(got["metadata"]["generation"], 2);
    assert!(got.get("status").is_none(), "status changed through the main resource: {got}");
    // Status only through /status, which ignores spec.
    let raw = format!("/apis/{group}/v1/namespaces/default/crontabs/daily/status");
    let mut with_status = got.clone();
    with_status["status"] = serde_json::json!({"ready": 2});
    with_status["spec"]["replicas"] = serde_json::json!(7);
    let file = b.dir.path().join(format!("status-{tag}.json"));
    std::fs::write(&file, with_status.to_string()).unwrap();
    b.kubectl(minor, &["replace", "--raw", &raw, "-f", file.to_str().unwrap()]).ok();
    let got = json(&b.kubectl(minor, &["get", &ct, "daily", "-o", "json"]));
    assert_eq!(got["status"]["ready"], 2, "{got}");
    assert_eq!(got["spec"]["replicas"], 3, "spec changed through /status: {got}");
    // A status that breaks the schema is refused there too.
    let mut bad_status = got.clone();
    bad_status["status"] = serde_json::json!({"ready": "many"});
    std::fs::write(&file, bad_status.to_string()).unwrap();
    let refused = b.kubectl(minor, &["replace", "--raw", &raw, "-f", file.to_str().unwrap()]);
    assert_eq!(refused.code, 1, "{refused:?}");
    assert!(refused.stderr.contains("status.ready"), "{refused:?}");

    // Delete.
    assert_eq!(b.kubectl(minor, &["delete", &ct, "daily"]).ok().trim(), format!("crontab.{group} \"daily\" deleted"));
    std::thread::sleep(Duration::from_millis(1500));
    let (events, out) = crate::common::stop_watch(w);
    let mut kinds: Vec<String> = events.iter().filter(|(_, n)| n == "daily").map(|(e, _)| e.clone()).collect();
    kinds.dedup();
    assert_eq!(kinds, ["ADDED", "MODIFIED", "DELETED"], "{out}");

    // Deleting the CRD deletes its objects and withdraws the endpoints.
    b.kubectl_stdin(minor, &["create", "--validate=false", "-f", "-"], Some(&cron("left", tag, "  image: x\n"))).ok();
    let name = format!("crontabs.{group}");
    assert_eq!(a.kubectl(minor, &["delete", "crd", &name, "--timeout=60s"]).ok().trim(), format!("customresourcedefinition.apiextensions.k8s.io \"{name}\" deleted"));
    let gone = a.kubectl(minor, &["get", "crd", &name]);
    assert!(gone.stderr.contains(&format!("customresourcedefinitions.apiextensions.k8s.io \"{name}\" not found")), "{gone:?}");
    for n in [a, b, c] {
        eventually("the endpoints to go", || {
            let raw = n.kubectl(minor, &["get", "--raw", &format!("/apis/{group}/v1/namespaces/default/crontabs")]);
            (raw.code == 1 && raw.stderr.contains("NotFound")).then_some(())
        });
        let ar = n.kubectl(minor, &["api-resources", "--no-headers"]);
        assert!(!ar.ok().contains(&group), "{ar:?}");
    }
    // Its objects went with it: the same CRD again starts empty.
    establish(a, b, minor, tag);
    eventually("crontabs served again", || {
        let l = b.kubectl(minor, &["get", "--raw", &format!("/apis/{group}/v1/crontabs")]);
        (l.code == 0).then(|| serde_json::from_str::<Value>(&l.stdout).unwrap())
    });
    let list = json(&b.kubectl(minor, &["get", "--raw", &format!("/apis/{group}/v1/crontabs")]));
    assert_eq!(list["items"], serde_json::json!([]), "an object outlived its CRD: {list}");
    a.kubectl(minor, &["delete", "crd", &name]).ok();
}

#[test]
fn crds_with_kubectl() {
    let s = Server::start();
    for minor in [33, 27] {
        suite(&s, &s, &s, minor, &minor.to_string());
    }
}

/// The CRD's own validation, as kube words it.
#[test]
fn crd_validation_messages() {
    let s = Server::start();
    let bad = |patch: &dyn Fn(&str) -> String| s.kubectl_stdin(33, &["create", "-f", "-"], Some(&patch(&crd("v"))));
    let name = bad(&|c| c.replace("name: crontabs.stablev.example.com", "name: wrong.stablev.example.com"));
    assert!(name.stderr.contains(r#"metadata.name: Invalid value: "wrong.stablev.example.com": must be spec.names.plural+"."+spec.group"#), "{name:?}");
    let two = bad(&|c| c.replace("    storage: true\n", "    storage: false\n"));
    assert!(two.stderr.contains("must have exactly one version marked as storage version"), "{two:?}");
    let scope = bad(&|c| c.replace("scope: Namespaced", "scope: Global"));
    assert!(scope.stderr.contains(r#"spec.scope: Unsupported value: "Global": supported values: "Cluster", "Namespaced""#), "{scope:?}");
    let untyped = bad(&|c| c.replace("              image:\n                type: string\n", "              image: {}\n"));
    assert!(untyped.stderr.contains("spec.validation.openAPIV3Schema.properties[spec].properties[image].type: Required value: must not be empty for specified object fields"), "{untyped:?}");
    let dotless = bad(&|c| c.replace("stablev.example.com", "stablev"));
    assert!(dotless.stderr.contains(r#"spec.group: Invalid value: "stablev": should be a domain with at least one dot"#), "{dotless:?}");
    // A second CRD claiming the same kind in the same group is not
    // accepted.
    s.kubectl_stdin(33, &["apply", "-f", "-"], Some(&crd("v"))).ok();
    s.kubectl(33, &["wait", "--for=condition=Established", "crd/crontabs.stablev.example.com", "--timeout=30s"]).ok();
    let clash = crd("v").replace("crontabs", "crontabz").replace("singular: crontab\n", "singular: crontabz\n").replace("[ctv]", "[ctz]");
    s.kubectl_stdin(33, &["apply", "-f", "-"], Some(&clash)).ok();
    let cond = eventually("NamesAccepted on the clashing CRD", || {
        let out = s.kubectl(33, &["get", "crd", "crontabz.stablev.example.com", "-o", "jsonpath={.status.conditions[?(@.type==\"NamesAccepted\")].reason}"]);
        (out.code == 0 && !out.stdout.is_empty()).then_some(out.stdout)
    });
    assert_eq!(cond, "KindConflict");
    let est = s.kubectl(33, &["get", "crd", "crontabz.stablev.example.com", "-o", "jsonpath={.status.conditions[?(@.type==\"Established\")].status}"]);
    assert_eq!(est.ok(), "False");
}

#[test]
fn crds_on_a_three_node_cluster() {
    let c = Cluster::start();
    let (a, b, n3) = (&c.nodes[0], &c.nodes[1], &c.nodes[2]);
    suite(a, b, n3, 33, "c33");
}

#[test]
fn crds_survive_a_restart() {
    let mut s = Server::start();
    establish(&s, &s, 33, "r");
    s.kubectl_stdin(33, &["create", "--validate=false", "-f", "-"], Some(&cron("kept", "r", "  image: x\n"))).ok();
    s.restart();
    let got = eventually("the CRD served after a restart", || {
        let out = s.kubectl(33, &["get", "ctr", "kept", "-o", "json"]);
        (out.code == 0).then(|| serde_json::from_str::<Value>(&out.stdout).unwrap())
    });
    assert_eq!(got["spec"]["replicas"], 1);
    // And the whole suite runs on the restarted server.
    suite(&s, &s, &s, 33, "r2");
    suite(&s, &s, &s, 27, "r3");
}

/// A CRD for a resource that is already served (here a built-in) never
/// takes it over: the built-in keeps its schema, its objects and its
/// endpoints, also after the CRD is deleted and after a restart. Groups
/// under k8s.io need kube's approval annotation; custom resources refuse
/// strategic merge patches (415), as kube does.
#[test]
fn a_crd_never_takes_over_a_served_resource() {
    let mut s = Server::start();
    s.kubectl(33, &["create", "role", "keeprole", "--verb=get", "--resource=pods"]).ok();
    let shadow = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: roles.rbac.authorization.k8s.io
  annotations:
    api-approved.kubernetes.io: "https://example.com/approval"
spec:
  group: rbac.authorization.k8s.io
  scope: Namespaced
  names: {plural: roles, singular: role, kind: Role}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
"#;
    let unapproved = s.kubectl_stdin(33, &["create", "-f", "-"], Some(&shadow.replace("  annotations:\n    api-approved.kubernetes.io: \"https://example.com/approval\"\n", "")));
    assert!(
        unapproved.stderr.contains("metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups must have approval annotation \"api-approved.kubernetes.io\""),
        "{unapproved:?}"
    );
    s.kubectl_stdin(33, &["create", "-f", "-"], Some(shadow)).ok();
    s.kubectl(33, &["wait", "--for=condition=Established", "crd/roles.rbac.authorization.k8s.io", "--timeout=30s"]).ok();
    // The built-in keeps its schema: rules must be a list (the CRD's
    // schema would take anything).
    let bad = s.kubectl_stdin(33, &["create", "--validate=false", "-f", "-"], Some("apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: norules}\nrules: notalist\n"));
    assert_eq!(bad.code, 1, "the CRD's schema replaced the built-in's: {bad:?}");
    assert!(bad.stderr.contains("cannot be handled as a Role"), "{bad:?}");
    assert_eq!(s.kubectl(33, &["delete", "crd", "roles.rbac.authorization.k8s.io", "--timeout=60s"]).code, 0);
    assert_eq!(s.kubectl(33, &["get", "role", "keeprole", "-o", "name"]).ok().trim(), "role.rbac.authorization.k8s.io/keeprole");
    s.restart();
    let kept = eventually("the Role after a restart", || {
        let out = s.kubectl(33, &["get", "role", "keeprole", "-o", "name"]);
        (out.code == 0).then_some(out.stdout)
    });
    assert_eq!(kept.trim(), "role.rbac.authorization.k8s.io/keeprole");

    // Strategic merge patch on a custom resource: 415.
    establish(&s, &s, 33, "smp");
    s.kubectl_stdin(33, &["create", "--validate=false", "-f", "-"], Some(&cron("p", "smp", "  image: x\n"))).ok();
    let smp = s.kubectl(33, &["patch", "ctsmp", "p", "--type=strategic", "-p", r#"{"spec":{"image":"y"}}"#]);
    assert_eq!(smp.code, 1, "{smp:?}");
    assert!(
        smp.stderr
            .contains("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml\n"),
        "{smp:?}"
    );
}

/// A CRD whose storage version is v1beta1 and which also serves v1 with
/// the same schema (a YAML alias, so one edit changes both), without a
/// status subresource.
const WIDGETS: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.lifecycle.example.com
spec:
  group: lifecycle.example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1beta1
    served: true
    storage: true
    schema: &schema
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
          status:
            type: object
            properties:
              phase: {type: string}
  - name: v1
    served: true
    storage: false
    schema: *schema
"#;

/// What kube-apiserver does around a CRD's life that the suite does not
/// reach: the preferred version goes by version priority (v1 over the
/// v1beta1 storage version); without a status subresource every change
/// but to metadata bumps the generation; a default added to the schema
/// shows on objects stored before it (reads are defaulted); an update
/// may keep a value a tightened schema refuses if it leaves it unchanged
/// (validation ratcheting); and while the CRD is terminating, creates are
/// refused with a 405.
#[test]
fn crd_versions_generation_defaults_ratcheting_termination() {
    let s = Server::start();
    s.kubectl_stdin(33, &["apply", "-f", "-"], Some(WIDGETS)).ok();
    s.kubectl(33, &["wait", "--for=condition=Established", "crd/widgets.lifecycle.example.com", "--timeout=30s"]).ok();
    let group = eventually("the group in discovery", || {
        let out = s.kubectl(33, &["get", "--raw", "/apis/lifecycle.example.com"]);
        (out.code == 0).then(|| json(&out))
    });
    assert_eq!(group["preferredVersion"]["version"], "v1", "{group}");
    assert_eq!(group["versions"][0]["version"], "v1", "{group}");
    assert_eq!(group["versions"][1]["version"], "v1beta1", "{group}");

    // Generation: status (no subresource) counts, labels do not.
    let w = "apiVersion: lifecycle.example.com/v1\nkind: Widget\nmetadata:\n  name: w\n  finalizers: [lifecycle.example.com/hold]\nspec:\n  size: 1\n";
    s.kubectl_stdin(33, &["create", "-f", "-"], Some(w)).ok();
    let generation = || json(&s.kubectl(33, &["get", "widgets.v1.lifecycle.example.com", "w", "-o", "json"]))["metadata"]["generation"].clone();
    assert_eq!(generation(), 1);
    s.kubectl(33, &["patch", "widgets.v1.lifecycle.example.com", "w", "--type=merge", "-p", r#"{"status":{"phase":"Ready"}}"#]).ok();
    assert_eq!(generation(), 2);
    s.kubectl(33, &["label", "widgets.v1.lifecycle.example.com", "w", "tier=one"]).ok();
    assert_eq!(generation(), 2);
    s.kubectl(33, &["patch", "widgets.v1.lifecycle.example.com", "w", "--type=merge", "-p", r#"{"spec":{"size":2}}"#]).ok();
    assert_eq!(generation(), 3);
    // An integral float is an integer, as Go writes it back.
    s.kubectl(33, &["patch", "widgets.v1.lifecycle.example.com", "w", "--type=merge", "-p", r#"{"spec":{"size":2.0}}"#]).ok();
    let size = json(&s.kubectl(33, &["get", "widgets.v1.lifecycle.example.com", "w", "-o", "json"]))["spec"]["size"].clone();
    assert!(size.is_i64() && size == 2, "{size}");
    assert_eq!(generation(), 3);

    // A default added later shows on the stored object, through get and
    // list, in both versions, without a write.
    let rv = json(&s.kubectl(33, &["get", "widgets.v1.lifecycle.example.com", "w", "-o", "json"]))["metadata"]["resourceVersion"].clone();
    let with_default = WIDGETS.replace("              size: {type: integer}\n", "              size: {type: integer}\n              color: {type: string, default: blue}\n");
    s.kubectl_stdin(33, &["apply", "-f", "-"], Some(&with_default)).ok();
    for version in ["v1", "v1beta1"] {
        let res = format!("widgets.{version}.lifecycle.example.com");
        let got = eventually("the default on read", || {
            let o = json(&s.kubectl(33, &["get", &res, "w", "-o", "json"]));
            (o["spec"]["color"] == "blue").then_some(o)
        });
        assert_eq!(got["metadata"]["resourceVersion"], rv, "reading wrote the object: {got}");
        let list = json(&s.kubectl(33, &["get", &res, "-o", "json"]));
        assert_eq!(list["items"][0]["spec"]["color"], "blue", "{list}");
    }

    // Ratcheting: after the schema tightens, an update that leaves the
    // now-invalid size alone passes; one that changes it is checked.
    let tightened = with_default.replace("              size: {type: integer}\n", "              size: {type: integer, maximum: 1}\n");
    s.kubectl_stdin(33, &["apply", "-f", "-"], Some(&tightened)).ok();
    let refused = eventually("the tightened schema served", || {
        let out = s.kubectl(33, &["patch", "widgets.v1.lifecycle.example.com", "w", "--type=merge", "-p", r#"{"spec":{"size":3}}"#]);
        (out.code != 0).then_some(out)
    });
    assert!(refused.stderr.contains("spec.size: Invalid value: 3: spec.size in body should be less than or equal to 1"), "{refused:?}");
    s.kubectl(33, &["label", "widgets.v1.lifecycle.example.com", "w", "tier=two", "--overwrite"]).ok();
    s.kubectl(33, &["patch", "widgets.v1.lifecycle.example.com", "w", "--type=merge", "-p", r#"{"status":{"phase":"Tight"}}"#]).ok();
    assert_eq!(json(&s.kubectl(33, &["get", "widgets.v1.lifecycle.example.com", "w", "-o", "json"]))["spec"]["size"], 2);

    // Terminating: the finalizer holds the object, so the CRD stays.
    s.kubectl(33, &["delete", "crd", "widgets.lifecycle.example.com", "--wait=false"]).ok();
    let mut attempt = 0;
    let refused = eventually("creates refused while terminating", || {
        attempt += 1;
        let other = format!("apiVersion: lifecycle.example.com/v1\nkind: Widget\nmetadata:\n  name: late-{attempt}\nspec:\n  size: 1\n");
        let out = s.kubectl_stdin(33, &["create", "-f", "-"], Some(&other));
        (out.code != 0).then_some(out)
    });
    assert!(refused.stderr.contains("Error from server (MethodNotAllowed)") && refused.stderr.contains("create not allowed while custom resource definition is terminating"), "{refused:?}");
    let terminating = s.kubectl(33, &["get", "crd", "widgets.lifecycle.example.com", "-o", "jsonpath={.status.conditions[?(@.type==\"Terminating\")].status}"]);
    assert_eq!(terminating.ok(), "True");
    // The condition says what holds the deletion, as kube's does.
    let held = eventually("the Terminating condition to name the held instances", || {
        let out = s.kubectl(
            33,
            &["get", "crd", "widgets.lifecycle.example.com", "-o", "jsonpath={.status.conditions[?(@.type==\"Terminating\")].reason}: {.status.conditions[?(@.type==\"Terminating\")].message}"],
        );
        out.stdout.starts_with("InstanceDeletionCheck").then_some(out.stdout)
    });
    assert_eq!(held, "InstanceDeletionCheck: could not confirm zero CustomResources remaining: 1 held by finalizers");
    // Updates still work; releasing the finalizer lets the CRD go.
    s.kubectl(33, &["patch", "widgets.v1.lifecycle.example.com", "w", "--type=merge", "-p", r#"{"metadata":{"finalizers":null}}"#]).ok();
    eventually("the CRD gone", || (s.kubectl(33, &["get", "crd", "widgets.lifecycle.example.com"]).code != 0).then_some(()));
    eventually("its endpoints withdrawn", || (s.kubectl(33, &["get", "--raw", "/apis/lifecycle.example.com/v1/widgets"]).code != 0).then_some(()));
}

/// An object nested deeper than a stored object can be read back is
/// refused with a 400, whether the body or a patch makes it so; the
/// resource stays readable (before, it was stored and every list failed).
#[test]
fn objects_too_deep_to_read_back_are_refused() {
    let s = Server::start();
    let blobs = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: blobs.deep.example.com
spec:
  group: deep.example.com
  scope: Namespaced
  names: {plural: blobs, singular: blob, kind: Blob}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
"#;
    s.kubectl_stdin(33, &["apply", "-f", "-"], Some(blobs)).ok();
    s.kubectl(33, &["wait", "--for=condition=Established", "crd/blobs.deep.example.com", "--timeout=30s"]).ok();
    let nested = |depth: usize| format!("{}1{}", r#"{"a":"#.repeat(depth), "}".repeat(depth));
    let blob = |name: &str, depth: usize| format!(r#"{{"apiVersion":"deep.example.com/v1","kind":"Blob","metadata":{{"name":"{name}"}},"spec":{}}}"#, nested(depth));
    // The body decodes (125 levels), but with managedFields the object
    // would not.
    let deep = eventually("the resource served", || {
        let out = s.kubectl_stdin(33, &["create", "--validate=false", "-f", "-"], Some(&blob("deep", 123)));
        (!out.stderr.contains("the server doesn't have a resource type") && !out.stderr.contains("no matches for kind")).then_some(out)
    });
    assert_eq!(deep.code, 1, "{deep:?}");
    assert!(deep.stderr.contains("Error from server (BadRequest)") && deep.stderr.contains("levels deep; at most 127 can be stored"), "{deep:?}");
    // A patch that nests an object deeper is refused the same way.
    s.kubectl_stdin(33, &["create", "--validate=false", "-f", "-"], Some(&blob("shallow", 60))).ok();
    let path = format!("/spec{}", "/a".repeat(60));
    let patch = format!(r#"[{{"op":"replace","path":"{path}","value":{}}}]"#, nested(70));
    let patched = s.kubectl(33, &["patch", "blob", "shallow", "--type=json", "-p", &patch]);
    assert!(patched.code == 1 && patched.stderr.contains("at most 127 can be stored"), "{patched:?}");
    // A YAML body may nest as deep as a JSON one (the YAML parser's own
    // budget stopped at 64 levels).
    let mut yaml = String::from("apiVersion: deep.example.com/v1\nkind: Blob\nmetadata:\n  name: yaml\nspec:\n");
    for level in 1..=100 {
        yaml.push_str(&format!("{}a:\n", "  ".repeat(level)));
    }
    yaml.push_str(&format!("{}1\n", "  ".repeat(101)));
    let yaml_file = s.dir.path().join("deep.yaml");
    std::fs::write(&yaml_file, &yaml).expect("write yaml");
    let posted = crate::common::curl_admin(
        &s,
        "/apis/deep.example.com/v1/namespaces/default/blobs",
        &["-X", "POST", "-H", "Content-Type: application/yaml", "--data-binary", &format!("@{}", yaml_file.display())],
    );
    assert!(posted.contains(" 201"), "{posted}");
    s.kubectl(33, &["delete", "blob", "yaml"]).ok();
    // Everything stays readable.
    let list = json(&s.kubectl(33, &["get", "blobs", "-o", "json"]));
    let names: Vec<&str> = list["items"].as_array().map(|a| a.iter().filter_map(|i| i["metadata"]["name"].as_str()).collect()).unwrap_or_default();
    assert_eq!(names, ["shallow"]);
    s.kubectl(33, &["delete", "crd", "blobs.deep.example.com", "--timeout=60s"]).ok();
}

/// An object stored as deleting with no finalizer left (a state a CRD was
/// once seen left in after its cleanup) does not stay: its next update
/// deletes it, as kube's store decides during an update, and a CRD in that
/// state is deleted by the CRD controller with no update from outside.
/// The states are written straight into the etcd behind the server.
#[test]
fn deleting_objects_that_nothing_holds_are_deleted() {
    use apiserver::storage::kv::{Kv as _, WriteOp};
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let etcd = rt.block_on(crate::common::RealEtcd::start());
    let s = Server::start_with(&["--etcd-servers".into(), etcd.url.clone()]);
    let mark_deleting = |key: &str| {
        rt.block_on(async {
            let got = etcd.kv.range(key.as_bytes(), b"", 0, 0).await.expect("range");
            let kv = got.kvs.first().unwrap_or_else(|| panic!("{key} is stored"));
            let mut obj: Value = serde_json::from_slice(&kv.value).expect("JSON");
            obj["metadata"]["deletionTimestamp"] = Value::String("2026-01-01T00:00:00Z".into());
            obj["metadata"].as_object_mut().expect("metadata").remove("finalizers");
            let written = etcd.kv.compare_and_write(key.as_bytes(), kv.mod_revision, WriteOp::Put(serde_json::to_vec(&obj).unwrap())).await.expect("write");
            assert!(written.succeeded, "{key} changed meanwhile");
        })
    };

    s.kubectl(33, &["create", "configmap", "stuck"]).ok();
    s.kubectl(33, &["annotate", "configmap", "stuck", "kept=yes"]).ok();
    mark_deleting("/registry/configmaps/default/stuck");
    eventually("the server to see the deleting configmap", || {
        let got = s.kubectl(33, &["get", "configmap", "stuck", "-o", "jsonpath={.metadata.deletionTimestamp}"]);
        (got.stdout == "2026-01-01T00:00:00Z").then_some(())
    });
    // A patch that changes nothing still deletes it.
    s.kubectl(33, &["patch", "configmap", "stuck", "--type=merge", "-p", r#"{"metadata":{"annotations":{"kept":"yes"}}}"#]).ok();
    let gone = s.kubectl(33, &["get", "configmap", "stuck"]);
    assert!(gone.stderr.contains("configmaps \"stuck\" not found"), "the update left it: {gone:?}");

    establish(&s, &s, 33, "stuck");
    let name = "crontabs.stablestuck.example.com";
    mark_deleting(&format!("/registry/apiextensions.k8s.io/customresourcedefinitions/{name}"));
    eventually("the CRD controller to delete the left-behind CRD", || {
        let got = s.kubectl(33, &["get", "crd", name]);
        (got.code == 1 && got.stderr.contains("not found")).then_some(())
    });
}
