//! Kubernetes API errors: the wire `Status` object is the error type.
//!
//! Every failure a client sees is built here, with the reason, code and
//! message wording that kube-apiserver uses
//! (`k8s.io/apimachinery/pkg/api/errors/errors.go`). Handlers never format a
//! Status themselves.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The `Status.reason` values used by kube-apiserver (`metav1.StatusReason`).
pub mod reason {
    /// 401.
    pub const UNAUTHORIZED: &str = "Unauthorized";
    /// 403.
    pub const FORBIDDEN: &str = "Forbidden";
    /// 404.
    pub const NOT_FOUND: &str = "NotFound";
    /// 409 on create.
    pub const ALREADY_EXISTS: &str = "AlreadyExists";
    /// 409 on a lost optimistic lock.
    pub const CONFLICT: &str = "Conflict";
    /// 410.
    pub const GONE: &str = "Gone";
    /// 410 for a compacted resourceVersion.
    pub const EXPIRED: &str = "Expired";
    /// 422.
    pub const INVALID: &str = "Invalid";
    /// 400.
    pub const BAD_REQUEST: &str = "BadRequest";
    /// 405.
    pub const METHOD_NOT_ALLOWED: &str = "MethodNotAllowed";
    /// 406.
    pub const NOT_ACCEPTABLE: &str = "NotAcceptable";
    /// 415.
    pub const UNSUPPORTED_MEDIA_TYPE: &str = "UnsupportedMediaType";
    /// 413.
    pub const REQUEST_ENTITY_TOO_LARGE: &str = "RequestEntityTooLarge";
    /// 500.
    pub const INTERNAL_ERROR: &str = "InternalError";
    /// 504.
    pub const TIMEOUT: &str = "Timeout";
    /// 503.
    pub const SERVICE_UNAVAILABLE: &str = "ServiceUnavailable";
    /// 500 with a retry hint (kube's `StatusReasonServerTimeout`).
    pub const SERVER_TIMEOUT: &str = "ServerTimeout";
    /// 429.
    pub const TOO_MANY_REQUESTS: &str = "TooManyRequests";
}

/// One `StatusCause`. Its type field is serialised as `reason`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Cause {
    /// `FieldValueInvalid`, `FieldValueRequired`, ...
    #[serde(rename = "reason", default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Human-readable message.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Field path, e.g. `metadata.name`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub field: String,
}

impl Cause {
    /// `field: Invalid value: <value>: <detail>` (`field.Invalid`).
    pub fn invalid(field: &str, value: &Value, detail: &str) -> Self {
        let v = match value {
            Value::String(s) => go_quote(s),
            Value::Null => "null".to_string(),
            other => other.to_string(),
        };
        let message = if detail.is_empty() { format!("Invalid value: {v}") } else { format!("Invalid value: {v}: {detail}") };
        Cause { reason: "FieldValueInvalid".into(), message, field: field.into() }
    }

    /// `field: Required value: <detail>` (`field.Required`).
    pub fn required(field: &str, detail: &str) -> Self {
        let message = if detail.is_empty() { "Required value".to_string() } else { format!("Required value: {detail}") };
        Cause { reason: "FieldValueRequired".into(), message, field: field.into() }
    }

    /// `field: Too long: may not be more than <max> bytes` (`field.TooLong`
    /// as of Kubernetes 1.32).
    pub fn too_long(field: &str, max_bytes: usize) -> Self {
        Cause { reason: "FieldValueTooLong".into(), message: format!("Too long: may not be more than {max_bytes} bytes"), field: field.into() }
    }

    /// `field: Unsupported value: <value>: supported values: "a", "b"`
    /// (`field.NotSupported`); `value` is already rendered as Go prints it.
    pub fn not_supported(field: &str, value: &str, supported: &[&str]) -> Self {
        let list: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
        Cause { reason: "FieldValueNotSupported".into(), message: format!("Unsupported value: {value}: supported values: {}", list.join(", ")), field: field.into() }
    }

    /// `field: Forbidden: <detail>` (`field.Forbidden`).
    pub fn forbidden(field: &str, detail: &str) -> Self {
        Cause { reason: "FieldValueForbidden".into(), message: format!("Forbidden: {detail}"), field: field.into() }
    }

