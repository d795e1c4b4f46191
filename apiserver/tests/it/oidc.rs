//! Authenticators and authorizers that ask other servers, through real
//! kubectl (1.33 and 1.27): OIDC issuers (`--oidc-*` flags and
//! `--authentication-config`), the token webhook and the authorization
//! webhook.
//!
//! The test is the other server: it runs HTTPS servers in-process (tokio,
//! hyper, rustls, certificates from rcgen), an OIDC issuer serving its
//! discovery document and JWKS and signing RS256 and ES256 tokens with
//! jsonwebtoken, and webhooks answering TokenReviews and
//! SubjectAccessReviews while counting the calls.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{json, Value};

use crate::common::{free_port, kubectl_path, Out, Server};

pub(crate) use crate::common::https::{HttpsServer, Pki};

/// A key the issuer signs with, and its public JWK.
struct SigningKey {
    kid: String,
    alg: Algorithm,
    key: EncodingKey,
    jwk: Value,
}

impl SigningKey {
    fn new(kid: &str, alg: Algorithm) -> SigningKey {
        let rcgen_alg = if alg == Algorithm::RS256 { &rcgen::PKCS_RSA_SHA256 } else { &rcgen::PKCS_ECDSA_P256_SHA256 };
        let pair = rcgen::KeyPair::generate_for(rcgen_alg).unwrap();
        let pem = pair.serialize_pem();
        let key = if alg == Algorithm::RS256 { EncodingKey::from_rsa_pem(pem.as_bytes()) } else { EncodingKey::from_ec_pem(pem.as_bytes()) }.unwrap();
        let mut jwk = jsonwebtoken::jwk::Jwk::from_encoding_key(&key, alg).unwrap();
        jwk.common.key_id = Some(kid.to_string());
        SigningKey { kid: kid.into(), alg, key, jwk: serde_json::to_value(&jwk).unwrap() }
    }

    fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(self.alg);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &self.key).unwrap()
    }
}

/// An OIDC issuer: discovery at `/.well-known/openid-configuration`, the
/// published keys at `/keys`.
struct Issuer {
    server: HttpsServer,
    published: Arc<Mutex<Vec<Value>>>,
    key_fetches: Arc<AtomicUsize>,
}

impl Issuer {
    fn start(port: u16, pki: Arc<Pki>, keys: &[&SigningKey]) -> Issuer {
        let published = Arc::new(Mutex::new(keys.iter().map(|k| k.jwk.clone()).collect::<Vec<_>>()));
        let key_fetches = Arc::new(AtomicUsize::new(0));
        let url = Arc::new(Mutex::new(String::new()));
        let (p, f, u) = (published.clone(), key_fetches.clone(), url.clone());
        let server = HttpsServer::start(
            port,
            pki,
            Arc::new(move |_method: &str, path: &str, _auth: &str, _body: &[u8]| {
                let issuer = u.lock().unwrap().clone();
                match path {
                    "/.well-known/openid-configuration" => (200, json!({"issuer": issuer, "jwks_uri": format!("{issuer}/keys"), "id_token_signing_alg_values_supported": ["RS256", "ES256"]})),
                    "/keys" => {
                        f.fetch_add(1, Ordering::SeqCst);
                        (200, json!({"keys": p.lock().unwrap().clone()}))
                    }
                    _ => (404, json!({"error": "not found"})),
                }
            }),
        );
        *url.lock().unwrap() = server.url.clone();
        Issuer { server, published, key_fetches }
    }

    fn url(&self) -> &str {
        &self.server.url
    }

    /// Publishes exactly `keys` from now on.
    fn publish(&self, keys: &[&SigningKey]) {
        *self.published.lock().unwrap() = keys.iter().map(|k| k.jwk.clone()).collect();
    }

    /// Claims of a valid token for `sub` in `groups`, audience `kube`.
    fn claims(&self, sub: &str, groups: &[&str]) -> Value {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
        json!({"iss": self.url(), "aud": "kube", "sub": sub, "iat": now, "exp": now + 600, "groups": groups, "hd": "example.com"})
    }
}

/// A kubeconfig for `token` against `s`.
fn token_kubeconfig(s: &Server, name: &str, token: &str) -> PathBuf {
    let path = s.dir.path().join(format!("{name}.kubeconfig"));
    let cfg = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\n    certificate-authority: {}\nusers:\n- name: u\n  user:\n    token: {token}\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n    namespace: default\ncurrent-context: x\n",
        s.url,
        s.ca().display()
    );
    std::fs::write(&path, cfg).unwrap();
    path
}

