//! CREATE (kube `handlers/create.go`): POST of a new object; 201 with the
//! stored object.

use super::{rest, Scope};
use crate::endpoints::Response;
use crate::errors::Status;
use crate::meta;

/// Handles `create`.
///
/// # Errors
/// 400 for malformed bodies, 404 for a missing namespace, 409 AlreadyExists,
/// 422 Invalid.
pub async fn handle(mut scope: Scope) -> Result<Response, Status> {
    // The body is read before any check can fail, so an HTTP/2 client
    // gets the Status rather than a reset stream.
    let mut obj = scope.body_json().await?;
    let dry_run = scope.query.dry_run("CreateOptions")?;
    if let Some(mut review) = scope.resource.strategy.review(&obj, &scope.user) {
        review["kind"] = scope.resource.kind.into();
        review["apiVersion"] = scope.resource.api_version().into();
        return Ok(scope.respond_object(201, review));
    }
    rest::before_create(&scope, &mut obj)?;
    let ns = meta::namespace(&obj).to_string();
    rest::ensure_namespace(&scope, &ns).await?;
    let name = meta::name(&obj).to_string();
    let key = scope.resource.key(&ns, &name);
    if dry_run {
        // kube checks existence for dry runs too.
        match scope.storage.get(&key).await {
            Ok(_) => return Err(Status::already_exists(scope.resource.group, scope.resource.resource, &name)),
            Err(crate::storage::Error::NotFound) => {}
            Err(e) => return Err(scope.storage_error(e, &name)),
        }
        return Ok(scope.respond_object(201, obj));
    }
    let created = scope.storage.create(&key, obj).await.map_err(|e| scope.storage_error(e, &name))?;
    Ok(scope.respond_object(201, created))
}
