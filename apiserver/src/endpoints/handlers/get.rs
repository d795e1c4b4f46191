//! GET of one object (kube `handlers/get.go`), including the `status` and
//! `scale` subresources.
//!
//! resourceVersion (Kubernetes api-concepts, "Semantics for get"): unset is
//! the latest state (a consistent read from the store); `"0"` is any state
//! and `N` any state not older than N, both served from the watch cache.

use super::list::too_large;
use super::{update::to_scale, Scope};
use crate::endpoints::{responses, Response};
use crate::errors::Status;

/// Parses a get's `resourceVersion` as kube's `APIObjectVersioner`
/// (Go `strconv.ParseUint`; `"0"` is 0).
///
/// # Errors
/// What kube answers: the watch cache returns the versioner's
/// `storage.InvalidError` unconverted, so it is a 500 with no reason and the
/// field error as message (`resourceVersion: Invalid value: "abc":
/// strconv.ParseUint: parsing "abc": invalid syntax`).
fn parse_get_rv(rv: &str) -> Result<i64, Status> {
    // Go's ParseUint takes no sign; Rust's takes a leading '+'.
    let parsed = if rv.starts_with('+') { Err("invalid syntax") } else { rv.parse::<u64>().map_err(|e| if matches!(e.kind(), std::num::IntErrorKind::PosOverflow) { "value out of range" } else { "invalid syntax" }) };
    // Revisions above i64::MAX cannot exist; they are simply too new.
    parsed.map(|n| i64::try_from(n).unwrap_or(i64::MAX)).map_err(|why| Status::failure(500, "", format!("resourceVersion: Invalid value: {rv:?}: strconv.ParseUint: parsing {rv:?}: {why}"), None))
}

/// Handles `get`.
///
/// # Errors
/// 404 if the object does not exist; 500 for an unparsable resourceVersion
/// (as kube); 504 for a resourceVersion the server has not reached.
pub async fn handle(scope: Scope) -> Result<Response, Status> {
    let rv = scope.query.get("resourceVersion").filter(|r| !r.is_empty());
    let obj = match rv {
        None => scope.storage.get(&scope.key()).await,
        Some(r) => scope.storage.get_not_older_than(&scope.key(), parse_get_rv(r)?).await,
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
