//! Anonymous requests to the public info paths (kube's anonymous
//! authenticator, limited to what kube's `system:public-info-viewer` role
//! opens to everyone: `/healthz`, `/livez`, `/readyz`, `/version` and what
//! lies under them). Any other request without credentials stays
//! unauthenticated (401), since there is no authorizer yet that would refuse
//! an anonymous user.

use async_trait::async_trait;

use super::{Authenticator, Credentials, Result, UserInfo};

const PUBLIC_PATHS: &[&str] = &["/healthz", "/livez", "/readyz", "/version"];

/// Whether `path` is a public info path or under one.
pub fn is_public(path: &str) -> bool {
    PUBLIC_PATHS.iter().any(|p| path == *p || path.strip_prefix(p).is_some_and(|rest| rest.starts_with('/')))
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
