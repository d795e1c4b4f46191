//! ServiceAccount tokens: signed JWTs that name a ServiceAccount (kube
//! `pkg/serviceaccount`: `jwt.go`, `claims.go`, `legacy.go`).
//!
//! [`Tokens`] both issues tokens (TokenRequest, the legacy tokens
//! controller) and authenticates them. Two kinds exist, told apart by the
//! issuer:
//!
//! - **bound** tokens (issuer: one of `--service-account-issuer`, the first
//!   one signs): `iss`, `sub`, `aud`, `exp`, `iat`, `nbf`, `jti` and a
//!   private `kubernetes.io` claim naming the namespace, the ServiceAccount
//!   (name, uid) and optionally the Pod, Secret or Node the token is bound
//!   to. Valid while unexpired (60 s of leeway on `exp`, `nbf` and `iat`,
//!   as go-jose), while the audience intersects the audiences asked for
//!   ([`Audiences`] in the request extensions, else `--api-audiences`), and
//!   while the ServiceAccount and the bound object still exist with the
//!   uids of the token;
//! - **legacy** tokens (issuer `kubernetes/serviceaccount`, claims
//!   `kubernetes.io/serviceaccount/*`, no expiry): valid while the
//!   ServiceAccount exists with its uid and the Secret of type
//!   `kubernetes.io/service-account-token` named in the token still holds
//!   exactly this token.
//!
//! A token whose issuer is not ours is not ours to judge (`Ok(None)`), so
//! other token authenticators get it. Live objects are read from the store
//! with a consistent read on every request (kube reads informers, with a
//! store read on a miss).
//!
//! Keys are PEM: private keys (PKCS#8 RSA or EC P-256/P-384, or PKCS#1
//! RSA) or public keys (`PUBLIC KEY`, or a certificate). Each key's id is
//! kube's: the base64url (unpadded) SHA-256 of its DER SubjectPublicKeyInfo;
//! tokens carry it as `kid` and `/openid/v1/jwks` serves it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use base64::Engine as _;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde_json::{json, Value};
use sha2::Digest as _;

use super::{bearer_token, Authenticator, Credentials, Error, Result, UserInfo, ALL_AUTHENTICATED};
use crate::storage::{keys, Storage};

/// The issuer of legacy Secret-based tokens (`serviceaccount.LegacyIssuer`).
pub const LEGACY_ISSUER: &str = "kubernetes/serviceaccount";
/// The issuer used when `--service-account-issuer` is not given (kubeadm's
/// default; kube-apiserver requires the flag).
pub const DEFAULT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
/// The Secret type of legacy tokens.
pub const SECRET_TYPE: &str = "kubernetes.io/service-account-token";
/// The annotation naming a legacy token Secret's ServiceAccount.
pub const SECRET_SA_NAME: &str = "kubernetes.io/service-account.name";
/// The annotation holding a legacy token Secret's ServiceAccount uid.
pub const SECRET_SA_UID: &str = "kubernetes.io/service-account.uid";
/// The group of every ServiceAccount (`serviceaccount.AllServiceAccountsGroup`).
pub const ALL_SERVICE_ACCOUNTS: &str = "system:serviceaccounts";
/// Clock skew allowed on `exp`, `nbf` and `iat` (go-jose's `DefaultLeeway`).
const LEEWAY_SECONDS: i64 = 60;
/// How long after its deletion began a bound Secret or Pod still
/// validates its tokens (kube's grace for objects being deleted).
const DELETION_GRACE_SECONDS: i64 = 60;

/// Extra keys kube puts on a ServiceAccount user.
pub mod extra {
    /// The bound Pod's name.
    pub const POD_NAME: &str = "authentication.kubernetes.io/pod-name";
    /// The bound Pod's uid.
    pub const POD_UID: &str = "authentication.kubernetes.io/pod-uid";
    /// The bound Node's name.
    pub const NODE_NAME: &str = "authentication.kubernetes.io/node-name";
    /// The bound Node's uid.
    pub const NODE_UID: &str = "authentication.kubernetes.io/node-uid";
    /// `JTI=<jti>` of the token.
    pub const CREDENTIAL_ID: &str = "authentication.kubernetes.io/credential-id";
}

/// The audiences a caller wants a token checked against (kube's
/// `authenticator.Audiences` in the request context); put in the request
/// extensions by TokenReview. Absent: the server's `--api-audiences`.
#[derive(Debug, Clone, Default)]
pub struct Audiences(pub Vec<String>);

/// One public key that verifies tokens.
#[derive(Clone)]
pub struct PublicKey {
    /// kube's key id.
    pub kid: String,
    /// `RS256`, `ES256` or `ES384`.
    pub alg: Algorithm,
    decoding: DecodingKey,
    /// The key as a JWK (`use`, `kty`, `kid`, `alg` and `n`/`e` or
    /// `crv`/`x`/`y`), as `/openid/v1/jwks` lists it.
    pub jwk: Value,
}