/// Runs `kubectl.1.<minor>` with the kubeconfig of `token`.
fn kubectl_token(s: &Server, token: &str, minor: u32, args: &[&str]) -> Out {
    let kubeconfig = token_kubeconfig(s, &format!("t{}", rand_suffix()), token);
    let o =
        Command::new(kubectl_path(minor)).arg("--kubeconfig").arg(&kubeconfig).arg("--cache-dir").arg(s.dir.path().join(format!("kubectl-cache-{minor}"))).args(args).output().expect("run kubectl");
    Out { code: o.status.code().unwrap_or(-1), stdout: String::from_utf8_lossy(&o.stdout).into_owned(), stderr: String::from_utf8_lossy(&o.stderr).into_owned() }
}

fn rand_suffix() -> usize {
    static N: AtomicUsize = AtomicUsize::new(0);
    N.fetch_add(1, Ordering::SeqCst)
}

/// `kubectl auth whoami -o json`: (username, groups).
#[track_caller]
fn whoami(s: &Server, token: &str, minor: u32) -> (String, Vec<String>) {
    let out = kubectl_token(s, token, minor, &["auth", "whoami", "-o", "json"]);
    let v: Value = serde_json::from_str(out.ok()).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    let u = &v["status"]["userInfo"];
    (u["username"].as_str().unwrap_or_default().to_string(), u["groups"].as_array().map(|a| a.iter().filter_map(Value::as_str).map(String::from).collect()).unwrap_or_default())
}

/// kubectl's words for a 401 (newer ones quote client-go's discovery error).
#[track_caller]
fn assert_unauthorized(out: &Out, what: &str) {
    assert_eq!(out.code, 1, "{what}: {out:?}");
    let said = ["error: You must be logged in to the server (Unauthorized)", "error: You must be logged in to the server (the server has asked for the client to provide credentials)"];
    assert!(said.iter().any(|w| out.stderr.contains(w)), "{what}: {out:?}");
}

#[track_caller]
fn assert_can_i(out: &Out, want: bool, what: &str) {
    let answer = if want { "yes" } else { "no" };
    assert_eq!((out.stdout.trim(), out.code), (answer, if want { 0 } else { 1 }), "{what}: {out:?}");
}

