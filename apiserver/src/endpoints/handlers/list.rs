//! LIST (kube `handlers/get.go` `ListResource`): label and field selectors,
//! limit and continue, and the resourceVersion / resourceVersionMatch
//! semantics of Kubernetes api-concepts ("Semantics for get and list").
//!
//! | resourceVersion | match          | read                                  |
//! |-----------------|----------------|---------------------------------------|
//! | unset           | -              | consistent (the latest revision)      |
//! | `"0"`           | unset/NotOlderThan | any revision (the cache's)        |
//! | `N`             | unset, no limit | not older than N                     |
//! | `N`             | unset, limit   | exactly N (legacy pagination rule)    |
//! | `N`             | NotOlderThan   | not older than N                      |
//! | `N`             | Exact          | exactly N                             |
//!
//! With the watch cache in front of the store, all but exact older reads
//! are served from memory (see [`crate::watchcache`]).

use bytes::{BufMut, Bytes, BytesMut};

use super::Scope;
use crate::endpoints::negotiation::{self, Output};
use crate::endpoints::{responses, Response};
use crate::errors::{Cause, Status};
use crate::registry::rest::{ListOptions, Selectors};
use crate::selectors::{FieldSelector, LabelSelector};
use crate::storage::RevisionMatch;

/// Parses the selectors of a list, watch or deletecollection.
///
/// # Errors
/// 400 for malformed selectors.
pub fn selectors(scope: &Scope) -> Result<Selectors, Status> {
    let labels = LabelSelector::parse(scope.query.get("labelSelector").unwrap_or("")).map_err(Status::bad_request)?;
    let fields = FieldSelector::parse(scope.query.get("fieldSelector").unwrap_or("")).map_err(Status::bad_request)?;
    Ok(Selectors { labels, fields })
}

