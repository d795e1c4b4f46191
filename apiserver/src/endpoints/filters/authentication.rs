//! The authentication filter (kube `filters/authentication.go`): asks the
//! [`Authenticator`](crate::authn::Authenticator) who sent the request and
//! attaches the [`UserInfo`] to it, or hands it to the failed handler
//! ([`Unauthorized`], wrapped by failed-authentication audit when auditing
//! is on). Which credentials count is [`crate::authn`]'s business.

use std::sync::Arc;

use super::super::{responses, BoxFuture, Handler, Request, Response};
use crate::authn::{Authenticator, Credentials, UserInfo};
use crate::errors::Status;

/// The filter.
pub struct WithAuthentication {
    next: Arc<dyn Handler>,
    authenticator: Arc<dyn Authenticator>,
    failed: Arc<dyn Handler>,
}

impl WithAuthentication {
    /// Wraps `next`, authenticating with `authenticator`; requests without
    /// a user go to `failed`.
    pub fn wrap(next: Arc<dyn Handler>, authenticator: Arc<dyn Authenticator>, failed: Arc<dyn Handler>) -> Arc<dyn Handler> {
        Arc::new(WithAuthentication { next, authenticator, failed })
    }
}

/// The answer to a request that could not be authenticated: 401 with
/// kube's Status (kube `filters.Unauthorized`).
pub struct Unauthorized;

impl Handler for Unauthorized {
    fn call(&self, _req: Request) -> BoxFuture<'_, Response> {
        Box::pin(async { responses::status(&Status::unauthorized()) })
    }
}

impl Handler for WithAuthentication {
    fn call(&self, mut req: Request) -> BoxFuture<'_, Response> {
        Box::pin(async move {
            let user: Option<UserInfo> = match self.authenticator.authenticate(&Credentials::of(&req)).await {
                Ok(u) => u,
                Err(e) => {
                    tracing::debug!("authentication failed: {e}");
                    None
                }
            };
            match user {
                Some(u) => {
                    req.extensions_mut().insert(u);
                    self.next.call(req).await
                }
                None => self.failed.call(req).await,
            }
        })
    }
}
