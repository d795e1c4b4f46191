//! LIST (kube `handlers/get.go` `ListResource`): label and field selectors,
//! limit and continue, resourceVersion semantics of api-concepts.

use std::sync::Arc;

use serde_json::Value;

use super::Scope;
use crate::endpoints::{negotiation, responses, Response};
use crate::errors::Status;
use crate::selectors::{FieldSelector, LabelSelector};
use crate::storage::{ListOptions, Predicate};

/// Parses the selectors of a list or watch into one predicate.
///
/// # Errors
/// 400 for malformed selectors or unsupported field labels.
pub fn predicate(scope: &Scope) -> Result<Option<Predicate>, Status> {
    let labels = LabelSelector::parse(scope.query.get("labelSelector").unwrap_or("")).map_err(Status::bad_request)?;
    let fields = FieldSelector::parse(scope.query.get("fieldSelector").unwrap_or("")).map_err(Status::bad_request)?;
    let allowed = scope.resource.strategy.selectable_fields();
    for r in &fields.0 {
        if !(r.field == "metadata.name" || r.field == "metadata.namespace" || allowed.contains(&r.field.as_str())) {
            return Err(Status::bad_request(format!("field label not supported: {}", r.field)));
        }
    }
    if labels.is_empty() && fields.is_empty() {
        return Ok(None);
    }
    let res = scope.resource.clone();
    Ok(Some(Arc::new(move |obj: &Value| {
        labels.matches_object(obj)
            && fields.matches(|f| match f {
                "metadata.name" => crate::meta::name(obj).to_string(),
                "metadata.namespace" => crate::meta::namespace(obj).to_string(),
                other => res.strategy.field_value(obj, other),
            })
    })))
}

/// Parses `resourceVersion` (`""`/`"0"` → 0).
///
/// # Errors
/// 400 for non-numeric values.
pub fn parse_rv(v: Option<&str>) -> Result<i64, Status> {
    match v {
        None | Some("") => Ok(0),
        Some(s) => s.parse::<i64>().ok().filter(|n| *n >= 0).ok_or_else(|| Status::bad_request(format!("resourceVersion: Invalid value: {s:?}: must be a non-negative integer"))),
    }
}

/// Handles `list`.
///
/// # Errors
/// 400 for bad parameters, 410 for expired continue tokens or revisions.
pub async fn handle(scope: Scope) -> Result<Response, Status> {
    let q = &scope.query;
    let rv = parse_rv(q.get("resourceVersion"))?;
    let cont = q.get("continue").filter(|c| !c.is_empty()).map(String::from);
    let limit: i64 = q.get("limit").map(|l| l.parse().map_err(|_| Status::bad_request(format!("limit: Invalid value: {l:?}")))).transpose()?.unwrap_or(0);
    let rv_match = q.get("resourceVersionMatch").unwrap_or("");
    if cont.is_some() && rv > 0 {
        return Err(Status::bad_request("specifying resource version is not allowed when using continue"));
    }
    if !rv_match.is_empty() && q.get("resourceVersion").is_none_or(str::is_empty) {
        return Err(Status::bad_request("resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"));
    }
    // Exact reads happen at the given revision; NotOlderThan and "0" are
    // served at the current one (always at least as new, since there is no
    // cache yet).
    let exact = rv > 0 && (rv_match == "Exact" || (rv_match.is_empty() && limit > 0 && cont.is_none()));
    let opts = ListOptions { revision: if exact { rv } else { 0 }, limit, continue_token: cont.clone(), predicate: predicate(&scope)? };
    let result = scope.storage.list(&scope.prefix(), &opts).await.map_err(|e| match e {
        crate::storage::Error::Compacted { .. } if cont.is_some() => Status::expired(
            "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
        ),
        e => scope.storage_error(e, ""),
    })?;
    if rv > result.revision && !exact {
        let mut s = Status::timeout(format!("Too large resource version: {rv}, current: {}", result.revision));
        s.details = Some(crate::errors::Details {
            causes: vec![crate::errors::Cause { reason: "ResourceVersionTooLarge".into(), message: "Too large resource version".into(), field: String::new() }],
            retry_after_seconds: Some(1),
            ..Default::default()
        });
        return Err(s);
    }
    let v = negotiation::transform_list(scope.output, &scope.resource, result.items, &result.revision.to_string(), result.continue_token.as_deref(), scope.include);
    Ok(responses::json(200, &v))
}
