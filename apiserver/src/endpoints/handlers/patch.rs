//! PATCH (kube `handlers/patch.go`): JSON patch (RFC 6902), JSON merge
//! patch (RFC 7386) and strategic merge patch, applied to the current object
//! inside a guaranteed update, so a lost race re-applies the patch. A patch
//! carrying a stale `metadata.resourceVersion` gets 409 Conflict.
//!
//! Server-side apply (`application/apply-patch+yaml`, a YAML or JSON body)
//! is handed to the store as an apply configuration: the store merges it
//! and tracks its fields ([`crate::fieldmanager::apply`]), and creates the
//! object when it is missing (201).

use async_trait::async_trait;
use serde_json::Value;

use super::Scope;
use crate::endpoints::Response;
use crate::errors::{Cause, Status};
use crate::registry::rest::UpdatedObjectInfo;
use crate::strategicpatch::PatchMeta;

/// The patch types kube accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PatchType {
    Json,
    Merge,
    Strategic,
    Apply,
}

fn apply_patch(t: PatchType, doc: &Value, patch: &Value, meta: PatchMeta<'_>) -> Result<Value, Status> {
    let invalid = |msg: String| Status::invalid("", "", "", vec![Cause::invalid("patch", &Value::String(patch.to_string()), &msg)]);
    match t {
        PatchType::Json => {
            // kube: a body that is not a list of operations is a 400
            // (`jsonpatch.DecodePatch`); an operation that cannot be applied
            // (unknown op, missing path, failed test) is kube's generic 422
            // from `NewGenericServerResponse`, whose message does not carry
            // the detail.
            let Some(ops) = patch.as_array() else {
                let got = if patch.is_object() { "object" } else { "value" };
                return Err(Status::bad_request(format!("json: cannot unmarshal {got} into Go value of type jsonpatch.Patch")));
            };
            let failed = |e: &dyn std::fmt::Display| {
                tracing::debug!("JSON patch not applied: {e}");
                Status::failure(422, crate::errors::reason::INVALID, "the server rejected our request due to an error in our request", Some(crate::errors::Details::default()))
            };
            let p: json_patch::Patch = serde_json::from_value(Value::Array(ops.clone())).map_err(|e| failed(&e))?;
            let mut out = doc.clone();
            json_patch::patch(&mut out, &p).map_err(|e| failed(&e))?;
            Ok(out)
        }
        PatchType::Merge => {
            if !patch.is_object() {
                return Err(Status::bad_request("the server rejected our request due to an error in our request: merge patch must be a JSON object"));
            }
            let mut out = doc.clone();
            json_patch::merge(&mut out, patch);
            Ok(out)
        }
        PatchType::Strategic => crate::strategicpatch::apply(doc, patch, meta).map_err(invalid),
        // The store merges apply configurations itself
        // (`UpdatedObjectInfo::apply_config`); a REST object that asks
        // for the patched object instead cannot apply.
        PatchType::Apply => Err(Status::unsupported_media_type(&["application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json"])),
    }
}

/// Handles `patch`.
///
/// # Errors
/// 415 for unsupported patch types (server-side apply comes later), 400 for
/// malformed patches, 404, 409, 422.
pub async fn handle(mut scope: Scope) -> Result<Response, Status> {
    // Read first: an HTTP/2 stream answered before its body was read is
    // reset, and some clients then lose the Status.
    let bytes = scope.body_bytes().await?;
    let ct = scope.req.headers().get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").split(';').next().unwrap_or("").trim().to_string();
    let kind = scope.rest.kind();
    let schema = scope.state.schemas.of_kind(&kind.group, &kind.version, &kind.kind);
    // Custom resources have no patch strategies: kube refuses strategic
    // merge patches for them.
    let custom = schema.as_ref().is_some_and(|s| s.origin() == crate::schema::Origin::Custom);
    let accepted: &[&str] = if custom {
        &["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"]
    } else {
        &["application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json", "application/apply-patch+yaml"]
    };
    let t = match ct.as_str() {
        "application/json-patch+json" => PatchType::Json,
        "application/merge-patch+json" => PatchType::Merge,
        "application/strategic-merge-patch+json" if !custom => PatchType::Strategic,
        "application/apply-patch+yaml" => PatchType::Apply,
        _ => return Err(Status::unsupported_media_type(accepted)),
    };
    let opts = scope.write_options()?;
    check_patch_options(&scope, t, &opts)?;
    let (patch, duplicates) = if t == PatchType::Apply { decode_apply_configuration(&bytes, opts.field_validation)? } else { (scope.decode_json(&bytes)?, Vec::new()) };
    if let Some(audit) = crate::audit::AuditContext::of(scope.req.extensions()) {
        audit.log_request_patch(&patch);
    }
    let info = Patch { kind: t, patch, schema, duplicates };
    let updater = scope.rest.updater().ok_or_else(Status::method_not_allowed)?;
    let (obj, created) = updater.update(&scope.context(), &scope.info.name, &info, &opts).await?;
    Ok(scope.respond_object(if created { 201 } else { 200 }, obj))
}

