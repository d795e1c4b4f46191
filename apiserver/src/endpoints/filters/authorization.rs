//! The authorization filter (kube `filters/authorization.go`): asks the
//! [`Authorizer`](crate::authz::Authorizer) about the request's user and
//! request info, and answers 403 Forbidden unless it is allowed. What is
//! allowed is [`crate::authz`]'s business. An audited request gets kube's
//! annotations `authorization.k8s.io/decision` (`allow` or `forbid`) and
//! `authorization.k8s.io/reason` (the authorizer's reason, maybe empty).

use std::sync::Arc;

use super::super::{responses, BoxFuture, Handler, Request, Response};
use super::request_info::RequestInfo;
use crate::authn::UserInfo;
use crate::authz::{Attributes, Authorizer, Decision};
use crate::errors::{ForbiddenRequest, Status};

/// The authorizer attributes of a request.
pub fn attributes<'a>(user: &'a UserInfo, info: &'a RequestInfo) -> Attributes<'a> {
    Attributes {
        user,
        verb: &info.verb,
        resource_request: info.is_resource_request,
        path: &info.path,
        namespace: &info.namespace,
        api_group: &info.api_group,
        api_version: &info.api_version,
        resource: &info.resource,
        subresource: &info.subresource,
        name: &info.name,
    }
}

/// The filter.
pub struct WithAuthorization {
    next: Arc<dyn Handler>,
    authorizer: Arc<dyn Authorizer>,
}

impl WithAuthorization {
    /// Wraps `next`, asking `authorizer`.
    pub fn wrap(next: Arc<dyn Handler>, authorizer: Arc<dyn Authorizer>) -> Arc<dyn Handler> {
        Arc::new(WithAuthorization { next, authorizer })
    }
}

impl Handler for WithAuthorization {
    fn call(&self, req: Request) -> BoxFuture<'_, Response> {
        Box::pin(async move {
            let user = req.extensions().get::<UserInfo>().cloned().unwrap_or_default();
            let info = req.extensions().get::<RequestInfo>().cloned().unwrap_or_default();
            let attrs = attributes(&user, &info);
            let audit = crate::audit::AuditContext::of(req.extensions()).cloned();
            let reason = match self.authorizer.authorize(&attrs).await {
                Ok(a) if a.decision == Decision::Allow => {
                    if let Some(audit) = audit {
                        audit.add_annotation(crate::audit::DECISION_ANNOTATION, "allow");
                        audit.add_annotation(crate::audit::REASON_ANNOTATION, &a.reason);
                    }
                    return self.next.call(req).await;
                }
                Ok(a) => a.reason,
                Err(e) => {
                    tracing::warn!("authorization of {} {}: {e}", info.verb, info.path);
                    String::new()
                }
            };
            if let Some(audit) = audit {
                audit.add_annotation(crate::audit::DECISION_ANNOTATION, "forbid");
                audit.add_annotation(crate::audit::REASON_ANNOTATION, &reason);
            }
            let denied = ForbiddenRequest {
                user: &user.name,
                verb: &info.verb,
                group: &info.api_group,
                resource: &info.resource,
                subresource: &info.subresource,
                namespace: &info.namespace,
                name: &info.name,
                path: (!info.is_resource_request).then_some(info.path.as_str()),
            };
            responses::status(&Status::forbidden_request(&denied, &reason))
        })
    }
}
