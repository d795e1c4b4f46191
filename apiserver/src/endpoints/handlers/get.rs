//! GET of one object (kube `handlers/get.go`), including the `status` and
//! `scale` subresources.

use super::{update::to_scale, Scope};
use crate::endpoints::{responses, Response};
use crate::errors::Status;

/// Handles `get`.
///
/// # Errors
/// 404 if the object does not exist.
pub async fn handle(scope: Scope) -> Result<Response, Status> {
    let obj = scope.storage.get(&scope.key()).await.map_err(|e| scope.storage_error(e, &scope.info.name))?;
    if scope.info.subresource == "scale" {
        return Ok(responses::json(200, &to_scale(&obj)));
    }
    Ok(scope.respond_object(200, obj))
}
