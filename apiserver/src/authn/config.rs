//! The structured authentication configuration, `--authentication-config`
//! (kube's `apiserver.config.k8s.io` `AuthenticationConfiguration`,
//! v1alpha1, v1beta1 and v1; read once at start):
//!
//! ```yaml
//! apiVersion: apiserver.config.k8s.io/v1beta1
//! kind: AuthenticationConfiguration
//! jwt:
//! - issuer:
//!     url: https://idp.example          # tokens' iss; https only
//!     discoveryURL: https://10.0.0.1/.well-known/openid-configuration  # optional
//!     audiences: [kube]                 # aud must hold one
//!     audienceMatchPolicy: MatchAny     # required with several audiences
//!     certificateAuthority: |           # PEM, inline
//!       -----BEGIN CERTIFICATE-----
//!   claimMappings:
//!     username: {claim: sub, prefix: "idp:"}   # prefix required with claim ("" for none)
//!     groups: {claim: groups, prefix: ""}
//!     uid: {claim: sub}
//!   claimValidationRules:
//!   - {claim: hd, requiredValue: example.com}
//! ```
//!
//! Each entry becomes an [`oidc::JwtConfig`](super::oidc::JwtConfig), the
//! same authenticator as the `--oidc-*` flags. CEL (`expression` mappings
//! and rules, `extra`, `userValidationRules`) and the `anonymous` section
//! are refused with an error naming the field: this server has no CEL.

use std::path::Path;

use jsonwebtoken::Algorithm;
use serde::Deserialize;

