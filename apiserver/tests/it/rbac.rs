//! Authentication by static token and authorization by RBAC, through real
//! kubectl (1.33 and 1.27): `auth can-i` per the RBAC fixtures, directly
//! and impersonated, `can-i --list`, kube's 403 wording, 401 for unknown
//! tokens, and the bootstrap policy's reconciliation across a restart.
//!
//! The fixtures in `tests/it/data/` are copies of the project's shared
//! ones: `rbac-pod-reader.yaml` (the `default` ServiceAccount may read pods
//! in `default`) and `rbac-deployment-creator.yaml` (alice@example.com may
//! create deployments in `default`).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;

use crate::common::{curl_admin, kubectl_path, Out, Server};

const ALICE_TOKEN: &str = "alice-0123456789";
const BOB_TOKEN: &str = "bob-0123456789";
const ALICE: &str = "alice@example.com";
const SA: &str = "system:serviceaccount:default:default";

pub(crate) fn data(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/data").join(name).display().to_string()
}

/// A server with `--authorization-mode=RBAC` and a token file for alice
/// (in group `dev`) and bob; the token file lives in `tokens`.
fn rbac_server(tokens: &Path) -> Server {
    let file = tokens.join("tokens.csv");
    std::fs::write(&file, format!("{ALICE_TOKEN},{ALICE},1001,\"dev,qa\"\n{BOB_TOKEN},bob,1002\n")).unwrap();
    Server::start_with(&["--authorization-mode=RBAC".to_string(), format!("--token-auth-file={}", file.display())])
}

/// A kubeconfig for the token `token`, trusting the server's CA.
pub(crate) fn token_kubeconfig(s: &Server, name: &str, token: &str) -> PathBuf {
    let path = s.dir.path().join(format!("{name}.kubeconfig"));
    let cfg = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\n    certificate-authority: {}\nusers:\n- name: {name}\n  user:\n    token: {token}\ncontexts:\n- name: {name}\n  context:\n    cluster: c\n    user: {name}\n    namespace: default\ncurrent-context: {name}\n",
        s.url,
        s.ca().display()
    );
    std::fs::write(&path, cfg).unwrap();
    path
}

/// Runs `kubectl.1.<minor>` with `kubeconfig`.
pub(crate) fn kubectl_as(s: &Server, kubeconfig: &Path, minor: u32, args: &[&str]) -> Out {
    let o = Command::new(kubectl_path(minor)).arg("--kubeconfig").arg(kubeconfig).arg("--cache-dir").arg(s.dir.path().join(format!("kubectl-cache-{minor}"))).args(args).output().expect("run kubectl");
    Out { code: o.status.code().unwrap_or(-1), stdout: String::from_utf8_lossy(&o.stdout).into_owned(), stderr: String::from_utf8_lossy(&o.stderr).into_owned() }
}

/// `kubectl auth can-i` says `want` with kubectl's exit code (0 yes, 1 no).
#[track_caller]
pub(crate) fn assert_can_i(out: &Out, want: bool, what: &str) {
    let answer = if want { "yes" } else { "no" };
    assert_eq!((out.stdout.trim(), out.code), (answer, if want { 0 } else { 1 }), "{what}: {out:?}");
}