/// The key tokens are signed with.
#[derive(Clone)]
pub struct SigningKey {
    kid: String,
    alg: Algorithm,
    encoding: EncodingKey,
}

fn b64url(b: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b)
}

/// kube's key id of a DER SubjectPublicKeyInfo.
pub fn key_id(spki_der: &[u8]) -> String {
    b64url(&sha2::Sha256::digest(spki_der))
}

/// A public key from its DER SubjectPublicKeyInfo.
///
/// # Errors
/// Not an RSA or EC P-256/P-384 key.
pub fn public_key_from_spki(spki_der: &[u8]) -> std::result::Result<PublicKey, String> {
    use x509_parser::prelude::FromDer as _;
    use x509_parser::public_key::PublicKey as Parsed;
    let (_, spki) = x509_parser::x509::SubjectPublicKeyInfo::from_der(spki_der).map_err(|e| format!("not a public key: {e}"))?;
    let kid = key_id(spki_der);
    match spki.parsed().map_err(|e| format!("not a public key: {e}"))? {
        Parsed::RSA(rsa) => {
            let n = rsa.modulus.iter().skip_while(|b| **b == 0).copied().collect::<Vec<u8>>();
            let e = rsa.exponent.iter().skip_while(|b| **b == 0).copied().collect::<Vec<u8>>();
            let jwk = json!({"use": "sig", "kty": "RSA", "kid": kid, "alg": "RS256", "n": b64url(&n), "e": b64url(&e)});
            Ok(PublicKey { kid, alg: Algorithm::RS256, decoding: DecodingKey::from_rsa_raw_components(&n, &e), jwk })
        }
        Parsed::EC(point) => {
            let data = point.data();
            let (alg, crv, len) = match data.len() {
                65 => (Algorithm::ES256, "P-256", 32),
                97 => (Algorithm::ES384, "P-384", 48),
                _ => return Err("unsupported elliptic curve (want P-256 or P-384)".into()),
            };
            if data[0] != 4 {
                return Err("compressed elliptic curve points are not supported".into());
            }
            let (x, y) = (b64url(&data[1..1 + len]), b64url(&data[1 + len..]));
            let decoding = DecodingKey::from_ec_components(&x, &y).map_err(|e| e.to_string())?;
            let alg_name = if alg == Algorithm::ES256 { "ES256" } else { "ES384" };
            let jwk = json!({"use": "sig", "kty": "EC", "kid": kid, "crv": crv, "alg": alg_name, "x": x, "y": y});
            Ok(PublicKey { kid, alg, decoding, jwk })
        }
        _ => Err("unsupported key type (want RSA or ECDSA)".into()),
    }
}

/// Reads a private key: the signing key and its public half.
///
/// # Errors
/// Not PEM, not a supported private key.
pub fn signing_key_from_pem(pem: &str) -> std::result::Result<(SigningKey, PublicKey), String> {
    let pair = rcgen::KeyPair::from_pem(pem).map_err(|e| format!("no supported private key in it: {e}"))?;
    let public = public_key_from_spki(&rcgen::PublicKeyData::subject_public_key_info(&pair))?;
    let encoding = match public.alg {
        Algorithm::RS256 => EncodingKey::from_rsa_pem(pem.as_bytes()),
        _ => EncodingKey::from_ec_pem(pem.as_bytes()),
    }
    .map_err(|e| format!("cannot sign with it ({e}); EC keys must be PKCS#8 (`openssl pkcs8 -topk8 -nocrypt`)"))?;
    Ok((SigningKey { kid: public.kid.clone(), alg: public.alg, encoding }, public))
}

/// Reads every key in a PEM file that verifies tokens: public keys,
/// certificates' keys and private keys' public halves.
///
/// # Errors
/// Not PEM, or no supported key in it.
pub fn public_keys_from_pem(pem: &str) -> std::result::Result<Vec<PublicKey>, String> {
    use x509_parser::prelude::FromDer as _;
    let mut out = Vec::new();
    let blocks = pem_blocks(pem);
    for (label, block) in &blocks {
        match label.as_str() {
            "PUBLIC KEY" => out.push(public_key_from_spki(&base64_body(block)?)?),
            "CERTIFICATE" => {
                let der = base64_body(block)?;
                let (_, cert) = x509_parser::certificate::X509Certificate::from_der(&der).map_err(|e| format!("bad certificate: {e}"))?;
                out.push(public_key_from_spki(cert.public_key().raw)?);
            }
            l if l.ends_with("PRIVATE KEY") => {
                let text = format!("-----BEGIN {l}-----\n{block}\n-----END {l}-----\n");
                out.push(signing_key_from_pem(&text)?.1);
            }
            _ => {}
        }
    }
    if out.is_empty() {
        return Err("no public or private key in it".into());
    }
    Ok(out)
}

