//! The start-up gate: until the store has a leader and the system
//! namespaces exist ([`crate::health::Health::is_started`]), resource
//! requests get kube's answer for a storage that is not ready, a 429
//! `storage is (re)initializing` with `Retry-After: 1` (the cacher's
//! answer while its cache initializes, KEP-4568), so clients retry rather
//! than hang. Health, discovery, `/version` and OpenAPI pass: they do not
//! need the store.

use std::sync::Arc;

use super::super::{responses, BoxFuture, Handler, Request, Response};
use super::request_info::RequestInfo;
use crate::errors::Status;
use crate::health::{Health, NOT_READY_MESSAGE, NOT_READY_RETRY_AFTER_SECONDS};

/// The filter.
pub struct WithStorageReady {
    next: Arc<dyn Handler>,
    health: Arc<Health>,
}

impl WithStorageReady {
    /// Wraps `next`, asking `health` whether the store is up.
    pub fn wrap(next: Arc<dyn Handler>, health: Arc<Health>) -> Arc<dyn Handler> {
        Arc::new(WithStorageReady { next, health })
    }
}

impl Handler for WithStorageReady {
    fn call(&self, req: Request) -> BoxFuture<'_, Response> {
        Box::pin(async move {
            let resource = req.extensions().get::<RequestInfo>().is_some_and(|i| i.is_resource_request);
            if resource && !self.health.is_started() {
                return responses::status(&Status::too_many_requests(NOT_READY_MESSAGE, NOT_READY_RETRY_AFTER_SECONDS));
            }
            self.next.call(req).await
        })
    }
}