    /// The `field: message` form used in Invalid messages.
    fn render(&self) -> String {
        if self.field.is_empty() {
            self.message.clone()
        } else {
            format!("{}: {}", self.field, self.message)
        }
    }
}

/// What a forbidden request asked for, as [`Status::forbidden_request`]
/// words it.
#[derive(Debug, Clone, Copy)]
pub struct ForbiddenRequest<'a> {
    /// The user name.
    pub user: &'a str,
    /// The verb.
    pub verb: &'a str,
    /// API group.
    pub group: &'a str,
    /// Resource (plural).
    pub resource: &'a str,
    /// Subresource.
    pub subresource: &'a str,
    /// Namespace (empty: cluster scope).
    pub namespace: &'a str,
    /// Object name.
    pub name: &'a str,
    /// For a non-resource request, its path.
    pub path: Option<&'a str>,
}

/// `StatusDetails`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Details {
    /// Object name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// API group.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// The resource (plural) for most errors, the Kind for Invalid.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Object UID.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// Field-level causes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<Cause>,
    /// Seconds before a retry.
    #[serde(rename = "retryAfterSeconds", default, skip_serializing_if = "Option::is_none")]
    pub retry_after_seconds: Option<i32>,
}

impl Details {
    fn is_empty(&self) -> bool {
        self == &Details::default()
    }
}

/// A metav1 `Status`: the error type of the API layer and its wire form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct Status {
    /// Always `Status`.
    pub kind: String,
    /// Always `v1`.
    #[serde(rename = "apiVersion")]
    pub api_version: String,
    /// Always empty.
    pub metadata: serde_json::Map<String, Value>,
    /// `Failure` or `Success`.
    pub status: String,
    /// Human-readable message.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Machine-readable reason (see [`reason`]).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Details; `{}` when empty, as kube-apiserver sends for some errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Details>,
    /// HTTP status code.
    pub code: u16,
}

/// `Result` of the API layer.
pub type Result<T, E = Status> = std::result::Result<T, E>;

/// `resource` qualified by group as kube prints it: `configmaps`,
/// `deployments.apps`.
pub fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

impl Status {
    /// A Failure status.
    pub fn failure(code: u16, reason: &str, message: impl Into<String>, details: Option<Details>) -> Self {
        Status {
            kind: "Status".into(),
            api_version: "v1".into(),
            metadata: Default::default(),
            status: "Failure".into(),
            message: message.into(),
            reason: reason.into(),
            details: details.filter(|d| !d.is_empty()),
            code,
        }
    }

    /// A Success status for deletes (details name/group/kind/uid).
    pub fn success(group: &str, resource: &str, name: &str, uid: &str) -> Self {
        Status {
            kind: "Status".into(),
            api_version: "v1".into(),
            metadata: Default::default(),
            status: "Success".into(),
            message: String::new(),
            reason: String::new(),
            details: Some(Details { name: name.into(), group: group.into(), kind: resource.into(), uid: uid.into(), ..Default::default() }),
            code: 200,
        }
    }

    fn resource_details(group: &str, resource: &str, name: &str) -> Option<Details> {
        Some(Details { name: name.into(), group: group.into(), kind: resource.into(), ..Default::default() })
    }

    /// 404 `configmaps "x" not found`.
    pub fn not_found(group: &str, resource: &str, name: &str) -> Self {
        Self::failure(404, reason::NOT_FOUND, format!("{} {name:?} not found", qualified(group, resource)), Self::resource_details(group, resource, name))
    }

    /// 404 for a path that names no resource we serve.
    pub fn resource_not_found() -> Self {
        let mut s = Self::failure(404, reason::NOT_FOUND, "the server could not find the requested resource", None);
        s.details = Some(Details::default());
        s
    }

    /// 409 `configmaps "x" already exists`.
    pub fn already_exists(group: &str, resource: &str, name: &str) -> Self {
        Self::failure(409, reason::ALREADY_EXISTS, format!("{} {name:?} already exists", qualified(group, resource)), Self::resource_details(group, resource, name))
    }

    /// 409 `Operation cannot be fulfilled on configmaps "x": <why>`.
    pub fn conflict(group: &str, resource: &str, name: &str, why: &str) -> Self {
        Self::failure(409, reason::CONFLICT, format!("Operation cannot be fulfilled on {} {name:?}: {why}", qualified(group, resource)), Self::resource_details(group, resource, name))
    }

