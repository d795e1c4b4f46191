//! OpenID Connect ID tokens and other JWTs of an outside issuer (kube
//! `plugin/pkg/authenticator/token/oidc`, configured by the `--oidc-*`
//! flags or by the `jwt:` list of `--authentication-config`, see
//! [`super::config`]).
//!
//! A bearer token is this authenticator's when it is a JWT whose
//! (unverified) `iss` is the configured issuer URL; any other token is left
//! to the other authenticators. For its tokens it then checks, as kube does:
//!
//! 1. the header's `alg` is one of the allowed signing algorithms
//!    (`--oidc-signing-algs`, default `RS256`);
//! 2. the signature, with the issuer's key of the header's `kid` (every key
//!    when there is none). Keys come from the issuer's discovery document,
//!    `<issuer>/.well-known/openid-configuration` (or the configured
//!    discovery URL), whose `issuer` must be the issuer URL and whose
//!    `jwks_uri` is fetched over HTTPS trusting the configured CA. They are
//!    fetched on the first token, not at start (an issuer that is down does
//!    not hold the server up), and fetched again when a token names a `kid`
//!    the set lacks, at most once per [`KEY_REFRESH_INTERVAL`];
//! 3. `exp` is in the future (required), `nbf` and `iat` not more than
//!    [`CLOCK_SKEW`] in the future;
//! 4. `aud` (a string or a list) holds one of the audiences (the client id);
//! 5. with `email` as the username claim, `email_verified`, when present,
//!    is `true`;
//! 6. each required claim is a string with the required value.
//!
//! The user is then the username claim with its prefix, the groups claim
//! (a string or a list of strings) each with the groups prefix, the uid
//! claim, and `system:authenticated`. Every failure is a 401.
//!
//! Username prefix defaulting (kube's flag rule, not the structured
//! config's, which wants the prefix spelled out): no `--oidc-username-prefix`
//! and a claim other than `email` gives `<issuer-url>#`; `-` gives none.
//!
//! ```text
//! --oidc-issuer-url=https://idp.example --oidc-client-id=kube
//! token claims {"iss":"https://idp.example","aud":"kube","sub":"42","groups":["dev"]}
//!   → user "https://idp.example#42", groups ["dev", "system:authenticated"]
//! ```

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use base64::Engine as _;
use jsonwebtoken::jwk::Jwk;
use serde_json::Value;

use super::config::load;
pub use super::config::{check_issuer_url, parse_signing_algs, ClaimMapping, JwtConfig};
use super::{bearer_token, Authenticator, Credentials, Error, Result, UserInfo, ALL_AUTHENTICATED};
use crate::webhook::{Client, Tls};

/// How often at most the key set is fetched again because a token named a
/// key it lacks (so bogus `kid`s cannot flood the issuer).
pub const KEY_REFRESH_INTERVAL: Duration = Duration::from_secs(5);

/// How far in the future `nbf` and `iat` may be (go-oidc's 5 minutes of
/// clock skew).
pub const CLOCK_SKEW: Duration = Duration::from_secs(300);

/// How long one request to the issuer may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// The `--oidc-*` flags and `--authentication-config` (kube's
/// `OIDCAuthenticationOptions` and `AuthenticationConfigFile`).
#[derive(Debug, Clone, Default, clap::Args)]
#[group(id = "oidc")]
pub struct Flags {
    /// The issuer's URL (`https://` only); tokens whose `iss` is this URL
    /// are verified against its keys.
    #[arg(long)]
    pub oidc_issuer_url: Option<String>,
    /// The audience tokens must carry in `aud`.
    #[arg(long)]
    pub oidc_client_id: Option<String>,
    /// The claim that names the user (default `sub`).
    #[arg(long)]
    pub oidc_username_claim: Option<String>,
    /// Prepended to user names; unset with a claim other than `email`
    /// means `<issuer-url>#`, and `-` means no prefix.
    #[arg(long)]
    pub oidc_username_prefix: Option<String>,
    /// The claim that lists the user's groups (a string or a list of
    /// strings).
    #[arg(long)]
    pub oidc_groups_claim: Option<String>,
    /// Prepended to each group.
    #[arg(long)]
    pub oidc_groups_prefix: Option<String>,
    /// `key=value`: a claim the token must carry with this value; repeat the
    /// flag (or separate with commas) for several.
    #[arg(long, value_delimiter = ',')]
    pub oidc_required_claim: Vec<String>,
    /// The PEM CA that signs the issuer's serving certificate.
    #[arg(long)]
    pub oidc_ca_file: Option<PathBuf>,
    /// Allowed signing algorithms, comma-separated (default `RS256`).
    #[arg(long, value_delimiter = ',')]
    pub oidc_signing_algs: Vec<String>,
    /// A structured authentication configuration file
    /// (`apiserver.config.k8s.io` `AuthenticationConfiguration`, v1alpha1,
    /// v1beta1 or v1): its `jwt:` list; not together with `--oidc-*`.
    #[arg(long)]
    pub authentication_config: Option<PathBuf>,
}

