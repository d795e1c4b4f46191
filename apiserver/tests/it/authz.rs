//! Authorization beyond RBAC's rules, through real kubectl (1.33 and 1.27)
//! and curl: privilege-escalation prevention on roles and bindings,
//! anonymous requests with `--anonymous-auth` on and off, the Node
//! authorizer and the NodeRestriction admission plugin.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::common::Server;
use crate::rbac::{assert_can_i, kubectl_as, token_kubeconfig};

/// A server with `flags` and a token file: bob (no groups) and the
/// kubelets of nodes n1 and n2.
fn server(dir: &Path, flags: &[&str]) -> Server {
    let file = dir.join("tokens.csv");
    std::fs::write(&file, "bob-token,bob,1002\nn1-token,system:node:n1,n1,system:nodes\nn2-token,system:node:n2,n2,system:nodes\n").unwrap();
    let mut args: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
    args.push(format!("--token-auth-file={}", file.display()));
    Server::start_with(&args)
}

/// `curl` without credentials: (status code, body).
fn anonymous(s: &Server, path: &str) -> (u16, String) {
    let out = Command::new("curl").args(["-s", "-w", "\n%{http_code}", "--cacert"]).arg(s.ca()).arg(format!("https://{}{path}", s.host_port())).output().expect("curl");
    let out = String::from_utf8_lossy(&out.stdout).to_string();
    let (body, code) = out.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

/// Polls `f` until it holds (informers and controllers catch up within
/// moments), failing with `what` after 10 s.
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    for _ in 0..100 {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{what} never happened");
}

/// Creating or updating a Role or binding needs the permissions it grants,
/// or the `escalate` / `bind` verb; the refusal is kube's 403 word for word.
#[test]
fn escalation_is_denied_without_the_permissions_or_escalate_and_bind() {
    let dir = tempfile::tempdir().unwrap();
    let s = server(dir.path(), &["--authorization-mode=RBAC"]);
    s.kubectl(33, &["create", "namespace", "team"]).ok();
    s.kubectl(33, &["create", "rolebinding", "bob-admin", "--clusterrole=admin", "--user=bob", "-n", "team"]).ok();
    let bob = token_kubeconfig(&s, "bob", "bob-token");
    // admin gets its rules from aggregation; wait until bob holds them.
    eventually("admin aggregated", || kubectl_as(&s, &bob, 33, &["auth", "can-i", "create", "roles", "-n", "team"]).stdout.trim() == "yes");
    let held = "is attempting to grant RBAC permissions not currently held:";
    for minor in [33, 27] {
        let n = |base: &str| format!("{base}-{minor}");
        // What bob holds he may grant.
        kubectl_as(&s, &bob, minor, &["create", "role", &n("pod-reader"), "--verb=get,list", "--resource=pods", "-n", "team"]).ok();
        kubectl_as(&s, &bob, minor, &["create", "rolebinding", &n("eve-view"), "--clusterrole=view", "--user=eve", "-n", "team"]).ok();
        // What he does not, he may not.
        let out = kubectl_as(&s, &bob, minor, &["create", "role", &n("node-reader"), "--verb=get,list", "--resource=nodes", "-n", "team"]);
        let want = format!(
            "roles.rbac.authorization.k8s.io \"{}\" is forbidden: user \"bob\" (groups=[\"system:authenticated\"]) {held}\n{{APIGroups:[\"\"], Resources:[\"nodes\"], Verbs:[\"get\" \"list\"]}}",
            n("node-reader")
        );
        assert!(out.code != 0 && out.stderr.contains(&want), "1.{minor}: want {want}\n got {out:?}");
        let out = kubectl_as(&s, &bob, minor, &["create", "rolebinding", &n("eve-admin"), "--clusterrole=cluster-admin", "--user=eve", "-n", "team"]);
        let want = format!("rolebindings.rbac.authorization.k8s.io \"{}\" is forbidden: user \"bob\" (groups=[\"system:authenticated\"]) {held}\n", n("eve-admin"));
        assert!(out.code != 0 && out.stderr.contains(&want) && out.stderr.contains(r#"{APIGroups:["*"], Resources:["*"], Verbs:["*"]}"#), "1.{minor}: {out:?}");
        // An update that widens a role is refused the same way.
        let patch = r#"[{"op":"add","path":"/rules/-","value":{"apiGroups":[""],"resources":["nodes"],"verbs":["get"]}}]"#;
        let out = kubectl_as(&s, &bob, minor, &["patch", "role", &n("pod-reader"), "-n", "team", "--type=json", "-p", patch]);
        assert!(out.code != 0 && out.stderr.contains(held) && out.stderr.contains(r#"{APIGroups:[""], Resources:["nodes"], Verbs:["get"]}"#), "1.{minor}: {out:?}");
    }
    // With `escalate` on roles and `bind` on cluster-admin, he may.
    s.kubectl(33, &["create", "role", "escalator", "--verb=escalate", "--resource=roles.rbac.authorization.k8s.io", "-n", "team"]).ok();
    s.kubectl(33, &["create", "role", "binder", "--verb=bind", "--resource=clusterroles.rbac.authorization.k8s.io", "--resource-name=cluster-admin", "-n", "team"]).ok();
    s.kubectl(33, &["create", "rolebinding", "bob-escalator", "--role=escalator", "--user=bob", "-n", "team"]).ok();
    s.kubectl(33, &["create", "rolebinding", "bob-binder", "--role=binder", "--user=bob", "-n", "team"]).ok();
    eventually("escalate granted", || kubectl_as(&s, &bob, 33, &["create", "role", "node-reader", "--verb=get", "--resource=nodes", "-n", "team"]).code == 0);
    kubectl_as(&s, &bob, 33, &["create", "rolebinding", "eve-admin", "--clusterrole=cluster-admin", "--user=eve", "-n", "team"]).ok();
    // Binding a missing role is 404, as kube answers.
    let out = kubectl_as(&s, &bob, 33, &["create", "rolebinding", "ghost", "--role=ghost", "--user=eve", "-n", "team"]);
    assert!(out.stderr.contains(r#"role.rbac.authorization.k8s.io "ghost" not found"#), "{out:?}");
    // The admin (system:masters) is never checked.
    s.kubectl(33, &["create", "clusterrole", "anything", "--verb=*", "--resource=*.*"]).ok();
    // A binding's roleRef cannot change, not even for the admin.
    let out = s.kubectl(33, &["patch", "rolebinding", "eve-view-33", "-n", "team", "--type=merge", "-p", r#"{"roleRef":{"name":"cluster-admin"}}"#]);
    assert!(out.code != 0 && out.stderr.contains("roleRef: Invalid value") && out.stderr.contains("cannot change roleRef"), "{out:?}");
    // A LocalSubjectAccessReview answers about its own namespace only.
    let lsar = dir.path().join("lsar.json");
    std::fs::write(
        &lsar,
        r#"{"apiVersion":"authorization.k8s.io/v1","kind":"LocalSubjectAccessReview","metadata":{"namespace":"team"},"spec":{"user":"x","resourceAttributes":{"verb":"get","resource":"nodes"}}}"#,
    )
    .unwrap();
    let out = kubectl_as(&s, &bob, 33, &["create", "--validate=false", "-f", &lsar.display().to_string(), "-o", "json"]);
    assert!(out.code != 0 && out.stderr.contains("spec.resourceAttributes.namespace must match namespace: team"), "{out:?}");
}

/// With RBAC and `--anonymous-auth` (on by default) a request without
/// credentials is `system:anonymous` and gets 403 on resources and 200 on
/// the public paths; with `--anonymous-auth=false` it is 401.
#[test]
fn anonymous_requests_get_what_rbac_grants_or_401() {
    let dir = tempfile::tempdir().unwrap();
    let s = server(dir.path(), &["--authorization-mode=Node,RBAC"]);
    let (code, body) = anonymous(&s, "/api/v1/namespaces/default/pods");
    assert_eq!(code, 403, "{body}");
    let status: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status["message"], r#"pods is forbidden: User "system:anonymous" cannot list resource "pods" in API group "" in the namespace "default""#);
    assert_eq!(status["reason"], "Forbidden");
    for path in ["/version", "/healthz", "/readyz", "/livez"] {
        assert_eq!(anonymous(&s, path).0, 200, "{path}");
    }
    // Discovery is for authenticated users only (kube since 1.14).
    assert_eq!(anonymous(&s, "/apis").0, 403);
    drop(s);

    let off = server(dir.path(), &["--authorization-mode=RBAC", "--anonymous-auth=false"]);
    for path in ["/api/v1/namespaces/default/pods", "/healthz", "/version"] {
        let (code, body) = anonymous(&off, path);
        assert_eq!(code, 401, "{path}: {body}");
        assert!(body.contains(r#""reason":"Unauthorized""#), "{body}");
    }
}

/// A kubelet reads only the Secrets its pods use (Node authorizer) and
/// writes only its own Node (NodeRestriction).
#[test]
fn nodes_read_their_pods_objects_and_write_only_their_node() {
    let dir = tempfile::tempdir().unwrap();
    let s = server(dir.path(), &["--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction"]);
    s.kubectl(33, &["create", "secret", "generic", "tls", "--from-literal=k=v"]).ok();
    s.kubectl(33, &["create", "secret", "generic", "other", "--from-literal=k=v"]).ok();
    let pod = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  nodeName: n1\n  automountServiceAccountToken: false\n  containers:\n  - name: c\n    image: nginx\n  volumes:\n  - name: tls\n    secret:\n      secretName: tls\n";
    s.kubectl_stdin(33, &["apply", "-f", "-"], Some(pod)).ok();
    let n1 = token_kubeconfig(&s, "n1", "n1-token");
    let n2 = token_kubeconfig(&s, "n2", "n2-token");
    eventually("n1 reads its pod's secret", || kubectl_as(&s, &n1, 33, &["get", "secret", "tls"]).code == 0);
    for minor in [33, 27] {
        kubectl_as(&s, &n1, minor, &["get", "secret", "tls", "-o", "name"]).ok();
        kubectl_as(&s, &n1, minor, &["get", "pods"]).ok();
        let out = kubectl_as(&s, &n1, minor, &["get", "secret", "other"]);
        let want =
            r#"secrets "other" is forbidden: User "system:node:n1" cannot get resource "secrets" in API group "" in the namespace "default": no relationship found between node 'n1' and this object"#;
        assert!(out.code != 0 && out.stderr.contains(want), "1.{minor}: {out:?}");
        let out = kubectl_as(&s, &n2, minor, &["get", "secret", "tls"]);
        assert!(out.code != 0 && out.stderr.contains("no relationship found between node 'n2' and this object"), "1.{minor}: {out:?}");
        // Listing secrets is not for nodes; can-i shows the Node
        // authorizer's reason, as against kube.
        let out = kubectl_as(&s, &n1, minor, &["auth", "can-i", "list", "secrets"]);
        assert_eq!((out.stdout.trim(), out.code), ("no - can only get individual resources of this type", 1), "1.{minor}: {out:?}");
    }
    // NodeRestriction: its own Node only, and no kube labels of its choice.
    let node = |name: &str| format!("apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  labels:\n    kubernetes.io/hostname: {name}\n");
    let n1_node = dir.path().join("n1-node.yaml");
    std::fs::write(&n1_node, node("n1")).unwrap();
    kubectl_as(&s, &n1, 33, &["create", "-f", &n1_node.display().to_string()]).ok();
    for minor in [33, 27] {
        let out = kubectl_as(&s, &n1, minor, &["label", "node", "n1", "node-role.kubernetes.io/control-plane="]);
        assert!(out.code != 0 && out.stderr.contains(r#"nodes "n1" is forbidden: is not allowed to modify labels: node-role.kubernetes.io/control-plane"#), "1.{minor}: {out:?}");
        kubectl_as(&s, &n1, minor, &["label", "--overwrite", "node", "n1", &format!("example.com/minor={minor}")]).ok();
    }
    s.kubectl_stdin(33, &["apply", "-f", "-"], Some(&node("n2"))).ok();
    let out = kubectl_as(&s, &n1, 33, &["label", "node", "n2", "example.com/x=y"]);
    assert!(out.code != 0 && out.stderr.contains(r#"nodes "n2" is forbidden: node "n1" is not allowed to modify node "n2""#), "{out:?}");
    // The pod goes, and with it the node's access to its secret.
    s.kubectl(33, &["delete", "pod", "web", "--wait=false"]).ok();
    s.kubectl(33, &["delete", "pod", "web", "--grace-period=0", "--force", "--ignore-not-found"]);
    eventually("n1 loses the secret", || kubectl_as(&s, &n1, 33, &["get", "secret", "tls"]).code != 0);
    // kube's system roles for the control-plane components are there.
    for (user, verb, resource, want) in [
        ("system:kube-scheduler", "create", "bindings", true),
        ("system:kube-controller-manager", "list", "secrets", true),
        ("system:kube-proxy", "list", "endpointslices.discovery.k8s.io", true),
        ("system:kube-proxy", "get", "secrets", false),
    ] {
        assert_can_i(&s.kubectl(33, &["auth", "can-i", verb, resource, "--as", user]), want, &format!("{user} {verb} {resource}"));
    }
}
