//! The HTTP API: the filter chain, the handlers and response encoding
//! (kube-apiserver `staging/src/k8s.io/apiserver/pkg/endpoints`).

pub mod filters;
pub mod handlers;
pub mod negotiation;
pub mod responses;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;

use crate::registry::Registry;
use crate::storage::Storage;

/// A boxed, sendable future.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
/// Request and response bodies.
pub type Body = http_body_util::combinators::BoxBody<Bytes, std::io::Error>;
/// A request.
pub type Request = http::Request<Body>;
/// A response.
pub type Response = http::Response<Body>;

/// One stage of the chain, or the final handler.
pub trait Handler: Send + Sync + 'static {
    /// Handles a request.
    fn call(&self, req: Request) -> BoxFuture<'_, Response>;
}

/// What the handlers share.
pub struct ApiState {
    /// Served resources.
    pub registry: Arc<Registry>,
    /// The store (health checks).
    pub storage: Arc<dyn Storage>,
    /// Discovery documents of the registry.
    pub discovery: crate::discovery::Service,
    /// OpenAPI documents of the registry.
    pub openapi: crate::openapi::Service,
    /// The schema of every kind, built-in and custom.
    pub schemas: crate::schema::SchemaStore,
    /// The health checks and whether the store is up yet.
    pub health: Arc<crate::health::Health>,
    /// ServiceAccount tokens, for the OpenID discovery documents.
    pub service_accounts: Option<Arc<crate::authn::service_account::Tokens>>,
}

/// Builds the handler chain. A request passes the stages in this order:
///
/// 0. audit init ([`filters::audit_init`]): the audit ID and the time
///    the request arrived, and the `Audit-Id` response header;
/// 1. request info ([`filters::request_info`]);
/// 2. authentication ([`filters::authentication`], asking `authenticator`;
///    a 401 is audited by [`filters::authn_audit`]);
///    then audit ([`filters::audit`]), when `audit` is set;
/// 3. impersonation ([`filters::impersonation`], asking `authorizer`
///    about the `impersonate` verb);
/// 4. authorization ([`filters::authorization`], asking `authorizer`);
/// 5. the start-up gate ([`filters::storage_ready`]): resource requests
///    wait for the store with a 429 until it is up;
/// 6. the handler ([`handlers::Router`]).
///
/// Flow control slots in between, as in kube's
/// `DefaultBuildHandlerChain`. Each stage wraps the next, so the chain is
/// assembled from the handler outwards.
pub fn build_handler_chain(
    state: Arc<ApiState>,
    authenticator: Arc<dyn crate::authn::Authenticator>,
    authorizer: Arc<dyn crate::authz::Authorizer>,
    audit: Option<Arc<crate::audit::Auditor>>,
) -> Arc<dyn Handler> {
    let health = state.health.clone();
    let handler: Arc<dyn Handler> = Arc::new(handlers::Router::new(state));
    let handler = filters::storage_ready::WithStorageReady::wrap(handler, health);
    let handler = filters::authorization::WithAuthorization::wrap(handler, authorizer.clone());
    let handler = filters::impersonation::WithImpersonation::wrap(handler, authorizer);
    let mut failed: Arc<dyn Handler> = Arc::new(filters::authentication::Unauthorized);
    let handler = match audit {
        Some(a) => {
            failed = filters::authn_audit::WithFailedAuthenticationAudit::wrap(failed, a.clone());
            filters::audit::WithAudit::wrap(handler, a)
        }
        None => handler,
    };
    let handler = filters::authentication::WithAuthentication::wrap(handler, authenticator, failed);
    let handler = filters::request_info::WithRequestInfo::wrap(handler);
    filters::audit_init::WithAuditInit::wrap(handler)
}
