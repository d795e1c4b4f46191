//! Request handlers, one file per verb (kube `endpoints/handlers`), and the
//! router that picks one from the [`RequestInfo`].

pub mod create;
pub mod delete;
pub mod discovery;
pub mod get;
pub mod list;
pub mod openapi;
pub mod patch;
pub mod update;
pub mod watch;

use std::sync::Arc;

use serde_json::Value;

use super::filters::request_info::RequestInfo;
use super::negotiation::{self, IncludeObject, Output};
use super::{responses, ApiState, BoxFuture, Handler, Request, Response};
use crate::authn::UserInfo;
use crate::errors::Status;
use crate::registry::rest::{self, Context, Rest, WriteOptions};
use crate::registry::{Entry, Resource};
use crate::warning::Warnings;

/// Largest request body accepted (kube's `MaxRequestBodyBytes`, 3 MiB).
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// How much of an over-limit body is read and dropped before answering 413,
/// so that HTTP/2 clients get the Status instead of a reset stream.
const DRAIN_BYTES: usize = 64 * 1024 * 1024;

/// Parsed query parameters (first value of each key wins).
#[derive(Debug, Clone, Default)]
pub struct Query(Vec<(String, String)>);

impl Query {
    /// Parses a raw query string.
    pub fn parse(q: Option<&str>) -> Self {
        Query(q.map(|q| url::form_urlencoded::parse(q.as_bytes()).into_owned().collect()).unwrap_or_default())
    }

    /// A parameter's value.
    pub fn get(&self, k: &str) -> Option<&str> {
        self.0.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str())
    }

    /// Every value of a repeated parameter, in order.
    pub fn all(&self, k: &str) -> Vec<&str> {
        self.0.iter().filter(|(key, _)| key == k).map(|(_, v)| v.as_str()).collect()
    }

    /// A boolean parameter as kube's `Convert_Slice_string_To_bool` reads
    /// it: absent, `0` and `false` (any case) are false; any other value,
    /// including the empty string, is true.
    pub fn flag(&self, k: &str) -> bool {
        self.get(k).is_some_and(|v| v != "0" && !v.eq_ignore_ascii_case("false"))
    }

    /// `fieldValidation` (unset or empty is `Warn`).
    ///
    /// # Errors
    /// 422 Invalid on `options_kind` (`CreateOptions`...) of `meta.k8s.io`
    /// for other values, as kube's `ValidateFieldValidation`.
    pub fn field_validation(&self, options_kind: &str) -> Result<crate::openapi::fields::FieldValidation, Status> {
        let value = self.get("fieldValidation").filter(|v| !v.is_empty());
        crate::openapi::fields::FieldValidation::parse(value).map_err(|v| {
            let cause = crate::errors::Cause::not_supported("fieldValidation", &format!("{v:?}"), &["", "Ignore", "Strict", "Warn"]);
            Status::invalid("meta.k8s.io", options_kind, "", vec![cause])
        })
    }

    /// `dryRun=All` (repeating `All` is allowed).
    ///
    /// # Errors
    /// 422 Invalid on `options_kind` (`CreateOptions`...) of `meta.k8s.io`
    /// for other values, as kube's `ValidateDryRun`.
    pub fn dry_run(&self, options_kind: &str) -> Result<bool, Status> {
        let vals: Vec<&str> = self.0.iter().filter(|(k, _)| k == "dryRun").map(|(_, v)| v.as_str()).collect();
        if vals.iter().all(|v| *v == "All") {
            return Ok(!vals.is_empty());
        }
        let go: Vec<String> = vals.iter().map(|v| format!("{v:?}")).collect();
        let cause = crate::errors::Cause::not_supported("dryRun", &format!("[]string{{{}}}", go.join(", ")), &["All"]);
        Err(Status::invalid("meta.k8s.io", options_kind, "", vec![cause]))
    }
}