const API_VERSIONS: &[&str] = &["apiserver.config.k8s.io/v1alpha1", "apiserver.config.k8s.io/v1beta1", "apiserver.config.k8s.io/v1"];

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct File {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    jwt: Vec<Jwt>,
    anonymous: Option<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Jwt {
    issuer: Issuer,
    #[serde(default)]
    claim_validation_rules: Vec<ValidationRule>,
    #[serde(default)]
    claim_mappings: ClaimMappings,
    #[serde(default)]
    user_validation_rules: Vec<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Issuer {
    #[serde(default)]
    url: String,
    #[serde(rename = "discoveryURL")]
    discovery_url: Option<String>,
    #[serde(default)]
    audiences: Vec<String>,
    #[serde(default)]
    audience_match_policy: String,
    #[serde(default)]
    certificate_authority: String,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ClaimMappings {
    #[serde(default)]
    username: Mapping,
    groups: Option<Mapping>,
    uid: Option<Mapping>,
    #[serde(default)]
    extra: Vec<serde_json::Value>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Mapping {
    #[serde(default)]
    claim: String,
    prefix: Option<String>,
    #[serde(default)]
    expression: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ValidationRule {
    #[serde(default)]
    claim: String,
    #[serde(default)]
    required_value: String,
    #[serde(default)]
    expression: String,
    #[serde(default)]
    message: String,
}

/// Reads the configuration file at `path`.
///
/// # Errors
/// The file cannot be read or parsed (unknown fields included, as kube's
/// strict decoding), or a field is invalid; the message names the field.
pub fn load(path: &Path) -> Result<Vec<JwtConfig>, String> {
    let text = std::fs::read(path).map_err(|e| format!("failed to read authentication-config file {:?}: {e}", path.display().to_string()))?;
    parse(&text).map_err(|e| format!("authentication-config file {:?}: {e}", path.display().to_string()))
}

/// Parses a configuration's YAML or JSON.
///
/// # Errors
/// As [`load`].
pub fn parse(text: &[u8]) -> Result<Vec<JwtConfig>, String> {
    let file: File = serde_saphyr::from_slice(text).map_err(|e| format!("decoding: {e}"))?;
    if !API_VERSIONS.contains(&file.api_version.as_str()) || file.kind != "AuthenticationConfiguration" {
        return Err(format!("no kind {:?} is registered for version {:?} (want AuthenticationConfiguration in {})", file.kind, file.api_version, API_VERSIONS.join(", ")));
    }
    if file.anonymous.is_some() {
        return Err("anonymous: Unsupported value: the anonymous section is not supported by this server".into());
    }
    let cel = |field: String| format!("{field}: Unsupported value: CEL expressions are not supported by this server");
    let mut out: Vec<JwtConfig> = Vec::new();
    for (i, j) in file.jwt.into_iter().enumerate() {
        let at = format!("jwt[{i}]");
        check_issuer_url(&j.issuer.url).map_err(|e| format!("{at}.issuer.url: {e}"))?;
        if out.iter().any(|o| o.issuer == j.issuer.url) {
            return Err(format!("{at}.issuer.url: Duplicate value: {:?}", j.issuer.url));
        }
        if let Some(d) = &j.issuer.discovery_url {
            check_issuer_url(d).map_err(|e| format!("{at}.issuer.discoveryURL: {e}"))?;
            if d.trim_end_matches('/') == j.issuer.url.trim_end_matches('/') {
                return Err(format!("{at}.issuer.discoveryURL: Invalid value: {d:?}: discoveryURL must be different from URL"));
            }
        }
        if j.issuer.audiences.is_empty() {
            return Err(format!("{at}.issuer.audiences: Required value: at least one issuer.audiences is required"));
        }
        if j.issuer.audiences.len() > 1 && j.issuer.audience_match_policy != "MatchAny" {
            return Err(format!("{at}.issuer.audienceMatchPolicy: Invalid value: {:?}: audienceMatchPolicy must be MatchAny for multiple audiences", j.issuer.audience_match_policy));
        }
        if j.issuer.certificate_authority.is_empty() {
            return Err(format!("{at}.issuer.certificateAuthority: Required value: this server has no system roots to trust the issuer with"));
        }
        let m = &j.claim_mappings;
        if !m.username.expression.is_empty() {
            return Err(cel(format!("{at}.claimMappings.username.expression")));
        }
        if m.username.claim.is_empty() {
            return Err(format!("{at}.claimMappings.username: Required value: claim or expression is required"));
        }
        let Some(prefix) = m.username.prefix.clone() else {
            return Err(format!("{at}.claimMappings.username.prefix: Required value: prefix is required when claim is set. It can be set to an empty string to disable prefixing"));
        };
        let groups = match &m.groups {
            Some(g) if !g.expression.is_empty() => return Err(cel(format!("{at}.claimMappings.groups.expression"))),
            Some(g) if !g.claim.is_empty() => {
                let Some(prefix) = g.prefix.clone() else {
                    return Err(format!("{at}.claimMappings.groups.prefix: Required value: prefix is required when claim is set. It can be set to an empty string to disable prefixing"));
                };
                Some(ClaimMapping { claim: g.claim.clone(), prefix })
            }
            _ => None,
        };
        let uid_claim = match &m.uid {
            Some(u) if !u.expression.is_empty() => return Err(cel(format!("{at}.claimMappings.uid.expression"))),
            Some(u) if !u.claim.is_empty() => Some(u.claim.clone()),
            _ => None,
        };
        if !m.extra.is_empty() {
            return Err(cel(format!("{at}.claimMappings.extra")));
        }
        if !j.user_validation_rules.is_empty() {
            return Err(cel(format!("{at}.userValidationRules")));
        }
        let mut required_claims = Vec::new();
        for (r, rule) in j.claim_validation_rules.iter().enumerate() {
            if !rule.expression.is_empty() || !rule.message.is_empty() {
                return Err(cel(format!("{at}.claimValidationRules[{r}].expression")));
            }
            if rule.claim.is_empty() {
                return Err(format!("{at}.claimValidationRules[{r}].claim: Required value: claim or expression is required"));
            }
            if required_claims.iter().any(|(c, _): &(String, String)| c == &rule.claim) {
                return Err(format!("{at}.claimValidationRules[{r}].claim: Duplicate value: {:?}", rule.claim));
            }
            required_claims.push((rule.claim.clone(), rule.required_value.clone()));
        }
        out.push(JwtConfig {
            issuer: j.issuer.url,
            discovery_url: j.issuer.discovery_url,
            audiences: j.issuer.audiences,
            ca: j.issuer.certificate_authority.into_bytes(),
            username: ClaimMapping { claim: m.username.claim.clone(), prefix },
            groups,
            uid_claim,
            required_claims,
            // kube's structured JWT authenticator accepts every algorithm
            // it supports; the key decides.
            signing_algs: parse_signing_algs(&["RS256", "RS384", "RS512", "ES256", "ES384", "PS256", "PS384", "PS512"].map(String::from))?,
        });
    }
    Ok(out)
}

/// Signing algorithms kube accepts for `--oidc-signing-algs` that this
/// server verifies (kube also lists ES512, which the JWT library lacks).
const SIGNING_ALGS: &[&str] = &["RS256", "RS384", "RS512", "ES256", "ES384", "PS256", "PS384", "PS512"];

/// Parses signing algorithm names.
///
/// # Errors
/// A name kube does not know or this server cannot verify.
pub fn parse_signing_algs(names: &[String]) -> std::result::Result<Vec<Algorithm>, String> {
    names
        .iter()
        .map(|n| n.trim())
        .filter(|n| !n.is_empty())
        .map(|n| {
            if !SIGNING_ALGS.contains(&n) {
                return Err(format!("oidc: unsupported signing alg {n:?} (supported: {})", SIGNING_ALGS.join(", ")));
            }
            n.parse::<Algorithm>().map_err(|e| format!("oidc: signing alg {n:?}: {e}"))
        })
        .collect()
}

/// An issuer URL must be `https://` with a host and no query or fragment
/// (kube's structured-config validation).
///
/// # Errors
/// Kube's wording for what is wrong.
pub fn check_issuer_url(s: &str) -> std::result::Result<(), String> {
    let u = url::Url::parse(s).map_err(|e| format!("Invalid value: {s:?}: {e}"))?;
    if u.scheme() != "https" {
        return Err(format!("Invalid value: {s:?}: URL scheme must be https"));
    }
    if u.query().is_some() || u.fragment().is_some() || !u.username().is_empty() {
        return Err(format!("Invalid value: {s:?}: URL must not contain a query, fragment or user info"));
    }
    Ok(())
}

/// A claim and the prefix put before its values.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClaimMapping {
    /// The claim's name.
    pub claim: String,
    /// Prepended to each value (may be empty).
    pub prefix: String,
}

/// One JWT issuer: how to verify its tokens and map their claims to a user
/// (kube's `apiserver.JWTAuthenticator`, without CEL).
#[derive(Debug, Clone, Default)]
pub struct JwtConfig {
    /// The issuer URL; tokens' `iss` must equal it.
    pub issuer: String,
    /// Where the discovery document is, when not under the issuer URL.
    pub discovery_url: Option<String>,
    /// Accepted audiences; a token's `aud` must hold one of them.
    pub audiences: Vec<String>,
    /// PEM CA certificates trusted for the issuer's HTTPS.
    pub ca: Vec<u8>,
    /// The user name.
    pub username: ClaimMapping,
    /// The groups, if a claim is configured.
    pub groups: Option<ClaimMapping>,
    /// The claim that holds the user's uid, if any.
    pub uid_claim: Option<String>,
    /// Claims that must be strings with these values.
    pub required_claims: Vec<(String, String)>,
    /// Accepted `alg` header values.
    pub signing_algs: Vec<Algorithm>,
}

impl JwtConfig {
    /// The URL of the discovery document.
    pub fn discovery_url(&self) -> String {
        self.discovery_url.clone().unwrap_or_else(|| format!("{}/.well-known/openid-configuration", self.issuer.trim_end_matches('/')))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "apiVersion: apiserver.config.k8s.io/v1beta1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: https://idp.example
    audiences: [a, b]
    audienceMatchPolicy: MatchAny
    certificateAuthority: PEM
  claimMappings:
    username: {claim: email, prefix: \"\"}
    groups: {claim: roles, prefix: \"idp:\"}
    uid: {claim: sub}
  claimValidationRules:
  - {claim: hd, requiredValue: example.com}
";

    #[test]
    fn parses_every_version() {
        for v in ["v1alpha1", "v1beta1", "v1"] {
            let cfg = parse(GOOD.replace("v1beta1", v).as_bytes()).unwrap_or_else(|e| panic!("{v}: {e}"));
            let c = &cfg[0];
            assert_eq!((c.issuer.as_str(), c.audiences.len(), c.username.claim.as_str(), c.username.prefix.as_str()), ("https://idp.example", 2, "email", ""));
            assert_eq!(c.groups, Some(ClaimMapping { claim: "roles".into(), prefix: "idp:".into() }));
            assert_eq!((c.uid_claim.as_deref(), c.required_claims.clone()), (Some("sub"), vec![("hd".to_string(), "example.com".to_string())]));
        }
    }

    #[test]
    fn refuses_what_kube_refuses_and_cel() {
        // (replace this, with that, error contains)
        let cases: &[(&str, &str, &str)] = &[
            ("username: {claim: email, prefix: \"\"}", "username: {claim: email}", "jwt[0].claimMappings.username.prefix: Required value"),
            ("username: {claim: email, prefix: \"\"}", "username: {expression: claims.email}", "jwt[0].claimMappings.username.expression: Unsupported value: CEL"),
            ("groups: {claim: roles, prefix: \"idp:\"}", "groups: {claim: roles}", "jwt[0].claimMappings.groups.prefix: Required value"),
            ("- {claim: hd, requiredValue: example.com}", "- {expression: 'claims.hd == \"x\"'}", "jwt[0].claimValidationRules[0].expression: Unsupported value: CEL"),
            ("url: https://idp.example", "url: http://idp.example", "jwt[0].issuer.url: Invalid value: \"http://idp.example\": URL scheme must be https"),
            ("    audienceMatchPolicy: MatchAny\n", "", "audienceMatchPolicy must be MatchAny"),
            ("audiences: [a, b]", "audiences: []", "at least one issuer.audiences is required"),
            ("kind: AuthenticationConfiguration", "kind: Other", "no kind \"Other\""),
            ("  claimValidationRules:", "  bogusField: 1\n  claimValidationRules:", "unknown field"),
        ];
        for (from, to, want) in cases {
            let text = GOOD.replace(from, to);
            assert_ne!(text, GOOD, "{from}");
            let err = parse(text.as_bytes()).err().unwrap_or_default();
            assert!(err.contains(want), "{to}: {err}");
        }
    }
}
