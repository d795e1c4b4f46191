//! Auditing of failed authentication (kube
//! `filters/authn_audit.go`, `WithFailedAuthenticationAudit`): a request
//! that gets 401 has no user, so the audit filter never sees it; this
//! wraps the 401 answer instead and records one `ResponseStarted` event
//! with an empty user, the code and a message naming the credentials that
//! were tried (`Authentication failed, attempted: bearer`, `…, no
//! credentials provided`), when the policy records the request with no
//! user (rules naming users or groups do not match it).

use std::sync::Arc;

use super::super::{BoxFuture, Handler, Request, Response};
use super::audit::new_event;
use super::authorization::attributes;
use super::request_info::RequestInfo;
use crate::audit::event::ResponseStatus;
use crate::audit::{AuditContext, Auditor, Level, Stage};
use crate::authn::x509::{PeerCertificates, UnverifiedCertificate};
use crate::authn::UserInfo;

/// The credentials a request carried, as kube's `getAuthMethods` words
/// them.
fn auth_methods(req: &Request) -> String {
    let mut methods = Vec::new();
    let auth = req.headers().get(http::header::AUTHORIZATION).and_then(|v| v.to_str().ok()).unwrap_or("").trim();
    let scheme = auth.split(' ').next().unwrap_or("");
    if scheme.eq_ignore_ascii_case("basic") && auth.len() > scheme.len() {
        methods.push("basic");
    }
    if auth.split(' ').count() > 1 && scheme.eq_ignore_ascii_case("bearer") {
        methods.push("bearer");
    }
    let query = url::form_urlencoded::parse(req.uri().query().unwrap_or("").as_bytes()).find(|(k, _)| k == "access_token").map(|(_, v)| v.trim().to_string());
    if query.is_some_and(|t| !t.is_empty()) {
        methods.push("access_token");
    }
    let certs = req.extensions().get::<PeerCertificates>().is_some_and(|c| !c.0.is_empty()) || req.extensions().get::<UnverifiedCertificate>().is_some();
    if certs {
        methods.push("x509");
    }
    if methods.is_empty() {
        "Authentication failed, no credentials provided".to_string()
    } else {
        format!("Authentication failed, attempted: {}", methods.join(", "))
    }
}

/// The filter: wraps the handler that answers unauthenticated requests.
pub struct WithFailedAuthenticationAudit {
    failed: Arc<dyn Handler>,
    auditor: Arc<Auditor>,
}

impl WithFailedAuthenticationAudit {
    /// Wraps `failed`, the 401 answer.
    pub fn wrap(failed: Arc<dyn Handler>, auditor: Arc<Auditor>) -> Arc<dyn Handler> {
        Arc::new(WithFailedAuthenticationAudit { failed, auditor })
    }
}

impl Handler for WithFailedAuthenticationAudit {
    fn call(&self, req: Request) -> BoxFuture<'_, Response> {
        Box::pin(async move {
            let info = req.extensions().get::<RequestInfo>().cloned().unwrap_or_default();
            let nobody = UserInfo::default();
            let config = self.auditor.policy.evaluate(&attributes(&nobody, &info), false).clone();
            if config.level == Level::None {
                return self.failed.call(req).await;
            }
            let ctx = AuditContext::new(config.clone(), new_event(&req, &info, None, config.level));
            let message = auth_methods(&req);
            let resp = self.failed.call(req).await;
            ctx.set_response_status(ResponseStatus { message, ..ResponseStatus::code(resp.status().as_u16()) });
            if let Some(ev) = ctx.event_at(Stage::ResponseStarted, true) {
                self.auditor.backend.process(ev).await;
            }
            resp
        })
    }
}