/// Everything a resource handler needs about its request.
pub struct Scope {
    /// Shared state.
    pub state: Arc<ApiState>,
    /// The served resource.
    pub entry: Arc<Entry>,
    /// The REST object of the resource or subresource addressed.
    pub rest: Arc<dyn Rest>,
    /// Resolved request info.
    pub info: RequestInfo,
    /// The user.
    pub user: UserInfo,
    /// Query parameters.
    pub query: Query,
    /// Requested output form.
    pub output: Output,
    /// `includeObject` for Tables.
    pub include: IncludeObject,
    /// The request.
    pub req: Request,
    /// Warnings for the client, sent as `Warning: 299 - "<text>"` headers.
    pub warnings: Warnings,
}

/// Writes `warnings` as `Warning` headers (RFC 7234, code 299, agent `-`,
/// the text quoted with `"` and `\` escaped).
fn write_warnings(warnings: &Warnings, resp: &mut Response) {
    for text in warnings.texts() {
        let escaped = text.replace('\\', "\\\\").replace('"', "\\\"");
        if let Ok(v) = http::HeaderValue::from_str(&format!("299 - \"{escaped}\"")) {
            resp.headers_mut().append(http::header::WARNING, v);
        }
    }
}

impl Scope {
    /// The resource.
    pub fn resource(&self) -> &Arc<Resource> {
        &self.entry.resource
    }