#[test]
fn static_token_users_get_what_rbac_grants() {
    let tokens = tempfile::tempdir().unwrap();
    let s = rbac_server(tokens.path());
    // The admin (system:masters) keeps working under RBAC.
    for f in ["rbac-pod-reader.yaml", "rbac-deployment-creator.yaml"] {
        s.kubectl(33, &["apply", "-f", &data(f)]).ok();
    }
    s.kubectl(33, &["create", "clusterrole", "node-reader", "--verb=get,list", "--resource=nodes"]).ok();
    s.kubectl(33, &["create", "clusterrolebinding", "ops-read-nodes", "--clusterrole=node-reader", "--group=ops"]).ok();
    let alice = token_kubeconfig(&s, "alice", ALICE_TOKEN);
    let bob = token_kubeconfig(&s, "bob", BOB_TOKEN);

    for minor in [33, 27] {
        // Directly, as the token users: (kubeconfig, can-i arguments, answer).
        let direct: &[(&Path, &[&str], bool)] = &[
            (&alice, &["create", "deployments.apps"], true),
            (&alice, &["create", "deployments.apps", "-n", "kube-system"], false),
            (&alice, &["list", "deployments.apps"], false),
            (&alice, &["list", "pods"], false),
            (&alice, &["create", "selfsubjectaccessreviews.authorization.k8s.io"], true),
            (&bob, &["create", "deployments.apps"], false),
            (&bob, &["get", "/version"], true),
            (&bob, &["get", "/metrics"], false),
        ];
        for (cfg, args, want) in direct {
            let mut a = vec!["auth", "can-i"];
            a.extend_from_slice(args);
            assert_can_i(&kubectl_as(&s, cfg, minor, &a), *want, &format!("1.{minor} {} {args:?}", cfg.display()));
        }
        // From the admin, impersonating.
        let impersonated: &[(&[&str], bool)] = &[
            (&["list", "pods", "--as", SA], true),
            (&["watch", "pods", "--as", SA], true),
            (&["delete", "pods", "--as", SA], false),
            (&["list", "pods", "-n", "kube-system", "--as", SA], false),
            (&["list", "secrets", "--as", SA], false),
            (&["create", "deployments.apps", "--as", ALICE], true),
            (&["create", "replicasets.apps", "--as", ALICE], false),
            (&["list", "nodes", "--as", "bob"], false),
            (&["list", "nodes", "--as", "bob", "--as-group", "ops"], true),
            (&["delete", "nodes", "--as", "bob", "--as-group", "ops"], false),
            (&["delete", "nodes", "--as", "bob", "--as-group", "system:masters"], true),
        ];
        for (args, want) in impersonated {
            let mut a = vec!["auth", "can-i"];
            a.extend_from_slice(args);
            assert_can_i(&s.kubectl(minor, &a), *want, &format!("1.{minor} admin {args:?}"));
        }

        // `can-i --list`: the fixture's role and the bootstrap roles every
        // authenticated user has.
        let list = kubectl_as(&s, &alice, minor, &["auth", "can-i", "--list"]);
        let rows: Vec<Vec<&str>> = list.ok().lines().map(|l| l.split_whitespace().collect()).collect();
        for want in [
            vec!["deployments.apps", "[]", "[]", "[create]"],
            vec!["selfsubjectaccessreviews.authorization.k8s.io", "[]", "[]", "[create]"],
            // Non-resource rows have an empty first column.
            vec!["[/api/*]", "[]", "[get]"],
            vec!["[/version]", "[]", "[get]"],
        ] {
            assert!(rows.contains(&want), "1.{minor} can-i --list lacks {want:?}: {list:?}");
        }
        assert!(!rows.iter().any(|r| r.first() == Some(&"pods")), "1.{minor}: {list:?}");

        // Denials in kube-apiserver's words.
        let denials: &[(&[&str], &str)] = &[
            (&["get", "pods"], r#"Error from server (Forbidden): pods is forbidden: User "alice@example.com" cannot list resource "pods" in API group "" in the namespace "default""#),
            (&["get", "nodes"], r#"Error from server (Forbidden): nodes is forbidden: User "alice@example.com" cannot list resource "nodes" in API group "" at the cluster scope"#),
            (&["get", "pod", "x"], r#"Error from server (Forbidden): pods "x" is forbidden: User "alice@example.com" cannot get resource "pods" in API group "" in the namespace "default""#),
            (&["logs", "x"], r#"pods "x" is forbidden: User "alice@example.com" cannot get resource "pods" in API group "" in the namespace "default""#),
            (
                &["get", "pods", "--as", "bob"],
                r#"Error from server (Forbidden): users "bob" is forbidden: User "alice@example.com" cannot impersonate resource "users" in API group "" at the cluster scope"#,
            ),
        ];
        for (args, want) in denials {
            let out = kubectl_as(&s, &alice, minor, args);
            assert_eq!(out.code, 1, "1.{minor} {args:?}: {out:?}");
            assert!(out.stderr.contains(want), "1.{minor} {args:?}: want {want}\n got {out:?}");
        }
        // Allowed by the fixture: alice creates a deployment.
        let name = format!("by-alice-{minor}");
        let created = kubectl_as(&s, &alice, minor, &["create", "deployment", &name, "--image=nginx"]);
        assert_eq!(created.ok().trim(), format!("deployment.apps/{name} created"));
    }
}

/// The subresource and non-resource forms of a denial, over HTTP (kubectl
/// asks for neither without first doing something else).
#[test]
fn denials_of_subresources_and_paths_read_as_kube() {
    let tokens = tempfile::tempdir().unwrap();
    let s = rbac_server(tokens.path());
    let bob = |path: &str| {
        let out = Command::new("curl")
            .args(["-s", "-i", "--cacert"])
            .arg(s.ca())
            .args(["-H", &format!("Authorization: Bearer {BOB_TOKEN}")])
            .arg(format!("https://{}{path}", s.host_port()))
            .output()
            .expect("curl");
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let status = |resp: &str| -> serde_json::Value {
        assert!(resp.starts_with("HTTP/2 403") || resp.starts_with("HTTP/1.1 403"), "{resp}");
        serde_json::from_str(resp.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("")).unwrap()
    };
    let log = status(&bob("/api/v1/namespaces/default/pods/x/log"));
    assert_eq!(log["message"], r#"pods "x" is forbidden: User "bob" cannot get resource "pods/log" in API group "" in the namespace "default""#);
    assert_eq!((&log["reason"], &log["code"], &log["details"]), (&json!("Forbidden"), &json!(403), &json!({"name": "x", "kind": "pods"})));
    let metrics = status(&bob("/metrics"));
    assert_eq!(metrics["message"], r#"forbidden: User "bob" cannot get path "/metrics""#);
    // Discovery and the public paths are granted by the bootstrap policy.
    for path in ["/api", "/apis", "/version", "/readyz"] {
        let out = bob(path);
        assert!(out.starts_with("HTTP/2 200") || out.starts_with("HTTP/1.1 200"), "{path}: {out}");
    }
}

/// A bearer token the token file does not hold is 401 with kube's Status,
/// even on a public path; the admin's certificate still works.
#[test]
fn unknown_token_is_401() {
    let tokens = tempfile::tempdir().unwrap();
    let s = rbac_server(tokens.path());
    for path in ["/api/v1/namespaces/default/pods", "/version"] {
        let out = Command::new("curl").args(["-s", "-i", "--cacert"]).arg(s.ca()).args(["-H", "Authorization: Bearer nope"]).arg(format!("https://{}{path}", s.host_port())).output().expect("curl");
        let out = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(out.starts_with("HTTP/2 401") || out.starts_with("HTTP/1.1 401"), "{path}: {out}");
        assert!(out.contains(r#""kind":"Status""#) && out.contains(r#""reason":"Unauthorized""#) && out.contains(r#""message":"Unauthorized""#) && out.contains(r#""code":401"#), "{out}");
    }
    let nobody = token_kubeconfig(&s, "nobody", "nope");
    for minor in [33, 27] {
        let out = kubectl_as(&s, &nobody, minor, &["get", "pods"]);
        assert_eq!(out.code, 1, "{out:?}");
        // kubectl's wording for a 401 (newer ones quote client-go's
        // discovery error, as they do against kube-apiserver).
        let said = ["error: You must be logged in to the server (Unauthorized)", "error: You must be logged in to the server (the server has asked for the client to provide credentials)"];
        assert!(said.iter().any(|w| out.stderr.contains(w)), "{out:?}");
    }
    assert!(curl_admin(&s, "/api/v1/namespaces/default/pods", &[]).contains(r#""kind":"PodList""#));
}

/// kube's bootstrap reconciliation at start: a bootstrap role a user
/// edited comes back (rules it lacks re-added), one annotated
/// `autoupdate: "false"` is left as edited, and a deleted one is created
/// again.
#[test]
fn bootstrap_policy_is_reconciled_at_start_except_autoupdate_false() {
    let tokens = tempfile::tempdir().unwrap();
    let mut s = rbac_server(tokens.path());
    let rules = |s: &Server, name: &str| s.kubectl(33, &["get", "clusterrole", name, "-o", "jsonpath={.rules}"]).ok().to_string();
    let basic = rules(&s, "system:basic-user");
    assert!(basic.contains("selfsubjectreviews"), "{basic}");
    let discovery = rules(&s, "system:discovery");
    assert!(discovery.contains("/apis/*"), "{discovery}");
    let only_first = r#"[{"op":"replace","path":"/rules","value":[{"apiGroups":["authorization.k8s.io"],"resources":["selfsubjectaccessreviews"],"verbs":["create"]}]}]"#;
    // Protected: autoupdate=false and fewer rules.
    s.kubectl(33, &["annotate", "--overwrite", "clusterrole", "system:basic-user", "rbac.authorization.kubernetes.io/autoupdate=false"]).ok();
    s.kubectl(33, &["patch", "clusterrole", "system:basic-user", "--type=json", "-p", only_first]).ok();
    // Not protected: fewer rules.
    s.kubectl(33, &["patch", "clusterrole", "system:discovery", "--type=json", "-p", r#"[{"op":"replace","path":"/rules","value":[{"nonResourceURLs":["/api"],"verbs":["get"]}]}]"#]).ok();
    s.kubectl(33, &["delete", "clusterrolebinding", "system:public-info-viewer"]).ok();
    let edited = rules(&s, "system:basic-user");

    s.restart();
    assert_eq!(rules(&s, "system:basic-user"), edited, "an autoupdate=false role was changed");
    assert_eq!(s.kubectl(33, &["get", "clusterrole", "system:basic-user", "-o", "jsonpath={.metadata.annotations}"]).ok(), r#"{"rbac.authorization.kubernetes.io/autoupdate":"false"}"#);
    let healed = rules(&s, "system:discovery");
    for url in ["/api", "/apis/*", "/version", "/readyz"] {
        assert!(healed.contains(&format!("\"{url}\"")), "{url} not restored: {healed}");
    }
    let b = s.kubectl(33, &["get", "clusterrolebinding", "system:public-info-viewer", "-o", "jsonpath={.subjects[*].name}"]);
    assert_eq!(b.ok(), "system:authenticated system:unauthenticated");
    // The protected role's missing rule is really gone: alice cannot ask who she is.
    let alice = token_kubeconfig(&s, "alice", ALICE_TOKEN);
    assert_can_i(&kubectl_as(&s, &alice, 33, &["auth", "can-i", "create", "selfsubjectreviews.authentication.k8s.io"]), false, "after restart");
    assert_can_i(&kubectl_as(&s, &alice, 33, &["auth", "can-i", "create", "selfsubjectaccessreviews.authorization.k8s.io"]), true, "after restart");
}

/// The bootstrap objects kube-apiserver creates are there, labelled.
#[test]
fn bootstrap_policy_has_kubes_objects() {
    let tokens = tempfile::tempdir().unwrap();
    let s = rbac_server(tokens.path());
    let roles = s.kubectl(33, &["get", "clusterroles", "-l", "kubernetes.io/bootstrapping=rbac-defaults", "-o", "name"]);
    for r in ["cluster-admin", "admin", "edit", "view", "system:discovery", "system:basic-user", "system:public-info-viewer", "system:aggregate-to-view"] {
        assert!(roles.ok().lines().any(|l| l == format!("clusterrole.rbac.authorization.k8s.io/{r}")), "{r}: {roles:?}");
    }
    let subjects = s.kubectl(33, &["get", "clusterrolebinding", "cluster-admin", "-o", "jsonpath={.subjects}"]);
    assert_eq!(subjects.ok(), r#"[{"apiGroup":"rbac.authorization.k8s.io","kind":"Group","name":"system:masters"}]"#);
    let edit = s.kubectl(33, &["get", "clusterrole", "edit", "-o", "jsonpath={.metadata.labels}"]);
    assert!(edit.ok().contains(r#""rbac.authorization.k8s.io/aggregate-to-admin":"true""#), "{edit:?}");
}

/// ClusterRole aggregation: `view` gets the rules of
/// `system:aggregate-to-view`, and of a new role labelled
/// `aggregate-to-view`; a RoleBinding to `view` grants them in its
/// namespace.
#[test]
fn aggregated_cluster_roles_pick_up_labelled_roles() {
    let tokens = tempfile::tempdir().unwrap();
    let s = rbac_server(tokens.path());
    let wait_for = |role: &str, want: &str| {
        let mut last = String::new();
        for _ in 0..100 {
            last = s.kubectl(33, &["get", "clusterrole", role, "-o", "jsonpath={.rules}"]).stdout;
            if last.contains(want) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        panic!("{role} never had {want}: {last}");
    };
    wait_for("view", r#""pods/log""#);
    wait_for("admin", r#""rolebindings""#);
    let templates = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: podtemplate-viewer\n  labels:\n    rbac.authorization.k8s.io/aggregate-to-view: \"true\"\nrules:\n- apiGroups: [\"\"]\n  resources: [\"podtemplates\"]\n  verbs: [\"get\", \"list\"]\n";
    s.kubectl_stdin(33, &["apply", "-f", "-"], Some(templates)).ok();
    wait_for("view", r#""podtemplates""#);
    // edit aggregates view, admin aggregates edit.
    wait_for("admin", r#""podtemplates""#);
    s.kubectl(33, &["create", "rolebinding", "bob-view", "--clusterrole=view", "--user=bob", "-n", "default"]).ok();
    for minor in [33, 27] {
        let can = |args: &[&str]| {
            let mut a = vec!["auth", "can-i", "--as", "bob"];
            a.extend_from_slice(args);
            s.kubectl(minor, &a)
        };
        assert_can_i(&can(&["list", "pods"]), true, "view: pods");
        assert_can_i(&can(&["list", "podtemplates"]), true, "view: podtemplates");
        assert_can_i(&can(&["delete", "podtemplates"]), false, "view: delete podtemplates");
        assert_can_i(&can(&["list", "secrets"]), false, "view: secrets");
        assert_can_i(&can(&["list", "pods", "-n", "kube-system"]), false, "view elsewhere");
    }
}

/// `kubectl auth whoami` for each kind of user the token file and the
/// client CA make: a second certificate user (signed with `openssl` by the
/// cluster CA, as an administrator would), a static-token user, the admin
/// certificate; and RBAC applies to the certificate user's groups.
#[test]
fn whoami_for_certificate_and_token_users() {
    let tokens = tempfile::tempdir().unwrap();
    let s = rbac_server(tokens.path());
    let pki = s.ca().parent().expect("pki dir").to_path_buf();
    let dir = s.dir.path();
    let (key, csr, crt) = (dir.join("carol.key"), dir.join("carol.csr"), dir.join("carol.crt"));
    let openssl = |args: &[&str]| {
        let out = Command::new("openssl").args(args).output().expect("run openssl");
        assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    let p = |x: &Path| x.display().to_string();
    openssl(&["genrsa", "-out", &p(&key), "2048"]);
    openssl(&["req", "-new", "-key", &p(&key), "-subj", "/CN=carol/O=dev/O=qa", "-out", &p(&csr)]);
    // With an extension, so openssl writes a v3 certificate (rustls, unlike
    // Go, refuses v1 certificates; see NOTES.md).
    let ext = dir.join("client.ext");
    std::fs::write(&ext, "extendedKeyUsage=clientAuth\n").unwrap();
    openssl(&["x509", "-req", "-in", &p(&csr), "-CA", &p(&s.ca()), "-CAkey", &p(&pki.join("ca.key")), "-CAcreateserial", "-out", &p(&crt), "-days", "1", "-extfile", &p(&ext)]);
    let carol = dir.join("carol.kubeconfig");
    std::fs::write(
        &carol,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\n    certificate-authority: {}\nusers:\n- name: carol\n  user:\n    client-certificate: {}\n    client-key: {}\ncontexts:\n- name: carol\n  context:\n    cluster: c\n    user: carol\n    namespace: default\ncurrent-context: carol\n",
            s.url,
            s.ca().display(),
            crt.display(),
            key.display()
        ),
    )
    .unwrap();
    let alice = token_kubeconfig(&s, "alice", ALICE_TOKEN);
    s.kubectl(33, &["create", "rolebinding", "qa-view", "--clusterrole=view", "--group=qa", "-n", "default"]).ok();
    for minor in [33, 27] {
        let who = |cfg: &Path| -> serde_json::Value { serde_json::from_str(kubectl_as(&s, cfg, minor, &["auth", "whoami", "-o", "json"]).ok()).unwrap() };
        let c = who(&carol);
        assert_eq!(c["status"]["userInfo"]["username"], "carol", "1.{minor}: {c}");
        assert_eq!(c["status"]["userInfo"]["groups"], json!(["dev", "qa", "system:authenticated"]), "1.{minor}: {c}");
        let a = who(&alice);
        assert_eq!((&a["status"]["userInfo"]["username"], &a["status"]["userInfo"]["uid"]), (&json!(ALICE), &json!("1001")), "1.{minor}: {a}");
        assert_eq!(a["status"]["userInfo"]["groups"], json!(["dev", "qa", "system:authenticated"]), "1.{minor}: {a}");
        let admin: serde_json::Value = serde_json::from_str(s.kubectl(minor, &["auth", "whoami", "-o", "json"]).ok()).unwrap();
        assert_eq!(admin["status"]["userInfo"]["groups"], json!(["system:masters", "system:authenticated"]), "1.{minor}: {admin}");
        // The certificate's groups are its RBAC groups.
        assert_can_i(&kubectl_as(&s, &carol, minor, &["auth", "can-i", "list", "pods"]), true, "carol list pods");
        assert_can_i(&kubectl_as(&s, &carol, minor, &["auth", "can-i", "delete", "pods"]), false, "carol delete pods");
        let out = kubectl_as(&s, &carol, minor, &["get", "secrets"]);
        assert!(out.stderr.contains(r#"secrets is forbidden: User "carol" cannot list resource "secrets" in API group "" in the namespace "default""#), "1.{minor}: {out:?}");
    }
}