/// The registry's list options: the request's selectors around `read`.
///
/// # Errors
/// 400 for malformed selectors.
pub fn list_options(scope: &Scope, read: crate::storage::ListOptions) -> Result<ListOptions, Status> {
    Ok(ListOptions { selectors: selectors(scope)?, read, resource_version: scope.query.get("resourceVersion").map(String::from) })
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

/// Reads an integer query parameter as kube's query-parameter conversion
/// does (`runtime.Convert_Slice_string_To_int64`, Go `strconv.ParseInt`):
/// `None` when absent; an empty or non-decimal value is an error.
///
/// # Errors
/// 400 BadRequest with Go's wording, e.g. `strconv.ParseInt: parsing "x":
/// invalid syntax` or `... value out of range`.
pub fn parse_int_param(scope: &Scope, name: &str) -> Result<Option<i64>, Status> {
    let Some(v) = scope.query.get(name) else { return Ok(None) };
    v.parse::<i64>().map(Some).map_err(|e| {
        let why = match e.kind() {
            std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => "value out of range",
            _ => "invalid syntax",
        };
        Status::bad_request(format!("strconv.ParseInt: parsing {v:?}: {why}"))
    })
}

/// The integer parameters of a list or watch (`timeoutSeconds` in seconds,
/// `limit` in items), converted before any other check as kube decodes
/// `ListOptions` before validating it.
///
/// # Errors
/// 400 BadRequest for a value Go's `strconv.ParseInt` rejects.
pub fn int_params(scope: &Scope) -> Result<(Option<i64>, i64), Status> {
    let timeout = parse_int_param(scope, "timeoutSeconds")?;
    let limit = parse_int_param(scope, "limit")?.unwrap_or(0);
    Ok((timeout, limit))
}

/// The 422 of kube's `ValidateListOptions`.
pub fn invalid_options(causes: Vec<Cause>) -> Status {
    Status::invalid("meta.k8s.io", "ListOptions", "", causes)
}

fn not_supported(field: &str, value: &str, supported: &[&str]) -> Cause {
    let list = supported.iter().map(|s| format!("{s:?}")).collect::<Vec<_>>().join(", ");
    Cause { reason: "FieldValueNotSupported".into(), message: format!("Unsupported value: {value:?}: supported values: {list}"), field: field.into() }
}

/// kube's list-option validation for a LIST (`ValidateListOptions`).
fn validate(scope: &Scope) -> Result<(), Status> {
    let q = &scope.query;
    let mut causes = Vec::new();
    let rv = q.get("resourceVersion").unwrap_or("");
    if let Some(m) = q.get("resourceVersionMatch").filter(|m| !m.is_empty()) {
        if rv.is_empty() {
            causes.push(Cause::forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden unless resourceVersion is provided"));
        }
        if q.get("continue").is_some_and(|c| !c.is_empty()) {
            causes.push(Cause::forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden when continue is provided"));
        }
        if m != "Exact" && m != "NotOlderThan" {
            causes.push(not_supported("resourceVersionMatch", m, &["Exact", "NotOlderThan", ""]));
        }
        if m == "Exact" && rv == "0" {
            causes.push(Cause::forbidden("resourceVersionMatch", "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""));
        }
    }
    if q.get("sendInitialEvents").is_some() {
        causes.push(Cause::forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"));
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(invalid_options(causes))
    }
}

/// Handles `list`.
///
/// # Errors
/// 400 for bad parameters, 422 for invalid resourceVersionMatch use, 410
/// for expired continue tokens or revisions (with an inconsistent continue
/// token), 504 for a resourceVersion not reached.
pub async fn handle(scope: Scope) -> Result<Response, Status> {
    let (_, limit) = int_params(&scope)?;
    validate(&scope)?;
    let q = &scope.query;
    let rv = parse_rv(q.get("resourceVersion"))?;
    let rv_set = q.get("resourceVersion").is_some_and(|r| !r.is_empty());
    let cont = q.get("continue").filter(|c| !c.is_empty()).map(String::from);
    let rv_match = q.get("resourceVersionMatch").unwrap_or("");
    if cont.is_some() && rv > 0 {
        return Err(Status::bad_request("specifying resource version is not allowed when using continue"));
    }
    let revision_match = match rv_match {
        "Exact" => RevisionMatch::Exact,
        "NotOlderThan" => RevisionMatch::NotOlderThan,
        // Legacy: a resourceVersion with a limit (first page) is exact.
        _ if rv > 0 && limit > 0 && cont.is_none() => RevisionMatch::Exact,
        _ if rv_set => RevisionMatch::NotOlderThan,
        _ => RevisionMatch::Exact,
    };
    let read = crate::storage::ListOptions { revision: rv, revision_match, limit, continue_token: cont, predicate: None, allow_encoded: scope.output == Output::Object && scope.rest.negotiated() };
    let opts = list_options(&scope, read)?;
    let lister = scope.rest.lister().ok_or_else(Status::method_not_allowed)?;
    let result = lister.list(&scope.context(), &opts).await?;
    let rv_out = result.revision.to_string();
    if !result.encoded.is_empty() || (scope.output == Output::Object && result.items.is_empty()) {
        return Ok(encoded_list(&scope, &result.encoded, &rv_out, result.continue_token.as_deref()));
    }
    let v = negotiation::transform_list(scope.output, scope.resource(), result.items, &rv_out, result.continue_token.as_deref(), scope.include);
    Ok(responses::json(200, &v))
}

/// A `<Kind>List` written around the cached JSON of its items, without
/// decoding or re-encoding them.
fn encoded_list(scope: &Scope, items: &[Bytes], rv: &str, cont: Option<&str>) -> Response {
    let head = negotiation::list(scope.resource(), Vec::new(), rv, cont);
    let field = |k: &str| serde_json::to_vec(&head[k]).unwrap_or_default();
    let size: usize = items.iter().map(|b| b.len() + 1).sum::<usize>() + 256;
    let mut out = BytesMut::with_capacity(size);
    out.put_slice(b"{\"kind\":");
    out.put_slice(&field("kind"));
    out.put_slice(b",\"apiVersion\":");
    out.put_slice(&field("apiVersion"));
    out.put_slice(b",\"metadata\":");
    out.put_slice(&field("metadata"));
    out.put_slice(b",\"items\":[");
    for (i, b) in items.iter().enumerate() {
        if i > 0 {
            out.put_u8(b',');
        }
        out.put_slice(b);
    }
    out.put_slice(b"]}");
    let mut r = http::Response::new(responses::full(out.freeze()));
    r.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    r
}
