//! The authentication filter (kube `filters/authentication.go`): asks the
//! [`Authenticator`](crate::authn::Authenticator) who sent the request and
//! attaches the [`UserInfo`] to it, or answers 401 Unauthorized. Which
//! credentials count is [`crate::authn`]'s business.

use std::sync::Arc;

use super::super::{responses, BoxFuture, Handler, Request, Response};
use crate::authn::{Authenticator, Credentials, UserInfo};
use crate::errors::Status;

/// The filter.
pub struct WithAuthentication {
    next: Arc<dyn Handler>,
    authenticator: Arc<dyn Authenticator>,
}

impl WithAuthentication {
    /// Wraps `next`, authenticating with `authenticator`.
    pub fn wrap(next: Arc<dyn Handler>, authenticator: Arc<dyn Authenticator>) -> Arc<dyn Handler> {
        Arc::new(WithAuthentication { next, authenticator })
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
                None => responses::status(&Status::unauthorized()),
            }
        })
    }
}
