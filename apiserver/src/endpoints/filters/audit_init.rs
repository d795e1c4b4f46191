//! The audit-init filter (kube `filters/audit_init.go` and
//! `WithRequestReceivedTimestamp`): stamps every request with its audit
//! ID, the client's `Audit-Id` header when it sent one or a new UUID, and
//! the time it arrived ([`RequestStamp`]), and returns the ID in the
//! response's `Audit-Id` header, whether or not the request is audited,
//! as kube-apiserver does.

use std::sync::Arc;

use super::super::{BoxFuture, Handler, Request, Response};
use crate::audit::{RequestStamp, HEADER_AUDIT_ID};

/// The filter.
pub struct WithAuditInit {
    next: Arc<dyn Handler>,
}

impl WithAuditInit {
    /// Wraps `next`.
    pub fn wrap(next: Arc<dyn Handler>) -> Arc<dyn Handler> {
        Arc::new(WithAuditInit { next })
    }
}

impl Handler for WithAuditInit {
    fn call(&self, mut req: Request) -> BoxFuture<'_, Response> {
        let received = std::time::SystemTime::now();
        let sent = req.headers().get(HEADER_AUDIT_ID).and_then(|v| v.to_str().ok()).filter(|v| !v.is_empty()).map(str::to_string);
        let audit_id = sent.unwrap_or_else(crate::meta::new_uid);
        let header = http::HeaderValue::from_str(&audit_id).ok();
        req.extensions_mut().insert(RequestStamp { audit_id, received });
        Box::pin(async move {
            let mut resp = self.next.call(req).await;
            if let Some(h) = header {
                resp.headers_mut().insert(HEADER_AUDIT_ID, h);
            }
            resp
        })
    }
}