/// The (label, base64 body) of each PEM block.
fn pem_blocks(pem: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut current: Option<(String, String)> = None;
    for line in pem.lines().map(str::trim) {
        if let Some(label) = line.strip_prefix("-----BEGIN ").and_then(|l| l.strip_suffix("-----")) {
            current = Some((label.to_string(), String::new()));
        } else if line.starts_with("-----END ") {
            out.extend(current.take());
        } else if let Some((_, body)) = current.as_mut() {
            body.push_str(line);
        }
    }
    out
}

fn base64_body(body: &str) -> std::result::Result<Vec<u8>, String> {
    base64::engine::general_purpose::STANDARD.decode(body).map_err(|e| format!("bad PEM: {e}"))
}

/// The keys of the flags.
#[derive(Clone, Default)]
pub struct Keys {
    /// What signs new tokens; none when only verifying keys are given.
    pub signing: Option<SigningKey>,
    /// What verifies tokens (the signing key's public half among them).
    pub verifying: Vec<PublicKey>,
}

impl Keys {
    /// The keys of `--service-account-signing-key-file` and
    /// `--service-account-key-file`; with neither, the key in
    /// `<pki_dir>/sa.key`, generated (EC P-256) on first start, so every
    /// node that shares the PKI directory signs and verifies alike.
    ///
    /// # Errors
    /// An unreadable or unsupported key file, named with its flag.
    pub fn load(signing_file: Option<&Path>, key_files: &[PathBuf], pki_dir: &Path) -> anyhow::Result<Keys> {
        let read = |flag: &str, p: &Path| std::fs::read_to_string(p).map_err(|e| anyhow::anyhow!("{flag} {}: {e}", p.display()));
        let mut keys = Keys::default();
        let signing_file = match (signing_file, key_files.is_empty()) {
            (Some(f), _) => Some(f.to_path_buf()),
            (None, true) => Some(generated_key(pki_dir)?),
            (None, false) => None,
        };
        if let Some(f) = &signing_file {
            let (s, p) = signing_key_from_pem(&read("--service-account-signing-key-file", f)?).map_err(|e| anyhow::anyhow!("--service-account-signing-key-file {}: {e}", f.display()))?;
            keys.signing = Some(s);
            keys.verifying.push(p);
        }
        for f in key_files {
            for k in public_keys_from_pem(&read("--service-account-key-file", f)?).map_err(|e| anyhow::anyhow!("--service-account-key-file {}: {e}", f.display()))? {
                if !keys.verifying.iter().any(|v| v.kid == k.kid) {
                    keys.verifying.push(k);
                }
            }
        }
        Ok(keys)
    }
}

/// `<pki_dir>/sa.key`, made now if missing.
///
/// Nodes sharing the directory may start at once: the key is written whole
/// to a file of this process's own and then hard-linked into place, so a
/// node never reads a half-written `sa.key`, and the first link wins.
fn generated_key(pki_dir: &Path) -> anyhow::Result<PathBuf> {
    let path = pki_dir.join("sa.key");
    if path.exists() {
        return Ok(path);
    }
    std::fs::create_dir_all(pki_dir)?;
    let pem = rcgen::KeyPair::generate()?.serialize_pem();
    static STAGED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = STAGED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let staged = pki_dir.join(format!(".sa.key.{}.{n}", std::process::id()));
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        opts.mode(0o600);
    }
    let staged_write = opts.open(&staged).and_then(|mut f| {
        use std::io::Write as _;
        f.write_all(pem.as_bytes())?;
        f.sync_all()
    });
    if let Err(e) = staged_write {
        let _ = std::fs::remove_file(&staged);
        anyhow::bail!("write {}: {e}", staged.display());
    }
    let linked = std::fs::hard_link(&staged, &path);
    let _ = std::fs::remove_file(&staged);
    match linked {
        Ok(()) => Ok(path),
        // Another node sharing the directory made it first.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(path),
        Err(e) => anyhow::bail!("write {}: {e}", path.display()),
    }
}

/// How tokens are issued and accepted.
#[derive(Clone)]
pub struct Config {
    /// `--service-account-issuer`: the first signs, all are accepted.
    pub issuers: Vec<String>,
    /// `--api-audiences` (default: the issuers).
    pub api_audiences: Vec<String>,
    /// `--service-account-max-token-expiration`: longer requests are cut to it.
    pub max_expiration: Option<Duration>,
    /// The keys.
    pub keys: Keys,
}

