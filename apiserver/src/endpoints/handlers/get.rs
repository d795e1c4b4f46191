//! GET of one object (kube `handlers/get.go`), of the resource or of a
//! subresource (`status`, `scale`).
//!
//! resourceVersion (Kubernetes api-concepts, "Semantics for get"): unset is
//! the latest state (a consistent read from the store); `"0"` is any state
//! and `N` any state not older than N, both served from the watch cache.

use super::Scope;
use crate::endpoints::Response;
use crate::errors::Status;
use crate::registry::rest::GetOptions;

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
    let parsed = if rv.starts_with('+') {
        Err("invalid syntax")
    } else {
        rv.parse::<u64>().map_err(|e| if matches!(e.kind(), std::num::IntErrorKind::PosOverflow) { "value out of range" } else { "invalid syntax" })
    };
    // Revisions above i64::MAX cannot exist; they are simply too new.
    parsed.map(|n| i64::try_from(n).unwrap_or(i64::MAX)).map_err(|why| Status::failure(500, "", format!("resourceVersion: Invalid value: {rv:?}: strconv.ParseUint: parsing {rv:?}: {why}"), None))
}

/// Handles `get`.
///
/// # Errors
/// 404 if the object does not exist; 500 for an unparsable resourceVersion
/// (as kube); 504 for a resourceVersion the server has not reached.
pub async fn handle(scope: Scope) -> Result<Response, Status> {
    let min_revision = match scope.query.get("resourceVersion").filter(|r| !r.is_empty()) {
        None => None,
        Some(r) => Some(parse_get_rv(r)?),
    };
    let getter = scope.rest.getter().ok_or_else(Status::method_not_allowed)?;
    let obj = getter.get(&scope.context(), &scope.info.name, &GetOptions { min_revision }).await?;
    Ok(scope.respond_object(200, obj))
}
