//! ServiceAccounts as kube-apiserver and kube-controller-manager do them,
//! through real kubectl (1.33 and 1.27): `kubectl create token`, the
//! token's user (`auth whoami`) and what RBAC grants it, bound and expired
//! tokens refused, TokenReview, the OpenID JWKS verifying a minted token,
//! the `default` ServiceAccount and `kube-root-ca.crt` in new namespaces,
//! and the ServiceAccount admission plugin on Pods.

use serde_json::{json, Value};

use crate::common::{eventually, Out, Server};
use crate::rbac::{data, kubectl_as, token_kubeconfig};

const SA: &str = "system:serviceaccount:default:default";
const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
/// kubectl's words for a 401 (newer ones quote client-go's discovery error).
const UNAUTHORIZED: [&str; 2] =
    ["error: You must be logged in to the server (Unauthorized)", "error: You must be logged in to the server (the server has asked for the client to provide credentials)"];

fn wait_default_sa(s: &Server, ns: &str) -> String {
    eventually(&format!("default ServiceAccount in {ns}"), || {
        let o = s.kubectl(33, &["get", "sa", "default", "-n", ns, "-o", "jsonpath={.metadata.uid}"]);
        (o.code == 0 && !o.stdout.is_empty()).then(|| o.stdout.clone())
    })
}

#[track_caller]
fn assert_unauthorized(out: &Out, what: &str) {
    assert_eq!(out.code, 1, "{what}: {out:?}");
    assert!(UNAUTHORIZED.iter().any(|w| out.stderr.contains(w)), "{what}: {out:?}");
}

/// A server with RBAC whose signing key the test holds (`sa.key`, PKCS#8
/// EC P-256), and the key's PEM.
fn rbac_server_with_key() -> (Server, String, tempfile::TempDir) {
    let keys = tempfile::tempdir().unwrap();
    let pem = rcgen::KeyPair::generate().unwrap().serialize_pem();
    let file = keys.path().join("sa.key");
    std::fs::write(&file, &pem).unwrap();
    let s = Server::start_with(&["--authorization-mode=RBAC".to_string(), format!("--service-account-signing-key-file={}", file.display())]);
    (s, pem, keys)
}