/// What a bound token is bound to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundObject {
    /// `Pod`, `Secret` or `Node`.
    pub kind: String,
    /// Its name.
    pub name: String,
    /// Its uid.
    pub uid: String,
}

/// A token, with when it expires (seconds since the epoch).
#[derive(Debug, Clone)]
pub struct Issued {
    /// The JWT.
    pub token: String,
    /// Its `exp`.
    pub expires: i64,
}

/// Issues and authenticates ServiceAccount tokens (see the module doc).
pub struct Tokens {
    cfg: Config,
    storage: Arc<dyn Storage>,
}

fn now_secs() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}

impl Tokens {
    /// Tokens of `cfg`, checked against the objects in `storage`.
    pub fn new(cfg: Config, storage: Arc<dyn Storage>) -> Self {
        Tokens { cfg, storage }
    }

    /// The store bound objects are checked in.
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Whether tokens can be issued (a signing key is configured).
    pub fn can_issue(&self) -> bool {
        self.cfg.keys.signing.is_some()
    }

    fn sign(&self, claims: &Value) -> std::result::Result<String, String> {
        let key = self.cfg.keys.signing.as_ref().ok_or("no --service-account-signing-key-file: tokens cannot be issued")?;
        let mut header = Header::new(key.alg);
        header.kid = Some(key.kid.clone());
        header.typ = None;
        jsonwebtoken::encode(&header, claims, &key.encoding).map_err(|e| format!("sign token: {e}"))
    }

    /// Issues a bound token for the ServiceAccount `sa` (its object), valid
    /// `expiration_seconds` from now for `audiences`, bound to `bound`.
    ///
    /// # Errors
    /// No signing key; signing failed.
    pub fn issue(&self, sa: &Value, audiences: &[String], expiration_seconds: i64, bound: Option<&BoundObject>) -> std::result::Result<Issued, String> {
        let now = now_secs();
        let exp = now + expiration_seconds;
        let (ns, name) = (crate::meta::namespace(sa), crate::meta::name(sa));
        let mut k8s = json!({
            "namespace": ns,
            "serviceaccount": {"name": name, "uid": s(&sa["metadata"]["uid"])},
        });
        if let Some(b) = bound {
            k8s[b.kind.to_lowercase()] = json!({"name": b.name, "uid": b.uid});
        }
        let claims = json!({
            "aud": audiences,
            "exp": exp,
            "iat": now,
            "iss": self.cfg.issuers.first().map_or(DEFAULT_ISSUER, String::as_str),
            "jti": crate::meta::new_uid(),
            "kubernetes.io": k8s,
            "nbf": now,
            "sub": super::service_account_user(ns, name),
        });
        Ok(Issued { token: self.sign(&claims)?, expires: exp })
    }

    /// Issues a legacy token for the ServiceAccount `sa` to be stored in
    /// `secret` (kube's legacy claims; no expiry).
    ///
    /// # Errors
    /// As [`Tokens::issue`].
    pub fn issue_legacy(&self, sa: &Value, secret_name: &str) -> std::result::Result<String, String> {
        let (ns, name) = (crate::meta::namespace(sa), crate::meta::name(sa));
        let claims = json!({
            "iss": LEGACY_ISSUER,
            "kubernetes.io/serviceaccount/namespace": ns,
            "kubernetes.io/serviceaccount/secret.name": secret_name,
            "kubernetes.io/serviceaccount/service-account.name": name,
            "kubernetes.io/serviceaccount/service-account.uid": s(&sa["metadata"]["uid"]),
            "sub": super::service_account_user(ns, name),
        });
        self.sign(&claims)
    }

