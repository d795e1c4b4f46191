//! Authentication: who sent a request (kube-apiserver
//! `staging/src/k8s.io/apiserver/pkg/authentication`).
//!
//! An [`Authenticator`] looks at a request's credentials and answers with a
//! [`UserInfo`], with nothing (no credentials it knows), or with an error
//! (credentials it knows but refuses). Authenticators compose with
//! [`Union`]. The server builds, from top to bottom:
//!
//! ```text
//! Union::fail_on_error(               an error from the first part is final
//!     Union::new([                    first success wins, in kube's order:
//!         x509,                         client certificates
//!         token file,                   --token-auth-file
//!         service-account tokens,
//!         OIDC / JWT issuers,           --oidc-* or --authentication-config jwt:, one per issuer
//!         token webhook,                --authentication-token-webhook-config-file
//!     ]),
//!     anonymous (--anonymous-auth),   only for requests with no credentials at all
//! )
//! ```
//!
//! which is kube's shape (`pkg/kubeapiserver/authenticator` `Config.New`:
//! request header, x509, then the token authenticators in the order token
//! file, service accounts, bootstrap tokens, JWT issuers, webhook, in a
//! union, then anonymous behind `NewFailOnError`), so a bad certificate or
//! an unknown bearer token is 401 even on `/healthz`. A new authenticator
//! is a file in this folder and one more member of the first union; token
//! authenticators read the token with [`bearer_token`]. The HTTP filter
//! (`endpoints/filters/authentication.rs`) only calls this module.

pub mod anonymous;
pub mod config;
pub mod oidc;
pub mod service_account;
pub mod token_file;
pub mod webhook;
pub mod x509;

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;

/// The group every authenticated user is in (`user.AllAuthenticated`).
pub const ALL_AUTHENTICATED: &str = "system:authenticated";
/// The group of anonymous requests (`user.AllUnauthenticated`).
pub const ALL_UNAUTHENTICATED: &str = "system:unauthenticated";
/// The user name of anonymous requests (`user.Anonymous`).
pub const ANONYMOUS: &str = "system:anonymous";

/// The user name prefix of ServiceAccounts
/// (`serviceaccount.ServiceAccountUsernamePrefix`).
pub const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

/// The user name of a ServiceAccount (kube `serviceaccount.MakeUsername`).
pub fn service_account_user(namespace: &str, name: &str) -> String {
    format!("{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}")
}

/// Who made a request (kube's `user.Info` / `authentication.k8s.io`
/// `UserInfo`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserInfo {
    /// The user name (`kubernetes-admin`, `system:anonymous`).
    pub name: String,
    /// A unique id across time; empty when the authenticator has none (x509
    /// has none).
    pub uid: String,
    /// Groups, including [`ALL_AUTHENTICATED`] or [`ALL_UNAUTHENTICATED`].
    pub groups: Vec<String>,
    /// Extra attributes an authenticator supplies (scopes, node names);
    /// keys are lowercase by kube's convention.
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// The user of anonymous requests.
    pub fn anonymous() -> Self {
        UserInfo { name: ANONYMOUS.into(), groups: vec![ALL_UNAUTHENTICATED.into()], ..Default::default() }
    }

    /// The user as `authentication.k8s.io/v1` `UserInfo` JSON
    /// (`username`, `uid`, `groups`, `extra`; empty fields left out, as Go's
    /// `omitempty` does).
    pub fn to_json(&self) -> serde_json::Value {
        let mut m = serde_json::Map::new();
        m.insert("username".into(), self.name.clone().into());
        if !self.uid.is_empty() {
            m.insert("uid".into(), self.uid.clone().into());
        }
        if !self.groups.is_empty() {
            m.insert("groups".into(), self.groups.clone().into());
        }
        if !self.extra.is_empty() {
            m.insert("extra".into(), serde_json::json!(self.extra));
        }
        serde_json::Value::Object(m)
    }
}

/// The parts of a request authenticators read: headers (tokens), the
/// connection's client certificates (request extensions set by the server)
/// and the path.
#[derive(Debug, Clone, Copy)]
pub struct Credentials<'a> {
    /// Request headers.
    pub headers: &'a http::HeaderMap,
    /// Request extensions ([`x509::PeerCertificates`],
    /// [`x509::UnverifiedCertificate`]).
    pub extensions: &'a http::Extensions,
    /// The URL path.
    pub path: &'a str,
}

impl<'a> Credentials<'a> {
    /// The credentials of `req`.
    pub fn of<B>(req: &'a http::Request<B>) -> Self {
        Credentials { headers: req.headers(), extensions: req.extensions(), path: req.uri().path() }
    }
}

/// Why authentication failed. Every variant is a 401 to the client; the
/// text is for the server's log only.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A client certificate that is not signed by the client CA, or cannot
    /// be read.
    #[error("verifying certificate failed: {0}")]
    Certificate(String),
    /// A bearer token that no token authenticator knows (kube's
    /// `invalid bearer token`).
    #[error("invalid bearer token")]
    InvalidToken,
    /// A bearer token an authenticator recognised (its issuer, its
    /// webhook) but refused, with why.
    #[error("{0}")]
    Rejected(String),
    /// A token this server issued that it refuses (expired, for other
    /// audiences, its objects gone); the text says why, as TokenReview's
    /// `status.error` does.
    #[error("{0}")]
    Token(String),
    /// Several authenticators failed (a [`Union`] in which none succeeded).
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "))]
    All(Vec<Error>),
}