/// `--oidc-*`: RS256 and ES256 tokens of the issuer authenticate with the
/// default `<issuer>#` prefix and the groups prefix; RBAC grants the OIDC
/// user what a binding says; a wrong audience, an expired token, a missing
/// required claim and an unknown key are 401; a rotated key works without
/// a restart.
#[test]
fn oidc_flags_authenticate_issuer_tokens() {
    let rsa = SigningKey::new("rsa-1", Algorithm::RS256);
    let ec = SigningKey::new("ec-1", Algorithm::ES256);
    let issuer = Issuer::start(0, Arc::new(Pki::new()), &[&rsa, &ec]);
    let s = Server::start_with(&[
        "--authorization-mode=RBAC".into(),
        format!("--oidc-issuer-url={}", issuer.url()),
        "--oidc-client-id=kube".into(),
        "--oidc-groups-claim=groups".into(),
        "--oidc-groups-prefix=oidc:".into(),
        "--oidc-required-claim=hd=example.com".into(),
        "--oidc-signing-algs=RS256,ES256".into(),
        format!("--oidc-ca-file={}", issuer.server.pki.ca_file.display()),
    ]);
    let jane = format!("{}#jane", issuer.url());
    let jane_token = rsa.sign(&issuer.claims("jane", &["dev"]));
    for minor in [33, 27] {
        assert_eq!(whoami(&s, &jane_token, minor), (jane.clone(), vec!["oidc:dev".to_string(), "system:authenticated".into()]), "kubectl 1.{minor}");
    }
    let ec_token = ec.sign(&issuer.claims("ec-user", &[]));
    assert_eq!(whoami(&s, &ec_token, 33).0, format!("{}#ec-user", issuer.url()));

    // RBAC: a binding to the prefixed user name.
    s.kubectl(33, &["create", "clusterrole", "pod-lister", "--verb=list,get", "--resource=pods"]).ok();
    s.kubectl(33, &["create", "rolebinding", "jane-lists-pods", "--clusterrole=pod-lister", &format!("--user={jane}"), "-n", "default"]).ok();
    for minor in [33, 27] {
        assert_can_i(&kubectl_token(&s, &jane_token, minor, &["auth", "can-i", "list", "pods"]), true, "list pods");
        assert_can_i(&kubectl_token(&s, &jane_token, minor, &["auth", "can-i", "delete", "pods"]), false, "delete pods");
        assert_eq!(kubectl_token(&s, &jane_token, minor, &["get", "pods"]).code, 0);
        let denied = kubectl_token(&s, &jane_token, minor, &["get", "pods", "-n", "kube-system"]);
        assert!(denied.stderr.contains(&format!(r#"User "{jane}" cannot list resource "pods" in API group "" in the namespace "kube-system""#)), "{denied:?}");
    }

    // Tokens the issuer's name is on but that must not pass.
    let stranger = SigningKey::new("rsa-unknown", Algorithm::RS256);
    let mut wrong_aud = issuer.claims("jane", &[]);
    wrong_aud["aud"] = json!("someone-else");
    let mut expired = issuer.claims("jane", &[]);
    expired["exp"] = json!(expired["iat"].as_u64().unwrap() - 60);
    let mut no_hd = issuer.claims("jane", &[]);
    no_hd.as_object_mut().unwrap().remove("hd");
    let bad: &[(&str, String)] = &[
        ("wrong audience", rsa.sign(&wrong_aud)),
        ("expired", rsa.sign(&expired)),
        ("missing required claim", rsa.sign(&no_hd)),
        ("unknown key", stranger.sign(&issuer.claims("jane", &[]))),
        ("not a JWT", "opaque-token".into()),
    ];
    for (what, token) in bad {
        for minor in [33, 27] {
            assert_unauthorized(&kubectl_token(&s, token, minor, &["get", "pods"]), what);
        }
    }

    // Rotation: the issuer now publishes only a new key; a token signed by
    // it works once the refresh interval since the last fetch has passed.
    let rotated = SigningKey::new("rsa-2", Algorithm::RS256);
    issuer.publish(&[&rotated]);
    std::thread::sleep(Duration::from_secs(6));
    let fetches = issuer.key_fetches.load(Ordering::SeqCst);
    let new_token = rotated.sign(&issuer.claims("jane", &["dev"]));
    assert_eq!(whoami(&s, &new_token, 33).0, jane);
    assert_eq!(issuer.key_fetches.load(Ordering::SeqCst), fetches + 1, "one fetch for the new kid");
    // Known kids do not fetch again.
    assert_eq!(whoami(&s, &new_token, 27).0, jane);
    assert_eq!(issuer.key_fetches.load(Ordering::SeqCst), fetches + 1);
}

/// The issuer being down does not hold up the start; its tokens are 401
/// until it is up, then they work (keys fetched on demand).
#[test]
fn oidc_issuer_down_at_start() {
    let port = free_port();
    let url = format!("https://127.0.0.1:{port}");
    let pki = Arc::new(Pki::new());
    let s = Server::start_with(&[format!("--oidc-issuer-url={url}"), "--oidc-client-id=kube".into(), "--oidc-username-prefix=-".into(), format!("--oidc-ca-file={}", pki.ca_file.display())]);
    let rsa = SigningKey::new("rsa-1", Algorithm::RS256);
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let token = rsa.sign(&json!({"iss": url, "aud": "kube", "sub": "jane", "exp": now + 600}));
    assert_unauthorized(&kubectl_token(&s, &token, 33, &["get", "pods"]), "issuer down");
    let issuer = Issuer::start(port, pki, &[&rsa]);
    assert_eq!(issuer.url(), url);
    std::thread::sleep(Duration::from_secs(6));
    assert_eq!(whoami(&s, &token, 33).0, "jane");
}

/// Runs the apiserver binary with `args`, expecting it to refuse to start;
/// returns its stderr.
fn start_fails(args: &[String]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_apiserver"))
        .args(["--secure-port", "0", "--data-dir"])
        .arg(dir.path())
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    for _ in 0..600 {
        if child.try_wait().unwrap().is_some() {
            let out = child.wait_with_output().unwrap();
            assert!(!out.status.success());
            return String::from_utf8_lossy(&out.stderr).into_owned();
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    panic!("apiserver {args:?} did not refuse to start");
}

/// `--authentication-config` (v1beta1): the `jwt:` entry's claim mappings
/// (email as the user name without a prefix, prefixed groups), its
/// validation rule, kube's `email_verified` rule; the file and `--oidc-*`
/// flags together, and CEL, are refused at start.
#[test]
fn authentication_config_file_maps_claims() {
    let rsa = SigningKey::new("rsa-1", Algorithm::RS256);
    let issuer = Issuer::start(0, Arc::new(Pki::new()), &[&rsa]);
    let ca: String = issuer.server.pki.ca_pem.lines().map(|l| format!("      {l}\n")).collect();
    let config = format!(
        "apiVersion: apiserver.config.k8s.io/v1beta1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: {}
    audiences: [kube, other]
    audienceMatchPolicy: MatchAny
    certificateAuthority: |
{ca}  claimMappings:
    username:
      claim: email
      prefix: \"\"
    groups:
      claim: groups
      prefix: \"idp:\"
    uid:
      claim: sub
  claimValidationRules:
  - claim: hd
    requiredValue: example.com
",
        issuer.url()
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("authn.yaml");
    std::fs::write(&file, &config).unwrap();
    let s = Server::start_with(&["--authorization-mode=RBAC".into(), format!("--authentication-config={}", file.display())]);
    let claims = |verified: Value, hd: &str| {
        let mut c = issuer.claims("1234", &["dev", "ops"]);
        c["email"] = json!("jane@example.com");
        c["email_verified"] = verified;
        c["hd"] = json!(hd);
        c
    };
    let good = rsa.sign(&claims(json!(true), "example.com"));
    for minor in [33, 27] {
        assert_eq!(whoami(&s, &good, minor), ("jane@example.com".to_string(), vec!["idp:dev".to_string(), "idp:ops".into(), "system:authenticated".into()]), "kubectl 1.{minor}");
    }
    let uid = kubectl_token(&s, &good, 33, &["auth", "whoami", "-o", "jsonpath={.status.userInfo.uid}"]);
    assert_eq!(uid.ok(), "1234");
    assert_unauthorized(&kubectl_token(&s, &rsa.sign(&claims(json!(false), "example.com")), 33, &["get", "pods"]), "email not verified");
    assert_unauthorized(&kubectl_token(&s, &rsa.sign(&claims(json!(true), "evil.com")), 27, &["get", "pods"]), "claim validation rule");

    let err = start_fails(&[format!("--authentication-config={}", file.display()), "--oidc-client-id=kube".into()]);
    assert!(err.contains("authentication-config file and oidc-* flags are mutually exclusive"), "{err}");
    let cel = dir.path().join("cel.yaml");
    std::fs::write(&cel, config.replace("      claim: email\n", "      expression: claims.email\n")).unwrap();
    let err = start_fails(&[format!("--authentication-config={}", cel.display())]);
    assert!(err.contains("jwt[0].claimMappings.username.expression: Unsupported value: CEL expressions are not supported"), "{err}");
}

/// A kubeconfig naming the webhook at `url` with the test CA.
pub(crate) fn webhook_kubeconfig(dir: &Path, name: &str, url: &str, ca: &Path) -> PathBuf {
    let path = dir.join(format!("{name}.kubeconfig"));
    let cfg = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: hook\n  cluster:\n    server: {url}\n    certificate-authority: {}\nusers:\n- name: apiserver\n  user:\n    token: apiserver-secret\ncontexts:\n- name: hook\n  context:\n    cluster: hook\n    user: apiserver\ncurrent-context: hook\n",
        ca.display()
    );
    std::fs::write(&path, cfg).unwrap();
    path
}

/// The token webhook authenticates the tokens it accepts and its answers
/// (yes and no) are cached; the authorization webhook's allow, deny and
/// no-opinion show in `kubectl auth can-i` and in 403s with its reason,
/// and its allowed answers are cached.
#[test]
fn webhooks_authenticate_and_authorize() {
    let pki = Arc::new(Pki::new());
    let calls: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let c = calls.clone();
    let hook = HttpsServer::start(
        0,
        pki.clone(),
        Arc::new(move |method: &str, path: &str, auth: &str, body: &[u8]| {
            // The kubeconfig's user token comes with every review.
            if auth != "Bearer apiserver-secret" {
                return (401, json!({"kind": "Status", "code": 401}));
            }
            let review: Value = serde_json::from_slice(body).unwrap_or_default();
            let spec = &review["spec"];
            match (method, path) {
                ("POST", "/authenticate") => {
                    let token = spec["token"].as_str().unwrap_or_default().to_string();
                    *c.lock().unwrap().entry(format!("authn:{token}")).or_default() += 1;
                    let status =
                        if token == "good-token" { json!({"authenticated": true, "user": {"username": "hook-user", "uid": "42", "groups": ["hooked"]}}) } else { json!({"authenticated": false}) };
                    (200, json!({"apiVersion": review["apiVersion"], "kind": "TokenReview", "status": status}))
                }
                ("POST", "/authorize") => {
                    let ra = &spec["resourceAttributes"];
                    let (verb, resource) = (ra["verb"].as_str().unwrap_or_default(), ra["resource"].as_str().unwrap_or_default());
                    let key = format!("authz:{}:{verb}:{resource}:{}", spec["user"].as_str().unwrap_or_default(), ra["version"].as_str().unwrap_or_default());
                    *c.lock().unwrap().entry(key).or_default() += 1;
                    let status = match (spec["user"].as_str(), verb, resource) {
                        (Some("hook-user"), "list" | "get", "pods") => json!({"allowed": true, "reason": "hook allows reading pods"}),
                        (Some("hook-user"), "delete", "pods") => json!({"allowed": false, "denied": true, "reason": "hook forbids deleting pods"}),
                        _ => json!({"allowed": false, "reason": "hook has no opinion"}),
                    };
                    (200, json!({"apiVersion": review["apiVersion"], "kind": "SubjectAccessReview", "status": status}))
                }
                _ => (404, json!({})),
            }
        }),
    );
    let dir = tempfile::tempdir().unwrap();
    let authn = webhook_kubeconfig(dir.path(), "authn", &format!("{}/authenticate", hook.url), &pki.ca_file);
    let authz = webhook_kubeconfig(dir.path(), "authz", &format!("{}/authorize", hook.url), &pki.ca_file);
    let s = Server::start_with(&[
        "--authorization-mode=RBAC,Webhook".into(),
        format!("--authorization-webhook-config-file={}", authz.display()),
        format!("--authentication-token-webhook-config-file={}", authn.display()),
    ]);
    let count = |k: &str| calls.lock().unwrap().get(k).copied().unwrap_or(0);

    for minor in [33, 27] {
        assert_eq!(whoami(&s, "good-token", minor), ("hook-user".to_string(), vec!["hooked".to_string(), "system:authenticated".into()]), "kubectl 1.{minor}");
        assert_unauthorized(&kubectl_token(&s, "bad-token", minor, &["get", "pods"]), "webhook says no");
    }
    // Every request above after the first of each token came from the cache.
    assert_eq!((count("authn:good-token"), count("authn:bad-token")), (1, 1), "{calls:?}");

    for minor in [33, 27] {
        let can_i = |args: &[&str]| {
            let mut all = vec!["auth", "can-i"];
            all.extend_from_slice(args);
            kubectl_token(&s, "good-token", minor, &all)
        };
        assert_can_i(&can_i(&["list", "pods"]), true, "webhook allows");
        // kubectl prints the reason after "no".
        let out = can_i(&["delete", "pods"]);
        assert_eq!((out.stdout.trim(), out.code), ("no - hook forbids deleting pods", 1), "webhook denies: {out:?}");
        let out = can_i(&["list", "configmaps"]);
        assert_eq!((out.stdout.trim(), out.code), ("no - hook has no opinion", 1), "nobody has an opinion: {out:?}");
        // RBAC still decides first: system:basic-user may review itself.
        assert_can_i(&can_i(&["create", "selfsubjectaccessreviews.authorization.k8s.io"]), true, "RBAC allows");

        assert_eq!(kubectl_token(&s, "good-token", minor, &["get", "pods"]).code, 0);
        let denied = kubectl_token(&s, "good-token", minor, &["delete", "pod", "x"]);
        assert!(
            denied.stderr.contains(r#"pods "x" is forbidden: User "hook-user" cannot delete resource "pods" in API group "" in the namespace "default": hook forbids deleting pods"#),
            "{denied:?}"
        );
        let none = kubectl_token(&s, "good-token", minor, &["get", "configmaps"]);
        assert!(none.stderr.contains(r#"configmaps is forbidden: User "hook-user" cannot list resource "configmaps" in API group "" in the namespace "default": hook has no opinion"#), "{none:?}");
    }
    // Allowed answers are cached for 5m, denied ones for 30s: one call each
    // for the real requests, whatever kubectl version sent them.
    assert_eq!(count("authz:hook-user:list:pods:v1"), 1, "{calls:?}");
    assert_eq!(count("authz:hook-user:delete:pods:v1"), 1, "{calls:?}");
    assert_eq!(count("authn:good-token"), 1, "{calls:?}");
}