impl Flags {
    fn oidc_flags_set(&self) -> bool {
        self.oidc_issuer_url.is_some()
            || self.oidc_client_id.is_some()
            || self.oidc_username_claim.is_some()
            || self.oidc_username_prefix.is_some()
            || self.oidc_groups_claim.is_some()
            || self.oidc_groups_prefix.is_some()
            || !self.oidc_required_claim.is_empty()
            || self.oidc_ca_file.is_some()
            || !self.oidc_signing_algs.is_empty()
    }

    /// The JWT issuers these flags configure: none, the one of `--oidc-*`,
    /// or the `jwt:` list of `--authentication-config`.
    ///
    /// # Errors
    /// Both ways at once (kube's "mutually exclusive" message), an issuer
    /// without a client id or the reverse, a bad issuer URL, required claim
    /// or signing algorithm, an unreadable CA file, or a bad configuration
    /// file (see [`super::config::load`]).
    pub fn jwt_configs(&self) -> std::result::Result<Vec<JwtConfig>, String> {
        if let Some(path) = &self.authentication_config {
            if self.oidc_flags_set() {
                return Err("authentication-config file and oidc-* flags are mutually exclusive".into());
            }
            return load(path);
        }
        if !self.oidc_flags_set() {
            return Ok(Vec::new());
        }
        let (Some(issuer), Some(client_id)) = (self.oidc_issuer_url.as_deref().filter(|s| !s.is_empty()), self.oidc_client_id.as_deref().filter(|s| !s.is_empty())) else {
            return Err("oidc-issuer-url and oidc-client-id must be specified together when any oidc-* flags are set".into());
        };
        check_issuer_url(issuer).map_err(|e| format!("--oidc-issuer-url: {e}"))?;
        let claim = self.oidc_username_claim.clone().unwrap_or_else(|| "sub".into());
        let prefix = default_username_prefix(issuer, &claim, self.oidc_username_prefix.as_deref());
        let mut required_claims = Vec::new();
        for kv in &self.oidc_required_claim {
            let Some((k, v)) = kv.split_once('=') else { return Err(format!("--oidc-required-claim: {kv:?} is not key=value")) };
            required_claims.push((k.trim().to_string(), v.trim().to_string()));
        }
        let algs = if self.oidc_signing_algs.is_empty() { vec!["RS256".to_string()] } else { self.oidc_signing_algs.clone() };
        let signing_algs = parse_signing_algs(&algs)?;
        let ca = match &self.oidc_ca_file {
            Some(p) => std::fs::read(p).map_err(|e| format!("--oidc-ca-file {}: {e}", p.display()))?,
            None => return Err("--oidc-ca-file is required: this server has no system roots to trust the issuer with".into()),
        };
        Ok(vec![JwtConfig {
            issuer: issuer.to_string(),
            discovery_url: None,
            audiences: vec![client_id.to_string()],
            ca,
            username: ClaimMapping { claim, prefix },
            groups: self.oidc_groups_claim.clone().filter(|c| !c.is_empty()).map(|claim| ClaimMapping { claim, prefix: self.oidc_groups_prefix.clone().unwrap_or_default() }),
            uid_claim: None,
            required_claims,
            signing_algs,
        }])
    }
}

/// kube's username prefix rule for the `--oidc-*` flags: an explicit `-`
/// is no prefix, an explicit value is that value, and no value is
/// `<issuer>#` unless the claim is `email`.
pub fn default_username_prefix(issuer: &str, claim: &str, flag: Option<&str>) -> String {
    match flag {
        Some("-") => String::new(),
        Some(p) if !p.is_empty() => p.to_string(),
        _ if claim != "email" => format!("{issuer}#"),
        _ => String::new(),
    }
}

