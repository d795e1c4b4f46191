//! CREATE (kube `handlers/create.go`): POST of a new object; 201 with the
//! stored object (or, for a review, the answer).

use super::Scope;
use crate::endpoints::Response;
use crate::errors::Status;

/// Handles `create`.
///
/// # Errors
/// 400 for malformed bodies, 404 for a missing namespace, 409 AlreadyExists,
/// 422 Invalid.
pub async fn handle(mut scope: Scope) -> Result<Response, Status> {
    // The body is read before any check can fail, so an HTTP/2 client
    // gets the Status rather than a reset stream.
    let obj = scope.body_json().await?;
    let opts = scope.write_options()?;
    let created = if scope.info.name.is_empty() {
        let creater = scope.rest.creater().ok_or_else(Status::method_not_allowed)?;
        creater.create(&scope.context(), obj, &opts).await?
    } else {
        let creater = scope.rest.named_creater().ok_or_else(Status::method_not_allowed)?;
        creater.create(&scope.context(), &scope.info.name, obj, &opts).await?
    };
    Ok(scope.respond_object(201, created))
}
