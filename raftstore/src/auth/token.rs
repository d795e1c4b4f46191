//! Auth tokens (etcd `auth/simple_token.go`, `auth/jwt.go`), chosen by
//! etcd's `--auth-token` flag.
//!
//! - `simple` (the default): a random 16-letter prefix chosen by the member
//!   that took the `Authenticate` call, a dot, and the Raft log index of the
//!   `Authenticate` entry, e.g. `hPrOaZdUdpGPYvKA.14`. Every member applies
//!   that entry and records the token in its own memory, so a token works
//!   on every member (one that has not applied the entry yet waits for it),
//!   and none survives a restart. A token lapses after `--auth-token-ttl`
//!   (default 300 s) without use on that member; each use restarts the
//!   clock. Deleting a user or changing their password drops their tokens,
//!   and disabling auth drops all.
//! - `jwt,pub-key=FILE,priv-key=FILE,sign-method=RS256,ttl=5m`: a signed
//!   JSON Web Token whose claims are `username`, `revision` (the auth
//!   revision when it was issued) and `exp` (Unix seconds). Any member
//!   with the key verifies it without state. Sign methods: RS256/384/512,
//!   PS256/384/512, ES256/384 (keys in PEM; an EC private key must be
//!   PKCS#8), HS256/384/512 (the `priv-key` file's bytes are the secret).
//!   Without `pub-key` the public key comes from the private one; without
//!   `priv-key` the member only verifies tokens.

use std::collections::HashMap;
use std::str::FromStr;
use std::time::{Duration, Instant};

use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey, EncodingKey, Header, Validation};
use parking_lot::Mutex;
use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// etcd's default `--auth-token-ttl` and JWT `ttl`.
pub const DEFAULT_TTL: Duration = Duration::from_secs(300);

/// Letters of a simple token's random prefix (etcd's alphabet).
const LETTERS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
/// Length of a simple token's random prefix.
const PREFIX_LEN: usize = 16;

/// The token kind of this member; see the module doc.
pub enum TokenProvider {
    /// Simple tokens, kept in this member's memory.
    Simple(SimpleTokens),
    /// Signed JWTs.
    Jwt(Box<JwtTokens>),
}

/// Simple tokens: token → (user name, when it lapses).
pub struct SimpleTokens {
    ttl: Duration,
    tokens: Mutex<HashMap<String, (String, Instant)>>,
}

/// JWT keys and lifetime.
pub struct JwtTokens {
    alg: Algorithm,
    sign: Option<EncodingKey>,
    verify: DecodingKey,
    ttl: Duration,
}

#[derive(Serialize, Deserialize)]
struct Claims {
    username: String,
    revision: u64,
    exp: u64,
}

fn bad(msg: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("--auth-token: {msg}"))
}

impl TokenProvider {
    /// Simple tokens that lapse after `ttl` without use.
    pub fn simple(ttl: Duration) -> Self {
        let ttl = if ttl.is_zero() { DEFAULT_TTL } else { ttl };
        TokenProvider::Simple(SimpleTokens { ttl, tokens: Mutex::new(HashMap::new()) })
    }

    /// Parses etcd's `--auth-token` value (`simple`, or `jwt,` followed by
    /// `key=value` options) and reads the key files.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an unknown kind or option, a repeated
    /// option, a sign method other than those above, or unreadable or
    /// malformed keys.
    pub fn from_flag(spec: &str, simple_ttl: Duration) -> Result<Self> {
        let mut parts = spec.split(',');
        let kind = parts.next().unwrap_or_default();
        let mut opts: HashMap<&str, &str> = HashMap::new();
        for p in parts {
            let Some((k, v)) = p.split_once('=') else { return Err(bad(format!("invalid auth options {spec:?}"))) };
            if opts.insert(k, v).is_some() {
                return Err(bad(format!("invalid auth options {spec:?}: {k} given twice")));
            }
        }
        match kind {
            "simple" => Ok(TokenProvider::simple(simple_ttl)),
            "jwt" => Ok(TokenProvider::Jwt(Box::new(JwtTokens::from_options(&opts)?))),
            other => Err(bad(format!("unknown token type {other:?} (want simple or jwt)"))),
        }
    }

    /// A fresh random prefix for a simple token; empty for JWT.
    pub fn new_prefix(&self) -> String {
        match self {
            TokenProvider::Simple(_) => {
                let mut rng = rand::rng();
                (0..PREFIX_LEN).map(|_| LETTERS[rng.random_range(0..LETTERS.len())] as char).collect()
            }
            TokenProvider::Jwt(_) => String::new(),
        }
    }