/// The authenticators of `flags`, one per issuer.
///
/// # Errors
/// As [`Flags::jwt_configs`], or a CA without a PEM certificate.
pub fn authenticators(flags: &Flags) -> std::result::Result<Vec<Arc<dyn Authenticator>>, String> {
    let mut out: Vec<Arc<dyn Authenticator>> = Vec::new();
    for cfg in flags.jwt_configs()? {
        out.push(Arc::new(Jwt::new(cfg)?));
    }
    Ok(out)
}

/// The authenticator of one issuer.
pub struct Jwt {
    cfg: JwtConfig,
    keys: KeySet,
}

impl Jwt {
    /// An authenticator for `cfg`; nothing is fetched yet.
    ///
    /// # Errors
    /// The CA holds no PEM certificate.
    pub fn new(cfg: JwtConfig) -> std::result::Result<Self, String> {
        let client = Client::new("", &Tls { ca: cfg.ca.clone(), identity: None }, None, FETCH_TIMEOUT).map_err(|e| format!("jwt issuer {}: {e}", cfg.issuer))?;
        let keys = KeySet { client, issuer: cfg.issuer.clone(), discovery_url: cfg.discovery_url(), keys: arc_swap::ArcSwapOption::empty(), last_fetch: tokio::sync::Mutex::new(None) };
        Ok(Jwt { cfg, keys })
    }

    /// Verifies `token` (already known to name this issuer).
    async fn verify(&self, token: &str) -> std::result::Result<UserInfo, String> {
        let header = jsonwebtoken::decode_header(token).map_err(|e| format!("oidc: malformed jwt header: {e}"))?;
        if !self.cfg.signing_algs.contains(&header.alg) {
            return Err(format!("oidc: id token signed with unsupported algorithm, expected {:?} got {:?}", self.cfg.signing_algs, header.alg));
        }
        let candidates = self.keys.keys_for(header.kid.as_deref()).await?;
        let mut validation = jsonwebtoken::Validation::new(header.alg);
        // Claims are checked below, with kube's rules and messages.
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.validate_aud = false;
        validation.required_spec_claims.clear();
        let mut last = String::from("oidc: no key to verify the signature with");
        for jwk in candidates.iter() {
            let Ok(key) = jsonwebtoken::DecodingKey::from_jwk(jwk) else { continue };
            match jsonwebtoken::decode::<Value>(token, &key, &validation) {
                Ok(data) => return user_from_claims(&self.cfg, &data.claims, now_secs()),
                Err(e) => last = format!("oidc: verify signature: {e}"),
            }
        }
        Err(last)
    }
}

#[async_trait]
impl Authenticator for Jwt {
    async fn authenticate(&self, req: &Credentials<'_>) -> Result<Option<UserInfo>> {
        let Some(token) = bearer_token(req.headers) else { return Ok(None) };
        if unverified_issuer(token).as_deref() != Some(self.cfg.issuer.as_str()) {
            return Ok(None);
        }
        match self.verify(token).await {
            Ok(user) => Ok(Some(user)),
            Err(why) => {
                tracing::debug!(issuer = %self.cfg.issuer, "{why}");
                Err(Error::Rejected(why))
            }
        }
    }
}

/// The `iss` of a JWT without verifying anything (kube's
/// `jwt.UnsafeClaimsWithoutVerification`, used only to route the token).
pub fn unverified_issuer(token: &str) -> Option<String> {
    let mut parts = token.split('.');
    let (_, payload, _, None) = (parts.next()?, parts.next()?, parts.next()?, parts.next()) else { return None };
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload.trim_end_matches('=')).ok()?;
    let claims: Value = serde_json::from_slice(&bytes).ok()?;
    claims.get("iss")?.as_str().map(String::from)
}