/// kube's `ValidatePatchOptions` of what depends on the patch type: `force`
/// only with apply, `fieldManager` required with it.
///
/// # Errors
/// 422 Invalid on `PatchOptions.meta.k8s.io`.
fn check_patch_options(scope: &Scope, t: PatchType, opts: &crate::registry::rest::WriteOptions) -> Result<(), Status> {
    let cause = if t == PatchType::Apply {
        if opts.field_manager.as_deref().is_some_and(|m| !m.is_empty()) {
            return Ok(());
        }
        Cause::required("fieldManager", "is required for apply patch")
    } else if scope.query.get("force").is_some() {
        Cause::forbidden("force", "may not be specified for non-apply patch")
    } else {
        return Ok(());
    };
    Err(Status::invalid("meta.k8s.io", "PatchOptions", "", vec![cause]))
}

/// An apply configuration: YAML (JSON is YAML too) holding one object,
/// and the keys it repeats ([`crate::openapi::fields::yaml_duplicate_keys`];
/// not searched under `fieldValidation=Ignore`).
/// A repeated key keeps its last value, as kube's first, lenient decoding
/// does.
///
/// # Errors
/// 400 `error decoding YAML: …`, as kube's apply patcher.
fn decode_apply_configuration(bytes: &[u8], directive: crate::registry::rest::FieldValidation) -> Result<(Value, Vec<String>), Status> {
    let bad = |e: &dyn std::fmt::Display| Status::bad_request(format!("error decoding YAML: {e}"));
    let options = serde_saphyr::options! {
        legacy_octal_numbers: true,
        duplicate_keys: serde_saphyr::DuplicateKeyPolicy::LastWins,
        budget: serde_saphyr::budget! { max_depth: 128 },
    };
    let v: Value = serde_saphyr::from_slice_with_options(bytes, options).map_err(|e| bad(&e))?;
    // A second pass over the text, needed only when they are reported.
    let wanted = directive != crate::registry::rest::FieldValidation::Ignore;
    let duplicates = if wanted { std::str::from_utf8(bytes).map(crate::openapi::fields::yaml_duplicate_keys).unwrap_or_default() } else { Vec::new() };
    match v {
        Value::Object(_) => Ok((v, duplicates)),
        // An empty document decodes as an empty object in kube.
        Value::Null => Ok((Value::Object(serde_json::Map::new()), duplicates)),
        other => {
            // Go's `UnmarshalTypeError` names the JSON type it met.
            let got = match other {
                Value::Array(_) => "array",
                Value::Number(_) => "number",
                Value::Bool(_) => "bool",
                _ => "string",
            };
            Err(bad(&format!("error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {got} into Go value of type map[string]interface {{}}")))
        }
    }
}

/// A patch as an update: the current object with the patch applied, on
/// every try of the guaranteed update.
struct Patch {
    kind: PatchType,
    patch: Value,
    /// The schema of the patched kind (list merge keys and strategies).
    schema: Option<crate::schema::Schema>,
    /// An apply configuration's repeated keys.
    duplicates: Vec<String>,
}

#[async_trait]
impl UpdatedObjectInfo for Patch {
    async fn updated_object(&self, current: Option<&Value>) -> Result<Value, Status> {
        let Some(current) = current else { return Err(Status::internal("a patch without its object")) };
        apply_patch(self.kind, current, &self.patch, PatchMeta::of(self.schema.as_ref()))
    }

    fn may_create(&self) -> bool {
        // kube's apply creates a missing object; the other patches 404.
        self.kind == PatchType::Apply
    }

    fn apply_config(&self) -> Option<&Value> {
        (self.kind == PatchType::Apply).then_some(&self.patch)
    }

    fn apply_duplicates(&self) -> &[String] {
        &self.duplicates
    }
}