#[test]
fn service_account_tokens_authenticate_and_get_what_rbac_grants() {
    let (s, pem, _keys) = rbac_server_with_key();
    s.kubectl(33, &["apply", "-f", &data("rbac-pod-reader.yaml")]).ok();
    let uid = wait_default_sa(&s, "default");
    for minor in [33, 27] {
        let token = s.kubectl(minor, &["create", "token", "default", "--duration=10m"]).ok().trim().to_string();
        let cfg = token_kubeconfig(&s, &format!("sa-{minor}"), &token);
        // Who am I: the ServiceAccount's user and groups.
        let who = kubectl_as(&s, &cfg, minor, &["auth", "whoami", "-o", "json"]);
        let who: Value = serde_json::from_str(who.ok()).unwrap();
        let user = &who["status"]["userInfo"];
        assert_eq!(user["username"], SA, "{who}");
        assert_eq!(user["uid"], json!(uid));
        assert_eq!(user["groups"], json!(["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"]));
        assert!(user["extra"]["authentication.kubernetes.io/credential-id"][0].as_str().is_some_and(|c| c.starts_with("JTI=")), "{who}");
        // RBAC: the fixture lets it read pods, nothing lets it read secrets.
        kubectl_as(&s, &cfg, minor, &["get", "pods"]).ok();
        let secrets = kubectl_as(&s, &cfg, minor, &["get", "secrets"]);
        assert_eq!(secrets.code, 1, "{secrets:?}");
        let want = r#"Error from server (Forbidden): secrets is forbidden: User "system:serviceaccount:default:default" cannot list resource "secrets" in API group "" in the namespace "default""#;
        assert!(secrets.stderr.contains(want), "{secrets:?}");

        // TokenReview answers from the server's authenticators.
        let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}).to_string();
        let answer = s.kubectl_stdin(minor, &["create", "-f", "-", "-o", "yaml"], Some(&review));
        assert!(answer.ok().contains("authenticated: true"), "{answer:?}");
        assert!(answer.ok().contains(&format!("username: {SA}")), "{answer:?}");
        let bad = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": format!("{token}x")}}).to_string();
        let answer = s.kubectl_stdin(minor, &["create", "-f", "-", "-o", "json"], Some(&bad));
        let answer: Value = serde_json::from_str(answer.ok()).unwrap();
        assert_eq!(answer["status"]["authenticated"], Value::Null, "{answer}");
        assert!(answer["status"]["error"].as_str().is_some_and(|e| !e.is_empty()), "{answer}");

        // A token bound to a Pod dies with the Pod.
        let pod = format!("bound-{minor}");
        s.kubectl(minor, &["run", &pod, "--image=nginx", "--restart=Never"]).ok();
        let bound = s.kubectl(minor, &["create", "token", "default", "--bound-object-kind", "Pod", "--bound-object-name", &pod]).ok().trim().to_string();
        let bound_cfg = token_kubeconfig(&s, &format!("bound-{minor}"), &bound);
        let who = kubectl_as(&s, &bound_cfg, minor, &["auth", "whoami", "-o", "json"]);
        let who: Value = serde_json::from_str(who.ok()).unwrap();
        assert_eq!(who["status"]["userInfo"]["extra"]["authentication.kubernetes.io/pod-name"], json!([pod]), "{who}");
        s.kubectl(minor, &["delete", "pod", &pod, "--grace-period=0", "--force"]);
        eventually("pod gone", || (s.kubectl(minor, &["get", "pod", &pod]).code == 1).then_some(()));
        assert_unauthorized(&kubectl_as(&s, &bound_cfg, minor, &["get", "pods"]), "token of a deleted pod");

        // Too short a duration is kube's validation error.
        let short = s.kubectl(minor, &["create", "token", "default", "--duration=1m"]);
        assert_eq!(short.code, 1, "{short:?}");
        assert!(short.stderr.contains("spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes"), "{short:?}");
    }

    // An expired token, signed with the server's own key: 401.
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    let claims = json!({
        "iss": ISSUER, "aud": [ISSUER], "sub": SA, "iat": now - 7200, "nbf": now - 7200, "exp": now - 3600,
        "kubernetes.io": {"namespace": "default", "serviceaccount": {"name": "default", "uid": uid}},
    });
    let key = jsonwebtoken::EncodingKey::from_ec_pem(pem.as_bytes()).unwrap();
    let expired = jsonwebtoken::encode(&jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256), &claims, &key).unwrap();
    let mut fresh_claims = claims.clone();
    fresh_claims["exp"] = json!(now + 600);
    let fresh = jsonwebtoken::encode(&jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256), &fresh_claims, &key).unwrap();
    for minor in [33, 27] {
        assert_unauthorized(&kubectl_as(&s, &token_kubeconfig(&s, "expired", &expired), minor, &["get", "pods"]), "expired token");
        // The same claims unexpired pass: the expiry is what was refused.
        kubectl_as(&s, &token_kubeconfig(&s, "fresh", &fresh), minor, &["get", "pods"]).ok();
    }

    // The served JWKS verifies a minted token.
    let token = s.kubectl(33, &["create", "token", "default"]).ok().trim().to_string();
    let jwks: jsonwebtoken::jwk::JwkSet = serde_json::from_str(s.kubectl(33, &["get", "--raw", "/openid/v1/jwks"]).ok()).unwrap();
    let kid = jsonwebtoken::decode_header(&token).unwrap().kid.unwrap();
    let jwk = jwks.find(&kid).unwrap_or_else(|| panic!("kid {kid} not served: {jwks:?}"));
    let mut v = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::ES256);
    v.set_audience(&[ISSUER]);
    v.set_issuer(&[ISSUER]);
    let verified = jsonwebtoken::decode::<Value>(&token, &jsonwebtoken::DecodingKey::from_jwk(jwk).unwrap(), &v).unwrap();
    assert_eq!(verified.claims["sub"], SA);
    assert_eq!(verified.claims["kubernetes.io"]["serviceaccount"]["uid"], json!(uid));
    let discovery: Value = serde_json::from_str(s.kubectl(33, &["get", "--raw", "/.well-known/openid-configuration"]).ok()).unwrap();
    assert_eq!(
        discovery,
        json!({"issuer": ISSUER, "jwks_uri": format!("{ISSUER}/openid/v1/jwks"), "response_types_supported": ["id_token"], "subject_types_supported": ["public"], "id_token_signing_alg_values_supported": ["ES256"]})
    );
    // The ServiceAccount's own token may read them (system:service-account-issuer-discovery).
    let cfg = token_kubeconfig(&s, "discovery", &token);
    kubectl_as(&s, &cfg, 33, &["get", "--raw", "/openid/v1/jwks"]).ok();
}