fn now_secs() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// The user of verified `claims` at `now` (seconds since the epoch): the
/// time, audience, issuer, `email_verified` and required-claim checks,
/// then the claim mappings (see the module doc).
///
/// # Errors
/// The first check that fails, in kube's (go-oidc's) words.
pub fn user_from_claims(cfg: &JwtConfig, claims: &Value, now: f64) -> std::result::Result<UserInfo, String> {
    if claims.get("iss").and_then(Value::as_str) != Some(cfg.issuer.as_str()) {
        return Err(format!("oidc: id token issued by a different provider, expected {:?} got {:?}", cfg.issuer, claims.get("iss")));
    }
    let skew = CLOCK_SKEW.as_secs_f64();
    let time = |name: &str| -> std::result::Result<Option<f64>, String> {
        match claims.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v.as_f64().map(Some).ok_or_else(|| format!("oidc: malformed claim {name:?}: not a number")),
        }
    };
    match time("exp")? {
        None => return Err("oidc: token has no expiry (exp claim)".into()),
        Some(exp) if now > exp => return Err(format!("oidc: token is expired (Token Expiry: {exp})")),
        Some(_) => {}
    }
    if let Some(nbf) = time("nbf")? {
        if now + skew < nbf {
            return Err(format!("oidc: current time {now} before the nbf (not before) time: {nbf}"));
        }
    }
    if let Some(iat) = time("iat")? {
        if now + skew < iat {
            return Err(format!("oidc: token issued in the future (iat {iat}, now {now})"));
        }
    }
    let aud: Vec<&str> = match claims.get("aud") {
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if !cfg.audiences.iter().any(|want| aud.contains(&want.as_str())) {
        return Err(format!("oidc: expected audience in {:?} got {aud:?}", cfg.audiences));
    }
    if cfg.username.claim == "email" {
        match claims.get("email_verified") {
            None | Some(Value::Null) | Some(Value::Bool(true)) => {}
            Some(Value::Bool(false)) => return Err("oidc: email not verified".into()),
            Some(_) => return Err("oidc: parse 'email_verified' claim: not a boolean".into()),
        }
    }
    for (k, want) in &cfg.required_claims {
        match claims.get(k) {
            None => return Err(format!("oidc: required claim {k} not present in ID token")),
            Some(Value::String(got)) if got == want => {}
            Some(Value::String(got)) => return Err(format!("oidc: required claim {k} value does not match. Got = {got}, want = {want}")),
            Some(_) => return Err(format!("oidc: parse claim {k}: not a string")),
        }
    }
    let name = match claims.get(&cfg.username.claim) {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(Value::String(_)) => return Err(format!("oidc: parse username claims {:?}: claim is empty", cfg.username.claim)),
        Some(_) => return Err(format!("oidc: parse username claims {:?}: not a string", cfg.username.claim)),
        None => return Err(format!("oidc: parse username claims {:?}: claim not present", cfg.username.claim)),
    };
    let mut groups = Vec::new();
    if let Some(g) = &cfg.groups {
        let values: Vec<String> = match claims.get(&g.claim) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Array(a)) => {
                a.iter().map(|v| v.as_str().map(String::from).ok_or_else(|| format!("oidc: parse groups claim {:?}: not a list of strings", g.claim))).collect::<std::result::Result<_, _>>()?
            }
            Some(_) => return Err(format!("oidc: parse groups claim {:?}: not a string or a list of strings", g.claim)),
        };
        groups.extend(values.into_iter().map(|v| format!("{}{v}", g.prefix)));
    }
    groups.push(ALL_AUTHENTICATED.into());
    let uid = match &cfg.uid_claim {
        None => String::new(),
        Some(c) => match claims.get(c) {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(_) => return Err(format!("oidc: parse uid claim {c:?}: not a string")),
        },
    };
    Ok(UserInfo { name: format!("{}{name}", cfg.username.prefix), uid, groups, ..Default::default() })
}

/// An issuer's keys, fetched on demand.
struct KeySet {
    client: Client,
    issuer: String,
    discovery_url: String,
    keys: arc_swap::ArcSwapOption<Vec<Jwk>>,
    /// When the keys were last fetched (or tried); held while fetching so
    /// that concurrent requests wait for one fetch.
    last_fetch: tokio::sync::Mutex<Option<Instant>>,
}

impl KeySet {
    /// The keys that may have signed a token with `kid` (all keys without
    /// one), fetching the set when it lacks the key.
    async fn keys_for(&self, kid: Option<&str>) -> std::result::Result<Arc<Vec<Jwk>>, String> {
        let pick = |set: Option<Arc<Vec<Jwk>>>| -> Option<Arc<Vec<Jwk>>> {
            let set = set?;
            match kid {
                None => Some(set),
                Some(kid) => set.iter().find(|k| k.common.key_id.as_deref() == Some(kid)).map(|k| Arc::new(vec![k.clone()])),
            }
        };
        if let Some(found) = pick(self.keys.load_full()) {
            return Ok(found);
        }
        let mut last = self.last_fetch.lock().await;
        // Another request may have fetched the set while this one waited.
        if let Some(found) = pick(self.keys.load_full()) {
            return Ok(found);
        }
        if let Some(at) = *last {
            if at.elapsed() < KEY_REFRESH_INTERVAL {
                return Err(format!("oidc: no key with kid {kid:?} (the key set was fetched {:?} ago)", at.elapsed()));
            }
        }
        *last = Some(Instant::now());
        let keys = self.fetch().await.inspect_err(|e| tracing::warn!(issuer = %self.issuer, "fetching the issuer's keys: {e}"))?;
        tracing::info!(issuer = %self.issuer, keys = keys.len(), "fetched the issuer's keys");
        self.keys.store(Some(Arc::new(keys)));
        pick(self.keys.load_full()).ok_or_else(|| format!("oidc: no key with kid {kid:?} in the issuer's key set"))
    }