    /// `/.well-known/openid-configuration` (kube's shape), or `None` when
    /// the issuer is not an `https://` URL (kube serves none then).
    pub fn openid_configuration(&self) -> Option<Value> {
        let iss = self.cfg.issuers.first()?;
        if !iss.starts_with("https://") {
            return None;
        }
        let mut algs: Vec<&str> = self.cfg.keys.verifying.iter().map(|k| alg_name(k.alg)).collect();
        algs.sort_unstable();
        algs.dedup();
        Some(json!({
            "issuer": iss,
            "jwks_uri": format!("{}/openid/v1/jwks", iss.trim_end_matches('/')),
            "response_types_supported": ["id_token"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": algs,
        }))
    }

    /// `/openid/v1/jwks`: every verifying key as a JWK.
    pub fn jwks(&self) -> Value {
        json!({"keys": self.cfg.keys.verifying.iter().map(|k| k.jwk.clone()).collect::<Vec<_>>()})
    }

    /// Authenticates `token` for `audiences` (`None`: `--api-audiences`):
    /// `Ok(None)` when it is not a token of ours.
    ///
    /// # Errors
    /// A token of ours that is forged, expired, for other audiences, or
    /// whose objects are gone ([`Error::Token`] says why).
    pub async fn authenticate_token(&self, token: &str, audiences: Option<&[String]>) -> Result<Option<UserInfo>> {
        let Some(unverified) = unverified_claims(token) else { return Ok(None) };
        let iss = s(&unverified["iss"]);
        let legacy = iss == LEGACY_ISSUER;
        if !legacy && !self.cfg.issuers.iter().any(|i| i == iss) {
            return Ok(None);
        }
        let claims = self.verify(token)?;
        if legacy {
            return self.check_legacy(token, &claims).await.map(Some);
        }
        check_times(&claims, now_secs())?;
        let wanted = audiences.unwrap_or(&self.cfg.api_audiences);
        check_audience(&claims, wanted)?;
        self.check_bound(&claims).await.map(Some)
    }

    /// The claims of `token` once a verifying key's signature holds.
    fn verify(&self, token: &str) -> Result<Value> {
        let header = jsonwebtoken::decode_header(token).map_err(|e| Error::Token(format!("malformed token: {e}")))?;
        for key in self.cfg.keys.verifying.iter().filter(|k| k.alg == header.alg) {
            let mut v = Validation::new(key.alg);
            v.validate_exp = false;
            v.validate_aud = false;
            v.required_spec_claims.clear();
            if let Ok(data) = jsonwebtoken::decode::<Value>(token, &key.decoding, &v) {
                return Ok(data.claims);
            }
        }
        Err(Error::Token("token signed by invalid key".into()))
    }

    async fn get(&self, resource: &str, ns: &str, name: &str) -> Result<Option<Value>> {
        if name.is_empty() {
            return Ok(None);
        }
        match self.storage.get(&keys::object("", resource, (!ns.is_empty()).then_some(ns), name)).await {
            Ok(v) => Ok(Some(v)),
            Err(crate::storage::Error::NotFound) => Ok(None),
            Err(e) => Err(Error::Token(format!("looking up {resource} {ns}/{name}: {e}"))),
        }
    }

    async fn service_account(&self, ns: &str, name: &str, uid: &str) -> Result<Value> {
        let Some(sa) = self.get("serviceaccounts", ns, name).await? else {
            return Err(Error::Token(format!("service account {ns}/{name} has been deleted")));
        };
        let got = s(&sa["metadata"]["uid"]);
        if !uid.is_empty() && got != uid {
            return Err(Error::Token(format!("service account UID ({got}) does not match claim ({uid})")));
        }
        Ok(sa)
    }

    /// Checks a bound object of the `kubernetes.io` claim; returns it.
    async fn bound(&self, resource: &str, kind: &str, ns: &str, r: &Value) -> Result<Option<(String, String)>> {
        if !r.is_object() {
            return Ok(None);
        }
        let (name, uid) = (s(&r["name"]), s(&r["uid"]));
        let Some(obj) = self.get(resource, ns, name).await? else {
            let what = if ns.is_empty() { name.to_string() } else { format!("{ns}/{name}") };
            return Err(Error::Token(format!("{kind} {what} has been deleted")));
        };
        let got = s(&obj["metadata"]["uid"]);
        if got != uid {
            return Err(Error::Token(format!("{kind} UID ({got}) does not match claim ({uid})")));
        }
        if deleted_long_ago(&obj) {
            return Err(Error::Token(format!("{kind} {ns}/{name} is being deleted")));
        }
        Ok(Some((name.to_string(), uid.to_string())))
    }

    async fn check_bound(&self, claims: &Value) -> Result<UserInfo> {
        let k = &claims["kubernetes.io"];
        let ns = s(&k["namespace"]);
        let (name, uid) = (s(&k["serviceaccount"]["name"]), s(&k["serviceaccount"]["uid"]));
        if ns.is_empty() || name.is_empty() {
            return Err(Error::Token("token has no namespace or service account claims".into()));
        }
        let sa = self.service_account(ns, name, uid).await?;
        let mut user = sa_user(ns, name, s(&sa["metadata"]["uid"]));
        if let Some((pn, pu)) = self.bound("pods", "pod", ns, &k["pod"]).await? {
            user.extra.insert(extra::POD_NAME.into(), vec![pn]);
            user.extra.insert(extra::POD_UID.into(), vec![pu]);
        }
        self.bound("secrets", "secret", ns, &k["secret"]).await?;
        if let Some((nn, nu)) = self.bound("nodes", "node", "", &k["node"]).await? {
            user.extra.insert(extra::NODE_NAME.into(), vec![nn]);
            user.extra.insert(extra::NODE_UID.into(), vec![nu]);
        }
        if let Some(jti) = claims["jti"].as_str().filter(|j| !j.is_empty()) {
            user.extra.insert(extra::CREDENTIAL_ID.into(), vec![format!("JTI={jti}")]);
        }
        Ok(user)
    }

    async fn check_legacy(&self, token: &str, claims: &Value) -> Result<UserInfo> {
        let c = |k: &str| s(&claims[format!("kubernetes.io/serviceaccount/{k}")]).to_string();
        let (ns, name, uid, secret) = (c("namespace"), c("service-account.name"), c("service-account.uid"), c("secret.name"));
        if ns.is_empty() || name.is_empty() || secret.is_empty() {
            return Err(Error::Token("token has no namespace, service account or secret claims".into()));
        }
        let sa = self.service_account(&ns, &name, &uid).await?;
        let Some(sec) = self.get("secrets", &ns, &secret).await? else {
            return Err(Error::Token(format!("secret {ns}/{secret} has been deleted")));
        };
        let stored = base64::engine::general_purpose::STANDARD.decode(s(&sec["data"]["token"])).unwrap_or_default();
        if s(&sec["type"]) != SECRET_TYPE || stored != token.as_bytes() {
            return Err(Error::Token(format!("token does not match the token in secret {ns}/{secret}")));
        }
        if deleted_long_ago(&sec) {
            return Err(Error::Token(format!("secret {ns}/{secret} is being deleted")));
        }
        Ok(sa_user(&ns, &name, s(&sa["metadata"]["uid"])))
    }
}

/// The user of a ServiceAccount (kube `serviceaccount.UserInfo`).
pub fn sa_user(ns: &str, name: &str, uid: &str) -> UserInfo {
    UserInfo {
        name: super::service_account_user(ns, name),
        uid: uid.to_string(),
        groups: vec![ALL_SERVICE_ACCOUNTS.into(), format!("{ALL_SERVICE_ACCOUNTS}:{ns}"), ALL_AUTHENTICATED.into()],
        ..Default::default()
    }
}

fn alg_name(a: Algorithm) -> &'static str {
    match a {
        Algorithm::ES256 => "ES256",
        Algorithm::ES384 => "ES384",
        _ => "RS256",
    }
}