    /// Issues a token to `user`, at auth `revision`, for the
    /// `Authenticate` entry at log `index` whose simple-token prefix is
    /// `prefix`.
    ///
    /// # Errors
    /// [`Error::Internal`] when a JWT cannot be signed (no private key).
    pub fn assign(&self, user: &str, revision: u64, prefix: &str, index: u64) -> Result<String> {
        match self {
            TokenProvider::Simple(s) => {
                let token = format!("{prefix}.{index}");
                let mut tokens = s.tokens.lock();
                let now = Instant::now();
                tokens.retain(|_, (_, until)| *until > now);
                tokens.insert(token.clone(), (user.to_string(), now + s.ttl));
                Ok(token)
            }
            TokenProvider::Jwt(j) => j.sign(user, revision),
        }
    }

    /// The user a token names, and for a JWT the auth revision in it;
    /// `None` for an unknown, lapsed or forged token. A simple token's
    /// clock restarts.
    pub fn lookup(&self, token: &str) -> Option<(String, Option<u64>)> {
        match self {
            TokenProvider::Simple(s) => {
                let mut tokens = s.tokens.lock();
                let now = Instant::now();
                match tokens.get_mut(token) {
                    Some((user, until)) if *until > now => {
                        *until = now + s.ttl;
                        Some((user.clone(), None))
                    }
                    Some(_) => {
                        tokens.remove(token);
                        None
                    }
                    None => None,
                }
            }
            TokenProvider::Jwt(j) => j.verify(token).map(|c| (c.username, Some(c.revision))),
        }
    }

    /// The log index a simple token was issued at, which a member must
    /// have applied before it can know the token; `None` for JWTs.
    pub fn simple_index(&self, token: &str) -> Option<u64> {
        match self {
            TokenProvider::Simple(_) => token.rsplit_once('.').and_then(|(_, i)| i.parse().ok()),
            TokenProvider::Jwt(_) => None,
        }
    }

    /// Drops the simple tokens of `user` (deleted, or a new password).
    pub fn invalidate_user(&self, user: &str) {
        if let TokenProvider::Simple(s) = self {
            s.tokens.lock().retain(|_, (u, _)| u != user);
        }
    }

    /// Drops every simple token (auth disabled).
    pub fn clear(&self) {
        if let TokenProvider::Simple(s) = self {
            s.tokens.lock().clear();
        }
    }
}

impl JwtTokens {
    fn from_options(opts: &HashMap<&str, &str>) -> Result<Self> {
        for k in opts.keys() {
            if !matches!(*k, "pub-key" | "priv-key" | "sign-method" | "ttl") {
                tracing::warn!("unknown JWT option {k:?} ignored");
            }
        }
        let method = opts.get("sign-method").copied().unwrap_or_default();
        let alg = Algorithm::from_str(method).map_err(|_| bad(format!("invalid auth signature method {method:?}")))?;
        let ttl = match opts.get("ttl") {
            Some(t) if !t.is_empty() => humantime::parse_duration(t).map_err(|e| bad(format!("invalid JWT ttl {t:?}: {e}")))?,
            _ => DEFAULT_TTL,
        };
        let read = |k: &str| -> Result<Option<Vec<u8>>> {
            match opts.get(k) {
                Some(path) if !path.is_empty() => std::fs::read(path).map(Some).map_err(|e| bad(format!("{k} {path}: {e}"))),
                _ => Ok(None),
            }
        };
        let (public, private) = (read("pub-key")?, read("priv-key")?);
        let key_err = |e: jsonwebtoken::errors::Error| bad(format!("invalid JWT key: {e}"));
        let sign = match (&private, alg.family()) {
            (None, _) => None,
            (Some(p), AlgorithmFamily::Rsa) => Some(EncodingKey::from_rsa_pem(p).map_err(key_err)?),
            (Some(p), AlgorithmFamily::Ec) => Some(EncodingKey::from_ec_pem(p).map_err(|e| {
                // jsonwebtoken reads PKCS#8 only; `openssl ecparam -genkey`
                // writes SEC1, which etcd (Go) also reads.
                let hint = if String::from_utf8_lossy(p).contains("BEGIN EC PRIVATE KEY") { " (an EC private key must be PKCS#8 here: convert it with `openssl pkcs8 -topk8 -nocrypt`)" } else { "" };
                bad(format!("invalid JWT key: {e}{hint}"))
            })?),
            (Some(p), AlgorithmFamily::Hmac) => Some(EncodingKey::from_secret(p).map_err(key_err)?),
            (Some(_), AlgorithmFamily::Ed) => return Err(bad(format!("unsupported signing method {method}"))),
        };
        let verify = match (&public, &sign, alg.family()) {
            (_, Some(_), AlgorithmFamily::Hmac) | (Some(_), None, AlgorithmFamily::Hmac) => DecodingKey::from_secret(private.as_deref().unwrap_or_default()).map_err(key_err)?,
            (Some(p), _, AlgorithmFamily::Rsa) => DecodingKey::from_rsa_pem(p).map_err(key_err)?,
            (Some(p), _, AlgorithmFamily::Ec) => DecodingKey::from_ec_pem(p).map_err(key_err)?,
            (None, Some(s), family) => public_from_private(s, alg, family).map_err(key_err)?,
            _ => return Err(bad("auth: missing key data")),
        };
        Ok(JwtTokens { alg, sign, verify, ttl })
    }

