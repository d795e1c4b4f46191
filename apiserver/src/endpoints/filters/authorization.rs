//! The authorization filter (kube `filters/authorization.go`). For now every
//! authenticated request is allowed (kube's `AlwaysAllow` mode); RBAC slots
//! in behind the [`Authorizer`] trait.

use std::sync::Arc;

use super::super::{responses, BoxFuture, Handler, Request, Response};
use crate::authn::UserInfo;
use super::request_info::RequestInfo;
use crate::errors::Status;

/// An authorization decision (`authorizer.Decision`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Allowed.
    Allow,
    /// Denied, with the reason shown to the user.
    Deny(String),
    /// No opinion; the next authorizer decides.
    NoOpinion,
}

/// Decides whether a user may do what a request asks.
pub trait Authorizer: Send + Sync {
    /// The decision for `user` doing `info`.
    fn authorize(&self, user: &UserInfo, info: &RequestInfo) -> Decision;
}

/// Allows everything (`--authorization-mode=AlwaysAllow`).
pub struct AlwaysAllow;

impl Authorizer for AlwaysAllow {
    fn authorize(&self, _user: &UserInfo, _info: &RequestInfo) -> Decision {
        Decision::Allow
    }
}

/// kube's Forbidden message for a resource request.
fn forbidden(user: &UserInfo, info: &RequestInfo, reason: &str) -> Status {
    let mut msg = if info.is_resource_request {
        let res = if info.subresource.is_empty() { info.resource.clone() } else { format!("{}/{}", info.resource, info.subresource) };
        let mut m = format!("{} is forbidden: User {:?} cannot {} resource {:?} in API group {:?}", crate::errors::qualified(&info.api_group, &info.resource), user.name, info.verb, res, info.api_group);
        if !info.namespace.is_empty() {
            m.push_str(&format!(" in the namespace {:?}", info.namespace));
        } else {
            m.push_str(" at the cluster scope");
        }
        m
    } else {
        format!("forbidden: User {:?} cannot {} path {:?}", user.name, info.verb, info.path)
    };
    if !reason.is_empty() {
        msg.push_str(&format!(": {reason}"));
    }
    Status::forbidden(&info.api_group, &info.resource, &info.name, msg)
}

/// The filter.
pub struct WithAuthorization {
    next: Arc<dyn Handler>,
    authorizers: Vec<Box<dyn Authorizer>>,
}

impl WithAuthorization {
    /// Wraps `next`, asking `authorizers` in order.
    pub fn wrap(next: Arc<dyn Handler>, authorizers: Vec<Box<dyn Authorizer>>) -> Arc<dyn Handler> {
        Arc::new(WithAuthorization { next, authorizers })
    }
}

impl Handler for WithAuthorization {
    fn call(&self, req: Request) -> BoxFuture<'_, Response> {
        let user = req.extensions().get::<UserInfo>().cloned().unwrap_or_default();
        let info = req.extensions().get::<RequestInfo>().cloned().unwrap_or_default();
        for a in &self.authorizers {
            match a.authorize(&user, &info) {
                Decision::Allow => return self.next.call(req),
                Decision::Deny(reason) => {
                    let s = forbidden(&user, &info, &reason);
                    return Box::pin(async move { responses::status(&s) });
                }
                Decision::NoOpinion => {}
            }
        }
        let s = forbidden(&user, &info, "");
        Box::pin(async move { responses::status(&s) })
    }
}
