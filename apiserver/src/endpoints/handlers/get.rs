//! GET of one object (kube `handlers/get.go`), including the `status` and
//! `scale` subresources.
//!
//! resourceVersion (Kubernetes api-concepts, "Semantics for get"): unset is
//! the latest state (a consistent read from the store); `"0"` is any state
//! and `N` any state not older than N, both served from the watch cache.

use super::list::{parse_rv, too_large};
use super::{update::to_scale, Scope};
use crate::endpoints::{responses, Response};
use crate::errors::Status;

/// Handles `get`.
///
/// # Errors
/// 404 if the object does not exist; 504 for a resourceVersion the server
/// has not reached.
pub async fn handle(scope: Scope) -> Result<Response, Status> {
    let rv = scope.query.get("resourceVersion").filter(|r| !r.is_empty());
    let obj = match rv {
        None => scope.storage.get(&scope.key()).await,
        Some(r) => scope.storage.get_not_older_than(&scope.key(), parse_rv(Some(r))?).await,
    };
    let obj = obj.map_err(|e| match e {
        crate::storage::Error::TooLargeResourceVersion { requested, current } => too_large(requested, current),
        e => scope.storage_error(e, &scope.info.name),
    })?;
    if scope.info.subresource == "scale" {
        return Ok(responses::json(200, &to_scale(&obj)));
    }
    Ok(scope.respond_object(200, obj))
}