    fn sign(&self, user: &str, revision: u64) -> Result<String> {
        let Some(key) = &self.sign else { return Err(Error::internal("auth: token signing attempted with verify-only key")) };
        let exp = jsonwebtoken::get_current_timestamp() + self.ttl.as_secs();
        jsonwebtoken::encode(&Header::new(self.alg), &Claims { username: user.to_string(), revision, exp }, key).map_err(Error::internal)
    }

    fn verify(&self, token: &str) -> Option<Claims> {
        let mut v = Validation::new(self.alg);
        v.leeway = 0;
        jsonwebtoken::decode::<Claims>(token, &self.verify, &v).ok().map(|d| d.claims)
    }
}

/// The verifying key of a private RSA or EC key.
fn public_from_private(key: &EncodingKey, alg: Algorithm, family: AlgorithmFamily) -> jsonwebtoken::errors::Result<DecodingKey> {
    let provider = jsonwebtoken::crypto::CryptoProvider::try_get_default().ok_or(jsonwebtoken::errors::ErrorKind::InvalidKeyFormat)?;
    match family {
        AlgorithmFamily::Rsa => {
            let (n, e) = (provider.key_utils.rsa_pub_components_from_private_key)(key.as_bytes())?;
            Ok(DecodingKey::from_rsa_raw_components(&n, &e))
        }
        _ => {
            let (_, x, y) = (provider.key_utils.ec_pub_components_from_private_key)(key.as_bytes(), alg)?;
            let mut point = vec![4u8];
            point.extend_from_slice(&x);
            point.extend_from_slice(&y);
            Ok(DecodingKey::from_ec_der(&point))
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn simple_tokens_lapse_and_are_dropped_with_their_user() {
        let t = TokenProvider::simple(Duration::from_millis(200));
        let prefix = t.new_prefix();
        assert_eq!(prefix.len(), 16);
        let a = t.assign("alice", 1, &prefix, 14).unwrap();
        assert_eq!(a, format!("{prefix}.14"));
        assert_eq!(t.simple_index(&a), Some(14));
        let b = t.assign("bob", 1, &t.new_prefix(), 15).unwrap();
        assert_eq!(t.lookup(&a), Some(("alice".into(), None)));
        t.invalidate_user("alice");
        assert_eq!(t.lookup(&a), None);
        assert!(t.lookup(&b).is_some());
        std::thread::sleep(Duration::from_millis(250));
        assert_eq!(t.lookup(&b), None, "lapsed");
        assert_eq!(t.lookup("nonsense"), None);
    }

    #[test]
    fn bad_flags_are_refused() {
        for spec in ["nope", "jwt,sign-method=XX256", "jwt,sign-method", "jwt,ttl=1s,ttl=2s", "jwt,sign-method=RS256"] {
            assert!(TokenProvider::from_flag(spec, DEFAULT_TTL).is_err(), "{spec}");
        }
        assert!(matches!(TokenProvider::from_flag("simple", DEFAULT_TTL), Ok(TokenProvider::Simple(_))));
    }

    #[test]
    fn jwts_carry_user_and_revision_and_expire() {
        let dir = tempfile::tempdir().unwrap();
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let priv_path = dir.path().join("k.pem");
        std::fs::write(&priv_path, key.serialize_pem()).unwrap();
        let spec = format!("jwt,priv-key={},sign-method=ES256,ttl=1s", priv_path.display());
        let t = TokenProvider::from_flag(&spec, DEFAULT_TTL).unwrap();
        let tok = t.assign("alice", 7, "", 3).unwrap();
        assert_eq!(t.lookup(&tok), Some(("alice".into(), Some(7))));
        assert_eq!(t.lookup(&format!("{tok}x")), None, "forged");
        // A key of its own does not verify another member's signature.
        let other = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        std::fs::write(&priv_path, other.serialize_pem()).unwrap();
        assert_eq!(TokenProvider::from_flag(&spec, DEFAULT_TTL).unwrap().lookup(&tok), None);
        std::thread::sleep(Duration::from_millis(2100));
        assert_eq!(t.lookup(&tok), None, "expired");
    }
}