/// Whether `obj` began deleting more than the grace ago.
fn deleted_long_ago(obj: &Value) -> bool {
    let Some(ts) = obj["metadata"]["deletionTimestamp"].as_str() else { return false };
    let Ok(t) = humantime::parse_rfc3339(ts) else { return false };
    let t = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
    t + DELETION_GRACE_SECONDS < now_secs()
}

/// The payload of a compact JWS, unverified; `None` when `token` is not
/// one.
fn unverified_claims(token: &str) -> Option<Value> {
    let mut parts = token.split('.');
    let (_h, p, _s) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(p.trim_end_matches('=')).ok()?;
    serde_json::from_slice::<Value>(&bytes).ok().filter(Value::is_object)
}

/// `exp`, `nbf` and `iat` against `now`, with go-jose's leeway. `exp` is
/// required of bound tokens.
fn check_times(claims: &Value, now: i64) -> Result<()> {
    let exp = claims["exp"].as_i64().ok_or_else(|| Error::Token("token has no expiry".into()))?;
    if now > exp + LEEWAY_SECONDS {
        return Err(Error::Token("service account token has expired".into()));
    }
    if claims["nbf"].as_i64().is_some_and(|nbf| now + LEEWAY_SECONDS < nbf) {
        return Err(Error::Token("service account token is not valid yet".into()));
    }
    if claims["iat"].as_i64().is_some_and(|iat| now + LEEWAY_SECONDS < iat) {
        return Err(Error::Token("service account token is issued in the future".into()));
    }
    Ok(())
}