#[test]
fn namespaces_get_their_service_account_and_root_ca_and_pods_their_token() {
    let s = Server::start();
    let ca = std::fs::read_to_string(s.ca()).unwrap();
    for minor in [33, 27] {
        let ns = format!("team-{minor}");
        s.kubectl(minor, &["create", "namespace", &ns]).ok();
        wait_default_sa(&s, &ns);
        let got = eventually("kube-root-ca.crt", || {
            let o = s.kubectl(minor, &["get", "cm", "kube-root-ca.crt", "-n", &ns, "-o", "json"]);
            (o.code == 0).then(|| serde_json::from_str::<Value>(&o.stdout).unwrap())
        });
        assert_eq!(got["data"]["ca.crt"], json!(ca));
        // Deleted, they come back.
        s.kubectl(minor, &["delete", "sa", "default", "-n", &ns]).ok();
        s.kubectl(minor, &["delete", "cm", "kube-root-ca.crt", "-n", &ns]).ok();
        wait_default_sa(&s, &ns);
        eventually("kube-root-ca.crt again", || (s.kubectl(minor, &["get", "cm", "kube-root-ca.crt", "-n", &ns]).code == 0).then_some(()));

        // A pod without a ServiceAccount gets `default` and the token volume.
        s.kubectl(minor, &["run", "web", "-n", &ns, "--image=nginx", "--restart=Never"]).ok();
        let pod: Value = serde_json::from_str(s.kubectl(minor, &["get", "pod", "web", "-n", &ns, "-o", "json"]).ok()).unwrap();
        let spec = &pod["spec"];
        assert_eq!(spec["serviceAccountName"], "default");
        let vol = spec["volumes"].as_array().unwrap().iter().find(|v| v["name"].as_str().unwrap().starts_with("kube-api-access-")).expect("projected volume");
        let sources = &vol["projected"]["sources"];
        assert_eq!(sources[0], json!({"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}));
        assert_eq!(sources[1], json!({"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}));
        assert_eq!(sources[2]["downwardAPI"]["items"][0]["fieldRef"]["fieldPath"], "metadata.namespace");
        assert_eq!(spec["containers"][0]["volumeMounts"][0], json!({"name": vol["name"], "readOnly": true, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}));

        // Opting out leaves the pod alone; a missing account is refused.
        s.kubectl(minor, &["run", "quiet", "-n", &ns, "--image=nginx", "--restart=Never", "--overrides", r#"{"spec":{"automountServiceAccountToken":false}}"#]).ok();
        let quiet = s.kubectl(minor, &["get", "pod", "quiet", "-n", &ns, "-o", "jsonpath={.spec.volumes}"]);
        assert_eq!(quiet.ok(), "");
        let missing = s.kubectl(minor, &["run", "lost", "-n", &ns, "--image=nginx", "--restart=Never", "--overrides", r#"{"spec":{"serviceAccountName":"ghost"}}"#]);
        assert_eq!(missing.code, 1, "{missing:?}");
        let want = format!(r#"Error from server (Forbidden): pods "lost" is forbidden: error looking up service account {ns}/ghost: serviceaccount "ghost" not found"#);
        assert!(missing.stderr.contains(&want), "{missing:?}");

        // Out of the box (a generated key) tokens work.
        let token = s.kubectl(minor, &["create", "token", "default", "-n", &ns]).ok().trim().to_string();
        let who = kubectl_as(&s, &token_kubeconfig(&s, &format!("t{minor}"), &token), minor, &["auth", "whoami"]);
        assert!(who.ok().contains(&format!("system:serviceaccount:{ns}:default")), "{who:?}");
    }
    assert!(s.dir.path().join("pki/sa.key").exists());

    // A legacy token Secret is filled and its token authenticates.
    let secret = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: legacy\n  annotations:\n    kubernetes.io/service-account.name: default\ntype: kubernetes.io/service-account-token\n";
    s.kubectl_stdin(33, &["create", "-f", "-"], Some(secret)).ok();
    let token = eventually("legacy token", || {
        let o = s.kubectl(33, &["get", "secret", "legacy", "-o", "json"]);
        let v: Value = serde_json::from_str(&o.stdout).ok()?;
        let t = v["data"]["token"].as_str()?.to_string();
        assert!(v["data"]["ca.crt"].is_string() && v["data"]["namespace"].is_string(), "{v}");
        Some(t)
    });
    use base64::Engine as _;
    let token = String::from_utf8(base64::engine::general_purpose::STANDARD.decode(token).unwrap()).unwrap();
    let cfg = token_kubeconfig(&s, "legacy", &token);
    assert!(kubectl_as(&s, &cfg, 33, &["auth", "whoami"]).ok().contains(SA));
    s.kubectl(33, &["delete", "secret", "legacy"]).ok();
    assert_unauthorized(&kubectl_as(&s, &cfg, 33, &["get", "pods"]), "legacy token of a deleted secret");
}