/// Result of this layer.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// One way of authenticating a request (kube's `authenticator.Request`).
#[async_trait]
pub trait Authenticator: Send + Sync {
    /// `Ok(Some(user))` when the request carries credentials this
    /// authenticator accepts, `Ok(None)` when it carries none it knows.
    ///
    /// # Errors
    /// Credentials that this authenticator knows but refuses.
    async fn authenticate(&self, req: &Credentials<'_>) -> Result<Option<UserInfo>>;
}

/// The token of an `Authorization: Bearer <token>` header (kube
/// `request/bearertoken`): the scheme in any case, the header trimmed; an
/// empty token or another scheme is no token.
pub fn bearer_token(headers: &http::HeaderMap) -> Option<&str> {
    let auth = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?.trim();
    let mut parts = auth.splitn(3, ' ');
    let scheme = parts.next()?;
    let token = parts.next()?;
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The last of the credential authenticators: a bearer token that none
/// before it accepted is an invalid token (kube's `bearertoken`
/// authenticator turns "not recognised" into `invalid bearer token`), so
/// it is a 401, never an anonymous request.
pub struct UnknownBearerToken;

#[async_trait]
impl Authenticator for UnknownBearerToken {
    async fn authenticate(&self, req: &Credentials<'_>) -> Result<Option<UserInfo>> {
        match bearer_token(req.headers) {
            Some(_) => Err(Error::InvalidToken),
            None => Ok(None),
        }
    }
}

/// Authenticators tried in order (kube's `union.New` and `NewFailOnError`).
pub struct Union {
    members: Vec<Arc<dyn Authenticator>>,
    fail_on_error: bool,
}

impl Union {
    /// The first member that recognises the request wins; errors are
    /// returned (all of them) only when no member succeeds.
    pub fn new(members: Vec<Arc<dyn Authenticator>>) -> Self {
        Union { members, fail_on_error: false }
    }

    /// Like [`Union::new`], but the first error ends the search: what comes
    /// after (anonymous) is tried only when the members before it found no
    /// credentials at all.
    pub fn fail_on_error(members: Vec<Arc<dyn Authenticator>>) -> Self {
        Union { members, fail_on_error: true }
    }
}

#[async_trait]
impl Authenticator for Union {
    async fn authenticate(&self, req: &Credentials<'_>) -> Result<Option<UserInfo>> {
        let mut errors = Vec::new();
        for m in &self.members {
            match m.authenticate(req).await {
                Ok(Some(user)) => return Ok(Some(user)),
                Ok(None) => {}
                Err(e) if self.fail_on_error => return Err(e),
                Err(e) => errors.push(e),
            }
        }
        match errors.len() {
            0 => Ok(None),
            1 => Err(errors.remove(0)),
            _ => Err(Error::All(errors)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An authenticator with a fixed answer.
    struct Fixed(std::result::Result<Option<&'static str>, &'static str>);

    #[async_trait]
    impl Authenticator for Fixed {
        async fn authenticate(&self, _req: &Credentials<'_>) -> Result<Option<UserInfo>> {
            match self.0 {
                Ok(name) => Ok(name.map(|n| UserInfo { name: n.into(), ..Default::default() })),
                Err(e) => Err(Error::Certificate(e.into())),
            }
        }
    }

    fn fixed(a: std::result::Result<Option<&'static str>, &'static str>) -> Arc<dyn Authenticator> {
        Arc::new(Fixed(a))
    }

    #[tokio::test]
    async fn unions_as_kube() {
        let req = http::Request::new(());
        let creds = Credentials::of(&req);
        // (members, fail on error, want user name or error)
        type Case = (Vec<std::result::Result<Option<&'static str>, &'static str>>, bool, std::result::Result<Option<&'static str>, ()>);
        let cases: Vec<Case> = vec![
            (vec![], false, Ok(None)),
            (vec![Ok(None), Ok(Some("a")), Ok(Some("b"))], false, Ok(Some("a"))),
            (vec![Err("bad"), Ok(Some("b"))], false, Ok(Some("b"))),
            (vec![Err("bad"), Ok(None)], false, Err(())),
            (vec![Err("bad"), Ok(Some("anon"))], true, Err(())),
            (vec![Ok(None), Ok(Some("anon"))], true, Ok(Some("anon"))),
        ];
        for (members, fail, want) in cases {
            let members: Vec<_> = members.into_iter().map(fixed).collect();
            let u = if fail { Union::fail_on_error(members) } else { Union::new(members) };
            let got = u.authenticate(&creds).await;
            let got = got.map(|o| o.map(|u| u.name)).map_err(|_| ());
            assert_eq!(got, want.map(|o| o.map(String::from)));
        }
    }

    #[test]
    fn user_info_json_leaves_out_empty_fields() {
        let u = UserInfo { name: "a".into(), groups: vec![ALL_AUTHENTICATED.into()], ..Default::default() };
        assert_eq!(u.to_json(), serde_json::json!({"username": "a", "groups": ["system:authenticated"]}));
        let mut u = UserInfo { name: "b".into(), uid: "1".into(), ..Default::default() };
        u.extra.insert("scopes".into(), vec!["x".into()]);
        assert_eq!(u.to_json(), serde_json::json!({"username": "b", "uid": "1", "extra": {"scopes": ["x"]}}));
    }
}
