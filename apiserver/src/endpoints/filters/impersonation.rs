//! The impersonation filter (kube `filters/impersonation.go`): a request
//! with `Impersonate-User` (and optionally `Impersonate-Group`,
//! `Impersonate-Uid`, `Impersonate-Extra-<key>`) runs as that user once
//! the authorizer allows its sender the `impersonate` verb on each:
//!
//! | header | resource (group) | name |
//! |---|---|---|
//! | `Impersonate-User: system:serviceaccount:ns:sa` | `serviceaccounts` (core), namespace `ns` | `sa` |
//! | `Impersonate-User: bob` | `users` (core) | `bob` |
//! | `Impersonate-Group: g` | `groups` (core) | `g` |
//! | `Impersonate-Extra-<key>: v` | `userextras/<key>` (`authentication.k8s.io`) | `v` |
//! | `Impersonate-Uid: u` | `uids` (`authentication.k8s.io`) | `u` |
//!
//! The first refusal is a 403 in the authorization filter's words. The
//! impersonated user gets `system:authenticated` unless a group says
//! otherwise, and a ServiceAccount without groups gets its fixed groups.
//! The audit record (made before this filter, with the sender as its
//! user) gets the impersonated user as `impersonatedUser`.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::super::{responses, BoxFuture, Handler, Request, Response};
use crate::authn::{UserInfo, ALL_AUTHENTICATED, ALL_UNAUTHENTICATED, ANONYMOUS, SERVICE_ACCOUNT_PREFIX};
use crate::authz::{Attributes, Authorizer, Decision};
use crate::errors::{ForbiddenRequest, Status};

const USER: &str = "impersonate-user";
const UID: &str = "impersonate-uid";
const GROUP: &str = "impersonate-group";
const EXTRA_PREFIX: &str = "impersonate-extra-";
const AUTHENTICATION_GROUP: &str = "authentication.k8s.io";

/// One thing the sender asks to act as, with the attributes the
/// authorizer checks for it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Ask {
    group: &'static str,
    resource: &'static str,
    subresource: String,
    namespace: String,
    name: String,
}

impl Ask {
    fn new(group: &'static str, resource: &'static str, name: &str) -> Self {
        Ask { group, resource, subresource: String::new(), namespace: String::new(), name: name.to_string() }
    }
}

/// kube `unescapeExtraKey`: the key is percent-decoded when that works.
fn unescape(key: &str) -> String {
    let bytes = key.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = key.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok());
            let Some(b) = hex else { return key.to_string() };
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap_or_else(|_| key.to_string())
}

fn values<'a>(headers: &'a http::HeaderMap, name: &str) -> Vec<&'a str> {
    headers.get_all(name).iter().filter_map(|v| v.to_str().ok()).collect()
}

/// The impersonated user and what must be allowed for it, or `None`
/// without impersonation headers (kube `buildImpersonationRequests` and
/// the filter's loop).
///
/// # Errors
/// A 400 for groups, extras or a uid without a user.
fn impersonation(headers: &http::HeaderMap) -> Result<Option<(UserInfo, Vec<Ask>)>, Status> {
    // A header we cannot read must not be dropped (the request would run
    // as the sender, who meant to give up rights).
    for (name, value) in headers {
        let n = name.as_str();
        if (n == USER || n == GROUP || n == UID || n.starts_with(EXTRA_PREFIX)) && value.to_str().is_err() {
            return Err(Status::bad_request(format!("invalid impersonation header {n}: not visible ASCII")));
        }
    }
    let user = values(headers, USER).first().copied().unwrap_or("");
    let groups = values(headers, GROUP);
    let uid = values(headers, UID).first().copied().unwrap_or("");
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, value) in headers {
        if let Some(key) = name.as_str().strip_prefix(EXTRA_PREFIX) {
            if let Ok(v) = value.to_str() {
                extra.entry(unescape(key)).or_default().push(v.to_string());
            }
        }
    }
    if user.is_empty() {
        if groups.is_empty() && extra.is_empty() && uid.is_empty() {
            return Ok(None);
        }
        return Err(Status::bad_request("requested impersonation of groups, extra fields or a uid without impersonating a user"));
    }
    let mut asks = Vec::new();
    let mut out = UserInfo { name: user.to_string(), uid: uid.to_string(), ..Default::default() };
    let sa = user.strip_prefix(SERVICE_ACCOUNT_PREFIX).and_then(|rest| rest.split_once(':')).filter(|(ns, name)| !ns.is_empty() && !name.is_empty() && !name.contains(':'));
    match sa {
        Some((ns, name)) => {
            asks.push(Ask { namespace: ns.to_string(), ..Ask::new("", "serviceaccounts", name) });
            if groups.is_empty() {
                out.groups = vec!["system:serviceaccounts".into(), format!("system:serviceaccounts:{ns}")];
            }
        }
        None => asks.push(Ask::new("", "users", user)),
    }
    for g in &groups {
        asks.push(Ask::new("", "groups", g));
        out.groups.push(g.to_string());
    }
    for (key, vals) in &extra {
        for v in vals {
            asks.push(Ask { subresource: key.clone(), ..Ask::new(AUTHENTICATION_GROUP, "userextras", v) });
        }
    }
    if !uid.is_empty() {
        asks.push(Ask::new(AUTHENTICATION_GROUP, "uids", uid));
    }
    out.extra = extra;
    if out.name != ANONYMOUS {
        if !out.groups.iter().any(|g| g == ALL_AUTHENTICATED || g == ALL_UNAUTHENTICATED) {
            out.groups.push(ALL_AUTHENTICATED.into());
        }
    } else if !out.groups.iter().any(|g| g == ALL_UNAUTHENTICATED) {
        out.groups.push(ALL_UNAUTHENTICATED.into());
    }
    Ok(Some((out, asks)))
}