    /// The registry context of the request.
    pub fn context(&self) -> Context<'_> {
        let user_agent = self.req.headers().get(http::header::USER_AGENT).and_then(|v| v.to_str().ok());
        Context {
            namespace: &self.info.namespace,
            user: &self.user,
            user_agent,
            warnings: &self.warnings,
            audit: crate::audit::AuditContext::of(self.req.extensions()).map(|a| &**a as &dyn crate::admission::AuditAnnotations),
        }
    }

    /// The options of a create, update or patch from the query: `dryRun`,
    /// `fieldManager` (checked by the store) and `fieldValidation`.
    ///
    /// # Errors
    /// 422 Invalid on the options kind for a bad `dryRun` or
    /// `fieldValidation`.
    pub fn write_options(&self) -> Result<WriteOptions, Status> {
        let kind = self.options_kind();
        let dry_run = self.query.dry_run(kind)?;
        let field_validation = self.query.field_validation(kind)?;
        let force = kind == "PatchOptions" && self.query.flag("force");
        Ok(WriteOptions { kind, dry_run, field_manager: self.query.get("fieldManager").map(String::from), field_validation, force })
    }

    /// Reads the request body as a JSON value, and records it for the
    /// audit log (kube `LogRequestObject`).
    ///
    /// # Errors
    /// 413 for bodies over 3 MiB, 415 for encodings other than JSON, YAML and
    /// the protobuf kinds of [`crate::protobuf`], 400 for malformed bodies.
    pub async fn body_json(&mut self) -> Result<Value, Status> {
        let v = self.decode_body().await?;
        if let Some(audit) = crate::audit::AuditContext::of(self.req.extensions()) {
            audit.log_request_object(&v);
        }
        Ok(v)
    }

    async fn decode_body(&mut self) -> Result<Value, Status> {
        let ct = self.req.headers().get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("application/json").to_string();
        let mime = ct.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
        let bytes = self.body_bytes().await?;
        if mime == crate::protobuf::MEDIA_TYPE {
            return crate::protobuf::decode(&bytes);
        }
        if mime == "application/yaml" {
            // YAML is converted once to JSON and then decoded like a JSON
            // body, so field validation sees the same input either way.
            // kube-apiserver converts with sigs.k8s.io/yaml (go-yaml v2, YAML
            // 1.1 scalars): plain `yes`/`on`/`off`/`y`/`n` are booleans
            // (serde-saphyr's default too) and `010` is octal 8.
            // Nesting as deep as a JSON body may nest (the parser's default
            // budget stops at 64).
            let options = serde_saphyr::options! { legacy_octal_numbers: true, budget: serde_saphyr::budget! { max_depth: 128 } };
            let v: Value = serde_saphyr::from_slice_with_options(&bytes, options).map_err(|e| Status::bad_request(format!("error converting YAML to JSON: {e}")))?;
            let json = serde_json::to_vec(&v).map_err(|e| Status::bad_request(format!("error converting YAML to JSON: {e}")))?;
            return self.decode_json(&json);
        }
        if !(mime.is_empty() || mime == "application/json" || mime.ends_with("+json") || mime == "*/*") {
            return Err(Status::unsupported_media_type(negotiation::MEDIA_TYPES));
        }
        self.decode_json(&bytes)
    }

    /// Decodes a JSON body. Keys given twice in one object keep their last
    /// value and are reported per `fieldValidation`, as kube's strict
    /// decoder does (`duplicate field "<path>"`).
    ///
    /// # Errors
    /// 400 for malformed JSON, and for duplicates under Strict.
    pub fn decode_json(&self, bytes: &[u8]) -> Result<Value, Status> {
        let v = serde_json::from_slice(bytes).map_err(|e| Status::bad_request(format!("the body of the request could not be decoded as JSON: {e}")))?;
        let directive = self.query.field_validation(self.options_kind())?;
        if directive != crate::openapi::fields::FieldValidation::Ignore {
            let dups = crate::openapi::fields::duplicate_fields(bytes).iter().map(|p| format!("duplicate field {p:?}")).collect();
            crate::registry::store::report_field_errors(self.resource(), directive, &self.warnings, dups)?;
        }
        Ok(v)
    }

    /// The options type of this request's verb, named in 422s about its query
    /// parameters: `CreateOptions`, `PatchOptions`, `DeleteOptions` or
    /// `UpdateOptions`.
    pub fn options_kind(&self) -> &'static str {
        match self.info.verb.as_str() {
            "create" => "CreateOptions",
            "patch" => "PatchOptions",
            "delete" | "deletecollection" => "DeleteOptions",
            _ => "UpdateOptions",
        }
    }

    /// Reads the raw request body.
    ///
    /// # Errors
    /// 413 over [`MAX_BODY_BYTES`]; 400 if the body cannot be read.
    pub async fn body_bytes(&mut self) -> Result<bytes::Bytes, Status> {
        let body = std::mem::replace(self.req.body_mut(), responses::full(bytes::Bytes::new()));
        read_body(body).await
    }

    /// A single object in the requested form (plain JSON for REST objects
    /// whose responses are not negotiated, such as a Scale).
    pub fn respond_object(&self, code: u16, obj: Value) -> Response {
        if !self.rest.negotiated() {
            return responses::json(code, &obj);
        }
        responses::json(code, &negotiation::transform_object(self.output, self.resource(), obj, self.include))
    }
}

/// Reads a request body of at most [`MAX_BODY_BYTES`]. An over-limit body
/// is read on (up to `DRAIN_BYTES`) and dropped, so an HTTP/2 client still
/// gets the 413 rather than a reset stream.
///
/// # Errors
/// 413 over the limit; 400 if the body cannot be read.
async fn read_body(mut body: crate::endpoints::Body) -> Result<bytes::Bytes, Status> {
    use http_body_util::BodyExt as _;
    let mut buf = bytes::BytesMut::new();
    let mut seen = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| Status::bad_request(format!("unable to read the request body: {e}")))?;
        let Ok(data) = frame.into_data() else { continue };
        seen = seen.saturating_add(data.len());
        if seen <= MAX_BODY_BYTES {
            buf.extend_from_slice(&data);
        } else if seen > DRAIN_BYTES {
            break;
        }
    }
    if seen > MAX_BODY_BYTES {
        return Err(Status::too_large());
    }
    Ok(buf.freeze())
}

/// Answers `status` to a request refused before its handler ran, first
/// reading (and dropping) its body: an HTTP/2 stream whose
/// body the server never read is reset, and clients such as curl then
/// report a framing error instead of the Status.
async fn reject(req: Request, status: Status) -> Response {
    let _ = read_body(req.into_body()).await;
    responses::status(&status)
}