/// The token's `aud` (a string or a list) must share one audience with
/// `wanted`.
fn check_audience(claims: &Value, wanted: &[String]) -> Result<()> {
    let auds: Vec<&str> = match &claims["aud"] {
        Value::String(a) => vec![a.as_str()],
        Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if auds.iter().any(|a| wanted.iter().any(|w| w == a)) {
        Ok(())
    } else {
        Err(Error::Token("token audiences is invalid for the target audience".into()))
    }
}

#[async_trait]
impl Authenticator for Tokens {
    async fn authenticate(&self, req: &Credentials<'_>) -> Result<Option<UserInfo>> {
        let Some(token) = bearer_token(req.headers) else { return Ok(None) };
        let auds = req.extensions.get::<Audiences>().filter(|a| !a.0.is_empty());
        self.authenticate_token(token, auds.map(|a| a.0.as_slice())).await
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Nodes starting together on one PKI directory each read a whole key,
    /// and the same one.
    #[test]
    fn nodes_generating_the_key_at_once_read_one_whole_key() {
        for _ in 0..20 {
            let dir = tempfile::tempdir().unwrap();
            let loaded: Vec<Keys> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..4).map(|_| s.spawn(|| Keys::load(None, &[], dir.path()).unwrap())).collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            let kids: std::collections::BTreeSet<_> = loaded.iter().map(|k| k.verifying[0].kid.clone()).collect();
            assert_eq!(kids.len(), 1, "{kids:?}");
            let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
            assert_eq!(left, vec![std::ffi::OsString::from("sa.key")]);
        }
    }

    /// A store with one ServiceAccount `ns/sa` (uid `u1`) and nothing else.
    fn tokens(issuers: &[&str], auds: &[&str], keys: Keys) -> Tokens {
        let cfg = Config { issuers: issuers.iter().map(|s| s.to_string()).collect(), api_audiences: auds.iter().map(|s| s.to_string()).collect(), max_expiration: None, keys };
        Tokens::new(cfg, Arc::new(OneSa))
    }

    struct OneSa;

    #[async_trait]
    impl Storage for OneSa {
        async fn get(&self, key: &str) -> crate::storage::Result<Value> {
            if key == keys::object("", "serviceaccounts", Some("ns"), "sa") {
                Ok(json!({"metadata": {"name": "sa", "namespace": "ns", "uid": "u1"}}))
            } else {
                Err(crate::storage::Error::NotFound)
            }
        }
        async fn list(&self, _p: &str, _o: &crate::storage::ListOptions) -> crate::storage::Result<crate::storage::ListResult> {
            Err(crate::storage::Error::NotFound)
        }
        async fn create(&self, _k: &str, _o: Value) -> crate::storage::Result<Value> {
            Err(crate::storage::Error::NotFound)
        }
        async fn guaranteed_update(&self, _k: &str, _p: &crate::storage::Preconditions, _t: &mut dyn crate::storage::TryUpdate) -> crate::storage::Result<Value> {
            Err(crate::storage::Error::NotFound)
        }
        async fn delete(&self, _k: &str, _p: &crate::storage::Preconditions) -> crate::storage::Result<Value> {
            Err(crate::storage::Error::NotFound)
        }
        async fn watch(&self, _k: &str, _o: &crate::storage::WatchOptions) -> crate::storage::Result<crate::storage::WatchStream> {
            Err(crate::storage::Error::NotFound)
        }
        async fn current_revision(&self) -> crate::storage::Result<i64> {
            Ok(1)
        }
    }

    fn new_keys() -> Keys {
        let pem = rcgen::KeyPair::generate().map(|k| k.serialize_pem()).unwrap_or_default();
        let (s, p) = signing_key_from_pem(&pem).unwrap_or_else(|e| panic!("{e}"));
        Keys { signing: Some(s), verifying: vec![p] }
    }

    fn sign(keys: &Keys, claims: &Value) -> String {
        let Some(k) = &keys.signing else { return String::new() };
        let mut h = Header::new(k.alg);
        h.kid = Some(k.kid.clone());
        jsonwebtoken::encode(&h, claims, &k.encoding).unwrap_or_default()
    }

    fn claims(iss: &str, aud: &str, exp_in: i64, nbf_in: i64) -> Value {
        let now = now_secs();
        json!({"iss": iss, "aud": [aud], "exp": now + exp_in, "iat": now, "nbf": now + nbf_in, "sub": "system:serviceaccount:ns:sa",
               "kubernetes.io": {"namespace": "ns", "serviceaccount": {"name": "sa", "uid": "u1"}}})
    }

    #[tokio::test]
    async fn claims_are_checked_as_kube_checks_them() {
        let keys = new_keys();
        let other = new_keys();
        let t = tokens(&["https://a", "https://b"], &["api"], keys.clone());
        let ok = |r: &Result<Option<UserInfo>>| matches!(r, Ok(Some(u)) if u.name == "system:serviceaccount:ns:sa");
        let not_ours = |r: &Result<Option<UserInfo>>| matches!(r, Ok(None));
        let refused = |r: &Result<Option<UserInfo>>| r.is_err();
        let alg_none = format!("{}.{}.", b64url(br#"{"alg":"none"}"#), b64url(claims("https://a", "api", 600, 0).to_string().as_bytes()));
        let mut forged = sign(&keys, &claims("https://a", "api", 600, 0));
        forged.truncate(forged.len() - 4);
        forged.push_str("AAAA");
        // (case, token, audiences asked for, expected)
        let cases: Vec<(&str, String, Option<Vec<String>>, &str)> = vec![
            ("valid", sign(&keys, &claims("https://a", "api", 600, 0)), None, "ok"),
            ("second issuer accepted", sign(&keys, &claims("https://b", "api", 600, 0)), None, "ok"),
            ("wrong issuer is not ours", sign(&keys, &claims("https://c", "api", 600, 0)), None, "none"),
            ("wrong audience", sign(&keys, &claims("https://a", "other", 600, 0)), None, "err"),
            ("asked audience", sign(&keys, &claims("https://a", "other", 600, 0)), Some(vec!["other".into()]), "ok"),
            ("expired past leeway", sign(&keys, &claims("https://a", "api", -120, -300)), None, "err"),
            ("expired within leeway", sign(&keys, &claims("https://a", "api", -30, -300)), None, "ok"),
            ("nbf in the future", sign(&keys, &claims("https://a", "api", 600, 300)), None, "err"),
            ("nbf within leeway", sign(&keys, &claims("https://a", "api", 600, 30)), None, "ok"),
            ("bad signature", forged, None, "err"),
            ("other key", sign(&other, &claims("https://a", "api", 600, 0)), None, "err"),
            ("alg none", alg_none, None, "err"),
            ("not a jwt", "abc.def".into(), None, "none"),
        ];
        for (case, token, auds, want) in cases {
            let got = t.authenticate_token(&token, auds.as_deref()).await;
            let pass = match want {
                "ok" => ok(&got),
                "none" => not_ours(&got),
                _ => refused(&got),
            };
            assert!(pass, "{case}: {got:?}");
        }
    }

    #[tokio::test]
    async fn users_and_objects() {
        let keys = new_keys();
        let t = tokens(&["https://a"], &["api"], keys.clone());
        let sa = json!({"metadata": {"name": "sa", "namespace": "ns", "uid": "u1"}});
        let issued = t.issue(&sa, &["api".to_string()], 600, None).unwrap_or_else(|e| panic!("{e}"));
        let user = t.authenticate_token(&issued.token, None).await.ok().flatten().unwrap_or_default();
        assert_eq!(user.name, "system:serviceaccount:ns:sa");
        assert_eq!(user.uid, "u1");
        assert_eq!(user.groups, ["system:serviceaccounts", "system:serviceaccounts:ns", "system:authenticated"]);
        assert!(user.extra[extra::CREDENTIAL_ID][0].starts_with("JTI="));
        // A deleted ServiceAccount, an SA of another uid, a deleted pod.
        let gone = json!({"metadata": {"name": "gone", "namespace": "ns", "uid": "u1"}});
        let other_uid = json!({"metadata": {"name": "sa", "namespace": "ns", "uid": "u2"}});
        let pod = BoundObject { kind: "Pod".into(), name: "p".into(), uid: "pu".into() };
        for (sa, bound) in [(&gone, None), (&other_uid, None), (&sa, Some(&pod))] {
            let issued = t.issue(sa, &["api".to_string()], 600, bound).unwrap_or_else(|e| panic!("{e}"));
            assert!(t.authenticate_token(&issued.token, None).await.is_err());
        }
        // Legacy tokens need their Secret, which this store lacks.
        let legacy = t.issue_legacy(&sa, "sa-token").unwrap_or_default();
        let err = t.authenticate_token(&legacy, None).await.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("secret ns/sa-token has been deleted"), "{err}");
    }

    #[test]
    fn jwks_and_discovery_are_kubes_shape() {
        let keys = new_keys();
        let t = tokens(&["https://a/"], &["api"], keys.clone());
        let jwks = t.jwks();
        let k = &jwks["keys"][0];
        assert_eq!((k["kty"].as_str(), k["alg"].as_str(), k["use"].as_str(), k["crv"].as_str()), (Some("EC"), Some("ES256"), Some("sig"), Some("P-256")));
        assert_eq!(k["kid"].as_str().map(str::len), Some(43));
        let doc = t.openid_configuration().unwrap_or_default();
        assert_eq!(doc["jwks_uri"], "https://a/openid/v1/jwks");
        assert_eq!(doc["id_token_signing_alg_values_supported"], json!(["ES256"]));
        assert!(tokens(&["not-a-url"], &[], keys).openid_configuration().is_none());
        // The served JWK verifies what the key signs.
        let jwk: jsonwebtoken::jwk::Jwk = serde_json::from_value(k.clone()).unwrap_or_else(|e| panic!("{e}"));
        let dk = DecodingKey::from_jwk(&jwk).unwrap_or_else(|e| panic!("{e}"));
        let mut v = Validation::new(Algorithm::ES256);
        v.validate_aud = false;
        let token = sign(&t.cfg.keys, &claims("https://a/", "api", 600, 0));
        assert!(jsonwebtoken::decode::<Value>(&token, &dk, &v).is_ok());
    }
}