    /// The discovery document, then its `jwks_uri`; keys the JWT library
    /// cannot read are skipped.
    async fn fetch(&self) -> std::result::Result<Vec<Jwk>, String> {
        let disc = self.client.get_json(&self.discovery_url).await.map_err(|e| format!("oidc: fetch discovery document: {e}"))?;
        let got = disc.get("issuer").and_then(Value::as_str).unwrap_or_default();
        if got != self.issuer {
            return Err(format!("oidc: issuer did not match the issuer returned by provider, expected {:?} got {got:?}", self.issuer));
        }
        let jwks_uri = disc.get("jwks_uri").and_then(Value::as_str).ok_or("oidc: discovery document has no jwks_uri")?;
        let set = self.client.get_json(jwks_uri).await.map_err(|e| format!("oidc: fetch keys: {e}"))?;
        let keys = set.get("keys").and_then(Value::as_array).ok_or("oidc: key set has no keys")?;
        Ok(keys.iter().filter_map(|k| serde_json::from_value::<Jwk>(k.clone()).ok()).collect())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn cfg() -> JwtConfig {
        JwtConfig {
            issuer: "https://idp.example".into(),
            audiences: vec!["kube".into()],
            username: ClaimMapping { claim: "sub".into(), prefix: "https://idp.example#".into() },
            groups: Some(ClaimMapping { claim: "groups".into(), prefix: "oidc:".into() }),
            ..Default::default()
        }
    }

    #[test]
    fn username_prefix_defaults_as_kube() {
        let i = "https://idp.example";
        // (claim, --oidc-username-prefix, prefix)
        let cases: &[(&str, Option<&str>, &str)] = &[
            ("sub", None, "https://idp.example#"),
            ("email", None, ""),
            ("sub", Some("-"), ""),
            ("email", Some("-"), ""),
            ("email", Some("oidc:"), "oidc:"),
            ("name", Some(""), "https://idp.example#"),
        ];
        for (claim, flag, want) in cases {
            assert_eq!(default_username_prefix(i, claim, *flag), *want, "{claim} {flag:?}");
        }
    }

    #[test]
    fn claims_map_to_users() {
        let now = 1_000_000.0;
        let base = json!({"iss": "https://idp.example", "aud": ["other", "kube"], "sub": "42", "exp": now + 60.0, "iat": now, "groups": ["dev", "ops"]});
        let with = |patch: Value| {
            let mut c = base.clone();
            if let (Some(m), Value::Object(p)) = (c.as_object_mut(), patch) {
                for (k, v) in p {
                    if v.is_null() {
                        m.remove(&k);
                    } else {
                        m.insert(k, v);
                    }
                }
            }
            c
        };
        let u = user_from_claims(&cfg(), &base, now).unwrap_or_default();
        assert_eq!((u.name.as_str(), u.groups.clone()), ("https://idp.example#42", vec!["oidc:dev".to_string(), "oidc:ops".into(), ALL_AUTHENTICATED.into()]));
        // A single group as a string; no groups claim at all.
        assert_eq!(user_from_claims(&cfg(), &with(json!({"groups": "dev"})), now).map(|u| u.groups).unwrap_or_default(), vec!["oidc:dev".to_string(), ALL_AUTHENTICATED.into()]);
        assert_eq!(user_from_claims(&cfg(), &with(json!({"groups": null})), now).map(|u| u.groups).unwrap_or_default(), vec![ALL_AUTHENTICATED.to_string()]);
        // (claims patch, error start)
        let bad: &[(Value, &str)] = &[
            (json!({"exp": now - 1.0}), "oidc: token is expired"),
            (json!({"exp": null}), "oidc: token has no expiry"),
            (json!({"nbf": now + 600.0}), "oidc: current time"),
            (json!({"iat": now + 600.0}), "oidc: token issued in the future"),
            (json!({"aud": "other"}), "oidc: expected audience"),
            (json!({"iss": "https://evil.example"}), "oidc: id token issued by a different provider"),
            (json!({"sub": null}), "oidc: parse username claims \"sub\": claim not present"),
            (json!({"sub": 7}), "oidc: parse username claims \"sub\": not a string"),
            (json!({"groups": [1]}), "oidc: parse groups claim"),
        ];
        for (patch, want) in bad {
            let err = user_from_claims(&cfg(), &with(patch.clone()), now).err().unwrap_or_default();
            assert!(err.starts_with(want), "{patch}: {err}");
        }
        // nbf within the clock skew passes.
        assert!(user_from_claims(&cfg(), &with(json!({"nbf": now + 60.0})), now).is_ok());
    }

    #[test]
    fn email_must_be_verified_when_present() {
        let now = 1_000_000.0;
        let mut c = cfg();
        c.username = ClaimMapping { claim: "email".into(), prefix: String::new() };
        let claims = |verified: Value| json!({"iss": "https://idp.example", "aud": "kube", "email": "jane@example.com", "exp": now + 60.0, "email_verified": verified});
        assert_eq!(user_from_claims(&c, &claims(json!(true)), now).map(|u| u.name).unwrap_or_default(), "jane@example.com");
        assert!(user_from_claims(&c, &claims(Value::Null), now).is_ok());
        assert_eq!(user_from_claims(&c, &claims(json!(false)), now).err().unwrap_or_default(), "oidc: email not verified");
        assert!(user_from_claims(&c, &claims(json!("true")), now).is_err());
    }

    #[test]
    fn required_claims_must_match() {
        let now = 1_000_000.0;
        let mut c = cfg();
        c.required_claims = vec![("hd".into(), "example.com".into())];
        let claims = |hd: Value| json!({"iss": "https://idp.example", "aud": "kube", "sub": "1", "exp": now + 60.0, "hd": hd});
        assert!(user_from_claims(&c, &claims(json!("example.com")), now).is_ok());
        assert_eq!(user_from_claims(&c, &claims(json!("evil.com")), now).err().unwrap_or_default(), "oidc: required claim hd value does not match. Got = evil.com, want = example.com");
        assert_eq!(user_from_claims(&c, &claims(Value::Null), now).err().unwrap_or_default(), "oidc: parse claim hd: not a string");
        let no_hd = json!({"iss": "https://idp.example", "aud": "kube", "sub": "1", "exp": now + 60.0});
        assert_eq!(user_from_claims(&c, &no_hd, now).err().unwrap_or_default(), "oidc: required claim hd not present in ID token");
    }

    /// The flags alone, as a command line parses them.
    #[derive(clap::Parser)]
    struct Command {
        #[command(flatten)]
        oidc: Flags,
    }

    #[test]
    fn flags_are_checked_as_kube() {
        use clap::Parser as _;
        let flags = |args: &[&str]| {
            let mut all = vec!["apiserver"];
            all.extend_from_slice(args);
            Command::parse_from(all).oidc.jwt_configs()
        };
        assert!(flags(&[]).is_ok_and(|v| v.is_empty()));
        let err = |args: &[&str]| flags(args).err().unwrap_or_default();
        assert_eq!(err(&["--oidc-issuer-url=https://a"]), "oidc-issuer-url and oidc-client-id must be specified together when any oidc-* flags are set");
        assert_eq!(err(&["--oidc-client-id=k", "--authentication-config=/x"]), "authentication-config file and oidc-* flags are mutually exclusive");
        assert!(err(&["--oidc-issuer-url=http://a", "--oidc-client-id=k"]).contains("URL scheme must be https"));
        assert!(err(&["--oidc-issuer-url=https://a", "--oidc-client-id=k", "--oidc-signing-algs=HS256"]).contains("unsupported signing alg"));
        assert!(err(&["--oidc-issuer-url=https://a", "--oidc-client-id=k", "--oidc-required-claim=x"]).contains("not key=value"));
    }

    #[test]
    fn routes_by_unverified_issuer() {
        let enc = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
        let tok = format!("{}.{}.sig", enc(&json!({"alg": "RS256"})), enc(&json!({"iss": "https://idp.example"})));
        assert_eq!(unverified_issuer(&tok).as_deref(), Some("https://idp.example"));
        for bad in ["opaque-token", "a.b", "a.b.c.d", &format!("x.{}.y", enc(&json!({"sub": "1"})))] {
            assert_eq!(unverified_issuer(bad), None, "{bad}");
        }
    }
}
