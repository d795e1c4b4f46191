//! Anonymous requests (kube's anonymous authenticator,
//! `--anonymous-auth`): a request that carries no credentials at all is the
//! user `system:anonymous` in the group `system:unauthenticated`
//! ([`Anonymous`]), and the authorizer decides what it may do; kube's
//! bootstrap policy lets it read `/healthz`, `/livez`, `/readyz` and
//! `/version` only.
//!
//! kube switches anonymous access off when `AlwaysAllow` is a mode (it
//! would otherwise open everything to everyone). This server then keeps
//! [`PublicInfo`]: anonymous requests to those four paths (and what lies
//! under them) only, so health checks need no certificate; every other
//! request without credentials is 401.

use async_trait::async_trait;

use super::{Authenticator, Credentials, Result, UserInfo};

const PUBLIC_PATHS: &[&str] = &["/healthz", "/livez", "/readyz", "/version"];

/// Whether `path` is a public info path or under one.
pub fn is_public(path: &str) -> bool {
    PUBLIC_PATHS.iter().any(|p| path == *p || path.strip_prefix(p).is_some_and(|rest| rest.starts_with('/')))
}

/// [`UserInfo::anonymous`] for every request that reaches it (it comes
/// last, after the authenticators of credentials found none).
pub struct Anonymous;

#[async_trait]
impl Authenticator for Anonymous {
    async fn authenticate(&self, _req: &Credentials<'_>) -> Result<Option<UserInfo>> {
        Ok(Some(UserInfo::anonymous()))
    }
}

/// [`UserInfo::anonymous`] for requests to the public info paths.
pub struct PublicInfo;

#[async_trait]
impl Authenticator for PublicInfo {
    async fn authenticate(&self, req: &Credentials<'_>) -> Result<Option<UserInfo>> {
        Ok(is_public(req.path).then(UserInfo::anonymous))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn public_paths() {
        for (p, want) in [("/healthz", true), ("/readyz/etcd", true), ("/version", true), ("/versions", false), ("/api", false), ("/", false)] {
            assert_eq!(super::is_public(p), want, "{p}");
        }
    }
}