/// The final handler: routes by request info.
pub struct Router {
    state: Arc<ApiState>,
}

impl Router {
    /// A router over the shared state.
    pub fn new(state: Arc<ApiState>) -> Self {
        Router { state }
    }

    async fn route(&self, req: Request) -> Response {
        let info = req.extensions().get::<RequestInfo>().cloned().unwrap_or_default();
        if !info.is_resource_request {
            return discovery::non_resource(&self.state, &req, &info).await;
        }
        let Some(entry) = self.state.registry.entry(&info.api_group, &info.api_version, &info.resource) else {
            return reject(req, Status::resource_not_found()).await;
        };
        // Scope checks: a namespaced resource is addressed within a namespace
        // (except list/watch across all namespaces), a cluster-scoped one
        // never (a namespace's own path names it, not a scope).
        let resource = &entry.resource;
        let cross_namespace = matches!(info.verb.as_str(), "list" | "watch");
        if resource.namespaced && info.namespace.is_empty() && !cross_namespace {
            return reject(req, Status::resource_not_found()).await;
        }
        if !resource.namespaced && info.namespace_scoped {
            return reject(req, Status::resource_not_found()).await;
        }
        let Some(rest) = entry.rest(&info.subresource).cloned() else {
            return reject(req, Status::resource_not_found()).await;
        };
        // POST names no object; PUT and PATCH always do (kube registers no
        // collection route for them, so its router answers 405).
        let on_collection = info.name.is_empty() && matches!(info.verb.as_str(), "update" | "patch");
        // POST to a named object only for a named creater (a subresource
        // such as a service account's `token`), and the other way round.
        let create_mismatch = info.verb == "create" && (info.name.is_empty() == rest.creater().is_none());
        if !rest::supports(rest.as_ref(), &info.verb) || create_mismatch || on_collection {
            return reject(req, Status::method_not_allowed()).await;
        }
        let query = Query::parse(req.uri().query());
        let accept = req.headers().get(http::header::ACCEPT).and_then(|v| v.to_str().ok());
        if let Err(s) = negotiation::check_accept(accept) {
            return reject(req, s).await;
        }
        let output = negotiation::output(accept);
        if output == negotiation::Output::Table {
            if let Err(s) = IncludeObject::validate(query.get("includeObject")) {
                return reject(req, s).await;
            }
        }
        let include = IncludeObject::parse(query.get("includeObject"));
        let user = req.extensions().get::<UserInfo>().cloned().unwrap_or_default();
        let warnings = Warnings::default();
        let scope = Scope { state: self.state.clone(), entry, rest, info, user, query, output, include, req, warnings: warnings.clone() };
        let r = match scope.info.verb.as_str() {
            "get" => get::handle(scope).await,
            "list" => list::handle(scope).await,
            "watch" => watch::handle(scope).await,
            "create" => create::handle(scope).await,
            "update" => update::handle(scope).await,
            "patch" => patch::handle(scope).await,
            "delete" => delete::handle(scope).await,
            "deletecollection" => delete::collection(scope).await,
            _ => Err(Status::method_not_allowed()),
        };
        let mut resp = responses::from_result(r);
        write_warnings(&warnings, &mut resp);
        resp
    }
}

impl Handler for Router {
    fn call(&self, req: Request) -> BoxFuture<'_, Response> {
        let accept = req.headers().get(http::header::ACCEPT).and_then(|v| v.to_str().ok()).map(str::to_string);
        let watch = req.extensions().get::<RequestInfo>().is_some_and(|i| i.verb == "watch");
        Box::pin(async move {
            let resp = self.route(req).await;
            // Watch streams stay JSON (kube streams YAML watches as JSON too
            // for kubectl); everything else is re-encoded when YAML is asked.
            if !watch && responses::wants_yaml(accept.as_deref()) {
                responses::to_yaml(resp).await
            } else {
                resp
            }
        })
    }
}