/// The filter.
pub struct WithImpersonation {
    next: Arc<dyn Handler>,
    authorizer: Arc<dyn Authorizer>,
}

impl WithImpersonation {
    /// Wraps `next`, asking `authorizer` whether the sender may
    /// impersonate.
    pub fn wrap(next: Arc<dyn Handler>, authorizer: Arc<dyn Authorizer>) -> Arc<dyn Handler> {
        Arc::new(WithImpersonation { next, authorizer })
    }
}

impl Handler for WithImpersonation {
    fn call(&self, mut req: Request) -> BoxFuture<'_, Response> {
        Box::pin(async move {
            let (user, asks) = match impersonation(req.headers()) {
                Ok(Some(found)) => found,
                Ok(None) => return self.next.call(req).await,
                Err(s) => return responses::status(&s),
            };
            let sender = req.extensions().get::<UserInfo>().cloned().unwrap_or_default();
            for ask in &asks {
                let attrs = Attributes {
                    user: &sender,
                    verb: "impersonate",
                    resource_request: true,
                    path: req.uri().path(),
                    namespace: &ask.namespace,
                    api_group: ask.group,
                    api_version: "v1",
                    resource: ask.resource,
                    subresource: &ask.subresource,
                    name: &ask.name,
                };
                let reason = match self.authorizer.authorize(&attrs).await {
                    Ok(a) if a.decision == Decision::Allow => continue,
                    Ok(a) => a.reason,
                    Err(e) => {
                        tracing::warn!("authorizing impersonation of {} {:?}: {e}", ask.resource, ask.name);
                        String::new()
                    }
                };
                let denied = ForbiddenRequest {
                    user: &sender.name,
                    verb: "impersonate",
                    group: ask.group,
                    resource: ask.resource,
                    subresource: &ask.subresource,
                    namespace: &ask.namespace,
                    name: &ask.name,
                    path: None,
                };
                return responses::status(&Status::forbidden_request(&denied, &reason));
            }
            let names: Vec<http::HeaderName> = req.headers().keys().filter(|k| k.as_str().starts_with("impersonate-")).cloned().collect();
            for n in names {
                req.headers_mut().remove(n);
            }
            if let Some(audit) = crate::audit::AuditContext::of(req.extensions()) {
                audit.log_impersonated_user(&user);
            }
            req.extensions_mut().insert(user);
            self.next.call(req).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> http::HeaderMap {
        let mut h = http::HeaderMap::new();
        for (k, v) in pairs {
            if let (Ok(k), Ok(v)) = (http::HeaderName::from_bytes(k.as_bytes()), http::HeaderValue::from_str(v)) {
                h.append(k, v);
            }
        }
        h
    }

    #[test]
    fn builds_the_impersonated_user_as_kube() {
        assert_eq!(impersonation(&headers(&[])).ok(), Some(None));
        assert!(impersonation(&headers(&[("Impersonate-Group", "g")])).is_err());

        let Ok(Some((u, asks))) = impersonation(&headers(&[("Impersonate-User", "bob")])) else { panic!("bob") };
        assert_eq!((u.name.as_str(), u.groups.clone()), ("bob", vec![ALL_AUTHENTICATED.to_string()]));
        assert_eq!(asks, vec![Ask::new("", "users", "bob")]);

        let h = headers(&[("Impersonate-User", "bob"), ("Impersonate-Group", "dev"), ("Impersonate-Group", "ops"), ("Impersonate-Extra-Scopes%2Fa", "x"), ("Impersonate-Uid", "7")]);
        let Ok(Some((u, asks))) = impersonation(&h) else { panic!("bob with groups") };
        assert_eq!(u.groups, vec!["dev".to_string(), "ops".into(), ALL_AUTHENTICATED.into()]);
        assert_eq!(u.extra.get("scopes/a"), Some(&vec!["x".to_string()]));
        assert_eq!(u.uid, "7");
        let resources: Vec<(&str, &str, &str)> = asks.iter().map(|a| (a.resource, a.subresource.as_str(), a.name.as_str())).collect();
        assert_eq!(resources, vec![("users", "", "bob"), ("groups", "", "dev"), ("groups", "", "ops"), ("userextras", "scopes/a", "x"), ("uids", "", "7")]);

        let Ok(Some((u, asks))) = impersonation(&headers(&[("Impersonate-User", "system:serviceaccount:default:builder")])) else { panic!("sa") };
        assert_eq!(u.groups, vec!["system:serviceaccounts".to_string(), "system:serviceaccounts:default".into(), ALL_AUTHENTICATED.into()]);
        assert_eq!(asks, vec![Ask { namespace: "default".into(), ..Ask::new("", "serviceaccounts", "builder") }]);

        let Ok(Some((u, _))) = impersonation(&headers(&[("Impersonate-User", ANONYMOUS)])) else { panic!("anonymous") };
        assert_eq!(u.groups, vec![ALL_UNAUTHENTICATED.to_string()]);
    }
}
