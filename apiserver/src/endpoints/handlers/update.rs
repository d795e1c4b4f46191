//! UPDATE (kube `handlers/update.go`): PUT of a whole object, or of a
//! subresource (`status`, `scale`, `finalize`). A stale
//! `metadata.resourceVersion` gives 409 Conflict with kube's optimistic-lock
//! message.

use async_trait::async_trait;
use serde_json::Value;

use super::Scope;
use crate::endpoints::Response;
use crate::errors::Status;
use crate::meta;
use crate::registry::rest::UpdatedObjectInfo;

/// A PUT body: the new object, whatever the current one is.
struct Body(Value);

#[async_trait]
impl UpdatedObjectInfo for Body {
    async fn updated_object(&self, _current: Option<&Value>) -> Result<Value, Status> {
        Ok(self.0.clone())
    }
}

/// Handles `update`.
///
/// # Errors
/// 400, 404, 409, 422 as kube.
pub async fn handle(mut scope: Scope) -> Result<Response, Status> {
    let body = scope.body_json().await?;
    if !body.is_object() {
        return Err(Status::bad_request("the body of the request must be a JSON object"));
    }
    let body_name = meta::name(&body);
    // Subresources too: kube's update handler checks the name of a Scale or
    // status body against the URL as well.
    if !body_name.is_empty() && body_name != scope.info.name {
        return Err(Status::bad_request(format!("the name of the object ({body_name}) does not match the name on the URL ({})", scope.info.name)));
    }
    let opts = scope.write_options()?;
    let updater = scope.rest.updater().ok_or_else(Status::method_not_allowed)?;
    let (obj, created) = updater.update(&scope.context(), &scope.info.name, &Body(body), &opts).await?;
    Ok(scope.respond_object(if created { 201 } else { 200 }, obj))
}