    /// 409 for a stale resourceVersion (the optimistic-lock message).
    pub fn optimistic_lock(group: &str, resource: &str, name: &str) -> Self {
        Self::conflict(group, resource, name, OPTIMISTIC_LOCK_MESSAGE)
    }

    /// 422 `ConfigMap "x" is invalid: <causes>`; `kind` is the Kind, and
    /// the message qualifies it by group (`Deployment.apps`). The message
    /// lists each distinct cause once, as kube's `ErrorList.ToAggregate`
    /// does; `details.causes` keeps them all.
    pub fn invalid(group: &str, kind: &str, name: &str, causes: Vec<Cause>) -> Self {
        let mut rendered: Vec<String> = Vec::with_capacity(causes.len());
        for r in causes.iter().map(Cause::render) {
            if !rendered.contains(&r) {
                rendered.push(r);
            }
        }
        let list = match rendered.len() {
            0 => String::new(),
            1 => rendered[0].clone(),
            _ => format!("[{}]", rendered.join(", ")),
        };
        let message = format!("{} {name:?} is invalid: {list}", qualified(group, kind));
        Self::failure(422, reason::INVALID, message, Some(Details { name: name.into(), group: group.into(), kind: kind.into(), causes, ..Default::default() }))
    }

    /// 400 with a message.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::failure(400, reason::BAD_REQUEST, message, None)
    }

    /// 400 for unknown or duplicate fields under `fieldValidation=Strict`:
    /// `Deployment in version "v1" cannot be handled as a Deployment: strict
    /// decoding error: unknown field "spec.foo", duplicate field "bar"`;
    /// `errors` are the `unknown field "<path>"` / `duplicate field "<path>"`
    /// parts.
    pub fn strict_decoding(kind: &str, version: &str, errors: &[String]) -> Self {
        Self::bad_request(format!("{kind} in version {version:?} cannot be handled as a {kind}: strict decoding error: {}", errors.join(", ")))
    }

    /// 401 `Unauthorized`.
    pub fn unauthorized() -> Self {
        Self::failure(401, reason::UNAUTHORIZED, "Unauthorized", None)
    }

    /// 403 with a message.
    pub fn forbidden(group: &str, resource: &str, name: &str, message: impl Into<String>) -> Self {
        Self::failure(403, reason::FORBIDDEN, message, Self::resource_details(group, resource, name))
    }

    /// 403 `<resource> "<name>" is forbidden: <why>` (kube
    /// `apierrors.NewForbidden`, which admission plugins answer with);
    /// `forbidden: <why>` without a resource, no name part without a name.
    pub fn forbidden_because(group: &str, resource: &str, name: &str, why: &str) -> Self {
        let message = if resource.is_empty() {
            format!("forbidden: {why}")
        } else if name.is_empty() {
            format!("{} is forbidden: {why}", qualified(group, resource))
        } else {
            format!("{} {name:?} is forbidden: {why}", qualified(group, resource))
        };
        Self::forbidden(group, resource, name, message)
    }

    /// 403 for a create in a namespace that is being deleted
    /// (NamespaceLifecycle), with cause `NamespaceTerminating` on
    /// `metadata.namespace`.
    pub fn namespace_terminating(group: &str, resource: &str, namespace: &str) -> Self {
        let msg = format!("unable to create new content in namespace {namespace} because it is being terminated");
        let mut s = Self::forbidden(group, resource, "", msg.clone());
        s.details = Some(Details {
            group: group.into(),
            kind: resource.into(),
            causes: vec![Cause { reason: "NamespaceTerminating".into(), message: msg, field: "metadata.namespace".into() }],
            ..Default::default()
        });
        s
    }

    /// 403 for a request the authorizer did not allow (kube
    /// `responsewriters.Forbidden` over `apierrors.NewForbidden`), the one
    /// place this wording lives:
    /// - `configmaps is forbidden: User "u" cannot list resource
    ///   "configmaps" in API group "" in the namespace "default"`;
    /// - `... at the cluster scope` without a namespace;
    /// - `cannot get resource "pods/log"` for a subresource;
    /// - `pods "x" is forbidden: ...` for a named object;
    /// - `forbidden: User "u" cannot get path "/x"` for a non-resource path;
    ///
    /// then `: <reason>` when the authorizer gave one.
    pub fn forbidden_request(req: &ForbiddenRequest<'_>, reason: &str) -> Self {
        let mut why = match req.path {
            None => {
                let res = if req.subresource.is_empty() { req.resource.to_string() } else { format!("{}/{}", req.resource, req.subresource) };
                let mut m = format!("User {:?} cannot {} resource {:?} in API group {:?}", req.user, req.verb, res, req.group);
                if req.namespace.is_empty() {
                    m.push_str(" at the cluster scope");
                } else {
                    m.push_str(&format!(" in the namespace {:?}", req.namespace));
                }
                m
            }
            Some(path) => format!("User {:?} cannot {} path {path:?}", req.user, req.verb),
        };
        if !reason.is_empty() {
            why.push_str(&format!(": {reason}"));
        }
        match req.path {
            None => Self::forbidden_because(req.group, req.resource, req.name, &why),
            Some(_) => Self::forbidden_because("", "", "", &why),
        }
    }

    /// 405 `the server does not allow this method on the requested resource`.
    pub fn method_not_allowed() -> Self {
        let mut s = Self::failure(405, reason::METHOD_NOT_ALLOWED, "the server does not allow this method on the requested resource", None);
        s.details = Some(Details::default());
        s
    }

    /// 405 for a verb a resource does not take at the moment (kube's
    /// `NewMethodNotSupported` with its message replaced, as the CRD
    /// handler does for a create while the CRD is terminating): details
    /// name the group and the resource.
    pub fn method_not_supported(group: &str, resource: &str, message: impl Into<String>) -> Self {
        Self::failure(405, reason::METHOD_NOT_ALLOWED, message, Some(Details { group: group.to_string(), kind: resource.to_string(), ..Details::default() }))
    }

    /// 415 for a body encoding we cannot decode, naming the media types
    /// the resource accepts (kube `negotiation.NewUnsupportedMediaTypeError`):
    /// `the body of the request was in an unknown format - accepted media
    /// types include: application/json, application/yaml`.
    pub fn unsupported_media_type(accepted: &[&str]) -> Self {
        Self::failure(415, reason::UNSUPPORTED_MEDIA_TYPE, format!("the body of the request was in an unknown format - accepted media types include: {}", accepted.join(", ")), None)
    }

    /// 406 for an `Accept` header naming nothing the server can produce
    /// (kube `negotiation.NewNotAcceptableError`).
    pub fn not_acceptable(accepted: &[&str]) -> Self {
        Self::failure(406, reason::NOT_ACCEPTABLE, format!("only the following media types are accepted: {}", accepted.join(", ")), None)
    }

    /// 413.
    pub fn too_large() -> Self {
        Self::failure(413, reason::REQUEST_ENTITY_TOO_LARGE, "Request entity too large: limit is 3145728", None)
    }

    /// 410 `Expired` (compacted resourceVersion or continue token).
    pub fn expired(message: impl Into<String>) -> Self {
        Self::failure(410, reason::EXPIRED, message, None)
    }

    /// 429 `TooManyRequests` with `retryAfterSeconds` (kube's
    /// `NewTooManyRequests`); the response carries a `Retry-After` header
    /// too, which client-go honours by retrying.
    pub fn too_many_requests(message: impl Into<String>, retry_after_seconds: i32) -> Self {
        Self::failure(429, reason::TOO_MANY_REQUESTS, message, Some(Details { retry_after_seconds: Some(retry_after_seconds), ..Default::default() }))
    }

    /// 504 `Timeout`.
    pub fn timeout(message: impl Into<String>) -> Self {
        Self::failure(504, reason::TIMEOUT, message, None)
    }

    /// 500 `ServerTimeout` (kube's `NewServerTimeout`): `operation` on the
    /// resource could not be done now, retry after `retry_after_seconds`
    /// (sent as `Retry-After`). kube answers it when etcd is unreachable.
    pub fn server_timeout(group: &str, resource: &str, operation: &str, retry_after_seconds: i32) -> Self {
        let qualified = if group.is_empty() { resource.to_string() } else { format!("{resource}.{group}") };
        Self::failure(
            500,
            reason::SERVER_TIMEOUT,
            format!("The {operation} operation against {qualified} could not be completed at this time, please try again."),
            Some(Details { name: operation.to_string(), group: group.to_string(), kind: resource.to_string(), retry_after_seconds: Some(retry_after_seconds), ..Default::default() }),
        )
    }

    /// 504 for a resourceVersion the server has not reached:
    /// `Too large resource version: <requested>, current: <current>`, cause
    /// `ResourceVersionTooLarge`, retry after 1 s (kube's cacher).
    pub fn too_large_resource_version(requested: i64, current: i64) -> Self {
        Self::too_large_rv_message(format!("Too large resource version: {requested}, current: {current}"))
    }

    /// The same 504 when the current revision is not known (the store
    /// answered "future revision"); `requested` is the request's
    /// resourceVersion as sent.
    pub fn too_large_resource_version_unknown(requested: &str) -> Self {
        Self::too_large_rv_message(format!("Too large resource version: {requested}, current: unknown"))
    }

    fn too_large_rv_message(message: String) -> Self {
        let mut s = Self::timeout(message);
        s.details = Some(Details {
            causes: vec![Cause { reason: "ResourceVersionTooLarge".into(), message: "Too large resource version".into(), field: String::new() }],
            retry_after_seconds: Some(1),
            ..Default::default()
        });
        s
    }

    /// 410 for a continue token whose revision was compacted, with kube's
    /// message; `inconsistent` is the token that continues at the latest
    /// revision instead, sent in `metadata.continue`.
    pub fn continue_expired(inconsistent: Option<String>) -> Self {
        let mut s = Self::expired(
            "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
        );
        if let Some(t) = inconsistent {
            s.metadata.insert("continue".into(), Value::String(t));
        }
        s
    }

    /// 500 `Internal error occurred: <msg>`.
    pub fn internal(message: impl std::fmt::Display) -> Self {
        let mut d = Details::default();
        d.causes.push(Cause { reason: String::new(), message: message.to_string(), field: String::new() });
        Self::failure(500, reason::INTERNAL_ERROR, format!("Internal error occurred: {message}"), Some(d))
    }

    /// Whether this is a 404 NotFound.
    pub fn is_not_found(&self) -> bool {
        self.reason == reason::NOT_FOUND
    }

    /// Whether this is a 409 Conflict.
    pub fn is_conflict(&self) -> bool {
        self.reason == reason::CONFLICT
    }

    /// Whether this is a 409 AlreadyExists.
    pub fn is_already_exists(&self) -> bool {
        self.reason == reason::ALREADY_EXISTS
    }

    /// The Status as a JSON value.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// kube-apiserver's optimistic-lock wording (`registry.OptimisticLockErrorMsg`).
pub const OPTIMISTIC_LOCK_MESSAGE: &str = "the object has been modified; please apply your changes to the latest version and try again";

/// Go's `%T` of a value decoded from JSON into `interface{}`.
pub fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float64",
        Value::Number(_) => "int64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// Roughly Go's `%v` of a value decoded from JSON into `interface{}`:
/// strings bare, `[a b]`, `map[k:v]`.
pub fn go_value(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::String(s) => s.clone(),
        Value::Array(a) => format!("[{}]", a.iter().map(go_value).collect::<Vec<_>>().join(" ")),
        Value::Object(m) => format!("map[{}]", m.iter().map(|(k, v)| format!("{k}:{}", go_value(v))).collect::<Vec<_>>().join(" ")),
        other => other.to_string(),
    }
}

/// Go's `strconv.Quote`: double quotes, `\"` `\\`, the C escapes, `\x`
/// for other control bytes and `\u` / `\U` for other runes that are not
/// printable ([`go_printable`]).
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if go_printable(c) => out.push(c),
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push('"');
    out
}

/// Go's `unicode.IsPrint`, near enough: no control or format characters,
/// no private use, and no space but the ASCII one.
pub fn go_printable(c: char) -> bool {
    let format = matches!(c, '\u{ad}' | '\u{600}'..='\u{605}' | '\u{61c}' | '\u{6dd}' | '\u{70f}' | '\u{180e}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{206f}' | '\u{feff}' | '\u{fff9}'..='\u{fffb}');
    let private_use = matches!(c, '\u{e000}'..='\u{f8ff}' | '\u{f0000}'..='\u{10ffff}');
    !c.is_control() && !format && !private_use && (c == ' ' || !c.is_whitespace())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// kube's `NewServerTimeout`, which client-go retries (a 5xx with
    /// `Retry-After`).
    #[test]
    fn server_timeout_is_kubes() {
        let v = Status::server_timeout("apps", "deployments", "create", 2).to_value();
        assert_eq!(v["code"], 500);
        assert_eq!(v["reason"], "ServerTimeout");
        assert_eq!(v["message"], "The create operation against deployments.apps could not be completed at this time, please try again.");
        assert_eq!(v["details"], serde_json::json!({"name": "create", "group": "apps", "kind": "deployments", "retryAfterSeconds": 2}));
    }

    /// The authorization filter's 403s, word for word as kube-apiserver's.
    #[test]
    fn forbidden_requests_read_as_kube() {
        let req = |verb, group, resource, subresource, namespace, name, path| ForbiddenRequest { user: "alice", verb, group, resource, subresource, namespace, name, path };
        let cases = [
            (req("list", "", "pods", "", "default", "", None), "", r#"pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace "default""#),
            (req("list", "", "nodes", "", "", "", None), "", r#"nodes is forbidden: User "alice" cannot list resource "nodes" in API group "" at the cluster scope"#),
            (req("get", "", "pods", "log", "default", "x", None), "", r#"pods "x" is forbidden: User "alice" cannot get resource "pods/log" in API group "" in the namespace "default""#),
            (
                req("create", "apps", "deployments", "", "default", "", None),
                "RBAC: role.rbac.authorization.k8s.io \"r\" not found",
                r#"deployments.apps is forbidden: User "alice" cannot create resource "deployments" in API group "apps" in the namespace "default": RBAC: role.rbac.authorization.k8s.io "r" not found"#,
            ),
            (req("get", "", "", "", "", "", Some("/metrics")), "", r#"forbidden: User "alice" cannot get path "/metrics""#),
        ];
        for (r, reason, want) in cases {
            let v = Status::forbidden_request(&r, reason).to_value();
            assert_eq!((v["code"].as_i64(), v["reason"].as_str(), v["message"].as_str()), (Some(403), Some("Forbidden"), Some(want)));
        }
    }

    #[test]
    fn messages_match_kube() {
        let mut cases = vec![
            (Status::not_found("", "configmaps", "x"), 404, "configmaps \"x\" not found"),
            (Status::not_found("apps", "deployments", "x"), 404, "deployments.apps \"x\" not found"),
            (Status::already_exists("", "configmaps", "x"), 409, "configmaps \"x\" already exists"),
            (
                Status::optimistic_lock("", "configmaps", "x"),
                409,
                "Operation cannot be fulfilled on configmaps \"x\": the object has been modified; please apply your changes to the latest version and try again",
            ),
            (Status::unauthorized(), 401, "Unauthorized"),
            (
                Status::invalid("", "ConfigMap", "X", vec![Cause::invalid("metadata.name", &Value::String("X".into()), "a lowercase RFC 1123 subdomain")]),
                422,
                "ConfigMap \"X\" is invalid: metadata.name: Invalid value: \"X\": a lowercase RFC 1123 subdomain",
            ),
        ];
        cases.push((
            Status::strict_decoding("ConfigMap", "v1", &["unknown field \"x\"".into(), "unknown field \"metadata.y\"".into()]),
            400,
            "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: unknown field \"x\", unknown field \"metadata.y\"",
        ));
        cases.push((Status::not_acceptable(&["application/json", "application/yaml"]), 406, "only the following media types are accepted: application/json, application/yaml"));
        cases.push((
            Status::unsupported_media_type(&["application/json", "application/yaml"]),
            415,
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml",
        ));
        cases.push((Status::invalid("", "Secret", "s", vec![Cause::too_long("data", 1048576)]), 422, "Secret \"s\" is invalid: data: Too long: may not be more than 1048576 bytes"));
        let twice = vec![Cause::required("spec.a", ""), Cause::required("spec.a", ""), Cause::required("spec.b", "")];
        cases.push((Status::invalid("g.io", "K", "k", twice), 422, "K.g.io \"k\" is invalid: [spec.a: Required value, spec.b: Required value]"));
        for (s, code, msg) in cases {
            assert_eq!(s.code, code);
            assert_eq!(s.message, msg);
        }
        let v = Status::unauthorized().to_value();
        assert_eq!(v, serde_json::json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}));
        let c = serde_json::to_value(Cause::required("metadata.name", "")).unwrap_or_default();
        assert_eq!(c["reason"], "FieldValueRequired");
    }
}
